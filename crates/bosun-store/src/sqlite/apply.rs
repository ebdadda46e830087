//! What each request writes in a batch's transaction: the runs it creates or
//! moves (with what the report policy reports of each), a fire (into the
//! tables, or appended to the fire log), prepared fires, outcomes, schedule
//! state, retention, repositories' records, webhook deliveries and reports,
//! keeping the writer's caches as exact as what it wrote.

use std::sync::Arc;

use jiff::Timestamp;
use rusqlite::params;

use super::cache::{counters, WriterCache};
use super::codec::{to_json, Prepared};
use super::error::unavailable;
use super::fire_log::{
    append, encode, fill_from_prepared, index_log_keys, insert_record, logged_run, store_template,
    LoggedRun,
};
use super::request::{ClusterBefore, Op, Reply, Target};
use super::sql;
use super::sql::{
    delete_runs, get_run, insert_pulls, insert_run, insert_spec, keep_counters, put_outcomes,
    put_state, retained_ids, tick_run, update_run,
};
use super::versions::Versions;
use crate::prepared::{LogEntry, Payload};
use crate::reports::{policy_reports, Enqueued, NewReport, ReportPolicy};
use crate::repos::{Accepted, NewDelivery};
use crate::run::{apply, Run, RunState};
use crate::{
    Created, NewRun, PeriodicState, PreparedFires, RunCount, StoreError, TickOutcome, Transition,
};

/// Applies one request of a batch in the batch's transaction: what it
/// writes (the reports `policy` makes of the runs it creates or moves
/// included), and its reply, held until the commit.
pub(super) fn apply_op(
    tx: &rusqlite::Transaction<'_>,
    op: Op,
    cache: &mut WriterCache,
    target: Target,
    versions: &Versions,
    policy: Option<&dyn ReportPolicy>,
    write: bool,
) -> Reply {
    match op {
        Op::Create(new, at, reply) => {
            if let Some(p) = &new.new.periodic {
                cache.touch(p);
            }
            let res = create(tx, *new, at, cache, policy);
            let shared = match &res {
                Ok(Created::New(run)) => cache.runs.get(&run.id).cloned(),
                _ => None,
            };
            Reply::Create(reply, res, shared)
        }
        Op::Transition(id, t, reply) => {
            let (res, cluster) = match transition(tx, &id, &t, cache, policy, write) {
                Ok((run, from, cluster)) => (Ok((run, from)), cluster),
                Err(e) => (Err(e), None),
            };
            let shared = match &res {
                Ok((run, _)) => {
                    if let Some(p) = &run.periodic {
                        cache.touch(p);
                    }
                    cache.runs.get(&run.id).cloned()
                }
                Err(_) => None,
            };
            Reply::Transition(reply, res, shared, cluster)
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
                    Target::Tables => fire_to_tables(tx, runs, outcomes, &state, at, cache, policy),
                    Target::Log => log_fire(tx, runs, outcomes, &state, at, cache, policy),
                },
            )
        }
        Op::Prepared(fires, at, reply) => Reply::Prepared(
            reply,
            commit_prepared(tx, fires, at, cache, versions, policy),
        ),
        Op::Templates(templates, reply) => Reply::Epoch(
            reply,
            templates
                .iter()
                .try_for_each(|t| store_template(tx, t, cache))
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
            match retain(tx, cutoff, cache) {
                Ok((ids, counts)) => Reply::Retain(reply, Ok(ids), counts),
                Err(e) => Reply::Retain(reply, Err(e), Vec::new()),
            }
        }
        Op::PutRepo(repo, record, reply) => Reply::Unit(
            reply,
            sql::put_repo(tx, &repo, &record)
                .map(drop)
                .map_err(unavailable),
        ),
        Op::DeleteRepo(repo, reply) => Reply::Flag(
            reply,
            sql::delete_repo(tx, &repo)
                .map(|n| n > 0)
                .map_err(unavailable),
        ),
        Op::Accept(d, reply) => Reply::Accepted(reply, accept(tx, &d).map_err(unavailable)),
        Op::MarkProcessed(seqs, at, reply) => Reply::Unit(
            reply,
            sql::mark_processed(tx, &seqs, at.as_microsecond()).map_err(unavailable),
        ),
        Op::PruneDeliveries(before, reply) => Reply::Pruned(
            reply,
            sql::prune_deliveries(tx, before.as_microsecond()).map_err(unavailable),
        ),
        Op::EnqueueReports(entries, reply) => Reply::Enqueued(
            reply,
            entries
                .iter()
                .map(|(r, payload)| enqueue(tx, r, payload))
                .collect::<rusqlite::Result<_>>()
                .map_err(unavailable),
        ),
        Op::ReportAttempt(attempt, at, reply) => {
            let (id, version, failure) = *attempt;
            Reply::Flag(
                reply,
                sql::report_attempt(tx, id, version, failure.as_ref(), at.as_microsecond())
                    .map_err(unavailable),
            )
        }
        Op::PruneReports(before, reply) => Reply::Pruned(
            reply,
            sql::prune_reports(tx, before.as_microsecond()).map_err(unavailable),
        ),
        Op::Shared(op) => Reply::Shared(super::shared::apply(tx, op)),
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
    policy: Option<&dyn ReportPolicy>,
) -> Result<Vec<Created>, StoreError> {
    let created = runs
        .into_iter()
        .map(|p| create(tx, p, at, cache, policy))
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
    policy: Option<&dyn ReportPolicy>,
) -> Result<Vec<Created>, StoreError> {
    let mut existing = Vec::new();
    let mut new = Vec::new();
    for p in runs {
        match find_tick(tx, &p.new, cache)? {
            Some(run) => existing.push(Created::Existing(Arc::new(run))),
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
    let body = encode(&new, &outcomes, state);
    for p in &new {
        if let Some(t) = &p.template {
            store_template(tx, t, cache)?;
        }
    }
    let new = new.into_iter().map(LoggedRun::from).collect();
    let created = append(tx, new, &body, at, cache)?;
    // Reported as the log's commit creates them (the fold creates nothing).
    for run in &created {
        report(tx, policy, run, None)?;
    }
    existing.extend(created.into_iter().map(|r| Created::New(Arc::new(r))));
    Ok(existing)
}

/// Prepared fires: each one whose periodic is unchanged since its version was
/// taken (and not changed earlier in this batch) is appended to the log, all
/// in one record; the others are stale. A write error fails them all.
fn commit_prepared(
    tx: &rusqlite::Transaction<'_>,
    prepared: PreparedFires,
    at: Timestamp,
    cache: &mut WriterCache,
    versions: &Versions,
    policy: Option<&dyn ReportPolicy>,
) -> Result<Vec<Result<Vec<Created>, StoreError>>, StoreError> {
    let PreparedFires { fires, log_body } = prepared;
    // All are checked before any is written: fires of one call never make each
    // other stale (many periodics share a stripe), but a periodic prepared
    // twice is committed once.
    let valid: Vec<bool> = {
        let mut seen = std::collections::HashSet::with_capacity(fires.len());
        fires
            .iter()
            .map(|f| {
                let Payload::Log(entry) = &f.payload else {
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
        if let Payload::Log(entry) = &f.payload {
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
        insert_record(tx, &log_body, runs, at, cache)?.1
    } else {
        let body: String = lines.iter().map(|l| &log_body[l.clone()]).collect();
        insert_record(tx, &body, runs, at, cache)?.1
    };
    if runs > 0 {
        cache.log_keys_partial = true;
    }
    let mut k = 0;
    let mut out = Vec::with_capacity(fires.len());
    for (f, valid) in fires.into_iter().zip(valid) {
        match (valid, f.payload) {
            (true, Payload::Log(entry)) => {
                let LogEntry { runs, stripe, .. } = *entry;
                cache.touched.add(stripe);
                out.push(Ok(runs
                    .into_iter()
                    .map(|mut run| {
                        run.build_id = (first_build + k).to_string();
                        run.created_at = at;
                        k += 1;
                        Created::New(Arc::new(run))
                    })
                    .collect()));
            }
            _ => out.push(Err(StoreError::Stale(f.periodic))),
        }
    }
    if policy.is_some() {
        for run in out.iter().flatten().flatten().map(Created::run) {
            report(tx, policy, run, None)?;
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
    let found = tick_run(tx, periodic, t, attempt).map_err(unavailable)?;
    if found.is_some() {
        return Ok(found);
    }
    if cache.log_records == 0 {
        return Ok(None);
    }
    if cache.log_keys_partial {
        index_log_keys(tx, cache)?;
    }
    match cache.log_keys.get(&(periodic.clone(), t, attempt)) {
        Some(&key) => logged_run(tx, key).map(Some),
        None => Ok(None),
    }
}

/// Creates a run (unless its tick has one), with its spec.
fn create(
    tx: &rusqlite::Transaction<'_>,
    p: Prepared,
    at: Timestamp,
    cache: &mut WriterCache,
    policy: Option<&dyn ReportPolicy>,
) -> Result<Created, StoreError> {
    if let Some(run) = find_tick(tx, &p.new, cache)? {
        return Ok(Created::Existing(Arc::new(run)));
    }
    if !cache.specs.contains(&p.spec_hash) {
        insert_spec(tx, &p.spec_hash, &p.spec_json).map_err(unavailable)?;
    }
    let (last_build, last_seq) = counters(tx, cache)?;
    let build_id = (last_build + 1).max(at.as_microsecond());
    let seq = last_seq + 1;
    // The id of the seq, not the one drawn in `prepare`: no index by id to
    // write (see `run_ids`).
    let run = p.new.into_run(cache.ids.id(seq), build_id, p.spec_hash, at);
    insert_run(
        tx,
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
    if let (Some(refs), Some(json)) = (&run.refs, &p.refs_json) {
        if !refs.pulls.is_empty() {
            insert_pulls(tx, json, seq).map_err(unavailable)?;
        }
    }
    report(tx, policy, &run, None)?;
    // Only now: a failed insert fails the batch, whose cache is then dropped.
    cache.counters = Some((build_id, seq));
    cache.specs.insert(run.spec_hash.clone());
    let run = Arc::new(run);
    if !run.state.is_final() {
        cache.runs.insert(run.clone());
    }
    Ok(Created::New(run))
}

/// Moves a run, from the writer's copy of it if it has one; with the state
/// it left and, when the transition decides its cluster, the cluster it had.
fn transition(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    t: &Transition,
    cache: &mut WriterCache,
    policy: Option<&dyn ReportPolicy>,
    write: bool,
) -> Result<(Run, RunState, ClusterBefore), StoreError> {
    let mut run = match cache.runs.get(id) {
        Some(run) => Run::clone(run),
        None => get_run(tx, &cache.ids, id)
            .map_err(unavailable)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?,
    };
    let from = run.state;
    let cluster = t.cluster.as_ref().map(|_| run.cluster.clone());
    apply(&mut run, t)?;
    // A run that ends leaves the cache: its row is written now, whatever
    // follows (see `write_cached`).
    if write || run.state.is_final() {
        update_run(tx, &cache.ids, &run).map_err(unavailable)?;
    }
    report(tx, policy, &run, Some(from))?;
    // Only once the row is written: a failed write fails the batch, whose
    // cache is then dropped.
    if run.state.is_final() {
        cache.runs.remove(id);
    } else {
        cache.runs.insert(Arc::new(run.clone()));
    }
    Ok((run, from, cluster))
}

/// Writes the row of active run `id` as the cache holds it: a transition
/// applied without writing its row (the next request being another
/// transition of the same run, which writes it) whose follower was
/// refused.
pub(super) fn write_cached(
    tx: &rusqlite::Transaction<'_>,
    cache: &WriterCache,
    id: &str,
) -> Result<(), StoreError> {
    match cache.runs.get(id) {
        Some(run) => update_run(tx, &cache.ids, run)
            .map(drop)
            .map_err(unavailable),
        None => Ok(()),
    }
}

/// Deletes the runs retention lets go; returns their ids, and their labels
/// counted for the observer.
fn retain(
    tx: &rusqlite::Transaction<'_>,
    cutoff: Timestamp,
    cache: &WriterCache,
) -> Result<(Vec<String>, Vec<RunCount>), StoreError> {
    let cutoff = cutoff.as_microsecond();
    // The latest run of each periodic (by creation) survives, as Prow's sinker keeps it.
    let gone = retained_ids(tx, cutoff)?;
    if !gone.seqs.is_empty() {
        // The newest run may go: its build id and seq are kept, so neither
        // is handed out twice (see `counters`), nor an id made of the seq.
        let (build_id, seq) = counters(tx, cache)?;
        keep_counters(tx, build_id, seq).map_err(unavailable)?;
    }
    delete_runs(tx, &gone.seqs)?;
    Ok((gone.ids, gone.counts))
}

/// Keeps a delivery unless its (forge, delivery id) is kept already (an
/// earlier request of this batch included: the transaction sees its row).
fn accept(tx: &rusqlite::Transaction<'_>, d: &NewDelivery) -> rusqlite::Result<Accepted> {
    if !d.delivery_id.is_empty() {
        if let Some((seq, processed)) = sql::find_delivery(tx, &d.forge, &d.delivery_id)? {
            return Ok(Accepted::Duplicate {
                seq: seq as u64,
                processed,
            });
        }
    }
    let seq = sql::insert_delivery(tx, d)?;
    Ok(Accepted::New { seq: seq as u64 })
}

/// Queues a report unless its key has had its version or a newer one (an
/// earlier entry of this batch included: the transaction sees its rows).
fn enqueue(
    tx: &rusqlite::Transaction<'_>,
    r: &NewReport,
    payload: &str,
) -> rusqlite::Result<Enqueued> {
    if let Some(newest) = sql::report_key_version(tx, &r.key)? {
        if r.version as i64 <= newest {
            return Ok(Enqueued::Stale {
                newest: newest as u64,
            });
        }
    }
    let (id, superseded) = sql::insert_report(tx, r, payload)?;
    Ok(Enqueued::Queued {
        id: id as u64,
        superseded: superseded.map(|s| s as u64),
    })
}

/// Queues what `policy` reports of a change of `run` (from `before`; none:
/// created) in the change's transaction. A failed write fails the request,
/// and so the batch: the change is not kept without its reports.
fn report(
    tx: &rusqlite::Transaction<'_>,
    policy: Option<&dyn ReportPolicy>,
    run: &Run,
    before: Option<RunState>,
) -> Result<(), StoreError> {
    let Some(policy) = policy else {
        return Ok(());
    };
    for r in policy_reports(policy, run, before) {
        enqueue(tx, &r, &to_json(&r.payload)).map_err(unavailable)?;
    }
    Ok(())
}
