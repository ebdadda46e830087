//! Defaulting and validation: Prow's rules, with Prow's error texts where Prow has
//! them, plus bosun's own. One validator serves `bosun check` and the daemon.
//!
//! Order follows Prow: central presets are checked, every job is defaulted (agent,
//! namespace, cluster, context, trigger, decoration, presets), then validated on
//! its own, then checked against the others (duplicates, contexts).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use k8s_openapi::api::core::v1::PodSpec;
use rayon::prelude::*;
use regex::Regex;

use crate::diag::{Diagnostic, Severity};
use crate::duration::GoDuration;
use crate::load::{LoadOptions, Parsed};
use crate::model::{Job, Periodic, Postsubmit, PresetDef, Presubmit};
use crate::types::{
    ClusterKind, DecorationConfig, DemandSource, JobBase, JobSource, JobType, Preset, ProwConfig,
    TrustRule,
};
use crate::yaml::Mark;

/// A problem the schedule engine found in a periodic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleProblem {
    /// Error or warning.
    pub severity: Severity,
    /// The field concerned (`cron`, `timezone`, ...).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
}

/// Validates a periodic's schedule. The schedule engine implements it; the config
/// crate only knows that schedules must be checked.
pub trait ScheduleCheck: Send + Sync {
    /// Problems with the periodic's `cron` and `timezone`.
    fn check(&self, periodic: &Periodic) -> Vec<ScheduleProblem>;
}

type Output = (
    ProwConfig,
    Vec<PresetDef>,
    Vec<Periodic>,
    BTreeMap<String, Vec<Presubmit>>,
    BTreeMap<String, Vec<Postsubmit>>,
);

/// The Prow job name rule.
pub const JOB_NAME_REGEX: &str = "^[A-Za-z0-9-._]+$";
/// Kubernetes label values (and so `prow.k8s.io/job`) are at most this long.
pub const MAX_LABEL_LEN: usize = 63;

fn err_at<K>(job: &Job<K>, path: &str, msg: impl Into<String>) -> Diagnostic {
    let d = Diagnostic::error(msg);
    match job.origin.key(path) {
        Some(mark) => d.at(&job.origin.file, mark),
        None => d.at_field(&job.origin.file, job.origin.mark, path),
    }
    .job(job.base.name.clone())
}

fn warn_at<K>(job: &Job<K>, path: &str, msg: impl Into<String>) -> Diagnostic {
    Diagnostic {
        severity: Severity::Warning,
        ..err_at(job, path, msg)
    }
}

/// Cluster aliases configured explicitly (build_clusters, kubeconfig contexts).
struct Clusters<'c> {
    explicit: BTreeSet<&'c str>,
    config: &'c ProwConfig,
}

impl Clusters<'_> {
    /// A job's alias is checked only when clusters are configured explicitly, and
    /// never against `default`, which always exists (implicitly local when nothing
    /// defines it).
    fn known(&self, alias: &str) -> bool {
        self.explicit.is_empty() || alias == "default" || self.explicit.contains(alias)
    }
}

pub(crate) fn finish(
    config: ProwConfig,
    parsed: Parsed,
    opts: &LoadOptions,
    diags: &mut Vec<Diagnostic>,
) -> Option<Output> {
    let config_root = parsed.config.as_ref().map(|c| c.2).unwrap_or_default();
    let Parsed {
        config: _,
        presets,
        mut periodics,
        mut presubmits,
        mut postsubmits,
        ..
    } = parsed;
    let config_file: Arc<str> = opts
        .config
        .as_ref()
        .map(|p| Arc::from(p.to_string_lossy().as_ref()))
        .unwrap_or_else(|| Arc::from("config.yaml"));

    let clusters = Clusters {
        explicit: config
            .build_clusters
            .keys()
            .map(String::as_str)
            .chain(opts.kubeconfig_clusters.iter().map(String::as_str))
            .collect(),
        config: &config,
    };
    validate_config(&config, &clusters, opts, &config_file, config_root, diags);
    check_preset_pairs(&presets, diags);

    let schedule = opts.schedule_check.as_deref();
    let ctx = Ctx {
        config: &config,
        clusters: &clusters,
        presets: &presets,
        schedule,
    };

    let mut found: Vec<Vec<Diagnostic>> = Vec::new();
    periodics
        .par_iter_mut()
        .map(|j| ctx.periodic(j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
    presubmits
        .par_iter_mut()
        .map(|(repo, j)| ctx.presubmit(repo, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
    postsubmits
        .par_iter_mut()
        .map(|(repo, j)| ctx.postsubmit(repo, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());

    check_duplicate_periodics(&periodics, diags);
    let mut pre_by_repo: BTreeMap<String, Vec<Presubmit>> = BTreeMap::new();
    for (repo, job) in presubmits {
        pre_by_repo.entry(repo).or_default().push(job);
    }
    let mut post_by_repo: BTreeMap<String, Vec<Postsubmit>> = BTreeMap::new();
    for (repo, job) in postsubmits {
        post_by_repo.entry(repo).or_default().push(job);
    }
    for jobs in pre_by_repo.values() {
        check_repo_jobs(
            jobs,
            JobType::Presubmit,
            |j| (&j.kind.branches, &j.kind.skip_branches, &j.kind.context),
            diags,
        );
    }
    for jobs in post_by_repo.values() {
        check_repo_jobs(
            jobs,
            JobType::Postsubmit,
            |j| (&j.kind.branches, &j.kind.skip_branches, &j.kind.context),
            diags,
        );
    }
    Some((config, presets, periodics, pre_by_repo, post_by_repo))
}

struct Ctx<'c> {
    config: &'c ProwConfig,
    clusters: &'c Clusters<'c>,
    presets: &'c [PresetDef],
    schedule: Option<&'c dyn ScheduleCheck>,
}

impl Ctx<'_> {
    fn periodic(&self, job: &mut Periodic) -> Vec<Diagnostic> {
        let repo = job
            .base
            .extra_refs
            .first()
            .map(|r| format!("{}/{}", r.org, r.repo))
            .unwrap_or_default();
        let mut d = self.default_base(job);
        if !d.iter().any(Diagnostic::is_error) {
            self.validate_base(job, JobType::Periodic, &repo, &mut d);
        }
        self.validate_periodic(job, &mut d);
        d
    }

    fn presubmit(&self, repo: &str, job: &mut Presubmit) -> Vec<Diagnostic> {
        let name = job.base.name.clone();
        let k = &mut job.kind;
        if k.context.is_empty() {
            k.context = name.clone();
        }
        if k.trigger.is_empty() && k.rerun_command.is_empty() {
            k.trigger = default_trigger(&name);
            k.rerun_command = default_rerun_command(&name);
        }
        let mut d = self.default_base(job);
        d.extend(set_presubmit_regexes(job));
        if !d.iter().any(Diagnostic::is_error) {
            self.validate_base(job, JobType::Presubmit, repo, &mut d);
        }
        let k = &job.kind;
        if let Some(e) = triggering_error(
            &name,
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
        self.in_repo_cluster(job, repo, &mut d);
        d
    }

    fn postsubmit(&self, repo: &str, job: &mut Postsubmit) -> Vec<Diagnostic> {
        let name = job.base.name.clone();
        if job.kind.context.is_empty() {
            job.kind.context = name.clone();
        }
        let mut d = self.default_base(job);
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
                d.push(err_at(job, field, format!("could not set change regexes for {name}: could not compile {field} regex: {e}")));
            }
        }
        if !d.iter().any(Diagnostic::is_error) {
            self.validate_base(job, JobType::Postsubmit, repo, &mut d);
        }
        let k = &job.kind;
        if let Some(e) = triggering_error(
            &name,
            k.always_run == Some(true),
            k.run_if_changed.as_deref(),
            k.skip_if_only_changed.as_deref(),
        ) {
            d.push(err_at(job, "always_run", e));
        }
        if let Some(e) = reporting_error(&job.base, k.skip_report, &k.context) {
            d.push(err_at(job, "skip_report", e));
        }
        self.in_repo_cluster(job, repo, &mut d);
        d
    }

    /// Prow's `defaultJobBase`, decoration defaults and presets.
    fn default_base<K>(&self, job: &mut Job<K>) -> Vec<Diagnostic> {
        let mut d = Vec::new();
        let b = &mut job.base;
        if b.agent.is_empty() {
            // Lighthouse: a `source:` pipeline file means a Tekton job.
            b.agent = if b.source.is_some() {
                "tekton-pipeline".into()
            } else {
                "kubernetes".into()
            };
        }
        if b.namespace.as_deref().is_none_or(str::is_empty) {
            b.namespace = Some(self.config.pod_namespace.clone());
        }
        if b.cluster.is_empty() {
            b.cluster = "default".into();
        }
        // The merge with `plank.default_decoration_config_entries` is not stored
        // (every decorated job would carry a copy of the defaults): validation
        // reads through the layers, and `Snapshot::decoration_config` merges.
        b.decorate.get_or_insert(self.config.decorate_all_jobs);
        // Central presets, then the presets of the job's own repository. They are
        // recorded, not copied into the spec (the snapshot would hold a copy of
        // every preset volume and variable per job); the merge is checked here by
        // name and done for real by `Snapshot::pod_spec`.
        if let Some(spec) = &job.base.spec {
            let own_repo = match &job.source {
                JobSource::InRepo { repo, .. } => Some(repo.as_str()),
                JobSource::Central => None,
            };
            let matched: Vec<usize> = self
                .presets
                .iter()
                .enumerate()
                .filter(|(_, p)| match &p.source {
                    JobSource::Central => true,
                    JobSource::InRepo { repo, .. } => Some(repo.as_str()) == own_repo,
                })
                .filter(|(_, p)| preset_matches(&p.preset, &job.base.labels))
                .map(|(i, _)| i)
                .collect();
            if let Err((i, e)) =
                check_preset_merge(spec, matched.iter().map(|i| &self.presets[*i].preset))
            {
                let p = &self.presets[matched[i]];
                let msg = format!("failed to merge presets for podspec: {e}");
                d.push(err_at(job, "labels", msg).hint(format!(
                    "the preset at {}:{} adds it",
                    p.origin.file, p.origin.mark
                )));
            }
            job.presets = matched;
        }
        d
    }

    /// Prow's `validateJobBase` and bosun's cluster checks.
    fn validate_base<K>(&self, job: &Job<K>, ty: JobType, repo: &str, d: &mut Vec<Diagnostic>) {
        let b = &job.base;
        let decoration = DecorationView::of(self.config, repo, b);
        if !valid_job_name(&b.name, &b.agent) {
            let re = if b.agent == "jenkins" {
                "^[A-Za-z0-9-._]([A-Za-z0-9-._/]*[A-Za-z0-9-_])?$"
            } else {
                JOB_NAME_REGEX
            };
            d.push(err_at(
                job,
                "name",
                format!("name: must match regex {re:?}"),
            ));
        }
        if b.max_concurrency < 0 {
            d.push(err_at(
                job,
                "max_concurrency",
                format!(
                    "max_concurrency: {} must be a non-negative number",
                    b.max_concurrency
                ),
            ));
        }
        if let Some((path, e)) = self.agent_error(b, decoration.is_some()) {
            d.push(err_at(job, path, e));
        }
        if let Some(spec) = &b.spec {
            let presets: Vec<&Preset> = job
                .presets
                .iter()
                .map(|i| &self.presets[*i].preset)
                .collect();
            for (path, e) in pod_spec_errors(ty, spec, &presets, decoration.as_ref()) {
                d.push(err_at(job, &path, e));
            }
        }
        for (key, value) in &b.labels {
            let path = format!("labels.{key}");
            if RESERVED_LABELS.contains(&key.as_str()) {
                d.push(err_at(
                    job,
                    &path,
                    format!("label {key} is reserved for decoration"),
                ));
                continue;
            }
            let errs = qualified_name_errors(key);
            if !errs.is_empty() {
                d.push(err_at(
                    job,
                    &path,
                    format!("invalid label {key}: [{}]", errs.join(" ")),
                ));
                continue;
            }
            let errs = label_value_errors(value);
            if !errs.is_empty() {
                d.push(err_at(
                    job,
                    &path,
                    format!(
                        "label {key} has invalid value {value}: [{}]",
                        errs.join(" ")
                    ),
                ));
            }
        }
        for key in b.annotations.keys() {
            let errs = qualified_name_errors(key);
            if !errs.is_empty() {
                d.push(err_at(
                    job,
                    &format!("annotations.{key}"),
                    format!("invalid annotation key {key:?}: [{}]", errs.join(" ")),
                ));
            }
        }
        if let Some(q) = b.job_queue_name.as_deref().filter(|q| !q.is_empty()) {
            if !self.config.plank.job_queue_capacities.contains_key(q) {
                d.push(
                    err_at(job, "job_queue_name", format!("invalid job queue name {q}"))
                        .hint("add it to plank.job_queue_capacities"),
                );
            }
        }
        let has_containers = b.spec.as_ref().is_some_and(|s| !s.containers.is_empty());
        if has_containers {
            if let Some(r) = &b.rerun_auth_config {
                if r.allow_anyone
                    && (!r.github_users.is_empty()
                        || !r.github_team_ids.is_empty()
                        || !r.github_team_slugs.is_empty()
                        || !r.github_orgs.is_empty())
                {
                    d.push(err_at(
                        job,
                        "rerun_auth_config",
                        "allow anyone is set to true and permitted users or groups are specified",
                    ));
                }
            }
            if let Some(dc) = &decoration {
                if let Err(e) = validate_decoration_config(dc) {
                    d.push(err_at(
                        job,
                        "decoration_config",
                        format!("invalid decoration config: {e}"),
                    ));
                }
                for (i, c) in b
                    .spec
                    .as_ref()
                    .expect("has containers")
                    .containers
                    .iter()
                    .enumerate()
                {
                    let cmd = c.command.as_deref().unwrap_or_default();
                    let args = c.args.as_deref().unwrap_or_default();
                    // What runs is command ++ args; its first word must exist.
                    let first = cmd.first().or(args.first());
                    if first.is_none_or(String::is_empty) {
                        d.push(err_at(
                            job,
                            &format!("spec.containers[{i}]"),
                            "decorated job containers must specify command and/or args",
                        ));
                    }
                }
            }
        }
        // checkconfig's warnings.
        if b.agent == "kubernetes" && b.name.len() > MAX_LABEL_LEN {
            let msg = match (ty, repo) {
                (JobType::Periodic, _) => format!(
                    "name of Periodic job {:?} too long (should be at most 63 characters)",
                    b.name
                ),
                (t, repo) => format!(
                    "name of {} job {:?} (for repo {:?}) too long (should be at most 63 characters)",
                    if t == JobType::Presubmit { "Presubmit" } else { "Postsubmit" },
                    b.name,
                    repo
                ),
            };
            d.push(
                warn_at(job, "name", msg).hint(
                    "Prow labels pods with job names; the label is truncated to 63 characters",
                ),
            );
        }
        match b.agent.as_str() {
            "kubernetes" => {}
            "jenkins" | "tekton-pipeline" => d.push(warn_at(
                job,
                "agent",
                format!(
                    "agent {} is not supported by bosun: the job loads, but its runs end in error",
                    b.agent
                ),
            )),
            other => d.push(warn_at(
                job,
                "agent",
                format!("agent {other} is unknown and cannot be validated: use at your own risk"),
            )),
        }
        if b.agent == "jenkins" && job.cluster_written && b.cluster != "default" {
            d.push(warn_at(
                job,
                "cluster",
                format!(
                    "{}: cannot set cluster field if agent is {}",
                    b.name, b.agent
                ),
            ));
        }
        self.cluster_checks(job, ty, repo, d);
    }

    /// Prow's `validateAgent`: the first rule that applies.
    fn agent_error(&self, b: &JobBase, decorated: bool) -> Option<(&'static str, String)> {
        const K: &str = "kubernetes";
        const P: &str = "tekton-pipeline";
        let agent = b.agent.as_str();
        let has_pipeline = b.pipeline_run_spec.is_some() || b.tekton_pipeline_run_spec.is_some();
        if !matches!(agent, K | P | "jenkins") {
            return None;
        }
        if b.spec.is_some() && agent != K {
            return Some((
                "agent",
                format!("job specs require agent: {K} (found {agent:?})"),
            ));
        }
        if agent == K && b.spec.is_none() {
            return Some(("spec", "kubernetes jobs require a spec".into()));
        }
        if has_pipeline && agent != P {
            return Some((
                "agent",
                format!("job pipeline_run_spec require agent: {P} (found {agent:?})"),
            ));
        }
        // Lighthouse's Tekton jobs name a pipeline file (`source`) instead of a spec.
        if agent == P && !has_pipeline && b.source.is_none() {
            return Some((
                "agent",
                format!("agent: {P} jobs require a pipeline_run_spec"),
            ));
        }
        if decorated && agent != K {
            return Some((
                "decoration_config",
                format!("decoration requires agent: {K} (found {agent:?})"),
            ));
        }
        if b.error_on_eviction && agent != K {
            return Some((
                "error_on_eviction",
                format!("error_on_eviction only applies to agent: {K} (found {agent:?})"),
            ));
        }
        let ns = b.namespace.as_deref().unwrap_or_default();
        if ns != self.config.pod_namespace && agent != P {
            return Some((
                "namespace",
                format!("namespace customization requires agent: {P} (found {agent:?})"),
            ));
        }
        None
    }

    fn cluster_checks<K>(&self, job: &Job<K>, ty: JobType, repo: &str, d: &mut Vec<Diagnostic>) {
        let alias = job.base.cluster.as_str();
        if !self.clusters.known(alias) {
            let known: Vec<&str> = std::iter::once("default")
                .chain(
                    self.clusters
                        .explicit
                        .iter()
                        .copied()
                        .filter(|c| *c != "default"),
                )
                .collect();
            d.push(
                err_at(
                    job,
                    "cluster",
                    format!(
                        "job configuration for {:?} specifies unknown 'cluster' value {alias:?}",
                        job.base.name
                    ),
                )
                .hint(format!("known clusters: {}", known.join(", "))),
            );
            return;
        }
        if self.config.disabled_clusters.iter().any(|c| c == alias) {
            d.push(warn_at(
                job,
                "cluster",
                format!("cluster {alias:?} is disabled (disabled_clusters): runs of this job fail at once"),
            ));
        }
        if let Some(rules) = self
            .clusters
            .config
            .build_clusters
            .get(alias)
            .and_then(|c| c.trusted.as_ref())
        {
            // The definition's repository: the pre/postsubmit's repo key, the
            // in-repo source, or a periodic's `extra_refs[0]`.
            let repo = (!repo.is_empty()).then_some(repo);
            if !trust_admits(rules, &job.base.name, repo, ty) {
                d.push(
                    err_at(
                        job,
                        "cluster",
                        format!("job {} may not run on trusted cluster {alias:?}: no allow rule admits it", job.base.name),
                    )
                    .hint(format!("add a rule to build_clusters.{alias}.trusted, or use another cluster")),
                );
            }
        }
    }

    /// In-repo jobs may use only the clusters `in_repo_config.allowed_clusters` allows.
    fn in_repo_cluster<K>(&self, job: &Job<K>, repo: &str, d: &mut Vec<Diagnostic>) {
        if !matches!(job.source, JobSource::InRepo { .. }) {
            return;
        }
        if !in_repo_allows_cluster(self.config, repo, &job.base.cluster) {
            d.push(
                err_at(
                    job,
                    "cluster",
                    format!(
                        "cluster {:?} is not allowed for repository {repo:?}",
                        job.base.cluster
                    ),
                )
                .hint("list it in in_repo_config.allowed_clusters"),
            );
        }
    }

    fn validate_periodic(&self, job: &Periodic, d: &mut Vec<Diagnostic>) {
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
                format!("cron, interval, and minimum_interval are mutually exclusive in periodic {name}"),
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
                    Err(e) => {
                        d.push(err_at(job, field, format!("{field}: {e}")).hint(DURATION_HINT))
                    }
                    Ok(dur) if dur.as_nanos() < 0 => {
                        d.push(err_at(job, field, format!("{field}: must not be negative")))
                    }
                    Ok(_) => {}
                }
            }
        }
        if job.base.clone_depth != 0
            || job.base.clone_uri.is_some()
            || job.base.path_alias.is_some()
        {
            d.push(warn_at(job, "", format!("periodic jobs might clone 0, 1, or more repos, top level `clone_depth`, `clone_uri`, and `path_alias` don't have any effect. Name: {name:?}")));
        }
        if set == 1 {
            if let Some(check) = self.schedule {
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
        if let JobSource::InRepo { repo, .. } = &job.source {
            self.in_repo_cluster(job, repo, d);
        }
    }
}

const DURATION_HINT: &str =
    "durations are Go durations such as 90s, 10m, 1h30m (no `d`: write 24h)";

fn name_matches(pattern: &str, name: &str) -> bool {
    pattern == name
        || Regex::new(&format!("^(?:{pattern})$"))
            .map(|re| re.is_match(name))
            .unwrap_or(false)
}

fn repo_matches(want: &str, repo: Option<&str>) -> bool {
    let Some(repo) = repo else { return false };
    want == repo || (!want.contains('/') && repo.split('/').next() == Some(want))
}

/// Whether a trusted cluster's allow rules admit a job: some rule whose every
/// given field matches the job's definition (its name, against names or
/// anchored patterns; the `org/repo` it is defined for, against `org/repo` or
/// `org`; its type). Refs in a request never count.
pub fn trust_admits(rules: &[TrustRule], name: &str, repo: Option<&str>, ty: JobType) -> bool {
    rules.iter().any(|r| {
        (r.jobs.is_empty() || r.jobs.iter().any(|p| name_matches(p, name)))
            && (r.repos.is_empty() || r.repos.iter().any(|want| repo_matches(want, repo)))
            && (r.types.is_empty() || r.types.contains(&ty))
    })
}

/// Prow's `InRepoConfigAllowsCluster`: union over `org/repo`, `org` and `*`;
/// `*` defaults to `["default"]` unless written.
pub fn in_repo_allows_cluster(config: &ProwConfig, repo: &str, cluster: &str) -> bool {
    let allowed = &config.in_repo_config.allowed_clusters;
    let org = repo.split('/').next().unwrap_or_default();
    let listed = |key: &str| {
        allowed
            .get(key)
            .is_some_and(|l| l.iter().any(|c| c == cluster))
    };
    listed(repo)
        || listed(org)
        || (listed("*") || (!allowed.contains_key("*") && cluster == "default"))
}

/// Prow's default trigger for a presubmit.
pub fn default_trigger(name: &str) -> String {
    format!(r"(?m)^/test( | .* ){name},?($|\s.*)")
}

/// Prow's default rerun command for a presubmit.
pub fn default_rerun_command(name: &str) -> String {
    format!("/test {name}")
}

fn valid_job_name(name: &str, agent: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if agent == "jenkins" {
        static RE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new("^[A-Za-z0-9-._]([A-Za-z0-9-._/]*[A-Za-z0-9-_])?$").unwrap()
        });
        return RE.is_match(name);
    }
    !name.is_empty() && name.chars().all(ok)
}

fn join_alternatives(list: &[String]) -> Option<String> {
    (!list.is_empty()).then(|| list.join("|"))
}

/// Syntax check of a Go regular expression. Parsing is enough here (and far
/// cheaper than compiling thousands of patterns); patterns are compiled where a
/// match is needed.
fn regex_error(pattern: Option<&str>) -> Option<String> {
    let p = pattern?;
    // Real configurations repeat the same few branch patterns thousands of times.
    thread_local! {
        static CHECKED: RefCell<HashMap<String, Option<String>>> = RefCell::new(HashMap::new());
    }
    CHECKED.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(r) = c.get(p) {
            return r.clone();
        }
        let r = regex_syntax::Parser::new().parse(p).err().map(|e| {
            let text = e.to_string();
            let last = text.lines().last().unwrap_or_default().trim();
            last.strip_prefix("error:")
                .unwrap_or(last)
                .trim()
                .to_string()
        });
        if c.len() > 4096 {
            c.clear();
        }
        c.insert(p.to_string(), r.clone());
        r
    })
}

/// Prow's `SetPresubmitRegexes` checks.
fn set_presubmit_regexes(job: &Presubmit) -> Vec<Diagnostic> {
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

fn short_regex_error(e: &regex::Error) -> String {
    e.to_string()
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(|l| l.trim_start_matches("error:").trim().to_string())
        .next()
        .unwrap_or_else(|| e.to_string())
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

const RESERVED_LABELS: &[&str] = &["prow.k8s.io/type", "created-by-prow", "prow.k8s.io/id"];
const DECORATION_CONTAINERS: &[&str] = &["clonerefs", "initupload", "place-entrypoint", "sidecar"];
const DECORATION_MOUNT_NAMES: &[&str] = &["logs", "code", "tools"];
const DECORATION_MOUNT_PATHS: &[&str] = &["/logs", "/home/prow/go", "/tools"];

/// Environment variables bosun (like Prow) sets for each job type.
pub fn reserved_env(ty: JobType) -> &'static [&'static str] {
    const PERIODIC: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
    ];
    const POST: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
        "REPO_OWNER",
        "REPO_NAME",
        "SRC_BASE",
        "SRC_HOST",
        "PULL_BASE_REF",
        "PULL_BASE_SHA",
        "PULL_REFS",
    ];
    const PRE: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
        "REPO_OWNER",
        "REPO_NAME",
        "SRC_BASE",
        "SRC_HOST",
        "PULL_BASE_REF",
        "PULL_BASE_SHA",
        "PULL_REFS",
        "PULL_NUMBER",
        "PULL_PULL_SHA",
        "PULL_HEAD_REF",
        "PULL_TITLE",
        "TRIGGER_COMMENT_ID",
        "TRIGGER_COMMENT_URL",
    ];
    match ty {
        JobType::Periodic => PERIODIC,
        JobType::Postsubmit | JobType::Batch => POST,
        JobType::Presubmit => PRE,
    }
}

/// Prow's `validatePodSpec`: (field path, message) pairs.
fn pod_spec_errors(
    ty: JobType,
    spec: &PodSpec,
    presets: &[&Preset],
    dc: Option<&DecorationView<'_>>,
) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    if spec.init_containers.as_ref().is_some_and(|c| !c.is_empty()) {
        errs.push((
            "spec.initContainers".into(),
            "pod spec may not use init containers".into(),
        ));
    }
    let n = spec.containers.len();
    if n < 1 {
        errs.push((
            "spec.containers".into(),
            format!("pod spec must specify at least 1 container, found: {n}"),
        ));
        return errs;
    }
    if n > 1 && dc.is_none() {
        errs.push((
            "spec.containers".into(),
            format!("pod utility decoration must be enabled to use multiple containers: {n}"),
        ));
        return errs;
    }
    if n > 1 {
        let mut seen = HashSet::new();
        for (i, c) in spec.containers.iter().enumerate() {
            let path = format!("spec.containers[{i}]");
            if c.name.is_empty() {
                errs.push((path, "container does not have name. all containers must have names when defining multiple containers".into()));
                continue;
            }
            if !seen.insert(c.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("container named {:?} is defined more than once", c.name),
                ));
            }
            if DECORATION_CONTAINERS.contains(&c.name.as_str()) {
                errs.push((path, format!("container name {} is a reserved for decoration. please specify a different container name that does not conflict with pod utility container names", c.name)));
            }
        }
    }
    let reserved_env = reserved_env(ty);
    for (i, c) in spec.containers.iter().enumerate() {
        let mut seen = HashSet::new();
        for (j, e) in c
            .env
            .iter()
            .flatten()
            .chain(presets.iter().flat_map(|p| &p.env))
            .enumerate()
        {
            let path = format!("spec.containers[{i}].env[{j}]");
            if !seen.insert(e.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("env var named {:?} is defined more than once", e.name),
                ));
            }
            if reserved_env.contains(&e.name.as_str()) {
                errs.push((path, format!("env {} is reserved", e.name)));
            }
        }
    }
    let mut reserved_volumes: Vec<&str> =
        vec!["logs", "code", "tools", "gcs-credentials", "s3-credentials"];
    if let Some(dc) = dc {
        if let Some(name) = dc.oauth_token_secret_name() {
            reserved_volumes.push(name);
        }
        reserved_volumes.extend(dc.ssh_key_secrets().iter().map(String::as_str));
    }
    let mut volumes = HashSet::new();
    for (i, v) in spec
        .volumes
        .iter()
        .flatten()
        .chain(presets.iter().flat_map(|p| &p.volumes))
        .enumerate()
    {
        let path = format!("spec.volumes[{i}]");
        if !volumes.insert(v.name.as_str()) {
            errs.push((
                path.clone(),
                format!("volume named {:?} is defined more than once", v.name),
            ));
        }
        if reserved_volumes.contains(&v.name.as_str()) {
            errs.push((
                path,
                format!("volume {} is a reserved for decoration", v.name),
            ));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (j, m) in c
            .volume_mounts
            .iter()
            .flatten()
            .chain(presets.iter().flat_map(|p| &p.volume_mounts))
            .enumerate()
        {
            let path = format!("spec.containers[{i}].volumeMounts[{j}]");
            if !volumes.contains(m.name.as_str()) && !reserved_volumes.contains(&m.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("volumeMount named {:?} is undefined", m.name),
                ));
            }
            if DECORATION_MOUNT_NAMES.contains(&m.name.as_str()) {
                errs.push((
                    path.clone(),
                    format!("volumeMount name {} is reserved for decoration", m.name),
                ));
            }
            if DECORATION_MOUNT_PATHS.contains(&m.mount_path.as_str()) {
                errs.push((
                    path,
                    format!(
                        "mount {} at {} conflicts with decoration mount",
                        m.name, m.mount_path
                    ),
                ));
            }
        }
    }
    errs
}

/// Prow's `DecorationConfig.Validate`.
fn validate_decoration_config(dc: &DecorationView<'_>) -> Result<(), String> {
    if !dc.layers.iter().any(|l| l.utility_images.is_some()) {
        return Err("utility image config is not specified".into());
    }
    let missing: Vec<String> = ["clonerefs", "initupload", "entrypoint", "sidecar"]
        .iter()
        .filter(|k| dc.image(k).is_none())
        .map(|k| format!("{k:?}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the following utility images are not specified: [{}]",
            missing.join(" ")
        ));
    }
    if !dc.layers.iter().any(|l| l.gcs_configuration.is_some()) {
        return Err("GCS upload configuration is not specified".into());
    }
    let strategy = dc.gcs_str("path_strategy").unwrap_or_default();
    if !matches!(strategy, "legacy" | "explicit" | "single") {
        return Err(r#"GCS configuration is invalid: gcs_path_strategy must be one of "legacy", "explicit", or "single""#.into());
    }
    let empty = |k: &str| dc.gcs_str(k).is_none_or(str::is_empty);
    if strategy != "explicit" && (empty("default_org") || empty("default_repo")) {
        return Err(format!("GCS configuration is invalid: default org and repo must be provided for GCS strategy {strategy:?}"));
    }
    if dc.oauth_token_secret_name().is_some() && !dc.ssh_key_secrets().is_empty() {
        return Err("both OAuth token and SSH key secrets are specified".into());
    }
    Ok(())
}

/// A decorated job's decoration config as layers: the matching
/// `plank.default_decoration_config_entries` in order, then the job's own; a field
/// comes from the last layer that sets it (Prow's `ApplyDefault`).
pub(crate) struct DecorationView<'a> {
    layers: Vec<&'a DecorationConfig>,
}

impl<'a> DecorationView<'a> {
    /// `None` when the job is not decorated (Prow: `decoration_config` is nil).
    fn of(config: &'a ProwConfig, repo: &str, b: &'a JobBase) -> Option<Self> {
        let decorated = b.decorate == Some(true);
        if !decorated && b.decoration_config.is_none() {
            return None;
        }
        let mut layers = Vec::new();
        if decorated {
            layers.extend(default_decoration_entries(config, repo, &b.cluster));
        }
        layers.extend(b.decoration_config.as_ref());
        Some(DecorationView { layers })
    }

    fn image(&self, name: &str) -> Option<&'a str> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| {
                l.utility_images
                    .as_ref()?
                    .get(name)
                    .filter(|s| !s.is_empty())
            })
            .map(String::as_str)
    }

    fn gcs_str(&self, key: &str) -> Option<&'a str> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| l.gcs_configuration.as_ref()?.get(key)?.as_str())
    }

    fn oauth_token_secret_name(&self) -> Option<&'a str> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| l.oauth_token_secret.as_ref())
            .map(|s| s.get("name").and_then(|n| n.as_str()).unwrap_or_default())
    }

    fn ssh_key_secrets(&self) -> &'a [String] {
        self.layers
            .iter()
            .rev()
            .map(|l| l.ssh_key_secrets.as_slice())
            .find(|s| !s.is_empty())
            .unwrap_or_default()
    }
}

fn default_decoration_entries<'c>(
    config: &'c ProwConfig,
    repo: &str,
    cluster: &str,
) -> impl Iterator<Item = &'c DecorationConfig> {
    let org = repo.split('/').next().unwrap_or_default().to_string();
    let repo = repo.to_string();
    let cluster = cluster.to_string();
    config
        .plank
        .default_decoration_config_entries
        .iter()
        .filter(move |e| {
            let repo_ok = matches!(e.repo.as_str(), "" | "*") || e.repo == repo || e.repo == org;
            let cluster_ok = matches!(e.cluster.as_str(), "" | "*") || e.cluster == cluster;
            repo_ok && cluster_ok
        })
        .map(|e| &e.config)
}

/// The job's decoration config over every matching
/// `plank.default_decoration_config_entries` entry (later entries win);
/// `None` when the job is not decorated.
pub fn merged_decoration(config: &ProwConfig, repo: &str, b: &JobBase) -> Option<DecorationConfig> {
    let view = DecorationView::of(config, repo, b)?;
    Some(
        view.layers
            .iter()
            .fold(DecorationConfig::default(), |merged, layer| {
                overlay(merged, layer)
            }),
    )
}

/// `top`'s set fields over `base`'s.
fn overlay(base: DecorationConfig, top: &DecorationConfig) -> DecorationConfig {
    fn map_merge<V: Clone>(
        base: Option<BTreeMap<String, V>>,
        top: &Option<BTreeMap<String, V>>,
    ) -> Option<BTreeMap<String, V>> {
        match (base, top) {
            (None, t) => t.clone(),
            (b, None) => b,
            (Some(mut b), Some(t)) => {
                b.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(b)
            }
        }
    }
    fn json_merge(
        base: Option<serde_json::Value>,
        top: &Option<serde_json::Value>,
    ) -> Option<serde_json::Value> {
        match (base, top) {
            (Some(serde_json::Value::Object(mut b)), Some(serde_json::Value::Object(t))) => {
                b.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(serde_json::Value::Object(b))
            }
            (b, None) => b,
            (_, t) => t.clone(),
        }
    }
    fn vec_or(base: Vec<String>, top: &[String]) -> Vec<String> {
        if top.is_empty() {
            base
        } else {
            top.to_vec()
        }
    }
    DecorationConfig {
        timeout: top.timeout.or(base.timeout),
        grace_period: top.grace_period.or(base.grace_period),
        utility_images: map_merge(base.utility_images, &top.utility_images),
        resources: map_merge(base.resources, &top.resources),
        gcs_configuration: json_merge(base.gcs_configuration, &top.gcs_configuration),
        gcs_credentials_secret: top
            .gcs_credentials_secret
            .clone()
            .or(base.gcs_credentials_secret),
        s3_credentials_secret: top
            .s3_credentials_secret
            .clone()
            .or(base.s3_credentials_secret),
        default_service_account_name: top
            .default_service_account_name
            .clone()
            .or(base.default_service_account_name),
        ssh_key_secrets: vec_or(base.ssh_key_secrets, &top.ssh_key_secrets),
        ssh_host_fingerprints: vec_or(base.ssh_host_fingerprints, &top.ssh_host_fingerprints),
        skip_cloning: top.skip_cloning.or(base.skip_cloning),
        cookiefile_secret: top.cookiefile_secret.clone().or(base.cookiefile_secret),
        oauth_token_secret: top.oauth_token_secret.clone().or(base.oauth_token_secret),
        github_api_endpoints: vec_or(base.github_api_endpoints, &top.github_api_endpoints),
        github_app_id: top.github_app_id.clone().or(base.github_app_id),
        github_app_private_key_secret: top
            .github_app_private_key_secret
            .clone()
            .or(base.github_app_private_key_secret),
        censor_secrets: top.censor_secrets.or(base.censor_secrets),
        censoring_options: json_merge(base.censoring_options, &top.censoring_options),
        upload_ignores_interrupts: top
            .upload_ignores_interrupts
            .or(base.upload_ignores_interrupts),
        fs_group: top.fs_group.or(base.fs_group),
        run_as_user: top.run_as_user.or(base.run_as_user),
        run_as_group: top.run_as_group.or(base.run_as_group),
        set_limit_equals_memory_request: top
            .set_limit_equals_memory_request
            .or(base.set_limit_equals_memory_request),
        default_memory_request: top
            .default_memory_request
            .clone()
            .or(base.default_memory_request),
        blobless_fetch: top.blobless_fetch.or(base.blobless_fetch),
        pod_pending_timeout: top.pod_pending_timeout.or(base.pod_pending_timeout),
        pod_running_timeout: top.pod_running_timeout.or(base.pod_running_timeout),
        pod_unscheduled_timeout: top.pod_unscheduled_timeout.or(base.pod_unscheduled_timeout),
    }
}

/// Prow's `mergePreset`: a preset applies when the job carries all its labels.
pub fn merge_preset(
    preset: &Preset,
    labels: &BTreeMap<String, String>,
    spec: &mut PodSpec,
) -> Result<(), String> {
    if !preset_matches(preset, labels) {
        return Ok(());
    }
    for e in &preset.env {
        for c in &mut spec.containers {
            let env = c.env.get_or_insert_with(Vec::new);
            if env.iter().any(|x| x.name == e.name) {
                return Err(format!("env var duplicated in pod spec: {}", e.name));
            }
            env.push(e.clone());
        }
    }
    for v in &preset.volumes {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        if volumes.iter().any(|x| x.name == v.name) {
            return Err(format!("volume duplicated in pod spec: {}", v.name));
        }
        volumes.push(v.clone());
    }
    for t in &preset.tolerations {
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        if tolerations.contains(t) {
            return Err(format!("toleration duplicated in pod spec: {t:?}"));
        }
        tolerations.push(t.clone());
    }
    for m in &preset.volume_mounts {
        for c in &mut spec.containers {
            let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
            if mounts.iter().any(|x| x.name == m.name) {
                return Err(format!("volume mount duplicated in pod spec: {}", m.name));
            }
            mounts.push(m.clone());
        }
    }
    Ok(())
}

/// A preset applies when the job carries all its labels (an empty set matches all).
pub fn preset_matches(preset: &Preset, labels: &BTreeMap<String, String>) -> bool {
    preset.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// [`merge_preset`]'s duplicate checks for several presets in order, by name only:
/// `Err((index of the preset, message))`.
fn check_preset_merge<'p>(
    spec: &PodSpec,
    presets: impl Iterator<Item = &'p Preset>,
) -> Result<(), (usize, String)> {
    let mut env: Vec<HashSet<&str>> = spec
        .containers
        .iter()
        .map(|c| c.env.iter().flatten().map(|e| e.name.as_str()).collect())
        .collect();
    let mut volumes: HashSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    let mut mounts: Vec<HashSet<&str>> = spec
        .containers
        .iter()
        .map(|c| {
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.name.as_str())
                .collect()
        })
        .collect();
    let mut tolerations: Vec<&k8s_openapi::api::core::v1::Toleration> =
        spec.tolerations.iter().flatten().collect();
    for (i, p) in presets.enumerate() {
        for t in &p.tolerations {
            if tolerations.contains(&t) {
                return Err((i, format!("toleration duplicated in pod spec: {t:?}")));
            }
            tolerations.push(t);
        }
        for e in &p.env {
            for names in &mut env {
                if !names.insert(&e.name) {
                    return Err((i, format!("env var duplicated in pod spec: {}", e.name)));
                }
            }
        }
        for v in &p.volumes {
            if !volumes.insert(&v.name) {
                return Err((i, format!("volume duplicated in pod spec: {}", v.name)));
            }
        }
        for m in &p.volume_mounts {
            for names in &mut mounts {
                if !names.insert(&m.name) {
                    return Err((
                        i,
                        format!("volume mount duplicated in pod spec: {}", m.name),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Prow refuses two central presets sharing a `label: value` pair.
fn check_preset_pairs(presets: &[PresetDef], d: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<String, &PresetDef> = HashMap::new();
    for p in presets.iter().filter(|p| p.source == JobSource::Central) {
        for (k, v) in &p.preset.labels {
            let pair = format!("{k}:{v}");
            if let Some(first) = seen.get(&pair) {
                d.push(
                    Diagnostic::error(format!("duplicated preset 'label:value' pair : {pair}"))
                        .at_field(&p.origin.file, p.origin.mark, &format!("labels.{k}"))
                        .hint(format!(
                            "also used by the preset at {}:{}",
                            first.origin.file, first.origin.mark
                        )),
                );
            } else {
                seen.insert(pair, p);
            }
        }
    }
}

fn check_duplicate_periodics(periodics: &[Periodic], d: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<String, &Periodic> = HashMap::with_capacity(periodics.len());
    for p in periodics {
        let id = p.identity();
        if let Some(first) = seen.get(&id) {
            d.push(
                err_at(p, "name", format!("duplicated periodic job: {id}")).hint(format!(
                    "first defined at {}:{}",
                    first.origin.file, first.origin.mark
                )),
            );
        } else {
            seen.insert(id, p);
        }
    }
}

/// Prow's `Brancher`: which branches a job runs against. Regexes are unanchored,
/// as in Prow.
struct Brancher<'j> {
    branches: &'j [String],
    skip: &'j [String],
}

impl Brancher<'_> {
    fn all(&self) -> bool {
        self.branches.is_empty() && self.skip.is_empty()
    }

    fn should_run(&self, branch: &str, cache: &mut HashMap<String, Option<Regex>>) -> bool {
        if self.all() {
            return true;
        }
        let mut matches = |list: &[String]| {
            let joined = list.join("|");
            cache
                .entry(joined.clone())
                .or_insert_with(|| Regex::new(&joined).ok())
                .as_ref()
                .is_some_and(|re| re.is_match(branch))
        };
        if !self.skip.is_empty() && matches(self.skip) {
            return false;
        }
        self.branches.is_empty() || matches(self.branches)
    }

    /// Prow's `Brancher.Intersects`: patterns on both sides compare as strings.
    fn intersects(&self, other: &Brancher<'_>, cache: &mut HashMap<String, Option<Regex>>) -> bool {
        if self.all() || other.all() {
            return true;
        }
        if !self.branches.is_empty() {
            if !other.branches.is_empty() {
                return self.branches.iter().any(|b| other.branches.contains(b));
            }
            return self.branches.iter().any(|b| other.should_run(b, cache));
        }
        if other.branches.is_empty() {
            return true;
        }
        other.intersects(self, cache)
    }
}

/// Duplicate names and shared contexts among one repository's pre- or postsubmits,
/// counted only where branches intersect (central and in-repo together).
fn check_repo_jobs<K>(
    jobs: &[Job<K>],
    ty: JobType,
    parts: impl Fn(&Job<K>) -> (&Vec<String>, &Vec<String>, &String),
    d: &mut Vec<Diagnostic>,
) {
    let mut cache = HashMap::new();
    fn brancher<'j, K>(
        parts: &impl Fn(&Job<K>) -> (&Vec<String>, &Vec<String>, &String),
        j: &'j Job<K>,
    ) -> Brancher<'j> {
        let (branches, skip, _) = parts(j);
        Brancher { branches, skip }
    }
    let brancher = |j| brancher(&parts, j);
    let mut by_name: HashMap<&str, Vec<&Job<K>>> = HashMap::new();
    let mut by_context: HashMap<&str, Vec<&Job<K>>> = HashMap::new();
    for j in jobs {
        let earlier = by_name.entry(j.base.name.as_str()).or_default();
        if let Some(first) = earlier
            .iter()
            .find(|e| brancher(e).intersects(&brancher(j), &mut cache))
        {
            d.push(
                err_at(
                    j,
                    "name",
                    format!(
                        "duplicated {} jobs (consider both inrepo and central config): [{}]",
                        ty.as_str(),
                        j.base.name
                    ),
                )
                .hint(format!(
                    "also defined at {}:{} for intersecting branches",
                    first.origin.file, first.origin.mark
                )),
            );
        }
        earlier.push(j);
        by_context.entry(parts(j).2.as_str()).or_default().push(j);
    }
    for group in by_context.values().filter(|g| g.len() > 1) {
        for j in group {
            for other in group {
                if other.base.name == j.base.name {
                    continue;
                }
                if brancher(other).intersects(&brancher(j), &mut cache) {
                    d.push(err_at(
                        j,
                        "context",
                        format!(
                            "jobs {} and {} report to the same GitHub context {:?}",
                            other.base.name,
                            j.base.name,
                            parts(other).2
                        ),
                    ));
                }
            }
        }
    }
}

// --- Kubernetes name rules (apimachinery's IsQualifiedName / IsValidLabelValue).

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

fn regex_msg(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn anchored(fmt: &str) -> Regex {
    Regex::new(&format!("^{fmt}$")).expect("valid")
}

/// Kubernetes' `IsQualifiedName` errors.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    static NAME: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
    static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !SUBDOMAIN.is_match(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_msg(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"])
                    ));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_msg(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !NAME.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_msg(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Kubernetes' `IsValidLabelValue` errors.
pub fn label_value_errors(value: &str) -> Vec<String> {
    static VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !VALUE.is_match(value) {
        errs.push(regex_msg(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

// --- bosun's own sections.

fn validate_config(
    config: &ProwConfig,
    clusters: &Clusters<'_>,
    opts: &LoadOptions,
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
    let known = |alias: &str| {
        clusters.explicit.is_empty() || alias == "default" || clusters.explicit.contains(alias)
    };
    for alias in config.build_clusters.keys() {
        if opts.kubeconfig_clusters.iter().any(|c| c == alias) {
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
        if dispatcher.budget < 0 {
            d.push(err("dispatcher.budget must be a non-negative number".into()));
        }
        if dispatcher
            .hysteresis_percent
            .is_some_and(|h| !(0.0..=100.0).contains(&h))
        {
            d.push(err(
                "dispatcher.hysteresis_percent must be between 0 and 100".into(),
            ));
        }
    }
    for (i, src) in config.in_repo.iter().enumerate() {
        if !crate::load::valid_repo_name(&src.repo) {
            d.push(err(format!(
                "in_repo[{i}].repo must be ORG/REPO, found {:?}",
                src.repo
            )));
        }
        if src.path.is_empty() {
            d.push(err(format!("in_repo[{i}].path must be set")));
        }
    }
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
    if config.plank.max_concurrency < 0 {
        d.push(err(
            "plank.max_concurrency must be a non-negative number".into()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("preset-service-account").is_empty());
        assert!(qualified_name_errors("testgrid.k8s.io/dashboards").is_empty());
        assert_eq!(
            qualified_name_errors("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        let e = qualified_name_errors("bad label");
        assert_eq!(e, vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]);
        assert_eq!(qualified_name_errors("").len(), 2);
    }

    #[test]
    fn label_values() {
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("true").is_empty());
        assert_eq!(label_value_errors("-x").len(), 1);
        assert_eq!(label_value_errors(&"a".repeat(64)).len(), 1);
    }

    #[test]
    fn brancher_intersection_follows_prow() {
        let mut cache = HashMap::new();
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (main, main2, anchored_main) = (s(&["main"]), s(&["main"]), s(&["^main$"]));
        let none: Vec<String> = vec![];
        let b = |branches, skip| Brancher { branches, skip };
        assert!(b(&main, &none).intersects(&b(&main2, &none), &mut cache));
        // Pattern strings compare literally, as in Prow.
        assert!(!b(&main, &none).intersects(&b(&anchored_main, &none), &mut cache));
        assert!(b(&none, &none).intersects(&b(&main, &none), &mut cache));
        let rel = s(&["release-.*"]);
        let skip_main = s(&["main"]);
        assert!(!b(&main, &none).intersects(&b(&none, &skip_main), &mut cache));
        assert!(b(&main, &none).intersects(&b(&none, &rel), &mut cache));
        assert!(b(&none, &rel).intersects(&b(&main, &none), &mut cache));
        assert!(b(&none, &rel).intersects(&b(&none, &main), &mut cache));
    }

    #[test]
    fn in_repo_cluster_defaults() {
        let mut c = crate::load::default_config();
        assert!(in_repo_allows_cluster(&c, "o/r", "default"));
        assert!(!in_repo_allows_cluster(&c, "o/r", "trusted"));
        c.in_repo_config
            .allowed_clusters
            .insert("o".into(), vec!["build".into()]);
        assert!(in_repo_allows_cluster(&c, "o/r", "build"));
        c.in_repo_config.allowed_clusters.insert("*".into(), vec![]);
        assert!(!in_repo_allows_cluster(&c, "o/r", "default"));
    }

    #[test]
    fn default_trigger_matches_default_rerun_command() {
        for name in ["pull-kubernetes-e2e", "a.b_c", "x"] {
            let re = Regex::new(&default_trigger(name)).unwrap();
            assert!(re.is_match(&default_rerun_command(name)));
        }
    }
}
