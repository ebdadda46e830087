//! When a pre- or postsubmit runs and what it reports: its trigger and rerun
//! command, its branch and change regexes (Prow's `SetPresubmitRegexes`), Prow's
//! triggering rules (`always_run`, `run_if_changed` and `skip_if_only_changed` are
//! exclusive) and reporting rules (a reporting job needs a context).

use regex::Regex;

use crate::defaults::{default_rerun_command, default_trigger};
use crate::diag::Diagnostic;
use crate::model::{Postsubmit, Presubmit};
use crate::names::{join_alternatives, regex_error, short_regex_error};
use crate::types::JobBase;

use super::ctx::err_at;

/// Prow's `SetPresubmitRegexes` checks.
pub(super) fn presubmit_regexes(job: &Presubmit) -> Vec<Diagnostic> {
    let name = &job.base.name;
    let k = &job.kind;
    let mut d = Vec::new();
    // The default trigger always matches the default rerun command: skip compiling it.
    if !(k.trigger == default_trigger(name) && k.rerun_command == default_rerun_command(name)) {
        match Regex::new(&k.trigger) {
            Err(e) => d.push(err_at(
                job,
                "trigger",
                format!(
                    "could not compile trigger regex for {name}: {}",
                    short_regex_error(&e)
                ),
            )),
            Ok(re) => {
                if !re.is_match(&k.rerun_command) {
                    d.push(err_at(
                        job,
                        "rerun_command",
                        format!(
                            "for job {name}, rerun command \"{}\" does not match trigger \"{}\"",
                            k.rerun_command, k.trigger
                        ),
                    ));
                }
            }
        }
    }
    for (field, pattern) in [
        ("branches", join_alternatives(&k.branches)),
        ("skip_branches", join_alternatives(&k.skip_branches)),
    ] {
        if let Some(e) = regex_error(pattern.as_deref()) {
            d.push(err_at(job, field, format!("could not set branch regexes for {name}: could not compile {} branch regex: {e}", if field == "branches" { "positive" } else { "negative" })));
        }
    }
    let change = k
        .run_if_changed
        .as_deref()
        .map(|p| ("run_if_changed", p))
        .or(k
            .skip_if_only_changed
            .as_deref()
            .map(|p| ("skip_if_only_changed", p)));
    if let Some((field, p)) = change {
        if let Some(e) = regex_error(Some(p)) {
            d.push(err_at(
                job,
                field,
                format!(
                    "could not set change regexes for {name}: could not compile {field} regex: {e}"
                ),
            ));
        }
    }
    d
}

/// A postsubmit's branch and change regexes.
pub(super) fn postsubmit_regexes(job: &Postsubmit, d: &mut Vec<Diagnostic>) {
    let name = &job.base.name;
    for (field, pattern) in [
        ("branches", join_alternatives(&job.kind.branches)),
        ("skip_branches", join_alternatives(&job.kind.skip_branches)),
    ] {
        if let Some(e) = regex_error(pattern.as_deref()) {
            d.push(err_at(job, field, format!("could not set branch regexes for {name}: could not compile {} branch regex: {e}", if field == "branches" { "positive" } else { "negative" })));
        }
    }
    for (field, pattern) in [
        ("run_if_changed", job.kind.run_if_changed.as_deref()),
        (
            "skip_if_only_changed",
            job.kind.skip_if_only_changed.as_deref(),
        ),
    ] {
        if let Some(e) = regex_error(pattern) {
            d.push(err_at(
                job,
                field,
                format!(
                    "could not set change regexes for {name}: could not compile {field} regex: {e}"
                ),
            ));
        }
    }
}

/// A presubmit's triggering, trigger/rerun-command and reporting rules.
pub(super) fn check_presubmit(job: &Presubmit, d: &mut Vec<Diagnostic>) {
    let name = &job.base.name;
    let k = &job.kind;
    if let Some(e) = triggering_error(
        name,
        k.always_run,
        k.run_if_changed.as_deref(),
        k.skip_if_only_changed.as_deref(),
    ) {
        d.push(err_at(job, "always_run", e));
    }
    if (k.trigger.is_empty()) != (k.rerun_command.is_empty()) {
        d.push(err_at(
            job,
            "trigger",
            format!("either both of job.Trigger and job.RerunCommand must be set, wasnt the case for job {name:?}"),
        ));
    }
    if let Some(e) = reporting_error(&job.base, k.skip_report, &k.context) {
        d.push(err_at(job, "skip_report", e));
    }
}

/// A postsubmit's triggering and reporting rules.
pub(super) fn check_postsubmit(job: &Postsubmit, d: &mut Vec<Diagnostic>) {
    let k = &job.kind;
    if let Some(e) = triggering_error(
        &job.base.name,
        k.always_run == Some(true),
        k.run_if_changed.as_deref(),
        k.skip_if_only_changed.as_deref(),
    ) {
        d.push(err_at(job, "always_run", e));
    }
    if let Some(e) = reporting_error(&job.base, k.skip_report, &k.context) {
        d.push(err_at(job, "skip_report", e));
    }
}

/// Prow's `validateTriggering` / `validateAlwaysRun` exclusivity rules.
fn triggering_error(
    name: &str,
    always_run: bool,
    run_if_changed: Option<&str>,
    skip_if_only_changed: Option<&str>,
) -> Option<String> {
    let ric = run_if_changed.is_some_and(|s| !s.is_empty());
    let sioc = skip_if_only_changed.is_some_and(|s| !s.is_empty());
    if always_run && ric {
        return Some(format!("job {name} is set to always run but also declares run_if_changed targets, which are mutually exclusive"));
    }
    if always_run && sioc {
        return Some(format!("job {name} is set to always run but also declares skip_if_only_changed targets, which are mutually exclusive"));
    }
    if ric && sioc {
        return Some(format!("job {name} declares run_if_changed and skip_if_only_changed, which are mutually exclusive"));
    }
    None
}

/// Prow's `validateReporting`.
fn reporting_error(base: &JobBase, skip_report: bool, context: &str) -> Option<String> {
    if !skip_report && context.is_empty() {
        return Some("job is set to report but has no context configured".into());
    }
    if skip_report {
        if let Some((label, _)) = base
            .labels
            .iter()
            .find(|(k, v)| k.as_str() == "prow.k8s.io/gerrit-report-label" && !v.is_empty())
        {
            return Some(format!("gerrit report label {label} set to non-empty string but job is configured to skip reporting."));
        }
    }
    None
}
