//! The scheduler entries of a configuration snapshot.

use bosun_config::{GoDuration, Periodic, Snapshot};
use bosun_schedule::decide::{Policy, RetryPolicy, Trigger};
use bosun_schedule::{ParseOptions, Schedule};
use bosun_store::template::{initial_state, RunTemplate};

use crate::PeriodicJob;

fn secs(d: Option<&str>) -> Option<u64> {
    d.and_then(|d| GoDuration::parse(d).ok())
        .map(|d| (d.as_nanos().max(0) / 1_000_000_000) as u64)
}

/// The scheduler entries of a snapshot (validated, so every schedule parses).
pub fn jobs(snapshot: &Snapshot) -> Vec<PeriodicJob> {
    jobs_where(snapshot, |_| true)
}

/// The scheduler entries of the snapshot's periodics that `pick` picks (a
/// followed repository's, whose jobs alone changed).
pub fn jobs_where(snapshot: &Snapshot, pick: impl Fn(&Periodic) -> bool) -> Vec<PeriodicJob> {
    snapshot
        .periodics
        .iter()
        .filter(|p| pick(p))
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
                identity: identity.clone().into(),
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
            let mut template =
                RunTemplate::periodic(p, snapshot.pod_spec(p), snapshot.periodic_decoration(p))
                    .defined_in(std::path::Path::new(&*p.origin.file))
                    .run(None);
            template.state = initial_state(&snapshot.config);
            Some(PeriodicJob {
                identity: policy.identity.clone(),
                schedule_hash,
                policy,
                template,
            })
        })
        .collect()
}
