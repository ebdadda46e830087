//! Prow's pod utilities as bosun runs them: the vocabulary both executors
//! share (where refs are cloned, which clone is the working directory) and the
//! local executor's own clonerefs ([`clone`], [`mirror`]), entrypoint
//! ([`entrypoint`]) and artifact layout ([`artifacts`]).
//!
//! A decorated run on Kubernetes runs Prow's released utility images
//! unchanged (`kube::decorate` builds their pod); a decorated run on a local
//! cluster runs these modules inside `bosun run-decorated`, which lays out the
//! same files (`started.json`, `finished.json`, `build-log.txt`,
//! `clone-records.json`, `artifacts/`, ...) in the run's directory. This module
//! depends on neither executor.

pub mod artifacts;
pub mod clone;
pub mod decorated;
pub mod entrypoint;
mod git;
pub mod gojson;
pub mod job;
pub mod mirror;
pub mod refs;
