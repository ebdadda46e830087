//! The report outbox: what bosun has to tell the forge about its runs (commit
//! statuses, comments, labels), kept until the forge has it.
//!
//! The reports of a run's changes are written with them: the daemon installs
//! a [`ReportPolicy`] ([`Store::set_report_policy`]), which the store asks,
//! for every run it creates and every state change it commits (whatever
//! made it: one transition, a batch of them, a periodic's fire, fires
//! prepared ahead), what to queue; the entries are queued in the same commit
//! as the change (one SQLite transaction; under the memory store's lock), so
//! a crash never keeps a change without its report, nor a report without
//! its change. Other reports (a comment not tied to one change) are queued
//! on their own ([`Store::enqueue_reports`]). A worker takes the due ones
//! ([`Store::due_reports`]), sends them, and says how it went
//! ([`Store::report_delivered`], [`Store::report_failed`]). An entry stays
//! pending until then, so one being sent when bosun is killed is sent again
//! after the restart (a forge takes the same status twice without harm).
//!
//! Every entry has a key, what a newer entry replaces (one commit status
//! context of one commit, one pull request's comment), and a version that
//! grows with the state it reports. A key has at most one pending entry: a
//! newer version takes the place of a pending older one (which is kept,
//! [`ReportOutcome::Superseded`], never sent), and a version no newer than
//! the newest the key has had (pending, delivered, refused) is not queued
//! at all ([`Enqueued::Stale`]), so an older state never goes over a newer
//! one. The newest version of a key is remembered for as long as one of
//! its entries is kept (see [`Store::prune_reports`]).
//!
//! [`Store::enqueue_reports`]: crate::Store::enqueue_reports
//! [`Store::set_report_policy`]: crate::Store::set_report_policy
//! [`Store::due_reports`]: crate::Store::due_reports
//! [`Store::report_delivered`]: crate::Store::report_delivered
//! [`Store::report_failed`]: crate::Store::report_failed
//! [`Store::prune_reports`]: crate::Store::prune_reports

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;

use crate::run::{NewRun, Run, RunState};
use crate::StoreError;

/// What to tell the forge of a run's committed change: installed into a
/// store by the daemon ([`Store::set_report_policy`]), asked inside the
/// commit of every run creation (`before` none) and state transition
/// (`before`: the state it left; the same state for a revival or a new
/// description) the store makes, whatever path made it, in commit order.
///
/// Its entries are queued in the same commit as the change, by the rules of
/// [`Store::enqueue_reports`] (a newer version supersedes the key's pending
/// entry, one no newer is stale), so they are due as soon as the change is
/// committed. An entry whose version the store cannot keep (above
/// `i64::MAX`) is left out, with an error logged, and the change commits
/// with the others: a bad report never holds a run back. An entry that
/// cannot be written (a full disk) fails the change with it, as any failed
/// write does: nothing of either is kept.
///
/// It is called while the store's writer (SQLite) or lock (memory) is held:
/// it must be cheap and pure, and must not call the store. Returning nothing
/// costs the store nothing (no statement).
///
/// [`Store::set_report_policy`]: crate::Store::set_report_policy
/// [`Store::enqueue_reports`]: crate::Store::enqueue_reports
pub trait ReportPolicy: Send + Sync {
    /// The entries to queue for `run` as the change leaves it; `before` is
    /// the state it left, none when it was just created.
    fn reports(&self, run: &Run, before: Option<RunState>) -> Vec<NewReport>;

    /// Whether a run made of `new` may have entries when it is created.
    /// False lets a store commit the creation without asking
    /// [`ReportPolicy::reports`] (PostgreSQL's then takes one statement and
    /// no transaction around it), so a policy answering false must have
    /// nothing for such a run. True unless a policy knows better.
    fn may_report_creation(&self, new: &NewRun) -> bool {
        let _ = new;
        true
    }
}

/// The entries of `policy` for a change, those the store can keep (an entry
/// beyond `i64::MAX` is left out and logged), their `created_at` kept to
/// the microsecond: what every store queues with the change.
pub fn policy_reports(
    policy: &dyn ReportPolicy,
    run: &Run,
    before: Option<RunState>,
) -> Vec<NewReport> {
    let mut entries = policy.reports(run, before);
    entries.retain_mut(|r| match r.check() {
        Ok(()) => {
            r.created_at = crate::run::micros(r.created_at);
            true
        }
        Err(e) => {
            tracing::error!(run = %run.id, error = %e, "report left out of a run's change");
            false
        }
    });
    entries
}

/// What a report tells the forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReportKind {
    /// A commit status (a context on a commit).
    Status,
    /// A comment on a pull request (created, or edited in place).
    Comment,
    /// Labels of a pull request.
    Label,
}

impl ReportKind {
    /// Its name as stored: `status`, `comment`, `label`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::Status => "status",
            ReportKind::Comment => "comment",
            ReportKind::Label => "label",
        }
    }
}

impl fmt::Display for ReportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReportKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [ReportKind::Status, ReportKind::Comment, ReportKind::Label]
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown report kind {s:?}"))
    }
}

/// A report to queue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReport {
    /// What a newer entry replaces, e.g.
    /// `status:github:acme/widgets:SHA:CONTEXT` or
    /// `comment:github:acme/widgets:PR`.
    pub key: String,
    /// Its kind.
    pub kind: ReportKind,
    /// The run it is about, if one (listed on the run's page).
    pub run_id: Option<String>,
    /// Grows with the state reported, per key (a run's transition count, a
    /// counter taken from the time); at most `i64::MAX`.
    pub version: u64,
    /// What to send, for the worker to read.
    pub payload: serde_json::Value,
    /// When it was made (kept to the microsecond); it is due from then.
    pub created_at: Timestamp,
}

impl NewReport {
    /// Refuses a version the stores cannot keep (above `i64::MAX`).
    pub fn check(&self) -> Result<(), StoreError> {
        if i64::try_from(self.version).is_err() {
            return Err(StoreError::Invalid(format!(
                "report {}: version {} is above {}",
                self.key,
                self.version,
                i64::MAX
            )));
        }
        Ok(())
    }
}

/// What [`Store::enqueue_reports`](crate::Store::enqueue_reports) did with
/// one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Queued under this id.
    Queued {
        /// Its id (ids increase in order of queueing, and are never reused).
        id: u64,
        /// The pending entry of its key it replaced, if one.
        superseded: Option<u64>,
    },
    /// Not queued: the key has had this version or a newer one.
    Stale {
        /// The newest version the key has had.
        newest: u64,
    },
}

/// Where an entry stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportOutcome {
    /// Not delivered yet: due at its `next_attempt_at`.
    Pending,
    /// The forge has it.
    Delivered {
        /// When the worker said so.
        at: Timestamp,
    },
    /// The forge refused it for good; its answer is the entry's
    /// `last_error`.
    Refused {
        /// When the worker said so.
        at: Timestamp,
    },
    /// A newer version of its key was queued before it was delivered: it is
    /// not sent.
    Superseded {
        /// When (the newer entry's `created_at`).
        at: Timestamp,
        /// The newer version.
        by_version: u64,
    },
}

impl ReportOutcome {
    /// Its name as stored: `pending`, `delivered`, `refused`, `superseded`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReportOutcome::Pending => "pending",
            ReportOutcome::Delivered { .. } => "delivered",
            ReportOutcome::Refused { .. } => "refused",
            ReportOutcome::Superseded { .. } => "superseded",
        }
    }

    /// When it ended (none while pending).
    pub fn finished_at(&self) -> Option<Timestamp> {
        match self {
            ReportOutcome::Pending => None,
            ReportOutcome::Delivered { at }
            | ReportOutcome::Refused { at }
            | ReportOutcome::Superseded { at, .. } => Some(*at),
        }
    }
}

/// A kept entry of the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReport {
    /// Its id.
    pub id: u64,
    /// Its key.
    pub key: String,
    /// Its kind.
    pub kind: ReportKind,
    /// The run it is about.
    pub run_id: Option<String>,
    /// Its version.
    pub version: u64,
    /// What to send.
    pub payload: serde_json::Value,
    /// Attempts to deliver it so far (each
    /// [`Store::report_delivered`](crate::Store::report_delivered) or
    /// [`Store::report_failed`](crate::Store::report_failed) of it counts).
    pub attempts: u32,
    /// When it was queued.
    pub created_at: Timestamp,
    /// When it is due (again).
    pub next_attempt_at: Timestamp,
    /// Why its last attempt failed (for a refused one: the forge's answer).
    pub last_error: Option<String>,
    /// Where it stands.
    pub outcome: ReportOutcome,
}

/// How an attempt to deliver a report failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportFailure {
    /// Try again at `at` (the forge was down, rate limits, a timeout).
    Retry {
        /// When it is due again.
        at: Timestamp,
        /// What went wrong.
        error: String,
    },
    /// The forge refused it (its answer): never sent again. A newer version
    /// of its key is queued and sent as any other.
    Permanent {
        /// The forge's answer.
        error: String,
    },
}

/// The outbox's entries by where they stand, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportCounts {
    /// Not delivered yet.
    pub pending: u64,
    /// Refused by the forge (and not pruned yet).
    pub refused: u64,
}
