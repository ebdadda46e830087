//! Which waiting runs may start now: plank's limits, plus bosun's per-cluster
//! slots. Prow's rules: `plank.max_concurrency` counts all `pending` runs; a job's
//! `max_concurrency` and a queue's capacity count `pending` runs plus `triggered`
//! runs created earlier (so runs start first-in first-out); a queue capacity of 0
//! blocks it, a negative one is unlimited.
//!
//! A pure decision over counts: it knows nothing of executors, the store or
//! the clusters' health.

use std::collections::HashMap;

/// A run waiting in `triggered`, in creation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The run.
    pub id: String,
    /// Its job.
    pub job: String,
    /// The job's `max_concurrency` (0: unlimited).
    pub max_concurrency: u32,
    /// The job's queue, if any.
    pub queue: Option<String>,
    /// The cluster it will run on.
    pub cluster: String,
}

/// Runs already started (`pending`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Running {
    /// All pending runs.
    pub total: u32,
    /// Per job.
    pub by_job: HashMap<String, u32>,
    /// Per queue.
    pub by_queue: HashMap<String, u32>,
    /// Per cluster.
    pub by_cluster: HashMap<String, u32>,
}

/// The limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// `plank.max_concurrency` (0: unlimited).
    pub global: u32,
    /// `plank.job_queue_capacities`.
    pub queues: HashMap<String, i64>,
    /// Slots per cluster (0 or absent: unlimited).
    pub cluster_slots: HashMap<String, u32>,
}

/// The waiting runs (given oldest first) that may start now, in that order.
pub fn admit(waiting: &[Waiting], running: &Running, limits: &Limits) -> Vec<String> {
    let mut total = running.total;
    // Per-job and per-queue counts include earlier waiting runs, started or not.
    let mut by_job = running.by_job.clone();
    let mut by_queue = running.by_queue.clone();
    let mut by_cluster = running.by_cluster.clone();
    let mut out = Vec::new();
    for w in waiting {
        let job_count = by_job.entry(w.job.clone()).or_insert(0);
        let job_ok = w.max_concurrency == 0 || *job_count < w.max_concurrency;
        *job_count += 1;
        let queue_ok = match &w.queue {
            None => true,
            Some(q) => {
                let count = by_queue.entry(q.clone()).or_insert(0);
                let ok = match limits.queues.get(q) {
                    Some(&cap) if cap < 0 => true,
                    Some(&cap) => i64::from(*count) < cap,
                    None => false, // an unknown queue never starts (validation refuses it)
                };
                *count += 1;
                ok
            }
        };
        let global_ok = limits.global == 0 || total < limits.global;
        let slots = limits.cluster_slots.get(&w.cluster).copied().unwrap_or(0);
        let cluster_count = by_cluster.entry(w.cluster.clone()).or_insert(0);
        let cluster_ok = slots == 0 || *cluster_count < slots;
        if job_ok && queue_ok && global_ok && cluster_ok {
            total += 1;
            *cluster_count += 1;
            out.push(w.id.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: &str, job: &str, max: u32, queue: Option<&str>, cluster: &str) -> Waiting {
        Waiting {
            id: id.into(),
            job: job.into(),
            max_concurrency: max,
            queue: queue.map(str::to_string),
            cluster: cluster.into(),
        }
    }

    #[test]
    fn per_job_limits_are_fifo() {
        let waiting = [
            w("1", "a", 1, None, "c"),
            w("2", "a", 1, None, "c"),
            w("3", "b", 0, None, "c"),
        ];
        assert_eq!(
            admit(&waiting, &Running::default(), &Limits::default()),
            ["1", "3"]
        );
        let running = Running {
            total: 1,
            by_job: HashMap::from([("a".into(), 1)]),
            ..Running::default()
        };
        assert_eq!(admit(&waiting, &running, &Limits::default()), ["3"]);
    }

    #[test]
    fn global_queue_and_cluster_limits() {
        let waiting = [
            w("1", "a", 0, Some("q"), "c1"),
            w("2", "b", 0, Some("q"), "c1"),
            w("3", "c", 0, Some("zero"), "c1"),
            w("4", "d", 0, Some("free"), "c2"),
            w("5", "e", 0, None, "c1"),
        ];
        let limits = Limits {
            global: 0,
            queues: HashMap::from([("q".into(), 1), ("zero".into(), 0), ("free".into(), -1)]),
            cluster_slots: HashMap::from([("c1".into(), 2)]),
        };
        assert_eq!(
            admit(&waiting, &Running::default(), &limits),
            ["1", "4", "5"]
        );
        let limits = Limits {
            global: 2,
            ..limits
        };
        assert_eq!(admit(&waiting, &Running::default(), &limits), ["1", "4"]);
        let running = Running {
            total: 2,
            ..Running::default()
        };
        assert!(admit(&waiting, &running, &limits).is_empty());
        // Unknown queues never start.
        assert!(admit(
            &[w("9", "x", 0, Some("nope"), "c1")],
            &Running::default(),
            &Limits::default()
        )
        .is_empty());
    }
}
