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
//! Pauses are persisted in the schedule state, under the scheduler's lock (a
//! fire in progress never overwrites one), and ticks while paused are
//! recorded as skipped (`paused`). The daemon is ready once every periodic
//! has been evaluated once.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bosun_store::{PeriodicState, StoreError};

use crate::controller::Controller;
use crate::metrics::{periodic_labels, seconds};
use crate::state::Shared;

/// How far ahead of their instant fires are decided (reads, decisions, the
/// store's preparation): ten thousand periodics due in one second take a few
/// hundred milliseconds to prepare.
pub(crate) const PREPARE_LEAD: jiff::SignedDuration = jiff::SignedDuration::from_secs(2);

/// A fire creating at least this many runs is logged with its lateness.
const BURST: usize = 100;

/// Runs the scheduler until `stop`.
pub async fn scheduler_loop(
    shared: Arc<Shared>,
    controller: Arc<Controller>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff: HashMap<String, u32> = HashMap::new();
    // The periodics not evaluated yet (readiness).
    let mut unevaluated: HashSet<String> = shared
        .scheduler
        .locked()
        .jobs()
        .map(|j| j.identity.to_string())
        .collect();
    loop {
        let (a, c) = (shared.clone(), controller.clone());
        let (fired, failures) = tokio::task::spawn_blocking(move || fire(&a, &c))
            .await
            .unwrap_or_default();
        for identity in fired {
            unevaluated.remove(&identity);
            backoff.remove(&identity);
        }
        if !unevaluated.is_empty() {
            // Removed by a reload: nothing left to evaluate.
            let scheduler = shared.scheduler.locked();
            unevaluated.retain(|id| scheduler.job(id).is_some());
        }
        if unevaluated.is_empty() && !shared.periodics_evaluated() {
            shared.set_periodics_evaluated();
            tracing::info!("every periodic evaluated: ready");
        }
        for (identity, e) in failures {
            let n = backoff.entry(identity.clone()).or_insert(0);
            *n = (*n + 1).min(8);
            // 1 s, 2 s, 4 s ... up to ~4 min, plus up to 50% jitter.
            let base = 1u64 << *n;
            let now = shared.clock.now();
            let jitter = (now.subsec_nanosecond() as u64) % (base * 500 + 1);
            let retry_at = now + Duration::from_millis(base * 1000 + jitter);
            tracing::warn!(periodic = %identity, error = %e, "could not fire; retrying later");
            shared.scheduler.locked().poke(&identity, retry_at);
        }
        // Fires due within PREPARE_LEAD are decided now, so that at their
        // instant only their commit is left.
        let a = shared.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let now = a.clock.now();
            a.scheduler
                .locked()
                .prepare(a.store.as_ref(), now, PREPARE_LEAD)
        })
        .await;
        let wake = shared
            .scheduler
            .locked()
            .next_wake_ahead(shared.clock.now(), PREPARE_LEAD);
        // An entry already due (it fell due while a fire ran) means no sleep.
        let sleep = wake.map_or(Duration::from_secs(3600), |w| {
            Duration::try_from(w.duration_since(shared.clock.now()))
                .unwrap_or(Duration::ZERO)
                .min(Duration::from_secs(3600))
        });
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.scheduler_wake.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

/// Fires every due periodic now (on the shared's clock): creates their runs,
/// records outcomes and metrics, wakes the controller. Returns the periodics
/// fired and those whose store calls failed. Blocking.
pub fn fire(a: &Shared, controller: &Controller) -> (Vec<String>, Vec<(String, StoreError)>) {
    let now = a.clock.now();
    let mut s = a.scheduler.locked();
    let (report, failed) = s.fire_due(a.store.as_ref(), now);
    if !report.created.is_empty() {
        controller.wake();
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
        controller.abort_active_of(&replace.periodic, &replace.keep);
    }
    (report.fired, failed)
}

/// Pauses or resumes a periodic: persisted with its schedule state, under
/// the scheduler's lock (so no fire in progress overwrites it); the
/// scheduler looks at it again at once. `None`: no such periodic. Blocking.
pub fn set_paused(
    shared: &Shared,
    identity: &str,
    paused: bool,
) -> Result<Option<PeriodicState>, StoreError> {
    let now = shared.clock.now();
    let mut scheduler = shared.scheduler.locked();
    let Some(job) = scheduler.job(identity) else {
        return Ok(None);
    };
    let state = match shared.store.periodic_state(identity)? {
        Some(s) => PeriodicState { paused, ..s },
        None => PeriodicState {
            periodic: identity.to_string(),
            schedule_hash: job.schedule_hash.clone(),
            first_seen: now,
            last_tick: None,
            paused,
            queued: None,
        },
    };
    shared.store.put_periodic_state(&state)?;
    scheduler.poke(identity, now);
    drop(scheduler);
    shared.scheduler_wake.notify_one();
    tracing::info!(periodic = %identity, paused, "periodic {}", if paused { "paused" } else { "resumed" });
    Ok(Some(state))
}
