//! What callers queue for the writer ([`Op`]: the request, and where its
//! result goes) and what the writer holds for them until the batch commits
//! ([`Reply`]), or fails them with.

use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

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

/// Where the reply to a queued transition arrives.
pub(super) type TransitionReply = mpsc::Receiver<Result<(Run, RunState), StoreError>>;

/// Whether `op` is a fire (fires are batched apart from other requests).
pub(super) fn is_fire(op: &Op) -> bool {
    matches!(op, Op::Fire(..) | Op::Prepared(..))
}

/// Each prepared fire's result, or the failure of them all.
pub(super) type PreparedResults = Result<Vec<Result<Vec<Created>, StoreError>>, StoreError>;

/// A request to the writer, with where its result goes.
pub(super) enum Op {
    Create(Box<Prepared>, Timestamp, CreateDone),
    Transition(
        String,
        Transition,
        Sender<Result<(Run, RunState), StoreError>>,
    ),
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
        Sender<Result<(Run, RunState), StoreError>>,
        Result<(Run, RunState), StoreError>,
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
        Reply::Transition(tx, ..) => drop(tx.send(Err(e()))),
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
        Op::Transition(_, _, tx) => drop(tx.send(Err(e()))),
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
