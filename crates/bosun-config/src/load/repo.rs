//! Loading one repository's in-repo configuration against a snapshot in
//! force: the daemon's way to follow repositories one at a time, so that a
//! bad repository never touches the central configuration or another
//! repository's jobs.
//!
//! The files are found, read and typed as [`load`](super::load) does for an
//! `in_repo` checkout (the same functions), and the jobs defaulted and
//! validated as it does in-repo jobs, against the snapshot's `config.yaml`,
//! central presets and central jobs: [`load_repo`] over a snapshot gives
//! the jobs `load` would give for the central configuration plus that
//! checkout, and [`Snapshot::with_repos`] puts them in a snapshot.

use std::path::PathBuf;
use std::sync::Arc;

use crate::diag::Diagnostic;
use crate::model::{LoadStats, RepoJobs, Snapshot};
use crate::names::{valid_branch_name, valid_repo_name};
use crate::parsed::Parsed;
use crate::source::FileSource;
use crate::validate::{self, ScheduleCheck};

use super::{checkout_files, label, parse_files, resolve_fields};

/// Which repository to load, and what its jobs are checked against besides
/// the snapshot.
#[derive(Clone)]
pub struct RepoLoadOptions {
    /// `org/name`.
    pub repo: String,
    /// The branch its jobs belong to (periodics' base ref).
    pub branch: String,
    /// Where the repository's files are in the file source, such as
    /// `org/name@COMMIT`: every file name in jobs' origins and in
    /// diagnostics starts with it.
    pub root: PathBuf,
    /// Cluster aliases defined by kubeconfig files, besides the snapshot's
    /// `build_clusters` (as [`LoadOptions::kubeconfig_clusters`](super::LoadOptions::kubeconfig_clusters)).
    pub kubeconfig_clusters: Vec<String>,
    /// Validates schedules (cron, time zones); the schedule engine provides it.
    pub schedule_check: Option<Arc<dyn ScheduleCheck>>,
}

/// The outcome of loading one repository.
#[derive(Debug)]
pub struct RepoLoaded {
    /// The repository's jobs, when there were no errors.
    pub jobs: Option<RepoJobs>,
    /// Every problem found, sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
    /// What was read (also when there were errors).
    pub stats: LoadStats,
}

impl RepoLoaded {
    /// Number of errors.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
}

/// Loads and validates the in-repo configuration of `opts.repo`, its files
/// under `opts.root` in `fs` (Prow's `.prow.yaml` or `.prow/`, Lighthouse's
/// `.lighthouse/*/triggers.yaml` with their `source:` files), against
/// `base`: its `config.yaml`, its central presets (with the repository's
/// own) and build clusters (with `opts.kubeconfig_clusters`); names and
/// contexts are checked against `base`'s central jobs of the repository.
/// `base`'s in-repo jobs, of this repository or another, play no part.
pub fn load_repo(base: &Snapshot, opts: &RepoLoadOptions, fs: &dyn FileSource) -> RepoLoaded {
    let mut diagnostics = Vec::new();
    let root = label(&opts.root);
    if !valid_repo_name(&opts.repo) {
        diagnostics.push(
            Diagnostic::error(format!("repository {:?} must be ORG/REPO", opts.repo))
                .in_file(&root),
        );
    }
    if !valid_branch_name(&opts.branch) {
        diagnostics.push(
            Diagnostic::error(format!(
                "{:?} is not a valid branch name for {}",
                opts.branch, opts.repo
            ))
            .in_file(&root),
        );
    }
    if !diagnostics.is_empty() {
        return RepoLoaded {
            jobs: None,
            diagnostics,
            stats: LoadStats::default(),
        };
    }

    let mut files = Vec::new();
    checkout_files(
        fs,
        &opts.repo,
        &opts.branch,
        &opts.root,
        &mut files,
        &mut diagnostics,
    );
    let mut parsed = Parsed::default();
    parse_files(fs, &files, &mut parsed, &mut Default::default());
    diagnostics.append(&mut parsed.diagnostics);
    let stats = parsed.stats.clone();
    let out = validate::finish_repo(
        base,
        &opts.repo,
        parsed,
        &opts.kubeconfig_clusters,
        opts.schedule_check.as_deref(),
        &mut diagnostics,
    );
    resolve_fields(fs, &mut diagnostics);
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    diagnostics.dedup();
    let ok = !diagnostics.iter().any(Diagnostic::is_error);
    RepoLoaded {
        jobs: ok.then(|| {
            RepoJobs::new(
                opts.repo.clone(),
                opts.branch.clone(),
                &out.presets,
                out.periodics,
                out.presubmits,
                out.postsubmits,
                stats.clone(),
            )
        }),
        diagnostics,
        stats,
    }
}
