//! What every check reads (the central config, the known cluster aliases, the
//! presets and the schedule hook), and how a finding about a job's field becomes a
//! diagnostic pointing at that field.

use std::collections::BTreeSet;

use crate::diag::{Diagnostic, Severity};
use crate::model::{Job, PresetDef};
use crate::types::ProwConfig;

use super::schedule::ScheduleCheck;

/// Cluster aliases configured explicitly (build_clusters, kubeconfig contexts).
pub(super) struct Clusters<'c> {
    pub(super) explicit: BTreeSet<&'c str>,
    pub(super) config: &'c ProwConfig,
}

impl<'c> Clusters<'c> {
    /// The aliases `config.build_clusters` and the kubeconfig contexts define.
    pub(super) fn new(config: &'c ProwConfig, kubeconfig_clusters: &'c [String]) -> Self {
        Clusters {
            explicit: config
                .build_clusters
                .keys()
                .map(String::as_str)
                .chain(kubeconfig_clusters.iter().map(String::as_str))
                .collect(),
            config,
        }
    }

    /// A job's alias is checked only when clusters are configured explicitly, and
    /// never against `default`, which always exists (implicitly local when nothing
    /// defines it).
    pub(super) fn known(&self, alias: &str) -> bool {
        self.explicit.is_empty() || alias == "default" || self.explicit.contains(alias)
    }
}

/// Everything a job's checks read besides the job.
pub(super) struct Ctx<'c> {
    pub(super) config: &'c ProwConfig,
    pub(super) clusters: &'c Clusters<'c>,
    pub(super) presets: &'c [PresetDef],
    pub(super) schedule: Option<&'c dyn ScheduleCheck>,
}

/// An error about `job`'s field `path` (its own key when the origin has it, else
/// found below the definition when the diagnostic is printed).
pub(super) fn err_at<K>(job: &Job<K>, path: &str, msg: impl Into<String>) -> Diagnostic {
    let d = Diagnostic::error(msg);
    match job.origin.key(path) {
        Some(mark) => d.at(&job.origin.file, mark),
        None => d.at_field(&job.origin.file, job.origin.mark, path),
    }
    .job(job.base.name.clone())
}

/// A warning about `job`'s field `path`, placed as [`err_at`] places errors.
pub(super) fn warn_at<K>(job: &Job<K>, path: &str, msg: impl Into<String>) -> Diagnostic {
    Diagnostic {
        severity: Severity::Warning,
        ..err_at(job, path, msg)
    }
}
