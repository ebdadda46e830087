//! The dispatcher's I/O: where job demand comes from (bosun's run history,
//! Prometheus, OpenShift's `job_volume.json`) and how it is kept.

pub mod demand;
pub mod prometheus;
