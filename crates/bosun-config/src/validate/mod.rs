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
//!
//! `finish` validates everything one load read; `finish_repo` one repository's
//! in-repo configuration against a snapshot in force, with the same per-job
//! and cross-job checks (its central jobs standing in for the rest of a load).

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
use crate::model::{Job, Periodic, Postsubmit, PresetDef, Presubmit, Snapshot};
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

    let clusters = Clusters::new(&config, inputs.kubeconfig_clusters);
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
    each_job(
        &ctx,
        &mut periodics,
        &mut presubmits,
        &mut postsubmits,
        diags,
    );

    duplicates::periodics(&periodics, diags);
    let pre_by_repo = by_repo(presubmits);
    let post_by_repo = by_repo(postsubmits);
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
    if placed_by_name(&config) {
        duplicates::clusters_by_name(
            &periodics,
            pre_by_repo.values().flatten(),
            post_by_repo.values().flatten(),
            &|_| true,
            diags,
        );
    }
    Some((config, presets, periodics, pre_by_repo, post_by_repo))
}

/// One repository's jobs, validated against a snapshot in force: the presets
/// they may use (the snapshot's central ones, then the repository's own;
/// the jobs' preset indexes point here), its periodics, presubmits and
/// postsubmits.
pub(crate) struct RepoOutput {
    pub presets: Vec<PresetDef>,
    pub periodics: Vec<Periodic>,
    pub presubmits: Vec<Presubmit>,
    pub postsubmits: Vec<Postsubmit>,
}

/// Defaults and validates the in-repo configuration of `repo` (what `parsed`
/// holds) as [`finish`] does its in-repo jobs, against `base`: its
/// `config.yaml`, its central presets and, for the checks across jobs, its
/// central jobs (`base`'s in-repo jobs, this repository's earlier version
/// and the other repositories', play no part). Problems go to `diags`.
pub(crate) fn finish_repo(
    base: &Snapshot,
    repo: &str,
    parsed: Parsed,
    kubeconfig_clusters: &[String],
    schedule: Option<&dyn ScheduleCheck>,
    diags: &mut Vec<Diagnostic>,
) -> RepoOutput {
    let Parsed {
        presets: own_presets,
        mut periodics,
        mut presubmits,
        mut postsubmits,
        ..
    } = parsed;
    let config = &base.config;
    let central = |s: &JobSource| *s == JobSource::Central;
    let presets: Vec<PresetDef> = base
        .presets
        .iter()
        .filter(|p| central(&p.source))
        .cloned()
        .chain(own_presets)
        .collect();
    let clusters = Clusters::new(config, kubeconfig_clusters);
    let ctx = Ctx {
        config,
        clusters: &clusters,
        presets: &presets,
        schedule,
    };
    each_job(
        &ctx,
        &mut periodics,
        &mut presubmits,
        &mut postsubmits,
        diags,
    );
    // Every job of the repository's own files is keyed by the repository.
    let presubmits: Vec<Presubmit> = presubmits.into_iter().map(|(_, j)| j).collect();
    let postsubmits: Vec<Postsubmit> = postsubmits.into_iter().map(|(_, j)| j).collect();

    // An in-repo periodic's identity is `org/repo:name`, which no central
    // periodic's name can be (no job name has a `:`).
    duplicates::periodics(&periodics, diags);
    duplicates::repo_jobs(
        central_of(&base.presubmits, repo).chain(&presubmits),
        JobType::Presubmit,
        |j| (&j.kind.branches, &j.kind.skip_branches, &j.kind.context),
        diags,
    );
    duplicates::repo_jobs(
        central_of(&base.postsubmits, repo).chain(&postsubmits),
        JobType::Postsubmit,
        |j| (&j.kind.branches, &j.kind.skip_branches, &j.kind.context),
        diags,
    );
    if placed_by_name(config) {
        // In `finish`'s order (periodics, then by repository, central jobs
        // first), told about the repository's own jobs only.
        duplicates::clusters_by_name(
            base.periodics
                .iter()
                .filter(|j| central(&j.source))
                .chain(&periodics),
            central_with(&base.presubmits, repo, &presubmits),
            central_with(&base.postsubmits, repo, &postsubmits),
            &|s| !central(s),
            diags,
        );
    }
    RepoOutput {
        presets,
        periodics,
        presubmits,
        postsubmits,
    }
}

/// Jobs sharing a name are one unit for the dispatcher, and an external
/// scheduler answers by name: with either, their clusters are compared.
fn placed_by_name(config: &ProwConfig) -> bool {
    config.dispatcher.is_some() || config.scheduler.external.is_some()
}

/// Jobs by `org/repo`, each repository's in the order given.
fn by_repo<K>(jobs: Vec<(String, Job<K>)>) -> BTreeMap<String, Vec<Job<K>>> {
    let mut out: BTreeMap<String, Vec<Job<K>>> = BTreeMap::new();
    for (repo, job) in jobs {
        out.entry(repo).or_default().push(job);
    }
    out
}

/// The central jobs of `repo` in `by_repo`.
fn central_of<'j, K>(
    by_repo: &'j BTreeMap<String, Vec<Job<K>>>,
    repo: &str,
) -> impl Iterator<Item = &'j Job<K>> {
    let jobs = by_repo.get(repo).into_iter().flatten();
    jobs.filter(|j| j.source == JobSource::Central)
}

/// The central jobs of `by_repo`, with `own` after the central jobs of `repo`:
/// the order [`finish`] would see them in.
fn central_with<'j, K>(
    by_repo: &'j BTreeMap<String, Vec<Job<K>>>,
    repo: &str,
    own: &'j [Job<K>],
) -> Vec<&'j Job<K>> {
    let mut out = Vec::new();
    let mut own_added = false;
    for (r, jobs) in by_repo {
        if !own_added && r.as_str() > repo {
            out.extend(own);
            own_added = true;
        }
        out.extend(jobs.iter().filter(|j| j.source == JobSource::Central));
        if r == repo {
            out.extend(own);
            own_added = true;
        }
    }
    if !own_added {
        out.extend(own);
    }
    out
}

/// Defaults and checks every job on its own, in parallel.
fn each_job(
    ctx: &Ctx<'_>,
    periodics: &mut [Periodic],
    presubmits: &mut [(String, Presubmit)],
    postsubmits: &mut [(String, Postsubmit)],
    diags: &mut Vec<Diagnostic>,
) {
    let mut found: Vec<Vec<Diagnostic>> = Vec::new();
    periodics
        .par_iter_mut()
        .map(|j| periodic(ctx, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
    presubmits
        .par_iter_mut()
        .map(|(repo, j)| presubmit(ctx, repo, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
    postsubmits
        .par_iter_mut()
        .map(|(repo, j)| postsubmit(ctx, repo, j))
        .collect_into_vec(&mut found);
    diags.extend(found.drain(..).flatten());
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
