//! A job's build cluster: its alias must be known (`build_clusters` or a
//! kubeconfig context; `default` always is), should not be disabled, and a
//! trusted cluster takes only the jobs its allow rules admit ([`trust_admits`],
//! which the cluster registry also applies at run time).

use regex::Regex;

use crate::diag::Diagnostic;
use crate::model::Job;
use crate::types::{JobType, TrustRule};

use super::ctx::{err_at, warn_at, Ctx};

/// A job's `cluster`: a known alias, not disabled, and when the cluster is trusted,
/// a job its allow rules admit.
pub(super) fn check<K>(
    ctx: &Ctx<'_>,
    job: &Job<K>,
    ty: JobType,
    repo: &str,
    d: &mut Vec<Diagnostic>,
) {
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
