//! Raw parse results: what the loader hands the validator. Files are read and
//! every job and preset is typed, with its origin, but nothing is defaulted or
//! validated yet.

use std::sync::Arc;

use crate::diag::Diagnostic;
use crate::model::{Job, LoadStats, PresetDef};
use crate::types::{PeriodicFields, PostsubmitFields, PresubmitFields, ProwConfig};
use crate::yaml::Mark;

/// Jobs and presets parsed from files, before defaulting and validation.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    /// The central config, its file and the position of its top-level mapping.
    pub config: Option<(ProwConfig, Arc<str>, Mark)>,
    /// Presets, central and in-repo, in the order read.
    pub presets: Vec<PresetDef>,
    /// Periodics.
    pub periodics: Vec<Job<PeriodicFields>>,
    /// Presubmits with their `org/repo`.
    pub presubmits: Vec<(String, Job<PresubmitFields>)>,
    /// Postsubmits with their `org/repo`.
    pub postsubmits: Vec<(String, Job<PostsubmitFields>)>,
    /// Problems found while reading and typing.
    pub diagnostics: Vec<Diagnostic>,
    /// What was read.
    pub stats: LoadStats,
}

impl Parsed {
    /// Adds `other`'s results after this one's (its config, if any, replaces ours).
    pub(crate) fn append(&mut self, mut other: Parsed) {
        self.presets.append(&mut other.presets);
        self.periodics.append(&mut other.periodics);
        self.presubmits.append(&mut other.presubmits);
        self.postsubmits.append(&mut other.postsubmits);
        self.diagnostics.append(&mut other.diagnostics);
        self.stats.files += other.stats.files;
        self.stats.bytes += other.stats.bytes;
        if other.config.is_some() {
            self.config = other.config;
        }
    }
}
