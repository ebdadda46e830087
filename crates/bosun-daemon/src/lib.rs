//! bosun's daemon, `bosun serve`, as a library: the controller, the
//! scheduler's task, run creation, reloads, the JSON API and the dashboard.
//! The `bosun` binary runs it (`serve::run`); it builds on `bosun-host` (the
//! configuration's arguments and checked load, file watches, logs) and on
//! `bosun-dispatcher` (the dispatcher's engine and service, which it mounts
//! and places its runs by).
//!
//! The daemon's layers, each importing only those above it:
//! - `metrics`, `clusters` (the build clusters in force, their health):
//!   know nothing of the daemon; `leader` (which replica leads, whether this
//!   one may act), over `metrics`;
//! - `artifacts` (a run's files on this machine: a path checked, then
//!   walked from the artifacts directory its cluster's executor names),
//!   over `clusters`, knowing nothing of HTTP;
//! - `placement` (where a run in `scheduling` goes);
//! - `state`: the shared state (store, active runs, clock, metrics,
//!   scheduler, placer, and the configuration with its clusters, swapped
//!   together);
//! - `controller` (observe, decide, act), `health` (cluster probes),
//!   `sinker` (retention), `shipper` (runs' logs and artifacts into a
//!   store replicas share): tasks over the shared state;
//! - `periodics` (the scheduler task), `runs` (the one run-creation path)
//!   and `plans` (the dispatcher's task): use the controller's handle;
//! - `repos` (the repositories followed from their remotes: their
//!   snapshots composed into the job set in force, loads, the resync, the
//!   stored webhook deliveries processed), over `state`;
//! - `reports` (runs' statuses and the failure comment to the forge: the
//!   store's report policy and the outbox's delivery), over `state`;
//! - `daemon` (what the HTTP layer sees), `reload` (the config watcher);
//!   `pulls` (pull requests, comments and pushes start runs with Prow's
//!   trigger rules), over `daemon`, `runs` and `repos`;
//! - `http`, the HTTP layer: the router (every route, the read check and
//!   the token check), `http::auth` and `http::error`, which the JSON API
//!   (`http::api`) and the dashboard (`http::web`) share, each importing
//!   neither the other nor the router;
//! - `serve`, which wires them.

#![forbid(unsafe_code)]

pub mod artifacts;
pub mod clusters;
pub mod controller;
pub mod daemon;
pub mod health;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod periodics;
pub mod placement;
pub mod plans;
pub mod pulls;
pub mod reload;
pub mod reports;
pub mod repos;
pub mod runs;
pub mod serve;
pub mod shipper;
pub mod sinker;
pub mod state;

#[cfg(test)]
mod sim;
