//! The periodic scheduler inside the daemon: periodics from the configuration
//! become `bosun-scheduler` entries; a task sleeps until the earliest is due
//! (no minute tick), fires it, and wakes the controller for the runs it created.
//! A run of a periodic that ends pokes its entry (intervals, `queue_one`, retries
//! wait on that). A periodic whose store calls fail is retried with exponential
//! backoff and jitter; the others are unaffected.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::serve::App;

/// Runs the scheduler until `stop`.
pub async fn scheduler_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut backoff: HashMap<String, u32> = HashMap::new();
    loop {
        let a = app.clone();
        let (fired, failures) = tokio::task::spawn_blocking(move || {
            let now = Timestamp::now();
            let mut s = a.scheduler.lock().unwrap_or_else(|e| e.into_inner());
            let (report, failed) = s.fire_due(a.store.as_ref(), now);
            if !report.created.is_empty() {
                a.wake.notify_one();
            }
            for identity in &report.abort {
                a.abort_active_of(identity);
            }
            (report.fired, failed)
        })
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
            let jitter = (Timestamp::now().subsec_nanosecond() as u64) % (base * 500 + 1);
            let retry_at = Timestamp::now() + Duration::from_millis(base * 1000 + jitter);
            tracing::warn!(periodic = %identity, error = %e, "could not fire; retrying later");
            app.scheduler
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .poke(&identity, retry_at);
        }
        let wake = app
            .scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_wake();
        let sleep = wake.map_or(Duration::from_secs(3600), |w| {
            w.duration_since(Timestamp::now())
                .unsigned_abs()
                .min(Duration::from_secs(3600))
        });
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = app.scheduler_wake.notified() => {}
            _ = stop.changed() => return,
        }
    }
}
