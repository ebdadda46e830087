//! Defaulting and validation: Prow's rules, with Prow's error texts where Prow has
//! them, plus bosun's own. One validator serves `bosun check` and the daemon.
//!
//! This module only orchestrates; each concern has its own (private) module. Order
//! follows Prow: `config.yaml`'s own sections and the central presets are checked
//! (`config`, `presets`), every job is defaulted (`crate::defaults`, then
//! `presets`), then validated on its own (`base`, which calls `pod_spec`,
//! `decoration`, `warnings` and `clusters`; then `triggers`, `periodic`,
//! `in_repo`), then checked against the others (`duplicates`). Schedules are
//! checked through the [`ScheduleCheck`] hook (`schedule`), which the schedule
//! engine implements.

mod base;
mod clusters;
mod config;
mod ctx;
mod decoration;
mod duplicates;
mod in_repo;
mod periodic;
mod pod_spec;
mod presets;
mod schedule;
mod triggers;
mod warnings;

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::defaults;
use crate::diag::Diagnostic;
use crate::model::{Job, Periodic, Postsubmit, PresetDef, Presubmit};
use crate::parsed::Parsed;
use crate::types::{JobSource, JobType, ProwConfig};

use self::ctx::{Clusters, Ctx};

pub use self::clusters::{is_local_cluster, reachable_clusters, trust_admits};
pub use self::in_repo::{in_repo_allows_cluster, in_repo_config_enabled};
pub use self::pod_spec::reserved_env;
pub use self::schedule::{ScheduleCheck, ScheduleProblem};
pub use crate::defaults::{
    default_rerun_command, default_trigger, merge_preset, merged_decoration, preset_matches,
    PresetMergeError,
};
pub use crate::names::{label_value_errors, qualified_name_errors, JOB_NAME_REGEX, MAX_LABEL_LEN};

/// What the validator reads besides the parsed files.
pub(crate) struct Inputs<'a> {
    /// The central config file, as diagnostics about its sections name it.
    pub config_file: Arc<str>,
    /// Cluster aliases defined by kubeconfig contexts.
    pub kubeconfig_clusters: &'a [String],
    /// The schedule engine's check, when there is one.
    pub schedule: Option<&'a dyn ScheduleCheck>,
}

/// The validated configuration: the config, the presets, the periodics, and the
/// presubmits and postsubmits by `org/repo`.
pub(crate) type Output = (
    ProwConfig,
    Vec<PresetDef>,
    Vec<Periodic>,
    BTreeMap<String, Vec<Presubmit>>,
    BTreeMap<String, Vec<Postsubmit>>,
);

/// Defaults and validates everything parsed; problems go to `diags`.
pub(crate) fn finish(
    config: ProwConfig,
    parsed: Parsed,
    inputs: &Inputs<'_>,
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

    let clusters = Clusters {
        explicit: config
            .build_clusters
            .keys()
            .map(String::as_str)
            .chain(inputs.kubeconfig_clusters.iter().map(String::as_str))
            .collect(),
        config: &config,
    };
    config::check(
        &config,
        &clusters,
        inputs.kubeconfig_clusters,
        inputs.schedule,
        &inputs.config_file,
        config_root,
        diags,
    );
    presets::check_pairs(&presets, diags);

    let ctx = Ctx {
        config: &config,
        clusters: &clusters,
        presets: &presets,
        schedule: inputs.schedule,
    };

    let mut found: Vec<Vec<Diagnostic>> = Vec::new();
    periodics
        .par_iter_mut()
        .map(|j| periodic(&ctx, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
    presubmits
        .par_iter_mut()
        .map(|(repo, j)| presubmit(&ctx, repo, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
    postsubmits
        .par_iter_mut()
        .map(|(repo, j)| postsubmit(&ctx, repo, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());

    duplicates::periodics(&periodics, diags);
    let mut pre_by_repo: BTreeMap<String, Vec<Presubmit>> = BTreeMap::new();
    for (repo, job) in presubmits {
        pre_by_repo.entry(repo).or_default().push(job);
    }
    let mut post_by_repo: BTreeMap<String, Vec<Postsubmit>> = BTreeMap::new();
    for (repo, job) in postsubmits {
        post_by_repo.entry(repo).or_default().push(job);
    }
    for jobs in pre_by_repo.values() {
        duplicates::repo_jobs(
            jobs,
            JobType::Presubmit,
            |j| (&j.kind.branches, &j.kind.skip_branches, &j.kind.context),
            diags,
        );
    }
    for jobs in post_by_repo.values() {
        duplicates::repo_jobs(
            jobs,
            JobType::Postsubmit,
            |j| (&j.kind.branches, &j.kind.skip_branches, &j.kind.context),
            diags,
        );
    }
    if config.dispatcher.is_some() || config.scheduler.external.is_some() {
        duplicates::clusters_by_name(&periodics, &pre_by_repo, &post_by_repo, diags);
    }
    Some((config, presets, periodics, pre_by_repo, post_by_repo))
}

/// Prow's `defaultJobBase`, decoration defaults and presets.
fn default_base<K>(ctx: &Ctx<'_>, job: &mut Job<K>) -> Vec<Diagnostic> {
    defaults::default_job_base(&mut job.base, ctx.config);
    presets::apply(ctx.presets, job)
}

/// One periodic: defaults, the job base (only when defaulting found no error),
/// its schedule, its cluster if in-repo.
fn periodic(ctx: &Ctx<'_>, job: &mut Periodic) -> Vec<Diagnostic> {
    let repo = job
        .base
        .extra_refs
        .first()
        .map(|r| format!("{}/{}", r.org, r.repo))
        .unwrap_or_default();
    let mut d = default_base(ctx, job);
    if !d.iter().any(Diagnostic::is_error) {
        base::check(ctx, job, JobType::Periodic, &repo, &mut d);
    }
    periodic::check(ctx.schedule, job, &mut d);
    if let JobSource::InRepo { repo, .. } = &job.source {
        in_repo::check_cluster(ctx.config, job, repo, &mut d);
    }
    d
}

/// One presubmit: defaults and regexes, the job base (only when those found no
/// error), triggering and reporting, its cluster if in-repo.
fn presubmit(ctx: &Ctx<'_>, repo: &str, job: &mut Presubmit) -> Vec<Diagnostic> {
    defaults::default_presubmit(&job.base.name, &mut job.kind);
    let mut d = default_base(ctx, job);
    d.extend(triggers::presubmit_regexes(job));
    if !d.iter().any(Diagnostic::is_error) {
        base::check(ctx, job, JobType::Presubmit, repo, &mut d);
    }
    triggers::check_presubmit(job, &mut d);
    in_repo::check_cluster(ctx.config, job, repo, &mut d);
    d
}

/// One postsubmit: defaults and regexes, the job base (only when those found no
/// error), triggering and reporting, its cluster if in-repo.
fn postsubmit(ctx: &Ctx<'_>, repo: &str, job: &mut Postsubmit) -> Vec<Diagnostic> {
    defaults::default_postsubmit(&job.base.name, &mut job.kind);
    let mut d = default_base(ctx, job);
    triggers::postsubmit_regexes(job, &mut d);
    if !d.iter().any(Diagnostic::is_error) {
        base::check(ctx, job, JobType::Postsubmit, repo, &mut d);
    }
    triggers::check_postsubmit(job, &mut d);
    in_repo::check_cluster(ctx.config, job, repo, &mut d);
    d
}
