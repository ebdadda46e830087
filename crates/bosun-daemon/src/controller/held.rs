//! Held commits: what passes decide is held up to [`COMMIT_EVERY`] and
//! committed together, so a busy cluster's passes share one commit (and its
//! fsync) instead of each making its own. A held transition loses nothing
//! in a crash: an ended run is still `pending` in the store and ends again
//! from its files; a started one is `triggered` and is started again, which
//! finds it started.

use bosun_base::sync::Lock;
use std::sync::Arc;
use std::time::Duration;

use bosun_store::{RunState, Transition};

use super::handle::Controller;

/// How long the controller may hold what its passes decided before it
/// commits it. 20 ms rather than 5: a busy local cluster's starts and ends
/// then share a quarter as many commits, about a fifth less daemon CPU per
/// run in `run_bench` (docs/performance.md); the store shows a run's
/// change up to 20 ms later, and nothing is lost in a crash (see above).
pub const COMMIT_EVERY: Duration = Duration::from_millis(20);

/// Held transitions are committed at once when there are this many.
const COMMIT_MAX_HELD: usize = 256;

impl Controller {
    /// Holds a pass's transitions and notes (which leave their runs where
    /// they are), or commits them with those held before once the oldest
    /// has waited [`COMMIT_EVERY`] (at once outside a runtime: a
    /// simulation); a wake-up comes for a commit that no pass makes first.
    /// The commit applies them in the order they were decided.
    pub(super) fn hold_or_commit(
        self: &Arc<Self>,
        batch: Vec<(String, Transition)>,
        notes: Vec<(String, Transition)>,
        release: Vec<String>,
    ) {
        let mut h = self.held.locked();
        for (id, t) in &notes {
            h.notes.insert(id.clone(), t.description.clone());
        }
        for (id, t) in &batch {
            h.runs.insert(id.clone());
            if t.to.is_final() {
                h.ended.insert(id.clone());
                h.unended.remove(id);
            } else if let (RunState::Pending, Some(cluster)) = (t.to, &t.cluster) {
                h.unended.insert(id.clone(), cluster.clone());
            }
        }
        h.batch.extend(batch);
        h.batch.extend(notes);
        h.release.extend(release);
        if h.batch.is_empty() && h.release.is_empty() {
            return;
        }
        let now = tokio::time::Instant::now();
        let due_at = *h.since.get_or_insert(now) + COMMIT_EVERY;
        let runtime = tokio::runtime::Handle::try_current().ok();
        match runtime {
            Some(rt) if now < due_at && h.batch.len() < COMMIT_MAX_HELD => {
                if !h.timer {
                    h.timer = true;
                    let c = self.clone();
                    rt.spawn(async move {
                        tokio::time::sleep_until(due_at).await;
                        c.held.locked().timer = false;
                        c.wake.notify_one();
                    });
                }
            }
            _ => {
                drop(h);
                self.flush();
            }
        }
    }

    /// Commits the held transitions, then releases their runs.
    pub fn flush(&self) {
        let (batch, release, notes) = {
            let mut h = self.held.locked();
            h.since = None;
            let batch = std::mem::take(&mut h.batch);
            // The notes this commit makes.
            let notes: Vec<(String, String)> = batch
                .iter()
                .filter(|(id, t)| h.notes.get(id) == Some(&t.description))
                .map(|(id, t)| (id.clone(), t.description.clone()))
                .collect();
            (batch, std::mem::take(&mut h.release), notes)
        };
        let ids: Vec<String> = batch.iter().map(|(id, _)| id.clone()).collect();
        // Runs this commit makes pending or releases are looked at by a
        // pass within a second (passes leave them alone while held):
        // whether their executor reports their changes, their timeouts. Not
        // at once: in a burst, events bring passes anyway, and a pass per
        // commit would cost more than the runs' own.
        let look_again = !release.is_empty() || batch.iter().any(|(_, t)| !t.to.is_final());
        self.commit(batch);
        if !release.is_empty() {
            let mut starting = self.starting.locked();
            for id in &release {
                starting.remove(id);
            }
        }
        let mut h = self.held.locked();
        for id in &ids {
            h.runs.remove(id);
            h.ended.remove(id);
            h.unended.remove(id);
        }
        for (id, description) in &notes {
            // A note held since, saying something else, stays.
            if h.notes.get(id) == Some(description) {
                h.notes.remove(id);
            }
        }
        if look_again {
            self.recheck
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Commits transitions; a periodic's run that ends pokes its periodic.
    fn commit(&self, batch: Vec<(String, Transition)>) {
        let ids: Vec<String> = batch.iter().map(|(id, _)| id.clone()).collect();
        for (id, r) in ids.iter().zip(self.shared.store.transitions(batch)) {
            match r {
                Err(e) => tracing::warn!(run = %id, error = %e, "transition failed"),
                Ok(run) if run.state.is_final() => {
                    if let Some(p) = &run.periodic {
                        self.shared.periodic_run_ended(p);
                    }
                }
                Ok(_) => {}
            }
        }
    }
}
