//! The controller (plank's job): drives every active run through its states.
//! Each pass **observes** (one configuration snapshot with its clusters and
//! their health, the executors' status of pending runs, the oldest waiting
//! runs of each cluster: `observe`), **decides** as a pure function of that
//! (`decide`: one function per run state, with table tests), and **acts**
//! (`act`: stops, starts and revivals off the pass, then the transitions
//! held for one commit with those of the next few milliseconds: `held`).
//!
//! Its working state is its own, behind this handle: starts in flight,
//! aborts requested, held transitions and parsed specs. Runs come from
//! the store's committed active runs held in memory (`Shared::active`), so
//! the controller never acts on a run the store has not made durable, and
//! a restarted daemon re-attaches to their processes and pods.

mod act;
#[cfg(test)]
pub(crate) use act::START_TASKS;
pub mod decide;
mod handle;
mod held;
pub mod observe;

use bosun_base::sync::Lock;
use std::sync::Arc;
use std::time::Duration;

pub use handle::{Controller, Starting};
pub use held::COMMIT_EVERY;

/// How soon a pass follows another while some pending run may change with
/// no event to say so (a local run started by an earlier daemon, whose
/// state is read from its files; a run whose pod is not seen yet).
const POLL: Duration = Duration::from_secs(1);

/// How long a new run may wait for the controller's next pass.
pub const NEW_RUN_DELAY: Duration = Duration::from_millis(5);

impl Controller {
    /// One pass over the active runs: observe, decide, act. Blocking (the
    /// store and executors are synchronous). Returns when the next pass is
    /// due at the latest with no event (a timeout, the dispatcher's plan
    /// changing by the clock), and whether some pending run may change with
    /// no event (then the next pass comes within a second).
    pub fn pass(self: &Arc<Self>) -> (Option<jiff::Timestamp>, bool) {
        // A leader outside its trust window neither looks nor acts; it
        // looks again soon (or stops leading).
        if !self.shared.leadership.trusted() {
            return (None, true);
        }
        let t0 = std::time::Instant::now();
        self.take_recorded_aborts();
        // Runs being started right now (still `triggered` in the store, or
        // just committed `pending`): read before the store, so none is missed.
        // Only passes change them (they are added by `act` and released by
        // the commits passes make), so the map is read in place, not copied.
        let starting = self.starting.locked();
        let in_force = self.shared.in_force();
        let now = self.shared.clock.now();
        // Starts completed since the last pass (committed at the end of this
        // one), and held starts whose jobs have ended since.
        let early = self.settle_starts(&in_force.clusters, now);
        let (rechecked, ended_since) = self.recheck_held_starts(&in_force.clusters, now);
        let mut ended = self.held.locked().ended.clone();
        ended.extend(early.ended.iter().cloned());
        ended.extend(ended_since);
        let observed = self.observe(&in_force, now, &starting, &ended);
        drop(starting);
        let limits = decide::limits(&observed);
        let t1 = t0.elapsed();
        let plan = decide::decide(&observed, &limits, now);
        let (running, waiting) = (plan.running.total, plan.waiting);
        let wake_at = plan.wake_at;
        let mut poll = plan.poll;
        // Cleared before acting: a commit of this pass sets it again.
        self.recheck
            .store(false, std::sync::atomic::Ordering::Release);
        let started = self.act(&observed, plan, early, rechecked);
        // Runs committed pending since this pass observed are looked at
        // within a second.
        poll |= self.recheck.load(std::sync::atomic::Ordering::Acquire);
        self.passes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(
            running,
            waiting,
            started,
            poll,
            observe_us = t1.as_micros() as u64,
            total_us = t0.elapsed().as_micros() as u64,
            "controller pass"
        );
        (wake_at, poll)
    }

    /// Runs passes when woken — a job ended or changed (the executors'
    /// callbacks), an abort, new runs, a reload, a cluster's health, the
    /// dispatcher's plan — and when the last pass's deadline comes, until
    /// `stop`. It polls (a pass within a second) only while some pending
    /// run may change with no event. New runs wait for a pass up to
    /// [`NEW_RUN_DELAY`]: a burst of them shares one pass. What the passes
    /// hold is committed before it returns. Each pass runs on a blocking
    /// task of the runtime; [`Controller::run_on_own_thread`] is the same
    /// loop on a thread of its own.
    pub async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let c = self.clone();
            let next = tokio::task::spawn_blocking(move || c.pass())
                .await
                .unwrap_or((None, true));
            if self.wait(next, &mut stop).await {
                let c = self.clone();
                let _ = tokio::task::spawn_blocking(move || c.flush()).await;
                return;
            }
        }
    }

    /// [`Controller::run`]'s loop on a thread of its own (a blocking task
    /// that lasts until `stop`), with a single-threaded runtime of its own
    /// for its waits and for the timers its passes arm: a wake-up reaches
    /// the thread that runs the pass directly, where `run` takes the
    /// runtime's worker and then a blocking thread, twice a pass. The pass
    /// itself runs outside the runtime's `block_on` (as on a blocking
    /// task), so what it calls may block (a synchronous database client).
    pub fn run_on_own_thread(
        self: Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::task::spawn_blocking(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot build the controller's runtime");
                    return;
                }
            };
            let _here = rt.enter();
            loop {
                let pass = std::panic::AssertUnwindSafe(|| self.pass());
                let next = std::panic::catch_unwind(pass).unwrap_or((None, true));
                if rt.block_on(self.wait(next, &mut stop)) {
                    self.flush();
                    return;
                }
            }
        })
    }

    /// Waits for what brings the next pass, given the last pass's deadline
    /// and whether it polls (`next`); true when `stop` came instead.
    async fn wait(
        &self,
        (wake_at, poll): (Option<jiff::Timestamp>, bool),
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> bool {
        // A deadline already past is met at once.
        let until = wake_at.map(|at| {
            let left = at.duration_since(self.shared.clock.now());
            left.max(jiff::SignedDuration::ZERO).unsigned_abs()
        });
        let until = match (until, poll) {
            (Some(d), true) => Some(d.min(POLL)),
            (None, true) => Some(POLL),
            (until, false) => until,
        };
        let deadline = async {
            match until {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let (health, plan) = (
            &self.shared.health_changed,
            &self.shared.placer.engine.service.changed,
        );
        tokio::select! {
            _ = health.notified() => false,
            _ = plan.notified() => false,
            _ = self.wake.notified() => false,
            _ = self.new_runs.notified() => {
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(NEW_RUN_DELAY) => {}
                }
                false
            }
            _ = deadline => false,
            _ = stop.changed() => true,
        }
    }
}
