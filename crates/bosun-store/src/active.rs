//! The active runs in memory, kept from the store's own stream of commits.
//!
//! The controller looks at the waiting and running runs on every pass, which
//! comes with every new run and every run that ends. Reading them from the
//! store each time decoded the same rows again and again (with a long queue, a
//! pass read dozens of rows to start one run). [`ActiveRuns`] is a
//! [`TransitionObserver`]: the store tells it every run it creates and every
//! transition, after the commit and in commit order, so it holds exactly the
//! committed active runs, indexed as the controller asks for them. Plank keeps
//! an informer's cache of ProwJobs for the same reason.

use bosun_base::sync::Lock;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Before, Run, RunCount, RunFilter, RunState, Store, StoreError, TransitionObserver};

/// The runs that are not complete, by id, with the waiting ones by cluster
/// and the running ones, oldest first.
#[derive(Default)]
pub struct ActiveRuns {
    inner: Mutex<Inner>,
    /// The commits this has been told of (creations, transitions, retention
    /// passes that deleted runs): see [`ActiveRuns::changes`].
    changes: AtomicU64,
    /// Called once the runs of a burst of fires prepared ahead are in:
    /// see [`ActiveRuns::wake_after_prepared`].
    waker: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// Runs by id, each keyed by its own id: with thousands of runs active,
/// a copy of each id for a map's key was memory every run cost (held twice:
/// the store's writer and this cache each keep the active runs).
#[derive(Default)]
pub(crate) struct RunsById(HashSet<ById>);

/// A run, hashed and compared by its id.
struct ById(Arc<Run>);

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

impl std::hash::Hash for ById {
    // As its id's `str` hashes: the set is searched by `&str`.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.as_str().hash(state);
    }
}

impl std::borrow::Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

impl RunsById {
    /// The run `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&Arc<Run>> {
        self.0.get(id).map(|r| &r.0)
    }

    /// Keeps `run`, in place of the run of its id if there is one.
    pub(crate) fn insert(&mut self, run: Arc<Run>) {
        self.0.replace(ById(run));
    }

    /// Forgets the run `id`, returning it.
    pub(crate) fn remove(&mut self, id: &str) -> Option<Arc<Run>> {
        self.0.take(id).map(|r| r.0)
    }

    /// Forgets every run.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// How many runs are kept.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[derive(Default)]
struct Inner {
    runs: RunsById,
    /// `triggered` runs by cluster (the one decided for them, else the
    /// configured one), by build id (creation order).
    waiting: BTreeMap<String, BTreeMap<u64, Arc<Run>>>,
    /// `scheduling` runs by build id.
    scheduling: BTreeMap<u64, Arc<Run>>,
    /// `pending` runs by build id.
    pending: BTreeMap<u64, Arc<Run>>,
}

fn order(run: &Run) -> u64 {
    run.build_id.parse().unwrap_or(u64::MAX)
}

/// The cluster a waiting run waits for.
fn cluster(run: &Run) -> &str {
    run.cluster.as_deref().unwrap_or(&run.configured_cluster)
}

impl Inner {
    /// Applies a committed run (copied only if it stays active).
    fn apply(&mut self, run: &Run) {
        if let Some(old) = self.runs.remove(&run.id) {
            self.unindex(&old);
        }
        if run.state.is_final() {
            return;
        }
        self.keep(Arc::new(run.clone()));
    }

    /// Applies a committed run, kept as shared.
    fn apply_shared(&mut self, run: &Arc<Run>) {
        if let Some(old) = self.runs.remove(&run.id) {
            self.unindex(&old);
        }
        if !run.state.is_final() {
            self.keep(run.clone());
        }
    }

    /// Indexes an active run.
    fn keep(&mut self, run: Arc<Run>) {
        match run.state {
            RunState::Triggered => {
                self.waiting
                    .entry(cluster(&run).to_string())
                    .or_default()
                    .insert(order(&run), run.clone());
            }
            RunState::Pending => {
                self.pending.insert(order(&run), run.clone());
            }
            RunState::Scheduling => {
                self.scheduling.insert(order(&run), run.clone());
            }
            _ => {}
        }
        self.runs.insert(run);
    }

    fn unindex(&mut self, old: &Run) {
        match old.state {
            RunState::Triggered => {
                if let Some(q) = self.waiting.get_mut(cluster(old)) {
                    q.remove(&order(old));
                    if q.is_empty() {
                        self.waiting.remove(cluster(old));
                    }
                }
            }
            RunState::Pending => {
                self.pending.remove(&order(old));
            }
            RunState::Scheduling => {
                self.scheduling.remove(&order(old));
            }
            _ => {}
        }
    }
}

impl ActiveRuns {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// How many committed changes to runs this has been told of: creations,
    /// transitions, and retention passes that deleted some. A reader that
    /// read the runs after seeing a count has nothing new to read while the
    /// count stays the same (the dashboard's live streams read again only
    /// then).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// Hears of the runs a burst of fires prepared ahead created once their
    /// caller has its answer (so the burst's commit is not held up while
    /// they are indexed), then calls `wake`: the reader that acts on new
    /// runs (the controller) is woken again once they are all here. Without
    /// this, such runs are here before the caller has its answer. Set once;
    /// later calls do nothing.
    pub fn wake_after_prepared(&self, wake: impl Fn() + Send + Sync + 'static) {
        let _ = self.waker.set(Box::new(wake));
    }

    /// Reads the active runs from `store`, which must already report its
    /// commits to this cache. The lock is held across the read, so a commit
    /// that lands meanwhile is applied after it, never overwritten by it.
    pub fn load(&self, store: &dyn Store) -> Result<usize, StoreError> {
        self.read(store, false)
    }

    /// Reads the active runs from `store` anew, forgetting what was kept
    /// (once the read succeeded): for a process that missed commits (a
    /// replica that followed while another led, a listener that lost its
    /// connection).
    pub fn reload(&self, store: &dyn Store) -> Result<usize, StoreError> {
        let n = self.read(store, true)?;
        self.changed();
        Ok(n)
    }

    /// Reads the active runs under the lock, first forgetting the kept ones
    /// when `anew`.
    fn read(&self, store: &dyn Store, anew: bool) -> Result<usize, StoreError> {
        let mut inner = self.lock();
        let runs = store.list(&RunFilter {
            active: true,
            oldest_first: true,
            limit: i64::MAX as usize,
            ..RunFilter::default()
        })?;
        if anew {
            *inner = Inner::default();
        }
        for run in &runs {
            inner.apply(run);
        }
        Ok(runs.len())
    }

    /// The active run `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Run>> {
        self.lock().runs.get(id).cloned()
    }

    /// How many runs are active.
    pub fn len(&self) -> usize {
        self.lock().runs.len()
    }

    /// Whether no run is active.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `scheduling` runs, oldest first.
    pub fn scheduling(&self) -> Vec<Arc<Run>> {
        self.lock().scheduling.values().cloned().collect()
    }

    /// The `pending` runs, oldest first.
    pub fn pending(&self) -> Vec<Arc<Run>> {
        self.lock().pending.values().cloned().collect()
    }

    /// The oldest `limit` `triggered` runs waiting for `cluster` (the one
    /// decided for them, else the configured one).
    pub fn waiting(&self, cluster: &str, limit: usize) -> Vec<Arc<Run>> {
        self.waiting_where(cluster, limit, |_| true)
    }

    /// The oldest `limit` `triggered` runs waiting for `cluster` that `keep`
    /// accepts (the others do not count towards `limit`).
    pub fn waiting_where(
        &self,
        cluster: &str,
        limit: usize,
        keep: impl Fn(&Run) -> bool,
    ) -> Vec<Arc<Run>> {
        self.lock()
            .waiting
            .get(cluster)
            .map(|q| {
                q.values()
                    .filter(|r| keep(r))
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The oldest `limit` `triggered` runs of each configured cluster that
    /// `known` does not accept.
    pub fn waiting_elsewhere(&self, known: impl Fn(&str) -> bool, limit: usize) -> Vec<Arc<Run>> {
        self.lock()
            .waiting
            .iter()
            .filter(|(cluster, _)| !known(cluster))
            .flat_map(|(_, q)| q.values().take(limit).cloned())
            .collect()
    }
}

impl TransitionObserver for ActiveRuns {
    fn on_transition(&self, run: &Run, _from: Option<RunState>) {
        self.lock().apply(run);
        self.changed();
    }

    fn on_committed(&self, run: &Arc<Run>, _from: Option<RunState>) {
        self.lock().apply_shared(run);
        self.changed();
    }

    fn on_deleted(&self, runs: &[RunCount]) {
        if !runs.is_empty() {
            self.changed();
        }
    }

    fn after_answer(&self) -> bool {
        self.waker.get().is_some()
    }

    fn after_prepared(&self) {
        if let Some(wake) = self.waker.get() {
            wake();
        }
    }
}

/// Several observers, called in order.
pub struct Observers(pub Vec<Arc<dyn TransitionObserver>>);

impl TransitionObserver for Observers {
    fn on_transition(&self, run: &Run, from: Option<RunState>) {
        for o in &self.0 {
            o.on_transition(run, from);
        }
    }

    fn on_committed(&self, run: &Arc<Run>, from: Option<RunState>) {
        for o in &self.0 {
            o.on_committed(run, from);
        }
    }

    fn on_change(&self, run: &Run, shared: Option<&Arc<Run>>, before: Option<Before<'_>>) {
        for o in &self.0 {
            o.on_change(run, shared, before);
        }
    }

    fn on_prepared_created(&self, run: &Arc<Run>, after: bool) {
        for o in &self.0 {
            o.on_prepared_created(run, after);
        }
    }

    fn after_prepared(&self) {
        for o in &self.0 {
            o.after_prepared();
        }
    }

    fn on_deleted(&self, runs: &[RunCount]) {
        for o in &self.0 {
            o.on_deleted(runs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunsById;
    use crate::{Run, RunState};
    use std::sync::Arc;

    /// A run with `id` and `state`, the rest from a run's JSON.
    fn run(id: &str, state: RunState) -> Arc<Run> {
        let mut run: Run = serde_json::from_str(
            r#"{"id": "", "build_id": "1", "job": "job", "job_type": "periodic", "periodic": null,
                "configured_cluster": "default", "cluster": null, "refs": null, "extra_refs": [],
                "labels": {}, "annotations": {}, "spec_hash": "", "scheduled_at": null,
                "attempt": 0, "pod_revival_count": 0, "created_at": "2026-12-01T00:00:00Z",
                "pending_at": null, "completed_at": null, "state": "triggered",
                "description": "", "url": null}"#,
        )
        .expect("a run's JSON");
        run.id = id.to_string();
        run.state = state;
        Arc::new(run)
    }

    #[test]
    fn runs_are_found_replaced_and_removed_by_their_own_id() {
        let mut runs = RunsById::default();
        for i in 0..100 {
            runs.insert(run(&format!("run-{i}"), RunState::Triggered));
        }
        runs.insert(run("run-7", RunState::Pending));
        assert_eq!(runs.len(), 100);
        assert_eq!(runs.get("run-7").map(|r| r.state), Some(RunState::Pending));
        assert_eq!(
            runs.get("run-8").map(|r| r.state),
            Some(RunState::Triggered)
        );
        assert!(runs.get("run-100").is_none());
        assert_eq!(
            runs.remove("run-7").map(|r| r.id.clone()).as_deref(),
            Some("run-7")
        );
        assert!(runs.get("run-7").is_none());
        assert!(runs.remove("run-7").is_none());
        assert_eq!(runs.len(), 99);
        runs.clear();
        assert_eq!(runs.len(), 0);
    }
}
