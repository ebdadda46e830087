//! Lighthouse's Tekton pipeline jobs (`agent: tekton-pipeline`, a `source:`
//! PipelineRun file beside `.lighthouse/*/triggers.yaml`), as pure data and
//! functions:
//!
//! - [`model`]: the `tekton.dev/v1` types bosun reads (unknown fields kept),
//!   Jenkins X `uses:` references;
//! - [`convert`]: `v1beta1` to `v1` for the fields people write;
//! - [`gotemplate`]: Lighthouse's `pipeline_run_params` templates, on
//!   bosun-job's template engine;
//! - [`pipelinerun`]: the PipelineRun Lighthouse's `makePipelineRun` makes of
//!   a run;
//! - [`local`]: what a local cluster can run, checked as Tekton and the local
//!   runner check it (the plan of a run, its variables), and what a local
//!   pipeline run is given.
//!
//! It runs nothing and talks to no cluster: Kubernetes clusters run the
//! PipelineRun (`bosun_cluster::kube::pipelines`), local clusters run the
//! plan step by step (`bosun_injob::pipeline`); `bosun check` and every
//! configuration load report what would end a pipeline job's runs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The agent of Lighthouse's Tekton pipeline jobs.
pub const PIPELINE_AGENT: &str = "tekton-pipeline";

pub mod convert;
pub mod gotemplate;
pub mod local;
pub mod model;
pub mod pipelinerun;
