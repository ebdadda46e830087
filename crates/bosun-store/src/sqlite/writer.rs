//! The writer thread: it takes the requests queued by callers in batches
//! (fires apart from the rest, so a burst of them goes to the fire log),
//! applies each batch in one transaction (the reports of its changes
//! included), tells the observer and the callers once it is committed, and
//! folds the fire log before anything else.

use bosun_base::sync::Lock;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use super::apply::{apply_op, write_cached};
use super::cache::WriterCache;
use super::checkpoint::{bound_wal, track_wal, Commits, WAL_RESTART_FRAMES};
use super::error::{unavailable, TxError};
use super::fire_log;
use super::request::{fail, fail_op, is_fire, Op, Reply, Target};
use super::run_ids::RunIds;
use super::versions::Versions;
use crate::{Before, Created, ReportPolicy, StoreError, TransitionObserver};

/// Whether a committed fire log is waiting to be folded; reads wait for it.
#[derive(Default)]
pub(super) struct FoldGate {
    unfolded: Mutex<bool>,
    folded: std::sync::Condvar,
}

impl FoldGate {
    /// Notes whether a committed log is unfolded (and wakes the readers once
    /// it is not).
    pub(super) fn set(&self, unfolded: bool) {
        *self.unfolded.locked() = unfolded;
        if !unfolded {
            self.folded.notify_all();
        }
    }

    /// Waits (at most `limit`) until no committed log is unfolded.
    pub(super) fn wait(&self, limit: Duration) -> Result<(), StoreError> {
        let guard = self.unfolded.locked();
        let (guard, _) = self
            .folded
            .wait_timeout_while(guard, limit, |unfolded| *unfolded)
            .unwrap_or_else(|e| e.into_inner());
        if *guard {
            return Err(unavailable("the fire log could not be folded yet"));
        }
        Ok(())
    }
}

/// A batch of fires holds up to this many times `max_batch` of them.
const FIRE_BATCH_FACTOR: usize = 16;

/// Folds the fire log in one transaction (nothing happens when it is empty).
pub(super) fn fold(conn: &mut Connection) -> Result<(), TxError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    fire_log::fold(&tx)?;
    Ok(tx.commit()?)
}

/// How many times the writer gives up the CPU (without sleeping) for more
/// requests to join a batch before it commits: the threads that were about
/// to queue one (an API request being parsed, a controller pass) run first,
/// and their requests share the commit and its fsync. A timed wait would add
/// its delay to every request; a yield with nothing else to run returns at
/// once.
const YIELDS: u32 = 2;

/// The writer thread's settings.
pub(super) struct Writer {
    pub(super) max_batch: usize,
    pub(super) fire_log_min: usize,
    pub(super) hold_fire_log: bool,
    pub(super) observer: Option<Arc<dyn TransitionObserver>>,
    /// What to report of each change, asked in its transaction (installed
    /// once, by [`Store::set_report_policy`](crate::Store::set_report_policy)).
    pub(super) policy: Arc<OnceLock<Arc<dyn ReportPolicy>>>,
    pub(super) commits: Commits,
    pub(super) gate: Arc<FoldGate>,
    pub(super) versions: Arc<Versions>,
    /// The database's run ids.
    pub(super) ids: RunIds,
}

impl Writer {
    /// Takes requests from `rx` in batches and commits them, until every
    /// sender is gone.
    pub(super) fn run(self, mut conn: Connection, rx: Receiver<Op>) {
        let mut cache = WriterCache::new(self.ids.clone());
        track_wal(&conn);
        let mut checkpoint_at = WAL_RESTART_FRAMES;
        // An op that did not fit the previous batch (fires and other requests
        // go in separate batches, so a burst of fires can use the log).
        let mut held: Option<Op> = None;
        let mut unfolded = false;
        loop {
            if unfolded && held.is_none() {
                // More fires of the burst go on the log before it is folded.
                held = rx.try_recv().ok();
            }
            if unfolded && !held.as_ref().is_some_and(is_fire) {
                // A fold that failed is tried again before the next batch, and
                // every second while nothing comes.
                match fold(&mut conn) {
                    Ok(()) => {
                        unfolded = false;
                        cache.log_keys.clear();
                        cache.log_keys_partial = false;
                        cache.log_records = 0;
                        self.gate.set(false);
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot fold the fire log; retrying"),
                }
            }
            let first = match held.take() {
                Some(op) => op,
                None if unfolded => match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok(op) => op,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                },
                None => match rx.recv() {
                    Ok(op) => op,
                    Err(_) => return,
                },
            };
            let fires = is_fire(&first);
            // Appends to the log are cheap and their commit's fsync is not:
            // fires are taken in batches many times larger.
            let limit = if fires {
                self.max_batch.saturating_mul(FIRE_BATCH_FACTOR)
            } else {
                self.max_batch
            };
            let mut ops = vec![first];
            let mut yields = YIELDS;
            while ops.len() < limit {
                match rx.try_recv() {
                    Ok(op) if is_fire(&op) == fires => ops.push(op),
                    Ok(op) => {
                        held = Some(op);
                        break;
                    }
                    Err(mpsc::TryRecvError::Empty) if yields > 0 => {
                        yields -= 1;
                        std::thread::yield_now();
                    }
                    Err(_) => break,
                }
            }
            if unfolded && !fires {
                // Nothing but fires is written on top of an unfolded log.
                for op in ops.drain(..) {
                    fail_op(op, "the fire log could not be folded");
                }
                continue;
            }
            let fired: usize = ops
                .iter()
                .map(|op| match op {
                    Op::Fire(f, ..) => f.0.len().max(1),
                    Op::Prepared(f, ..) => f.fires.len(),
                    _ => 0,
                })
                .sum();
            // Prepared fires are encoded for the log, and always go there.
            let prepared = ops.iter().any(|op| matches!(op, Op::Prepared(..)));
            let target = if unfolded
                || prepared
                || (fires && self.fire_log_min > 0 && fired >= self.fire_log_min)
            {
                Target::Log
            } else {
                Target::Tables
            };
            let Some(replies) = self.commit(&mut conn, ops, target, &mut cache) else {
                continue;
            };
            if target == Target::Log && !self.hold_fire_log {
                // Readers wait from now until the fold; the callers are told
                // after this, so none of them reads around the log.
                unfolded = true;
                self.gate.set(true);
            }
            self.commits.committed();
            self.reply(replies);
            bound_wal(&conn, &mut checkpoint_at);
        }
    }

    /// Applies a batch in one transaction; on failure every request of the
    /// batch is failed and None returned.
    fn commit(
        &self,
        conn: &mut Connection,
        ops: Vec<Op>,
        target: Target,
        cache: &mut WriterCache,
    ) -> Option<Vec<Reply>> {
        let mut replies = Vec::with_capacity(ops.len());
        // Taken one by one: those after a failed one are failed below with
        // the batch's error (a drain would drop them unanswered).
        let mut ops = ops.into_iter().peekable();
        // The committed log's records, before this batch adds its own.
        let log_records = cache.log_records;
        let policy = self.policy.get().map(|p| p.as_ref());
        let committed = (|| -> Result<(), TxError> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // A run whose transition left its row unwritten: the next
            // request, a transition of the same run, writes it.
            let mut unwritten: Option<String> = None;
            while let Some(op) = ops.next() {
                // Of two transitions of one run in a row (a short local
                // job's start and end, committed together), the first's row
                // is not written: the second's write covers it.
                let followed = match (&op, ops.peek()) {
                    (Op::Transition(id, ..), Some(Op::Transition(next, ..))) if id == next => {
                        Some(id.clone())
                    }
                    _ => None,
                };
                let reply = apply_op(
                    &tx,
                    op,
                    cache,
                    target,
                    &self.versions,
                    policy,
                    followed.is_none(),
                );
                // A request refused by its own rules (no such run, a forbidden
                // transition) is refused before it writes anything. A failed
                // read or write (a full disk, an I/O error) may leave part of
                // the request written, or SQLite may already have rolled the
                // whole transaction back: then nothing of the batch is kept.
                // (This replaces a savepoint per request, whose page copies
                // were a sixth of a burst's cost.)
                if tx.is_autocommit() || reply.failed_write() {
                    let why = reply.error().map_or(TxError::RolledBack, TxError::Request);
                    replies.push(reply);
                    return Err(why);
                }
                let refused = reply.refused();
                replies.push(reply);
                if let Some(id) = unwritten.take() {
                    if refused {
                        // The follower was refused by its rules: the row as
                        // the cache holds it, which the first one left.
                        write_cached(&tx, cache, &id)?;
                    }
                }
                if !refused {
                    unwritten = followed;
                }
            }
            Ok(tx.commit()?)
        })();
        // Versions change once the batch is visible (or rolled back: a bump
        // that was not needed only makes prepared fires decide again).
        cache.touched.bump(&self.versions);
        if let Err(e) = committed {
            let msg = e.to_string();
            // The unfolded log is committed, its records stay; the keys of
            // this batch's records may have joined its keys (a key of a
            // record rolled back would name no record): they are read again
            // from the log when next needed.
            *cache = WriterCache {
                log_keys_partial: log_records > 0,
                log_records,
                epoch: cache.epoch + 1,
                ..WriterCache::new(cache.ids.clone())
            };
            self.versions.bump_all();
            // Nothing of the batch was written.
            for r in replies.drain(..) {
                fail(r, &msg);
            }
            for op in ops {
                fail_op(op, &msg);
            }
            return None;
        }
        Some(replies)
    }

    /// Tells the observer and the callers what a committed batch did. The
    /// runs of fires prepared ahead are shared (one copy for the observers
    /// that keep them), and the observers that may hear of them after their
    /// caller's answer ([`TransitionObserver::after_answer`]) do so once
    /// every caller of the batch has its answer.
    fn reply(&self, replies: Vec<Reply>) {
        let observer = &self.observer;
        let mut after: Vec<Arc<crate::Run>> = Vec::new();
        for r in replies {
            match r {
                Reply::Create(done, res, shared) => {
                    if let (Some(o), Ok(Created::New(run))) = (observer, &res) {
                        o.on_change(run, shared.as_ref(), None);
                    }
                    done(res);
                }
                Reply::Transition(tx, res, shared, cluster) => {
                    if let (Some(o), Ok((run, from))) = (observer, &res) {
                        let cluster = match &cluster {
                            Some(before) => before.as_deref(),
                            None => run.cluster.as_deref(),
                        };
                        let before = Before {
                            state: *from,
                            cluster,
                        };
                        o.on_change(run, shared.as_ref(), Some(before));
                    }
                    tx.send(res);
                }
                Reply::Unit(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Epoch(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Fire(tx, res) => {
                    if let (Some(o), Ok(created)) = (observer, &res) {
                        for c in created {
                            if let Created::New(run) = c {
                                o.on_change(run, Some(run), None);
                            }
                        }
                    }
                    let _ = tx.send(res);
                }
                Reply::Retain(tx, res, counts) => {
                    if let (Some(o), false) = (observer, counts.is_empty()) {
                        o.on_deleted(&counts);
                    }
                    let _ = tx.send(res);
                }
                Reply::Flag(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Enqueued(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Accepted(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Pruned(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Shared(r) => r.send(),
                Reply::Prepared(tx, res) => {
                    if let (Some(o), Ok(results)) = (observer, &res) {
                        for created in results.iter().flatten() {
                            for c in created {
                                if let Created::New(run) = c {
                                    o.on_prepared_created(run, false);
                                    after.push(run.clone());
                                }
                            }
                        }
                    }
                    let _ = tx.send(res);
                }
            }
        }
        if let (Some(o), false) = (observer, after.is_empty()) {
            for run in &after {
                o.on_prepared_created(run, true);
            }
            o.after_prepared();
        }
    }
}
