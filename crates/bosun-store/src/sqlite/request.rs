//! What callers queue for the writer ([`Op`]: the request, and where its
//! result goes) and what the writer holds for them until the batch commits
//! ([`Reply`]), or fails them with.

use bosun_base::sync::Lock;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};

use jiff::Timestamp;

use super::codec::{Prepared, Template};
use super::error::unavailable;
use super::shared::{SharedOp, SharedReply};
use crate::reports::{Enqueued, NewReport, ReportFailure};
use crate::repos::{Accepted, NewDelivery};
use crate::run::{Run, RunState};
use crate::{
    CreateDone, Created, PeriodicState, PreparedFires, RunCount, StoreError, TickOutcome,
    Transition,
};

/// Where a batch's fires are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// `runs`, `tick_outcomes`, `periodic_state`.
    Tables,
    /// The fire log.
    Log,
}

/// A run's `cluster` before a transition that decided one (`Some`), or none
/// when the transition left it as it was.
pub(super) type ClusterBefore = Option<Option<String>>;

/// A transition's result: the run after it, and the state it left.
pub(super) type TransitionResult = Result<(Run, RunState), StoreError>;

/// Where a queued transition's result goes: a channel of its own, or its
/// slot among the results of a batch of transitions queued together
/// ([`Gather`]), whose caller then wakes once for them all rather than once
/// for each.
pub(super) enum TransitionTo {
    Channel(Sender<TransitionResult>),
    Slot(Slot),
}

impl TransitionTo {
    /// Hands the result over.
    pub(super) fn send(self, r: TransitionResult) {
        match self {
            TransitionTo::Channel(tx) => drop(tx.send(r)),
            TransitionTo::Slot(slot) => slot.fill(r),
        }
    }
}

/// The results of transitions queued together, as the writer fills them.
#[derive(Default)]
pub(super) struct Gather {
    state: Mutex<Gathered>,
    all: Condvar,
}

#[derive(Default)]
struct Gathered {
    results: Vec<Option<TransitionResult>>,
    left: usize,
}

/// One transition's place in a [`Gather`]. Dropped unfilled (the writer
/// gone with the request), it is filled with that failure, so the caller
/// never waits for it in vain.
pub(super) struct Slot {
    gather: Arc<Gather>,
    index: usize,
    filled: bool,
}

impl Gather {
    /// A gathering of `n` results, and their slots.
    pub(super) fn new(n: usize) -> (Arc<Gather>, Vec<Slot>) {
        let gather = Arc::new(Gather {
            state: Mutex::new(Gathered {
                results: (0..n).map(|_| None).collect(),
                left: n,
            }),
            all: Condvar::new(),
        });
        let slots = (0..n)
            .map(|index| Slot {
                gather: gather.clone(),
                index,
                filled: false,
            })
            .collect();
        (gather, slots)
    }

    fn put(&self, index: usize, r: TransitionResult) {
        let mut s = self.state.locked();
        if let Some(place @ None) = s.results.get_mut(index) {
            *place = Some(r);
            s.left -= 1;
            if s.left == 0 {
                self.all.notify_one();
            }
        }
    }

    /// Waits until every slot is filled; the results, in order.
    pub(super) fn wait(&self) -> Vec<TransitionResult> {
        let s = self.state.locked();
        let mut s = self
            .all
            .wait_while(s, |s| s.left > 0)
            .unwrap_or_else(|e| e.into_inner());
        s.results
            .iter_mut()
            .map(|r| {
                r.take()
                    .unwrap_or_else(|| Err(unavailable("writer stopped")))
            })
            .collect()
    }
}

impl Slot {
    fn fill(mut self, r: TransitionResult) {
        self.gather.put(self.index, r);
        self.filled = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.filled {
            self.gather
                .put(self.index, Err(unavailable("writer stopped")));
        }
    }
}

/// Whether `op` is a fire (fires are batched apart from other requests).
pub(super) fn is_fire(op: &Op) -> bool {
    matches!(op, Op::Fire(..) | Op::Prepared(..))
}

/// Each prepared fire's result, or the failure of them all.
pub(super) type PreparedResults = Result<Vec<Result<Vec<Created>, StoreError>>, StoreError>;

/// A request to the writer, with where its result goes.
pub(super) enum Op {
    Create(Box<Prepared>, Timestamp, CreateDone),
    Transition(String, Transition, TransitionTo),
    PutState(PeriodicState, Sender<Result<(), StoreError>>),
    Fire(
        Box<(Vec<Prepared>, Vec<TickOutcome>, PeriodicState)>,
        Timestamp,
        Sender<Result<Vec<Created>, StoreError>>,
    ),
    Prepared(PreparedFires, Timestamp, Sender<PreparedResults>),
    Templates(Vec<Template>, Sender<Result<u64, StoreError>>),
    Outcomes(Vec<TickOutcome>, Sender<Result<(), StoreError>>),
    Retain(Timestamp, Sender<Result<Vec<String>, StoreError>>),
    Raw(String, Sender<Result<(), StoreError>>),
    /// A repository's record: its key and its JSON (encoded by the caller).
    PutRepo(String, String, Sender<Result<(), StoreError>>),
    DeleteRepo(String, Sender<Result<bool, StoreError>>),
    Accept(Box<NewDelivery>, Sender<Result<Accepted, StoreError>>),
    MarkProcessed(Vec<u64>, Timestamp, Sender<Result<(), StoreError>>),
    PruneDeliveries(Timestamp, Sender<Result<usize, StoreError>>),
    /// Reports to queue, each with its payload's JSON (encoded by the caller).
    EnqueueReports(
        Vec<(NewReport, String)>,
        Sender<Result<Vec<Enqueued>, StoreError>>,
    ),
    /// An attempt to deliver a report (id, version): delivered (no failure)
    /// or failed, at a time.
    ReportAttempt(
        Box<(u64, u64, Option<ReportFailure>)>,
        Timestamp,
        Sender<Result<bool, StoreError>>,
    ),
    PruneReports(Timestamp, Sender<Result<usize, StoreError>>),
    /// A session, a shared secret or a document (`shared`).
    Shared(SharedOp),
}

/// Replies held until the batch's commit. A transition's is the largest (its
/// run, by value, as `Store::transition` answers); a batch holds one reply
/// per request, for the moment of its commit.
#[allow(clippy::large_enum_variant)]
pub(super) enum Reply {
    /// With the writer's shared copy of a new active run, for the observer.
    Create(CreateDone, Result<Created, StoreError>, Option<Arc<Run>>),
    /// With the writer's shared copy of a run that stays active, and the
    /// cluster it had if the transition decided one.
    Transition(
        TransitionTo,
        TransitionResult,
        Option<Arc<Run>>,
        ClusterBefore,
    ),
    Unit(Sender<Result<(), StoreError>>, Result<(), StoreError>),
    Epoch(Sender<Result<u64, StoreError>>, Result<u64, StoreError>),
    Fire(
        Sender<Result<Vec<Created>, StoreError>>,
        Result<Vec<Created>, StoreError>,
    ),
    /// With the deleted runs' labels, counted for the observer.
    Retain(
        Sender<Result<Vec<String>, StoreError>>,
        Result<Vec<String>, StoreError>,
        Vec<RunCount>,
    ),
    Prepared(Sender<PreparedResults>, PreparedResults),
    /// A yes or no: a repository's record deleted, a report's attempt counted.
    Flag(Sender<Result<bool, StoreError>>, Result<bool, StoreError>),
    Enqueued(
        Sender<Result<Vec<Enqueued>, StoreError>>,
        Result<Vec<Enqueued>, StoreError>,
    ),
    Accepted(
        Sender<Result<Accepted, StoreError>>,
        Result<Accepted, StoreError>,
    ),
    Pruned(Sender<Result<usize, StoreError>>, Result<usize, StoreError>),
    /// Of a session, a shared secret or a document (`shared`).
    Shared(SharedReply),
}

impl Reply {
    /// Whether the request is a transition that was not applied.
    pub(super) fn refused(&self) -> bool {
        matches!(self, Reply::Transition(_, Err(_), ..))
    }

    /// Whether the request failed on the database itself rather than on its
    /// own rules.
    pub(super) fn failed_write(&self) -> bool {
        if let Reply::Shared(r) = self {
            return r.failed_write();
        }
        let e = match self {
            Reply::Create(_, Err(e), _) => e,
            Reply::Transition(_, Err(e), ..) => e,
            Reply::Unit(_, Err(e)) => e,
            Reply::Epoch(_, Err(e)) => e,
            Reply::Fire(_, Err(e)) => e,
            Reply::Retain(_, Err(e), _) => e,
            Reply::Prepared(_, Err(e)) => e,
            Reply::Flag(_, Err(e)) => e,
            Reply::Enqueued(_, Err(e)) => e,
            Reply::Accepted(_, Err(e)) => e,
            Reply::Pruned(_, Err(e)) => e,
            _ => return false,
        };
        matches!(e, StoreError::Unavailable(_) | StoreError::Invalid(_))
    }

    /// The message of the request's failure, for the whole batch.
    pub(super) fn error(&self) -> Option<String> {
        if let Reply::Shared(r) = self {
            return r.error();
        }
        let e = match self {
            Reply::Create(_, Err(e), _) => e,
            Reply::Transition(_, Err(e), ..) => e,
            Reply::Unit(_, Err(e)) => e,
            Reply::Epoch(_, Err(e)) => e,
            Reply::Fire(_, Err(e)) => e,
            Reply::Retain(_, Err(e), _) => e,
            Reply::Prepared(_, Err(e)) => e,
            Reply::Flag(_, Err(e)) => e,
            Reply::Enqueued(_, Err(e)) => e,
            Reply::Accepted(_, Err(e)) => e,
            Reply::Pruned(_, Err(e)) => e,
            _ => return None,
        };
        Some(match e {
            StoreError::Unavailable(m) => m.clone(),
            other => other.to_string(),
        })
    }
}

/// Fails a held reply with the batch's failure.
pub(super) fn fail(r: Reply, msg: &str) {
    let e = || unavailable(msg);
    match r {
        Reply::Create(done, ..) => done(Err(e())),
        Reply::Transition(tx, ..) => tx.send(Err(e())),
        Reply::Unit(tx, _) => drop(tx.send(Err(e()))),
        Reply::Epoch(tx, _) => drop(tx.send(Err(e()))),
        Reply::Fire(tx, _) => drop(tx.send(Err(e()))),
        Reply::Retain(tx, ..) => drop(tx.send(Err(e()))),
        Reply::Prepared(tx, _) => drop(tx.send(Err(e()))),
        Reply::Flag(tx, _) => drop(tx.send(Err(e()))),
        Reply::Enqueued(tx, _) => drop(tx.send(Err(e()))),
        Reply::Accepted(tx, _) => drop(tx.send(Err(e()))),
        Reply::Pruned(tx, _) => drop(tx.send(Err(e()))),
        Reply::Shared(r) => r.fail(msg),
    }
}

/// Fails a request the writer did not apply.
pub(super) fn fail_op(op: Op, msg: &str) {
    let e = || unavailable(msg);
    match op {
        Op::Create(_, _, done) => done(Err(e())),
        Op::Transition(_, _, tx) => tx.send(Err(e())),
        Op::PutState(_, tx)
        | Op::Outcomes(_, tx)
        | Op::Raw(_, tx)
        | Op::PutRepo(_, _, tx)
        | Op::MarkProcessed(_, _, tx) => drop(tx.send(Err(e()))),
        Op::DeleteRepo(_, tx) | Op::ReportAttempt(_, _, tx) => drop(tx.send(Err(e()))),
        Op::EnqueueReports(_, tx) => drop(tx.send(Err(e()))),
        Op::Accept(_, tx) => drop(tx.send(Err(e()))),
        Op::PruneDeliveries(_, tx) | Op::PruneReports(_, tx) => drop(tx.send(Err(e()))),
        Op::Templates(_, tx) => drop(tx.send(Err(e()))),
        Op::Prepared(_, _, tx) => drop(tx.send(Err(e()))),
        Op::Fire(_, _, tx) => drop(tx.send(Err(e()))),
        Op::Retain(_, tx) => drop(tx.send(Err(e()))),
        Op::Shared(op) => op.fail(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Results filled from another thread, in any order, come back in the
    /// order of their slots; a slot dropped unfilled (its request lost with
    /// the writer) comes back as that failure rather than leaving the
    /// caller waiting.
    #[test]
    fn gathered_results_come_in_order_and_a_dropped_slot_fails() {
        let (gather, slots) = Gather::new(3);
        let mut slots = slots.into_iter();
        let (a, b, c) = (
            slots.next().unwrap(),
            slots.next().unwrap(),
            slots.next().unwrap(),
        );
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            TransitionTo::Slot(c).send(Err(StoreError::NotFound("c".into())));
            drop(b);
            TransitionTo::Slot(a).send(Err(StoreError::NotFound("a".into())));
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(gather.wait()).unwrap());
        let got = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the results came");
        writer.join().unwrap();
        let got: Vec<String> = got
            .into_iter()
            .map(|r| r.unwrap_err().to_string())
            .collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].contains('a') && got[2].contains('c'), "{got:?}");
        assert!(got[1].contains("writer stopped"), "{got:?}");
    }
}
