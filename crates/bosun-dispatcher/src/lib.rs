//! The dispatcher service: `bosun dispatch` (plan, write-back, override) and
//! `bosun dispatcher` (Prow's external scheduling strategy answered from a
//! balanced plan), over `bosun-dispatch`'s pure planner. It owns the
//! dispatcher's I/O: the planner's input from the configuration and
//! OpenShift's files (`inputs`), where job demand comes from (bosun's run
//! history, Prometheus, OpenShift's `job_volume.json`) and how it is kept
//! (`demand`, `prometheus`); the plan in force with its adjustments
//! (`engine`), on disk (`persist`), charted (`plot`) and written back into
//! job files (`writeback`); the HTTP service that answers from it
//! (`service`), and the `scheduler.external` client (`client`).
//!
//! `bosun serve` mounts the same engine and service; this crate knows
//! nothing of the daemon (it must not depend on `bosun-daemon`): it uses
//! `bosun-host` for the configuration's arguments, file watches and logs.

#![forbid(unsafe_code)]

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
