//! A Tekton pipeline run on a local cluster, step by step as processes
//! (`bosun run-pipeline`): [`run::run_pipeline`] runs the plan
//! `bosun_tekton::local` checks (what runs and what is refused is said
//! there); [`command`] is the program the local executor's supervisor
//! starts.

pub mod command;
pub mod run;

pub use run::run_pipeline;
