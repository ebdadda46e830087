//! The programs that run inside a job on a local cluster, as Prow's pod
//! utilities and Tekton run inside a pod:
//!
//! - `bosun run-decorated` ([`decorated`]): a decorated run, which clones
//!   its refs ([`clone`], Prow's clonerefs, through `bosun_git`'s mirrors),
//!   runs the test under entrypoint's rules ([`entrypoint`]) and lays out
//!   Prow's files (`started.json`, `finished.json`, `build-log.txt`,
//!   `clone-records.json`, `artifacts/`) in the run's directory;
//! - `bosun run-pipeline` ([`pipeline`]): a Lighthouse pipeline run, its
//!   tasks and steps as processes.
//!
//! A decorated run on Kubernetes runs Prow's released utility images
//! unchanged (`bosun_cluster::kube::decorate` builds their pod). Plain
//! blocking code: no async runtime, no cluster client.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clone;
pub mod decorated;
pub mod entrypoint;
pub mod pipeline;
