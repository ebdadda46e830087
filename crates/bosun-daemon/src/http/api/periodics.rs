//! `/api/v1/periodics`: list (schedule, next fire, last run, paused), the
//! recorded ticks, a manual trigger, pause and resume. An identity with a
//! `/` (in-repo: `ORG/REPO:name`) is percent-encoded in the path.

use bosun_base::sync::Lock;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use bosun_store::StoreError;
use jiff::Timestamp;
use serde::Serialize;

use crate::daemon::Daemon;
use crate::http::error::{ApiError, ApiResult};
use crate::runs::{blocking, RunRequest};
use crate::state::Shared;

/// A periodic as `GET /api/v1/periodics` shows it.
#[derive(Debug, Serialize)]
pub struct PeriodicView {
    /// Its identity (name, or `ORG/REPO:name` for in-repo periodics).
    pub identity: String,
    /// The job's name.
    pub job: String,
    /// `cron`, `interval` or `minimum_interval`.
    pub schedule_kind: &'static str,
    /// The cron expression or the duration.
    pub schedule: String,
    /// The cron's time zone.
    pub timezone: Option<String>,
    /// Its build cluster.
    pub cluster: String,
    /// Paused: ticks are recorded as skipped.
    pub paused: bool,
    /// When it fires next (none: waiting for its run to end, or never).
    pub next_fire: Option<Timestamp>,
    /// Its most recent run.
    pub last_run: Option<LastRun>,
}

/// The most recent run of a periodic.
#[derive(Debug, Serialize)]
pub struct LastRun {
    /// Run id.
    pub id: String,
    /// State.
    pub state: String,
    /// Created.
    pub created_at: Timestamp,
    /// The tick it ran for (none: triggered by hand).
    pub scheduled_at: Option<Timestamp>,
}

/// The view of periodic `p`, given whether it is paused and its last run.
fn view_of(
    shared: &Shared,
    p: &bosun_config::Periodic,
    paused: bool,
    last_run: Option<LastRun>,
) -> PeriodicView {
    let identity = p.identity();
    let k = &p.kind;
    let (schedule_kind, schedule) = if let Some(c) = k.cron.as_deref().filter(|c| !c.is_empty()) {
        ("cron", c.to_string())
    } else if let Some(i) = &k.interval {
        ("interval", i.clone())
    } else {
        (
            "minimum_interval",
            k.minimum_interval.clone().unwrap_or_default(),
        )
    };
    let next_fire = shared.scheduler.locked().next_fire(&identity);
    PeriodicView {
        job: p.base.name.clone(),
        schedule_kind,
        schedule,
        timezone: k.timezone.clone(),
        cluster: p.base.cluster.clone(),
        paused,
        next_fire,
        last_run,
        identity,
    }
}

/// `GET /api/v1/periodics`.
pub async fn list(State(daemon): State<Arc<Daemon>>) -> ApiResult {
    let shared = daemon.shared.clone();
    let views = blocking(move || {
        let snapshot = shared.snapshot();
        // Two reads for all of them, not two a periodic (each a round
        // trip on a database over the network).
        let ids: Vec<String> = snapshot.periodics.iter().map(|p| p.identity()).collect();
        let states = shared.store.periodic_states(&ids)?;
        let runs = shared.store.periodic_runs(&ids)?;
        Ok::<_, StoreError>(
            snapshot
                .periodics
                .iter()
                .zip(&ids)
                .map(|(p, id)| {
                    let paused = states.get(id).is_some_and(|s| s.paused);
                    let last = runs.get(id).and_then(|r| r.last.as_ref()).map(|r| LastRun {
                        id: r.id.clone(),
                        state: r.state.as_str().to_string(),
                        created_at: r.created_at,
                        scheduled_at: r.scheduled_at,
                    });
                    view_of(&shared, p, paused, last)
                })
                .collect::<Vec<_>>(),
        )
    })
    .await?;
    Ok(Json(serde_json::json!({ "periodics": views })).into_response())
}

fn unknown(identity: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no periodic {identity:?} in the configuration in force"
    ))
}

/// `POST /api/v1/periodics/{identity}/trigger`: a run now, outside the
/// schedule (no tick, like Prow's `mkpj`).
pub async fn trigger(State(daemon): State<Arc<Daemon>>, Path(identity): Path<String>) -> ApiResult {
    let run = daemon
        .runs
        .create(
            &daemon.shared,
            &daemon.controller,
            RunRequest::Periodic(identity),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

/// Pauses or resumes a periodic.
async fn set_paused(daemon: Arc<Daemon>, identity: String, paused: bool) -> ApiResult {
    let shared = daemon.shared.clone();
    let id = identity.clone();
    let state = blocking(move || crate::periodics::set_paused(&shared, &id, paused))
        .await?
        .ok_or_else(|| unknown(&identity))?;
    Ok(Json(state).into_response())
}

/// `POST /api/v1/periodics/{identity}/pause`: its ticks are recorded as
/// skipped (`paused`) until it is resumed.
pub async fn pause(State(daemon): State<Arc<Daemon>>, Path(identity): Path<String>) -> ApiResult {
    set_paused(daemon, identity, true).await
}

/// `POST /api/v1/periodics/{identity}/resume`.
pub async fn resume(State(daemon): State<Arc<Daemon>>, Path(identity): Path<String>) -> ApiResult {
    set_paused(daemon, identity, false).await
}

/// `GET /api/v1/periodics/{identity}/ticks`: every recorded tick outcome of a
/// periodic, oldest first (a run, or a skip with its reason and tick range).
pub async fn ticks(State(daemon): State<Arc<Daemon>>, Path(identity): Path<String>) -> ApiResult {
    let store = daemon.shared.store.clone();
    let id = identity.clone();
    let outcomes = blocking(move || store.outcomes(&id)).await?;
    Ok(Json(serde_json::json!({ "periodic": identity, "ticks": outcomes })).into_response())
}
