//! The schema: its migrations, applied in order, and `PRAGMA user_version`,
//! the count applied (see each migration for what it changed and why).

use rusqlite::Connection;

use super::error::unavailable;
use super::sql::row;
use crate::StoreError;

/// Schema migrations, applied in order; `PRAGMA user_version` is the count applied.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 8: a periodic's skipped ticks without its runs' outcomes (the
    // dashboard's latest skips and their total): a partial index, which a
    // `run` outcome, nearly every insert, does not touch.
    "CREATE INDEX tick_outcomes_skipped ON tick_outcomes(periodic, first_tick) WHERE outcome <> 'run';",
    // 9: the repositories bosun follows (a record each, as JSON: it is read
    // and written whole) and the webhook deliveries it accepted. A delivery's
    // seq is AUTOINCREMENT so that it is never handed out again once pruned
    // (a reader that has seen seq N takes only later ones). Its (forge,
    // delivery id) is unique unless the id is empty (GitLab may send none).
    // The pending ones are found through a partial index, so that the replay
    // at start-up never walks the processed ones kept for their ids; pruning
    // walks the processed ones by receipt.
    "CREATE TABLE repos (repo TEXT PRIMARY KEY, record TEXT NOT NULL);
     CREATE TABLE deliveries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        forge TEXT NOT NULL,
        event TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        repo TEXT,
        body BLOB,
        received_at INTEGER NOT NULL,
        processed_at INTEGER
     );
     CREATE UNIQUE INDEX deliveries_id ON deliveries(forge, delivery_id) WHERE delivery_id <> '';
     CREATE INDEX deliveries_pending ON deliveries(seq) WHERE processed_at IS NULL;
     CREATE INDEX deliveries_processed ON deliveries(received_at) WHERE processed_at IS NOT NULL;",
    // 10: runs by repository and pull request, and the report outbox.
    //
    // A run's repository (`org/repo` of its refs) is a generated column, so
    // every insert (a create, a fold of the fire log) fills it and the runs
    // kept so far have it at once; its partial index holds only runs with
    // refs (a periodic without them, most inserts, writes nothing more).
    // A run's pulls (a batch has several) are rows of `run_pulls`, kept by
    // triggers on insert and delete (every insert path and retention alike),
    // filled here from the runs kept so far. A migration that rebuilds
    // `runs` (as 4 did) drops the triggers: it must make them again.
    //
    // The outbox: an entry per report queued, AUTOINCREMENT so that an id
    // named by a worker is never another entry once pruned; `report_keys`
    // the newest version each key has had, for as long as an entry of the
    // key is kept. Its indexes: by key (the pending entry of a key, and
    // whether a key has any left), the pending ones in queueing order (the
    // due ones, their count), by run, and the ended ones (those with an
    // end) by state and end (the refused count, pruning).
    "ALTER TABLE runs ADD COLUMN refs_repo TEXT
        GENERATED ALWAYS AS (json_extract(refs, '$.org') || '/' || json_extract(refs, '$.repo')) VIRTUAL;
     CREATE INDEX runs_repo ON runs(refs_repo, seq) WHERE refs_repo IS NOT NULL;
     CREATE TABLE run_pulls (
        number INTEGER NOT NULL,
        repo TEXT NOT NULL,
        seq INTEGER NOT NULL,
        sha TEXT NOT NULL,
        PRIMARY KEY (number, repo, seq)
     ) WITHOUT ROWID;
     CREATE TRIGGER runs_pulls_insert AFTER INSERT ON runs
        WHEN json_array_length(NEW.refs, '$.pulls') > 0 BEGIN
        INSERT OR IGNORE INTO run_pulls(number, repo, seq, sha)
            SELECT json_extract(value, '$.number'), NEW.refs_repo, NEW.seq,
                COALESCE(json_extract(value, '$.sha'), '')
            FROM json_each(NEW.refs, '$.pulls');
     END;
     CREATE TRIGGER runs_pulls_delete AFTER DELETE ON runs
        WHEN json_array_length(OLD.refs, '$.pulls') > 0 BEGIN
        DELETE FROM run_pulls WHERE repo = OLD.refs_repo AND seq = OLD.seq
            AND number IN (SELECT json_extract(value, '$.number') FROM json_each(OLD.refs, '$.pulls'));
     END;
     INSERT OR IGNORE INTO run_pulls(number, repo, seq, sha)
        SELECT json_extract(p.value, '$.number'), runs.refs_repo, runs.seq,
            COALESCE(json_extract(p.value, '$.sha'), '')
        FROM runs, json_each(runs.refs, '$.pulls') AS p
        WHERE json_array_length(runs.refs, '$.pulls') > 0;
     CREATE TABLE reports (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        run_id TEXT,
        version INTEGER NOT NULL,
        payload TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        next_attempt_at INTEGER NOT NULL,
        last_error TEXT,
        state TEXT NOT NULL,
        finished_at INTEGER,
        superseded_by INTEGER
     );
     CREATE INDEX reports_key ON reports(key);
     CREATE INDEX reports_pending ON reports(id) WHERE state = 'pending';
     CREATE INDEX reports_run ON reports(run_id) WHERE run_id IS NOT NULL;
     CREATE INDEX reports_ended ON reports(state, finished_at) WHERE finished_at IS NOT NULL;
     CREATE TABLE report_keys (key TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;",
    // 11: what the replicas of `bosun serve` on one store share beside runs.
    // Dashboard sessions by the SHA-256 of their id (hex; the id itself, the
    // cookie, is never stored), with the index pruning walks (the expired
    // ones, then the earliest to expire, ties by id hash); secrets made once
    // (the CSRF key), never replaced; documents written whole by
    // compare-and-set on their version (the dispatcher's plan).
    "CREATE TABLE sessions (
        id_hash TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        expires_at INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX sessions_expiry ON sessions(expires_at, id_hash);
     CREATE TABLE secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
     CREATE TABLE documents (
        name TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        body BLOB NOT NULL
     ) WITHOUT ROWID;",
    // 12: less written per insert. A run's pulls rows are inserted by the
    // store with the run (`sql::insert_pulls`), not by a trigger: an insert
    // into a table with a trigger keeps a statement journal (a copy of every
    // page it changes, a sixteenth of the writer's time in `run_bench`'s
    // POSTs). A periodic's active runs are indexed only for runs of a
    // periodic (its lookups name one), so other runs' inserts and
    // transitions leave that index alone.
    "DROP TRIGGER runs_pulls_insert;
     DROP INDEX runs_periodic_active;
     CREATE INDEX runs_periodic_active ON runs(periodic, seq)
        WHERE completed_at IS NULL AND periodic IS NOT NULL;",
    // 13: the index by state holds ended runs only. An active run is in
    // `runs_active` (a listing by an active state walks that, a few rows),
    // so a run's creation and its moves between active states (`triggered`,
    // `pending`) no longer write an entry of `runs_state` each; its end
    // writes one, as before.
    "DROP INDEX runs_state;
     CREATE INDEX runs_state ON runs(state, seq) WHERE completed_at IS NOT NULL;",
    // 14: a run the writer creates has the id of its seq (`run_ids`), found
    // through the table's key: its creation writes no entry of an index by
    // id, an entry at a random place. Ids drawn at random (the fire log's
    // runs, and every run kept so far) are marked `random_id` and keep a
    // partial unique index. `id` loses its UNIQUE constraint, whose index
    // cannot be dropped: the table is made again, with its indexes and the
    // pulls trigger (see 10).
    "CREATE TABLE runs14 (
        seq INTEGER PRIMARY KEY,
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
        url TEXT,
        random_id INTEGER,
        refs_repo TEXT
            GENERATED ALWAYS AS (json_extract(refs, '$.org') || '/' || json_extract(refs, '$.repo')) VIRTUAL
     );
     INSERT INTO runs14(seq, id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url, random_id)
        SELECT seq, id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url, 1 FROM runs;
     DROP TABLE runs;
     ALTER TABLE runs14 RENAME TO runs;
     CREATE UNIQUE INDEX runs_random_id ON runs(id) WHERE random_id = 1;
     CREATE UNIQUE INDEX runs_tick ON runs(periodic, scheduled_at, attempt)
        WHERE periodic IS NOT NULL AND scheduled_at IS NOT NULL;
     CREATE INDEX runs_job ON runs(job, seq);
     CREATE INDEX runs_state ON runs(state, seq) WHERE completed_at IS NOT NULL;
     CREATE INDEX runs_active ON runs(seq) WHERE completed_at IS NULL;
     CREATE INDEX runs_periodic_active ON runs(periodic, seq)
        WHERE completed_at IS NULL AND periodic IS NOT NULL;
     CREATE INDEX runs_repo ON runs(refs_repo, seq) WHERE refs_repo IS NOT NULL;
     CREATE TRIGGER runs_pulls_delete AFTER DELETE ON runs
        WHEN json_array_length(OLD.refs, '$.pulls') > 0 BEGIN
        DELETE FROM run_pulls WHERE repo = OLD.refs_repo AND seq = OLD.seq
            AND number IN (SELECT json_extract(value, '$.number') FROM json_each(OLD.refs, '$.pulls'));
     END;",
];

/// Applies the migrations `PRAGMA user_version` says are missing, each in a
/// transaction of its own; refuses a database newer than this bosun.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
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
