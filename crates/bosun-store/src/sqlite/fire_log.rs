//! The fire log's records (see the store's documentation), and fires
//! prepared ahead encoded as one.
//!
//! A fire is logged as one line of JSON: the periodic, each new run's id,
//! template and tick, the tick outcomes and the schedule state. A row of
//! `fire_log` holds one fire, or all the fires prepared for one instant, one
//! line each (a single insert, however many there are); its runs are numbered
//! in line order from its `first_seq` and `first_build`.
//! What a run shares with every other run of its periodic (job, cluster,
//! labels, annotations, refs, spec) is its template, stored once per content in
//! `run_templates`, as specs are. A fire is then a few hundred bytes where its
//! rows in `runs`, `tick_outcomes` and `periodic_state` would be kilobytes of
//! pages and index entries, and the fold writes those rows later.

use std::collections::HashMap;

use jiff::Timestamp;
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::cache::{counters, LogKey, WriterCache};
use super::codec::{Prepared, Template, TemplateCols};
use super::error::unavailable;
use super::sql::{exec, insert_pulls, put_state, row, RUN_COLUMNS};
use super::versions::Versions;
use crate::prepared::{LogEntry, Payload, PreparedFire};
use crate::run::{job_type_from_str, Run};
use crate::{PeriodicState, PreparedFires, StoreError, TickOutcome};

/// One logged fire.
#[derive(Serialize, Deserialize)]
struct LoggedFire {
    /// The periodic.
    p: String,
    /// New runs: id, template hash, scheduled_at, attempt.
    r: Vec<(String, String, Option<i64>, u32)>,
    /// Outcomes: first_tick, last_tick, count, outcome, run_id, recorded_at.
    o: Vec<(i64, i64, u64, String, Option<String>, i64)>,
    /// Schedule state: schedule_hash, first_seen, last_tick, paused, queued.
    s: (String, i64, Option<i64>, bool, Option<i64>),
}

/// A new run of a logged fire: what the run the caller gets back is made of.
pub(super) struct LoggedRun {
    pub(super) id: String,
    pub(super) new: crate::NewRun,
    pub(super) spec_hash: String,
}

impl From<Prepared> for LoggedRun {
    fn from(p: Prepared) -> Self {
        LoggedRun {
            id: p.id,
            new: p.new,
            spec_hash: p.spec_hash,
        }
    }
}

/// Encodes a fire whose new runs are `runs` (ids assigned) and whose
/// outcomes name their runs.
pub(super) fn encode(runs: &[Prepared], outcomes: &[TickOutcome], state: &PeriodicState) -> String {
    let us = |t: Timestamp| t.as_microsecond();
    let fire = LoggedFire {
        p: state.periodic.clone(),
        r: runs
            .iter()
            .map(|p| {
                (
                    p.id.clone(),
                    p.template
                        .as_ref()
                        .expect("fire runs have templates")
                        .hash
                        .clone(),
                    p.new.scheduled_at.map(us),
                    p.new.attempt,
                )
            })
            .collect(),
        o: outcomes
            .iter()
            .map(|o| {
                (
                    us(o.first_tick),
                    us(o.last_tick),
                    o.count,
                    o.outcome.clone(),
                    o.run_id.clone(),
                    us(o.recorded_at),
                )
            })
            .collect(),
        s: (
            state.schedule_hash.clone(),
            us(state.first_seen),
            state.last_tick.map(us),
            state.paused,
            state.queued.map(us),
        ),
    };
    serde_json::to_string(&fire).expect("serializable")
}

/// A `run` outcome without its run gets the id of its tick's run (attempt 0)
/// among prepared runs.
pub(super) fn fill_from_prepared(o: &mut TickOutcome, runs: &[Prepared]) {
    if o.outcome == "run" && o.run_id.is_none() {
        let tick = crate::run::micros(o.first_tick);
        o.run_id = runs
            .iter()
            .find(|p| p.new.scheduled_at == Some(tick) && p.new.attempt == 0)
            .map(|p| p.id.clone());
    }
}

/// A fire to prepare: the version it was decided on, its runs (prepared),
/// outcomes and schedule state.
pub(super) type FireEntry = (u64, Vec<Prepared>, Vec<TickOutcome>, PeriodicState);

/// The templates of `entries`' runs, each once.
pub(super) fn distinct_templates(entries: &[FireEntry]) -> Vec<Template> {
    let mut seen = std::collections::HashSet::new();
    entries
        .iter()
        .flat_map(|(_, runs, ..)| runs.iter())
        .filter_map(|p| p.template.as_ref())
        .filter(|t| seen.insert(t.hash.clone()))
        .map(|t| Template {
            hash: t.hash.clone(),
            body: t.body.clone(),
            spec_hash: t.spec_hash.clone(),
            spec_json: t.spec_json.clone(),
        })
        .collect()
}

/// Prepared fires of `entries` (`conflicts`: whether each has a run of one
/// of its ticks already), encoded as one record, their templates stored in
/// the writer's cache epoch `templates_epoch`.
pub(super) fn prepared_fires(
    mut entries: Vec<FireEntry>,
    conflicts: Vec<bool>,
    templates_epoch: u64,
) -> PreparedFires {
    let mut log_body = String::new();
    let fires = entries
        .drain(..)
        .zip(conflicts)
        .map(|((version, runs, mut outcomes, state), conflict)| {
            for o in &mut outcomes {
                fill_from_prepared(o, &runs);
            }
            let start = log_body.len();
            log_body.push_str(&encode(&runs, &outcomes, &state));
            log_body.push('\n');
            // Only what the commit needs is kept (the rest is freed here,
            // not in the writer), and the runs are made now: the commit
            // gives them their build ids and creation time.
            let entry = LogEntry {
                runs: runs
                    .into_iter()
                    .map(|p| p.new.into_run(p.id, 0, p.spec_hash, Timestamp::UNIX_EPOCH))
                    .collect(),
                line: start..log_body.len(),
                stripe: Versions::stripe(&state.periodic),
                templates_epoch,
            };
            PreparedFire {
                periodic: state.periodic.clone(),
                version,
                conflict,
                payload: Payload::Log(Box::new(entry)),
            }
        })
        .collect();
    PreparedFires { fires, log_body }
}

fn decode(body: &str) -> Result<LoggedFire, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Invalid(format!("fire log record: {e}")))
}

fn ts(us: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(us).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// Stores `t` (and its spec) unless the writer knows it is stored.
pub(super) fn store_template(
    tx: &rusqlite::Transaction<'_>,
    t: &Template,
    cache: &mut WriterCache,
) -> Result<(), StoreError> {
    if cache.templates.contains(&t.hash) {
        return Ok(());
    }
    if !cache.specs.contains(&t.spec_hash) {
        exec(
            tx,
            "INSERT OR IGNORE INTO specs(hash, body) VALUES (?1, ?2)",
            params![t.spec_hash, &*t.spec_json],
        )
        .map_err(unavailable)?;
        cache.specs.insert(t.spec_hash.clone());
    }
    exec(
        tx,
        "INSERT OR IGNORE INTO run_templates(hash, body) VALUES (?1, ?2)",
        params![t.hash, t.body],
    )
    .map_err(unavailable)?;
    cache.templates.insert(t.hash.clone());
    Ok(())
}

/// Inserts a record of `n` new runs created at `at`: returns its id and the
/// build id of its first run (the others follow in order).
pub(super) fn insert_record(
    tx: &rusqlite::Transaction<'_>,
    body: &str,
    n: usize,
    at: Timestamp,
    cache: &mut WriterCache,
) -> Result<(i64, i64), StoreError> {
    let (last_build, last_seq) = counters(tx, cache)?;
    let first_build = (last_build + 1).max(at.as_microsecond());
    let first_seq = last_seq + 1;
    let n = n as i64;
    exec(
        tx,
        "INSERT INTO fire_log(first_seq, last_seq, first_build, created_at, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![first_seq, first_seq + n - 1, first_build, at.as_microsecond(), body],
    )
    .map_err(unavailable)?;
    cache.log_records += 1;
    if n > 0 {
        cache.counters = Some((first_build + n - 1, first_seq + n - 1));
    } else if cache.counters.is_none() {
        cache.counters = Some((last_build, last_seq));
    }
    Ok((tx.last_insert_rowid(), first_build))
}

/// Appends the record `body` of one fire whose new runs are `runs` (tick keys
/// checked, templates stored), created at `at`; returns the runs.
pub(super) fn append(
    tx: &rusqlite::Transaction<'_>,
    runs: Vec<LoggedRun>,
    body: &str,
    at: Timestamp,
    cache: &mut WriterCache,
) -> Result<Vec<Run>, StoreError> {
    let (record, first_build) = insert_record(tx, body, runs.len(), at, cache)?;
    // The tick keys of a big fire are indexed only if a later fire needs
    // them (`find_tick`).
    let index = !runs.is_empty() && !cache.log_keys_partial && runs.len() < INDEX_KEYS_MAX;
    if !runs.is_empty() && !index {
        cache.log_keys_partial = true;
    }
    Ok(runs
        .into_iter()
        .enumerate()
        .map(|(k, p)| {
            if index {
                if let (Some(periodic), Some(t)) = (&p.new.periodic, p.new.scheduled_at) {
                    cache.log_keys.insert(
                        (periodic.clone(), t.as_microsecond(), p.new.attempt),
                        LogKey {
                            record,
                            line: 0,
                            in_line: k,
                            in_record: k,
                        },
                    );
                }
            }
            p.new
                .into_run(p.id, first_build + k as i64, p.spec_hash, at)
        })
        .collect())
}

/// A record with more runs than this leaves its tick keys to `index_log_keys`.
const INDEX_KEYS_MAX: usize = 16;

/// Indexes the tick keys of every record of the unfolded log.
pub(super) fn index_log_keys(
    tx: &rusqlite::Transaction<'_>,
    cache: &mut WriterCache,
) -> Result<(), StoreError> {
    let mut stmt = tx
        .prepare_cached("SELECT id, body FROM fire_log")
        .map_err(unavailable)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .map_err(unavailable)?;
    cache.log_keys.clear();
    for r in rows {
        let (record, body) = r.map_err(unavailable)?;
        let mut in_record = 0;
        for (line, text) in body.lines().enumerate() {
            let fire = decode(text)?;
            for (in_line, (_, _, t, attempt)) in fire.r.into_iter().enumerate() {
                if let Some(t) = t {
                    cache.log_keys.insert(
                        (fire.p.clone(), t, attempt),
                        LogKey {
                            record,
                            line,
                            in_line,
                            in_record,
                        },
                    );
                }
                in_record += 1;
            }
        }
    }
    cache.log_keys_partial = false;
    Ok(())
}

fn template(
    tx: &rusqlite::Connection,
    hash: &str,
    known: &mut HashMap<String, TemplateCols>,
) -> Result<TemplateCols, StoreError> {
    if let Some(t) = known.get(hash) {
        return Ok(t.clone());
    }
    let body: String = row(
        tx,
        "SELECT body FROM run_templates WHERE hash = ?1",
        [hash],
        |r| r.get(0),
    )
    .optional()
    .map_err(unavailable)?
    .ok_or_else(|| StoreError::Invalid(format!("run template {hash} is missing")))?;
    let cols: TemplateCols =
        serde_json::from_str(&body).map_err(|e| StoreError::Invalid(e.to_string()))?;
    known.insert(hash.to_string(), cols.clone());
    Ok(cols)
}

/// The `k`th run of log record `record` (a tick key found in the unfolded log).
pub(super) fn logged_run(tx: &rusqlite::Connection, key: LogKey) -> Result<Run, StoreError> {
    let LogKey {
        record,
        line,
        in_line,
        in_record,
    } = key;
    let (first_build, created_at, body): (i64, i64, String) = row(
        tx,
        "SELECT first_build, created_at, body FROM fire_log WHERE id = ?1",
        [record],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .map_err(unavailable)?;
    let missing = || StoreError::Invalid(format!("fire log record {record} has no run {key:?}"));
    let fire = decode(body.lines().nth(line).ok_or_else(missing)?)?;
    let (id, hash, scheduled_at, attempt) = fire.r.get(in_line).cloned().ok_or_else(missing)?;
    let k = in_record;
    let t = template(tx, &hash, &mut HashMap::new())?;
    Ok(Run {
        id,
        build_id: (first_build + k as i64).to_string(),
        job: t.0,
        job_type: job_type_from_str(&t.1)
            .ok_or_else(|| StoreError::Invalid(format!("job type {}", t.1)))?,
        periodic: t.2,
        configured_cluster: t.3,
        cluster: None,
        refs: t.4.as_deref().map(json).transpose()?,
        extra_refs: json(&t.5)?,
        labels: labels(&t.6)?,
        annotations: labels(&t.7)?,
        spec_hash: t.8,
        scheduled_at: scheduled_at.map(ts).transpose()?,
        attempt,
        pod_revival_count: 0,
        created_at: ts(created_at)?,
        pending_at: None,
        completed_at: None,
        state: t
            .9
            .parse()
            .map_err(|_| StoreError::Invalid(format!("run state {}", t.9)))?,
        description: t.10,
        url: None,
    })
}

/// Labels or annotations, shared with other runs'
/// ([`crate::run::shared_labels`]).
fn labels(s: &str) -> Result<crate::run::Labels, StoreError> {
    crate::run::shared_labels(s).map_err(|e| StoreError::Invalid(e.to_string()))
}

fn json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// Moves every logged fire into `runs`, `tick_outcomes` and `periodic_state`,
/// in log order (a later schedule state of a periodic replaces an earlier
/// one), and empties the log. Run in the caller's transaction.
pub(super) fn fold(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let records: Vec<(i64, i64, i64, String)> = {
        let mut stmt = tx
            .prepare_cached(
                "SELECT first_seq, first_build, created_at, body FROM fire_log ORDER BY id",
            )
            .map_err(unavailable)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(unavailable)?;
        rows.collect::<rusqlite::Result<_>>().map_err(unavailable)?
    };
    if records.is_empty() {
        return Ok(());
    }
    let mut known = HashMap::new();
    // Whether a template's refs name pulls, by template (an in-repo
    // periodic's refs name none: no statement for its runs' pulls).
    let mut pulls: HashMap<String, bool> = HashMap::new();
    let mut insert_run = tx
        // Ids drawn at random, indexed (see `run_ids`).
        .prepare_cached(&format!("INSERT INTO runs({RUN_COLUMNS}, seq, random_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, 1)"))
        .map_err(unavailable)?;
    let mut insert_outcome = tx
        .prepare_cached("INSERT INTO tick_outcomes(periodic, first_tick, last_tick, count, outcome, run_id, recorded_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
        .map_err(unavailable)?;
    for (first_seq, first_build, created_at, body) in records {
        let mut k = 0i64;
        for text in body.lines() {
            let fire = decode(text)?;
            for (id, hash, scheduled_at, attempt) in fire.r.iter() {
                let t = template(tx, hash, &mut known)?;
                insert_run
                    .execute(params![
                        id,
                        first_build + k,
                        t.0,
                        t.1,
                        t.2,
                        t.3,
                        None::<String>,
                        t.4,
                        t.5,
                        t.6,
                        t.7,
                        t.8,
                        scheduled_at,
                        attempt,
                        0,
                        created_at,
                        None::<i64>,
                        None::<i64>,
                        t.9,
                        t.10,
                        None::<String>,
                        first_seq + k,
                    ])
                    .map_err(unavailable)?;
                if let Some(refs) = &t.4 {
                    let named = match pulls.get(hash.as_str()) {
                        Some(&named) => named,
                        None => {
                            let refs: bosun_config::types::Refs = json(refs)?;
                            let named = !refs.pulls.is_empty();
                            pulls.insert(hash.clone(), named);
                            named
                        }
                    };
                    if named {
                        insert_pulls(tx, refs, first_seq + k).map_err(unavailable)?;
                    }
                }
                k += 1;
            }
            for (first, last, count, outcome, run_id, recorded_at) in &fire.o {
                insert_outcome
                    .execute(params![
                        fire.p,
                        first,
                        last,
                        *count as i64,
                        outcome,
                        run_id,
                        recorded_at
                    ])
                    .map_err(unavailable)?;
            }
            let (schedule_hash, first_seen, last_tick, paused, queued) = fire.s;
            put_state(
                tx,
                &PeriodicState {
                    periodic: fire.p,
                    schedule_hash,
                    first_seen: ts(first_seen)?,
                    last_tick: last_tick.map(ts).transpose()?,
                    paused,
                    queued: queued.map(ts).transpose()?,
                },
            )?;
        }
    }
    exec(tx, "DELETE FROM fire_log", []).map_err(unavailable)?;
    Ok(())
}
