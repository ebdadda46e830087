//! An in-memory [`Store`], for tests and simulations. Same semantics as SQLite
//! (the conformance suite runs against both), nothing durable.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use crate::run::{apply, Run};
use crate::{
    new_run_id, Created, Fire, NewRun, PeriodicState, RunFilter, Store, StoreError, TickOutcome,
    Transition, TransitionObserver,
};

#[derive(Default)]
struct Inner {
    runs: HashMap<String, Run>,
    /// Creation order, for listing newest first.
    order: Vec<String>,
    keys: HashMap<(String, i64, u32), String>,
    specs: HashMap<String, serde_json::Value>,
    states: BTreeMap<String, PeriodicState>,
    outcomes: Vec<TickOutcome>,
    last_build_id: i64,
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
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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
}

impl Store for MemoryStore {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        let at = crate::run::micros(at);
        let mut new = new;
        new.scheduled_at = new.scheduled_at.map(crate::run::micros);
        let run = {
            let mut g = self.lock();
            let key = match (&new.periodic, new.scheduled_at) {
                (Some(p), Some(t)) => Some((p.clone(), t.as_microsecond(), new.attempt)),
                _ => None,
            };
            if let Some(id) = key.as_ref().and_then(|k| g.keys.get(k)) {
                return Ok(Created::Existing(g.runs[id].clone()));
            }
            let hash = new.spec.hash().to_string();
            g.specs
                .entry(hash.clone())
                .or_insert_with(|| new.spec.value());
            let build_id = (g.last_build_id + 1).max(at.as_microsecond());
            g.last_build_id = build_id;
            let run = new.into_run(new_run_id(), build_id, hash, at);
            if let Some(k) = key {
                g.keys.insert(k, run.id.clone());
            }
            g.order.push(run.id.clone());
            g.runs.insert(run.id.clone(), run.clone());
            run
        };
        if let Some(o) = &self.observer {
            o.on_transition(&run, None);
        }
        Ok(Created::New(run))
    }

    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError> {
        let (run, from) = {
            let mut g = self.lock();
            let run = g
                .runs
                .get_mut(id)
                .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
            let from = run.state;
            apply(run, &t)?;
            (run.clone(), from)
        };
        if let Some(o) = &self.observer {
            o.on_transition(&run, Some(from));
        }
        Ok(run)
    }

    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        Ok(self.lock().runs.get(id).cloned())
    }

    fn list(&self, f: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let g = self.lock();
        let limit = if f.limit == 0 { 100 } else { f.limit };
        let ids: Box<dyn Iterator<Item = &String>> = if f.oldest_first {
            Box::new(g.order.iter())
        } else {
            Box::new(g.order.iter().rev())
        };
        Ok(ids
            .filter_map(|id| g.runs.get(id))
            .filter(|r| matches(r, f))
            .skip(f.offset)
            .take(limit)
            .cloned()
            .collect())
    }

    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.lock().specs.get(hash).cloned())
    }

    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        Ok(self.lock().states.get(periodic).cloned())
    }

    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        self.lock()
            .states
            .insert(state.periodic.clone(), state.clone());
        Ok(())
    }

    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        self.lock().outcomes.extend_from_slice(outcomes);
        Ok(())
    }

    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        // In memory nothing survives a crash: committing step by step is atomic
        // enough, and no step can fail half-way.
        let created = fire
            .runs
            .into_iter()
            .map(|r| self.create_run(r, at))
            .collect::<Result<Vec<_>, _>>()?;
        let outcomes: Vec<TickOutcome> = fire
            .outcomes
            .into_iter()
            .map(|mut o| {
                o.fill_run_id(&created);
                o
            })
            .collect();
        self.record_outcomes(&outcomes)?;
        self.put_periodic_state(&fire.state)?;
        Ok(created)
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
        for id in &doomed {
            if let Some(r) = g.runs.remove(id) {
                if let (Some(p), Some(t)) = (r.periodic, r.scheduled_at) {
                    g.keys.remove(&(p, t.as_microsecond(), r.attempt));
                }
            }
        }
        g.order.retain(|id| !doomed.contains(id));
        Ok(doomed)
    }
}
