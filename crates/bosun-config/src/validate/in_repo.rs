//! `in_repo_config`: whether a repository's in-repo configuration is enabled,
//! and the rule that in-repo jobs (Prow's `.prow.yaml`, Lighthouse's triggers)
//! may run only on the clusters `in_repo_config.allowed_clusters` allows for
//! their repository.

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

/// Prow's `InRepoConfigEnabled`: whether in-repo configuration is enabled for
/// `org_repo` (`org/repo`), the most specific key of `in_repo_config.enabled`
/// winning: `org/repo`, then `org`, then `*`; off when none is written.
/// (Prow's Gerrit host keys, `https://host/repo`, are not read.)
pub fn in_repo_config_enabled(config: &ProwConfig, org_repo: &str) -> bool {
    let enabled = &config.in_repo_config.enabled;
    let org = org_repo.split_once('/').map(|(org, _)| org);
    enabled
        .get(org_repo)
        .or_else(|| org.and_then(|org| enabled.get(org)))
        .or_else(|| enabled.get("*"))
        .copied()
        .unwrap_or(false)
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

    #[test]
    fn in_repo_config_enabled_follows_the_most_specific_key() {
        let mut c = crate::defaults::default_config();
        let set = |c: &mut ProwConfig, key: &str, on: bool| {
            c.in_repo_config.enabled.insert(key.into(), on);
        };
        assert!(!in_repo_config_enabled(&c, "o/r"), "off by default");
        set(&mut c, "*", true);
        assert!(in_repo_config_enabled(&c, "o/r"));
        set(&mut c, "o", false);
        assert!(!in_repo_config_enabled(&c, "o/r"), "org over *");
        assert!(in_repo_config_enabled(&c, "other/r"));
        set(&mut c, "o/r", true);
        assert!(in_repo_config_enabled(&c, "o/r"), "org/repo over org");
        assert!(!in_repo_config_enabled(&c, "o/s"));
        // A name without a `/` is looked up as a whole, then `*`.
        assert!(in_repo_config_enabled(&c, "o2"));
        set(&mut c, "o2", false);
        assert!(!in_repo_config_enabled(&c, "o2"));
    }
}
