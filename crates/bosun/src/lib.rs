//! bosun, the daemon and its command-line tools, as a library; `main.rs` is
//! a thin binary over it.
//!
//! The daemon's layers, each importing only those above it:
//! - `logging`, `metrics`, `clusters` (the build clusters in force, their health),
//!   `check` (configuration arguments): know nothing of the daemon;
//! - `state`: the shared state (store, active runs, clock, metrics,
//!   scheduler, and the configuration with its clusters, swapped together);
//! - `controller` (observe, decide, act), `health` (cluster probes),
//!   `sinker` (retention): tasks over the shared state;
//! - `periodics` (the scheduler task) and `runs` (the one run-creation
//!   path): use the controller's handle;
//! - `daemon` (what the API sees), `reload` (the config watcher), `web`
//!   (the dashboard and the HTTP layer's authentication), `api` (the HTTP
//!   layer, which mounts the dashboard), and `serve`, which wires them.

pub mod api;
pub mod check;
pub mod client;
pub mod clusters;
pub mod controller;
pub mod daemon;
pub mod dispatch;
pub mod health;
pub mod logging;
pub mod metrics;
pub mod periodics;
pub mod placement;
pub mod plans;
pub mod prowjob;
pub mod reload;
pub mod runs;
pub mod schedule;
pub mod serve;
pub mod sinker;
pub mod state;
pub mod watch;
pub mod web;

#[cfg(test)]
mod sim;
