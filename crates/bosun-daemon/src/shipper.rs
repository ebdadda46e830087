//! Runs' logs and artifacts into a store replicas share, so that every
//! replica serves them, and they outlive the replica that ran the job.
//!
//! The leader runs local runs and copies Kubernetes pods' logs to its own
//! disk (the file its cluster's executor names,
//! [`Executor::log_path`](bosun_cluster::executor::Executor::log_path)). The
//! shipper, a task of the leader's, appends each running run's log to the
//! store as it grows (every [`PERIOD`], and at once when a run ends), the
//! last bytes with the mark that the log is whole once the run has ended and
//! its executor's copy is done; then it puts a local run's artifacts there
//! ([`crate::artifacts::collect`]). The log endpoint and the artifacts' pages
//! of a replica without the files read them from the store.
//!
//! What it promises: a log is in the store up to at most [`PERIOD`] behind
//! the leader's file while the run runs, and whole once it has ended. A
//! replica that stops leading stops shipping; the next leader goes on from
//! the length the store holds, for running runs and for those that ended
//! with their log left open (looked for at the start of its term and every
//! [`SWEEP`] passes) (a Kubernetes pod's log, copied again from
//! the API by the new leader, has the same bytes). A local run's log on a
//! replica that died ends where its last append did: the run ends `error`,
//! and its log is marked whole with what was shipped.
//!
//! A store no other process shares keeps none of it: the shipper is not
//! started there (the files are on the one machine).

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bosun_base::sync::Lock;
use bosun_store::files::{FILES_LIMIT, LOG_LIMIT};
use bosun_store::{Run, RunState, StoreError, TransitionObserver};

use crate::runs::blocking;
use crate::state::Shared;

/// How often running runs' logs are appended to the store.
pub const PERIOD: Duration = Duration::from_secs(1);

/// Every this many passes, the runs whose log another leader left open
/// are looked for (the first pass of a term included).
pub const SWEEP: u64 = 30;

/// At most this many of them a sweep.
const SWEEP_LIMIT: usize = 200;

/// The most bytes read from a log file for one append.
const CHUNK: usize = 4 * 1024 * 1024;

/// The runs whose log or artifacts are still to be shipped.
#[derive(Default)]
pub struct Shipper {
    /// Whether the store is one replicas share (runs are tracked only
    /// then).
    enabled: AtomicBool,
    /// By run id, shared with each pass's list of what to ship (a pass
    /// runs every second over every running run: it copies no id).
    runs: Mutex<HashMap<Arc<str>, Track>>,
    /// Passes made since this replica began shipping (or last lost the
    /// lead).
    passes: AtomicU64,
    /// Told when a run ends (its last bytes go at once).
    wake: tokio::sync::Notify,
}

/// Where a run's shipping stands.
#[derive(Debug, Default, Clone, Copy)]
struct Track {
    /// The length of the log the store holds, once known.
    shipped: Option<u64>,
}

/// What one pass did for a run.
enum Step {
    /// Shipped up to here; more to come.
    Shipped(u64),
    /// Everything is in the store (or nothing will ever be).
    Done,
}

impl TransitionObserver for Shipper {
    fn on_transition(&self, run: &Run, from: Option<RunState>) {
        let _ = from;
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        if run.state == RunState::Pending || run.state.is_final() {
            track(&mut self.runs.locked(), &run.id);
        }
        if run.state.is_final() {
            self.wake.notify_one();
        }
    }
}

impl Shipper {
    /// Tracks runs from now on: the store is one replicas share.
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Ships until `stop`, then once more (a graceful stop hands over
    /// whole logs of the runs that ended before it).
    pub async fn run(
        self: Arc<Self>,
        shared: Arc<Shared>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        // A term's first pass sweeps for logs left open.
        self.passes.store(0, Ordering::Relaxed);
        loop {
            let (this, s) = (self.clone(), shared.clone());
            blocking(move || this.pass(&s)).await;
            tokio::select! {
                _ = tokio::time::sleep(PERIOD) => {}
                _ = self.wake.notified() => {}
                _ = stop.changed() => {
                    let (this, s) = (self.clone(), shared.clone());
                    blocking(move || this.pass(&s)).await;
                    return;
                }
            }
        }
    }

    /// One pass over the running runs and those left to finish. Blocking.
    pub fn pass(&self, shared: &Shared) {
        // Every [`SWEEP`] passes (the first of a term included): the ended
        // runs whose log another leader left open, to finish with what this
        // replica has of them (a pod's log it copied too; for a local run of
        // a replica gone, nothing more: the log is marked whole as it is).
        let sweep = self
            .passes
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SWEEP);
        let left_open = if sweep {
            shared
                .store
                .logs_left_open(SWEEP_LIMIT)
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "cannot read the logs left open");
                    Vec::new()
                })
        } else {
            Vec::new()
        };
        {
            let mut runs = self.runs.locked();
            for run in shared.active.pending() {
                track(&mut runs, &run.id);
            }
            for id in left_open {
                track(&mut runs, &id);
            }
        }
        let todo: Vec<(Arc<str>, Track)> = self
            .runs
            .locked()
            .iter()
            .map(|(id, t)| (id.clone(), *t))
            .collect();
        for (id, track) in todo {
            let step = ship(shared, &id, track);
            let mut runs = self.runs.locked();
            match step {
                Ok(Step::Done) => {
                    runs.remove(&*id);
                }
                Ok(Step::Shipped(n)) => {
                    if let Some(t) = runs.get_mut(&*id) {
                        t.shipped = Some(n);
                    }
                }
                // Not leading any more: the next leader ships it.
                Err(StoreError::Fenced(_)) => {
                    runs.clear();
                    self.passes.store(0, Ordering::Relaxed);
                    return;
                }
                Err(StoreError::NotFound(_)) => {
                    runs.remove(&*id);
                }
                Err(e) => {
                    // What the store holds is asked again next time.
                    if let Some(t) = runs.get_mut(&*id) {
                        t.shipped = None;
                    }
                    tracing::warn!(run = %id, error = %e, "cannot keep the run's log in the store; trying again");
                }
            }
        }
    }

    /// How many runs are left to ship.
    pub fn len(&self) -> usize {
        self.runs.locked().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Tracks run `id` (already tracked, it keeps what was shipped).
fn track(runs: &mut HashMap<Arc<str>, Track>, id: &str) {
    if !runs.contains_key(id) {
        runs.insert(id.into(), Track::default());
    }
}

/// Ships what is new of run `id`'s log; once it is whole, the run's
/// artifacts.
fn ship(shared: &Shared, id: &str, track: Track) -> Result<Step, StoreError> {
    let store = &shared.store;
    // The active run as the daemon keeps it (a pass looks at every running
    // run every second: no copy).
    let run = match shared.active.get(id) {
        Some(run) => run,
        None => match store.get(id)? {
            Some(run) => Arc::new(run),
            None => return Ok(Step::Done),
        },
    };
    let clusters = shared.clusters();
    let alias = run.cluster.as_ref().unwrap_or(&run.configured_cluster);
    let Some(exec) = clusters.executors.get(alias) else {
        if !run.state.is_final() {
            return Ok(Step::Shipped(track.shipped.unwrap_or(0)));
        }
        // Its cluster is gone: nothing more will come; whole as it is.
        if let Some(s) = store.run_log(id, u64::MAX, 0)? {
            store.append_run_log(id, s.len, &[], true)?;
        }
        return Ok(Step::Done);
    };
    let Some(path) = exec.log_path(id) else {
        return Ok(Step::Done);
    };
    // Asked before the file is read: bytes a copy writes after this are
    // shipped next time, not left out of a log marked whole.
    let whole = run.state.is_final() && exec.log_complete(id);
    let mut shipped = match track.shipped {
        Some(n) => n,
        None => match store.run_log(id, u64::MAX, 0)? {
            Some(s) if s.complete => return artifacts(shared, &run),
            Some(s) => s.len,
            None => 0,
        },
    };
    if shipped >= LOG_LIMIT {
        // Cut, and whole in the store.
        return if run.state.is_final() {
            artifacts(shared, &run)
        } else {
            Ok(Step::Shipped(shipped))
        };
    }
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    if size <= shipped && !whole {
        return Ok(Step::Shipped(shipped));
    }
    loop {
        let data = read_at(&path, shipped)?;
        let last = data.len() < CHUNK;
        let complete = whole && last;
        if data.is_empty() && !complete {
            return Ok(Step::Shipped(shipped));
        }
        shipped = store.append_run_log(id, shipped, &data, complete)?;
        if complete || (shipped >= LOG_LIMIT && run.state.is_final()) {
            return artifacts(shared, &run);
        }
        if shipped >= LOG_LIMIT {
            return Ok(Step::Shipped(shipped));
        }
        if last {
            return Ok(Step::Shipped(shipped));
        }
    }
}

/// At most [`CHUNK`] bytes of `path` from `offset` on (none when it does
/// not exist).
fn read_at(path: &Path, offset: u64) -> Result<Vec<u8>, StoreError> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(unreadable(path, e)),
    };
    file.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| unreadable(path, e))?;
    let mut data = Vec::new();
    file.take(CHUNK as u64)
        .read_to_end(&mut data)
        .map_err(|e| unreadable(path, e))?;
    Ok(data)
}

fn unreadable(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot read {}: {e}", path.display()))
}

/// Puts an ended local run's artifacts in the store.
fn artifacts(shared: &Shared, run: &Run) -> Result<Step, StoreError> {
    let clusters = shared.clusters();
    let Ok(root) = crate::artifacts::dir(&clusters, run) else {
        return Ok(Step::Done);
    };
    match crate::artifacts::collect(&root, FILES_LIMIT) {
        Ok(Some((files, left_out))) => shared.store.put_run_files(&run.id, files, left_out)?,
        Ok(None) => {}
        Err(e) => return Err(unreadable(&root, e)),
    }
    Ok(Step::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_store::{NewRun, Transition};

    /// A run that ended with its log left open by another leader (here:
    /// on a cluster no longer configured, so nothing more will come) is
    /// found by the first pass of a term and its log made whole.
    #[test]
    fn a_log_left_open_by_another_leader_is_finished() {
        let start: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let sim = crate::sim::sim(start);
        let shared = &sim.daemon.shared;
        let store = &shared.store;
        let new = NewRun {
            job: "gone-job".into(),
            job_type: bosun_config::types::JobType::Periodic,
            periodic: None,
            configured_cluster: "removed-cluster".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: Vec::new(),
            labels: Default::default(),
            annotations: Default::default(),
            spec: serde_json::json!({"containers": [{"image": "x"}]}).into(),
            scheduled_at: None,
            attempt: 0,
            description: String::new(),
        };
        let run = store.create_run(new, start).unwrap().run().clone();
        store
            .append_run_log(&run.id, 0, b"half a log\n", false)
            .unwrap();
        store
            .transition(
                &run.id,
                Transition::to(RunState::Error, start, "its replica died"),
            )
            .unwrap();
        assert_eq!(store.logs_left_open(10).unwrap(), vec![run.id.clone()]);
        let shipper = Shipper::default();
        shipper.enable();
        shipper.pass(shared);
        let log = store.run_log(&run.id, 0, 100).unwrap().unwrap();
        assert!(log.complete, "the log left open was finished");
        assert_eq!(log.data, b"half a log\n");
        assert!(store.logs_left_open(10).unwrap().is_empty());
        assert!(shipper.is_empty());
    }
}
