//! A job's build cluster: its alias must be known (`build_clusters` or a
//! kubeconfig context; `default` always is), should not be disabled, and a
//! trusted cluster takes only the jobs its allow rules admit ([`trust_admits`],
//! which the cluster registry also applies at run time). The clusters a job can
//! end up on ([`reachable_clusters`]) also decide what its decoration config
//! must hold: a job that only ever runs on local clusters needs no utility
//! images and no upload configuration.

use std::collections::BTreeSet;

use regex::Regex;

use crate::defaults::DecorationView;
use crate::diag::Diagnostic;
use crate::model::Job;
use crate::types::{ClusterKind, JobType, ProwConfig, TrustRule};

use super::ctx::{err_at, warn_at, Ctx};
use super::decoration;

/// A job's `cluster`: a known alias, not disabled, and when the cluster is trusted,
/// a job its allow rules admit.
pub(super) fn check<K>(
    ctx: &Ctx<'_>,
    job: &Job<K>,
    ty: JobType,
    repo: &str,
    d: &mut Vec<Diagnostic>,
) {
    // Prow validates the decoration config of a job with containers.
    if job
        .base
        .spec
        .as_ref()
        .is_some_and(|s| !s.containers.is_empty())
    {
        if let Some(dc) = DecorationView::of(ctx.config, repo, &job.base) {
            let local_only = lands_only_on_local(ctx, job, ty, repo);
            decoration::check_config(job, &dc, local_only, d);
        }
    }
    let alias = job.base.cluster.as_str();
    if !ctx.clusters.known(alias) {
        let known: Vec<&str> = std::iter::once("default")
            .chain(
                ctx.clusters
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
    if ctx.config.disabled_clusters.iter().any(|c| c == alias) {
        d.push(warn_at(
            job,
            "cluster",
            format!(
                "cluster {alias:?} is disabled (disabled_clusters): runs of this job fail at once"
            ),
        ));
    }
    if let Some(rules) = ctx
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
                    format!(
                        "job {} may not run on trusted cluster {alias:?}: no allow rule admits it",
                        job.base.name
                    ),
                )
                .hint(format!(
                    "add a rule to build_clusters.{alias}.trusted, or use another cluster"
                )),
            );
        }
    }
}

/// The build clusters a run of `job` can end up on, as far as the
/// configuration tells (a superset when unsure): its `cluster`; every cluster
/// of the inventory (`build_clusters`, the kubeconfig contexts
/// `kube_contexts`, `default`) when it can be relocated (a `dispatcher:`
/// section and the job is relocatable there, or, without one, a
/// `scheduler.external` dispatcher, which may answer any cluster); then,
/// repeatedly, where `scheduler.failover.mappings` and each cluster's
/// `failover_to` send runs. A cluster reached by relocation or failover is
/// left out when it is trusted and does not admit the job (bosun never moves a
/// run there). `ty` and `repo` are the job's type and the `org/repo` it is
/// defined for (a periodic's `extra_refs[0]`; empty when it has none), which
/// trusted clusters' allow rules match.
///
/// The validator relaxes the decoration requirements of a job that lands
/// only on local clusters by it; `bosun check` tells by it where a pipeline
/// job's runs can meet a local cluster.
pub fn reachable_clusters<'c, K>(
    config: &'c ProwConfig,
    kube_contexts: &'c [String],
    job: &'c Job<K>,
    ty: JobType,
    repo: &str,
) -> BTreeSet<&'c str> {
    reachable_in(config, &explicit(config, kube_contexts), job, ty, repo)
}

/// Whether `alias` is a local cluster: `kind: local` in `build_clusters`, or
/// the implicit `default` (when neither `build_clusters` nor one of the
/// kubeconfig contexts `kube_contexts` defines it). A kubeconfig context, or
/// an unknown alias, is not.
pub fn is_local_cluster(config: &ProwConfig, kube_contexts: &[String], alias: &str) -> bool {
    local_in(config, &explicit(config, kube_contexts), alias)
}

/// The aliases defined explicitly: `build_clusters` and the kubeconfig
/// contexts (the validator's `Clusters::explicit`).
fn explicit<'c>(config: &'c ProwConfig, kube_contexts: &'c [String]) -> BTreeSet<&'c str> {
    config
        .build_clusters
        .keys()
        .map(String::as_str)
        .chain(kube_contexts.iter().map(String::as_str))
        .collect()
}

/// [`reachable_clusters`] over the explicitly defined aliases `explicit`.
fn reachable_in<'c, K>(
    config: &'c ProwConfig,
    explicit: &BTreeSet<&'c str>,
    job: &'c Job<K>,
    ty: JobType,
    repo: &str,
) -> BTreeSet<&'c str> {
    let own = job.base.cluster.as_str();
    let relocatable = match &config.dispatcher {
        Some(dispatcher) => dispatcher.relocatable(own, job.cluster_written),
        None => config.scheduler.external.is_some(),
    };
    let admits = |alias: &str| {
        let repo = (!repo.is_empty()).then_some(repo);
        config
            .build_clusters
            .get(alias)
            .and_then(|c| c.trusted.as_ref())
            .is_none_or(|rules| trust_admits(rules, &job.base.name, repo, ty))
    };
    let mut set: BTreeSet<&'c str> = BTreeSet::from([own]);
    if relocatable {
        set.extend(
            explicit
                .iter()
                .copied()
                .chain(["default"])
                .filter(|c| admits(c)),
        );
    }
    let mut todo: Vec<&'c str> = set.iter().copied().collect();
    while let Some(alias) = todo.pop() {
        let mapped = config.scheduler.failover.mappings.get(alias);
        let failover = config
            .build_clusters
            .get(alias)
            .and_then(|c| c.failover_to.as_ref());
        for to in mapped.into_iter().chain(failover) {
            if admits(to) && set.insert(to.as_str()) {
                todo.push(to.as_str());
            }
        }
    }
    set
}

/// [`is_local_cluster`] over the explicitly defined aliases `explicit`.
fn local_in(config: &ProwConfig, explicit: &BTreeSet<&str>, alias: &str) -> bool {
    match config.build_clusters.get(alias) {
        Some(c) => c.kind == ClusterKind::Local,
        None => alias == "default" && !explicit.contains("default"),
    }
}

/// Whether every cluster a run of `job` can end up on is local (bosun's
/// relaxation of the decoration requirements).
pub(super) fn lands_only_on_local<K>(ctx: &Ctx<'_>, job: &Job<K>, ty: JobType, repo: &str) -> bool {
    let explicit = &ctx.clusters.explicit;
    reachable_in(ctx.config, explicit, job, ty, repo)
        .into_iter()
        .all(|c| local_in(ctx.config, explicit, c))
}

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
