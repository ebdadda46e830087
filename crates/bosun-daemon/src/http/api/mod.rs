//! The JSON API's handlers, by resource: `runs` (create, list, get, the
//! log, abort, rerun), `artifacts` (a run's files on this machine, through
//! [`crate::artifacts`]), `periodics`, `clusters`, `config`, `repos`, `hook`
//! (forges' webhooks, `POST /hook`), and `probes`
//! (`/healthz`, `/readyz`, `/metrics`). They translate HTTP to calls on the
//! daemon and hold no rules of their own; their errors are
//! `http::error::ApiError`s. The routes, and the token check on the mutating
//! ones, are the router's (`http`); the dashboard (`http::web`) is not
//! imported.

pub(super) mod artifacts;
pub(super) mod clusters;
pub(super) mod config;
pub mod hook;
pub(super) mod periodics;
pub(super) mod probes;
pub(super) mod repos;
pub(super) mod runs;
