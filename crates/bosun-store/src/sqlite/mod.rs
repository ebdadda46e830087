//! The SQLite store: one file, WAL, versioned migrations, and one writer thread
//! that batches concurrent writes into one transaction (one fsync for many runs).
//!
//! Durability: WAL with `synchronous = FULL`. A write is acknowledged once its
//! transaction is committed and the WAL is fsynced: it survives a crash or
//! `kill -9` of bosun and also a power loss or kernel crash (the database is
//! never corrupted). The cost is one fsync per commit, and a commit carries a
//! whole batch of concurrent writes, so it is paid once per batch, not per run.
//! (`NORMAL` would skip that fsync: still safe against a crash of bosun, but a
//! power loss could lose the last commits, runs the API had acknowledged.)
//! Temporary data stays in memory. Checkpoints (copying the WAL into the
//! database) run on a thread of their own, beside the writer. Under a steady
//! load that thread never copies the last frames (more are committed while it
//! runs), so once the WAL holds 4,096 frames (16 MiB) the writer
//! finishes the copy itself between two batches, and SQLite starts the WAL over
//! from its beginning: the WAL stays at about 16 MiB instead of growing for as
//! long as the load lasts.
//!
//! Bursts of periodic fires go through a fire log first. When a writer batch
//! holds only fires, and at least [`SqliteOptions::fire_log_min`] of them (or
//! fires prepared ahead), they are appended to `fire_log`, a table without
//! indexes, as compact records that name their runs' templates (stored once
//! per content, as specs are), and that one transaction is the commit point:
//! the callers get their answers and observers see the runs. The writer then
//! folds the log into `runs`, `tick_outcomes` and `periodic_state` in a second
//! transaction, before it takes any other request. A fire is a few hundred
//! bytes at the end of one table, where a run in `runs` also writes its
//! indexes, so ten thousand periodics due in one second commit in a small
//! fraction of the time. Reads wait while a committed log is not folded yet, so
//! no reader sees a fire's run without its outcome and schedule state, and a
//! crash between the two transactions leaves a log that the next open folds
//! first. The tick's unique key is checked against `runs` and the unfolded log
//! before the append, so the log never holds a second run of a tick.
//!
//! Fires prepared ahead ([`Store::prepare_fires`]) have their tick keys
//! checked, their templates stored and their records encoded at preparation;
//! their commit checks each periodic's version (bumped by the writer after
//! every commit touching it) and inserts all of them as one record.
//!
//! Followed repositories are a JSON record each, read and written whole.
//! Webhook deliveries are written by the writer as every other write is, so
//! the accepts of many concurrent HTTP requests share one transaction and its
//! fsync (each caller is answered once that commit is done); the check of a
//! (forge, delivery id) already kept is made in the same transaction, so two
//! concurrent deliveries of one id make one row. Reads of either go through
//! the reader's connection.
//!
//! The report outbox is written by the writer too (an enqueue's check of its
//! key's newest version and the superseding of the pending entry are in the
//! same transaction as its insert, so concurrent enqueues of one key leave
//! one pending entry, the newest). The report policy's entries for a run's
//! creation or transition are written right after the run's row, in the
//! batch's transaction: a failure to write them rolls the batch back, the
//! change with them. Without a policy, or when it reports nothing, a change
//! writes no more than it did before the outbox. The fire log's runs are
//! reported when the log's record is committed (their creation); the fold
//! creates nothing and reports nothing.
//!
//! A run's repository is a generated column
//! of `runs` with an index of its own, and its pulls rows of `run_pulls`,
//! inserted with the run (a create, or the fold of the fire log) and deleted
//! with it by a trigger on `runs` (retention): a pull's runs are a lookup
//! there, not a walk of a repository's runs. (An insert trigger would cost
//! every insert a statement journal: schema 12.)
//!
//! A write that cannot commit (disk full, database locked by another process past
//! the busy timeout, I/O error) fails with [`StoreError::Unavailable`] and leaves
//! nothing behind: a request that breaks its own rules (no such run, a
//! forbidden transition) is refused before it writes anything, and a read or
//! write that fails rolls the whole batch back and fails every request in it.
//!
//! Dashboard sessions, shared secrets and documents (`shared`) are written
//! by the writer too, each check in the transaction of its write (a
//! secret's insert-if-absent, a document's compare-and-set), and read
//! through the reader.
//!
//! The modules: `schema` (migrations), `writer` (the writer thread and its
//! batches), `request` (what is queued for it), `apply` (what each request
//! writes), `cache` (what the writer keeps between batches), `fire_log`,
//! `versions` (the periodics' versions), `shared` (sessions, secrets,
//! documents), `checkpoint` (the checkpoint thread
//! and the WAL's bound), `run_ids` (a created run's id made of its seq),
//! `sql` (statements and queries), `codec` (rows and values), `error`.

mod apply;
mod cache;
mod checkpoint;
mod codec;
mod error;
mod fire_log;
mod request;
mod run_ids;
mod schema;
mod shared;
mod sql;
mod versions;
mod writer;

use bosun_base::sync::Lock;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use rusqlite::Connection;

use self::checkpoint::{checkpoint_loop, Commits};
use self::codec::{prepare, prepare_fire_run, Prepared};
use self::error::unavailable;
use self::fire_log::FireEntry;
use self::request::{fail_op, Gather, Op, TransitionTo};
use self::run_ids::RunIds;
use self::shared::SharedOp;
use self::versions::Versions;
use self::writer::{FoldGate, Writer};
use crate::reports::{
    Enqueued, NewReport, ReportCounts, ReportFailure, ReportPolicy, StoredReport,
};
use crate::repos::{Accepted, NewDelivery, RepoRecord, StoredDelivery};
use crate::run::Run;
use crate::shared::{check_expected, Session, StoredDocument};
use crate::{
    CreateDone, Created, Fire, JobDemand, NewRun, PeriodicRuns, PeriodicState, PreparedFires,
    RunCount, RunFilter, SkippedTicks, Store, StoreError, TickOutcome, Transition,
    TransitionObserver,
};

/// How long a read waits for the fire log to be folded.
const FOLD_WAIT: Duration = Duration::from_secs(10);

/// Options of a SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long a write waits for a lock held by another connection.
    pub busy_timeout: Duration,
    /// At most this many requests share one transaction.
    pub max_batch: usize,
    /// A batch of at least this many fires (and nothing else) is committed
    /// through the fire log; 0: never.
    pub fire_log_min: usize,
    /// Tests: never fold the fire log while open (as if every fold were cut
    /// short by a crash), so that the next open must.
    #[doc(hidden)]
    pub hold_fire_log: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            max_batch: 512,
            fire_log_min: 64,
            hold_fire_log: false,
        }
    }
}

/// The SQLite store.
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<Option<Sender<Op>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    reader: Mutex<Connection>,
    gate: Arc<FoldGate>,
    versions: Arc<Versions>,
    /// The report policy, shared with the writer.
    policy: Arc<OnceLock<Arc<dyn ReportPolicy>>>,
    /// The database's run ids (see `run_ids`).
    ids: RunIds,
}

/// The page cache of the writer's connection, in KiB (SQLite's default).
/// The pages a writer touches again are few: the right edges of the
/// indexes, and the rows of runs that move (the writer keeps the active
/// runs themselves in memory). A burst of fires goes to the fire log, whose
/// tables have no index. A larger cache fills as the database grows and
/// stays full: at 8 MiB it was about 300 bytes of every run held at 10,000
/// (`watch_memory`), while the bursts the daemon commits were no faster
/// (`fire_bench` with `FIRE_BENCH_AHEAD=1`, `bench/periodic-burst.sh`).
const WRITER_CACHE_KIB: i64 = 2 * 1024;

/// The page cache of the reader's connection, in KiB. The reads the daemon
/// makes often (active runs, a periodic's last runs, specs, the newest runs)
/// are of a few recent pages; a listing of old runs pages through the table
/// once. A larger cache would, once the database has grown, hold that much
/// more memory for little.
const READER_CACHE_KIB: i64 = 2 * 1024;

/// A one-off scan's ([`Store::job_demand`]): it reads each page once.
const SCAN_CACHE_KIB: i64 = 1024;

/// The checkpointer's: a checkpoint copies frames from the WAL to the
/// database file without going through the cache.
const CHECKPOINT_CACHE_KIB: i64 = 1024;

/// Opens a connection: WAL, `synchronous = FULL`, temporary data in memory,
/// a page cache of `cache_kib`.
fn open(path: &Path, opts: &SqliteOptions, cache_kib: i64) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(unavailable)?;
    conn.busy_timeout(opts.busy_timeout).map_err(unavailable)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(unavailable)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .and_then(|()| conn.pragma_update(None, "temp_store", "MEMORY"))
        .and_then(|()| conn.pragma_update(None, "cache_size", -cache_kib))
        .map_err(unavailable)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(unavailable)?;
    Ok(conn)
}

/// The database's run ids: its key, made at random the first time, and a
/// generation drawn at random for this store's new ids.
fn run_ids_of(conn: &Connection) -> Result<RunIds, StoreError> {
    let drawn = |e: getrandom::Error| unavailable(format!("cannot draw the run ids' key: {e}"));
    let candidate = RunIds::random_key().map_err(drawn)?;
    let generation = RunIds::random_generation().map_err(drawn)?;
    let key = shared::secret(conn, run_ids::KEY_NAME, &candidate).map_err(unavailable)?;
    if key.len() < 16 {
        return Err(StoreError::Invalid(format!(
            "the run id key in `secrets` has {} bytes, at least 16 are needed",
            key.len()
        )));
    }
    Ok(RunIds::new(&key, generation))
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the store at `path`.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default(), None)
    }

    /// Opens with options and an observer of transitions.
    pub fn open_with(
        path: impl Into<PathBuf>,
        opts: SqliteOptions,
        observer: Option<Arc<dyn TransitionObserver>>,
    ) -> Result<Self, StoreError> {
        let path = path.into();
        let mut wconn = open(&path, &opts, WRITER_CACHE_KIB)?;
        schema::migrate(&mut wconn)?;
        let ids = run_ids_of(&wconn)?;
        // A log committed before a crash is folded before anything else.
        writer::fold(&mut wconn).map_err(unavailable)?;
        // The writer does not checkpoint after every commit: copying the WAL
        // into the database (and its fsync) would stall the commits queued
        // behind it. A thread of its own does it, on its own connection,
        // without blocking the writer (PASSIVE), after commits and at most
        // every CHECKPOINT_PAUSE; the writer only finishes a checkpoint when
        // the WAL grows long (`bound_wal`).
        wconn
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(unavailable)?;
        let ckconn = open(&path, &opts, CHECKPOINT_CACHE_KIB)?;
        let reader = open(&path, &opts, READER_CACHE_KIB)?;
        let (tx, rx) = mpsc::channel();
        let (commits, watch) = Commits::new();
        let max_batch = opts.max_batch.max(1);
        let gate = Arc::new(FoldGate::default());
        let versions = Arc::new(Versions::default());
        let policy = Arc::new(OnceLock::new());
        let writer = Writer {
            policy: policy.clone(),
            versions: versions.clone(),
            max_batch,
            fire_log_min: opts.fire_log_min,
            hold_fire_log: opts.hold_fire_log,
            observer,
            commits,
            gate: gate.clone(),
            ids: ids.clone(),
        };
        let checkpointer = std::thread::Builder::new()
            .name("bosun-store-checkpoint".into())
            .spawn(move || checkpoint_loop(ckconn, watch))
            .map_err(unavailable)?;
        let thread = std::thread::Builder::new()
            .name("bosun-store-writer".into())
            .spawn(move || {
                writer.run(wconn, rx);
                let _ = checkpointer.join();
            })
            .map_err(unavailable)?;
        Ok(SqliteStore {
            path,
            writer: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            reader: Mutex::new(reader),
            gate,
            versions,
            policy,
            ids,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn send<T>(
        &self,
        make: impl FnOnce(Sender<Result<T, StoreError>>) -> Op,
    ) -> Result<T, StoreError> {
        let (tx, rx) = mpsc::channel();
        let writer = self.writer.locked();
        writer
            .as_ref()
            .ok_or_else(|| unavailable("store closed"))?
            .send(make(tx))
            .map_err(|_| unavailable("writer stopped"))?;
        drop(writer);
        rx.recv().map_err(|_| unavailable("writer stopped"))?
    }

    /// Runs SQL on the writer connection (tests: `PRAGMA max_page_count`, ...).
    #[doc(hidden)]
    pub fn execute_raw(&self, sql: &str) -> Result<(), StoreError> {
        self.send(|tx| Op::Raw(sql.to_string(), tx))
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        self.gate.wait(FOLD_WAIT)?;
        let conn = self.reader.locked();
        f(&conn).map_err(unavailable)
    }

    /// Reads in one read transaction: one snapshot for many statements, and
    /// one WAL read lock instead of one per statement (a batch read of ten
    /// thousand periodics runs twenty thousand statements).
    fn read_snapshot<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.read(|c| {
            let tx = c.unchecked_transaction()?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Closing the channel ends the writer after the requests already queued.
        self.writer.locked().take();
        if let Some(t) = self.thread.locked().take() {
            let _ = t.join();
        }
    }
}

impl Store for SqliteStore {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        let (tx, rx) = mpsc::channel();
        self.create_run_then(
            new,
            at,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().map_err(|_| unavailable("writer stopped"))?
    }

    fn create_run_then(&self, new: NewRun, at: Timestamp, done: CreateDone) {
        let at = crate::run::micros(at);
        let op = Op::Create(Box::new(prepare(new)), at, done);
        let writer = self.writer.locked();
        let Some(w) = writer.as_ref() else {
            drop(writer);
            fail_op(op, "store closed");
            return;
        };
        if let Err(mpsc::SendError(op)) = w.send(op) {
            drop(writer);
            fail_op(op, "writer stopped");
        }
    }

    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError> {
        self.send(|tx| Op::Transition(id.to_string(), t, TransitionTo::Channel(tx)))
            .map(|(run, _)| run)
    }

    fn transitions(&self, batch: Vec<(String, Transition)>) -> Vec<Result<Run, StoreError>> {
        // Queued all before waiting, so the writer commits them together;
        // their results are gathered, so this thread wakes once for them.
        let (gather, slots) = Gather::new(batch.len());
        {
            let writer = self.writer.locked();
            for ((id, t), slot) in batch.into_iter().zip(slots) {
                let op = Op::Transition(id, t, TransitionTo::Slot(slot));
                match writer.as_ref() {
                    Some(w) => {
                        if let Err(mpsc::SendError(op)) = w.send(op) {
                            fail_op(op, "writer stopped");
                        }
                    }
                    None => fail_op(op, "store closed"),
                }
            }
        }
        gather
            .wait()
            .into_iter()
            .map(|r| r.map(|(run, _)| run))
            .collect()
    }

    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        self.read(|c| sql::get_run(c, &self.ids, id))
    }

    fn list(&self, f: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let (sql, args) = sql::list_query(&self.ids, f);
        let page = if f.after.is_some() || f.before.is_some() {
            self.read_snapshot(|c| sql::list(c, &self.ids, f, &sql, &args))?
        } else {
            self.read(|c| sql::list(c, &self.ids, f, &sql, &args))?
        };
        page.map_err(StoreError::NotFound)
    }

    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let body: Option<String> = self.read(|c| sql::spec_body(c, hash))?;
        body.map(|b| serde_json::from_str(&b).map_err(|e| StoreError::Invalid(e.to_string())))
            .transpose()
    }

    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        self.read(|c| sql::periodic_state(c, periodic))
    }

    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        self.send(|tx| Op::PutState(state.clone(), tx))
    }

    fn periodic_states(
        &self,
        periodics: &[String],
    ) -> Result<std::collections::HashMap<String, PeriodicState>, StoreError> {
        // One statement per 500 periodics rather than one per periodic.
        let mut out = std::collections::HashMap::new();
        self.read_snapshot(|c| sql::periodic_states(c, periodics, &mut out))?;
        Ok(out)
    }

    fn periodic_runs(
        &self,
        periodics: &[String],
    ) -> Result<std::collections::HashMap<String, PeriodicRuns>, StoreError> {
        self.read_snapshot(|c| sql::periodic_runs(c, periodics))
    }

    fn count_runs(&self) -> Result<Vec<RunCount>, StoreError> {
        self.read(sql::count_runs)
    }

    fn commit_fires(
        &self,
        fires: Vec<Fire>,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        // Every fire is queued before any reply is awaited, so the writer
        // commits them in a few large transactions. They are queued in the
        // order of their periodics' names: most of what a fire writes is keyed
        // by its periodic (its tick key, its schedule state, its outcomes), so
        // a batch of neighbours dirties a few neighbouring index pages where a
        // batch in arrival order dirties nearly every page of each index, and
        // every commit writes them all to the WAL again (twice the time for
        // 10,000 fires).
        let at = crate::run::micros(at);
        let mut fires: Vec<(usize, Fire)> = fires.into_iter().enumerate().collect();
        fires.sort_unstable_by(|a, b| a.1.state.periodic.cmp(&b.1.state.periodic));
        type FireReply = mpsc::Receiver<Result<Vec<Created>, StoreError>>;
        let mut queued: Vec<(usize, Result<FireReply, StoreError>)> = {
            let writer = self.writer.locked();
            fires
                .into_iter()
                .map(|(i, fire)| {
                    let (tx, rx) = mpsc::channel();
                    let runs = fire.runs.into_iter().map(prepare_fire_run).collect();
                    let sent = writer
                        .as_ref()
                        .ok_or_else(|| unavailable("store closed"))
                        .and_then(|w| {
                            w.send(Op::Fire(
                                Box::new((runs, fire.outcomes, fire.state)),
                                at,
                                tx,
                            ))
                            .map_err(|_| unavailable("writer stopped"))
                        });
                    (i, sent.map(|()| rx))
                })
                .collect()
        };
        queued.sort_unstable_by_key(|(i, _)| *i);
        queued
            .into_iter()
            .map(|(_, r)| r?.recv().map_err(|_| unavailable("writer stopped"))?)
            .collect()
    }

    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        self.send(|tx| Op::Outcomes(outcomes.to_vec(), tx))
    }

    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        let at = crate::run::micros(at);
        let runs = fire.runs.into_iter().map(prepare_fire_run).collect();
        self.send(|tx| Op::Fire(Box::new((runs, fire.outcomes, fire.state)), at, tx))
    }

    fn periodic_versions(&self, periodics: &[String]) -> Option<Vec<u64>> {
        Some(periodics.iter().map(|p| self.versions.get(p)).collect())
    }

    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<PreparedFires, StoreError> {
        // The CPU work: ids, JSON, templates, the records.
        let entries: Vec<FireEntry> = fires
            .into_iter()
            .map(|(fire, version)| {
                let runs: Vec<Prepared> = fire.runs.into_iter().map(prepare_fire_run).collect();
                (version, runs, fire.outcomes, fire.state)
            })
            .collect();
        // Tick keys, in one snapshot taken after the versions: a run created
        // since is a change of its periodic, which the commit sees.
        let conflicts: Vec<bool> = self.read_snapshot(|c| {
            sql::ticks_taken(c, entries.iter().map(|(_, runs, ..)| runs.as_slice()))
        })?;
        // The templates are stored now, so the commit writes only the records.
        let templates = fire_log::distinct_templates(&entries);
        let templates_epoch = self.send(|tx| Op::Templates(templates, tx))?;
        Ok(fire_log::prepared_fires(
            entries,
            conflicts,
            templates_epoch,
        ))
    }

    fn commit_prepared(
        &self,
        prepared: PreparedFires,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        let at = crate::run::micros(at);
        let n = prepared.fires.len();
        match self.send(|tx| Op::Prepared(prepared, at, tx)) {
            Ok(results) => results,
            Err(e) => {
                let msg = match e {
                    StoreError::Unavailable(m) => m,
                    other => other.to_string(),
                };
                (0..n).map(|_| Err(unavailable(&msg))).collect()
            }
        }
    }

    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError> {
        self.read(|c| sql::outcomes(c, periodic))
    }

    fn skipped_ticks(&self, periodic: &str, limit: usize) -> Result<SkippedTicks, StoreError> {
        self.read_snapshot(|c| sql::skipped_ticks(c, periodic, limit))
    }

    fn job_demand(&self, since: Timestamp, now: Timestamp) -> Result<Vec<JobDemand>, StoreError> {
        // A scan of every retained run (a second or more for hundreds of
        // thousands): on a connection of its own, so that it never holds up
        // the reader the daemon's frequent reads share. WAL lets it read
        // beside the writer.
        self.gate.wait(FOLD_WAIT)?;
        let conn = open(&self.path, &SqliteOptions::default(), SCAN_CACHE_KIB)?;
        sql::job_demand(&conn, since, now).map_err(unavailable)
    }

    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError> {
        self.send(|tx| Op::Retain(cutoff, tx))
    }

    fn put_repo(&self, record: &RepoRecord) -> Result<(), StoreError> {
        // Encoded here, so that the writer only writes.
        let json = if record.retired_jobs.len() > crate::repos::RETIRED_JOBS_KEPT {
            let mut capped = record.clone();
            capped.cap_retired_jobs();
            codec::to_json(&capped)
        } else {
            codec::to_json(record)
        };
        self.send(|tx| Op::PutRepo(record.repo.clone(), json, tx))
    }

    fn repos(&self) -> Result<Vec<RepoRecord>, StoreError> {
        let records = self.read(sql::repo_records)?;
        records
            .iter()
            .map(|r| serde_json::from_str(r).map_err(|e| StoreError::Invalid(e.to_string())))
            .collect()
    }

    fn delete_repo(&self, repo: &str) -> Result<bool, StoreError> {
        self.send(|tx| Op::DeleteRepo(repo.to_string(), tx))
    }

    fn accept_delivery(&self, d: NewDelivery) -> Result<Accepted, StoreError> {
        // Concurrent accepts (one per HTTP request) share the writer's
        // transaction and its fsync.
        self.send(|tx| Op::Accept(Box::new(d), tx))
    }

    fn pending_deliveries(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredDelivery>, StoreError> {
        self.read(|c| sql::pending_deliveries(c, after_seq, limit))
    }

    fn delivery(&self, seq: u64) -> Result<Option<StoredDelivery>, StoreError> {
        self.read(|c| sql::delivery(c, seq))
    }

    fn mark_processed(&self, seqs: &[u64], at: Timestamp) -> Result<(), StoreError> {
        self.send(|tx| Op::MarkProcessed(seqs.to_vec(), at, tx))
    }

    fn prune_deliveries(&self, before: Timestamp) -> Result<usize, StoreError> {
        self.send(|tx| Op::PruneDeliveries(before, tx))
    }

    fn set_report_policy(&self, policy: Arc<dyn ReportPolicy>) -> Result<(), StoreError> {
        // The writer reads it at each batch: a batch begun before this sees
        // none, the next ones this one.
        self.policy
            .set(policy)
            .map_err(|_| crate::policy_set_already())
    }

    fn enqueue_reports(&self, entries: Vec<NewReport>) -> Result<Vec<Enqueued>, StoreError> {
        // Checked and encoded here, so that the writer only writes; concurrent
        // enqueues share its transaction and fsync.
        let entries = entries
            .into_iter()
            .map(|mut r| {
                r.check()?;
                r.created_at = crate::run::micros(r.created_at);
                let payload = codec::to_json(&r.payload);
                Ok((r, payload))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        self.send(|tx| Op::EnqueueReports(entries, tx))
    }

    fn due_reports(&self, now: Timestamp, limit: usize) -> Result<Vec<StoredReport>, StoreError> {
        self.read(|c| sql::due_reports(c, now.as_microsecond(), limit))
    }

    fn report_delivered(&self, id: u64, version: u64, at: Timestamp) -> Result<bool, StoreError> {
        let at = crate::run::micros(at);
        self.send(|tx| Op::ReportAttempt(Box::new((id, version, None)), at, tx))
    }

    fn report_failed(
        &self,
        id: u64,
        version: u64,
        failure: ReportFailure,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let at = crate::run::micros(at);
        let failure = match failure {
            ReportFailure::Retry { at, error } => ReportFailure::Retry {
                at: crate::run::micros(at),
                error,
            },
            permanent => permanent,
        };
        self.send(|tx| Op::ReportAttempt(Box::new((id, version, Some(failure))), at, tx))
    }

    fn reports_of_run(&self, run_id: &str) -> Result<Vec<StoredReport>, StoreError> {
        self.read(|c| sql::reports_of_run(c, run_id))
    }

    fn report_counts(&self) -> Result<ReportCounts, StoreError> {
        self.read(sql::report_counts)
    }

    fn prune_reports(&self, before: Timestamp) -> Result<usize, StoreError> {
        self.send(|tx| Op::PruneReports(before, tx))
    }

    fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        let mut session = session.clone();
        session.expires_at = crate::run::micros(session.expires_at);
        self.send(|tx| Op::Shared(SharedOp::PutSession(session, tx)))
    }

    fn session(&self, id_hash: &str, now: Timestamp) -> Result<Option<Session>, StoreError> {
        self.read(|c| shared::session(c, id_hash, now.as_microsecond()))
    }

    fn delete_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        self.send(|tx| Op::Shared(SharedOp::DeleteSession(id_hash.to_string(), tx)))
    }

    fn prune_sessions(&self, now: Timestamp, keep: usize) -> Result<usize, StoreError> {
        let now = now.as_microsecond();
        self.send(|tx| Op::Shared(SharedOp::PruneSessions(now, keep, tx)))
    }

    fn shared_secret(&self, name: &str, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        if name == run_ids::KEY_NAME {
            return Err(StoreError::Invalid(format!(
                "shared secret {name} is the store's own"
            )));
        }
        let kept = self.send(|tx| Op::Shared(SharedOp::Secret(name.to_string(), candidate, tx)))?;
        <[u8; 32]>::try_from(kept.as_slice()).map_err(|_| {
            StoreError::Invalid(format!(
                "shared secret {name} holds {} bytes, not 32",
                kept.len()
            ))
        })
    }

    fn document(&self, name: &str) -> Result<Option<StoredDocument>, StoreError> {
        self.read(|c| shared::document(c, name))
    }

    fn put_document(&self, name: &str, expected: u64, body: &[u8]) -> Result<u64, StoreError> {
        check_expected(name, expected)?;
        let doc = Box::new((name.to_string(), expected, body.to_vec()));
        self.send(|tx| Op::Shared(SharedOp::PutDocument(doc, tx)))
    }
}

#[cfg(test)]
mod tests {
    use super::sql::RUN_COLUMNS;
    use super::*;
    use crate::RunState;
    use rusqlite::params;

    /// A database at schema `version`, made by the migrations before it.
    fn schema(path: &Path, version: usize) -> Connection {
        let conn = Connection::open(path).unwrap();
        for m in &schema::MIGRATIONS[..version] {
            conn.execute_batch(m).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn
    }

    /// A listing by job and state walks the job's index, not every run in
    /// that state.
    #[test]
    fn a_job_and_state_listing_uses_the_jobs_index() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema(&dir.path().join("bosun.db"), schema::MIGRATIONS.len());
        let plan = |f: &RunFilter| {
            let (sql, args) = sql::list_query(&RunIds::new(&[0; 16], 0), f);
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let params: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| a.as_ref()).collect();
            let rows: Vec<String> = stmt
                .query_map(params.as_slice(), |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.join("; ")
        };
        let by_job = plan(&RunFilter {
            job: Some("j".into()),
            state: Some(RunState::Failure),
            ..RunFilter::default()
        });
        assert!(by_job.contains("runs_job"), "{by_job}");
        let by_state = plan(&RunFilter {
            state: Some(RunState::Failure),
            ..RunFilter::default()
        });
        assert!(by_state.contains("runs_state"), "{by_state}");
        // An active state's runs are walked in the index of active runs
        // (the index by state holds ended runs only).
        let by_active_state = plan(&RunFilter {
            state: Some(RunState::Pending),
            ..RunFilter::default()
        });
        assert!(by_active_state.contains("runs_active"), "{by_active_state}");
        let by_job_active = plan(&RunFilter {
            job: Some("j".into()),
            state: Some(RunState::Pending),
            ..RunFilter::default()
        });
        assert!(by_job_active.contains("runs_job"), "{by_job_active}");
        // Whether a periodic has an active run is read through the partial
        // index of periodics' active runs (other runs are not in it).
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", sql::PERIODIC_ACTIVE))
            .unwrap();
        let p: Vec<String> = stmt
            .query_map(["p"], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(p.join("; ").contains("runs_periodic_active"), "{p:?}");
        // A periodic's skips are read through the partial index of skips.
        for (q, args) in [
            (sql::LATEST_SKIPS, params!["p", 5]),
            (sql::SKIPPED_TOTAL, params!["p"]),
        ] {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {q}")).unwrap();
            let p: Vec<String> = stmt
                .query_map(args, |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(p.join("; ").contains("tick_outcomes_skipped"), "{q}: {p:?}");
        }
        // A keyset page seeks in an index ordered by seq (no sort, no scan
        // of the runs before the cursor), the cursor found by its key.
        for f in [
            RunFilter {
                after: Some("a".into()),
                ..RunFilter::default()
            },
            RunFilter {
                before: Some("a".into()),
                ..RunFilter::default()
            },
            RunFilter {
                job: Some("j".into()),
                after: Some("a".into()),
                ..RunFilter::default()
            },
        ] {
            let p = plan(&f);
            let seeks = ["rowid<?", "rowid>?", "seq<?", "seq>?"];
            assert!(seeks.iter().any(|s| p.contains(s)), "{f:?}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{f:?}: {p}");
            assert!(p.contains("PRIMARY KEY (rowid=?)"), "{f:?}: {p}");
            assert!(p.contains("runs_random_id (id=?)"), "{f:?}: {p}");
        }
        // A run is found by its id through the seq the id names, or the
        // index of the ids drawn at random: never a scan.
        for q in [&*sql::RUN_BY_ID, &*sql::UPDATE_RUN] {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {q}")).unwrap();
            let nulls = vec![None::<i64>; stmt.parameter_count()];
            let p: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let p = p.join("; ");
            assert!(p.contains("PRIMARY KEY (rowid=?)"), "{q}: {p}");
            assert!(p.contains("runs_random_id (id=?)"), "{q}: {p}");
            assert!(!p.contains("SCAN"), "{q}: {p}");
        }
    }

    /// A redelivery is found through the unique index of delivery ids, and
    /// the pending deliveries through their partial index (not a walk of the
    /// processed ones kept for their ids).
    #[test]
    fn deliveries_are_found_through_their_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema(&dir.path().join("bosun.db"), schema::MIGRATIONS.len());
        for (q, args, index) in [
            (sql::FIND_DELIVERY, params!["github", "d"], "deliveries_id"),
            (
                sql::PENDING_DELIVERIES,
                params![0, 10],
                "deliveries_pending",
            ),
        ] {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {q}")).unwrap();
            let p: Vec<String> = stmt
                .query_map(args, |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let p = p.join("; ");
            assert!(p.contains(index), "{q}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{q}: {p}");
        }
    }

    /// A pull's runs are found through `run_pulls` (no walk of a job's or
    /// a repository's runs, no sort), a repository's through its partial
    /// index, and the outbox's reads and pruning through theirs.
    #[test]
    fn pulls_repositories_and_reports_are_found_through_their_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema(&dir.path().join("bosun.db"), schema::MIGRATIONS.len());
        let plan = |sql: &str, args: &[&dyn rusqlite::ToSql]| {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows: Vec<String> = stmt
                .query_map(args, |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.join("; ")
        };
        let list = |f: &RunFilter| {
            let (sql, args) = sql::list_query(&RunIds::new(&[0; 16], 0), f);
            let args: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| a.as_ref()).collect();
            plan(&sql, &args)
        };
        let pull = RunFilter {
            repo: Some("acme/widgets".into()),
            pull: Some(7),
            ..RunFilter::default()
        };
        for f in [
            pull.clone(),
            RunFilter {
                job: Some("j".into()),
                state: Some(RunState::Failure),
                active: true,
                ..pull.clone()
            },
            RunFilter {
                head_sha: Some("abc".into()),
                job_type: Some("presubmit".into()),
                after: Some("a".into()),
                ..pull.clone()
            },
            RunFilter {
                repo: None,
                ..pull.clone()
            },
        ] {
            let p = list(&f);
            assert!(
                p.contains("SEARCH run_pulls USING PRIMARY KEY (number=?"),
                "{f:?}: {p}"
            );
            assert!(p.contains("INTEGER PRIMARY KEY (rowid=?)"), "{f:?}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{f:?}: {p}");
        }
        let p = list(&RunFilter {
            repo: Some("acme/widgets".into()),
            state: Some(RunState::Success),
            ..RunFilter::default()
        });
        assert!(p.contains("runs_repo (refs_repo=?)"), "{p}");
        assert!(!p.contains("TEMP B-TREE"), "{p}");
        for (q, index) in [
            (sql::PENDING_OF_KEY, "reports_key"),
            (sql::DUE_REPORTS, "reports_pending"),
            (sql::REPORTS_OF_RUN, "reports_run"),
            (sql::PRUNE_REPORTS, "reports_ended"),
        ] {
            let n = q.matches('?').count();
            let args: Vec<&dyn rusqlite::ToSql> = [&1 as &dyn rusqlite::ToSql; 2][..n].to_vec();
            let p = plan(q, &args);
            assert!(p.contains(index), "{q}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{q}: {p}");
        }
        let p = plan(sql::REPORT_COUNTS, &[]);
        assert!(
            p.contains("reports_pending") && p.contains("reports_ended"),
            "{p}"
        );
        assert!(!p.split("; ").any(|step| step == "SCAN reports"), "{p}");
    }

    /// Runs kept by the schema before migration 10 are found by repository
    /// and pull once it has run (and their pulls go with them).
    #[test]
    fn runs_of_the_previous_schema_are_found_by_repository_and_pull() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        let refs = |repo: &str, pulls: &str| {
            let (org, name) = repo.split_once('/').unwrap();
            format!(
                r#"{{"org":"{org}","repo":"{name}","repo_link":null,"base_ref":"main","base_sha":"b","base_link":null,"pulls":[{pulls}],"path_alias":null,"workdir":false,"auxiliary":false,"clone_uri":null,"skip_submodules":false,"clone_depth":0,"skip_fetch_head":false,"blobless_fetch":null,"sparse_checkout_files":[]}}"#
            )
        };
        let pull = |n: i64, sha: &str| {
            format!(
                r#"{{"number":{n},"author":"a","sha":"{sha}","title":null,"ref":null,"link":null,"commit_link":null,"author_link":null}}"#
            )
        };
        {
            let conn = schema(&path, 9);
            for (seq, id, job_type, refs, completed) in [
                (
                    1,
                    "a",
                    "presubmit",
                    Some(refs("acme/widgets", &pull(1, "x"))),
                    Some(5),
                ),
                (
                    2,
                    "b",
                    "batch",
                    Some(refs(
                        "acme/widgets",
                        &format!("{},{}", pull(2, "y"), pull(1, "x")),
                    )),
                    None,
                ),
                (3, "c", "postsubmit", Some(refs("acme/widgets", "")), None),
                (
                    4,
                    "d",
                    "presubmit",
                    Some(refs("acme/gadgets", &pull(1, "x"))),
                    None,
                ),
                (5, "e", "periodic", None, None),
            ] {
                conn.execute(
                    &format!("INSERT INTO runs({RUN_COLUMNS}, seq) VALUES (?1, ?2, 'job', ?3, NULL, 'default', NULL, ?4, '[]', '{{}}', '{{}}', 'h', NULL, 0, 0, 1, NULL, ?5, ?6, '', NULL, ?7)"),
                    params![id, 100 + seq, job_type, refs, completed, if completed.is_some() { "success" } else { "pending" }, seq],
                )
                .unwrap();
            }
        }
        let store = SqliteStore::open(&path).unwrap();
        let ids = |f: RunFilter| -> Vec<String> {
            store.list(&f).unwrap().into_iter().map(|r| r.id).collect()
        };
        let w = || Some("acme/widgets".to_string());
        assert_eq!(
            ids(RunFilter {
                repo: w(),
                ..RunFilter::default()
            }),
            ["c", "b", "a"]
        );
        assert_eq!(
            ids(RunFilter {
                repo: w(),
                pull: Some(1),
                ..RunFilter::default()
            }),
            ["b", "a"]
        );
        assert_eq!(
            ids(RunFilter {
                pull: Some(1),
                ..RunFilter::default()
            }),
            ["d", "b", "a"]
        );
        assert_eq!(
            ids(RunFilter {
                repo: w(),
                pull: Some(2),
                head_sha: Some("y".into()),
                ..RunFilter::default()
            }),
            ["b"]
        );
        // Retention takes the migrated run's pulls with it.
        assert_eq!(
            store
                .delete_completed_before(Timestamp::from_second(1).unwrap())
                .unwrap(),
            vec!["a".to_string()]
        );
        let left: i64 = store
            .read(|c| {
                c.query_row("SELECT COUNT(*) FROM run_pulls WHERE number = 1", [], |r| {
                    r.get(0)
                })
            })
            .unwrap();
        assert_eq!(left, 2, "b's and d's");
    }

    /// A fire log that the previous schema's daemon left unfolded (its three
    /// log tables) is folded by the migration to the compact log.
    #[test]
    fn an_old_unfolded_fire_log_is_folded_by_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        {
            let conn = schema(&path, 5);
            conn.execute(
                &format!("INSERT INTO fire_log_runs({RUN_COLUMNS}, seq) VALUES ('a', 7, 'job', 'periodic', 'job', 'default', NULL, NULL, '[]', '{{}}', '{{}}', 'h', 3000000, 0, 0, 3000001, NULL, NULL, 'triggered', 'Job triggered.', NULL, 1)"),
                [],
            )
            .unwrap();
            conn.execute_batch(
                "INSERT INTO fire_log_outcomes VALUES ('job', 3000000, 3000000, 1, 'run', 'a', 3000001);
                 INSERT INTO fire_log_states VALUES ('job', 'h', 0, 3000000, 0, NULL);
                 INSERT INTO meta(key, value) VALUES ('build_id', 7);",
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let run = store.get("a").unwrap().expect("folded");
        assert_eq!(run.scheduled_at, Some(Timestamp::from_second(3).unwrap()));
        assert_eq!(
            store.outcomes("job").unwrap()[0].run_id.as_deref(),
            Some("a")
        );
        let state = store.periodic_state("job").unwrap().unwrap();
        assert_eq!(state.last_tick, Some(Timestamp::from_second(3).unwrap()));
    }

    /// A database made by the schema before migration 4 opens with its runs,
    /// their order and the build id counter intact.
    #[test]
    fn runs_survive_the_migration_to_seq_as_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        {
            let conn = schema(&path, 3);
            for (seq, id, state, completed) in
                [(1, "a", "success", Some(5)), (2, "b", "triggered", None)]
            {
                conn.execute(
                    &format!("INSERT INTO runs({RUN_COLUMNS}, seq) VALUES (?1, ?2, 'job', 'periodic', 'job', 'default', NULL, NULL, '[]', '{{}}', '{{}}', 'h', NULL, 0, 0, 1, NULL, ?3, ?4, '', NULL, ?5)"),
                    params![id, 100 + seq, completed, state, seq],
                )
                .unwrap();
            }
            conn.execute("INSERT INTO meta(key, value) VALUES ('build_id', 102)", [])
                .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let runs = store.list(&RunFilter::default()).unwrap();
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["b", "a"], "newest first, by seq");
        let active = store
            .list(&RunFilter {
                active: true,
                ..RunFilter::default()
            })
            .unwrap();
        assert_eq!(active.len(), 1);
        assert_eq!(active[0].id, "b");
        let at = Timestamp::from_second(0).unwrap();
        let created = store.create_run(a_run("job"), at).unwrap();
        assert_eq!(
            created.run().build_id,
            "103",
            "build ids go on from the stored counter"
        );
        let runs = store.list(&RunFilter::default()).unwrap();
        assert_eq!(
            runs[0].id,
            created.run().id,
            "and the new run is the newest"
        );
    }

    /// The run ids of the database at `path`, by its stored key (any
    /// generation decodes the same seqs).
    fn stored_run_ids(path: &Path) -> RunIds {
        let key: Vec<u8> = Connection::open(path)
            .unwrap()
            .query_row(
                "SELECT value FROM secrets WHERE name = ?1",
                [run_ids::KEY_NAME],
                |r| r.get(0),
            )
            .unwrap();
        RunIds::new(&key, 0)
    }

    fn a_run(job: &str) -> NewRun {
        NewRun {
            job: job.into(),
            job_type: bosun_config::types::JobType::Periodic,
            periodic: None,
            configured_cluster: "default".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: Default::default(),
            annotations: Default::default(),
            spec: serde_json::json!({}).into(),
            scheduled_at: None,
            attempt: 0,
            description: String::new(),
        }
    }

    /// A run created by the writer has the id of its seq, writes no entry of
    /// the index of random ids, and is found, moved and paged by that id.
    #[test]
    fn a_created_runs_id_is_made_of_its_seq_and_indexed_nowhere() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        let store = SqliteStore::open(&path).unwrap();
        let at = Timestamp::from_second(1).unwrap();
        let ids: Vec<String> = (0..3)
            .map(|_| store.create_run(a_run("job"), at).unwrap().run().id.clone())
            .collect();
        let conn = Connection::open(&path).unwrap();
        let made = stored_run_ids(&path);
        for (id, seq) in ids.iter().zip(1..) {
            assert_eq!(made.seq(id), Some(seq), "{id}");
        }
        let indexed: i64 = conn
            .query_row("SELECT COUNT(*) FROM runs WHERE random_id = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(indexed, 0);
        let moved = store
            .transition(&ids[1], Transition::to(RunState::Pending, at, "started"))
            .unwrap();
        assert_eq!(moved.id, ids[1]);
        assert_eq!(
            store.get(&ids[1]).unwrap().unwrap().state,
            RunState::Pending
        );
        let older = store
            .list(&RunFilter {
                after: Some(ids[2].clone()),
                ..RunFilter::default()
            })
            .unwrap();
        let older: Vec<&str> = older.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(older, [ids[1].as_str(), ids[0].as_str()]);
        // An id of this database's form naming a seq that has no run, and
        // one of another key naming a seq that has one, are not found.
        assert!(store.get(&made.id(4)).unwrap().is_none());
        let other = RunIds::new(&[9; 16], 0).id(1);
        assert!(store.get(&other).unwrap().is_none());
        assert!(matches!(
            store.transition(&other, Transition::to(RunState::Pending, at, "")),
            Err(StoreError::NotFound(_))
        ));
    }

    /// Runs kept at schema 13 keep their ids (drawn at random), found, moved
    /// and paged through the index of random ids; the key is made once.
    #[test]
    fn runs_of_schema_13_keep_their_random_ids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        let old = [
            "0b5c2f4e-8d6a-4c1e-9f3b-2a7d5e8c1b4f",
            "7e1d9a3c-5b2f-4e8a-b6c4-1f9e3d7a2c5b",
        ];
        {
            let conn = schema(&path, 13);
            for (seq, id) in old.iter().enumerate() {
                conn.execute(
                    &format!("INSERT INTO runs({RUN_COLUMNS}, seq) VALUES (?1, ?2, 'job', 'periodic', 'job', 'default', NULL, NULL, '[]', '{{}}', '{{}}', 'h', NULL, 0, 0, 1, NULL, NULL, 'triggered', '', NULL, ?3)"),
                    params![id, 100 + seq, seq + 1],
                )
                .unwrap();
            }
        }
        let store = SqliteStore::open(&path).unwrap();
        let at = Timestamp::from_second(1).unwrap();
        for id in old {
            assert_eq!(store.get(id).unwrap().unwrap().id, id);
        }
        let moved = store
            .transition(old[0], Transition::to(RunState::Pending, at, "started"))
            .unwrap();
        assert_eq!(moved.state, RunState::Pending);
        let new = store.create_run(a_run("job"), at).unwrap().run().id.clone();
        assert!(!old.contains(&new.as_str()));
        let page = store
            .list(&RunFilter {
                after: Some(old[1].into()),
                ..RunFilter::default()
            })
            .unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].id, old[0]);
        drop(store);
        // Opened again: the same key, so the new run is found by its id.
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.get(&new).unwrap().unwrap().id, new);
        assert_eq!(store.get(old[0]).unwrap().unwrap().state, RunState::Pending);
    }

    /// Retention may delete the newest run: its seq is kept, so the next
    /// run, after a restart too, gets another seq and so another id.
    #[test]
    fn an_id_is_not_handed_out_again_once_the_newest_run_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        let at = Timestamp::from_second(1).unwrap();
        let first = {
            let store = SqliteStore::open(&path).unwrap();
            let id = store.create_run(a_run("job"), at).unwrap().run().id.clone();
            for to in [RunState::Pending, RunState::Success] {
                store.transition(&id, Transition::to(to, at, "")).unwrap();
            }
            let gone = store
                .delete_completed_before(Timestamp::from_second(2).unwrap())
                .unwrap();
            assert_eq!(gone, std::slice::from_ref(&id));
            id
        };
        let store = SqliteStore::open(&path).unwrap();
        let next = store.create_run(a_run("job"), at).unwrap().run().id.clone();
        assert_ne!(next, first);
        // The seq itself is not handed out again (another opening's
        // generation alone would give the id another form).
        let made = stored_run_ids(&path);
        assert_eq!(made.seq(&first), Some(1));
        assert_eq!(made.seq(&next), Some(2));
        // Nor may the key be taken as a shared secret.
        assert!(store.shared_secret("run_ids", [0; 32]).is_err());
    }

    /// A database restored from a copy hands out its later seqs again, but
    /// not their ids: each opening draws its own generation.
    #[test]
    fn a_database_restored_from_a_copy_hands_out_no_id_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bosun.db");
        let copy = dir.path().join("copy.db");
        let at = Timestamp::from_second(1).unwrap();
        drop(SqliteStore::open(&path).unwrap());
        std::fs::copy(&path, &copy).unwrap();
        let first = {
            let store = SqliteStore::open(&path).unwrap();
            store.create_run(a_run("job"), at).unwrap().run().id.clone()
        };
        let store = SqliteStore::open(&copy).unwrap();
        let again = store.create_run(a_run("job"), at).unwrap().run().id.clone();
        assert_ne!(again, first);
        assert_eq!(store.get(&again).unwrap().unwrap().id, again);
    }
}
