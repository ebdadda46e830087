//! In-repo jobs (Prow's `.prow.yaml`, Lighthouse's triggers) may run only on the
//! clusters `in_repo_config.allowed_clusters` allows for their repository.

use crate::diag::Diagnostic;
use crate::model::Job;
use crate::types::{JobSource, ProwConfig};

use super::ctx::err_at;

/// In-repo jobs may use only the clusters `in_repo_config.allowed_clusters` allows.
pub(super) fn check_cluster<K>(
    config: &ProwConfig,
    job: &Job<K>,
    repo: &str,
    d: &mut Vec<Diagnostic>,
) {
    if !matches!(job.source, JobSource::InRepo { .. }) {
        return;
    }
    if !in_repo_allows_cluster(config, repo, &job.base.cluster) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_repo_cluster_defaults() {
        let mut c = crate::defaults::default_config();
        assert!(in_repo_allows_cluster(&c, "o/r", "default"));
        assert!(!in_repo_allows_cluster(&c, "o/r", "trusted"));
        c.in_repo_config
            .allowed_clusters
            .insert("o".into(), vec!["build".into()]);
        assert!(in_repo_allows_cluster(&c, "o/r", "build"));
        c.in_repo_config.allowed_clusters.insert("*".into(), vec![]);
        assert!(!in_repo_allows_cluster(&c, "o/r", "default"));
    }
}
