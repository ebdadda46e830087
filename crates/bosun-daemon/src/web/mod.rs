//! The dashboard: server-rendered HTML pages over the daemon, served by
//! `bosun serve` beside the API (`api` mounts [`router`]).
//!
//! - `/` (runs, filtered, paginated on the server), `/runs/{id}` (a run:
//!   details, log, artifacts, abort and rerun), `/periodics` (schedules in
//!   words, next fires, last runs, skipped ticks, pause/resume/trigger, the
//!   next 24 h of fires), `/clusters` (health, capacity, load), `/dispatcher`
//!   (the plan, its moves, overrides, "why is job X on cluster Y") and
//!   `/config` (the snapshot in force, the last load's errors).
//! - Pages are HTML from templates compiled into the binary (askama,
//!   `crates/bosun-daemon/templates/`); the stylesheet and the one small
//!   script are embedded too (`assets`), nothing comes from elsewhere. Every
//!   page reads without JavaScript; the script only makes lists and runs
//!   live (server-sent events from `/live/...`, each a server-rendered
//!   fragment) and follows a running run's log.
//! - Actions are HTML forms posting to the dashboard's own routes, which
//!   call the daemon as the API does (`runs::RunFactory`, the controller,
//!   `periodics`, the dispatcher's engine), behind `auth`'s checks.
//! - A run's artifacts are linked to the API's artifacts endpoint (served as
//!   attachments or plain text, under a sandboxing CSP: a job's files never
//!   act on the dashboard's origin); decorated Kubernetes runs link to their
//!   bucket through Prow's `job_url_prefix` / `job_url_template` (`joburl`).
//!
//! Handlers hold no rules of their own: what they show comes from the
//! daemon's state, the store and the dispatcher's engine; `api` is not
//! imported (it mounts this module; the artifacts listing is handed in as
//! an [`ArtifactLister`]).

pub mod auth;

mod assets;
mod clusters;
mod config;
mod dispatcher;
pub mod fmt;
pub mod joburl;
mod login;
mod page;
mod periodics;
mod runs;
mod svg;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

pub use page::{ArtifactLister, Options, Web};

/// The dashboard's routes.
pub fn router(web: Arc<Web>) -> Router {
    Router::new()
        .route("/", get(runs::list))
        .route("/runs/trigger", post(runs::trigger))
        .route("/runs/{id}", get(runs::page))
        .route("/runs/{id}/abort", post(runs::abort))
        .route("/runs/{id}/rerun", post(runs::rerun))
        .route("/live/runs", get(runs::live_list))
        .route("/live/runs/{id}", get(runs::live_run))
        .route("/periodics", get(periodics::page))
        .route("/periodics/trigger", post(periodics::trigger))
        .route("/periodics/pause", post(periodics::pause))
        .route("/periodics/resume", post(periodics::resume))
        .route("/clusters", get(clusters::page))
        .route("/dispatcher", get(dispatcher::page))
        .route("/dispatcher/replan", post(dispatcher::replan))
        .route("/dispatcher/overrides", post(dispatcher::add_override))
        .route(
            "/dispatcher/overrides/cancel",
            post(dispatcher::cancel_override),
        )
        .route("/config", get(config::page))
        .route("/config/reload", post(config::reload))
        .route("/login", get(login::page).post(login::login))
        .route("/logout", post(login::logout))
        .route("/assets/{name}", get(assets::serve))
        .with_state(web)
}
