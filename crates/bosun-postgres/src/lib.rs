//! bosun's PostgreSQL store: the [`Store`] trait on a database that several
//! `bosun serve` replicas share, with the semantics of the SQLite store (the
//! store conformance suite runs unchanged against both).
//!
//! The driver is `postgres` (rust-postgres, the synchronous face of
//! `tokio-postgres`): the most used PostgreSQL client in Rust, speaking the
//! protocol itself (no libpq), with `LISTEN`/`NOTIFY` and the database's own
//! error codes. It is synchronous, as the [`Store`] trait is: no runtime of
//! the store's leaks into its callers (`sqlx` and `deadpool` are async, and
//! `sqlx`'s checked queries want a database at build time). Connections are
//! pooled by `r2d2`.
//!
//! Every call is one transaction (read committed), retried on its own when
//! PostgreSQL aborts it for a serialization failure or a deadlock; every
//! other failure is [`StoreError::Unavailable`] with nothing written. What
//! makes the rules hold under concurrency, each in the same transaction as
//! the write it guards:
//! - a tick's run is unique by `(periodic, scheduled_at, attempt)` (a unique
//!   index; a second insert finds the first's run);
//! - a run's transition locks its row (`FOR UPDATE`) before the state
//!   machine decides;
//! - webhook seqs are handed out under one row's lock, so they become
//!   visible in order;
//! - a report key's row is locked before its entries, so one key has one
//!   pending entry, the newest.
//!
//! The report policy's entries for a change are written in the change's
//! transaction, as in SQLite. Observers are told of this process's commits,
//! after each commit.
//!
//! Creations are batched: a creator thread takes the creations waiting (from
//! [`Store::create_run_then`] and [`Store::create_run`] alike) and commits
//! them in one transaction, one commit for many runs; a batch that fails is
//! tried again run by run, so one bad run fails alone. The creator keeps a
//! connection of its own with its statements prepared on it, and one
//! statement does the fence's check, the specs, the runs, their pulls and
//! the notification: a batch is four round trips (`BEGIN`, that statement,
//! the periodics' versions when it made periodic runs, `COMMIT`).
//!
//! A periodic's version is a row set from a database sequence by every
//! transaction that touches the periodic; a fire prepared ahead commits only
//! if its periodic's row (locked) still holds the version it was decided on.

#![warn(missing_docs)]

mod blocking;
mod deliveries;
mod error;
mod files;
mod lease;
mod listen;
mod rows;
mod schema;
pub mod tls;

pub use crate::lease::{Fence, Lease, LeaseInfo};
pub use crate::listen::Hooks;

/// The schema version this bosun makes and reads (its migrations' count).
pub const SCHEMA_VERSION: usize = schema::MIGRATIONS.len();

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bosun_store::reports::policy_reports;
use bosun_store::repos::{Accepted, NewDelivery, RepoRecord, StoredDelivery};
use bosun_store::run::apply;
use bosun_store::shared::{check_expected, conflict};
use bosun_store::{
    count_by_labels, new_run_id, policy_set_already, Before, CreateDone, Created, Enqueued, Fire,
    JobDemand, KeptFire, LogSlice, NewReport, NewRun, PeriodicRuns, PeriodicState, PreparedFires,
    ReportCounts, ReportFailure, ReportPolicy, Run, RunCount, RunFile, RunFiles, RunFilter,
    RunState, RunSummary, Session, SkippedTicks, Store, StoreError, StoredDocument, StoredReport,
    TickOutcome, Transition, TransitionObserver,
};
use jiff::Timestamp;
use postgres::types::ToSql;
use postgres::{GenericClient, Transaction};
use r2d2_postgres::PostgresConnectionManager;

use crate::blocking::off_runtime;
use crate::error::{
    describe, ended_session, is_conflict, no_connection, pooled_reconnects, unavailable, RECONNECTS,
};
use crate::rows::{
    micros, opt_ts, to_json, ts, DELIVERY_COLUMNS, OUTCOME_COLUMNS, REPORT_COLUMNS, RUN_COLUMNS,
};

pub(crate) type Pool = r2d2::Pool<PostgresConnectionManager<tls::Connector>>;
type Param<'a> = &'a (dyn ToSql + Sync);

/// How many times a transaction PostgreSQL aborted for a conflict is tried.
const CONFLICT_TRIES: usize = 8;

/// How many creator threads commit batches of creations at once.
const CREATORS: usize = 1;

/// At most this many creations commit in one transaction.
const CREATE_BATCH: usize = 512;

/// How the store connects.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// The most connections this process opens.
    pub max_connections: u32,
    /// How long a call waits for a connection before it fails
    /// ([`StoreError::Unavailable`]).
    pub connect_timeout: Duration,
    /// The CA certificates (a PEM file) a server's certificate is checked
    /// against when the connection is encrypted; none: the system's roots
    /// ([`tls`]).
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            ca_file: None,
        }
    }
}

/// A failure inside a transaction: the database's (tried again when it is a
/// conflict) or the store's own.
pub(crate) enum Fail {
    Db(postgres::Error),
    Store(StoreError),
}

impl From<postgres::Error> for Fail {
    fn from(e: postgres::Error) -> Self {
        Fail::Db(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

impl From<Fail> for StoreError {
    fn from(e: Fail) -> Self {
        match e {
            Fail::Db(e) => unavailable(e),
            Fail::Store(e) => e,
        }
    }
}

pub(crate) type Tx<'a, 'b> = &'a mut Transaction<'b>;

/// The fence a process's writes carry while it leads (none otherwise).
type SharedFence = Arc<std::sync::RwLock<Option<Fence>>>;

/// A creation waiting for the creator thread.
struct Creation {
    new: NewRun,
    at: Timestamp,
    done: CreateDone,
}

/// The PostgreSQL store.
pub struct PgStore {
    pool: Pool,
    observer: Option<Arc<dyn TransitionObserver>>,
    policy: Arc<OnceLock<Arc<dyn ReportPolicy>>>,
    /// Spec hashes known to be stored (specs are never deleted).
    specs: Arc<Mutex<HashSet<String>>>,
    creator: Mutex<mpsc::Sender<Creation>>,
    /// Webhook deliveries waiting for the acceptor thread.
    acceptor: Mutex<mpsc::Sender<Acceptance>>,
    fence: SharedFence,
    /// This store, as the origin of the changes it notifies.
    origin: Arc<str>,
    /// How it connects (the listener has a connection of its own).
    config: postgres::Config,
    tls: tls::Connector,
}

/// A connection's settings from `url` (`postgres://user@host:port/db` or
/// libpq's `key=value` form), with `password` when given (read from a file
/// by the caller: a password is never in a URL on a command line).
pub fn config(url: &str, password: Option<&str>) -> Result<tokio_postgres::Config, StoreError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::Invalid(format!("the store's URL: {e}")))?;
    if let Some(p) = password {
        config.password(p.trim_end_matches(['\n', '\r']));
    }
    if config.get_application_name().is_none() {
        config.application_name("bosun");
    }
    if config.get_options().is_none() {
        // A transaction left open by a client that stopped answering (paused,
        // or cut off without a FIN) holds its locks, the leader lease's
        // among them, until the server ends it: after 5 s idle, as no
        // transaction of bosun's ever is.
        config.options("-c idle_in_transaction_session_timeout=5000");
    }
    // A server that went silent (a partition, a frozen link: no FIN, no
    // RST) is given up on in seconds, not at the system's defaults (hours
    // for an idle connection, a quarter of an hour for unanswered data):
    // a call waiting on it fails, the pool drops the connection, and the
    // API says the store is out of reach instead of hanging. Data sent and
    // not acknowledged within 10 s ends the connection
    // (`TCP_USER_TIMEOUT`); a connection waiting for an answer with
    // nothing sent is probed after 5 s of silence, every 2 s, 3 times.
    // No statement of bosun's waits on the server's side longer than that
    // without the link carrying anything (locks are taken in order and
    // held for milliseconds; keepalive probes are answered by the server's
    // kernel whatever the backend does).
    config
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(5))
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(3)
        .tcp_user_timeout(Duration::from_secs(10));
    Ok(config)
}

impl PgStore {
    /// Connects to the database `config` names, applies the migrations it
    /// lacks (under a lock: replicas starting together apply each once), and
    /// tells `observer` of this process's commits.
    pub fn open(
        config: tokio_postgres::Config,
        options: PgOptions,
        observer: Option<Arc<dyn TransitionObserver>>,
    ) -> Result<PgStore, StoreError> {
        let mut pipelined = config;
        if pipelined.get_connect_timeout().is_none() {
            pipelined.connect_timeout(options.connect_timeout);
        }
        let config = postgres::Config::from(pipelined.clone());
        // The first connection, direct: its failure (a wrong password, no
        // such database) is told as PostgreSQL said it, at once.
        let tls = tls::connector(options.ca_file.as_deref())?;
        let mut first = config.connect(tls.clone()).map_err(|e| {
            StoreError::Unavailable(format!("cannot connect to PostgreSQL: {}", describe(&e)))
        })?;
        schema::migrate(&mut first)?;
        drop(first);
        let manager = PostgresConnectionManager::new(config.clone(), tls.clone());
        let pool = r2d2::Pool::builder()
            .max_size(options.max_connections.max(2))
            .min_idle(Some(1))
            .connection_timeout(options.connect_timeout)
            // A broken connection is seen when a call fails on it (and the
            // pool drops it then); testing each one on checkout would cost
            // every call a round trip.
            .test_on_check_out(false)
            .build(manager)
            .map_err(no_connection)?;
        let (tx, rx) = mpsc::channel::<Creation>();
        let (accept_tx, accept_rx) = mpsc::channel::<Acceptance>();
        let store = PgStore {
            acceptor: Mutex::new(accept_tx),
            pool,
            observer,
            policy: Arc::default(),
            specs: Arc::default(),
            creator: Mutex::new(tx),
            fence: Arc::default(),
            origin: new_run_id().into(),
            config,
            tls,
        };
        let creator = Creator {
            pool: store.pool.clone(),
            observer: store.observer.clone(),
            policy: store.policy.clone(),
            specs: store.specs.clone(),
            fence: store.fence.clone(),
            origin: store.origin.clone(),
        };
        // One creator: more, committing batches side by side, were measured
        // no faster (run_bench: 4.3 s with four, 4.1 s with one) and cost
        // more CPU; the server's work per run bounds it, not its syncs.
        let acceptor = Acceptor {
            pool: store.pool.clone(),
            fence: store.fence.clone(),
        };
        std::thread::Builder::new()
            .name("bosun-pg-acceptor".into())
            .spawn(move || acceptor.run(&accept_rx))
            .map_err(|e| StoreError::Unavailable(format!("the acceptor thread: {e}")))?;
        let (creator, rx) = (Arc::new(creator), Arc::new(Mutex::new(rx)));
        for _ in 0..CREATORS {
            let (creator, rx) = (creator.clone(), rx.clone());
            let pipe = Pipe::new(pipelined.clone(), store.tls.clone())?;
            std::thread::Builder::new()
                .name("bosun-pg-creator".into())
                .spawn(move || creator.run(&rx, pipe))
                .map_err(|e| StoreError::Unavailable(format!("a creator thread: {e}")))?;
        }
        Ok(store)
    }

    /// Runs `f` in a transaction, tried again (from the start) when
    /// PostgreSQL aborts it for a conflict; commits it.
    fn write<T: Send>(
        &self,
        f: impl FnMut(Tx<'_, '_>) -> Result<T, Fail> + Send,
    ) -> Result<T, StoreError> {
        in_transaction(&self.pool, &self.fence, f)
    }

    /// From now on every write transaction of this store checks `fence`
    /// first, in the transaction ([`Lease`]); none: writes are not fenced
    /// (a follower's, or a store no replica shares).
    pub fn set_fence(&self, fence: Option<Fence>) {
        *self.fence.write().unwrap_or_else(|e| e.into_inner()) = fence;
    }

    /// The fence the writes carry now.
    pub fn fence(&self) -> Option<Fence> {
        self.fence.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Listens for what other stores on the database commit (its own
    /// thread and connection, see [`Hooks`]): the runs they create and move
    /// go to `hooks.remote`, a resigned lease to `hooks.lease_free`.
    /// Returns once the listener listens (what is committed from then on is
    /// heard), or fails when it could not start listening within the
    /// connection timeout (it goes on trying).
    pub fn listen(&self, hooks: Hooks) -> Result<(), StoreError> {
        let (config, origin, tls) = (
            self.config.clone(),
            self.origin.to_string(),
            self.tls.clone(),
        );
        let wait = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(5))
            + Duration::from_secs(5);
        let (ready, listening) = mpsc::channel();
        std::thread::Builder::new()
            .name("bosun-pg-listener".into())
            .spawn(move || listen::run(config, tls, origin, hooks, ready))
            .map_err(|e| StoreError::Unavailable(format!("the listener thread: {e}")))?;
        listening.recv_timeout(wait).map_err(|_| {
            StoreError::Unavailable("the store's listener could not start listening".into())
        })
    }

    /// A handle on the lease `name` for the holder `holder` (unique per
    /// process start), with time to live `ttl`.
    pub fn lease(&self, name: &str, holder: &str, ttl: Duration) -> Lease {
        Lease::new(self.pool.clone(), name, holder, ttl)
    }

    /// Runs `f` on a connection (reads: each statement sees what was
    /// committed when it began).
    fn read<T: Send>(
        &self,
        mut f: impl FnMut(&mut postgres::Client) -> Result<T, Fail> + Send,
    ) -> Result<T, StoreError> {
        off_runtime(|| {
            let mut c = self.pool.get().map_err(no_connection)?;
            let mut reconnects = 0;
            loop {
                match f(&mut c) {
                    Ok(v) => return Ok(v),
                    // A pooled connection the server ended (a restart, a
                    // terminated backend): dropped, the read made again on
                    // another.
                    Err(Fail::Db(e))
                        if c.is_closed() && reconnects < pooled_reconnects(&self.pool) =>
                    {
                        reconnects += 1;
                        tracing::debug!(error = %describe(&e), "a closed connection; trying another");
                        drop(c);
                        c = self.pool.get().map_err(no_connection)?;
                    }
                    Err(Fail::Db(e)) => return Err(unavailable(e)),
                    Err(Fail::Store(e)) => return Err(e),
                }
            }
        })
    }

    /// Runs `f` in one read-only transaction, a snapshot (repeatable read):
    /// its statements see the same data.
    fn read_snapshot<T: Send>(
        &self,
        f: impl FnOnce(Tx<'_, '_>) -> Result<T, Fail> + Send,
    ) -> Result<T, StoreError> {
        off_runtime(|| self.read_snapshot_here(f))
    }

    fn read_snapshot_here<T>(
        &self,
        f: impl FnOnce(Tx<'_, '_>) -> Result<T, Fail>,
    ) -> Result<T, StoreError> {
        let mut c = self.pool.get().map_err(no_connection)?;
        let run = |c: &mut postgres::Client| -> Result<T, Fail> {
            let mut tx = c
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let v = f(&mut tx)?;
            tx.commit()?;
            Ok(v)
        };
        run(&mut c).map_err(StoreError::from)
    }

    fn policy(&self) -> Option<&dyn ReportPolicy> {
        self.policy.get().map(|p| p.as_ref())
    }

    /// Remembers spec hashes a committed transaction stored.
    fn known_specs(&self, fresh: Vec<String>) {
        self.specs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(fresh);
    }

    fn observe_created(&self, created: &[Created]) {
        observe_created(self.observer.as_deref(), created);
    }
}

/// Tells `observer` of the new runs among `created`.
fn observe_created(observer: Option<&dyn TransitionObserver>, created: &[Created]) {
    if let Some(o) = observer {
        for c in created {
            if let Created::New(run) = c {
                o.on_change(run, Some(run), None);
            }
        }
    }
}

/// Runs `f` in a transaction of a connection of `pool`, tried again when
/// PostgreSQL aborts it for a conflict; commits it. With a fence, the
/// transaction checks it first ([`lease`]).
fn in_transaction<T: Send>(
    pool: &Pool,
    fence: &std::sync::RwLock<Option<Fence>>,
    f: impl FnMut(Tx<'_, '_>) -> Result<T, Fail> + Send,
) -> Result<T, StoreError> {
    off_runtime(|| in_transaction_here(pool, fence, f))
}

fn in_transaction_here<T>(
    pool: &Pool,
    fence: &std::sync::RwLock<Option<Fence>>,
    mut f: impl FnMut(Tx<'_, '_>) -> Result<T, Fail>,
) -> Result<T, StoreError> {
    let mut c = pool.get().map_err(no_connection)?;
    let mut tries = 0;
    let mut reconnects = 0;
    loop {
        tries += 1;
        let fence = fence.read().unwrap_or_else(|e| e.into_inner()).clone();
        // Whether COMMIT was sent: a failure after it leaves the outcome
        // unknown, and the transaction is never tried again.
        let mut committing = false;
        let attempt = (|| -> Result<T, Fail> {
            let mut tx = c.transaction()?;
            if let Some(fence) = &fence {
                if !lease::holds(&mut tx, fence)? {
                    return Err(fenced(fence).into());
                }
            }
            let v = f(&mut tx)?;
            committing = true;
            tx.commit()?;
            Ok(v)
        })();
        match attempt {
            Ok(v) => return Ok(v),
            Err(Fail::Db(e)) if is_conflict(&e) && tries < CONFLICT_TRIES => {
                tracing::debug!(error = %describe(&e), "a store transaction is tried again");
            }
            // A pooled connection the server ended (a restart, a terminated
            // backend) fails before anything was committed: the pool drops
            // it, and the transaction is tried on a new one.
            Err(Fail::Db(e))
                if !committing && c.is_closed() && reconnects < pooled_reconnects(pool) =>
            {
                reconnects += 1;
                tracing::debug!(error = %describe(&e), "a closed connection; trying another");
                drop(c);
                c = pool.get().map_err(no_connection)?;
            }
            Err(Fail::Db(e)) => return Err(unavailable(e)),
            Err(Fail::Store(e)) => return Err(e),
        }
    }
}

/// `org/repo` of a run's refs, as SQLite's store puts it together.
fn refs_repo(new: &NewRun) -> Option<String> {
    new.refs.as_ref().map(|r| format!("{}/{}", r.org, r.repo))
}

/// The run of a tick, if one exists.
fn tick_run(
    tx: &mut impl GenericClient,
    periodic: &str,
    at: i64,
    attempt: u32,
) -> Result<Option<Run>, Fail> {
    let row = tx.query_opt(
        &format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE periodic = $1 AND scheduled_at = $2 AND attempt = $3"
        ),
        &[&periodic, &at, &i64::from(attempt)],
    )?;
    Ok(row.as_ref().map(rows::run).transpose()?)
}

/// What a write transaction collects as it goes: the spec hashes it
/// stored (known stored once it commits) and the periodics it touched
/// (their versions are set once, before it commits).
#[derive(Default)]
struct Written {
    fresh: Vec<String>,
    touched: std::collections::BTreeSet<String>,
    /// The runs created (none) or moved (the state they left), notified to
    /// the other replicas at commit.
    changes: Vec<(String, Option<RunState>)>,
}

impl Written {
    /// Sets the touched periodics' versions (in name order: transactions
    /// lock the rows in one order) and notifies the changes, as from
    /// `origin`.
    fn finish(&mut self, tx: Tx<'_, '_>, origin: &str) -> Result<(), Fail> {
        self.finish_with(tx, origin, SET_VERSIONS)
    }

    /// [`Written::finish`] with `versions`, [`SET_VERSIONS`] prepared or
    /// not.
    fn finish_with<S: ?Sized + postgres::ToStatement>(
        &mut self,
        tx: Tx<'_, '_>,
        origin: &str,
        versions: &S,
    ) -> Result<(), Fail> {
        if !self.changes.is_empty() {
            listen::notify(tx, origin, &std::mem::take(&mut self.changes))?;
        }
        let touched: Vec<String> = std::mem::take(&mut self.touched).into_iter().collect();
        if !touched.is_empty() {
            tx.execute(versions, &[&touched])?;
        }
        Ok(())
    }
}

/// Sets the versions of the periodics `$1` (in name order).
const SET_VERSIONS: &str = "INSERT INTO periodic_versions(periodic, version)
    SELECT p, nextval('periodic_changes') FROM unnest($1::text[]) AS p ORDER BY p
    ON CONFLICT (periodic) DO UPDATE SET version = EXCLUDED.version";

/// The statement that creates a batch of runs: in one round trip, the
/// fence's check (`$1`-`$3`, none: NULLs; the lease's row held shared until
/// the transaction ends), the specs not known stored (`$4`, `$5`), the
/// runs' rows (`unnest` of their columns, `$6`-`$21`; their build ids follow
/// their order; a tick's run already made is left alone), their pulls
/// (`$22`-`$25`, by run id), and the notification of the runs made, as
/// from `$26` (150 a notification: a run
/// is 39 bytes of the payload, PostgreSQL takes 8,000). One row: whether
/// the fence holds (1) or not (0), the notifications sent, and the ids,
/// seqs and build ids of the runs made. `$more` adds clauses after the
/// notification's.
///
/// Its parts are data-modifying `WITH` clauses of one statement: they see
/// one snapshot, and each writes only when the fence holds (`gate`), so a
/// fenced statement writes nothing, in a transaction or on its own.
macro_rules! create_runs {
    ($more:literal) => {
        concat!(
            "WITH fence AS (
    SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > now() FOR SHARE
), gate AS (
    SELECT $1::text IS NULL OR EXISTS (SELECT 1 FROM fence) AS open
), spec AS (
    INSERT INTO specs(hash, body) SELECT * FROM unnest($4::text[], $5::text[])
    WHERE (SELECT open FROM gate)
    ON CONFLICT (hash) DO NOTHING
), ins AS (
    INSERT INTO runs(id, build_id, job, job_type, periodic, configured_cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, state, description, refs_repo)
    SELECT u.id, nextval('build_ids'), u.job, u.job_type, u.periodic, u.cluster, u.refs, u.extra, u.labels, u.annotations, u.hash, u.scheduled, u.attempt, 0, u.created, u.state, u.description, u.repo
    FROM unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::bigint[], $17::bigint[], $18::bigint[], $19::text[], $20::text[], $21::text[])
        WITH ORDINALITY AS u(id, job, job_type, periodic, cluster, refs, extra, labels, annotations, hash, scheduled, attempt, created, state, description, repo, ord)
    WHERE (SELECT open FROM gate)
    ORDER BY u.ord
    ON CONFLICT (periodic, scheduled_at, attempt) WHERE periodic IS NOT NULL AND scheduled_at IS NOT NULL DO NOTHING
    RETURNING id, seq, build_id, periodic
), pulls AS (
    INSERT INTO run_pulls(seq, repo, number, sha)
    SELECT ins.seq, p.repo, p.number, p.sha
    FROM unnest($22::text[], $23::text[], $24::bigint[], $25::text[]) AS p(id, repo, number, sha)
    JOIN ins ON ins.id = p.id
    ON CONFLICT DO NOTHING
), notes AS (
    SELECT pg_notify('bosun_runs', $26 || string_agg(' ' || id || ':-', ''))
    FROM (SELECT id, (row_number() OVER () - 1) / 150 AS page FROM ins) AS r
    GROUP BY page
)",
            $more,
            "
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM notes),
    coalesce(array_agg(id), '{}'), coalesce(array_agg(seq), '{}'), coalesce(array_agg(build_id), '{}')
FROM ins"
        )
    };
}

/// [`create_runs!`] in a transaction: the caller sets the periodics'
/// versions last ([`SET_VERSIONS`], after any report key it locks).
const CREATE_RUNS: &str = create_runs!("");

/// [`create_runs!`] as a transaction of its own, for a batch with no
/// reports to queue: it also sets the versions of the made runs'
/// periodics (in name order, as [`SET_VERSIONS`] does). One round trip for
/// what takes four in a transaction (`BEGIN`, the runs, the versions,
/// `COMMIT`).
const CREATE_RUNS_ALONE: &str = create_runs!(
    ", versions AS (
    INSERT INTO periodic_versions(periodic, version)
    SELECT p, nextval('periodic_changes') FROM (SELECT DISTINCT periodic AS p FROM ins WHERE periodic IS NOT NULL) AS t ORDER BY p
    ON CONFLICT (periodic) DO UPDATE SET version = EXCLUDED.version
)"
);

/// How [`create_many_in`] runs: the statement ([`CREATE_RUNS`], prepared
/// or not), the fence it checks (none: checked already, or no fence), and
/// the notifications' origin.
pub(crate) struct CreateWith<'a, S: ?Sized> {
    statement: &'a S,
    fence: Option<&'a Fence>,
    origin: &'a str,
}

/// Creates runs in `tx` (or finds their ticks' runs), queueing the policy's
/// reports of the new ones, with one statement ([`CREATE_RUNS`]) for the
/// fence's check, the specs, the runs, their pulls and the notification:
/// one round trip for the batch. Their build ids follow their order. A
/// fence that no longer holds fails the transaction
/// ([`StoreError::Fenced`]); the caller rolls it back.
fn create_many_in<S: ?Sized + postgres::ToStatement>(
    tx: &mut impl GenericClient,
    with: &CreateWith<'_, S>,
    specs: &Mutex<HashSet<String>>,
    policy: Option<&dyn ReportPolicy>,
    batch: Vec<(NewRun, Timestamp)>,
    w: &mut Written,
) -> Result<Vec<Created>, Fail> {
    let columns = Columns::of(batch, specs, w);
    let fence = FenceParams::of(with.fence);
    let row = tx.query_one(with.statement, &columns.params(&fence, &with.origin))?;
    columns.made(Some(tx), &row, with.fence, policy, w)
}

/// A fence as [`create_runs!`]'s first parameters: its lease's name, its
/// holder and its term (none: NULLs).
struct FenceParams<'a>(Option<&'a String>, Option<&'a String>, Option<i64>);

impl<'a> FenceParams<'a> {
    fn of(fence: Option<&'a Fence>) -> FenceParams<'a> {
        FenceParams(
            fence.map(|f| &f.name),
            fence.map(|f| &f.holder),
            fence.map(|f| f.term),
        )
    }
}

/// A batch of creations as [`create_runs!`]'s parameters: a column each,
/// and the runs with their new ids.
struct Columns {
    news: Vec<(NewRun, Timestamp, String)>,
    spec_hashes: Vec<String>,
    spec_bodies: Vec<String>,
    ids: Vec<String>,
    jobs: Vec<String>,
    types: Vec<String>,
    periodics: Vec<Option<String>>,
    clusters: Vec<String>,
    refs: Vec<Option<String>>,
    extras: Vec<String>,
    labels: Vec<String>,
    annotations: Vec<String>,
    hashes: Vec<String>,
    scheduled: Vec<Option<i64>>,
    attempts: Vec<i64>,
    created: Vec<i64>,
    states: Vec<String>,
    descriptions: Vec<String>,
    repos: Vec<Option<String>>,
    pull_ids: Vec<String>,
    pull_repos: Vec<String>,
    pull_numbers: Vec<i64>,
    pull_shas: Vec<String>,
}

impl Columns {
    /// The columns of `batch`, each run with a new id; the specs not known
    /// stored (`specs`, or earlier in `w`'s transaction) go in `w.fresh`.
    fn of(
        batch: Vec<(NewRun, Timestamp)>,
        specs: &Mutex<HashSet<String>>,
        w: &mut Written,
    ) -> Columns {
        let mut news = Vec::with_capacity(batch.len());
        let (mut spec_hashes, mut spec_bodies) = (Vec::new(), Vec::new());
        {
            let known = specs.lock().unwrap_or_else(|e| e.into_inner());
            for (mut new, at) in batch {
                new.scheduled_at = new.scheduled_at.map(bosun_store::run::micros);
                let hash = new.spec.hash();
                if !known.contains(hash) && !w.fresh.iter().any(|h| h == hash) {
                    spec_hashes.push(hash.to_string());
                    spec_bodies.push(new.spec.json().to_string());
                    w.fresh.push(hash.to_string());
                }
                news.push((new, bosun_store::run::micros(at), new_run_id()));
            }
        }
        let col = |f: &dyn Fn(&(NewRun, Timestamp, String)) -> String| -> Vec<String> {
            news.iter().map(f).collect()
        };
        let repos: Vec<Option<String>> = news.iter().map(|(n, _, _)| refs_repo(n)).collect();
        let (mut pull_ids, mut pull_repos, mut pull_numbers, mut pull_shas) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((new, _, id), repo) in news.iter().zip(&repos) {
            if let (Some(repo), Some(refs)) = (repo, &new.refs) {
                for p in &refs.pulls {
                    pull_ids.push(id.clone());
                    pull_repos.push(repo.clone());
                    pull_numbers.push(p.number);
                    pull_shas.push(p.sha.clone());
                }
            }
        }
        Columns {
            spec_hashes,
            spec_bodies,
            ids: col(&|(_, _, id)| id.clone()),
            jobs: col(&|(n, _, _)| n.job.clone()),
            types: col(&|(n, _, _)| n.job_type.as_str().to_string()),
            periodics: news.iter().map(|(n, _, _)| n.periodic.clone()).collect(),
            clusters: col(&|(n, _, _)| n.configured_cluster.clone()),
            refs: news
                .iter()
                .map(|(n, _, _)| n.refs.as_ref().map(to_json))
                .collect(),
            extras: col(&|(n, _, _)| to_json(&n.extra_refs)),
            labels: col(&|(n, _, _)| to_json(&n.labels)),
            annotations: col(&|(n, _, _)| to_json(&n.annotations)),
            hashes: col(&|(n, _, _)| n.spec.hash().to_string()),
            scheduled: news
                .iter()
                .map(|(n, _, _)| n.scheduled_at.map(micros))
                .collect(),
            attempts: news.iter().map(|(n, _, _)| i64::from(n.attempt)).collect(),
            created: news.iter().map(|(_, at, _)| micros(*at)).collect(),
            states: col(&|(n, _, _)| n.state.as_str().to_string()),
            descriptions: col(&|(n, _, _)| n.description.clone()),
            repos,
            pull_ids,
            pull_repos,
            pull_numbers,
            pull_shas,
            news,
        }
    }

    /// [`create_runs!`]'s parameters, checking `fence`, notifying as from
    /// `origin`.
    fn params<'a>(
        &'a self,
        fence: &'a FenceParams<'a>,
        origin: &'a &'a str,
    ) -> [&'a (dyn ToSql + Sync); 26] {
        [
            &fence.0,
            &fence.1,
            &fence.2,
            &self.spec_hashes,
            &self.spec_bodies,
            &self.ids,
            &self.jobs,
            &self.types,
            &self.periodics,
            &self.clusters,
            &self.refs,
            &self.extras,
            &self.labels,
            &self.annotations,
            &self.hashes,
            &self.scheduled,
            &self.attempts,
            &self.created,
            &self.states,
            &self.descriptions,
            &self.repos,
            &self.pull_ids,
            &self.pull_repos,
            &self.pull_numbers,
            &self.pull_shas,
            origin,
        ]
    }

    /// Whether the statement's answer `row` says every run was made (no
    /// tick's run was there already).
    fn all_made(&self, row: &postgres::Row) -> bool {
        row.get::<_, Vec<String>>(2).len() == self.news.len()
    }

    /// The runs the statement's answer `row` says were made, and for the
    /// others their ticks' runs (read with `tx`: there is one whenever
    /// some were not made); the policy's reports of the new ones queued
    /// with `tx`. A `fence` the statement found over fails the batch
    /// (nothing was written).
    fn made<C: GenericClient>(
        self,
        mut tx: Option<&mut C>,
        row: &postgres::Row,
        fence: Option<&Fence>,
        policy: Option<&dyn ReportPolicy>,
        w: &mut Written,
    ) -> Result<Vec<Created>, Fail> {
        if let Some(fence) = fence {
            if row.get::<_, i64>(0) == 0 {
                return Err(fenced(fence).into());
            }
        }
        let made: HashMap<String, (i64, i64)> = {
            let (ids, seqs, builds): (Vec<String>, Vec<i64>, Vec<i64>) =
                (row.get(2), row.get(3), row.get(4));
            ids.into_iter().zip(seqs.into_iter().zip(builds)).collect()
        };
        let mut out = Vec::with_capacity(self.news.len());
        for (new, at, id) in self.news {
            let Some(&(_seq, build_id)) = made.get(&id) else {
                // A tick's run made beside this transaction (or earlier in it).
                let (p, s) = (
                    new.periodic.as_deref().unwrap_or_default(),
                    new.scheduled_at.map(micros).unwrap_or_default(),
                );
                let tx = tx.as_deref_mut().ok_or_else(|| {
                    StoreError::Unavailable("no connection to find a tick's run".into())
                })?;
                out.push(match tick_run(tx, p, s, new.attempt)? {
                    Some(run) => Created::Existing(std::sync::Arc::new(run)),
                    None => {
                        return Err(StoreError::Unavailable(format!(
                            "the run of {p} at {s} was neither created nor found"
                        ))
                        .into())
                    }
                });
                continue;
            };
            if let Some(p) = &new.periodic {
                // Its version is set last, after the report keys are locked,
                // as every transaction does.
                w.touched.insert(p.clone());
            }
            let hash = new.spec.hash().to_string();
            let run = new.into_run(id, build_id, hash, at);
            if let Some(policy) = policy {
                let tx = tx.as_deref_mut().ok_or_else(|| {
                    StoreError::Unavailable("no transaction to queue reports in".into())
                })?;
                queue_reports(tx, policy_reports(policy, &run, None))?;
            }
            out.push(Created::New(std::sync::Arc::new(run)));
        }
        Ok(out)
    }
}

/// The failure of a write under `fence` once its term is over.
fn fenced(fence: &Fence) -> StoreError {
    StoreError::Fenced(format!(
        "the lease {} of term {} held by {} is over",
        fence.name, fence.term, fence.holder
    ))
}

/// Queues `entries` in `tx`, by [`Store::enqueue_reports`]'s rules.
fn queue_reports(
    tx: &mut impl GenericClient,
    entries: Vec<NewReport>,
) -> Result<Vec<Enqueued>, Fail> {
    entries.into_iter().map(|r| enqueue_one(tx, r)).collect()
}

/// Queues one report: its key's row locked first (made if it has none).
fn enqueue_one(tx: &mut impl GenericClient, r: NewReport) -> Result<Enqueued, Fail> {
    let created_at = micros(bosun_store::run::micros(r.created_at));
    let version = r.version as i64;
    let key = tx.query_opt(
        "SELECT newest, pending FROM report_keys WHERE key = $1 FOR UPDATE",
        &[&r.key],
    )?;
    let pending: Option<i64> = match key {
        Some(row) => {
            let newest: i64 = row.get(0);
            if version <= newest {
                return Ok(Enqueued::Stale {
                    newest: newest as u64,
                });
            }
            row.get(1)
        }
        None => {
            let made = tx.execute(
                "INSERT INTO report_keys(key, newest, pending) VALUES ($1, $2, NULL) ON CONFLICT (key) DO NOTHING",
                &[&r.key, &version],
            )?;
            if made == 0 {
                // Made beside this transaction: decide on it, locked.
                return enqueue_one(tx, r);
            }
            None
        }
    };
    if let Some(old) = pending {
        tx.execute(
            "UPDATE reports SET state = 'superseded', finished_at = $2, superseded_by = $3 WHERE id = $1 AND state = 'pending'",
            &[&old, &created_at, &version],
        )?;
    }
    let id: i64 = tx
        .query_one(
            "INSERT INTO reports(key, kind, run_id, version, payload, created_at, next_attempt_at, state)
             VALUES ($1, $2, $3, $4, $5, $6, $6, 'pending') RETURNING id",
            &[
                &r.key,
                &r.kind.as_str(),
                &r.run_id,
                &version,
                &to_json(&r.payload),
                &created_at,
            ],
        )?
        .get(0);
    tx.execute(
        "UPDATE report_keys SET newest = $2, pending = $3 WHERE key = $1",
        &[&r.key, &version, &id],
    )?;
    Ok(Enqueued::Queued {
        id: id as u64,
        superseded: pending.map(|p| p as u64),
    })
}

/// Commits one evaluation of a periodic in `tx`: its runs, its outcomes
/// (with their runs' ids) and its schedule state.
fn fire_in(
    tx: Tx<'_, '_>,
    specs: &Mutex<HashSet<String>>,
    policy: Option<&dyn ReportPolicy>,
    fire: Fire,
    at: Timestamp,
    origin: &str,
    w: &mut Written,
) -> Result<Vec<Created>, Fail> {
    let with = CreateWith {
        statement: CREATE_RUNS,
        fence: None,
        origin,
    };
    let created = create_many_in(
        tx,
        &with,
        specs,
        policy,
        fire.runs.into_iter().map(|r| (r, at)).collect(),
        w,
    )?;
    let mut outcomes = fire.outcomes;
    for o in &mut outcomes {
        o.fill_run_id(&created);
        w.touched.insert(o.periodic.clone());
    }
    put_outcomes(tx, &outcomes)?;
    put_state(tx, &fire.state)?;
    w.touched.insert(fire.state.periodic.clone());
    Ok(created)
}

/// Records outcomes in `tx`.
fn put_outcomes(tx: Tx<'_, '_>, outcomes: &[TickOutcome]) -> Result<(), Fail> {
    for o in outcomes {
        tx.execute(
            &format!(
                "INSERT INTO tick_outcomes({OUTCOME_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &o.periodic,
                &micros(o.first_tick),
                &micros(o.last_tick),
                &(o.count as i64),
                &o.outcome,
                &o.run_id,
                &micros(o.recorded_at),
            ],
        )?;
    }
    Ok(())
}

/// Writes a periodic's schedule state in `tx`.
fn put_state(tx: Tx<'_, '_>, s: &PeriodicState) -> Result<(), Fail> {
    tx.execute(
        "INSERT INTO periodic_state(periodic, schedule_hash, first_seen, last_tick, paused, queued)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (periodic) DO UPDATE SET schedule_hash = $2, first_seen = $3, last_tick = $4, paused = $5, queued = $6",
        &[
            &s.periodic,
            &s.schedule_hash,
            &micros(s.first_seen),
            &s.last_tick.map(micros),
            &s.paused,
            &s.queued.map(micros),
        ],
    )?;
    Ok(())
}

/// The creator thread's view of the store.
/// A webhook delivery waiting for the acceptor thread, with where its
/// answer goes.
struct Acceptance {
    new: NewDelivery,
    done: mpsc::Sender<Result<Accepted, StoreError>>,
}

/// At most this many deliveries are accepted in one transaction.
const ACCEPT_BATCH: usize = 256;

/// The thread that accepts webhook deliveries: every delivery waiting is
/// stored in one transaction, under one lock of the seq row and one
/// commit. Accepting each in a transaction of its own serialized them on
/// that row's lock, each waiting out its own commit's flush while holding
/// it (737 deliveries a second on a durable server, where the deliveries
/// of 16 clients now share a flush).
struct Acceptor {
    pool: Pool,
    fence: SharedFence,
}

impl Acceptor {
    fn run(&self, rx: &mpsc::Receiver<Acceptance>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < ACCEPT_BATCH {
                match rx.try_recv() {
                    Ok(a) => batch.push(a),
                    Err(_) => break,
                }
            }
            self.commit(batch);
        }
    }

    fn commit(&self, batch: Vec<Acceptance>) {
        let news: Vec<&NewDelivery> = batch.iter().map(|a| &a.new).collect();
        match in_transaction_here(&self.pool, &self.fence, |tx| {
            Ok(deliveries::accept_batch(tx, &news)?)
        }) {
            Ok(answers) => {
                for (a, answer) in batch.into_iter().zip(answers) {
                    let _ = a.done.send(Ok(answer));
                }
            }
            // One bad delivery (a NUL in a text field, say) fails alone:
            // each on its own. The store being out of reach fails them all.
            Err(e) if batch.len() > 1 && deliveries::bad_data(&e) => {
                for a in batch {
                    self.commit(vec![a]);
                }
            }
            // What the database will never keep is bad input, not an
            // outage: the sender is told so, not to try again.
            Err(e) if deliveries::bad_data(&e) => {
                for a in batch {
                    let _ = a.done.send(Err(StoreError::Invalid(format!(
                        "delivery {}: the database refuses it: {e}",
                        a.new.delivery_id
                    ))));
                }
            }
            Err(e) => {
                for a in batch {
                    let _ = a.done.send(Err(deliveries::same_error(&e)));
                }
            }
        }
    }
}

struct Creator {
    pool: Pool,
    observer: Option<Arc<dyn TransitionObserver>>,
    policy: Arc<OnceLock<Arc<dyn ReportPolicy>>>,
    specs: Arc<Mutex<HashSet<String>>>,
    fence: SharedFence,
    origin: Arc<str>,
}

/// The creator's connection, kept from batch to batch with
/// [`CREATE_RUNS`] prepared on it: bound and executed, a prepared statement
/// is one round trip, and the server neither parses nor plans it again (a
/// statement given as text costs a round trip more to prepare, and the
/// server's parse and plan, every time).
struct Held {
    conn: r2d2::PooledConnection<PostgresConnectionManager<tls::Connector>>,
    create: postgres::Statement,
    /// [`SET_VERSIONS`].
    versions: postgres::Statement,
}

/// The creator's pipelined connection: tokio-postgres on the creator's
/// thread, driven by a runtime of its own. A batch with no report to queue
/// goes out as `BEGIN`, [`CREATE_RUNS_ALONE`] and `COMMIT` at once: one
/// round trip where the pooled (synchronous) connection takes four, with
/// every answer read to its end. (The statement alone would be one round
/// trip too, but its implicit commit can fail after its results came back,
/// when the server ends the session at that instant, and the client would
/// not hear of it: runs answered as made, and lost.)
struct Pipe {
    config: tokio_postgres::Config,
    tls: tls::Connector,
    rt: tokio::runtime::Runtime,
    /// The connection and [`CREATE_RUNS_ALONE`] prepared on it (none:
    /// connected at the next batch).
    conn: Option<(tokio_postgres::Client, tokio_postgres::Statement)>,
}

/// How a pipelined transaction ended.
enum Piped {
    /// Committed: the statement's answer.
    Committed(tokio_postgres::Row),
    /// Nothing of it ran: the server had ended the session (its first
    /// answer, `BEGIN`'s, says so). A connection already seen closed is
    /// replaced before anything is sent.
    Unsent(postgres::Error),
    /// The statement failed: the transaction was rolled back.
    Failed(postgres::Error),
    /// The commit's answer never came: committed or not, unknown.
    Unknown(postgres::Error),
}

impl Pipe {
    fn new(config: tokio_postgres::Config, tls: tls::Connector) -> Result<Pipe, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Unavailable(format!("the creator's runtime: {e}")))?;
        let mut pipe = Pipe {
            config,
            tls,
            rt,
            conn: None,
        };
        // Connected at once: the first batch waits for no handshake.
        pipe.connect()?;
        Ok(pipe)
    }

    /// Connects, and prepares [`CREATE_RUNS_ALONE`].
    fn connect(&mut self) -> Result<(), StoreError> {
        let (config, tls) = (&self.config, self.tls.clone());
        let made = self.rt.block_on(async {
            let (client, connection) = config.connect(tls).await?;
            tokio::spawn(connection);
            let statement = client.prepare(CREATE_RUNS_ALONE).await?;
            Ok::<_, postgres::Error>((client, statement))
        });
        self.conn = Some(made.map_err(unavailable)?);
        Ok(())
    }

    /// Runs [`CREATE_RUNS_ALONE`] with `params` in a transaction of its
    /// own, its three statements sent together; connects first when there
    /// is no connection (an error: none could be made).
    fn transaction(&mut self, params: &[&(dyn ToSql + Sync)]) -> Result<Piped, StoreError> {
        // The connection's task runs only while this thread waits on it:
        // it is let read what came while it idled first. A session the
        // server ended meanwhile (its notice, its socket's end) is seen
        // closed then, before anything of this batch is sent, and replaced.
        self.rt.block_on(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
        if self.conn.as_ref().is_some_and(|(c, _)| c.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.connect()?;
        }
        let (client, statement) = self.conn.as_ref().expect("connected");
        let (begin, row, commit) = self.rt.block_on(async {
            tokio::join!(
                client.batch_execute("BEGIN"),
                client.query_one(statement, params),
                client.batch_execute("COMMIT"),
            )
        });
        let piped = match (begin, row, commit) {
            (_, Ok(row), Ok(())) => Piped::Committed(row),
            (_, Ok(_), Err(e)) => Piped::Unknown(e),
            (Err(e), Err(_), _) if ended_session(&e) => Piped::Unsent(e),
            (Ok(()), Err(e), _) if e.as_db_error().is_some() => Piped::Failed(e),
            (_, Err(e), _) => Piped::Unknown(e),
        };
        if !matches!(piped, Piped::Committed(_) | Piped::Failed(_)) {
            self.conn = None;
        }
        Ok(piped)
    }
}

impl Creator {
    /// Takes the creations waiting and commits them together, until the
    /// store is dropped.
    fn run(&self, rx: &Mutex<mpsc::Receiver<Creation>>, mut pipe: Pipe) {
        let mut held = None;
        loop {
            let batch = {
                let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
                let Ok(first) = rx.recv() else {
                    return;
                };
                let mut batch = vec![first];
                while batch.len() < CREATE_BATCH {
                    match rx.try_recv() {
                        Ok(c) => batch.push(c),
                        Err(_) => break,
                    }
                }
                batch
            };
            self.commit(&mut held, &mut pipe, batch);
        }
    }

    fn commit(&self, held: &mut Option<Held>, pipe: &mut Pipe, batch: Vec<Creation>) {
        let policy = self.policy.get().map(|p| p.as_ref());
        // With no report to queue, the batch goes out pipelined.
        let quiet = policy.is_none_or(|p| !batch.iter().any(|c| p.may_report_creation(&c.new)));
        let together = if quiet {
            self.create_pipelined(pipe, &batch)
        } else {
            self.create(held, policy, &batch)
        };
        match together {
            Ok((created, fresh)) => {
                self.specs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(fresh);
                observe_created(self.observer.as_deref(), &created);
                for (c, r) in batch.into_iter().zip(created) {
                    (c.done)(Ok(r));
                }
            }
            Err(_) if batch.len() > 1 => {
                // One bad run fails alone: each on its own.
                for c in batch {
                    self.commit(held, pipe, vec![c]);
                }
            }
            Err(e) => {
                // A batch of one.
                if let Some(c) = batch.into_iter().next() {
                    (c.done)(Err(e));
                }
            }
        }
    }

    /// Commits `batch`, with no report to queue, on the pipelined
    /// connection ([`Pipe`]): tried again on a conflict, and on another
    /// connection when the server had ended this one before it ran anything
    /// of the batch's. The runs, and the spec hashes it stored.
    fn create_pipelined(
        &self,
        pipe: &mut Pipe,
        batch: &[Creation],
    ) -> Result<(Vec<Created>, Vec<String>), StoreError> {
        let (mut tries, mut reconnects) = (0, 0);
        loop {
            tries += 1;
            let fence = self.fence.read().unwrap_or_else(|e| e.into_inner()).clone();
            let mut w = Written::default();
            let columns = Columns::of(
                batch.iter().map(|c| (c.new.clone(), c.at)).collect(),
                &self.specs,
                &mut w,
            );
            let params = FenceParams::of(fence.as_ref());
            let origin: &str = &self.origin;
            let answer = pipe.transaction(&columns.params(&params, &origin))?;
            match answer {
                Piped::Committed(row) => {
                    // The ticks' runs made beside it, if any, are read
                    // after: they were committed before it.
                    let mut c = match columns.all_made(&row) {
                        true => None,
                        false => Some(self.pool.get().map_err(no_connection)?),
                    };
                    let created =
                        columns.made(c.as_deref_mut(), &row, fence.as_ref(), None, &mut w)?;
                    return Ok((created, w.fresh));
                }
                Piped::Unsent(e) if reconnects < RECONNECTS => {
                    reconnects += 1;
                    tracing::debug!(error = %describe(&e), "an ended connection; trying another");
                }
                Piped::Failed(e) if is_conflict(&e) && tries < CONFLICT_TRIES => {
                    tracing::debug!(error = %describe(&e), "a store transaction is tried again");
                }
                Piped::Unsent(e) | Piped::Failed(e) | Piped::Unknown(e) => {
                    return Err(unavailable(e))
                }
            }
        }
    }

    /// Commits `batch` in one transaction on the held connection (taken
    /// from the pool, and the statement prepared, when there is none), as
    /// [`in_transaction_here`] does: tried again on a conflict, and on
    /// another connection when the server ended this one before the
    /// commit. The fence is checked by the creation's statement itself.
    /// The runs, and the spec hashes it stored.
    fn create(
        &self,
        held: &mut Option<Held>,
        policy: Option<&dyn ReportPolicy>,
        batch: &[Creation],
    ) -> Result<(Vec<Created>, Vec<String>), StoreError> {
        let (mut tries, mut reconnects) = (0, 0);
        loop {
            tries += 1;
            let h = match held {
                Some(h) => h,
                None => {
                    let mut conn = self.pool.get().map_err(no_connection)?;
                    let prepared = conn
                        .prepare(CREATE_RUNS)
                        .and_then(|c| Ok((c, conn.prepare(SET_VERSIONS)?)));
                    let (create, versions) = match prepared {
                        Ok(s) => s,
                        Err(e)
                            if conn.is_closed() && reconnects < pooled_reconnects(&self.pool) =>
                        {
                            reconnects += 1;
                            tracing::debug!(error = %describe(&e), "a closed connection; trying another");
                            continue;
                        }
                        Err(e) => return Err(unavailable(e)),
                    };
                    held.insert(Held {
                        conn,
                        create,
                        versions,
                    })
                }
            };
            let fence = self.fence.read().unwrap_or_else(|e| e.into_inner()).clone();
            let mut w = Written::default();
            let mut committing = false;
            let attempt = (|| -> Result<Vec<Created>, Fail> {
                let with = CreateWith {
                    statement: &h.create,
                    fence: fence.as_ref(),
                    origin: &self.origin,
                };
                let mut tx = h.conn.transaction()?;
                let created = create_many_in(
                    &mut tx,
                    &with,
                    &self.specs,
                    policy,
                    batch.iter().map(|c| (c.new.clone(), c.at)).collect(),
                    &mut w,
                )?;
                w.finish_with(&mut tx, &self.origin, &h.versions)?;
                committing = true;
                tx.commit()?;
                Ok(created)
            })();
            match attempt {
                Ok(created) => return Ok((created, w.fresh)),
                Err(Fail::Db(e)) if is_conflict(&e) && tries < CONFLICT_TRIES => {
                    tracing::debug!(error = %describe(&e), "a store transaction is tried again");
                }
                Err(Fail::Db(e))
                    if !committing
                        && h.conn.is_closed()
                        && reconnects < pooled_reconnects(&self.pool) =>
                {
                    reconnects += 1;
                    tracing::debug!(error = %describe(&e), "a closed connection; trying another");
                    *held = None;
                }
                Err(Fail::Db(e)) => {
                    if h.conn.is_closed() {
                        *held = None;
                    }
                    return Err(unavailable(e));
                }
                Err(Fail::Store(e)) => return Err(e),
            }
        }
    }
}

impl Store for PgStore {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        let (tx, rx) = mpsc::channel();
        self.create_run_then(
            new,
            at,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv()
            .unwrap_or_else(|_| Err(StoreError::Unavailable("the creator thread is gone".into())))
    }

    fn create_run_then(&self, new: NewRun, at: Timestamp, done: CreateDone) {
        let sent = self
            .creator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Creation { new, at, done });
        if let Err(mpsc::SendError(c)) = sent {
            (c.done)(Err(StoreError::Unavailable(
                "the creator thread is gone".into(),
            )));
        }
    }

    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError> {
        let policy = self.policy();
        let (run, from, cluster) = self.write(|tx| {
            let row = tx.query_opt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1 FOR UPDATE"),
                &[&id],
            )?;
            let Some(row) = row else {
                return Err(StoreError::NotFound(id.to_string()).into());
            };
            let mut run = rows::run(&row)?;
            let from = run.state;
            let cluster = t.cluster.as_ref().and(run.cluster.clone());
            apply(&mut run, &t)?;
            tx.execute(
                "UPDATE runs SET state = $2, description = $3, cluster = $4, url = $5, pending_at = $6, completed_at = $7, pod_revival_count = $8 WHERE id = $1",
                &[
                    &run.id,
                    &run.state.as_str(),
                    &run.description,
                    &run.cluster,
                    &run.url,
                    &run.pending_at.map(micros),
                    &run.completed_at.map(micros),
                    &i64::from(run.pod_revival_count),
                ],
            )?;
            if let Some(policy) = policy {
                queue_reports(tx, policy_reports(policy, &run, Some(from)))?;
            }
            if run.state.is_final() {
                tx.execute("DELETE FROM abort_requests WHERE run_id = $1", &[&run.id])?;
            }
            let mut w = Written::default();
            if let Some(p) = &run.periodic {
                w.touched.insert(p.clone());
            }
            w.changes.push((run.id.clone(), Some(from)));
            w.finish(tx, &self.origin)?;
            Ok((run, from, cluster))
        })?;
        if let Some(o) = &self.observer {
            let cluster = match t.cluster {
                Some(_) => cluster.as_deref(),
                None => run.cluster.as_deref(),
            };
            o.on_change(
                &run,
                None,
                Some(Before {
                    state: from,
                    cluster,
                }),
            );
        }
        Ok(run)
    }

    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        self.read(|c| {
            let row = c.query_opt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
                &[&id],
            )?;
            Ok(row.as_ref().map(rows::run).transpose()?)
        })
    }

    fn list(&self, f: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let (sql, args) = list_query(f);
        let params: Vec<Param<'_>> = args.iter().map(|a| a.as_ref() as Param<'_>).collect();
        let page = |tx: Tx<'_, '_>| -> Result<Vec<Run>, Fail> {
            let found = tx.query(&sql, &params)?;
            let mut runs = found.iter().map(rows::run).collect::<Result<Vec<_>, _>>()?;
            if runs.is_empty() {
                for id in [&f.after, &f.before].into_iter().flatten() {
                    if tx
                        .query_opt("SELECT 1 FROM runs WHERE id = $1", &[id])?
                        .is_none()
                    {
                        return Err(StoreError::NotFound(id.clone()).into());
                    }
                }
            }
            if f.counted_back() {
                runs.reverse();
            }
            Ok(runs)
        };
        if f.after.is_some() || f.before.is_some() {
            self.read_snapshot(page)
        } else {
            self.read(|c| {
                let mut tx = c.transaction()?;
                let v = page(&mut tx)?;
                tx.commit()?;
                Ok(v)
            })
        }
    }

    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let body: Option<String> = self.read(|c| {
            Ok(
                c.query_opt("SELECT body FROM specs WHERE hash = $1", &[&hash])?
                    .map(|r| r.get(0)),
            )
        })?;
        body.map(|b| serde_json::from_str(&b).map_err(|e| StoreError::Invalid(e.to_string())))
            .transpose()
    }

    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        self.read(|c| {
            let row = c.query_opt(
                "SELECT periodic, schedule_hash, first_seen, last_tick, paused, queued FROM periodic_state WHERE periodic = $1",
                &[&periodic],
            )?;
            Ok(row.as_ref().map(rows::state).transpose()?)
        })
    }

    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        self.write(|tx| {
            put_state(tx, state)?;
            let mut w = Written::default();
            w.touched.insert(state.periodic.clone());
            w.finish(tx, &self.origin)
        })
    }

    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        self.write(|tx| {
            put_outcomes(tx, outcomes)?;
            let mut w = Written::default();
            w.touched
                .extend(outcomes.iter().map(|o| o.periodic.clone()));
            w.finish(tx, &self.origin)
        })
    }

    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError> {
        self.read(|c| {
            let found = c.query(
                &format!("SELECT {OUTCOME_COLUMNS} FROM tick_outcomes WHERE periodic = $1 ORDER BY first_tick, id"),
                &[&periodic],
            )?;
            Ok(found.iter().map(rows::outcome).collect::<Result<_, _>>()?)
        })
    }

    fn skipped_ticks(&self, periodic: &str, limit: usize) -> Result<SkippedTicks, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read_snapshot(|tx| {
            let found = tx.query(
                &format!("SELECT {OUTCOME_COLUMNS} FROM tick_outcomes WHERE periodic = $1 AND outcome <> 'run' ORDER BY first_tick DESC, id DESC LIMIT $2"),
                &[&periodic, &limit],
            )?;
            let recent = found.iter().map(rows::outcome).collect::<Result<_, _>>()?;
            let total: i64 = tx
                .query_one(
                    "SELECT COALESCE(SUM(count), 0)::BIGINT FROM tick_outcomes WHERE periodic = $1 AND outcome <> 'run'",
                    &[&periodic],
                )?
                .get(0);
            Ok(SkippedTicks {
                recent,
                total: total as u64,
            })
        })
    }

    fn count_runs(&self) -> Result<Vec<RunCount>, StoreError> {
        self.read(|c| {
            let found = c.query(
                "SELECT job, job_type, state,
                    CASE WHEN refs IS NOT NULL THEN COALESCE(refs::jsonb->>'org', '') ELSE COALESCE(extra_refs::jsonb->0->>'org', '') END,
                    CASE WHEN refs IS NOT NULL THEN COALESCE(refs::jsonb->>'repo', '') ELSE COALESCE(extra_refs::jsonb->0->>'repo', '') END,
                    COALESCE(CASE WHEN refs IS NOT NULL THEN refs::jsonb->>'base_ref' ELSE extra_refs::jsonb->0->>'base_ref' END, ''),
                    COALESCE(cluster, configured_cluster),
                    COALESCE(labels::jsonb->>'prow.k8s.io/retest', '') = 'true',
                    COUNT(*)
                 FROM runs GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
                &[],
            )?;
            Ok(found
                .iter()
                .map(|r| RunCount {
                    job: r.get(0),
                    job_type: r.get(1),
                    state: r.get(2),
                    org: r.get(3),
                    repo: r.get(4),
                    base_ref: r.get(5),
                    cluster: r.get(6),
                    retest: r.get(7),
                    count: r.get::<_, i64>(8) as u64,
                })
                .collect())
        })
    }

    fn job_demand(&self, since: Timestamp, now: Timestamp) -> Result<Vec<JobDemand>, StoreError> {
        self.read(|c| {
            let found = c.query(
                "SELECT job, COUNT(*), SUM(GREATEST(0, COALESCE(completed_at, $2) - pending_at))::BIGINT
                 FROM runs WHERE pending_at >= $1 GROUP BY job ORDER BY job",
                &[&micros(since), &micros(now)],
            )?;
            Ok(found
                .iter()
                .map(|r| JobDemand {
                    job: r.get(0),
                    runs: r.get::<_, i64>(1) as u64,
                    run_seconds: r.get::<_, i64>(2) as f64 / 1e6,
                })
                .collect())
        })
    }

    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        let policy = self.policy();
        let mut w = Written::default();
        let created = self.write(|tx| {
            w = Written::default();
            let created = fire_in(
                tx,
                &self.specs,
                policy,
                fire.clone(),
                at,
                &self.origin,
                &mut w,
            )?;
            w.finish(tx, &self.origin)?;
            Ok(created)
        })?;
        self.known_specs(w.fresh);
        self.observe_created(&created);
        Ok(created)
    }

    fn periodic_versions(&self, periodics: &[String]) -> Option<Vec<u64>> {
        let found = self.read_snapshot(|tx| {
            let floor: i64 = tx
                .query_one("SELECT value FROM meta WHERE key = 'version_floor'", &[])?
                .get(0);
            let versions: HashMap<String, i64> = tx
                .query(
                    "SELECT periodic, version FROM periodic_versions WHERE periodic = ANY($1)",
                    &[&periodics],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            Ok(periodics
                .iter()
                .map(|p| versions.get(p).copied().unwrap_or(0).max(floor) as u64)
                .collect())
        });
        match found {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(error = %e, "the periodics' versions cannot be read");
                None
            }
        }
    }

    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<PreparedFires, StoreError> {
        let kept = self.read_snapshot(|tx| {
            let mut kept = Vec::with_capacity(fires.len());
            for (fire, version) in &fires {
                let mut conflict = false;
                for r in &fire.runs {
                    if let (Some(p), Some(s)) = (&r.periodic, r.scheduled_at) {
                        let s = micros(bosun_store::run::micros(s));
                        if tick_run(tx, p, s, r.attempt)?.is_some() {
                            conflict = true;
                            break;
                        }
                    }
                }
                kept.push(KeptFire {
                    periodic: fire.state.periodic.clone(),
                    version: *version,
                    conflict,
                    fire: Some(fire.clone()),
                });
            }
            Ok(kept)
        })?;
        Ok(PreparedFires::of_fires(kept))
    }

    fn commit_prepared(
        &self,
        prepared: PreparedFires,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        let fires = prepared.into_fires();
        let policy = self.policy();
        let mut w = Written::default();
        let outcome = self.write(|tx| {
            w = Written::default();
            let floor: i64 = tx
                .query_one(
                    "SELECT value FROM meta WHERE key = 'version_floor' FOR SHARE",
                    &[],
                )?
                .get(0);
            let mut seen = HashSet::new();
            let mut out = Vec::with_capacity(fires.len());
            for f in &fires {
                let fresh = seen.insert(f.periodic.clone());
                let fire = match (&f.fire, f.conflict, fresh) {
                    (Some(fire), false, true) => fire,
                    _ => {
                        out.push(None);
                        continue;
                    }
                };
                tx.execute(
                    "INSERT INTO periodic_versions(periodic, version) VALUES ($1, 0) ON CONFLICT (periodic) DO NOTHING",
                    &[&f.periodic],
                )?;
                let version: i64 = tx
                    .query_one(
                        "SELECT version FROM periodic_versions WHERE periodic = $1 FOR UPDATE",
                        &[&f.periodic],
                    )?
                    .get(0);
                if version.max(floor) as u64 != f.version {
                    out.push(None);
                    continue;
                }
                out.push(Some(fire_in(tx, &self.specs, policy, fire.clone(), at, &self.origin, &mut w)?));
            }
            w.finish(tx, &self.origin)?;
            Ok(out)
        });
        match outcome {
            Ok(out) => {
                self.known_specs(std::mem::take(&mut w.fresh));
                fires
                    .into_iter()
                    .zip(out)
                    .map(|(f, created)| match created {
                        Some(created) => {
                            self.observe_created(&created);
                            Ok(created)
                        }
                        None => Err(StoreError::Stale(f.periodic)),
                    })
                    .collect()
            }
            Err(e) => {
                let message = e.to_string();
                fires
                    .iter()
                    .map(|_| Err(StoreError::Unavailable(message.clone())))
                    .collect()
            }
        }
    }

    fn periodic_states(
        &self,
        periodics: &[String],
    ) -> Result<HashMap<String, PeriodicState>, StoreError> {
        self.read(|c| {
            let found = c.query(
                "SELECT periodic, schedule_hash, first_seen, last_tick, paused, queued FROM periodic_state WHERE periodic = ANY($1)",
                &[&periodics],
            )?;
            let mut out = HashMap::new();
            for r in &found {
                let s = rows::state(r)?;
                out.insert(s.periodic.clone(), s);
            }
            Ok(out)
        })
    }

    fn periodic_runs(
        &self,
        periodics: &[String],
    ) -> Result<HashMap<String, PeriodicRuns>, StoreError> {
        self.read_snapshot(|tx| {
            let last = tx.query(
                "SELECT DISTINCT ON (periodic) periodic, created_at, completed_at, scheduled_at, attempt, state, id
                 FROM runs WHERE periodic = ANY($1) ORDER BY periodic, seq DESC",
                &[&periodics],
            )?;
            let active: HashSet<String> = tx
                .query(
                    "SELECT DISTINCT periodic FROM runs WHERE periodic = ANY($1) AND completed_at IS NULL",
                    &[&periodics],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let mut out = HashMap::new();
            for r in &last {
                let periodic: String = r.get(0);
                let state: String = r.get(5);
                let summary = RunSummary {
                    created_at: ts(r.get(1))?,
                    completed_at: opt_ts(r.get(2))?,
                    scheduled_at: opt_ts(r.get(3))?,
                    attempt: r.get::<_, i64>(4) as u32,
                    state: state
                        .parse::<RunState>()
                        .map_err(StoreError::Invalid)?,
                    id: r.get(6),
                };
                let is_active = active.contains(&periodic);
                out.insert(
                    periodic,
                    PeriodicRuns {
                        last: Some(summary),
                        active: is_active,
                    },
                );
            }
            for p in periodics {
                out.entry(p.clone()).or_default();
            }
            Ok(out)
        })
    }

    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError> {
        let deleted = self.write(|tx| {
            let found = tx.query(
                &format!(
                    "DELETE FROM runs WHERE completed_at IS NOT NULL AND completed_at < $1
                     AND seq NOT IN (SELECT MAX(seq) FROM runs WHERE periodic IS NOT NULL GROUP BY periodic)
                     RETURNING {RUN_COLUMNS}"
                ),
                &[&micros(cutoff)],
            )?;
            if !found.is_empty() {
                tx.execute(
                    "UPDATE meta SET value = nextval('periodic_changes') WHERE key = 'version_floor'",
                    &[],
                )?;
                let ids: Vec<String> = found.iter().map(|r| r.get::<_, String>(0)).collect();
                tx.execute("DELETE FROM abort_requests WHERE run_id = ANY($1)", &[&ids])?;
            }
            Ok(found.iter().map(rows::run).collect::<Result<Vec<_>, _>>()?)
        })?;
        if let (Some(o), false) = (&self.observer, deleted.is_empty()) {
            o.on_deleted(&count_by_labels(&deleted));
        }
        Ok(deleted.into_iter().map(|r| r.id).collect())
    }

    fn put_repo(&self, record: &RepoRecord) -> Result<(), StoreError> {
        let mut record = record.clone();
        record.cap_retired_jobs();
        let body = to_json(&record);
        self.write(|tx| {
            tx.execute(
                "INSERT INTO repos(repo, record) VALUES ($1, $2) ON CONFLICT (repo) DO UPDATE SET record = $2",
                &[&record.repo, &body],
            )?;
            Ok(())
        })
    }

    fn repos(&self) -> Result<Vec<RepoRecord>, StoreError> {
        self.read(|c| {
            let found = c.query("SELECT record FROM repos ORDER BY repo", &[])?;
            Ok(found
                .iter()
                .map(|r| rows::json(r.get(0)))
                .collect::<Result<_, _>>()?)
        })
    }

    fn delete_repo(&self, repo: &str) -> Result<bool, StoreError> {
        self.write(|tx| Ok(tx.execute("DELETE FROM repos WHERE repo = $1", &[&repo])? > 0))
    }

    fn accept_delivery(&self, d: NewDelivery) -> Result<Accepted, StoreError> {
        let (done, answer) = mpsc::channel();
        self.acceptor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Acceptance { new: d, done })
            .map_err(|_| StoreError::Unavailable("the store's acceptor has stopped".into()))?;
        off_runtime(move || {
            answer.recv().unwrap_or_else(|_| {
                Err(StoreError::Unavailable(
                    "the store's acceptor has stopped".into(),
                ))
            })
        })
    }

    fn pending_deliveries(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredDelivery>, StoreError> {
        let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|c| {
            let found = c.query(
                &format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE processed_at IS NULL AND seq > $1 ORDER BY seq LIMIT $2"),
                &[&after, &limit],
            )?;
            Ok(found.iter().map(rows::delivery).collect::<Result<_, _>>()?)
        })
    }

    fn delivery(&self, seq: u64) -> Result<Option<StoredDelivery>, StoreError> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        self.read(|c| {
            let row = c.query_opt(
                &format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE seq = $1"),
                &[&seq],
            )?;
            Ok(row.as_ref().map(rows::delivery).transpose()?)
        })
    }

    fn mark_processed(&self, seqs: &[u64], at: Timestamp) -> Result<(), StoreError> {
        let seqs: Vec<i64> = seqs.iter().filter_map(|s| i64::try_from(*s).ok()).collect();
        let at = micros(bosun_store::run::micros(at));
        self.write(|tx| {
            tx.execute(
                "UPDATE deliveries SET body = NULL, processed_at = $2 WHERE seq = ANY($1) AND processed_at IS NULL",
                &[&seqs, &at],
            )?;
            Ok(())
        })
    }

    fn prune_deliveries(&self, before: Timestamp) -> Result<usize, StoreError> {
        let before = micros(bosun_store::run::micros(before));
        self.write(|tx| {
            Ok(tx.execute(
                "DELETE FROM deliveries WHERE processed_at IS NOT NULL AND received_at < $1",
                &[&before],
            )? as usize)
        })
    }

    fn active_runs_of_pull(&self, repo: &str, number: i64) -> Result<Vec<Run>, StoreError> {
        self.read(|c| {
            let found = c.query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE seq IN (SELECT seq FROM run_pulls WHERE repo = $1 AND number = $2)
                     AND job_type = 'presubmit' AND completed_at IS NULL ORDER BY seq"
                ),
                &[&repo, &number],
            )?;
            Ok(found.iter().map(rows::run).collect::<Result<_, _>>()?)
        })
    }

    fn latest_runs_of_head(
        &self,
        repo: &str,
        number: i64,
        sha: &str,
    ) -> Result<Vec<Run>, StoreError> {
        self.read(|c| {
            let found = c.query(
                &format!(
                    "SELECT DISTINCT ON (job) {RUN_COLUMNS} FROM runs
                     WHERE seq IN (SELECT seq FROM run_pulls WHERE repo = $1 AND number = $2 AND sha = $3)
                     AND job_type = 'presubmit' ORDER BY job, seq DESC"
                ),
                &[&repo, &number, &sha],
            )?;
            Ok(found.iter().map(rows::run).collect::<Result<_, _>>()?)
        })
    }

    fn set_report_policy(&self, policy: Arc<dyn ReportPolicy>) -> Result<(), StoreError> {
        self.policy.set(policy).map_err(|_| policy_set_already())
    }

    fn enqueue_reports(&self, entries: Vec<NewReport>) -> Result<Vec<Enqueued>, StoreError> {
        for r in &entries {
            r.check()?;
        }
        self.write(|tx| queue_reports(tx, entries.clone()))
    }

    fn due_reports(&self, now: Timestamp, limit: usize) -> Result<Vec<StoredReport>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|c| {
            let found = c.query(
                &format!("SELECT {REPORT_COLUMNS} FROM reports WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY id LIMIT $2"),
                &[&micros(now), &limit],
            )?;
            Ok(found.iter().map(rows::report).collect::<Result<_, _>>()?)
        })
    }

    fn report_delivered(&self, id: u64, version: u64, at: Timestamp) -> Result<bool, StoreError> {
        self.write(|tx| report_attempt(tx, id, version, None, at))
    }

    fn report_failed(
        &self,
        id: u64,
        version: u64,
        failure: ReportFailure,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(|tx| report_attempt(tx, id, version, Some(failure.clone()), at))
    }

    fn reports_of_run(&self, run_id: &str) -> Result<Vec<StoredReport>, StoreError> {
        self.read(|c| {
            let found = c.query(
                &format!("SELECT {REPORT_COLUMNS} FROM reports WHERE run_id = $1 ORDER BY id"),
                &[&run_id],
            )?;
            Ok(found.iter().map(rows::report).collect::<Result<_, _>>()?)
        })
    }

    fn report_counts(&self) -> Result<ReportCounts, StoreError> {
        self.read(|c| {
            let r = c.query_one(
                "SELECT COUNT(*) FILTER (WHERE state = 'pending'), COUNT(*) FILTER (WHERE state = 'refused') FROM reports",
                &[],
            )?;
            Ok(ReportCounts {
                pending: r.get::<_, i64>(0) as u64,
                refused: r.get::<_, i64>(1) as u64,
            })
        })
    }

    fn prune_reports(&self, before: Timestamp) -> Result<usize, StoreError> {
        let before = micros(bosun_store::run::micros(before));
        self.write(|tx| {
            let gone = tx.query(
                "DELETE FROM reports WHERE state <> 'pending' AND finished_at < $1 RETURNING key",
                &[&before],
            )?;
            let keys: Vec<String> = gone
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            tx.execute(
                "DELETE FROM report_keys k WHERE k.key = ANY($1) AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.key = k.key)",
                &[&keys],
            )?;
            Ok(gone.len())
        })
    }

    fn request_aborts(&self, ids: &[String], at: Timestamp) -> Result<(), StoreError> {
        let at = micros(bosun_store::run::micros(at));
        self.write(|tx| {
            tx.execute(
                "INSERT INTO abort_requests(run_id, requested_at)
                 SELECT id, $2 FROM runs WHERE id = ANY($1) AND completed_at IS NULL
                 ON CONFLICT (run_id) DO NOTHING",
                &[&ids, &at],
            )?;
            tx.execute("SELECT pg_notify($1, '')", &[&listen::ABORTS])?;
            Ok(())
        })
    }

    fn abort_requests(&self) -> Result<Vec<String>, StoreError> {
        self.read(|c| {
            Ok(c.query(
                "SELECT run_id FROM abort_requests ORDER BY requested_at, run_id",
                &[],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
    }

    fn append_run_log(
        &self,
        id: &str,
        offset: u64,
        data: &[u8],
        complete: bool,
    ) -> Result<u64, StoreError> {
        self.write(|tx| Ok(files::append(tx, id, offset, data, complete)??))
    }

    fn run_log(&self, id: &str, offset: u64, max: usize) -> Result<Option<LogSlice>, StoreError> {
        self.read(|c| Ok(files::read_log(c, id, offset, max)?))
    }

    fn put_run_files(
        &self,
        id: &str,
        files: Vec<RunFile>,
        left_out: bool,
    ) -> Result<(), StoreError> {
        self.write(|tx| Ok(files::put(tx, id, &files, left_out)??))
    }

    fn run_files(&self, id: &str) -> Result<Option<RunFiles>, StoreError> {
        self.read(|c| Ok(files::list(c, id)??))
    }

    fn logs_left_open(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|c| {
            Ok(c.query(
                "SELECT r.id FROM run_logs l JOIN runs r ON r.seq = l.seq
                 WHERE NOT l.complete AND r.completed_at IS NOT NULL
                 ORDER BY r.completed_at, r.seq LIMIT $1",
                &[&limit],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
    }

    fn run_file(&self, id: &str, path: &str) -> Result<Option<RunFile>, StoreError> {
        self.read(|c| Ok(files::file(c, id, path)??))
    }

    fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        let expires = micros(bosun_store::run::micros(session.expires_at));
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sessions(id_hash, role, expires_at) VALUES ($1, $2, $3)
                 ON CONFLICT (id_hash) DO UPDATE SET role = $2, expires_at = $3",
                &[&session.id_hash, &session.role, &expires],
            )?;
            Ok(())
        })
    }

    fn session(&self, id_hash: &str, now: Timestamp) -> Result<Option<Session>, StoreError> {
        self.read(|c| {
            let row = c.query_opt(
                "SELECT id_hash, role, expires_at FROM sessions WHERE id_hash = $1 AND expires_at > $2",
                &[&id_hash, &micros(now)],
            )?;
            Ok(row
                .map(|r| {
                    Ok::<_, StoreError>(Session {
                        id_hash: r.get(0),
                        role: r.get(1),
                        expires_at: ts(r.get(2))?,
                    })
                })
                .transpose()?)
        })
    }

    fn delete_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        self.write(|tx| Ok(tx.execute("DELETE FROM sessions WHERE id_hash = $1", &[&id_hash])? > 0))
    }

    fn prune_sessions(&self, now: Timestamp, keep: usize) -> Result<usize, StoreError> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        self.write(|tx| {
            // Prunes one at a time: two at once would each delete for the
            // same excess.
            tx.batch_execute("LOCK TABLE sessions IN SHARE ROW EXCLUSIVE MODE")?;
            let expired = tx.execute(
                "DELETE FROM sessions WHERE expires_at <= $1",
                &[&micros(now)],
            )?;
            let over = tx.execute(
                "DELETE FROM sessions WHERE id_hash IN (
                    SELECT id_hash FROM sessions ORDER BY expires_at, id_hash
                    LIMIT GREATEST((SELECT COUNT(*) FROM sessions) - $1, 0))",
                &[&keep],
            )?;
            Ok((expired + over) as usize)
        })
    }

    fn shared_secret(&self, name: &str, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO secrets(name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                &[&name, &candidate.as_slice()],
            )?;
            let value: Vec<u8> = tx
                .query_one("SELECT value FROM secrets WHERE name = $1", &[&name])?
                .get(0);
            Ok(value.try_into().map_err(|_| {
                StoreError::Invalid(format!("the stored secret {name} is not 32 bytes"))
            })?)
        })
    }

    fn document(&self, name: &str) -> Result<Option<StoredDocument>, StoreError> {
        self.read(|c| {
            let row = c.query_opt(
                "SELECT version, body FROM documents WHERE name = $1",
                &[&name],
            )?;
            Ok(row.map(|r| StoredDocument {
                version: r.get::<_, i64>(0) as u64,
                body: r.get(1),
            }))
        })
    }

    fn put_document(&self, name: &str, expected: u64, body: &[u8]) -> Result<u64, StoreError> {
        check_expected(name, expected)?;
        let expected = expected as i64;
        self.write(|tx| {
            let written = if expected == 0 {
                tx.execute(
                    "INSERT INTO documents(name, version, body) VALUES ($1, 1, $2) ON CONFLICT (name) DO NOTHING",
                    &[&name, &body],
                )?
            } else {
                tx.execute(
                    "UPDATE documents SET version = version + 1, body = $3 WHERE name = $1 AND version = $2",
                    &[&name, &expected, &body],
                )?
            };
            if written == 1 {
                return Ok(expected as u64 + 1);
            }
            let found: i64 = tx
                .query_opt("SELECT version FROM documents WHERE name = $1", &[&name])?
                .map_or(0, |r| r.get(0));
            Err(conflict(name, expected as u64, found as u64).into())
        })
    }
}

/// Ends or reschedules the pending entry `id` of `version` (`None`:
/// delivered); its key's row is locked first, as an enqueue locks it.
fn report_attempt(
    tx: Tx<'_, '_>,
    id: u64,
    version: u64,
    failure: Option<ReportFailure>,
    at: Timestamp,
) -> Result<bool, Fail> {
    let (Ok(id), Ok(version)) = (i64::try_from(id), i64::try_from(version)) else {
        return Ok(false);
    };
    let at = micros(bosun_store::run::micros(at));
    let Some(key) = tx.query_opt("SELECT key FROM reports WHERE id = $1", &[&id])? else {
        return Ok(false);
    };
    let key: String = key.get(0);
    tx.execute(
        "SELECT 1 FROM report_keys WHERE key = $1 FOR UPDATE",
        &[&key],
    )?;
    let pending = tx
        .query_opt(
            "SELECT 1 FROM reports WHERE id = $1 AND version = $2 AND state = 'pending' FOR UPDATE",
            &[&id, &version],
        )?
        .is_some();
    if !pending {
        return Ok(false);
    }
    let ended = match failure {
        None => {
            tx.execute(
                "UPDATE reports SET attempts = attempts + 1, state = 'delivered', finished_at = $2 WHERE id = $1",
                &[&id, &at],
            )?;
            true
        }
        Some(ReportFailure::Retry { at: again, error }) => {
            tx.execute(
                "UPDATE reports SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3 WHERE id = $1",
                &[&id, &micros(bosun_store::run::micros(again)), &error],
            )?;
            false
        }
        Some(ReportFailure::Permanent { error }) => {
            tx.execute(
                "UPDATE reports SET attempts = attempts + 1, state = 'refused', finished_at = $2, last_error = $3 WHERE id = $1",
                &[&id, &at, &error],
            )?;
            true
        }
    };
    if ended {
        tx.execute(
            "UPDATE report_keys SET pending = NULL WHERE key = $1 AND pending = $2",
            &[&key, &id],
        )?;
    }
    Ok(true)
}

/// A listing's values.
type ListArgs = Vec<Box<dyn ToSql + Sync>>;

/// The query of a listing and the values it binds (see
/// [`Store::list`]; the same rules as SQLite's, keyset cursors on `seq`).
fn list_query(f: &RunFilter) -> (String, ListArgs) {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE TRUE");
    let mut args: ListArgs = Vec::new();
    let by_pull = f.pull.is_some() || f.head_sha.is_some();
    if by_pull {
        let mut sub = String::from("SELECT seq FROM run_pulls WHERE TRUE");
        if let Some(n) = f.pull {
            args.push(Box::new(n));
            sub.push_str(&format!(" AND number = ${}", args.len()));
        }
        if let Some(r) = &f.repo {
            args.push(Box::new(r.clone()));
            sub.push_str(&format!(" AND repo = ${}", args.len()));
        }
        if let Some(s) = &f.head_sha {
            args.push(Box::new(s.clone()));
            sub.push_str(&format!(" AND sha = ${}", args.len()));
        }
        sql.push_str(&format!(" AND seq IN ({sub})"));
    }
    let mut add = |clause: &str, v: Box<dyn ToSql + Sync>| {
        args.push(v);
        sql.push_str(&format!(" AND {clause} = ${}", args.len()));
    };
    if let (Some(r), false) = (&f.repo, by_pull) {
        add("refs_repo", Box::new(r.clone()));
    }
    if let Some(j) = &f.job {
        add("job", Box::new(j.clone()));
    }
    if let Some(p) = &f.periodic {
        add("periodic", Box::new(p.clone()));
    }
    if let Some(s) = f.state {
        add("state", Box::new(s.as_str().to_string()));
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
        sql.push_str(&format!(" AND configured_cluster <> ${}", args.len()));
    }
    if f.active {
        sql.push_str(" AND completed_at IS NULL");
    }
    let backwards = f.counted_back();
    for (cursor, beyond) in [(&f.after, true), (&f.before, false)] {
        if let Some(id) = cursor {
            args.push(Box::new(id.clone()));
            let cmp = if beyond == f.oldest_first { ">" } else { "<" };
            sql.push_str(&format!(
                " AND seq {cmp} (SELECT seq FROM runs WHERE id = ${})",
                args.len()
            ));
        }
    }
    let limit = if f.limit == 0 { 100 } else { f.limit };
    let order = if f.oldest_first != backwards {
        "ASC"
    } else {
        "DESC"
    };
    sql.push_str(&format!(
        " ORDER BY seq {order} LIMIT {limit} OFFSET {}",
        f.offset
    ));
    (sql, args)
}
