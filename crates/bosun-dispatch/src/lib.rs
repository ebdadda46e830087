//! bosun's dispatcher core: which build cluster each job runs on.
//!
//! Pure planning: the cluster inventory (`inventory`), the placement rules
//! that make each unit of jobs eligible for some clusters or pin it to one
//! (`rules`, and `openshift` for OpenShift's `_config.yaml`), demand per job
//! (`demand`), and the balancing plan with an explanation for every
//! assignment (`plan`), over the shared vocabulary of `model`. The formats
//! it reads and writes are its own (`format`); it does no other I/O, reads
//! no clock and spawns nothing: the daemon and the standalone service feed
//! it and serve its answers.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adjust;
pub mod demand;
pub mod format;
pub mod inventory;
pub mod jobs;
pub mod lookup;
pub mod model;
pub mod openshift;
pub mod plan;
pub mod rules;
