//! Rows and the store's values: a run, a schedule state, an outcome, a kept
//! webhook delivery decoded from its row (`ts`, `json`: the columns'
//! encodings); a new run encoded for its row by its caller ([`Prepared`]), and
//! its template, the columns every run of a periodic shares ([`TemplateCols`],
//! stored once per content).

use std::sync::Arc;

use jiff::Timestamp;
use rusqlite::Row;
use serde::{Deserialize, Serialize};

use crate::reports::{ReportOutcome, StoredReport};
use crate::repos::StoredDelivery;
use crate::run::{job_type_from_str, Run};
use crate::{new_run_id, NewRun, PeriodicState, RunCount, RunSummary, TickOutcome};

/// A timestamp column (microseconds).
pub(super) fn ts(micros: i64) -> rusqlite::Result<Timestamp> {
    Timestamp::from_microsecond(micros)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// A nullable timestamp column.
pub(super) fn opt_ts(v: Option<i64>) -> rusqlite::Result<Option<Timestamp>> {
    v.map(ts).transpose()
}

/// A JSON column.
pub(super) fn json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Labels or annotations from their JSON column, shared with other runs'
/// ([`crate::run::shared_labels`]).
fn labels(s: &str) -> rusqlite::Result<crate::run::Labels> {
    crate::run::shared_labels(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// A value as its JSON column.
pub(super) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable")
}

/// A run's row (the columns of `sql::RUN_COLUMNS`, in order).
pub(super) fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
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
        labels: labels(&r.get::<_, String>(9)?)?,
        annotations: labels(&r.get::<_, String>(10)?)?,
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
pub(super) fn state_from_row(r: &Row<'_>) -> rusqlite::Result<PeriodicState> {
    Ok(PeriodicState {
        periodic: r.get(0)?,
        schedule_hash: r.get(1)?,
        first_seen: ts(r.get(2)?)?,
        last_tick: opt_ts(r.get(3)?)?,
        paused: r.get(4)?,
        queued: opt_ts(r.get(5)?)?,
    })
}

/// A row of the columns a scheduling decision looks at (`created_at,
/// completed_at, scheduled_at, attempt, state, id`).
pub(super) fn summary_from_row(r: &Row<'_>) -> rusqlite::Result<RunSummary> {
    let state: String = r.get(4)?;
    Ok(RunSummary {
        created_at: ts(r.get(0)?)?,
        completed_at: opt_ts(r.get(1)?)?,
        scheduled_at: opt_ts(r.get(2)?)?,
        attempt: r.get(3)?,
        state: state.parse().map_err(|_| {
            rusqlite::Error::InvalidColumnType(4, state, rusqlite::types::Type::Text)
        })?,
        id: r.get(5)?,
    })
}

/// A `tick_outcomes` row (`periodic, first_tick, last_tick, count, outcome,
/// run_id, recorded_at`).
pub(super) fn outcome_from_row(r: &Row<'_>) -> rusqlite::Result<TickOutcome> {
    Ok(TickOutcome {
        periodic: r.get(0)?,
        first_tick: ts(r.get(1)?)?,
        last_tick: ts(r.get(2)?)?,
        count: r.get::<_, i64>(3)? as u64,
        outcome: r.get(4)?,
        run_id: r.get(5)?,
        recorded_at: ts(r.get(6)?)?,
    })
}

/// A `deliveries` row (`seq, forge, event, delivery_id, repo, body,
/// received_at`); a processed one's body is NULL, read as empty.
pub(super) fn delivery_from_row(r: &Row<'_>) -> rusqlite::Result<StoredDelivery> {
    Ok(StoredDelivery {
        seq: r.get::<_, i64>(0)? as u64,
        forge: r.get(1)?,
        event: r.get(2)?,
        delivery_id: r.get(3)?,
        repo: r.get(4)?,
        body: r.get::<_, Option<Vec<u8>>>(5)?.unwrap_or_default(),
        received_at: ts(r.get(6)?)?,
    })
}

/// A `reports` row (`id, key, kind, run_id, version, payload, attempts,
/// created_at, next_attempt_at, last_error, state, finished_at,
/// superseded_by`).
pub(super) fn report_from_row(r: &Row<'_>) -> rusqlite::Result<StoredReport> {
    let kind: String = r.get(2)?;
    let state: String = r.get(10)?;
    let finished: Option<i64> = r.get(11)?;
    let bad =
        |i: usize, v: String| rusqlite::Error::InvalidColumnType(i, v, rusqlite::types::Type::Text);
    let at = || ts(finished.unwrap_or_default());
    let outcome = match state.as_str() {
        "pending" => ReportOutcome::Pending,
        "delivered" => ReportOutcome::Delivered { at: at()? },
        "refused" => ReportOutcome::Refused { at: at()? },
        "superseded" => ReportOutcome::Superseded {
            at: at()?,
            by_version: r.get::<_, i64>(12)? as u64,
        },
        _ => return Err(bad(10, state)),
    };
    Ok(StoredReport {
        id: r.get::<_, i64>(0)? as u64,
        key: r.get(1)?,
        kind: kind.parse().map_err(|_| bad(2, kind))?,
        run_id: r.get(3)?,
        version: r.get::<_, i64>(4)? as u64,
        payload: json(&r.get::<_, String>(5)?)?,
        attempts: r.get(6)?,
        created_at: ts(r.get(7)?)?,
        next_attempt_at: ts(r.get(8)?)?,
        last_error: r.get(9)?,
        outcome,
    })
}

/// The labels of Prow's `prowjobs` gauge in a row, from column `at` on
/// (`count_labels!`'s eight), and a count after them if there is one (else 1).
pub(super) fn count_from_row(r: &Row<'_>, at: usize) -> rusqlite::Result<RunCount> {
    Ok(RunCount {
        job: r.get(at)?,
        job_type: r.get(at + 1)?,
        state: r.get(at + 2)?,
        org: r.get(at + 3)?,
        repo: r.get(at + 4)?,
        base_ref: r.get(at + 5)?,
        cluster: r.get(at + 6)?,
        retest: r.get(at + 7)?,
        count: if r.as_ref().column_count() > at + 8 {
            r.get::<_, i64>(at + 8)? as u64
        } else {
            1
        },
    })
}

/// A run to create, with everything that costs CPU (JSON, the spec's hash, the
/// id) done by the caller, so the single writer only writes.
pub(super) struct Prepared {
    pub(super) new: NewRun,
    /// A fire's run's id, drawn at random (the fire log names its runs
    /// before they have a seq); empty for other runs. The writer makes the
    /// id of a run it writes to `runs` of its seq (a fire's too: that id
    /// replaces this one).
    pub(super) id: String,
    pub(super) spec_hash: String,
    pub(super) spec_json: Arc<str>,
    pub(super) refs_json: Option<String>,
    pub(super) extra_refs_json: String,
    pub(super) labels_json: String,
    pub(super) annotations_json: String,
    /// Fires' runs: their template (written to the fire log by reference).
    pub(super) template: Option<Template>,
}

/// Does a run's CPU work (JSON, the spec's hash) in the caller's thread.
pub(super) fn prepare(new: NewRun) -> Prepared {
    let mut new = new;
    new.scheduled_at = new.scheduled_at.map(crate::run::micros);
    let spec_json = new.spec.json_arc();
    Prepared {
        id: String::new(),
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
pub(super) fn prepare_fire_run(new: NewRun) -> Prepared {
    let mut p = prepare(new);
    p.id = new_run_id();
    p.template = Some(template_of(&p));
    p
}

/// A run template: the columns of `runs` that every run made from it shares,
/// as they are stored (JSON columns as their text).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct TemplateCols(
    pub(super) String,         // job
    pub(super) String,         // job_type
    pub(super) Option<String>, // periodic
    pub(super) String,         // configured_cluster
    pub(super) Option<String>, // refs
    pub(super) String,         // extra_refs
    pub(super) String,         // labels
    pub(super) String,         // annotations
    pub(super) String,         // spec_hash
    pub(super) String,         // state
    pub(super) String,         // description
);

/// A template as stored: its content hash and body, and the spec it needs.
pub(super) struct Template {
    pub(super) hash: String,
    pub(super) body: String,
    pub(super) spec_hash: String,
    pub(super) spec_json: Arc<str>,
}

/// The template of a prepared run (the caller's thread does this work).
pub(super) fn template_of(p: &Prepared) -> Template {
    let n = &p.new;
    let cols = TemplateCols(
        n.job.clone(),
        n.job_type.as_str().to_string(),
        n.periodic.clone(),
        n.configured_cluster.clone(),
        p.refs_json.clone(),
        p.extra_refs_json.clone(),
        p.labels_json.clone(),
        p.annotations_json.clone(),
        p.spec_hash.clone(),
        n.state.as_str().to_string(),
        n.description.clone(),
    );
    let body = serde_json::to_string(&cols).expect("serializable");
    Template {
        hash: crate::hash_hex(body.as_bytes()),
        body,
        spec_hash: p.spec_hash.clone(),
        spec_json: p.spec_json.clone(),
    }
}
