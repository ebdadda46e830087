//! The pace of a cluster's creations (pods and PipelineRuns): at most a
//! bounded number in flight, taken in turn across jobs, and held back while
//! the API server has asked to wait.
//!
//! - **Bounded:** a burst of runs becomes at most `limit` creations in flight
//!   on the cluster ([`DEFAULT_CREATIONS_IN_FLIGHT`] unless the cluster says
//!   otherwise; 0: unbounded). kube-apiserver's priority and fairness sheds
//!   (429) what its queues for bosun's service account cannot hold; a burst
//!   sent all at once overflows them.
//! - **Fair across jobs:** each job's creations wait in their order, and the
//!   jobs with creations waiting take turns, one creation each: a job with a
//!   thousand runs due does not hold back another's one.
//! - **Held back:** after a 429, no creation is sent before its `Retry-After`
//!   has passed ([`Pacer::hold_for`]); the creation that met it waits that
//!   long with jitter ([`retry_delay`]) and tries again. After a failure that
//!   says the cluster is failing (no answer, a server error), creations that
//!   get their turn within [`FAILING_FOR`] give up at once
//!   ([`Pacer::failing`]) rather than each waiting out its own timeout: the
//!   controller's start backoff comes back to them.
//!
//! It knows nothing of pods or the API: only turns, holds and delays.

use bosun_base::sync::Lock;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// Creations in flight at once on a cluster unless its `creations_in_flight`
/// says otherwise. kube-apiserver's default limits (600 seats, of which the
/// `workload-low` priority level that service accounts fall in gets 245,
/// with 6 queues of 50 for one user's flow) admit far more; 16 leaves room
/// for every other client of the level, and keeps a 2-core API server
/// saturated (a creation takes it 5-20 ms).
pub const DEFAULT_CREATIONS_IN_FLIGHT: usize = 16;

/// How long creations give up at once after one found the cluster failing.
pub(crate) const FAILING_FOR: Duration = Duration::from_secs(1);

/// The most a creation waits after a 429 (whatever `Retry-After` says).
const RETRY_MAX: Duration = Duration::from_secs(30);

/// A cluster's pace of creations.
pub(crate) struct Pacer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Most in flight (0: unbounded).
    limit: usize,
    in_flight: usize,
    /// The creations waiting, by job, each job's in its order.
    waiting: HashMap<String, VecDeque<oneshot::Sender<Turn>>>,
    /// The jobs with creations waiting, in the order they take turns.
    order: VecDeque<String>,
    /// No creation is sent before then (a 429's `Retry-After`).
    held_until: Option<Instant>,
    /// Creations give up at once until then.
    failing_until: Option<Instant>,
}

/// One creation's turn: it may send while it holds this; dropping it hands
/// the turn to the next job's first creation.
pub(crate) struct Turn {
    pacer: Arc<Pacer>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.pacer.pass_on();
    }
}

impl Pacer {
    /// A pacer with at most `limit` creations in flight (0: unbounded).
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Pacer {
            state: Mutex::new(State {
                limit,
                ..State::default()
            }),
        })
    }

    /// From now on, at most `limit` in flight (0: unbounded).
    pub(crate) fn set_limit(self: &Arc<Self>, limit: usize) {
        let mut state = self.state.locked();
        state.limit = limit;
        // A larger limit lets more go at once.
        while state.limit == 0 || state.in_flight < state.limit {
            if !self.hand_over(&mut state) {
                break;
            }
        }
    }

    /// Waits for a turn of job `job`'s: at once when fewer than the limit
    /// are in flight and no job waits, else after the creations waiting
    /// before it in its job, its job taking turns with the others.
    pub(crate) async fn turn(self: &Arc<Self>, job: &str) -> Turn {
        let rx = {
            let mut state = self.state.locked();
            if state.order.is_empty() && (state.limit == 0 || state.in_flight < state.limit) {
                state.in_flight += 1;
                return Turn {
                    pacer: self.clone(),
                };
            }
            let (tx, rx) = oneshot::channel();
            let queue = state.waiting.entry(job.to_string()).or_default();
            if queue.is_empty() {
                state.order.push_back(job.to_string());
            }
            state.waiting.get_mut(job).expect("just made").push_back(tx);
            rx
        };
        // A turn handed to a creation that stopped waiting comes back
        // through its drop.
        rx.await.expect("a waiting creation is handed its turn")
    }

    /// The turn of one that ended: to the next job's first creation, or
    /// one fewer in flight.
    fn pass_on(self: &Arc<Self>) {
        let mut state = self.state.locked();
        state.in_flight -= 1;
        self.hand_over(&mut state);
    }

    /// Hands a new turn to the first creation of the job whose turn it is
    /// (counted in flight); false when none waits.
    fn hand_over(self: &Arc<Self>, state: &mut State) -> bool {
        while let Some(job) = state.order.pop_front() {
            let Some(queue) = state.waiting.get_mut(&job) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                state.waiting.remove(&job);
            } else {
                state.order.push_back(job);
            }
            let Some(tx) = next else { continue };
            state.in_flight += 1;
            let turn = Turn {
                pacer: self.clone(),
            };
            match tx.send(turn) {
                Ok(()) => return true,
                // It stopped waiting: the turn goes to the next, without
                // the drop (this holds the lock).
                Err(turn) => {
                    std::mem::forget(turn);
                    state.in_flight -= 1;
                }
            }
        }
        false
    }

    /// No creation is sent for `wait` from now (a 429's `Retry-After`).
    pub(crate) fn hold_for(&self, wait: Duration) {
        let until = Instant::now() + wait.min(RETRY_MAX);
        let mut state = self.state.locked();
        if state.held_until.is_none_or(|t| t < until) {
            state.held_until = Some(until);
        }
    }

    /// Until when creations are held back, if they are now.
    pub(crate) fn held_until(&self) -> Option<Instant> {
        self.state
            .locked()
            .held_until
            .filter(|t| *t > Instant::now())
    }

    /// A creation found the cluster failing: the ones that get their turn
    /// within [`FAILING_FOR`] give up at once.
    pub(crate) fn mark_failing(&self) {
        self.state.locked().failing_until = Some(Instant::now() + FAILING_FOR);
    }

    /// Whether creations give up at once now.
    pub(crate) fn failing(&self) -> bool {
        self.state
            .locked()
            .failing_until
            .is_some_and(|t| t > Instant::now())
    }
}

/// How long a creation waits before its next try after its `tries`-th 429
/// in a row: the answer's `Retry-After` (1 s when it has none), doubled for
/// each 429 after the first, at most 30 s, then stretched by a random 0-50%
/// (`jitter` in 0..1) so that the creations shed together do not all come
/// back in the same instant.
pub(crate) fn retry_delay(retry_after: Option<Duration>, tries: u32, jitter: f64) -> Duration {
    let base = retry_after.unwrap_or(Duration::from_secs(1));
    let doubled = base.saturating_mul(1 << tries.saturating_sub(1).min(8));
    doubled
        .min(RETRY_MAX)
        .mul_f64(1.0 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// A number in 0..1, different for each call: jitter needs no more than
/// the standard library's randomly keyed hasher (no generator crate for
/// one number per 429).
pub(crate) fn jitter() -> f64 {
    use std::hash::BuildHasher;
    let bits = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn at_most_the_limit_are_in_flight_and_jobs_take_turns() {
        rt().block_on(async {
            let pacer = Pacer::new(2);
            let order = Arc::new(Mutex::new(Vec::new()));
            // Two turns taken; then job a's five creations wait, then b's
            // two, then c's one.
            let first = pacer.turn("a").await;
            let second = pacer.turn("a").await;
            let mut tasks = Vec::new();
            for (job, n) in [("a", 5), ("b", 2), ("c", 1)] {
                for i in 0..n {
                    let (pacer, order) = (pacer.clone(), order.clone());
                    let name = format!("{job}{i}");
                    let job = job.to_string();
                    tasks.push(tokio::spawn(async move {
                        let turn = pacer.turn(&job).await;
                        order.locked().push(name);
                        tokio::task::yield_now().await;
                        drop(turn);
                    }));
                    // Queued in this order.
                    tokio::task::yield_now().await;
                }
            }
            assert!(order.locked().is_empty(), "none while two are in flight");
            assert_eq!(pacer.state.locked().in_flight, 2);
            drop(first);
            drop(second);
            for t in tasks {
                t.await.unwrap();
            }
            assert_eq!(
                *order.locked(),
                ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"]
            );
            assert_eq!(pacer.state.locked().in_flight, 0);
        });
    }

    #[test]
    fn a_creation_that_stops_waiting_passes_its_turn_on() {
        rt().block_on(async {
            let pacer = Pacer::new(1);
            let held = pacer.turn("a").await;
            let gave_up = tokio::spawn({
                let p = pacer.clone();
                async move { p.turn("a").await }
            });
            tokio::task::yield_now().await;
            gave_up.abort();
            let _ = gave_up.await;
            let next = tokio::spawn({
                let p = pacer.clone();
                async move { drop(p.turn("b").await) }
            });
            tokio::task::yield_now().await;
            drop(held);
            tokio::time::timeout(Duration::from_secs(5), next)
                .await
                .expect("the turn reached the next job")
                .unwrap();
            assert_eq!(pacer.state.locked().in_flight, 0);
        });
    }

    #[test]
    fn a_larger_limit_lets_the_waiting_go() {
        rt().block_on(async {
            let pacer = Pacer::new(1);
            let _held = pacer.turn("a").await;
            let waiting = tokio::spawn({
                let p = pacer.clone();
                async move { drop(p.turn("a").await) }
            });
            tokio::task::yield_now().await;
            assert!(!waiting.is_finished());
            pacer.set_limit(0);
            tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .expect("unbounded now")
                .unwrap();
        });
    }

    #[test]
    fn holds_and_failures_last_their_time() {
        rt().block_on(async {
            let pacer = Pacer::new(4);
            assert!(pacer.held_until().is_none() && !pacer.failing());
            pacer.hold_for(Duration::from_millis(50));
            pacer.hold_for(Duration::from_millis(10));
            let until = pacer.held_until().expect("held");
            assert!(
                until > Instant::now() + Duration::from_millis(30),
                "the longer hold wins"
            );
            pacer.mark_failing();
            assert!(pacer.failing());
            tokio::time::sleep(Duration::from_millis(60)).await;
            assert!(pacer.held_until().is_none());
        });
    }

    #[test]
    fn retry_after_is_honoured_doubled_and_jittered() {
        let s = Duration::from_secs;
        assert_eq!(retry_delay(Some(s(2)), 1, 0.0), s(2));
        assert_eq!(retry_delay(None, 1, 0.0), s(1));
        assert_eq!(retry_delay(Some(s(2)), 3, 0.0), s(8));
        assert_eq!(retry_delay(Some(s(2)), 1, 1.0), s(3));
        assert_eq!(retry_delay(Some(s(5)), 9, 0.0), s(30));
        assert_eq!(retry_delay(Some(s(5)), 40, 1.0), s(45));
        let j: Vec<f64> = (0..50).map(|_| jitter()).collect();
        assert!(j.iter().all(|x| (0.0..1.0).contains(x)));
        assert!(j.iter().any(|x| (x - j[0]).abs() > 1e-9), "{j:?}");
    }
}
