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
//! bytes at the end of one table, where a run in `runs` also writes six
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
//! A write that cannot commit (disk full, database locked by another process past
//! the busy timeout, I/O error) fails with [`StoreError::Unavailable`] and leaves
//! nothing behind: a request that breaks its own rules (no such run, a
//! forbidden transition) is refused before it writes anything, and a read or
//! write that fails rolls the whole batch back and fails every request in it.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

mod fire_log;

use crate::run::{apply, job_type_from_str, Run, RunState};
use crate::{
    new_run_id, CreateDone, Created, Fire, NewRun, PeriodicState, RunFilter, Store, StoreError,
    TickOutcome, Transition, TransitionObserver,
};

/// Schema migrations, applied in order; `PRAGMA user_version` is the count applied.
const MIGRATIONS: &[&str] = &[
    // 1: runs, specs, schedule state, tick outcomes.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        build_id INTEGER NOT NULL UNIQUE,
        job TEXT NOT NULL,
        job_type TEXT NOT NULL,
        periodic TEXT,
        configured_cluster TEXT NOT NULL,
        cluster TEXT,
        refs TEXT,
        extra_refs TEXT NOT NULL,
        labels TEXT NOT NULL,
        annotations TEXT NOT NULL,
        spec_hash TEXT NOT NULL,
        scheduled_at INTEGER,
        attempt INTEGER NOT NULL,
        pod_revival_count INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        pending_at INTEGER,
        completed_at INTEGER,
        state TEXT NOT NULL,
        description TEXT NOT NULL,
        url TEXT,
        seq INTEGER NOT NULL
     );
     CREATE UNIQUE INDEX runs_tick ON runs(periodic, scheduled_at, attempt)
        WHERE periodic IS NOT NULL AND scheduled_at IS NOT NULL;
     CREATE INDEX runs_seq ON runs(seq);
     CREATE INDEX runs_job ON runs(job, seq);
     CREATE INDEX runs_periodic ON runs(periodic, created_at);
     CREATE INDEX runs_active ON runs(state) WHERE completed_at IS NULL;
     CREATE TABLE specs (hash TEXT PRIMARY KEY, body TEXT NOT NULL);
     CREATE TABLE periodic_state (
        periodic TEXT PRIMARY KEY,
        schedule_hash TEXT NOT NULL,
        first_seen INTEGER NOT NULL,
        last_tick INTEGER,
        paused INTEGER NOT NULL,
        queued INTEGER
     );
     CREATE TABLE tick_outcomes (
        periodic TEXT NOT NULL,
        first_tick INTEGER NOT NULL,
        last_tick INTEGER NOT NULL,
        count INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        run_id TEXT,
        recorded_at INTEGER NOT NULL
     );
     CREATE INDEX tick_outcomes_periodic ON tick_outcomes(periodic, first_tick);
     CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
    // 2: indexes the controller's and the API's listings walk in order instead
    // of scanning every run: by state (`state = ? ORDER BY seq`), and the active
    // runs (`completed_at IS NULL ORDER BY seq`), a periodic's runs (the
    // scheduler's last run and whether one is active), a cluster's waiting runs.
    "DROP INDEX runs_active;
     CREATE INDEX runs_state ON runs(state, seq);
     CREATE INDEX runs_active ON runs(seq) WHERE completed_at IS NULL;
     CREATE INDEX runs_periodic_seq ON runs(periodic, seq);
     CREATE INDEX runs_periodic_active ON runs(periodic, seq) WHERE completed_at IS NULL;
     CREATE INDEX runs_waiting ON runs(state, configured_cluster, seq);",
    // 3: a periodic's runs by creation are (periodic, seq), which retention
    // now uses too: one index fewer for every insert to maintain.
    "DROP INDEX runs_periodic;",
    // 4: fewer b-trees for every insert to write (each is a page in every
    // commit): `seq` becomes the table's own key (no index of its own), build
    // ids are unique because the single writer hands them out in order (no
    // index to check it), and the controller keeps its waiting runs in memory
    // (no index by cluster).
    "CREATE TABLE runs4 (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        build_id INTEGER NOT NULL,
        job TEXT NOT NULL,
        job_type TEXT NOT NULL,
        periodic TEXT,
        configured_cluster TEXT NOT NULL,
        cluster TEXT,
        refs TEXT,
        extra_refs TEXT NOT NULL,
        labels TEXT NOT NULL,
        annotations TEXT NOT NULL,
        spec_hash TEXT NOT NULL,
        scheduled_at INTEGER,
        attempt INTEGER NOT NULL,
        pod_revival_count INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        pending_at INTEGER,
        completed_at INTEGER,
        state TEXT NOT NULL,
        description TEXT NOT NULL,
        url TEXT
     );
     INSERT INTO runs4(seq, id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url)
        SELECT seq, id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url FROM runs;
     DROP TABLE runs;
     ALTER TABLE runs4 RENAME TO runs;
     CREATE UNIQUE INDEX runs_tick ON runs(periodic, scheduled_at, attempt)
        WHERE periodic IS NOT NULL AND scheduled_at IS NOT NULL;
     CREATE INDEX runs_job ON runs(job, seq);
     CREATE INDEX runs_state ON runs(state, seq);
     CREATE INDEX runs_active ON runs(seq) WHERE completed_at IS NULL;
     CREATE INDEX runs_periodic_seq ON runs(periodic, seq);
     CREATE INDEX runs_periodic_active ON runs(periodic, seq) WHERE completed_at IS NULL;",
    // 5: the fire log (see the module's documentation): the tables a burst of
    // fires is appended to, as `runs`, `tick_outcomes` and `periodic_state`
    // without any index; empty whenever the writer is idle.
    "CREATE TABLE fire_log_runs (
        seq INTEGER NOT NULL,
        id TEXT NOT NULL,
        build_id INTEGER NOT NULL,
        job TEXT NOT NULL,
        job_type TEXT NOT NULL,
        periodic TEXT,
        configured_cluster TEXT NOT NULL,
        cluster TEXT,
        refs TEXT,
        extra_refs TEXT NOT NULL,
        labels TEXT NOT NULL,
        annotations TEXT NOT NULL,
        spec_hash TEXT NOT NULL,
        scheduled_at INTEGER,
        attempt INTEGER NOT NULL,
        pod_revival_count INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        pending_at INTEGER,
        completed_at INTEGER,
        state TEXT NOT NULL,
        description TEXT NOT NULL,
        url TEXT
     );
     CREATE TABLE fire_log_outcomes (
        periodic TEXT NOT NULL,
        first_tick INTEGER NOT NULL,
        last_tick INTEGER NOT NULL,
        count INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        run_id TEXT,
        recorded_at INTEGER NOT NULL
     );
     CREATE TABLE fire_log_states (
        periodic TEXT NOT NULL,
        schedule_hash TEXT NOT NULL,
        first_seen INTEGER NOT NULL,
        last_tick INTEGER,
        paused INTEGER NOT NULL,
        queued INTEGER
     );",
    // 6: the fire log becomes one compact record per fire (see `fire_log`),
    // whose runs name a template stored once per content. A log the previous
    // schema left unfolded is folded first.
    "INSERT INTO runs(seq, id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url)
        SELECT seq, id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url
        FROM fire_log_runs ORDER BY seq;
     INSERT INTO tick_outcomes(periodic, first_tick, last_tick, count, outcome, run_id, recorded_at)
        SELECT periodic, first_tick, last_tick, count, outcome, run_id, recorded_at
        FROM fire_log_outcomes ORDER BY rowid;
     INSERT INTO periodic_state(periodic, schedule_hash, first_seen, last_tick, paused, queued)
        SELECT periodic, schedule_hash, first_seen, last_tick, paused, queued
        FROM fire_log_states WHERE true ORDER BY rowid
        ON CONFLICT(periodic) DO UPDATE SET schedule_hash = excluded.schedule_hash,
            first_seen = excluded.first_seen, last_tick = excluded.last_tick,
            paused = excluded.paused, queued = excluded.queued;
     DROP TABLE fire_log_runs;
     DROP TABLE fire_log_outcomes;
     DROP TABLE fire_log_states;
     CREATE TABLE run_templates (hash TEXT PRIMARY KEY, body TEXT NOT NULL);
     CREATE TABLE fire_log (
        id INTEGER PRIMARY KEY,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        first_build INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        body TEXT NOT NULL
     );",
    // 7: a periodic's runs are found among its job's (`runs_job`: the job is
    // the name in the periodic's identity), one index fewer for every insert
    // (a WAL frame in every commit).
    "DROP INDEX runs_periodic_seq;",
];

/// Where a batch's fires are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `runs`, `tick_outcomes`, `periodic_state`.
    Tables,
    /// The fire log.
    Log,
}

/// Whether a committed fire log is waiting to be folded; reads wait for it.
#[derive(Default)]
struct FoldGate {
    unfolded: Mutex<bool>,
    folded: std::sync::Condvar,
}

impl FoldGate {
    fn set(&self, unfolded: bool) {
        *self.unfolded.lock().unwrap_or_else(|e| e.into_inner()) = unfolded;
        if !unfolded {
            self.folded.notify_all();
        }
    }

    /// Waits (at most `limit`) until no committed log is unfolded.
    fn wait(&self, limit: Duration) -> Result<(), StoreError> {
        let guard = self.unfolded.lock().unwrap_or_else(|e| e.into_inner());
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

/// How long a read waits for the fire log to be folded.
const FOLD_WAIT: Duration = Duration::from_secs(10);

/// Folds the fire log in one transaction (nothing happens when it is empty).
fn fold(conn: &mut Connection) -> Result<(), String> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
    fire_log::fold(&tx).map_err(|e| e.to_string())?;
    tx.commit().map_err(|e| e.to_string())
}

/// Where the reply to a queued transition arrives.
type TransitionReply = mpsc::Receiver<Result<(Run, RunState), StoreError>>;

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

/// A run to create, with everything that costs CPU (JSON, the spec's hash, the
/// id) done by the caller, so the single writer only writes.
struct Prepared {
    new: NewRun,
    id: String,
    spec_hash: String,
    spec_json: std::sync::Arc<str>,
    refs_json: Option<String>,
    extra_refs_json: String,
    labels_json: String,
    annotations_json: String,
    /// Fires' runs: their template (written to the fire log by reference).
    template: Option<fire_log::Template>,
}

/// Does a run's CPU work (ids, JSON, the spec's hash) in the caller's thread.
fn prepare(new: NewRun) -> Prepared {
    let mut new = new;
    new.scheduled_at = new.scheduled_at.map(crate::run::micros);
    let spec_json = new.spec.json_arc();
    Prepared {
        id: new_run_id(),
        spec_hash: new.spec.hash().to_string(),
        spec_json,
        refs_json: new.refs.as_ref().map(to_json),
        extra_refs_json: to_json(&new.extra_refs),
        labels_json: to_json(&new.labels),
        annotations_json: to_json(&new.annotations),
        new,
        template: None,
    }
}

/// `prepare`, for a fire's run: with its template.
fn prepare_fire_run(new: NewRun) -> Prepared {
    let mut p = prepare(new);
    p.template = Some(fire_log::template_of(&p));
    p
}

/// Whether `op` is a fire (fires are batched apart from other requests).
fn is_fire(op: &Op) -> bool {
    matches!(op, Op::Fire(..) | Op::Prepared(..))
}

/// Each prepared fire's result, or the failure of them all.
type PreparedResults = Result<Vec<Result<Vec<Created>, StoreError>>, StoreError>;

enum Op {
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
    Prepared(crate::PreparedFires, Timestamp, Sender<PreparedResults>),
    Templates(Vec<fire_log::Template>, Sender<Result<u64, StoreError>>),
    Outcomes(Vec<TickOutcome>, Sender<Result<(), StoreError>>),
    Retain(Timestamp, Sender<Result<Vec<String>, StoreError>>),
    Raw(String, Sender<Result<(), StoreError>>),
}

/// The SQLite store.
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<Option<Sender<Op>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    reader: Mutex<Connection>,
    gate: Arc<FoldGate>,
    versions: Arc<fire_log::Versions>,
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// The page cache of the writer's connection, in KiB (the default is 2 MiB):
/// a burst of inserts touches pages of every index, and a cache that spills
/// rewrites them to the WAL and reads them back mid-transaction.
const WRITER_CACHE_KIB: i64 = 8 * 1024;

/// The page cache of the reader's connection, in KiB. The reads the daemon
/// makes often (active runs, a periodic's last runs, specs, the newest runs)
/// are of a few recent pages; a listing of old runs pages through the table
/// once. A cache as large as the writer's would, once the database has grown,
/// hold that much more memory for little.
const READER_CACHE_KIB: i64 = 8 * 1024;

/// The checkpointer's: a checkpoint copies frames from the WAL to the
/// database file without going through the cache.
const CHECKPOINT_CACHE_KIB: i64 = 1024;

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

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = row(conn, "PRAGMA user_version", [], |r| r.get(0)).map_err(unavailable)?;
    if version as usize > MIGRATIONS.len() {
        return Err(StoreError::Invalid(format!(
            "database schema version {version} is newer than this bosun ({})",
            MIGRATIONS.len()
        )));
    }
    for (i, m) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction().map_err(unavailable)?;
        tx.execute_batch(m).map_err(unavailable)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(unavailable)?;
        tx.commit().map_err(unavailable)?;
    }
    Ok(())
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
        migrate(&mut wconn)?;
        // A log committed before a crash is folded before anything else.
        fold(&mut wconn).map_err(unavailable)?;
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
        let (cktx, ckrx) = mpsc::sync_channel(1);
        let max_batch = opts.max_batch.max(1);
        let gate = Arc::new(FoldGate::default());
        let versions = Arc::new(fire_log::Versions::default());
        let writer = Writer {
            versions: versions.clone(),
            max_batch,
            fire_log_min: opts.fire_log_min,
            hold_fire_log: opts.hold_fire_log,
            observer,
            committed: cktx,
            gate: gate.clone(),
        };
        let checkpointer = std::thread::Builder::new()
            .name("bosun-store-checkpoint".into())
            .spawn(move || checkpoint_loop(ckconn, ckrx))
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
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
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
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
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
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Replies held until the batch's commit.
enum Reply {
    /// With the writer's shared copy of a new active run, for the observer.
    Create(CreateDone, Result<Created, StoreError>, Option<Arc<Run>>),
    /// With the writer's shared copy of a run that stays active.
    Transition(
        Sender<Result<(Run, RunState), StoreError>>,
        Result<(Run, RunState), StoreError>,
        Option<Arc<Run>>,
    ),
    Unit(Sender<Result<(), StoreError>>, Result<(), StoreError>),
    Epoch(Sender<Result<u64, StoreError>>, Result<u64, StoreError>),
    Fire(
        Sender<Result<Vec<Created>, StoreError>>,
        Result<Vec<Created>, StoreError>,
    ),
    Retain(
        Sender<Result<Vec<String>, StoreError>>,
        Result<Vec<String>, StoreError>,
    ),
    Prepared(Sender<PreparedResults>, PreparedResults),
}

/// What the writer keeps between batches instead of reading it back for every
/// insert. It is the only writer, so its copies are exact; they are reloaded
/// after a failed batch.
#[derive(Default)]
struct WriterCache {
    /// The last build id and seq handed out (None: read them from the store).
    counters: Option<(i64, i64)>,
    /// Spec hashes known to be stored (specs are never deleted).
    specs: std::collections::HashSet<String>,
    /// Run template hashes known to be stored (never deleted either).
    templates: std::collections::HashSet<String>,
    /// Counts the times this cache was lost (a failed batch).
    epoch: u64,
    /// Records in the unfolded fire log.
    log_records: usize,
    /// The tick keys (periodic, scheduled_at, attempt) of the runs in the
    /// unfolded fire log: which record, which of its runs.
    log_keys: std::collections::HashMap<(String, i64, u32), fire_log::LogKey>,
    /// `log_keys` misses some records' keys.
    log_keys_partial: bool,
    /// Version stripes of the periodics the current batch touched (bumped
    /// once it ends), or all of them.
    touched: fire_log::Touched,
    /// The active runs this writer created or moved, as committed (as far as
    /// the current batch: a failed batch drops the whole cache). A transition
    /// starts from this copy instead of reading and decoding the row again;
    /// a run missing here (created by an earlier writer, or through the fire
    /// log) is read. The copies are shared with the observer, which keeps the
    /// same active runs.
    runs: std::collections::HashMap<String, Arc<Run>>,
}

impl WriterCache {
    fn touch(&mut self, periodic: &str) {
        self.touched.add(fire_log::Versions::stripe(periodic));
    }
}

/// How many times the writer gives up the CPU (without sleeping) for more
/// requests to join a batch before it commits: the threads that were about
/// to queue one (an API request being parsed, a controller pass) run first,
/// and their requests share the commit and its fsync. A timed wait would add
/// its delay to every request; a yield with nothing else to run returns at
/// once.
const YIELDS: u32 = 2;

/// The least time between two checkpoints.
const CHECKPOINT_PAUSE: Duration = Duration::from_millis(500);

/// The WAL length (in frames, about 4 KiB each) past which the writer
/// finishes a checkpoint itself, between two batches.
///
/// The checkpoint thread copies the WAL into the database beside the writer,
/// but under a steady stream of commits it never catches up: every pass ends
/// behind the frames committed while it ran, and SQLite starts the WAL over
/// from its beginning only once every frame is copied. The WAL then grows for
/// as long as the load lasts (about 13 MB per thousand runs created), and
/// each commit appends to new blocks of the file. Between two of its own
/// batches the writer is the only one who could commit, so its checkpoint
/// copies every frame (unless a reader still needs an old one) and its next
/// commit starts the WAL over.
///
/// 4,096 frames (16 MiB): a checkpoint copies a page once however many
/// commits rewrote it, so a longer WAL costs less per commit. With 1,000
/// frames, 10,000 POSTs in `run_bench` took 0.78–0.94 s; with 4,096,
/// 0.65–0.85 s, as without any bound (0.75 s, with a 130 MB WAL).
const WAL_RESTART_FRAMES: i32 = 4096;

thread_local! {
    /// The WAL's length in frames after the writer's last commit, as SQLite's
    /// WAL hook reports it (the writer's connection commits on its own thread
    /// only).
    static WAL_FRAMES: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Keeps the WAL short under a steady load (see [`WAL_RESTART_FRAMES`]):
/// checkpoints on the writer's connection once the WAL holds `*next` frames.
/// A checkpoint that could not copy everything (a reader holds an old
/// snapshot) is tried again a quarter of the limit later, not after every
/// commit.
fn bound_wal(conn: &Connection, next: &mut i32) {
    let frames = WAL_FRAMES.with(std::cell::Cell::get);
    if frames < WAL_RESTART_FRAMES {
        *next = WAL_RESTART_FRAMES;
        return;
    }
    if frames < *next {
        return;
    }
    // A failure (another checkpoint holds the lock) is tried again later.
    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    *next = frames + WAL_RESTART_FRAMES / 4;
}

/// Copies committed WAL frames into the database when the writer has
/// committed since the last pass, at most every CHECKPOINT_PAUSE; ends as soon
/// as the writer does.
fn checkpoint_loop(conn: Connection, commits: Receiver<()>) {
    use mpsc::RecvTimeoutError;
    if commits.recv().is_err() {
        return;
    }
    loop {
        // A busy or failed pass is retried after the next commit.
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        let until = std::time::Instant::now() + CHECKPOINT_PAUSE;
        let mut committed = false;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match commits.recv_timeout(left) {
                Ok(()) => committed = true,
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        if !committed && commits.recv().is_err() {
            return;
        }
    }
}

/// The writer thread's settings.
struct Writer {
    max_batch: usize,
    fire_log_min: usize,
    hold_fire_log: bool,
    observer: Option<Arc<dyn TransitionObserver>>,
    committed: mpsc::SyncSender<()>,
    gate: Arc<FoldGate>,
    versions: Arc<fire_log::Versions>,
}

impl Writer {
    fn run(self, mut conn: Connection, rx: Receiver<Op>) {
        let mut cache = WriterCache::default();
        conn.wal_hook(Some(|_, frames| {
            WAL_FRAMES.with(|f| f.set(frames));
            Ok(())
        }));
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
            let _ = self.committed.try_send(());
            self.reply(replies);
            bound_wal(&conn, &mut checkpoint_at);
        }
    }

    /// Applies a batch in one transaction; on failure every request of the
    /// batch is failed and None returned.
    fn commit(
        &self,
        conn: &mut Connection,
        mut ops: Vec<Op>,
        target: Target,
        cache: &mut WriterCache,
    ) -> Option<Vec<Reply>> {
        let mut replies = Vec::with_capacity(ops.len());
        let committed = (|| -> Result<(), String> {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| e.to_string())?;
            for op in ops.drain(..) {
                let reply = apply_op(&tx, op, cache, target, &self.versions);
                // A request refused by its own rules (no such run, a forbidden
                // transition) is refused before it writes anything. A failed
                // read or write (a full disk, an I/O error) may leave part of
                // the request written, or SQLite may already have rolled the
                // whole transaction back: then nothing of the batch is kept.
                // (This replaces a savepoint per request, whose page copies
                // were a sixth of a burst's cost.)
                if tx.is_autocommit() || reply.failed_write() {
                    let why = reply
                        .error()
                        .unwrap_or_else(|| "transaction rolled back".into());
                    replies.push(reply);
                    return Err(why);
                }
                replies.push(reply);
            }
            tx.commit().map_err(|e| e.to_string())
        })();
        // Versions change once the batch is visible (or rolled back: a bump
        // that was not needed only makes prepared fires decide again).
        cache.touched.bump(&self.versions);
        if let Err(msg) = committed {
            // The unfolded log's keys stay: that log is committed. (Keys of
            // this batch may stay too; a key found there is looked up.)
            let log_keys = std::mem::take(&mut cache.log_keys);
            *cache = WriterCache {
                log_keys,
                log_keys_partial: cache.log_keys_partial,
                log_records: cache.log_records,
                epoch: cache.epoch + 1,
                ..WriterCache::default()
            };
            self.versions.bump_all();
            // Nothing of the batch was written.
            for r in replies.drain(..) {
                fail(r, &msg);
            }
            for op in ops.drain(..) {
                fail_op(op, &msg);
            }
            return None;
        }
        Some(replies)
    }

    /// Tells the observer and the callers what a committed batch did.
    fn reply(&self, replies: Vec<Reply>) {
        let observer = &self.observer;
        for r in replies {
            match r {
                Reply::Create(done, res, shared) => {
                    if let (Some(o), Ok(Created::New(run))) = (observer, &res) {
                        match &shared {
                            Some(arc) => o.on_committed(arc, None),
                            None => o.on_transition(run, None),
                        }
                    }
                    done(res);
                }
                Reply::Transition(tx, res, shared) => {
                    if let (Some(o), Ok((run, from))) = (observer, &res) {
                        match &shared {
                            Some(arc) => o.on_committed(arc, Some(*from)),
                            None => o.on_transition(run, Some(*from)),
                        }
                    }
                    let _ = tx.send(res);
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
                                o.on_transition(run, None);
                            }
                        }
                    }
                    let _ = tx.send(res);
                }
                Reply::Retain(tx, res) => {
                    let _ = tx.send(res);
                }
                Reply::Prepared(tx, res) => {
                    if let (Some(o), Ok(results)) = (observer, &res) {
                        for created in results.iter().flatten() {
                            for c in created {
                                if let Created::New(run) = c {
                                    o.on_transition(run, None);
                                }
                            }
                        }
                    }
                    let _ = tx.send(res);
                }
            }
        }
    }
}

impl Reply {
    /// Whether the request failed on the database itself rather than on its
    /// own rules.
    fn failed_write(&self) -> bool {
        let e = match self {
            Reply::Create(_, Err(e), _) => e,
            Reply::Transition(_, Err(e), _) => e,
            Reply::Unit(_, Err(e)) => e,
            Reply::Epoch(_, Err(e)) => e,
            Reply::Fire(_, Err(e)) => e,
            Reply::Retain(_, Err(e)) => e,
            Reply::Prepared(_, Err(e)) => e,
            _ => return false,
        };
        matches!(e, StoreError::Unavailable(_) | StoreError::Invalid(_))
    }

    fn error(&self) -> Option<String> {
        let e = match self {
            Reply::Create(_, Err(e), _) => e,
            Reply::Transition(_, Err(e), _) => e,
            Reply::Unit(_, Err(e)) => e,
            Reply::Epoch(_, Err(e)) => e,
            Reply::Fire(_, Err(e)) => e,
            Reply::Retain(_, Err(e)) => e,
            Reply::Prepared(_, Err(e)) => e,
            _ => return None,
        };
        Some(match e {
            StoreError::Unavailable(m) => m.clone(),
            other => other.to_string(),
        })
    }
}

fn fail(r: Reply, msg: &str) {
    let e = || unavailable(msg);
    match r {
        Reply::Create(done, ..) => done(Err(e())),
        Reply::Transition(tx, ..) => drop(tx.send(Err(e()))),
        Reply::Unit(tx, _) => drop(tx.send(Err(e()))),
        Reply::Epoch(tx, _) => drop(tx.send(Err(e()))),
        Reply::Fire(tx, _) => drop(tx.send(Err(e()))),
        Reply::Retain(tx, _) => drop(tx.send(Err(e()))),
        Reply::Prepared(tx, _) => drop(tx.send(Err(e()))),
    }
}

fn fail_op(op: Op, msg: &str) {
    let e = || unavailable(msg);
    match op {
        Op::Create(_, _, done) => done(Err(e())),
        Op::Transition(_, _, tx) => drop(tx.send(Err(e()))),
        Op::PutState(_, tx) | Op::Outcomes(_, tx) | Op::Raw(_, tx) => drop(tx.send(Err(e()))),
        Op::Templates(_, tx) => drop(tx.send(Err(e()))),
        Op::Prepared(_, _, tx) => drop(tx.send(Err(e()))),
        Op::Fire(_, _, tx) => drop(tx.send(Err(e()))),
        Op::Retain(_, tx) => drop(tx.send(Err(e()))),
    }
}

/// Executes a statement from the connection's statement cache (hot paths run
/// the same few statements thousands of times; parsing them each time was a
/// measurable part of a run's cost).
fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

/// One row of a cached statement.
fn row<T>(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(p, f)
}

fn apply_op(
    tx: &rusqlite::Transaction<'_>,
    op: Op,
    cache: &mut WriterCache,
    target: Target,
    versions: &fire_log::Versions,
) -> Reply {
    match op {
        Op::Create(new, at, reply) => {
            if let Some(p) = &new.new.periodic {
                cache.touch(p);
            }
            let res = create(tx, *new, at, cache);
            let shared = match &res {
                Ok(Created::New(run)) => cache.runs.get(&run.id).cloned(),
                _ => None,
            };
            Reply::Create(reply, res, shared)
        }
        Op::Transition(id, t, reply) => {
            let res = transition(tx, &id, &t, cache);
            let shared = match &res {
                Ok((run, _)) => {
                    if let Some(p) = &run.periodic {
                        cache.touch(p);
                    }
                    cache.runs.get(&run.id).cloned()
                }
                Err(_) => None,
            };
            Reply::Transition(reply, res, shared)
        }
        Op::PutState(s, reply) => {
            cache.touch(&s.periodic);
            Reply::Unit(reply, put_state(tx, &s))
        }
        Op::Fire(fire, at, reply) => {
            let (runs, outcomes, state) = *fire;
            cache.touch(&state.periodic);
            Reply::Fire(
                reply,
                match target {
                    Target::Tables => fire_to_tables(tx, runs, outcomes, &state, at, cache),
                    Target::Log => log_fire(tx, runs, outcomes, &state, at, cache),
                },
            )
        }
        Op::Prepared(fires, at, reply) => {
            Reply::Prepared(reply, commit_prepared(tx, fires, at, cache, versions))
        }
        Op::Templates(templates, reply) => Reply::Epoch(
            reply,
            templates
                .iter()
                .try_for_each(|t| fire_log::store_template(tx, t, cache))
                .map(|()| cache.epoch),
        ),
        Op::Outcomes(o, reply) => {
            for x in &o {
                cache.touch(&x.periodic);
            }
            Reply::Unit(reply, put_outcomes(tx, &o))
        }
        Op::Retain(cutoff, reply) => {
            cache.touched.all = true;
            Reply::Retain(reply, retain(tx, cutoff, cache))
        }
        Op::Raw(sql, reply) => {
            cache.touched.all = true;
            // It may change any run.
            cache.runs.clear();
            Reply::Unit(reply, tx.execute_batch(&sql).map_err(unavailable))
        }
    }
}

/// A fire written to `runs`, `tick_outcomes` and `periodic_state`.
fn fire_to_tables(
    tx: &rusqlite::Transaction<'_>,
    runs: Vec<Prepared>,
    outcomes: Vec<TickOutcome>,
    state: &PeriodicState,
    at: Timestamp,
    cache: &mut WriterCache,
) -> Result<Vec<Created>, StoreError> {
    let created = runs
        .into_iter()
        .map(|p| create(tx, p, at, cache))
        .collect::<Result<Vec<_>, _>>()?;
    let outcomes: Vec<TickOutcome> = outcomes
        .into_iter()
        .map(|mut o| {
            o.fill_run_id(&created);
            o
        })
        .collect();
    put_outcomes(tx, &outcomes)?;
    put_state(tx, state)?;
    Ok(created)
}

/// A fire appended to the fire log: runs whose tick has a run already are
/// found (in `runs` or the log), the others logged with the outcomes and state.
fn log_fire(
    tx: &rusqlite::Transaction<'_>,
    runs: Vec<Prepared>,
    outcomes: Vec<TickOutcome>,
    state: &PeriodicState,
    at: Timestamp,
    cache: &mut WriterCache,
) -> Result<Vec<Created>, StoreError> {
    let mut existing = Vec::new();
    let mut new = Vec::new();
    for p in runs {
        match find_tick(tx, &p.new, cache)? {
            Some(run) => existing.push(Created::Existing(run)),
            None => new.push(p),
        }
    }
    // The new runs as they will be (ids are known; build ids are not, and no
    // outcome needs them) name the outcomes' runs before they are encoded.
    let mut outcomes = outcomes;
    for o in &mut outcomes {
        o.fill_run_id(&existing);
        fill_from_prepared(o, &new);
    }
    let body = fire_log::encode(&new, &outcomes, state);
    for p in &new {
        if let Some(t) = &p.template {
            fire_log::store_template(tx, t, cache)?;
        }
    }
    let new = new.into_iter().map(fire_log::LoggedRun::from).collect();
    let created = fire_log::append(tx, new, &body, at, cache)?;
    existing.extend(created.into_iter().map(Created::New));
    Ok(existing)
}

/// A `run` outcome without its run gets the id of its tick's run (attempt 0)
/// among prepared runs.
fn fill_from_prepared(o: &mut TickOutcome, runs: &[Prepared]) {
    if o.outcome == "run" && o.run_id.is_none() {
        let tick = crate::run::micros(o.first_tick);
        o.run_id = runs
            .iter()
            .find(|p| p.new.scheduled_at == Some(tick) && p.new.attempt == 0)
            .map(|p| p.id.clone());
    }
}

/// Prepared fires: each one whose periodic is unchanged since its version was
/// taken (and not changed earlier in this batch) is appended to the log, all
/// in one record; the others are stale. A write error fails them all.
fn commit_prepared(
    tx: &rusqlite::Transaction<'_>,
    prepared: crate::PreparedFires,
    at: Timestamp,
    cache: &mut WriterCache,
    versions: &fire_log::Versions,
) -> Result<Vec<Result<Vec<Created>, StoreError>>, StoreError> {
    let crate::PreparedFires { fires, log_body } = prepared;
    // All are checked before any is written: fires of one call never make each
    // other stale (many periodics share a stripe), but a periodic prepared
    // twice is committed once.
    let valid: Vec<bool> = {
        let mut seen = std::collections::HashSet::with_capacity(fires.len());
        fires
            .iter()
            .map(|f| {
                let crate::prepared::Payload::Log(entry) = &f.payload else {
                    return false;
                };
                !f.conflict
                    && entry.templates_epoch == cache.epoch
                    && versions.at(entry.stripe) == f.version
                    && !cache.touched.has(entry.stripe)
                    && seen.insert(f.periodic.as_str())
            })
            .collect()
    };
    // The record: the prepared one, or the valid fires' lines of it.
    let mut lines = Vec::new();
    let mut runs = 0;
    for (f, _) in fires.iter().zip(&valid).filter(|(_, v)| **v) {
        if let crate::prepared::Payload::Log(entry) = &f.payload {
            lines.push(entry.line.clone());
            runs += entry.runs.len();
        }
    }
    let whole = lines.first().is_some_and(|l| l.start == 0)
        && lines.last().is_some_and(|l| l.end == log_body.len())
        && lines.windows(2).all(|w| w[0].end == w[1].start);
    let first_build = if lines.is_empty() {
        0
    } else if whole {
        fire_log::insert_record(tx, &log_body, runs, at, cache)?.1
    } else {
        let body: String = lines.iter().map(|l| &log_body[l.clone()]).collect();
        fire_log::insert_record(tx, &body, runs, at, cache)?.1
    };
    if runs > 0 {
        cache.log_keys_partial = true;
    }
    let mut k = 0;
    let mut out = Vec::with_capacity(fires.len());
    for (f, valid) in fires.into_iter().zip(valid) {
        match (valid, f.payload) {
            (true, crate::prepared::Payload::Log(entry)) => {
                let crate::prepared::LogEntry { runs, stripe, .. } = *entry;
                cache.touched.add(stripe);
                out.push(Ok(runs
                    .into_iter()
                    .map(|mut run| {
                        run.build_id = (first_build + k).to_string();
                        run.created_at = at;
                        k += 1;
                        Created::New(run)
                    })
                    .collect()));
            }
            _ => out.push(Err(StoreError::Stale(f.periodic))),
        }
    }
    Ok(out)
}

/// The run of `new`'s tick, if one exists (in `runs` or the unfolded log).
fn find_tick(
    tx: &rusqlite::Transaction<'_>,
    new: &NewRun,
    cache: &mut WriterCache,
) -> Result<Option<Run>, StoreError> {
    let (Some(periodic), Some(t)) = (&new.periodic, new.scheduled_at) else {
        return Ok(None);
    };
    let (t, attempt) = (t.as_microsecond(), new.attempt);
    let found = row(
        tx,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE periodic = ?1 AND scheduled_at = ?2 AND attempt = ?3"),
        params![periodic, t, attempt],
        run_from_row,
    )
    .optional()
    .map_err(unavailable)?;
    if found.is_some() {
        return Ok(found);
    }
    if cache.log_records == 0 {
        return Ok(None);
    }
    if cache.log_keys_partial {
        fire_log::index_log_keys(tx, cache)?;
    }
    match cache.log_keys.get(&(periodic.clone(), t, attempt)) {
        Some(&key) => fire_log::logged_run(tx, key).map(Some),
        None => Ok(None),
    }
}

/// The last build id and seq handed out.
///
/// Build ids grow with seq (the single writer hands both out in order), so the
/// last one is the newest run's, in `runs` or in the fire log. The `meta` row
/// keeps the last build id of the runs retention deleted (the newest run may be
/// one of them), and the one older versions of bosun wrote with every batch.
/// Nothing is written per batch: that row's page was a frame of every commit.
fn counters(tx: &rusqlite::Transaction<'_>, cache: &WriterCache) -> Result<(i64, i64), StoreError> {
    if let Some(c) = cache.counters {
        return Ok(c);
    }
    let build: i64 = row(
        tx,
        "SELECT MAX(COALESCE((SELECT value FROM meta WHERE key = 'build_id'), 0),
            COALESCE((SELECT build_id FROM runs ORDER BY seq DESC LIMIT 1), 0),
            COALESCE((SELECT MAX(first_build + last_seq - first_seq) FROM fire_log), 0))",
        [],
        |r| r.get(0),
    )
    .map_err(unavailable)?;
    let seq: i64 = row(
        tx,
        "SELECT MAX(COALESCE((SELECT MAX(seq) FROM runs), 0), COALESCE((SELECT MAX(last_seq) FROM fire_log), 0))",
        [],
        |r| r.get(0),
    )
    .map_err(unavailable)?;
    Ok((build, seq))
}

const RUN_COLUMNS: &str = "id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url";

fn ts(micros: i64) -> rusqlite::Result<Timestamp> {
    Timestamp::from_microsecond(micros)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn opt_ts(v: Option<i64>) -> rusqlite::Result<Option<Timestamp>> {
    v.map(ts).transpose()
}

fn json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable")
}

fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    let job_type: String = r.get(3)?;
    let state: String = r.get(18)?;
    let refs: Option<String> = r.get(7)?;
    Ok(Run {
        id: r.get(0)?,
        build_id: r.get::<_, i64>(1)?.to_string(),
        job: r.get(2)?,
        job_type: job_type_from_str(&job_type).ok_or_else(|| {
            rusqlite::Error::InvalidColumnType(3, job_type, rusqlite::types::Type::Text)
        })?,
        periodic: r.get(4)?,
        configured_cluster: r.get(5)?,
        cluster: r.get(6)?,
        refs: refs.as_deref().map(json).transpose()?,
        extra_refs: json(&r.get::<_, String>(8)?)?,
        labels: json(&r.get::<_, String>(9)?)?,
        annotations: json(&r.get::<_, String>(10)?)?,
        spec_hash: r.get(11)?,
        scheduled_at: opt_ts(r.get(12)?)?,
        attempt: r.get(13)?,
        pod_revival_count: r.get(14)?,
        created_at: ts(r.get(15)?)?,
        pending_at: opt_ts(r.get(16)?)?,
        completed_at: opt_ts(r.get(17)?)?,
        state: state.parse().map_err(|_| {
            rusqlite::Error::InvalidColumnType(18, state, rusqlite::types::Type::Text)
        })?,
        description: r.get(19)?,
        url: r.get(20)?,
    })
}

/// A `periodic_state` row (`periodic, schedule_hash, first_seen, last_tick,
/// paused, queued`).
fn state_from_row(r: &Row<'_>) -> rusqlite::Result<PeriodicState> {
    Ok(PeriodicState {
        periodic: r.get(0)?,
        schedule_hash: r.get(1)?,
        first_seen: ts(r.get(2)?)?,
        last_tick: opt_ts(r.get(3)?)?,
        paused: r.get(4)?,
        queued: opt_ts(r.get(5)?)?,
    })
}

fn get_run(conn: &Connection, id: &str) -> rusqlite::Result<Option<Run>> {
    row(
        conn,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
        [id],
        run_from_row,
    )
    .optional()
}

fn create(
    tx: &rusqlite::Transaction<'_>,
    p: Prepared,
    at: Timestamp,
    cache: &mut WriterCache,
) -> Result<Created, StoreError> {
    if let Some(run) = find_tick(tx, &p.new, cache)? {
        return Ok(Created::Existing(run));
    }
    if !cache.specs.contains(&p.spec_hash) {
        exec(
            tx,
            "INSERT OR IGNORE INTO specs(hash, body) VALUES (?1, ?2)",
            params![p.spec_hash, &*p.spec_json],
        )
        .map_err(unavailable)?;
    }
    let (last_build, last_seq) = counters(tx, cache)?;
    let build_id = (last_build + 1).max(at.as_microsecond());
    let seq = last_seq + 1;
    let run = p.new.into_run(p.id, build_id, p.spec_hash, at);
    exec(
        tx,
        &format!("INSERT INTO runs({RUN_COLUMNS}, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"),
        params![
            run.id,
            build_id,
            run.job,
            run.job_type.as_str(),
            run.periodic,
            run.configured_cluster,
            run.cluster,
            p.refs_json,
            p.extra_refs_json,
            p.labels_json,
            p.annotations_json,
            run.spec_hash,
            run.scheduled_at.map(|t| t.as_microsecond()),
            run.attempt,
            run.pod_revival_count,
            run.created_at.as_microsecond(),
            None::<i64>,
            None::<i64>,
            run.state.as_str(),
            run.description,
            run.url,
            seq,
        ],
    )
    .map_err(unavailable)?;
    // Only now: a failed insert fails the batch, whose cache is then dropped.
    cache.counters = Some((build_id, seq));
    cache.specs.insert(run.spec_hash.clone());
    if !run.state.is_final() {
        cache.runs.insert(run.id.clone(), Arc::new(run.clone()));
    }
    Ok(Created::New(run))
}

fn transition(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    t: &Transition,
    cache: &mut WriterCache,
) -> Result<(Run, RunState), StoreError> {
    let mut run = match cache.runs.get(id) {
        Some(run) => Run::clone(run),
        None => get_run(tx, id)
            .map_err(unavailable)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?,
    };
    let from = run.state;
    apply(&mut run, t)?;
    exec(tx,
        "UPDATE runs SET state = ?2, description = ?3, cluster = ?4, url = ?5, pending_at = ?6, completed_at = ?7, pod_revival_count = ?8 WHERE id = ?1",
        params![
            run.id,
            run.state.as_str(),
            run.description,
            run.cluster,
            run.url,
            run.pending_at.map(|t| t.as_microsecond()),
            run.completed_at.map(|t| t.as_microsecond()),
            run.pod_revival_count,
        ],
    )
    .map_err(unavailable)?;
    // Only once the row is written: a failed write fails the batch, whose
    // cache is then dropped.
    if run.state.is_final() {
        cache.runs.remove(id);
    } else {
        cache.runs.insert(run.id.clone(), Arc::new(run.clone()));
    }
    Ok((run, from))
}

fn put_state(tx: &rusqlite::Transaction<'_>, s: &PeriodicState) -> Result<(), StoreError> {
    exec(tx,
        "INSERT INTO periodic_state(periodic, schedule_hash, first_seen, last_tick, paused, queued) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(periodic) DO UPDATE SET schedule_hash = ?2, first_seen = ?3, last_tick = ?4, paused = ?5, queued = ?6",
        params![
            s.periodic,
            s.schedule_hash,
            s.first_seen.as_microsecond(),
            s.last_tick.map(|t| t.as_microsecond()),
            s.paused,
            s.queued.map(|t| t.as_microsecond()),
        ],
    )
    .map_err(unavailable)?;
    Ok(())
}

fn put_outcomes(
    tx: &rusqlite::Transaction<'_>,
    outcomes: &[TickOutcome],
) -> Result<(), StoreError> {
    let mut stmt = tx
        .prepare_cached("INSERT INTO tick_outcomes(periodic, first_tick, last_tick, count, outcome, run_id, recorded_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
        .map_err(unavailable)?;
    for o in outcomes {
        stmt.execute(params![
            o.periodic,
            o.first_tick.as_microsecond(),
            o.last_tick.as_microsecond(),
            o.count as i64,
            o.outcome,
            o.run_id,
            o.recorded_at.as_microsecond(),
        ])
        .map_err(unavailable)?;
    }
    Ok(())
}

fn retain(
    tx: &rusqlite::Transaction<'_>,
    cutoff: Timestamp,
    cache: &WriterCache,
) -> Result<Vec<String>, StoreError> {
    let cutoff = cutoff.as_microsecond();
    // The latest run of each periodic (by creation) survives, as Prow's sinker keeps it.
    let select = "SELECT id FROM runs WHERE completed_at IS NOT NULL AND completed_at < ?1
        AND seq NOT IN (SELECT MAX(seq) FROM runs WHERE periodic IS NOT NULL GROUP BY periodic)";
    let ids: Vec<String> = {
        let mut stmt = tx.prepare(select).map_err(unavailable)?;
        let rows = stmt
            .query_map([cutoff], |r| r.get(0))
            .map_err(unavailable)?;
        rows.collect::<rusqlite::Result<_>>().map_err(unavailable)?
    };
    if !ids.is_empty() {
        // The newest run may go: its build id is kept, so none is handed out
        // twice (see `counters`).
        let (build_id, _) = counters(tx, cache)?;
        exec(tx, "INSERT INTO meta(key, value) VALUES ('build_id', ?1) ON CONFLICT(key) DO UPDATE SET value = ?1", [build_id])
            .map_err(unavailable)?;
    }
    let mut del = tx
        .prepare_cached("DELETE FROM runs WHERE id = ?1")
        .map_err(unavailable)?;
    for id in &ids {
        del.execute([id]).map_err(unavailable)?;
    }
    Ok(ids)
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
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
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
        self.send(|tx| Op::Transition(id.to_string(), t, tx))
            .map(|(run, _)| run)
    }

    fn transitions(&self, batch: Vec<(String, Transition)>) -> Vec<Result<Run, StoreError>> {
        // Queue them all before waiting, so the writer commits them together.
        let receivers: Vec<Result<TransitionReply, StoreError>> = {
            let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            batch
                .into_iter()
                .map(|(id, t)| {
                    let (tx, rx) = mpsc::channel();
                    writer
                        .as_ref()
                        .ok_or_else(|| unavailable("store closed"))?
                        .send(Op::Transition(id, t, tx))
                        .map_err(|_| unavailable("writer stopped"))?;
                    Ok(rx)
                })
                .collect()
        };
        receivers
            .into_iter()
            .map(|rx| {
                rx?.recv()
                    .map_err(|_| unavailable("writer stopped"))?
                    .map(|(run, _)| run)
            })
            .collect()
    }

    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        self.read(|c| get_run(c, id))
    }

    fn list(&self, f: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1");
        let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
        let mut add = |clause: &str, v: Box<dyn rusqlite::ToSql>| {
            args.push(v);
            sql.push_str(&format!(" AND {clause} = ?{}", args.len()));
        };
        if let Some(j) = &f.job {
            add("job", Box::new(j.clone()));
        }
        if let Some(p) = &f.periodic {
            add("periodic", Box::new(p.clone()));
            // Through the job's index.
            if f.job.is_none() {
                add("job", Box::new(crate::periodic_job(p).to_string()));
            }
        }
        if let Some(s) = f.state {
            add("state", Box::new(s.as_str()));
        }
        if let Some(c) = &f.cluster {
            add("cluster", Box::new(c.clone()));
        }
        if let Some(c) = &f.configured_cluster {
            add("configured_cluster", Box::new(c.clone()));
        }
        if let Some(t) = &f.job_type {
            add("job_type", Box::new(t.clone()));
        }
        for c in &f.not_configured_clusters {
            args.push(Box::new(c.clone()));
            sql.push_str(&format!(" AND configured_cluster <> ?{}", args.len()));
        }
        if f.active {
            sql.push_str(" AND completed_at IS NULL");
        }
        let limit = if f.limit == 0 { 100 } else { f.limit };
        let order = if f.oldest_first { "ASC" } else { "DESC" };
        sql.push_str(&format!(
            " ORDER BY seq {order} LIMIT {limit} OFFSET {}",
            f.offset
        ));
        self.read(|c| {
            let mut stmt = c.prepare_cached(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), run_from_row)?;
            rows.collect()
        })
    }

    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let body: Option<String> = self.read(|c| {
            row(c, "SELECT body FROM specs WHERE hash = ?1", [hash], |r| {
                r.get(0)
            })
            .optional()
        })?;
        body.map(|b| serde_json::from_str(&b).map_err(|e| StoreError::Invalid(e.to_string())))
            .transpose()
    }

    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        self.read(|c| {
            row(c,
                "SELECT periodic, schedule_hash, first_seen, last_tick, paused, queued FROM periodic_state WHERE periodic = ?1",
                [periodic],
                state_from_row,
            )
            .optional()
        })
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
        self.read_snapshot(|c| {
            for chunk in periodics.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let mut stmt = c.prepare_cached(&format!(
                    "SELECT periodic, schedule_hash, first_seen, last_tick, paused, queued FROM periodic_state WHERE periodic IN ({marks})"
                ))?;
                let rows = stmt.query_map(rusqlite::params_from_iter(chunk), state_from_row)?;
                for s in rows {
                    let s = s?;
                    out.insert(s.periodic.clone(), s);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn periodic_runs(
        &self,
        periodics: &[String],
    ) -> Result<std::collections::HashMap<String, crate::PeriodicRuns>, StoreError> {
        // Two index lookups per periodic on one connection, reading only the
        // columns a decision needs (no JSON).
        self.read_snapshot(|c| {
            let mut last = c.prepare_cached(
                "SELECT created_at, completed_at, scheduled_at, attempt, state FROM runs WHERE job = ?2 AND periodic = ?1 ORDER BY seq DESC LIMIT 1",
            )?;
            let mut active = c.prepare_cached(
                "SELECT 1 FROM runs WHERE periodic = ?1 AND completed_at IS NULL ORDER BY seq DESC LIMIT 1",
            )?;
            // In name order: neighbouring lookups share index pages.
            let mut sorted: Vec<&String> = periodics.iter().collect();
            sorted.sort_unstable();
            let mut out = std::collections::HashMap::new();
            for p in sorted {
                let summary = last
                    .query_row([p.as_str(), crate::periodic_job(p)], |r| {
                        let state: String = r.get(4)?;
                        Ok(crate::RunSummary {
                            created_at: ts(r.get(0)?)?,
                            completed_at: opt_ts(r.get(1)?)?,
                            scheduled_at: opt_ts(r.get(2)?)?,
                            attempt: r.get(3)?,
                            state: state.parse().map_err(|_| {
                                rusqlite::Error::InvalidColumnType(
                                    4,
                                    state,
                                    rusqlite::types::Type::Text,
                                )
                            })?,
                        })
                    })
                    .optional()?;
                let is_active = active.exists([p])?;
                out.insert(
                    p.clone(),
                    crate::PeriodicRuns {
                        last: summary,
                        active: is_active,
                    },
                );
            }
            Ok(out)
        })
    }

    fn count_runs(&self) -> Result<Vec<crate::RunCount>, StoreError> {
        // One grouped scan in SQL (no run is decoded): the labels come from the
        // refs' JSON as `RunCount::of` takes them.
        let sql = "SELECT job, job_type, state,
                CASE WHEN refs IS NOT NULL THEN json_extract(refs, '$.org') ELSE COALESCE(json_extract(extra_refs, '$[0].org'), '') END,
                CASE WHEN refs IS NOT NULL THEN json_extract(refs, '$.repo') ELSE COALESCE(json_extract(extra_refs, '$[0].repo'), '') END,
                COALESCE(CASE WHEN refs IS NOT NULL THEN json_extract(refs, '$.base_ref') ELSE json_extract(extra_refs, '$[0].base_ref') END, ''),
                COALESCE(cluster, configured_cluster),
                COALESCE(json_extract(labels, '$.\"prow.k8s.io/retest\"'), '') = 'true',
                COUNT(*)
            FROM runs GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8";
        self.read(|c| {
            let mut stmt = c.prepare_cached(sql)?;
            let rows = stmt.query_map([], |r| {
                Ok(crate::RunCount {
                    job: r.get(0)?,
                    job_type: r.get(1)?,
                    state: r.get(2)?,
                    org: r.get(3)?,
                    repo: r.get(4)?,
                    base_ref: r.get(5)?,
                    cluster: r.get(6)?,
                    retest: r.get(7)?,
                    count: r.get::<_, i64>(8)? as u64,
                })
            })?;
            rows.collect()
        })
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
            let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
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

    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<crate::PreparedFires, StoreError> {
        // The CPU work: ids, JSON, templates, the records.
        let mut entries: Vec<(u64, Vec<Prepared>, Vec<TickOutcome>, PeriodicState)> = fires
            .into_iter()
            .map(|(fire, version)| {
                let runs: Vec<Prepared> = fire.runs.into_iter().map(prepare_fire_run).collect();
                (version, runs, fire.outcomes, fire.state)
            })
            .collect();
        // Tick keys, in one snapshot taken after the versions: a run created
        // since is a change of its periodic, which the commit sees.
        let conflicts: Vec<bool> = self.read_snapshot(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT 1 FROM runs WHERE periodic = ?1 AND scheduled_at = ?2 AND attempt = ?3",
            )?;
            entries
                .iter()
                .map(|(_, runs, ..)| {
                    for p in runs {
                        if let (Some(periodic), Some(t)) = (&p.new.periodic, p.new.scheduled_at) {
                            if stmt.exists(params![periodic, t.as_microsecond(), p.new.attempt])? {
                                return Ok(true);
                            }
                        }
                    }
                    Ok(false)
                })
                .collect()
        })?;
        // The templates are stored now, so the commit writes only the records.
        let mut seen = std::collections::HashSet::new();
        let templates: Vec<fire_log::Template> = entries
            .iter()
            .flat_map(|(_, runs, ..)| runs.iter())
            .filter_map(|p| p.template.as_ref())
            .filter(|t| seen.insert(t.hash.clone()))
            .map(|t| fire_log::Template {
                hash: t.hash.clone(),
                body: t.body.clone(),
                spec_hash: t.spec_hash.clone(),
                spec_json: t.spec_json.clone(),
            })
            .collect();
        let templates_epoch = self.send(|tx| Op::Templates(templates, tx))?;
        let mut log_body = String::new();
        let fires = entries
            .drain(..)
            .zip(conflicts)
            .map(|((version, runs, mut outcomes, state), conflict)| {
                for o in &mut outcomes {
                    fill_from_prepared(o, &runs);
                }
                let start = log_body.len();
                log_body.push_str(&fire_log::encode(&runs, &outcomes, &state));
                log_body.push('\n');
                // Only what the commit needs is kept (the rest is freed here,
                // not in the writer), and the runs are made now: the commit
                // gives them their build ids and creation time.
                let entry = crate::prepared::LogEntry {
                    runs: runs
                        .into_iter()
                        .map(|p| p.new.into_run(p.id, 0, p.spec_hash, Timestamp::UNIX_EPOCH))
                        .collect(),
                    line: start..log_body.len(),
                    stripe: fire_log::Versions::stripe(&state.periodic),
                    templates_epoch,
                };
                crate::prepared::PreparedFire {
                    periodic: state.periodic.clone(),
                    version,
                    conflict,
                    payload: crate::prepared::Payload::Log(Box::new(entry)),
                }
            })
            .collect();
        Ok(crate::PreparedFires { fires, log_body })
    }

    fn commit_prepared(
        &self,
        prepared: crate::PreparedFires,
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
        self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT periodic, first_tick, last_tick, count, outcome, run_id, recorded_at FROM tick_outcomes WHERE periodic = ?1 ORDER BY first_tick, rowid",
            )?;
            let rows = stmt.query_map([periodic], |r| {
                Ok(TickOutcome {
                    periodic: r.get(0)?,
                    first_tick: ts(r.get(1)?)?,
                    last_tick: ts(r.get(2)?)?,
                    count: r.get::<_, i64>(3)? as u64,
                    outcome: r.get(4)?,
                    run_id: r.get(5)?,
                    recorded_at: ts(r.get(6)?)?,
                })
            })?;
            rows.collect()
        })
    }

    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError> {
        self.send(|tx| Op::Retain(cutoff, tx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database at schema `version`, made by the migrations before it.
    fn schema(path: &Path, version: usize) -> Connection {
        let conn = Connection::open(path).unwrap();
        for m in &MIGRATIONS[..version] {
            conn.execute_batch(m).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn
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
        let created = store
            .create_run(
                NewRun {
                    job: "job".into(),
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
                },
                at,
            )
            .unwrap();
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
}
