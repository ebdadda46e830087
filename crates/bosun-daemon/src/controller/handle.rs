//! The controller's handle and working state: starts in flight, aborts
//! requested, held transitions and parsed specs. Other tasks talk to the
//! controller only through this handle's methods.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bosun_store::template::SpecSnapshot;
use bosun_store::{RunFilter, Transition};
use tokio::sync::Notify;

use crate::state::Shared;

/// A run whose start (or revival) is in flight: it holds its slot.
#[derive(Debug, Clone)]
pub struct Starting {
    /// Its job.
    pub job: String,
    /// Its cluster.
    pub cluster: String,
    /// Its job queue.
    pub queue: Option<String>,
}

/// The controller: its handle and its working state.
pub struct Controller {
    pub(super) shared: Arc<Shared>,
    /// Wakes a pass at once (a job ended, an abort, a held commit is due).
    pub(crate) wake: Arc<Notify>,
    /// Wakes a pass for new runs (a burst of them shares one pass).
    pub(super) new_runs: Notify,
    /// Runs whose abort was requested.
    pub(super) aborts: Mutex<HashSet<String>>,
    /// Runs whose start is in flight (they count as running).
    pub(crate) starting: Mutex<HashMap<String, Starting>>,
    /// What completed starts and revivals decided, for the next pass to
    /// commit (their runs stay in `starting` until then).
    pub(crate) started: Mutex<Vec<(String, Transition)>>,
    /// Starts that failed for a reason that may pass: the next pass
    /// releases their runs, which stay `triggered`, to be started again.
    pub(super) retry: Mutex<Vec<String>>,
    /// How many times in a row each run's start failed so (its next try
    /// waits longer each time).
    pub(super) start_failures: Mutex<HashMap<String, u32>>,
    /// Transitions held for the next commit.
    pub(super) held: Mutex<Held>,
    /// The abort requests recorded in the store this leader has taken (a
    /// store replicas share), so that each is carried out once.
    pub(super) recorded_aborts: Mutex<HashSet<String>>,
    /// Parsed spec snapshots by content hash (immutable, so never stale).
    pub(super) specs: Mutex<HashMap<String, Arc<SpecSnapshot>>>,
    /// How many passes have run (for the log and the tests of when passes
    /// come).
    pub(crate) passes: std::sync::atomic::AtomicU64,
    /// A commit made runs pending or released them since the last pass
    /// began: the next pass comes within a second, to look at them.
    pub(super) recheck: std::sync::atomic::AtomicBool,
    /// A timer is on its way to settle the completed starts of local jobs
    /// still running (see `finish_start_later`).
    pub(super) settle_timer: std::sync::atomic::AtomicBool,
}

/// Transitions decided by passes and not committed yet.
#[derive(Default)]
pub struct Held {
    pub(super) batch: Vec<(String, Transition)>,
    /// The runs they move: passes leave these alone until the commit.
    pub(super) runs: HashSet<String>,
    /// Why waiting runs wait, where that changed: a note moves no run, so
    /// its run stays in the queue. Were it left alone until the commit like
    /// the others, a newer run could take the slot it waits for.
    pub(super) notes: HashMap<String, String>,
    /// Of those, the runs that end (their slots are free).
    pub(super) ended: HashSet<String>,
    /// Runs to release from `starting` once committed.
    pub(super) release: Vec<String>,
    /// Runs whose start on a local cluster is held and whose job had not
    /// ended then, with their cluster: each pass looks again (they are
    /// neither `pending` in the store nor released, so nothing else would).
    pub(super) unended: HashMap<String, String>,
    /// When the oldest of them was held (on the runtime's clock, which the
    /// timer sleeps on).
    pub(super) since: Option<tokio::time::Instant>,
    /// A wake-up is on its way for their commit.
    pub(super) timer: bool,
}

impl Controller {
    /// The controller of `shared`'s runs; `wake` is what executors notify
    /// when a job ends.
    pub fn new(shared: Arc<Shared>, wake: Arc<Notify>) -> Controller {
        Controller {
            shared,
            wake,
            new_runs: Notify::new(),
            aborts: Mutex::default(),
            starting: Mutex::default(),
            started: Mutex::default(),
            retry: Mutex::default(),
            start_failures: Mutex::default(),
            held: Mutex::default(),
            recorded_aborts: Mutex::default(),
            specs: Mutex::default(),
            passes: Default::default(),
            recheck: Default::default(),
            settle_timer: Default::default(),
        }
    }

    /// Requests the abort of runs; a pass carries it out. On a store
    /// replicas share, the request is recorded in the store for whichever
    /// replica leads (this one may not, or may stop leading before its
    /// next pass); it is kept in memory when the store cannot record it.
    pub fn request_abort(&self, ids: impl IntoIterator<Item = String>) {
        let ids: Vec<String> = ids.into_iter().collect();
        if self.shared.leadership.is_replicated() {
            match self
                .shared
                .store
                .request_aborts(&ids, self.shared.clock.now())
            {
                Ok(()) => {
                    self.wake.notify_one();
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot record abort requests for the leader; kept here")
                }
            }
        }
        self.aborts.locked().extend(ids);
        self.wake.notify_one();
    }

    /// Takes the abort requests recorded in the store (by any replica)
    /// that this leader has not taken yet: called at the start of a pass.
    pub(super) fn take_recorded_aborts(&self) {
        if !self.shared.leadership.is_replicated() {
            return;
        }
        let recorded = match self.shared.store.abort_requests() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the recorded abort requests");
                return;
            }
        };
        let mut taken = self.recorded_aborts.locked();
        taken.retain(|id| recorded.contains(id));
        let new: Vec<String> = recorded
            .into_iter()
            .filter(|id| taken.insert(id.clone()))
            .collect();
        drop(taken);
        if !new.is_empty() {
            self.aborts.locked().extend(new);
        }
    }

    /// Requests the abort of every active run of a periodic but `keep` (the
    /// runs that replace them: `concurrency_policy: replace`). Blocking.
    pub fn abort_active_of(&self, periodic: &str, keep: &[String]) {
        let filter = RunFilter {
            periodic: Some(periodic.to_string()),
            active: true,
            limit: 1000,
            ..RunFilter::default()
        };
        let runs = self.shared.store.list(&filter).unwrap_or_default();
        self.request_abort(
            runs.into_iter()
                .map(|r| r.id)
                .filter(|id| !keep.contains(id)),
        );
    }

    /// Forgets what this process's earlier passes kept in memory (runs it
    /// was starting, starts to retry, held transitions): called when this
    /// replica becomes the leader, since another leader may have moved those
    /// runs meanwhile. Abort requests are kept.
    pub fn reset(&self) {
        self.starting.locked().clear();
        self.started.locked().clear();
        self.retry.locked().clear();
        self.start_failures.locked().clear();
        *self.held.locked() = Held::default();
        self.recorded_aborts.locked().clear();
    }

    /// New runs were created: a pass comes within a few milliseconds.
    pub fn runs_added(&self) {
        self.new_runs.notify_one();
    }

    /// A pass now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// How many runs have a transition held for the next commit.
    #[cfg(test)]
    pub(crate) fn held_runs(&self) -> usize {
        self.held.locked().runs.len()
    }
}
