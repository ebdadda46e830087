//! The SQL: the statements the writer runs and the queries the readers run,
//! each from the connection's statement cache, with the values they bind and
//! the rows they return decoded by [`super::codec`].

use std::collections::HashMap;
use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use super::codec::{
    count_from_row, delivery_from_row, outcome_from_row, report_from_row, run_from_row,
    state_from_row, summary_from_row, Prepared,
};
use super::error::unavailable;
use super::run_ids::RunIds;
use crate::reports::{NewReport, ReportCounts, ReportFailure, StoredReport};
use crate::repos::{NewDelivery, StoredDelivery};
use crate::run::Run;
use crate::{JobDemand, PeriodicRuns, PeriodicState, RunCount, RunFilter, StoreError, TickOutcome};

/// The labels of Prow's `prowjobs` gauge of a `runs` row, taken from the
/// refs' JSON as [`RunCount::of`] takes them: eight columns (job, job type,
/// state, org, repo, base ref, cluster, retest), read by
/// [`count_from_row`].
macro_rules! count_labels {
    () => {
        "job, job_type, state,
            CASE WHEN refs IS NOT NULL THEN json_extract(refs, '$.org') ELSE COALESCE(json_extract(extra_refs, '$[0].org'), '') END,
            CASE WHEN refs IS NOT NULL THEN json_extract(refs, '$.repo') ELSE COALESCE(json_extract(extra_refs, '$[0].repo'), '') END,
            COALESCE(CASE WHEN refs IS NOT NULL THEN json_extract(refs, '$.base_ref') ELSE json_extract(extra_refs, '$[0].base_ref') END, ''),
            COALESCE(cluster, configured_cluster),
            COALESCE(json_extract(labels, '$.\"prow.k8s.io/retest\"'), '') = 'true'"
    };
}

/// The columns of a run's row, in the order [`run_from_row`] decodes (and
/// inserts bind) them; `seq` follows them in an insert.
pub(super) const RUN_COLUMNS: &str = "id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url";

/// Executes a statement from the connection's statement cache (hot paths run
/// the same few statements thousands of times; parsing them each time was a
/// measurable part of a run's cost).
pub(super) fn exec(c: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(p)
}

/// One row of a cached statement.
pub(super) fn row<T>(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(p, f)
}

/// The seq of the run `id` as a scalar subquery, whose parameters `?{seq}`
/// and `?{id}` bind the seq the id names ([`RunIds::seq`], NULL if none) and
/// the id: the row the id names, if it has that id, else a run whose id was
/// drawn at random (`runs_random_id`); NULL if neither.
pub(super) fn seq_of_id(seq: usize, id: usize) -> String {
    format!(
        "(SELECT seq FROM runs WHERE seq = ?{seq} AND id = ?{id} \
         UNION ALL SELECT seq FROM runs WHERE id = ?{id} AND random_id = 1 LIMIT 1)"
    )
}

/// A run by id: `?1` the seq the id names, `?2` the id.
pub(super) static RUN_BY_ID: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE seq = {}",
        seq_of_id(1, 2)
    )
});

/// What a transition changes of a run: `?1` its id, `?9` the seq the id names.
pub(super) static UPDATE_RUN: LazyLock<String> = LazyLock::new(|| {
    format!("UPDATE runs SET state = ?2, description = ?3, cluster = ?4, url = ?5, pending_at = ?6, completed_at = ?7, pod_revival_count = ?8 WHERE seq = {}", seq_of_id(9, 1))
});

/// A run by id.
pub(super) fn get_run(conn: &Connection, ids: &RunIds, id: &str) -> rusqlite::Result<Option<Run>> {
    row(conn, &RUN_BY_ID, params![ids.seq(id), id], run_from_row).optional()
}

/// Whether the run `id` exists.
pub(super) fn run_exists(conn: &Connection, ids: &RunIds, id: &str) -> rusqlite::Result<bool> {
    static EXISTS: LazyLock<String> =
        LazyLock::new(|| format!("SELECT {} IS NOT NULL", seq_of_id(1, 2)));
    row(conn, &EXISTS, params![ids.seq(id), id], |r| r.get(0))
}

/// The run of a tick key (periodic, scheduled_at in microseconds, attempt) in
/// `runs`.
pub(super) fn tick_run(
    conn: &Connection,
    periodic: &str,
    t: i64,
    attempt: u32,
) -> rusqlite::Result<Option<Run>> {
    row(
        conn,
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE periodic = ?1 AND scheduled_at = ?2 AND attempt = ?3"),
        params![periodic, t, attempt],
        run_from_row,
    )
    .optional()
}

/// The last build id and seq handed out, as stored (see the writer's
/// `counters`).
pub(super) fn last_counters(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    let build: i64 = row(
        conn,
        "SELECT MAX(COALESCE((SELECT value FROM meta WHERE key = 'build_id'), 0),
            COALESCE((SELECT build_id FROM runs ORDER BY seq DESC LIMIT 1), 0),
            COALESCE((SELECT MAX(first_build + last_seq - first_seq) FROM fire_log), 0))",
        [],
        |r| r.get(0),
    )?;
    let seq: i64 = row(
        conn,
        "SELECT MAX(COALESCE((SELECT value FROM meta WHERE key = 'seq'), 0),
            COALESCE((SELECT MAX(seq) FROM runs), 0),
            COALESCE((SELECT MAX(last_seq) FROM fire_log), 0))",
        [],
        |r| r.get(0),
    )?;
    Ok((build, seq))
}

/// Stores a spec unless one of its hash is stored.
pub(super) fn insert_spec(conn: &Connection, hash: &str, body: &str) -> rusqlite::Result<usize> {
    exec(
        conn,
        "INSERT OR IGNORE INTO specs(hash, body) VALUES (?1, ?2)",
        params![hash, body],
    )
}

/// Inserts a run's row: `p` binds [`RUN_COLUMNS`] and then `seq`.
pub(super) fn insert_run(conn: &Connection, p: impl rusqlite::Params) -> rusqlite::Result<usize> {
    exec(
        conn,
        &format!("INSERT INTO runs({RUN_COLUMNS}, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"),
        p,
    )
}

/// Inserts the pulls rows of the run numbered `seq` whose refs are
/// `refs_json` (none without refs or pulls); a pull named twice is kept once.
pub(super) fn insert_pulls(
    conn: &Connection,
    refs_json: &str,
    seq: i64,
) -> rusqlite::Result<usize> {
    exec(
        conn,
        "INSERT OR IGNORE INTO run_pulls(number, repo, seq, sha)
            SELECT json_extract(value, '$.number'),
                json_extract(?1, '$.org') || '/' || json_extract(?1, '$.repo'), ?2,
                COALESCE(json_extract(value, '$.sha'), '')
            FROM json_each(?1, '$.pulls')",
        params![refs_json, seq],
    )
}

/// Writes what a transition changes of `run`.
pub(super) fn update_run(conn: &Connection, ids: &RunIds, run: &Run) -> rusqlite::Result<usize> {
    exec(
        conn,
        &UPDATE_RUN,
        params![
            run.id,
            run.state.as_str(),
            run.description,
            run.cluster,
            run.url,
            run.pending_at.map(|t| t.as_microsecond()),
            run.completed_at.map(|t| t.as_microsecond()),
            run.pod_revival_count,
            ids.seq(&run.id),
        ],
    )
}

/// Writes a periodic's schedule state.
pub(super) fn put_state(
    tx: &rusqlite::Transaction<'_>,
    s: &PeriodicState,
) -> Result<(), StoreError> {
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

/// Records tick outcomes.
pub(super) fn put_outcomes(
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

/// The runs retention deletes.
#[derive(Default)]
pub(super) struct Retained {
    pub(super) seqs: Vec<i64>,
    pub(super) ids: Vec<String>,
    /// Their labels, counted.
    pub(super) counts: Vec<RunCount>,
}

/// The runs retention deletes: completed before `cutoff` (microseconds),
/// except the latest run of each periodic (by creation), as Prow's sinker
/// keeps it.
pub(super) fn retained_ids(
    tx: &rusqlite::Transaction<'_>,
    cutoff: i64,
) -> Result<Retained, StoreError> {
    let select = concat!(
        "SELECT seq, id, ",
        count_labels!(),
        " FROM runs WHERE completed_at IS NOT NULL AND completed_at < ?1
        AND seq NOT IN (SELECT MAX(seq) FROM runs WHERE periodic IS NOT NULL GROUP BY periodic)"
    );
    let mut stmt = tx.prepare(select).map_err(unavailable)?;
    let mut rows = stmt.query([cutoff]).map_err(unavailable)?;
    let mut out = Retained::default();
    let mut counts: std::collections::BTreeMap<RunCount, u64> = Default::default();
    while let Some(r) = rows.next().map_err(unavailable)? {
        out.seqs.push(r.get(0).map_err(unavailable)?);
        out.ids.push(r.get(1).map_err(unavailable)?);
        *counts
            .entry(count_from_row(r, 2).map_err(unavailable)?)
            .or_default() += 1;
    }
    out.counts = counts
        .into_iter()
        .map(|(c, count)| RunCount { count, ..c })
        .collect();
    Ok(out)
}

/// Keeps the last build id and seq handed out in `meta` (their runs may
/// all go, and neither is handed out twice: a seq names its run's id).
pub(super) fn keep_counters(conn: &Connection, build_id: i64, seq: i64) -> rusqlite::Result<usize> {
    exec(
        conn,
        "INSERT INTO meta(key, value) VALUES ('build_id', ?1), ('seq', ?2)
            ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [build_id, seq],
    )
}

/// Deletes runs by seq.
pub(super) fn delete_runs(tx: &rusqlite::Transaction<'_>, seqs: &[i64]) -> Result<(), StoreError> {
    let mut del = tx
        .prepare_cached("DELETE FROM runs WHERE seq = ?1")
        .map_err(unavailable)?;
    for seq in seqs {
        del.execute([seq]).map_err(unavailable)?;
    }
    Ok(())
}

/// The values a listing binds.
pub(super) type ListArgs = Vec<Box<dyn rusqlite::ToSql>>;

/// The query of a listing, and the values it binds (made before the reader's
/// connection is taken).
pub(super) fn list_query(ids: &RunIds, f: &RunFilter) -> (String, ListArgs) {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1");
    let mut args: ListArgs = Vec::new();
    // A pull's runs (a few, through `run_pulls`) drive the listing: the
    // other columns are checked on their rows (`+job`: SQLite would
    // otherwise walk a job's runs in order rather than sort a pull's few).
    let by_pull = f.pull.is_some() || f.head_sha.is_some();
    if by_pull {
        let mut sub = String::from("SELECT seq FROM run_pulls WHERE 1 = 1");
        for (column, v) in [
            (
                "number",
                f.pull.map(|n| Box::new(n) as Box<dyn rusqlite::ToSql>),
            ),
            (
                "repo",
                f.repo
                    .clone()
                    .map(|r| Box::new(r) as Box<dyn rusqlite::ToSql>),
            ),
            (
                "sha",
                f.head_sha
                    .clone()
                    .map(|s| Box::new(s) as Box<dyn rusqlite::ToSql>),
            ),
        ] {
            if let Some(v) = v {
                args.push(v);
                sub.push_str(&format!(" AND {column} = ?{}", args.len()));
            }
        }
        sql.push_str(&format!(" AND seq IN ({sub})"));
    }
    let mut add = |clause: &str, v: Box<dyn rusqlite::ToSql>| {
        args.push(v);
        sql.push_str(&format!(" AND {clause} = ?{}", args.len()));
    };
    if let (Some(r), false) = (&f.repo, by_pull) {
        add("refs_repo", Box::new(r.clone()));
    }
    if let Some(j) = &f.job {
        add(if by_pull { "+job" } else { "job" }, Box::new(j.clone()));
    }
    if let Some(p) = &f.periodic {
        add(
            if by_pull { "+periodic" } else { "periodic" },
            Box::new(p.clone()),
        );
        // Through the job's index.
        if f.job.is_none() && !by_pull {
            add("job", Box::new(crate::periodic_job(p).to_string()));
        }
    }
    if let Some(s) = f.state {
        // With a job, the job's index (`runs_job`) and the state checked on
        // its rows: `+state` keeps SQLite from walking `runs_state`, every
        // run in that state (most of a large store for `success`), for the
        // few of one job. A job's runs are a small part of the store; so are
        // a repository's and a pull's.
        let narrow = f.job.is_some() || f.periodic.is_some() || f.repo.is_some() || by_pull;
        add(
            if narrow { "+state" } else { "state" },
            Box::new(s.as_str()),
        );
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
    if let Some(s) = f.state {
        // An ended run has `completed_at`, an active one has not: the term
        // lets SQLite take the partial index that holds the state's runs
        // (`runs_state` for ended ones, `runs_active` for the others).
        sql.push_str(if s.is_final() {
            " AND completed_at IS NOT NULL"
        } else {
            " AND completed_at IS NULL"
        });
    }
    // Keyset cursors: the cursor run's `seq` (through the primary key), and
    // the rows beyond it. `before` walks the other way, nearest first; its
    // rows are put back in listing order by `list`.
    let backwards = f.counted_back();
    for (cursor, beyond) in [(&f.after, true), (&f.before, false)] {
        if let Some(id) = cursor {
            args.push(Box::new(ids.seq(id)));
            args.push(Box::new(id.clone()));
            let cmp = if beyond == f.oldest_first { ">" } else { "<" };
            sql.push_str(&format!(
                " AND seq {cmp} {}",
                seq_of_id(args.len() - 1, args.len())
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

/// Runs a listing made by [`list_query`] for `f`: its rows in listing
/// order, or `Err(ID)` when the cursor run `ID` of `f` does not exist.
pub(super) fn list(
    c: &Connection,
    ids: &RunIds,
    f: &RunFilter,
    sql: &str,
    args: &ListArgs,
) -> rusqlite::Result<Result<Vec<Run>, String>> {
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), run_from_row)?;
    let mut runs = rows.collect::<rusqlite::Result<Vec<Run>>>()?;
    if runs.is_empty() {
        // An empty page past a cursor: the cursor may be gone (the same
        // read transaction, so the answer is consistent with the page).
        for id in [&f.after, &f.before].into_iter().flatten() {
            if !run_exists(c, ids, id)? {
                return Ok(Err(id.clone()));
            }
        }
    }
    if f.counted_back() {
        runs.reverse();
    }
    Ok(Ok(runs))
}

/// A spec's body by hash.
pub(super) fn spec_body(c: &Connection, hash: &str) -> rusqlite::Result<Option<String>> {
    row(c, "SELECT body FROM specs WHERE hash = ?1", [hash], |r| {
        r.get(0)
    })
    .optional()
}

/// A periodic's schedule state.
pub(super) fn periodic_state(
    c: &Connection,
    periodic: &str,
) -> rusqlite::Result<Option<PeriodicState>> {
    row(c,
        "SELECT periodic, schedule_hash, first_seen, last_tick, paused, queued FROM periodic_state WHERE periodic = ?1",
        [periodic],
        state_from_row,
    )
    .optional()
}

/// The schedule states of `periodics`, into `out`: one statement per 500
/// periodics rather than one per periodic.
pub(super) fn periodic_states(
    c: &Connection,
    periodics: &[String],
    out: &mut HashMap<String, PeriodicState>,
) -> rusqlite::Result<()> {
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
}

/// Whether a periodic (`?1`) has an active run: a lookup in the partial
/// index of periodics' active runs.
pub(super) const PERIODIC_ACTIVE: &str =
    "SELECT 1 FROM runs WHERE periodic = ?1 AND completed_at IS NULL ORDER BY seq DESC LIMIT 1";

/// For each of `periodics`, its last run and whether one is active: two
/// index lookups per periodic on one connection, reading only the columns a
/// decision needs (no JSON).
pub(super) fn periodic_runs(
    c: &Connection,
    periodics: &[String],
) -> rusqlite::Result<HashMap<String, PeriodicRuns>> {
    let mut last = c.prepare_cached(
        "SELECT created_at, completed_at, scheduled_at, attempt, state, id FROM runs WHERE job = ?2 AND periodic = ?1 ORDER BY seq DESC LIMIT 1",
    )?;
    let mut active = c.prepare_cached(PERIODIC_ACTIVE)?;
    // In name order: neighbouring lookups share index pages.
    let mut sorted: Vec<&String> = periodics.iter().collect();
    sorted.sort_unstable();
    let mut out = HashMap::new();
    for p in sorted {
        let summary = last
            .query_row([p.as_str(), crate::periodic_job(p)], summary_from_row)
            .optional()?;
        let is_active = active.exists([p])?;
        out.insert(
            p.clone(),
            PeriodicRuns {
                last: summary,
                active: is_active,
            },
        );
    }
    Ok(out)
}

/// Every retained run counted by Prow's `prowjobs` labels: one grouped scan
/// (no run is decoded).
pub(super) fn count_runs(c: &Connection) -> rusqlite::Result<Vec<RunCount>> {
    let sql = concat!(
        "SELECT ",
        count_labels!(),
        ", COUNT(*) FROM runs GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8"
    );
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt.query_map([], |r| count_from_row(r, 0))?;
    rows.collect()
}

/// Per job, the runs that reached `pending` at or after `since` and their
/// run time (see [`crate::Store::job_demand`]), in one grouped scan.
///
/// No index serves `pending_at`: this reads every retained run, where an
/// index would cost every insert and every start of a run a page in its
/// commit (the schema's history drops indexes for that reason). The
/// dispatcher asks rarely (its demand is cached for minutes), and retention
/// bounds the table. `NOT INDEXED`: left to itself SQLite walks `runs_job`
/// to group without sorting, and fetches each row at random, 3 to 5 times
/// slower than reading the table in order (300,000 runs of 1 KiB: 6 s
/// against 1.2 to 1.8 s, cold). Times are summed in whole microseconds
/// (exact) and converted once, as the other stores do.
pub(super) fn job_demand(
    c: &Connection,
    since: jiff::Timestamp,
    now: jiff::Timestamp,
) -> rusqlite::Result<Vec<JobDemand>> {
    let mut stmt = c.prepare_cached(
        "SELECT job, COUNT(*), SUM(MAX(0, COALESCE(completed_at, ?2) - pending_at))
         FROM runs NOT INDEXED WHERE pending_at >= ?1 GROUP BY job ORDER BY job",
    )?;
    let rows = stmt.query_map(params![since.as_microsecond(), now.as_microsecond()], |r| {
        let runs: i64 = r.get(1)?;
        let micros: i64 = r.get(2)?;
        Ok(JobDemand {
            job: r.get(0)?,
            runs: runs as u64,
            run_seconds: micros as f64 / 1e6,
        })
    })?;
    rows.collect()
}

/// A periodic's outcomes, oldest first.
pub(super) fn outcomes(c: &Connection, periodic: &str) -> rusqlite::Result<Vec<TickOutcome>> {
    let mut stmt = c.prepare(
        "SELECT periodic, first_tick, last_tick, count, outcome, run_id, recorded_at FROM tick_outcomes WHERE periodic = ?1 ORDER BY first_tick, rowid",
    )?;
    let rows = stmt.query_map([periodic], outcome_from_row)?;
    rows.collect()
}

/// A periodic's latest skips (`?2` of them), newest first.
pub(super) const LATEST_SKIPS: &str = "SELECT periodic, first_tick, last_tick, count, outcome, run_id, recorded_at FROM tick_outcomes WHERE periodic = ?1 AND outcome <> 'run' ORDER BY first_tick DESC, rowid DESC LIMIT ?2";

/// The ticks a periodic's skips hold.
pub(super) const SKIPPED_TOTAL: &str =
    "SELECT COALESCE(SUM(count), 0) FROM tick_outcomes WHERE periodic = ?1 AND outcome <> 'run'";

/// A periodic's latest `limit` skip outcomes (newest first) and the ticks
/// all its skips hold, through the partial index of skips.
pub(super) fn skipped_ticks(
    c: &Connection,
    periodic: &str,
    limit: usize,
) -> rusqlite::Result<crate::SkippedTicks> {
    let mut stmt = c.prepare_cached(LATEST_SKIPS)?;
    let rows = stmt.query_map(
        rusqlite::params![periodic, i64::try_from(limit).unwrap_or(i64::MAX)],
        outcome_from_row,
    )?;
    let recent = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let total: i64 = row(c, SKIPPED_TOTAL, [periodic], |r| r.get(0))?;
    Ok(crate::SkippedTicks {
        recent,
        total: total as u64,
    })
}

/// For each group of prepared runs, whether a run of one of their ticks is in
/// `runs`.
pub(super) fn ticks_taken<'a>(
    c: &Connection,
    groups: impl Iterator<Item = &'a [Prepared]>,
) -> rusqlite::Result<Vec<bool>> {
    let mut stmt = c.prepare_cached(
        "SELECT 1 FROM runs WHERE periodic = ?1 AND scheduled_at = ?2 AND attempt = ?3",
    )?;
    groups
        .map(|runs| {
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
}

/// Writes a repository's record (its JSON), replacing the one of `repo`.
pub(super) fn put_repo(conn: &Connection, repo: &str, record: &str) -> rusqlite::Result<usize> {
    exec(
        conn,
        "INSERT INTO repos(repo, record) VALUES (?1, ?2) ON CONFLICT(repo) DO UPDATE SET record = ?2",
        params![repo, record],
    )
}

/// Deletes a repository's record; how many went (0 or 1).
pub(super) fn delete_repo(conn: &Connection, repo: &str) -> rusqlite::Result<usize> {
    exec(conn, "DELETE FROM repos WHERE repo = ?1", [repo])
}

/// Every repository's record (its JSON), by repository.
pub(super) fn repo_records(c: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = c.prepare_cached("SELECT record FROM repos ORDER BY repo")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// The seq of the kept delivery of (forge, delivery id), and whether it was
/// processed. `delivery_id <> ''` lets SQLite use the partial unique index.
pub(super) const FIND_DELIVERY: &str = "SELECT seq, processed_at IS NOT NULL FROM deliveries WHERE forge = ?1 AND delivery_id = ?2 AND delivery_id <> ''";

/// The kept delivery of (forge, delivery id), if any: its seq and whether it
/// was processed.
pub(super) fn find_delivery(
    conn: &Connection,
    forge: &str,
    delivery_id: &str,
) -> rusqlite::Result<Option<(i64, bool)>> {
    row(conn, FIND_DELIVERY, params![forge, delivery_id], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()
}

/// Keeps a delivery; its seq.
pub(super) fn insert_delivery(conn: &Connection, d: &NewDelivery) -> rusqlite::Result<i64> {
    exec(
        conn,
        "INSERT INTO deliveries(forge, event, delivery_id, repo, body, received_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            d.forge,
            d.event,
            d.delivery_id,
            d.repo,
            d.body,
            d.received_at.as_microsecond(),
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// The columns of a delivery's row, in the order [`delivery_from_row`]
/// decodes them.
macro_rules! delivery_columns {
    () => {
        "seq, forge, event, delivery_id, repo, body, received_at"
    };
}

/// The pending deliveries (not processed) after seq `after`, at most `limit`,
/// in seq order, through the partial index of pending ones.
pub(super) const PENDING_DELIVERIES: &str = concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM deliveries WHERE processed_at IS NULL AND seq > ?1 ORDER BY seq LIMIT ?2"
);

/// The pending deliveries after seq `after` (see [`PENDING_DELIVERIES`]).
pub(super) fn pending_deliveries(
    c: &Connection,
    after: u64,
    limit: usize,
) -> rusqlite::Result<Vec<StoredDelivery>> {
    let mut stmt = c.prepare_cached(PENDING_DELIVERIES)?;
    let rows = stmt.query_map(
        params![
            i64::try_from(after).unwrap_or(i64::MAX),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
        delivery_from_row,
    )?;
    rows.collect()
}

/// A delivery by seq.
pub(super) fn delivery(c: &Connection, seq: u64) -> rusqlite::Result<Option<StoredDelivery>> {
    let Ok(seq) = i64::try_from(seq) else {
        return Ok(None);
    };
    row(
        c,
        concat!(
            "SELECT ",
            delivery_columns!(),
            " FROM deliveries WHERE seq = ?1"
        ),
        [seq],
        delivery_from_row,
    )
    .optional()
}

/// Marks deliveries processed at `at` (microseconds), dropping their bodies;
/// those already processed keep their time.
pub(super) fn mark_processed(conn: &Connection, seqs: &[u64], at: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE deliveries SET processed_at = ?2, body = NULL WHERE seq = ?1 AND processed_at IS NULL",
    )?;
    for &seq in seqs {
        if let Ok(seq) = i64::try_from(seq) {
            stmt.execute(params![seq, at])?;
        }
    }
    Ok(())
}

/// Deletes the processed deliveries received before `before`
/// (microseconds); how many.
pub(super) fn prune_deliveries(conn: &Connection, before: i64) -> rusqlite::Result<usize> {
    exec(
        conn,
        "DELETE FROM deliveries WHERE processed_at IS NOT NULL AND received_at < ?1",
        [before],
    )
}

/// The columns of an outbox entry's row, in the order [`report_from_row`]
/// decodes them.
macro_rules! report_columns {
    () => {
        "id, key, kind, run_id, version, payload, attempts, created_at, next_attempt_at, last_error, state, finished_at, superseded_by"
    };
}

/// The newest version a key has had.
pub(super) fn report_key_version(conn: &Connection, key: &str) -> rusqlite::Result<Option<i64>> {
    row(
        conn,
        "SELECT version FROM report_keys WHERE key = ?1",
        [key],
        |r| r.get(0),
    )
    .optional()
}

/// The pending entry of a key, through the index by key.
pub(super) const PENDING_OF_KEY: &str =
    "SELECT id FROM reports WHERE key = ?1 AND state = 'pending'";

/// Queues a report (its JSON encoded by the caller), superseding the
/// pending entry of its key if one: the new entry's id, and the one it
/// superseded.
pub(super) fn insert_report(
    conn: &Connection,
    r: &NewReport,
    payload: &str,
) -> rusqlite::Result<(i64, Option<i64>)> {
    let version = r.version as i64;
    let created = r.created_at.as_microsecond();
    let pending: Option<i64> = row(conn, PENDING_OF_KEY, [&r.key], |x| x.get(0)).optional()?;
    if let Some(old) = pending {
        exec(
            conn,
            "UPDATE reports SET state = 'superseded', finished_at = ?2, superseded_by = ?3 WHERE id = ?1",
            params![old, created, version],
        )?;
    }
    exec(
        conn,
        "INSERT INTO reports(key, kind, run_id, version, payload, attempts, created_at, next_attempt_at, state) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6, 'pending')",
        params![r.key, r.kind.as_str(), r.run_id, version, payload, created],
    )?;
    let id = conn.last_insert_rowid();
    exec(
        conn,
        "INSERT INTO report_keys(key, version) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET version = ?2",
        params![r.key, version],
    )?;
    Ok((id, pending))
}

/// Counts an attempt of the pending entry `id` at `version` (microseconds
/// for `at`): delivered (`failure` none), to retry, or refused. Whether it
/// was pending at that version.
pub(super) fn report_attempt(
    conn: &Connection,
    id: u64,
    version: u64,
    failure: Option<&ReportFailure>,
    at: i64,
) -> rusqlite::Result<bool> {
    let (Ok(id), Ok(version)) = (i64::try_from(id), i64::try_from(version)) else {
        return Ok(false);
    };
    let only_pending = "WHERE id = ?1 AND version = ?2 AND state = 'pending'";
    let n = match failure {
        None => exec(
            conn,
            &format!("UPDATE reports SET state = 'delivered', finished_at = ?3, attempts = attempts + 1 {only_pending}"),
            params![id, version, at],
        )?,
        Some(ReportFailure::Retry { at: again, error }) => exec(
            conn,
            &format!("UPDATE reports SET next_attempt_at = ?3, last_error = ?4, attempts = attempts + 1 {only_pending}"),
            params![id, version, again.as_microsecond(), error],
        )?,
        Some(ReportFailure::Permanent { error }) => exec(
            conn,
            &format!("UPDATE reports SET state = 'refused', finished_at = ?3, last_error = ?4, attempts = attempts + 1 {only_pending}"),
            params![id, version, at, error],
        )?,
    };
    Ok(n > 0)
}

/// The due entries (`?1`: now, in microseconds), at most `?2`, in queueing
/// order, through the partial index of pending ones.
pub(super) const DUE_REPORTS: &str = concat!(
    "SELECT ",
    report_columns!(),
    " FROM reports WHERE state = 'pending' AND next_attempt_at <= ?1 ORDER BY id LIMIT ?2"
);

/// The due entries at `now` (see [`DUE_REPORTS`]).
pub(super) fn due_reports(
    c: &Connection,
    now: i64,
    limit: usize,
) -> rusqlite::Result<Vec<StoredReport>> {
    let mut stmt = c.prepare_cached(DUE_REPORTS)?;
    let rows = stmt.query_map(
        params![now, i64::try_from(limit).unwrap_or(i64::MAX)],
        report_from_row,
    )?;
    rows.collect()
}

/// A run's entries, in queueing order.
pub(super) const REPORTS_OF_RUN: &str = concat!(
    "SELECT ",
    report_columns!(),
    " FROM reports WHERE run_id = ?1 ORDER BY id"
);

/// A run's entries (see [`REPORTS_OF_RUN`]).
pub(super) fn reports_of_run(c: &Connection, run_id: &str) -> rusqlite::Result<Vec<StoredReport>> {
    let mut stmt = c.prepare_cached(REPORTS_OF_RUN)?;
    let rows = stmt.query_map([run_id], report_from_row)?;
    rows.collect()
}

/// The pending entries and the refused ones kept, each counted through an
/// index (an ended entry has its end: `finished_at IS NOT NULL` lets SQLite
/// use the partial index of ended ones).
pub(super) const REPORT_COUNTS: &str = "SELECT
    (SELECT COUNT(*) FROM reports WHERE state = 'pending'),
    (SELECT COUNT(*) FROM reports WHERE state = 'refused' AND finished_at IS NOT NULL)";

/// How many entries are pending, and how many refused ones are kept.
pub(super) fn report_counts(c: &Connection) -> rusqlite::Result<ReportCounts> {
    row(c, REPORT_COUNTS, [], |r| {
        Ok(ReportCounts {
            pending: r.get::<_, i64>(0)? as u64,
            refused: r.get::<_, i64>(1)? as u64,
        })
    })
}

/// The entries that ended before `?1` (microseconds), deleted through the
/// index of ended ones (a pending entry has no end); each returns its key.
pub(super) const PRUNE_REPORTS: &str = "DELETE FROM reports
    WHERE state IN ('delivered', 'refused', 'superseded') AND finished_at < ?1 RETURNING key";

/// Deletes the entries that ended before `before` (microseconds), and the
/// newest versions of the keys left without one; how many entries went.
pub(super) fn prune_reports(conn: &Connection, before: i64) -> rusqlite::Result<usize> {
    let deleted: Vec<String> = {
        let mut stmt = conn.prepare_cached(PRUNE_REPORTS)?;
        let rows = stmt.query_map([before], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let pruned = deleted.len();
    let keys: std::collections::BTreeSet<String> = deleted.into_iter().collect();
    let mut forget = conn.prepare_cached(
        "DELETE FROM report_keys WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM reports WHERE key = ?1)",
    )?;
    for key in &keys {
        forget.execute([key])?;
    }
    Ok(pruned)
}
