//! Kubernetes build clusters through kube-rs, one module per concern:
//!
//! - [`client`](mod@client): a client per kubeconfig context, every call bounded by
//!   [`API_TIMEOUT`], and the errors of reaching a cluster ([`ApiError`]);
//! - [`health`]: the health probe and the [`Tracker`] of successive probes;
//! - [`pod`]: a run's pod, built as plank builds it, and [`decorate`]: the
//!   pod utilities of a decorated run's pod;
//! - [`pipelines`]: a pipeline run's Tekton PipelineRun (its name, state,
//!   cancellation and logs);
//! - [`executor`]: [`KubeExecutor`], the [`Executor`](crate::executor::Executor)
//!   of a Kubernetes cluster, which ties the private parts together: the
//!   watch of bosun's pods and its cache (`watch`), the copy of each pod's log
//!   into its run's log file (`logs`), the pace of creations (`pace`:
//!   bounded, fair across jobs, held back after a 429) and the deletion of
//!   finished pods (`sinker`).
//!
//! This module knows nothing of local runs; the executor's vocabulary comes
//! from [`crate::executor`].

pub mod client;
pub mod decorate;
pub mod executor;
pub mod health;
mod logs;
mod pace;
pub mod pipelines;
pub mod pod;
mod sinker;
mod watch;

pub use client::{client, ApiError, API_TIMEOUT};
pub use executor::{pod_state, KubeExecutor, PodSettings};
pub use health::{probe, probe_with_pipelines, Health, Probe, Tracker, POD_VERBS};
pub use pace::DEFAULT_CREATIONS_IN_FLIGHT;
