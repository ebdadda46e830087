//! The periodic scheduler inside the daemon: periodics from the configuration
//! become `bosun-scheduler` entries; a task sleeps until the earliest is due
//! (no minute tick), fires it, and wakes the controller for the runs it created.
//! Fires due within two seconds are decided ahead (read, decided, readied in
//! the store), so that at their instant only the commit is left; the store
//! refuses one whose periodic changed meanwhile, and it is decided again.
//! A run of a periodic that ends pokes its entry (intervals, `queue_one`, retries
//! wait on that). A periodic whose store calls fail is retried with exponential
//! backoff and jitter; the others are unaffected.
//!
//! Manual control: `GET /api/v1/periodics` lists them (schedule, next fire,
//! last run, paused); `POST /api/v1/periodics/{identity}/trigger` starts a run
//! now (outside the schedule: no tick, like Prow's `mkpj`); `.../pause` and
//! `.../resume` are persisted in the schedule state, and ticks while paused are
//! recorded as skipped (`paused`). An identity with a `/` (in-repo:
//! `ORG/REPO:name`) is percent-encoded in the path.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bosun_store::{PeriodicState, Run, RunFilter};
use jiff::Timestamp;
use serde::Serialize;

use crate::metrics::{periodic_labels, seconds};
use crate::serve::{authorize, blocking, error, store_error, ApiResult, App};

/// How far ahead of their instant fires are decided (reads, decisions, the
/// store's preparation): ten thousand periodics due in one second take a few
/// hundred milliseconds to prepare.
pub(crate) const PREPARE_LEAD: jiff::SignedDuration = jiff::SignedDuration::from_secs(2);

/// A fire creating at least this many runs is logged with its lateness.
const BURST: usize = 100;

/// Runs the scheduler until `stop`.
pub async fn scheduler_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut backoff: HashMap<String, u32> = HashMap::new();
    loop {
        let a = app.clone();
        let (fired, failures) = tokio::task::spawn_blocking(move || fire(&a))
            .await
            .unwrap_or_default();
        for identity in fired {
            backoff.remove(&identity);
        }
        for (identity, e) in failures {
            let n = backoff.entry(identity.clone()).or_insert(0);
            *n = (*n + 1).min(8);
            // 1 s, 2 s, 4 s ... up to ~4 min, plus up to 50% jitter.
            let base = 1u64 << *n;
            let now = app.clock.now();
            let jitter = (now.subsec_nanosecond() as u64) % (base * 500 + 1);
            let retry_at = now + Duration::from_millis(base * 1000 + jitter);
            tracing::warn!(periodic = %identity, error = %e, "could not fire; retrying later");
            app.scheduler
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .poke(&identity, retry_at);
        }
        // Fires due within PREPARE_LEAD are decided now, so that at their
        // instant only their commit is left.
        let a = app.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let now = a.clock.now();
            a.scheduler
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .prepare(a.store.as_ref(), now, PREPARE_LEAD)
        })
        .await;
        let wake = app
            .scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_wake_ahead(app.clock.now(), PREPARE_LEAD);
        // An entry already due (it fell due while a fire ran) means no sleep.
        let sleep = wake.map_or(Duration::from_secs(3600), |w| {
            Duration::try_from(w.duration_since(app.clock.now()))
                .unwrap_or(Duration::ZERO)
                .min(Duration::from_secs(3600))
        });
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = app.scheduler_wake.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

/// Fires every due periodic now (on the app's clock): creates their runs,
/// records outcomes and metrics, wakes the controller. Returns the periodics
/// fired and those whose store calls failed. Blocking.
pub fn fire(a: &App) -> (Vec<String>, Vec<(String, bosun_store::StoreError)>) {
    let now = a.clock.now();
    let mut s = a.scheduler.lock().unwrap_or_else(|e| e.into_inner());
    let (report, failed) = s.fire_due(a.store.as_ref(), now);
    if !report.created.is_empty() {
        a.wake.notify_one();
    }
    // Lateness: from the tick to the run's commit (fire_due returns after
    // the commit).
    let committed = a.clock.now();
    let mut latest = 0.0f64;
    for run in &report.created {
        if let Some(tick) = run.scheduled_at {
            let late = committed.duration_since(tick).as_secs_f64().max(0.0);
            a.metrics.fire_lateness.observe(late);
            latest = latest.max(late);
        }
    }
    if report.created.len() >= BURST {
        tracing::info!(
            runs = report.created.len(),
            prepared = report.prepared,
            stale = report.stale,
            lateness_ms = (latest * 1e3).round() as u64,
            "a burst of periodic runs committed"
        );
    }
    for (outcome, n) in [("committed", report.prepared), ("stale", report.stale)] {
        if n > 0 {
            a.metrics
                .prepared
                .get_or_create(&vec![("outcome".into(), outcome.into())])
                .inc_by(n as u64);
        }
    }
    for o in report.outcomes.iter().filter(|o| o.outcome != "run") {
        let mut labels = periodic_labels(&o.periodic);
        labels.push(("reason".into(), o.outcome.clone()));
        a.metrics.skipped.get_or_create(&labels).inc_by(o.count);
    }
    for identity in &report.fired {
        let labels = periodic_labels(identity);
        match s.next_fire(identity) {
            Some(t) => {
                a.metrics.next_fire.get_or_create(&labels).set(seconds(t));
            }
            None => {
                a.metrics.next_fire.remove(&labels);
            }
        }
    }
    drop(s);
    for replace in &report.abort {
        a.abort_active_of(&replace.periodic, &replace.keep);
    }
    (report.fired, failed)
}

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

fn view(app: &App, p: &bosun_config::Periodic) -> Result<PeriodicView, bosun_store::StoreError> {
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
    let paused = app
        .store
        .periodic_state(&identity)?
        .is_some_and(|s| s.paused);
    let last_run = app
        .store
        .list(&RunFilter {
            periodic: Some(identity.clone()),
            limit: 1,
            ..RunFilter::default()
        })?
        .into_iter()
        .next()
        .map(|r: Run| LastRun {
            id: r.id,
            state: r.state.as_str().to_string(),
            created_at: r.created_at,
            scheduled_at: r.scheduled_at,
        });
    let next_fire = app
        .scheduler
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .next_fire(&identity);
    Ok(PeriodicView {
        job: p.base.name.clone(),
        schedule_kind,
        schedule,
        timezone: k.timezone.clone(),
        cluster: p.base.cluster.clone(),
        paused,
        next_fire,
        last_run,
        identity,
    })
}

/// `GET /api/v1/periodics`.
pub async fn list(State(app): State<Arc<App>>) -> ApiResult {
    let a = app.clone();
    let views = blocking(move || {
        let snapshot = a.snapshot();
        snapshot
            .periodics
            .iter()
            .map(|p| view(&a, p))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(store_error)?;
    Ok(Json(serde_json::json!({ "periodics": views })).into_response())
}

fn unknown(identity: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no periodic {identity:?} in the configuration in force"),
    )
}

/// `POST /api/v1/periodics/{identity}/trigger`: a run now, outside the schedule.
pub async fn trigger(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(identity): Path<String>,
) -> ApiResult {
    authorize(&app, &headers)?;
    let template = app
        .scheduler
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .job(&identity)
        .map(|j| j.template.clone())
        .ok_or_else(|| unknown(&identity))?;
    let store = app.store.clone();
    let now = app.clock.now();
    let created = blocking(move || store.create_run(template, now))
        .await
        .map_err(store_error)?;
    app.new_runs.notify_one();
    Ok((StatusCode::CREATED, Json(created.run().clone())).into_response())
}

/// Pauses or resumes a periodic; the change is persisted with its schedule
/// state, under the scheduler's lock (so no fire in progress overwrites it).
async fn set_paused(app: Arc<App>, identity: String, paused: bool) -> ApiResult {
    let a = app.clone();
    let id = identity.clone();
    let result = blocking(
        move || -> Result<Option<PeriodicState>, bosun_store::StoreError> {
            let now = a.clock.now();
            let mut scheduler = a.scheduler.lock().unwrap_or_else(|e| e.into_inner());
            let Some(job) = scheduler.job(&id) else {
                return Ok(None);
            };
            let state = match a.store.periodic_state(&id)? {
                Some(s) => PeriodicState { paused, ..s },
                None => PeriodicState {
                    periodic: id.clone(),
                    schedule_hash: job.schedule_hash.clone(),
                    first_seen: now,
                    last_tick: None,
                    paused,
                    queued: None,
                },
            };
            a.store.put_periodic_state(&state)?;
            scheduler.poke(&id, now);
            Ok(Some(state))
        },
    )
    .await
    .map_err(store_error)?;
    let state = result.ok_or_else(|| unknown(&identity))?;
    app.scheduler_wake.notify_one();
    tracing::info!(periodic = %identity, paused, "periodic {}", if paused { "paused" } else { "resumed" });
    Ok(Json(state).into_response())
}

/// `POST /api/v1/periodics/{identity}/pause`.
pub async fn pause(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(identity): Path<String>,
) -> ApiResult {
    authorize(&app, &headers)?;
    set_paused(app, identity, true).await
}

/// `POST /api/v1/periodics/{identity}/resume`.
pub async fn resume(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(identity): Path<String>,
) -> ApiResult {
    authorize(&app, &headers)?;
    set_paused(app, identity, false).await
}

/// `GET /api/v1/periodics/{identity}/ticks`: every recorded tick outcome of a
/// periodic, oldest first (a run, or a skip with its reason and tick range).
pub async fn ticks(State(app): State<Arc<App>>, Path(identity): Path<String>) -> ApiResult {
    let store = app.store.clone();
    let id = identity.clone();
    let outcomes = blocking(move || store.outcomes(&id))
        .await
        .map_err(store_error)?;
    Ok(Json(serde_json::json!({ "periodic": identity, "ticks": outcomes })).into_response())
}
