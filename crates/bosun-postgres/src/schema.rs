//! The schema: its migrations, applied in order at open under an advisory
//! lock (replicas starting together apply each once; the others wait, then
//! find it applied), and `bosun_schema`, the count applied.
//!
//! Columns hold what SQLite's do, in the same encodings (times in
//! microseconds since the epoch, JSON as text), so both stores decode with
//! the same rules. Differences, each for a reason of PostgreSQL's:
//! - BUILD_ID comes from a sequence (`build_ids`), started at the database's
//!   clock when the schema is made: unique and increasing across replicas
//!   whatever their clocks say, never handed out twice, never lowered by
//!   retention.
//! - A run's pulls (`run_pulls`) are written by the store with the run, in
//!   its transaction, and go with it (`ON DELETE CASCADE`).
//! - Webhook seqs come from the one row `meta('delivery_seq')`, updated in
//!   the accepting transaction: its row lock orders accepts, so seqs become
//!   visible in order (a reader that saw seq N never sees a smaller one
//!   appear later, which a sequence would allow).
//! - A periodic's version (what fires prepared ahead are checked against)
//!   is a row of `periodic_versions`, set from the sequence
//!   `periodic_changes` by every transaction that touches the periodic, and
//!   locked by the commit of a prepared fire; `meta('version_floor')` is
//!   raised by retention (every version at least the floor).
//! - `report_keys.pending`/`newest` are kept by the store (SQLite derives
//!   them by index); the row is locked before any report row of its key, so
//!   concurrent enqueues and deliveries of one key are serialized without
//!   deadlocks.

use postgres::Client;

use crate::error::unavailable;
use bosun_store::StoreError;

/// The advisory lock key migrations are applied under ("bosun" in ASCII).
const MIGRATION_LOCK: i64 = 0x0062_6f73_756e;

/// Schema migrations, applied in order; `bosun_schema.version` is the count
/// applied.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: runs, specs, schedule state and outcomes, the periodics' versions,
    // repositories, webhook deliveries, the report outbox.
    "CREATE SEQUENCE build_ids;
     SELECT setval('build_ids', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
     CREATE TABLE runs (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        build_id BIGINT NOT NULL UNIQUE,
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
        scheduled_at BIGINT,
        attempt BIGINT NOT NULL,
        pod_revival_count BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        pending_at BIGINT,
        completed_at BIGINT,
        state TEXT NOT NULL,
        description TEXT NOT NULL,
        url TEXT,
        refs_repo TEXT
     );
     CREATE UNIQUE INDEX runs_tick ON runs(periodic, scheduled_at, attempt)
        WHERE periodic IS NOT NULL AND scheduled_at IS NOT NULL;
     CREATE INDEX runs_job ON runs(job, seq);
     CREATE INDEX runs_periodic ON runs(periodic, seq) WHERE periodic IS NOT NULL;
     CREATE INDEX runs_state ON runs(state, seq);
     CREATE INDEX runs_active ON runs(seq) WHERE completed_at IS NULL;
     CREATE INDEX runs_repo ON runs(refs_repo, seq) WHERE refs_repo IS NOT NULL;
     CREATE TABLE run_pulls (
        seq BIGINT NOT NULL REFERENCES runs(seq) ON DELETE CASCADE,
        repo TEXT NOT NULL,
        number BIGINT NOT NULL,
        sha TEXT NOT NULL,
        PRIMARY KEY (repo, number, seq)
     );
     CREATE INDEX run_pulls_seq ON run_pulls(seq);
     CREATE TABLE specs (hash TEXT PRIMARY KEY, body TEXT NOT NULL);
     CREATE TABLE periodic_state (
        periodic TEXT PRIMARY KEY,
        schedule_hash TEXT NOT NULL,
        first_seen BIGINT NOT NULL,
        last_tick BIGINT,
        paused BOOLEAN NOT NULL,
        queued BIGINT
     );
     CREATE TABLE tick_outcomes (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        periodic TEXT NOT NULL,
        first_tick BIGINT NOT NULL,
        last_tick BIGINT NOT NULL,
        count BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        run_id TEXT,
        recorded_at BIGINT NOT NULL
     );
     CREATE INDEX tick_outcomes_periodic ON tick_outcomes(periodic, first_tick, id);
     CREATE INDEX tick_outcomes_skips ON tick_outcomes(periodic, first_tick, id)
        WHERE outcome <> 'run';
     CREATE TABLE meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
     INSERT INTO meta(key, value) VALUES ('delivery_seq', 0), ('version_floor', 0);
     CREATE SEQUENCE periodic_changes;
     CREATE TABLE periodic_versions (periodic TEXT PRIMARY KEY, version BIGINT NOT NULL);
     CREATE TABLE repos (repo TEXT PRIMARY KEY, record TEXT NOT NULL);
     CREATE TABLE deliveries (
        seq BIGINT PRIMARY KEY,
        forge TEXT NOT NULL,
        event TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        repo TEXT,
        body BYTEA,
        received_at BIGINT NOT NULL,
        processed_at BIGINT
     );
     CREATE UNIQUE INDEX deliveries_id ON deliveries(forge, delivery_id) WHERE delivery_id <> '';
     CREATE INDEX deliveries_pending ON deliveries(seq) WHERE processed_at IS NULL;
     CREATE TABLE report_keys (
        key TEXT PRIMARY KEY,
        newest BIGINT NOT NULL,
        pending BIGINT
     );
     CREATE TABLE reports (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        run_id TEXT,
        version BIGINT NOT NULL,
        payload TEXT NOT NULL,
        attempts BIGINT NOT NULL DEFAULT 0,
        created_at BIGINT NOT NULL,
        next_attempt_at BIGINT NOT NULL,
        last_error TEXT,
        state TEXT NOT NULL,
        finished_at BIGINT,
        superseded_by BIGINT
     );
     CREATE INDEX reports_key ON reports(key);
     CREATE INDEX reports_due ON reports(next_attempt_at, id) WHERE state = 'pending';
     CREATE INDEX reports_run ON reports(run_id, id) WHERE run_id IS NOT NULL;
     CREATE INDEX reports_ended ON reports(state, finished_at) WHERE finished_at IS NOT NULL;",
    // 2: leadership. One row per lease: its holder (unique per process
    // start), its term (raised by every change of holder, never lowered:
    // the table is logged, so a crash of the server keeps it) and when it
    // expires, by the database's clock.
    "CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        term BIGINT NOT NULL,
        acquired_at TIMESTAMPTZ NOT NULL,
        renewed_at TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
     );",
    // 3: what every replica's dashboard and dispatcher share: sessions (the
    // hash of each id, never the id), secrets made once (the CSRF key),
    // versioned documents (the dispatcher's plan and overrides).
    "CREATE TABLE sessions (
        id_hash TEXT COLLATE \"C\" PRIMARY KEY,
        role TEXT NOT NULL,
        expires_at BIGINT NOT NULL
     );
     CREATE INDEX sessions_expiry ON sessions(expires_at, id_hash);
     CREATE TABLE secrets (name TEXT PRIMARY KEY, value BYTEA NOT NULL);
     CREATE TABLE documents (
        name TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        body BYTEA NOT NULL
     );",
    // 4: abort requests made on a replica that does not lead, kept until
    // their run ends.
    "CREATE TABLE abort_requests (
        run_id TEXT PRIMARY KEY,
        requested_at BIGINT NOT NULL
     );",
    // 5: runs' logs (appended in chunks as they grow) and artifacts, for
    // every replica to serve; they go with their run.
    "CREATE TABLE run_logs (
        seq BIGINT PRIMARY KEY REFERENCES runs(seq) ON DELETE CASCADE,
        len BIGINT NOT NULL,
        complete BOOLEAN NOT NULL
     );
     CREATE TABLE run_log_chunks (
        seq BIGINT NOT NULL REFERENCES runs(seq) ON DELETE CASCADE,
        start BIGINT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (seq, start)
     );
     CREATE TABLE run_file_sets (
        seq BIGINT PRIMARY KEY REFERENCES runs(seq) ON DELETE CASCADE,
        truncated BOOLEAN NOT NULL
     );
     CREATE TABLE run_files (
        seq BIGINT NOT NULL REFERENCES run_file_sets(seq) ON DELETE CASCADE,
        path TEXT COLLATE \"C\" NOT NULL,
        data BYTEA NOT NULL,
        modified BIGINT,
        PRIMARY KEY (seq, path)
     );",
];

/// Applies the migrations not applied yet, each in a transaction of its own,
/// under the migration lock (held by this session until all are applied).
pub(crate) fn migrate(c: &mut Client) -> Result<(), StoreError> {
    c.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .map_err(unavailable)?;
    let result = apply(c);
    let unlock = c
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .map_err(unavailable);
    result.and(unlock.map(|_| ()))
}

fn apply(c: &mut Client) -> Result<(), StoreError> {
    c.batch_execute("CREATE TABLE IF NOT EXISTS bosun_schema (version BIGINT NOT NULL)")
        .map_err(unavailable)?;
    let applied: i64 = c
        .query_opt("SELECT version FROM bosun_schema", &[])
        .map_err(unavailable)?
        .map_or(0, |r| r.get(0));
    let known = MIGRATIONS.len() as i64;
    if applied > known {
        return Err(StoreError::Unavailable(format!(
            "the database's schema is version {applied}, newer than this bosun's ({known}): run a bosun at least as new"
        )));
    }
    for (i, m) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
        let version = i as i64 + 1;
        let mut tx = c.transaction().map_err(unavailable)?;
        tx.batch_execute(m)
            .map_err(|e| StoreError::Unavailable(format!("migration {version}: {e}")))?;
        tx.execute("DELETE FROM bosun_schema", &[])
            .map_err(unavailable)?;
        tx.execute("INSERT INTO bosun_schema(version) VALUES ($1)", &[&version])
            .map_err(unavailable)?;
        tx.commit().map_err(unavailable)?;
    }
    Ok(())
}
