//! An in-memory [`Store`], for tests and simulations. Same semantics as SQLite
//! (the conformance suite runs against both), nothing durable. A change and
//! the report policy's entries for it are made under one lock: no reader
//! sees one without the other.

use bosun_base::sync::Lock;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use crate::files::{LogSlice, RunFile, RunFileEntry, RunFiles};
use crate::prepared::{Payload, PreparedFire, PreparedFires};
use crate::reports::{
    policy_reports, Enqueued, NewReport, ReportCounts, ReportFailure, ReportOutcome, ReportPolicy,
    StoredReport,
};
use crate::repos::{Accepted, NewDelivery, RepoRecord, StoredDelivery};
use crate::run::{apply, Run, RunState};
use crate::shared::{check_expected, conflict, doomed_sessions, Session, StoredDocument};
use crate::{
    count_by_labels, new_run_id, policy_set_already, Before, Created, DemandSums, Fire, JobDemand,
    NewRun, PeriodicState, RunFilter, Store, StoreError, TickOutcome, Transition,
    TransitionObserver,
};

#[derive(Default)]
struct Inner {
    runs: HashMap<String, Run>,
    /// Each run's stored log: its bytes, and whether it is whole.
    logs: HashMap<String, (Vec<u8>, bool)>,
    /// Each run's stored artifacts, by path, and whether any were left out.
    files: HashMap<String, (BTreeMap<String, RunFile>, bool)>,
    /// Creation order, for listing newest first.
    order: Vec<String>,
    keys: HashMap<(String, i64, u32), String>,
    specs: HashMap<String, serde_json::Value>,
    states: BTreeMap<String, PeriodicState>,
    outcomes: Vec<TickOutcome>,
    last_build_id: i64,
    /// Periodic versions: the change counter at each periodic's last change,
    /// and at the last change of all of them (`floor`).
    versions: HashMap<String, u64>,
    floor: u64,
    changes: u64,
    repos: BTreeMap<String, RepoRecord>,
    /// Kept deliveries by seq, with when each was processed.
    deliveries: BTreeMap<u64, (StoredDelivery, Option<Timestamp>)>,
    /// The seq of each kept (forge, delivery id), empty ids aside.
    delivery_ids: HashMap<(String, String), u64>,
    /// The last seq handed out (pruning never lowers it).
    last_seq: u64,
    /// The outbox's kept entries, by id.
    reports: BTreeMap<u64, StoredReport>,
    /// Each key with a kept entry: the newest version it has had, and its
    /// pending entry.
    report_keys: HashMap<String, (u64, Option<u64>)>,
    /// The last report id handed out (pruning never lowers it).
    last_report_id: u64,
    /// What to report of each change, asked under the lock.
    policy: Option<Arc<dyn ReportPolicy>>,
    /// Sessions by id hash.
    sessions: HashMap<String, Session>,
    /// Shared secrets by name.
    secrets: HashMap<String, [u8; 32]>,
    /// Documents by name.
    documents: HashMap<String, StoredDocument>,
}

impl Inner {
    fn touch(&mut self, periodic: &str) {
        self.changes += 1;
        let n = self.changes;
        match self.versions.get_mut(periodic) {
            Some(v) => *v = n,
            None => {
                self.versions.insert(periodic.to_string(), n);
            }
        }
    }

    fn version(&self, periodic: &str) -> u64 {
        self.versions
            .get(periodic)
            .copied()
            .unwrap_or(0)
            .max(self.floor)
    }

    fn key_of(new: &NewRun) -> Option<(String, i64, u32)> {
        match (&new.periodic, new.scheduled_at) {
            (Some(p), Some(t)) => Some((
                p.clone(),
                crate::run::micros(t).as_microsecond(),
                new.attempt,
            )),
            _ => None,
        }
    }

    /// Creates a run under the lock (the caller tells the observer).
    fn create(&mut self, new: NewRun, at: Timestamp) -> Created {
        let mut new = new;
        new.scheduled_at = new.scheduled_at.map(crate::run::micros);
        let key = Self::key_of(&new);
        if let Some(id) = key.as_ref().and_then(|k| self.keys.get(k)) {
            return Created::Existing(std::sync::Arc::new(self.runs[id].clone()));
        }
        if let Some(p) = &new.periodic {
            self.touch(p);
        }
        let hash = new.spec.hash().to_string();
        self.specs
            .entry(hash.clone())
            .or_insert_with(|| new.spec.value());
        let build_id = (self.last_build_id + 1).max(at.as_microsecond());
        self.last_build_id = build_id;
        let run = new.into_run(new_run_id(), build_id, hash, at);
        if let Some(k) = key {
            self.keys.insert(k, run.id.clone());
        }
        self.order.push(run.id.clone());
        self.runs.insert(run.id.clone(), run.clone());
        self.report(&run, None);
        Created::New(std::sync::Arc::new(run))
    }

    /// Queues what the policy reports of a change of `run` (from `before`),
    /// under the lock that makes the change.
    fn report(&mut self, run: &Run, before: Option<RunState>) {
        let entries = match &self.policy {
            Some(policy) => policy_reports(policy.as_ref(), run, before),
            None => return,
        };
        for r in entries {
            self.enqueue(r);
        }
    }

    /// Queues one report under the lock (see [`Store::enqueue_reports`]).
    fn enqueue(&mut self, r: NewReport) -> Enqueued {
        let created_at = crate::run::micros(r.created_at);
        let (newest, pending) = self.report_keys.get(&r.key).copied().unwrap_or_default();
        if self.report_keys.contains_key(&r.key) && r.version <= newest {
            return Enqueued::Stale { newest };
        }
        if let Some(old) = pending.and_then(|id| self.reports.get_mut(&id)) {
            old.outcome = ReportOutcome::Superseded {
                at: created_at,
                by_version: r.version,
            };
        }
        self.last_report_id += 1;
        let id = self.last_report_id;
        self.report_keys
            .insert(r.key.clone(), (r.version, Some(id)));
        self.reports.insert(
            id,
            StoredReport {
                id,
                key: r.key,
                kind: r.kind,
                run_id: r.run_id,
                version: r.version,
                payload: r.payload,
                attempts: 0,
                created_at,
                next_attempt_at: created_at,
                last_error: None,
                outcome: ReportOutcome::Pending,
            },
        );
        Enqueued::Queued {
            id,
            superseded: pending,
        }
    }

    /// Ends or reschedules a pending report of `version` (`None`: delivered).
    fn report_attempt(
        &mut self,
        id: u64,
        version: u64,
        failure: Option<ReportFailure>,
        at: Timestamp,
    ) -> bool {
        let at = crate::run::micros(at);
        let Some(r) = self
            .reports
            .get_mut(&id)
            .filter(|r| r.version == version && r.outcome == ReportOutcome::Pending)
        else {
            return false;
        };
        r.attempts = r.attempts.saturating_add(1);
        let ended = match failure {
            None => {
                r.outcome = ReportOutcome::Delivered { at };
                true
            }
            Some(ReportFailure::Retry { at: again, error }) => {
                r.next_attempt_at = crate::run::micros(again);
                r.last_error = Some(error);
                false
            }
            Some(ReportFailure::Permanent { error }) => {
                r.last_error = Some(error);
                r.outcome = ReportOutcome::Refused { at };
                true
            }
        };
        if ended {
            if let Some((_, pending)) = self.report_keys.get_mut(&r.key) {
                if *pending == Some(id) {
                    *pending = None;
                }
            }
        }
        true
    }

    /// Commits a fire under the lock.
    fn fire(&mut self, fire: Fire, at: Timestamp) -> Vec<Created> {
        let created: Vec<Created> = fire.runs.into_iter().map(|r| self.create(r, at)).collect();
        for mut o in fire.outcomes {
            o.fill_run_id(&created);
            self.touch(&o.periodic.clone());
            self.outcomes.push(o);
        }
        self.touch(&fire.state.periodic);
        self.states.insert(fire.state.periodic.clone(), fire.state);
        created
    }
}

/// The in-memory store.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    observer: Option<Arc<dyn TransitionObserver>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store reporting transitions to `observer`.
    pub fn with_observer(observer: Arc<dyn TransitionObserver>) -> Self {
        MemoryStore {
            inner: Mutex::default(),
            observer: Some(observer),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    fn observe(&self, created: &[Created]) {
        if let Some(o) = &self.observer {
            for c in created {
                if let Created::New(run) = c {
                    o.on_change(run, Some(run), None);
                }
            }
        }
    }
}

/// True when `run` passes `f`'s criteria (shared with SQLite's tests).
pub(crate) fn matches(run: &Run, f: &RunFilter) -> bool {
    f.job.as_ref().is_none_or(|j| &run.job == j)
        && f.periodic
            .as_ref()
            .is_none_or(|p| run.periodic.as_ref() == Some(p))
        && f.state.is_none_or(|s| run.state == s)
        && f.cluster
            .as_ref()
            .is_none_or(|c| run.cluster.as_ref() == Some(c))
        && f.configured_cluster
            .as_ref()
            .is_none_or(|c| &run.configured_cluster == c)
        && !f.not_configured_clusters.contains(&run.configured_cluster)
        && f.job_type
            .as_ref()
            .is_none_or(|t| run.job_type.as_str() == t)
        && (!f.active || !run.state.is_final())
        && f.repo.as_ref().is_none_or(|repo| {
            // `org/repo` as the SQLite store puts it together (an org may
            // hold a `/`: GitLab's groups).
            run.refs.as_ref().is_some_and(|r| {
                repo.len() == r.org.len() + 1 + r.repo.len()
                    && repo.starts_with(r.org.as_str())
                    && repo[r.org.len()..].starts_with('/')
                    && repo.ends_with(r.repo.as_str())
            })
        })
        && (f.pull.is_none() && f.head_sha.is_none()
            || run.refs.as_ref().is_some_and(|r| {
                r.pulls.iter().any(|p| {
                    f.pull.is_none_or(|n| p.number == n)
                        && f.head_sha.as_ref().is_none_or(|sha| &p.sha == sha)
                })
            }))
}

impl Store for MemoryStore {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        let at = crate::run::micros(at);
        let created = self.lock().create(new, at);
        if let (Some(o), Created::New(run)) = (&self.observer, &created) {
            o.on_change(run, Some(run), None);
        }
        Ok(created)
    }

    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError> {
        let (run, from, cluster) = {
            let mut g = self.lock();
            let run = g
                .runs
                .get_mut(id)
                .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
            let from = run.state;
            // Only a transition that decides the cluster changes it.
            let cluster = t.cluster.as_ref().and(run.cluster.clone());
            apply(run, &t)?;
            let run = run.clone();
            if let Some(p) = &run.periodic {
                g.touch(p);
            }
            g.report(&run, Some(from));
            (run, from, cluster)
        };
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
        Ok(self.lock().runs.get(id).cloned())
    }

    fn list(&self, f: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let g = self.lock();
        let limit = if f.limit == 0 { 100 } else { f.limit };
        let position = |id: &String| {
            g.order
                .iter()
                .position(|o| o == id)
                .ok_or_else(|| StoreError::NotFound(id.clone()))
        };
        // The window of `order` the cursors leave, in creation order.
        let (mut lo, mut hi) = (0, g.order.len());
        for (cursor, beyond) in [(&f.after, true), (&f.before, false)] {
            if let Some(id) = cursor {
                let at = position(id)?;
                if beyond == f.oldest_first {
                    lo = lo.max(at + 1);
                } else {
                    hi = hi.min(at);
                }
            }
        }
        let window = &g.order[lo..hi.max(lo)];
        let backwards = f.counted_back();
        let ids: Box<dyn Iterator<Item = &String>> = if f.oldest_first != backwards {
            Box::new(window.iter())
        } else {
            Box::new(window.iter().rev())
        };
        let mut runs: Vec<Run> = ids
            .filter_map(|id| g.runs.get(id))
            .filter(|r| matches(r, f))
            .skip(f.offset)
            .take(limit)
            .cloned()
            .collect();
        if backwards {
            runs.reverse();
        }
        Ok(runs)
    }

    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.lock().specs.get(hash).cloned())
    }

    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        Ok(self.lock().states.get(periodic).cloned())
    }

    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        let mut g = self.lock();
        g.touch(&state.periodic);
        g.states.insert(state.periodic.clone(), state.clone());
        Ok(())
    }

    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        let mut g = self.lock();
        for o in outcomes {
            g.touch(&o.periodic);
        }
        g.outcomes.extend_from_slice(outcomes);
        Ok(())
    }

    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        // In memory nothing survives a crash: one lock makes it atomic.
        let at = crate::run::micros(at);
        let created = self.lock().fire(fire, at);
        self.observe(&created);
        Ok(created)
    }

    fn periodic_versions(&self, periodics: &[String]) -> Option<Vec<u64>> {
        let g = self.lock();
        Some(periodics.iter().map(|p| g.version(p)).collect())
    }

    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<PreparedFires, StoreError> {
        let g = self.lock();
        Ok(PreparedFires {
            fires: fires
                .into_iter()
                .map(|(fire, version)| PreparedFire {
                    periodic: fire.state.periodic.clone(),
                    version,
                    conflict: fire
                        .runs
                        .iter()
                        .filter_map(Inner::key_of)
                        .any(|k| g.keys.contains_key(&k)),
                    payload: Payload::Fire(fire),
                })
                .collect(),
            log_body: String::new(),
        })
    }

    fn commit_prepared(
        &self,
        prepared: PreparedFires,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        let at = crate::run::micros(at);
        let mut g = self.lock();
        // Checked before any is applied: fires of one call never make each
        // other stale, but a periodic prepared twice commits once.
        let mut seen = std::collections::HashSet::new();
        let valid: Vec<bool> = prepared
            .fires
            .iter()
            .map(|f| {
                !f.conflict
                    && g.version(&f.periodic) == f.version
                    && seen.insert(f.periodic.clone())
            })
            .collect();
        let out: Vec<Result<Vec<Created>, StoreError>> = prepared
            .fires
            .into_iter()
            .zip(valid)
            .map(|(f, valid)| match (valid, f.payload) {
                (true, Payload::Fire(fire)) => Ok(g.fire(fire, at)),
                _ => Err(StoreError::Stale(f.periodic)),
            })
            .collect();
        drop(g);
        for created in out.iter().flatten() {
            self.observe(created);
        }
        out
    }

    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError> {
        Ok(self
            .lock()
            .outcomes
            .iter()
            .filter(|o| o.periodic == periodic)
            .cloned()
            .collect())
    }

    fn job_demand(&self, since: Timestamp, now: Timestamp) -> Result<Vec<JobDemand>, StoreError> {
        let g = self.lock();
        let mut sums = DemandSums::default();
        for r in g.runs.values() {
            sums.add(r, since, now);
        }
        Ok(sums.finish())
    }

    fn put_repo(&self, record: &RepoRecord) -> Result<(), StoreError> {
        let mut record = record.clone();
        record.cap_retired_jobs();
        self.lock().repos.insert(record.repo.clone(), record);
        Ok(())
    }

    fn repos(&self) -> Result<Vec<RepoRecord>, StoreError> {
        Ok(self.lock().repos.values().cloned().collect())
    }

    fn delete_repo(&self, repo: &str) -> Result<bool, StoreError> {
        Ok(self.lock().repos.remove(repo).is_some())
    }

    fn accept_delivery(&self, d: NewDelivery) -> Result<Accepted, StoreError> {
        let mut g = self.lock();
        let key = (d.forge, d.delivery_id);
        if !key.1.is_empty() {
            if let Some(&seq) = g.delivery_ids.get(&key) {
                let processed = g.deliveries.get(&seq).is_some_and(|(_, p)| p.is_some());
                return Ok(Accepted::Duplicate { seq, processed });
            }
        }
        g.last_seq += 1;
        let seq = g.last_seq;
        let (forge, delivery_id) = key;
        if !delivery_id.is_empty() {
            g.delivery_ids
                .insert((forge.clone(), delivery_id.clone()), seq);
        }
        let stored = StoredDelivery {
            seq,
            forge,
            event: d.event,
            delivery_id,
            repo: d.repo,
            body: d.body,
            received_at: crate::run::micros(d.received_at),
        };
        g.deliveries.insert(seq, (stored, None));
        Ok(Accepted::New { seq })
    }

    fn pending_deliveries(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredDelivery>, StoreError> {
        let g = self.lock();
        Ok(g.deliveries
            .range(after_seq.saturating_add(1)..)
            .filter(|(_, (_, processed))| processed.is_none())
            .take(limit)
            .map(|(_, (d, _))| d.clone())
            .collect())
    }

    fn delivery(&self, seq: u64) -> Result<Option<StoredDelivery>, StoreError> {
        Ok(self.lock().deliveries.get(&seq).map(|(d, _)| d.clone()))
    }

    fn mark_processed(&self, seqs: &[u64], at: Timestamp) -> Result<(), StoreError> {
        let at = crate::run::micros(at);
        let mut g = self.lock();
        for seq in seqs {
            if let Some((d, processed @ None)) = g.deliveries.get_mut(seq) {
                d.body = Vec::new();
                *processed = Some(at);
            }
        }
        Ok(())
    }

    fn prune_deliveries(&self, before: Timestamp) -> Result<usize, StoreError> {
        let before = crate::run::micros(before);
        let mut g = self.lock();
        let doomed: Vec<u64> = g
            .deliveries
            .iter()
            .filter(|(_, (d, processed))| processed.is_some() && d.received_at < before)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in &doomed {
            if let Some((d, _)) = g.deliveries.remove(seq) {
                g.delivery_ids.remove(&(d.forge, d.delivery_id));
            }
        }
        Ok(doomed.len())
    }

    fn set_report_policy(&self, policy: Arc<dyn ReportPolicy>) -> Result<(), StoreError> {
        let mut g = self.lock();
        if g.policy.is_some() {
            return Err(policy_set_already());
        }
        g.policy = Some(policy);
        Ok(())
    }

    fn enqueue_reports(&self, entries: Vec<NewReport>) -> Result<Vec<Enqueued>, StoreError> {
        for r in &entries {
            r.check()?;
        }
        let mut g = self.lock();
        Ok(entries.into_iter().map(|r| g.enqueue(r)).collect())
    }

    fn due_reports(&self, now: Timestamp, limit: usize) -> Result<Vec<StoredReport>, StoreError> {
        let g = self.lock();
        Ok(g.reports
            .values()
            .filter(|r| r.outcome == ReportOutcome::Pending && r.next_attempt_at <= now)
            .take(limit)
            .cloned()
            .collect())
    }

    fn report_delivered(&self, id: u64, version: u64, at: Timestamp) -> Result<bool, StoreError> {
        Ok(self.lock().report_attempt(id, version, None, at))
    }

    fn report_failed(
        &self,
        id: u64,
        version: u64,
        failure: ReportFailure,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        Ok(self.lock().report_attempt(id, version, Some(failure), at))
    }

    fn reports_of_run(&self, run_id: &str) -> Result<Vec<StoredReport>, StoreError> {
        let g = self.lock();
        Ok(g.reports
            .values()
            .filter(|r| r.run_id.as_deref() == Some(run_id))
            .cloned()
            .collect())
    }

    fn report_counts(&self) -> Result<ReportCounts, StoreError> {
        let g = self.lock();
        let mut counts = ReportCounts::default();
        for r in g.reports.values() {
            match r.outcome {
                ReportOutcome::Pending => counts.pending += 1,
                ReportOutcome::Refused { .. } => counts.refused += 1,
                _ => {}
            }
        }
        Ok(counts)
    }

    fn prune_reports(&self, before: Timestamp) -> Result<usize, StoreError> {
        let before = crate::run::micros(before);
        let mut g = self.lock();
        let doomed: Vec<u64> = g
            .reports
            .values()
            .filter(|r| r.outcome.finished_at().is_some_and(|f| f < before))
            .map(|r| r.id)
            .collect();
        let mut keys = std::collections::HashSet::new();
        for id in &doomed {
            if let Some(r) = g.reports.remove(id) {
                keys.insert(r.key);
            }
        }
        // A key is remembered for as long as one of its entries is kept.
        for r in g.reports.values() {
            keys.remove(&r.key);
        }
        for key in keys {
            g.report_keys.remove(&key);
        }
        Ok(doomed.len())
    }

    fn append_run_log(
        &self,
        id: &str,
        offset: u64,
        data: &[u8],
        complete: bool,
    ) -> Result<u64, StoreError> {
        let mut g = self.lock();
        if !g.runs.contains_key(id) {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let (log, whole) = g.logs.entry(id.to_string()).or_default();
        let len = log.len() as u64;
        if *whole {
            return Ok(len);
        }
        let (new, done) = crate::files::appended(len, offset, data, complete)
            .ok_or_else(|| crate::files::gap(id, len, offset))?;
        log.extend_from_slice(&new);
        *whole = done;
        Ok(log.len() as u64)
    }

    fn run_log(&self, id: &str, offset: u64, max: usize) -> Result<Option<LogSlice>, StoreError> {
        Ok(self.lock().logs.get(id).map(|(log, whole)| {
            let from = (offset.min(log.len() as u64)) as usize;
            let to = from.saturating_add(max).min(log.len());
            LogSlice {
                data: log[from..to].to_vec(),
                len: log.len() as u64,
                complete: *whole,
            }
        }))
    }

    fn put_run_files(
        &self,
        id: &str,
        files: Vec<RunFile>,
        left_out: bool,
    ) -> Result<(), StoreError> {
        let (kept, truncated) = crate::files::within_limit(files)?;
        let truncated = truncated || left_out;
        let mut g = self.lock();
        if !g.runs.contains_key(id) {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let kept = kept.into_iter().map(|f| (f.path.clone(), f)).collect();
        g.files.insert(id.to_string(), (kept, truncated));
        Ok(())
    }

    fn run_files(&self, id: &str) -> Result<Option<RunFiles>, StoreError> {
        Ok(self
            .lock()
            .files
            .get(id)
            .map(|(files, truncated)| RunFiles {
                files: files
                    .values()
                    .map(|f| RunFileEntry {
                        path: f.path.clone(),
                        size: f.data.len() as u64,
                        modified: f.modified,
                    })
                    .collect(),
                truncated: *truncated,
            }))
    }

    fn logs_left_open(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let g = self.lock();
        let mut open: Vec<(Timestamp, String)> = g
            .logs
            .iter()
            .filter(|(_, (_, whole))| !whole)
            .filter_map(|(id, _)| {
                let run = g.runs.get(id)?;
                Some((run.completed_at?, id.clone()))
            })
            .collect();
        open.sort();
        Ok(open.into_iter().take(limit).map(|(_, id)| id).collect())
    }

    fn run_file(&self, id: &str, path: &str) -> Result<Option<RunFile>, StoreError> {
        Ok(self
            .lock()
            .files
            .get(id)
            .and_then(|(files, _)| files.get(path).cloned()))
    }

    fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        let mut session = session.clone();
        session.expires_at = crate::run::micros(session.expires_at);
        self.lock()
            .sessions
            .insert(session.id_hash.clone(), session);
        Ok(())
    }

    fn session(&self, id_hash: &str, now: Timestamp) -> Result<Option<Session>, StoreError> {
        Ok(self
            .lock()
            .sessions
            .get(id_hash)
            .filter(|s| s.expires_at > now)
            .cloned())
    }

    fn delete_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        Ok(self.lock().sessions.remove(id_hash).is_some())
    }

    fn prune_sessions(&self, now: Timestamp, keep: usize) -> Result<usize, StoreError> {
        let mut g = self.lock();
        let doomed = doomed_sessions(
            g.sessions
                .values()
                .map(|s| (s.id_hash.as_str(), s.expires_at)),
            now,
            keep,
        );
        for id in &doomed {
            g.sessions.remove(id);
        }
        Ok(doomed.len())
    }

    fn shared_secret(&self, name: &str, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        Ok(*self
            .lock()
            .secrets
            .entry(name.to_string())
            .or_insert(candidate))
    }

    fn document(&self, name: &str) -> Result<Option<StoredDocument>, StoreError> {
        Ok(self.lock().documents.get(name).cloned())
    }

    fn put_document(&self, name: &str, expected: u64, body: &[u8]) -> Result<u64, StoreError> {
        check_expected(name, expected)?;
        let mut g = self.lock();
        let found = g.documents.get(name).map_or(0, |d| d.version);
        if found != expected {
            return Err(conflict(name, expected, found));
        }
        let version = expected + 1;
        g.documents.insert(
            name.to_string(),
            StoredDocument {
                version,
                body: body.to_vec(),
            },
        );
        Ok(version)
    }

    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError> {
        let mut g = self.lock();
        // The latest run of each periodic survives.
        let mut latest: HashMap<&str, (&Timestamp, &str)> = HashMap::new();
        for r in g.runs.values() {
            if let Some(p) = &r.periodic {
                let e = latest.entry(p).or_insert((&r.created_at, &r.id));
                if (&r.created_at, r.id.as_str()) > (e.0, e.1) {
                    *e = (&r.created_at, &r.id);
                }
            }
        }
        let keep: std::collections::HashSet<String> =
            latest.values().map(|(_, id)| id.to_string()).collect();
        let doomed: Vec<String> = g
            .runs
            .values()
            .filter(|r| {
                r.state.is_final()
                    && r.completed_at.is_some_and(|c| c < cutoff)
                    && !keep.contains(&r.id)
            })
            .map(|r| r.id.clone())
            .collect();
        let mut deleted = Vec::with_capacity(doomed.len());
        for id in &doomed {
            if let Some(r) = g.runs.remove(id) {
                g.logs.remove(id);
                g.files.remove(id);
                if let (Some(p), Some(t)) = (&r.periodic, r.scheduled_at) {
                    g.keys.remove(&(p.clone(), t.as_microsecond(), r.attempt));
                }
                deleted.push(r);
            }
        }
        let gone: std::collections::HashSet<&str> = doomed.iter().map(String::as_str).collect();
        g.order.retain(|id| !gone.contains(id.as_str()));
        if !doomed.is_empty() {
            g.changes += 1;
            g.floor = g.changes;
        }
        drop(g);
        if let (Some(o), false) = (&self.observer, deleted.is_empty()) {
            o.on_deleted(&count_by_labels(&deleted));
        }
        Ok(doomed)
    }
}
