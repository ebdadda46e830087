//! bosun's configuration layer: Prow's job configuration exactly as people write it
//! today (central `config.yaml` and job-config directories), in-repo configuration
//! (Prow's `.prow.yaml` / `.prow/` and Lighthouse's `.lighthouse/*/triggers.yaml`),
//! and bosun's own additions, loaded into one immutable [`Snapshot`] and validated
//! with diagnostics that name the file, line, column and job.
//!
//! This crate does no network I/O, touches no store and reads no clock: files come
//! through a [`FileSource`], and schedule checks through a [`ScheduleCheck`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod diag;
pub mod duration;
pub mod load;
pub mod model;
pub mod plugins;
pub mod source;
pub mod types;
pub mod validate;
pub mod yaml;

mod defaults;
mod names;
mod parsed;

pub use diag::{Diagnostic, Severity};
pub use duration::GoDuration;
pub use load::{load, load_repo, LoadOptions, Loaded, RepoLoadOptions, RepoLoaded};
pub use model::{Job, JobCounts, Origin, Periodic, Postsubmit, Presubmit, RepoJobs, Snapshot};
pub use source::{FileSource, OsFiles};
pub use validate::{ScheduleCheck, ScheduleProblem};
