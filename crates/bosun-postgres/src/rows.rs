//! Rows and the store's values: the encodings of SQLite's store (times in
//! microseconds, JSON as text), decoded into runs, schedule states,
//! outcomes, deliveries and reports.

use bosun_store::reports::{ReportOutcome, StoredReport};
use bosun_store::repos::StoredDelivery;
use bosun_store::run::job_type_from_str;
use bosun_store::run::Labels;
use bosun_store::{PeriodicState, Run, StoreError, TickOutcome};
use jiff::Timestamp;
use postgres::Row;

/// The columns of a run's row, in the order [`run`] decodes them.
pub(crate) const RUN_COLUMNS: &str = "id, build_id, job, job_type, periodic, configured_cluster, cluster, refs, extra_refs, labels, annotations, spec_hash, scheduled_at, attempt, pod_revival_count, created_at, pending_at, completed_at, state, description, url";

fn bad(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Invalid(format!("a stored {what} does not decode: {e}"))
}

/// A time column.
pub(crate) fn ts(micros: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(micros).map_err(|e| bad("time", e))
}

/// A nullable time column.
pub(crate) fn opt_ts(v: Option<i64>) -> Result<Option<Timestamp>, StoreError> {
    v.map(ts).transpose()
}

/// A time as its column.
pub(crate) fn micros(t: Timestamp) -> i64 {
    t.as_microsecond()
}

/// A JSON column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| bad("JSON value", e))
}

/// Labels or annotations from their JSON column, shared with other runs'
/// ([`bosun_store::run::shared_labels`]).
fn labels(text: &str) -> Result<Labels, StoreError> {
    bosun_store::run::shared_labels(text).map_err(|e| bad("JSON value", e))
}

/// A value as its JSON column.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable")
}

/// A run's row ([`RUN_COLUMNS`]).
pub(crate) fn run(r: &Row) -> Result<Run, StoreError> {
    let job_type: String = r.get(3);
    let state: String = r.get(18);
    let refs: Option<String> = r.get(7);
    Ok(Run {
        id: r.get(0),
        build_id: r.get::<_, i64>(1).to_string(),
        job: r.get(2),
        job_type: job_type_from_str(&job_type).ok_or_else(|| bad("job type", &job_type))?,
        periodic: r.get(4),
        configured_cluster: r.get(5),
        cluster: r.get(6),
        refs: refs.as_deref().map(json).transpose()?,
        extra_refs: json(r.get(8))?,
        labels: labels(r.get(9))?,
        annotations: labels(r.get(10))?,
        spec_hash: r.get(11),
        scheduled_at: opt_ts(r.get(12))?,
        attempt: r.get::<_, i64>(13) as u32,
        pod_revival_count: r.get::<_, i64>(14) as u32,
        created_at: ts(r.get(15))?,
        pending_at: opt_ts(r.get(16))?,
        completed_at: opt_ts(r.get(17))?,
        state: state.parse().map_err(|e| bad("run state", e))?,
        description: r.get(19),
        url: r.get(20),
    })
}

/// A `periodic_state` row (`periodic, schedule_hash, first_seen, last_tick,
/// paused, queued`).
pub(crate) fn state(r: &Row) -> Result<PeriodicState, StoreError> {
    Ok(PeriodicState {
        periodic: r.get(0),
        schedule_hash: r.get(1),
        first_seen: ts(r.get(2))?,
        last_tick: opt_ts(r.get(3))?,
        paused: r.get(4),
        queued: opt_ts(r.get(5))?,
    })
}

/// The columns of an outcome's row, in the order [`outcome`] decodes them.
pub(crate) const OUTCOME_COLUMNS: &str =
    "periodic, first_tick, last_tick, count, outcome, run_id, recorded_at";

/// A `tick_outcomes` row ([`OUTCOME_COLUMNS`]).
pub(crate) fn outcome(r: &Row) -> Result<TickOutcome, StoreError> {
    Ok(TickOutcome {
        periodic: r.get(0),
        first_tick: ts(r.get(1))?,
        last_tick: ts(r.get(2))?,
        count: r.get::<_, i64>(3) as u64,
        outcome: r.get(4),
        run_id: r.get(5),
        recorded_at: ts(r.get(6))?,
    })
}

/// The columns of a delivery's row, in the order [`delivery`] decodes them.
pub(crate) const DELIVERY_COLUMNS: &str = "seq, forge, event, delivery_id, repo, body, received_at";

/// A `deliveries` row ([`DELIVERY_COLUMNS`]); a processed one's body is
/// NULL, read as empty.
pub(crate) fn delivery(r: &Row) -> Result<StoredDelivery, StoreError> {
    Ok(StoredDelivery {
        seq: r.get::<_, i64>(0) as u64,
        forge: r.get(1),
        event: r.get(2),
        delivery_id: r.get(3),
        repo: r.get(4),
        body: r.get::<_, Option<Vec<u8>>>(5).unwrap_or_default(),
        received_at: ts(r.get(6))?,
    })
}

/// The columns of a report's row, in the order [`report`] decodes them.
pub(crate) const REPORT_COLUMNS: &str = "id, key, kind, run_id, version, payload, attempts, created_at, next_attempt_at, last_error, state, finished_at, superseded_by";

/// A `reports` row ([`REPORT_COLUMNS`]).
pub(crate) fn report(r: &Row) -> Result<StoredReport, StoreError> {
    let kind: String = r.get(2);
    let state: String = r.get(10);
    let finished: Option<i64> = r.get(11);
    let at = || ts(finished.unwrap_or_default());
    let outcome = match state.as_str() {
        "pending" => ReportOutcome::Pending,
        "delivered" => ReportOutcome::Delivered { at: at()? },
        "refused" => ReportOutcome::Refused { at: at()? },
        "superseded" => ReportOutcome::Superseded {
            at: at()?,
            by_version: r.get::<_, Option<i64>>(12).unwrap_or_default() as u64,
        },
        other => return Err(bad("report state", other)),
    };
    Ok(StoredReport {
        id: r.get::<_, i64>(0) as u64,
        key: r.get(1),
        kind: kind.parse().map_err(|e| bad("report kind", e))?,
        run_id: r.get(3),
        version: r.get::<_, i64>(4) as u64,
        payload: json(r.get(5))?,
        attempts: r.get::<_, i64>(6) as u32,
        created_at: ts(r.get(7))?,
        next_attempt_at: ts(r.get(8))?,
        last_error: r.get(9),
        outcome,
    })
}
