//! The dashboard: server-rendered HTML pages over the daemon, served by
//! `bosun serve` beside the API (the router, `http`, mounts each page's
//! handler).
//!
//! - `/` (runs, filtered, paginated on the server), `/runs/{id}` (a run:
//!   details, log, artifacts, abort and rerun, its pull requests linked),
//!   `/pulls/{org}/{repo}/{number}` (a pull request's runs by head commit),
//!   `/periodics` (schedules in words, next fires, last runs, skipped ticks,
//!   pause/resume/trigger, the next 24 h of fires), `/clusters` (health,
//!   capacity, load), `/dispatcher` (the plan, its moves, overrides, "why is
//!   job X on cluster Y"), `/config` (the snapshot in force, the last load's
//!   errors) and `/login`.
//! - Pages are HTML from templates compiled into the binary (askama,
//!   `crates/bosun-daemon/templates/`); the stylesheet and the one small
//!   script are embedded too (`assets`), nothing comes from elsewhere. Every
//!   page reads without JavaScript; the script only makes lists and runs
//!   live (server-sent events from `/live/...`, each a server-rendered
//!   fragment) and follows a running run's log.
//! - Actions are HTML forms posting to the dashboard's own routes, which
//!   call the daemon as the API does (`runs::RunFactory`, the controller,
//!   `periodics`, the dispatcher's engine), behind `http::auth`'s checks.
//! - A run's artifacts are listed on its page as [`crate::artifacts::open`]
//!   finds them (the same checks and walk as the API's), and each file links
//!   to the API's artifacts endpoint (served as attachments or plain text,
//!   under a sandboxing CSP: a job's files never act on the dashboard's
//!   origin); decorated Kubernetes runs link to their bucket through Prow's
//!   `job_url_prefix` / `job_url_template` (`joburl`).
//!
//! Handlers hold no rules of their own: what they show comes from the
//! daemon's state, the store, the artifacts directory and the dispatcher's
//! engine; the API (`http::api`) is not imported.

pub(super) mod assets;
pub(super) mod clusters;
pub(super) mod config;
pub(super) mod dispatcher;
pub mod fmt;
pub mod joburl;
mod links;
pub(super) mod login;
mod page;
pub(super) mod periodics;
pub(super) mod pulls;
pub(super) mod runs;
mod svg;

pub use page::Web;
