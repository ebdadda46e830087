//! The dispatcher's I/O: where job demand comes from (bosun's run history,
//! Prometheus, OpenShift's `job_volume.json`) and how it is kept; the
//! plan on disk (`persist`), its chart (`plot`) and the HTTP service that
//! answers from it (`service`).

pub mod cli;
pub mod client;
pub mod demand;
pub mod engine;
pub mod inputs;
pub mod override_cli;
pub mod persist;
pub mod plot;
pub mod prometheus;
pub mod service;
pub mod writeback;
