//! The periodic scheduler inside the daemon: periodics from the configuration
//! become `bosun-scheduler` entries; a task sleeps until the earliest is due
//! (no minute tick), fires it, and wakes the controller for the runs it created.
//! A run of a periodic that ends pokes its entry (intervals, `queue_one`, retries
//! wait on that). A periodic whose store calls fail is retried with exponential
//! backoff and jitter; the others are unaffected.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_config::types::JobType;
use bosun_config::{GoDuration, Snapshot};
use bosun_schedule::decide::{Policy, RetryPolicy, Trigger};
use bosun_schedule::{ParseOptions, Schedule};
use bosun_scheduler::PeriodicJob;
use jiff::Timestamp;

use crate::serve::{new_run, App};

fn secs(d: Option<&str>) -> Option<u64> {
    d.and_then(|d| GoDuration::parse(d).ok())
        .map(|d| (d.as_nanos().max(0) / 1_000_000_000) as u64)
}

/// The scheduler entries of a snapshot (validated, so every schedule parses).
pub fn jobs(snapshot: &Snapshot) -> Vec<PeriodicJob> {
    snapshot
        .periodics
        .iter()
        .filter_map(|p| {
            let identity = p.identity();
            let k = &p.kind;
            let trigger = if let Some(cron) = k.cron.as_deref().filter(|c| !c.is_empty()) {
                let opts = ParseOptions {
                    timezone: k.timezone.as_deref(),
                    identity: Some(&identity),
                };
                Trigger::Cron(Schedule::parse(cron, opts).ok()?)
            } else if let Some(i) = secs(k.interval.as_deref()) {
                Trigger::Interval(i)
            } else {
                Trigger::MinimumInterval(secs(k.minimum_interval.as_deref())?)
            };
            let policy = Policy {
                identity: identity.clone(),
                trigger,
                concurrency: k.concurrency_policy.unwrap_or_default(),
                catch_up: k.catch_up.unwrap_or_default(),
                starting_deadline: secs(k.starting_deadline.as_deref()),
                jitter: secs(k.jitter.as_deref()),
                retry: k.retry.as_ref().map(|r| RetryPolicy {
                    attempts: r.attempts.clamp(0, 10) as u32,
                    interval: secs(r.interval.as_deref()).unwrap_or(0),
                    run_all: r.run_all,
                }),
            };
            let schedule_hash =
                serde_json::json!([k.cron, k.interval, k.minimum_interval, k.timezone]).to_string();
            let template = new_run(
                &p.base,
                JobType::Periodic,
                Some(identity.clone()),
                snapshot.pod_spec(p),
                None,
            );
            Some(PeriodicJob {
                identity,
                schedule_hash,
                policy,
                template,
            })
        })
        .collect()
}

/// Runs the scheduler until `stop`.
pub async fn scheduler_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut backoff: HashMap<String, u32> = HashMap::new();
    loop {
        let a = app.clone();
        let failures = tokio::task::spawn_blocking(move || {
            let now = Timestamp::now();
            let mut s = a.scheduler.lock().unwrap_or_else(|e| e.into_inner());
            let (report, failed) = s.fire_due(a.store.as_ref(), now);
            if !report.created.is_empty() {
                a.wake.notify_one();
            }
            for identity in &report.abort {
                a.abort_active_of(identity);
            }
            failed
        })
        .await
        .unwrap_or_default();
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
