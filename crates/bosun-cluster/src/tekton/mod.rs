//! Lighthouse's Tekton pipeline jobs (`agent: tekton-pipeline`, a `source:`
//! PipelineRun file beside `.lighthouse/*/triggers.yaml`): the PipelineRun
//! Lighthouse makes of a run ([`pipelinerun`], with its parameter templates
//! [`gotemplate`] and the `v1beta1` to `v1` conversion [`convert`]), the
//! Tekton types bosun reads ([`model`]), and the local executor's
//! step-by-step runner of an embedded `pipelineSpec` ([`local`]). Kubernetes
//! clusters run the PipelineRun itself (`kube::pipelines`).

pub mod command;
pub mod convert;
pub mod gotemplate;
pub mod local;
pub mod model;
pub mod pipelinerun;
