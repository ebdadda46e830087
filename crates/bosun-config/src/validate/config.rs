//! The central `config.yaml`'s own sections: bosun's `build_clusters` (limits,
//! failover, kind-specific fields, trusted-cluster rules), `scheduler.failover`,
//! `dispatcher`, `in_repo` sources and `plank`'s queues and limits.

use std::sync::Arc;

use regex::Regex;

use crate::diag::Diagnostic;
use crate::names::{short_regex_error, valid_repo_name};
use crate::types::{ClusterKind, DemandSource, ProwConfig};
use crate::yaml::Mark;

use super::ctx::Clusters;

/// Checks `config.yaml`'s own sections; diagnostics point below `root`, the
/// config file's top-level mapping.
pub(super) fn check(
    config: &ProwConfig,
    clusters: &Clusters<'_>,
    kubeconfig_clusters: &[String],
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
        if !valid_repo_name(&src.repo) {
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
