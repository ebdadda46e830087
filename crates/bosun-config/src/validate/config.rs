//! The central `config.yaml`'s own sections: bosun's `build_clusters` (limits,
//! failover, kind-specific fields, trusted-cluster rules), `scheduler.failover`,
//! `dispatcher`, `in_repo` sources, `repos` and `plank`'s queues, limits and decoration
//! defaults.

use std::sync::Arc;

use regex::Regex;

use crate::diag::Diagnostic;
use crate::duration::{GoDuration, DURATION_HINT};
use crate::model::{Job, Origin, Periodic};
use crate::names::{short_regex_error, valid_branch_name, valid_clone_uri, valid_repo_name};
use crate::types::{
    ClusterKind, DemandSource, DispatcherConfig, JobBase, JobSource, JobType, PeriodicFields,
    ProwConfig, ReposConfig,
};
use crate::yaml::Mark;

use super::ctx::Clusters;
use super::schedule::ScheduleCheck;

/// Checks `config.yaml`'s own sections; diagnostics point below `root`, the
/// config file's top-level mapping.
pub(super) fn check(
    config: &ProwConfig,
    clusters: &Clusters<'_>,
    kubeconfig_clusters: &[String],
    schedule: Option<&dyn ScheduleCheck>,
    file: &Arc<str>,
    root: Mark,
    d: &mut Vec<Diagnostic>,
) {
    // The message starts with the field's path; the diagnostic points at it.
    let at = |d: Diagnostic| {
        let path = d
            .message
            .split([' ', ':'])
            .next()
            .filter(|p| p.contains(['.', '[']))
            .unwrap_or_default()
            .to_string();
        d.at_field(file, root, &path)
    };
    let err = |msg: String| at(Diagnostic::error(msg));
    let known = |alias: &str| clusters.known(alias);
    for alias in config.build_clusters.keys() {
        if kubeconfig_clusters.iter().any(|c| c == alias) {
            d.push(err(format!(
                "build_clusters.{alias} is also defined by a kubeconfig context"
            )));
        }
    }
    for (alias, c) in &config.build_clusters {
        if c.max_concurrency.is_some_and(|m| m < 0) {
            d.push(err(format!(
                "build_clusters.{alias}.max_concurrency must be a non-negative number"
            )));
        }
        if c.capacity.is_some_and(|m| m < 0) {
            d.push(err(format!(
                "build_clusters.{alias}.capacity must be a non-negative number"
            )));
        }
        if let Some(to) = &c.failover_to {
            if to == alias {
                d.push(err(format!(
                    "build_clusters.{alias}.failover_to names the cluster itself"
                )));
            } else if !known(to) {
                d.push(err(format!(
                    "build_clusters.{alias}.failover_to names unknown cluster {to:?}"
                )));
            }
        }
        match c.kind {
            ClusterKind::Local => {
                if c.context.is_some() || c.kubeconfig.is_some() {
                    d.push(at(Diagnostic::warning(format!(
                        "build_clusters.{alias}.kind: context and kubeconfig apply only to kind: kubernetes"
                    ))));
                }
            }
            ClusterKind::Kubernetes => {
                if c.run_as.is_some() {
                    d.push(at(Diagnostic::warning(format!(
                        "build_clusters.{alias}.run_as applies only to kind: local"
                    ))));
                }
            }
        }
        for (i, rule) in c.trusted.iter().flatten().enumerate() {
            for p in &rule.jobs {
                if let Err(e) = Regex::new(&format!("^(?:{p})$")) {
                    d.push(err(format!(
                        "build_clusters.{alias}.trusted[{i}].jobs: invalid pattern {p:?}: {}",
                        short_regex_error(&e)
                    )));
                }
            }
            for r in &rule.repos {
                if r.is_empty() || r.split('/').count() > 2 {
                    d.push(err(format!(
                        "build_clusters.{alias}.trusted[{i}].repos: {r:?} is not ORG or ORG/REPO"
                    )));
                }
            }
        }
    }
    for (from, to) in &config.scheduler.failover.mappings {
        for alias in [from, to] {
            if !known(alias) {
                d.push(err(format!(
                    "scheduler.failover.mappings names unknown cluster {alias:?}"
                )));
            }
        }
    }
    if let Some(dispatcher) = &config.dispatcher {
        dispatcher_check(dispatcher, &known, &err, d);
        if let (Some(replan), Some(schedule)) = (&dispatcher.replan, schedule) {
            replan_check(replan, schedule, &at, d);
        }
    }
    in_repo_check(config, &err, d);
    repos_check(&config.repos, &at, d);
    for (q, _) in config
        .plank
        .job_queue_capacities
        .iter()
        .filter(|(q, _)| q.is_empty())
    {
        d.push(err(format!(
            "plank.job_queue_capacities has an empty queue name {q:?}"
        )));
    }
    if !config.plank.default_decoration_configs.is_empty()
        && !config.plank.default_decoration_config_entries.is_empty()
    {
        d.push(err("plank.default_decoration_configs and plank.default_decoration_config_entries are mutually exclusive, please use one or the other".into()));
    }
    reporter_check(config, &err, d);
    if config.plank.max_concurrency < 0 {
        d.push(err(
            "plank.max_concurrency must be a non-negative number".into()
        ));
    }
}

/// `github_reporter` and `plank`'s report templates, as Prow checks them:
/// only presubmits and postsubmits are reported, and the deprecated single
/// template is not written beside the map.
fn reporter_check(
    config: &ProwConfig,
    err: &dyn Fn(String) -> Diagnostic,
    d: &mut Vec<Diagnostic>,
) {
    for (i, t) in config
        .github_reporter
        .job_types_to_report
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t, JobType::Presubmit | JobType::Postsubmit))
    {
        d.push(
            err(format!(
                "github_reporter.job_types_to_report[{i}]: invalid job_types_to_report: {}",
                t.as_str()
            ))
            .hint("only presubmit and postsubmit runs are reported to the forge"),
        );
    }
    let plank = &config.plank;
    if plank
        .report_template
        .as_deref()
        .is_some_and(|t| !t.is_empty())
        && !plank.report_templates.is_empty()
    {
        d.push(
            err(
                "plank.report_template: both report_template and report_templates are specified"
                    .into(),
            )
            .hint("move the template to plank.report_templates under \"*\""),
        );
    }
}

/// `in_repo`: each entry a repository (named once) with a checkout or a
/// remote, the credentials only with a remote and one kind of them, a branch
/// git would accept.
fn in_repo_check(config: &ProwConfig, err: &dyn Fn(String) -> Diagnostic, d: &mut Vec<Diagnostic>) {
    for (i, src) in config.in_repo.iter().enumerate() {
        let entry = format!("in_repo[{i}]");
        if !valid_repo_name(&src.repo) {
            d.push(err(format!(
                "{entry}.repo must be ORG/REPO, found {:?}",
                src.repo
            )));
        } else if let Some(first) = config.in_repo[..i].iter().position(|s| s.repo == src.repo) {
            d.push(
                err(format!(
                    "{entry}.repo: {} is already in_repo[{first}]",
                    src.repo
                ))
                .hint("name each repository once"),
            );
        }
        match (src.path.is_empty(), &src.clone_uri) {
            (true, None) => d.push(
                err(format!("{entry}.path or {entry}.clone_uri must be set"))
                    .hint("path: a local checkout; clone_uri: a git remote bosun serve follows"),
            ),
            (false, Some(_)) => d.push(err(format!(
                "{entry}.clone_uri and {entry}.path exclude each other (a git remote or a local checkout): set one"
            ))),
            (_, Some(uri)) if !valid_clone_uri(uri) => d.push(
                err(format!(
                    "{entry}.clone_uri: {uri:?} is not a git remote URL"
                ))
                .hint("write https://HOST/ORG/REPO.git, ssh://git@HOST/ORG/REPO.git, file:///DIR or git@HOST:ORG/REPO.git"),
            ),
            _ => {}
        }
        if src.clone_uri.is_none() {
            for (key, value) in [
                ("token_file", &src.token_file),
                ("ssh_key_file", &src.ssh_key_file),
            ] {
                if value.is_some() {
                    d.push(err(format!(
                        "{entry}.{key} is for a git remote, and {entry} has no clone_uri"
                    )));
                }
            }
        } else if src.token_file.is_some() && src.ssh_key_file.is_some() {
            d.push(err(format!(
                "{entry}.ssh_key_file and {entry}.token_file exclude each other (SSH or HTTPS)"
            )));
        }
        if let Some(branch) = src.branch.as_deref().filter(|b| !valid_branch_name(b)) {
            d.push(err(format!(
                "{entry}.branch: {branch:?} is not a valid branch name"
            )));
        }
    }
}

/// `repos`: durations that parse and are positive, a base URL git can clone
/// from, one kind of credentials.
fn repos_check(
    repos: &ReposConfig,
    at: &dyn Fn(Diagnostic) -> Diagnostic,
    d: &mut Vec<Diagnostic>,
) {
    for (key, value) in [("resync", &repos.resync), ("gone_after", &repos.gone_after)] {
        let Some(value) = value else { continue };
        match GoDuration::parse(value) {
            Err(e) => d.push(at(
                Diagnostic::error(format!("repos.{key}: {e}")).hint(DURATION_HINT)
            )),
            Ok(v) if v.as_nanos() <= 0 => d.push(at(Diagnostic::error(format!(
                "repos.{key}: must be a positive duration, found {value:?}"
            )))),
            Ok(_) => {}
        }
    }
    if let Some(base) = repos.clone_base.as_deref().filter(|b| !valid_clone_uri(b)) {
        d.push(at(Diagnostic::error(format!(
            "repos.clone_base: {base:?} is not a git remote URL"
        ))
        .hint("write the URL repositories are cloned from without ORG/REPO, such as https://github.com")));
    }
    if repos.token_file.is_some() && repos.ssh_key_file.is_some() {
        d.push(at(Diagnostic::error(
            "repos.ssh_key_file and repos.token_file exclude each other (SSH or HTTPS)",
        )));
    }
}

/// `dispatcher`: known clusters, what each demand source needs, ranges, and
/// patterns that compile.
fn dispatcher_check(
    dispatcher: &DispatcherConfig,
    known: &dyn Fn(&str) -> bool,
    err: &dyn Fn(String) -> Diagnostic,
    d: &mut Vec<Diagnostic>,
) {
    for alias in &dispatcher.relocatable_clusters {
        if !known(alias) {
            d.push(err(format!(
                "dispatcher.relocatable_clusters names unknown cluster {alias:?}"
            )));
        }
    }
    if dispatcher.demand == DemandSource::Prometheus && dispatcher.prometheus_url.is_none() {
        d.push(err(
            "dispatcher.demand: prometheus needs dispatcher.prometheus_url".into(),
        ));
    }
    if let Some(url) = &dispatcher.prometheus_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            d.push(err(format!(
                "dispatcher.prometheus_url must be an http:// or https:// URL, found {url:?}"
            )));
        }
    }
    // As OpenShift's flags: a user and a password file together, and not
    // with a bearer token.
    match (
        &dispatcher.prometheus_username,
        &dispatcher.prometheus_password_file,
    ) {
        (Some(_), None) => d.push(err(
            "dispatcher.prometheus_username needs dispatcher.prometheus_password_file".into(),
        )),
        (None, Some(_)) => d.push(err(
            "dispatcher.prometheus_password_file needs dispatcher.prometheus_username".into(),
        )),
        (Some(_), Some(_)) if dispatcher.bearer_token_file.is_some() => d.push(err(
            "dispatcher.prometheus_username and dispatcher.bearer_token_file exclude each other \
             (basic auth or a bearer token)"
                .into(),
        )),
        _ => {}
    }
    if dispatcher
        .prometheus_username
        .as_deref()
        .is_some_and(|u| u.contains(':'))
    {
        d.push(err(
            "dispatcher.prometheus_username must not contain ':' (basic auth cannot carry it)"
                .into(),
        ));
    }
    if dispatcher.prometheus_ca_file.is_some()
        && !dispatcher
            .prometheus_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
    {
        d.push(err(
            "dispatcher.prometheus_ca_file is for an https:// dispatcher.prometheus_url".into(),
        ));
    }
    if let Some(q) = &dispatcher.prometheus_query {
        if q.trim().is_empty() {
            d.push(err("dispatcher.prometheus_query must not be empty".into()));
        }
    }
    if dispatcher
        .budget
        .is_some_and(|p| !(0.0..=100.0).contains(&p.0))
    {
        d.push(err(
            "dispatcher.budget must be a percentage between 0 and 100 (10% or 10)".into(),
        ));
    }
    if dispatcher
        .hysteresis_percent
        .is_some_and(|h| !(0.0..=100.0).contains(&h))
    {
        d.push(err(
            "dispatcher.hysteresis_percent must be between 0 and 100".into(),
        ));
    }
    for (name, value) in [
        ("unhealthy_after", dispatcher.unhealthy_after),
        ("recover_after", dispatcher.recover_after),
    ] {
        if value.is_some_and(|w| w.as_nanos() < 0) {
            d.push(err(format!("dispatcher.{name} must not be negative")));
        }
    }
    if dispatcher.window.is_some_and(|w| w.as_nanos() <= 0) {
        d.push(err("dispatcher.window must be a positive duration".into()));
    }
    for (i, g) in dispatcher.groups.iter().enumerate() {
        if g.cluster.is_empty() {
            d.push(err(format!("dispatcher.groups[{i}].cluster must be set")));
        } else if !known(&g.cluster) {
            d.push(err(format!(
                "dispatcher.groups[{i}].cluster names unknown cluster {:?}",
                g.cluster
            )));
        }
        if g.jobs.is_empty() && g.paths.is_empty() {
            d.push(err(format!(
                "dispatcher.groups[{i}] matches nothing: give jobs or paths"
            )));
        }
        for p in &g.jobs {
            if let Err(e) = Regex::new(&format!("^(?:{p})$")) {
                d.push(err(format!(
                    "dispatcher.groups[{i}].jobs: invalid pattern {p:?}: {}",
                    short_regex_error(&e)
                )));
            }
        }
        for p in &g.paths {
            if let Err(e) = Regex::new(p) {
                d.push(err(format!(
                    "dispatcher.groups[{i}].paths: invalid pattern {p:?}: {}",
                    short_regex_error(&e)
                )));
            }
        }
    }
    for (from, to) in &dispatcher.provider_mapping {
        if from.is_empty() || to.is_empty() {
            d.push(err(format!(
                "dispatcher.provider_mapping: {from:?}: {to:?} needs a provider on both sides"
            )));
        }
    }
}

/// `dispatcher.replan` is a cron schedule (UTC), checked by the schedule
/// engine as a periodic's `cron` is.
fn replan_check(
    replan: &str,
    schedule: &dyn ScheduleCheck,
    at: &dyn Fn(Diagnostic) -> Diagnostic,
    d: &mut Vec<Diagnostic>,
) {
    let probe: Periodic = Job {
        base: JobBase {
            name: "dispatcher.replan".into(),
            ..JobBase::default()
        },
        kind: PeriodicFields {
            cron: Some(replan.to_string()),
            ..PeriodicFields::default()
        },
        presets: Vec::new(),
        cluster_written: false,
        source: JobSource::Central,
        origin: Origin {
            file: Arc::from(""),
            mark: Mark::default(),
            keys: Box::new([]),
        },
    };
    for p in schedule
        .check(&probe)
        .into_iter()
        .filter(|p| p.field == "cron")
    {
        let diag = Diagnostic {
            severity: p.severity,
            ..Diagnostic::error(format!(
                "dispatcher.replan: {}",
                p.message.replace(" in periodic dispatcher.replan", "")
            ))
        };
        let diag = match p.hint {
            Some(h) => diag.hint(h),
            None => diag,
        };
        d.push(at(diag));
    }
}
