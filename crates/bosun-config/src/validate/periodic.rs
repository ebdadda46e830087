//! Periodics: `cron`, `interval` and `minimum_interval` (exactly one), Go
//! durations (`interval`, `minimum_interval`, `retry.interval`,
//! `starting_deadline`, `jitter`), `retry.attempts`, the clone fields periodics
//! ignore, and the schedule engine's findings through the [`ScheduleCheck`] hook.

use crate::diag::{Diagnostic, Severity};
use crate::duration::{GoDuration, DURATION_HINT};
use crate::model::Periodic;

use super::ctx::{err_at, warn_at};
use super::schedule::ScheduleCheck;

/// A periodic's schedule (exactly one of `cron`, `interval` and
/// `minimum_interval`, checked by the schedule engine), durations and retries, and
/// checkconfig's warning about clone fields.
pub(super) fn check(schedule: Option<&dyn ScheduleCheck>, job: &Periodic, d: &mut Vec<Diagnostic>) {
    let name = &job.base.name;
    let k = &job.kind;
    let set = [&k.cron, &k.interval, &k.minimum_interval]
        .iter()
        .filter(|s| s.as_deref().is_some_and(|s| !s.is_empty()))
        .count();
    if set > 1 {
        d.push(err_at(
            job,
            "cron",
            format!(
                "cron, interval, and minimum_interval are mutually exclusive in periodic {name}"
            ),
        ));
    } else if set == 0 {
        d.push(
            err_at(
                job,
                "",
                format!("at least one of cron, interval, or minimum_interval must be set in periodic {name}"),
            )
            .hint("add e.g. `interval: 1h` or `cron: \"0 * * * *\"`"),
        );
    } else {
        if let Some(interval) = k.interval.as_deref().filter(|s| !s.is_empty()) {
            if let Err(e) = GoDuration::parse(interval) {
                d.push(
                    err_at(
                        job,
                        "interval",
                        format!("cannot parse duration for {name}: {e}"),
                    )
                    .hint(DURATION_HINT),
                );
            }
        }
        if let Some(retry) = &k.retry {
            if let Some(Err(e)) = retry.interval.as_deref().map(GoDuration::parse) {
                d.push(
                    err_at(
                        job,
                        "retry.interval",
                        format!("cannot parse Retry duration for {name}: {e}"),
                    )
                    .hint(DURATION_HINT),
                );
            }
        }
        if let Some(mi) = k.minimum_interval.as_deref().filter(|s| !s.is_empty()) {
            if let Err(e) = GoDuration::parse(mi) {
                d.push(
                    err_at(
                        job,
                        "minimum_interval",
                        format!("cannot parse duration for {name}: {e}"),
                    )
                    .hint(DURATION_HINT),
                );
            }
        }
    }
    if let Some(retry) = &k.retry {
        if retry.attempts < 0 {
            d.push(err_at(
                job,
                "retry.attempts",
                format!(
                    "retry.attempts {} must be a non-negative number",
                    retry.attempts
                ),
            ));
        } else if retry.attempts > 10 {
            d.push(warn_at(
                job,
                "retry.attempts",
                format!("retry.attempts {} is capped at 10", retry.attempts),
            ));
        }
    }
    for (field, value) in [
        ("starting_deadline", &k.starting_deadline),
        ("jitter", &k.jitter),
    ] {
        if let Some(v) = value {
            match GoDuration::parse(v) {
                Err(e) => d.push(err_at(job, field, format!("{field}: {e}")).hint(DURATION_HINT)),
                Ok(dur) if dur.as_nanos() < 0 => {
                    d.push(err_at(job, field, format!("{field}: must not be negative")))
                }
                Ok(_) => {}
            }
        }
    }
    if job.base.clone_depth != 0 || job.base.clone_uri.is_some() || job.base.path_alias.is_some() {
        d.push(warn_at(job, "", format!("periodic jobs might clone 0, 1, or more repos, top level `clone_depth`, `clone_uri`, and `path_alias` don't have any effect. Name: {name:?}")));
    }
    if set == 1 {
        if let Some(check) = schedule {
            for p in check.check(job) {
                let mut diag = match p.severity {
                    Severity::Error => err_at(job, p.field, p.message),
                    Severity::Warning => warn_at(job, p.field, p.message),
                };
                if let Some(h) = p.hint {
                    diag = diag.hint(h);
                }
                d.push(diag);
            }
        }
    }
}
