//! The dispatcher's engine, shared by `bosun dispatcher` and `bosun serve`:
//! the base plan (made from the planner's input, persisted, re-made on a
//! schedule, on request and when the inventory changes), and the *effective*
//! plan the service answers from: the base plan with the operators'
//! overrides (with a TTL, persisted beside the plan) and the health overlay
//! (clusters not Reachable for `dispatcher.unhealthy_after`) applied on top,
//! outside the movement budget (`bosun_dispatch::adjust`).
//!
//! Where the plan and the overrides are kept is a [`Persistence`]: files
//! ([`Engine::new`], as `bosun dispatcher` and a daemon of its own keep
//! them), or the store's documents ([`Engine::with_persistence`] with
//! [`crate::persist::InStore`], for replicas of `bosun serve` on one
//! store). A change of the overrides is written by compare-and-set: when
//! another engine wrote them meanwhile, the kept ones are read again and
//! the change applied to them again, so neither change is lost; an engine
//! learns of another's changes at its next change or
//! [`Engine::refresh_overrides`].
//!
//! Where the input comes from is the caller's business: the standalone
//! service reads its configuration files, the daemon uses the configuration
//! in force.

use bosun_base::sync::Lock;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bosun_dispatch::adjust::{self, Override, OverrideTarget};
use bosun_dispatch::format;
use bosun_dispatch::lookup::JobRepo;
use bosun_dispatch::model::{Plan, PlanInput};
use jiff::Timestamp;

use crate::demand::CachedDemand;
use crate::inputs::Inputs;
use crate::persist::{Files, PersistError, Persistence};
use crate::service::Service;

/// The last base plan and what it was made from (shared, never copied:
/// the input of a large configuration is big).
struct Base {
    plan: Arc<Plan>,
    input: PlanInput,
    repos: Vec<JobRepo>,
    /// Job -> its job-config file (overrides by file).
    files: BTreeMap<String, String>,
}

/// The engine.
pub struct Engine {
    /// The service answering from the effective plan.
    pub service: Arc<Service>,
    demand: CachedDemand,
    base: Mutex<Option<Arc<Base>>>,
    persist: Arc<dyn Persistence>,
    overrides: Mutex<Vec<Override>>,
    /// The version of the kept overrides that `overrides` holds (written
    /// under `overrides`' lock).
    overrides_version: AtomicU64,
    unhealthy: Mutex<BTreeSet<String>>,
    next_override: std::sync::atomic::AtomicU64,
}

/// Why an override was refused.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// No plan is in force yet.
    #[error("no plan is loaded yet")]
    NoPlan,
    /// The request is not valid (the planner's words).
    #[error("{0}")]
    Invalid(String),
    /// It could not be persisted (nothing changed).
    #[error("cannot persist the overrides: {0}")]
    Persist(String),
}

/// An override as asked for (`POST .../overrides`).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct OverrideRequest {
    /// A job's name: all jobs of that name.
    pub job: Option<String>,
    /// A job-config file (relative to its directory): its unit.
    pub file: Option<String>,
    /// A cluster to drain: its relocatable units move off it.
    pub drain: Option<String>,
    /// Where the job or file goes (not for a drain).
    pub cluster: Option<String>,
    /// How long (a Go duration, at most 24h).
    pub ttl: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// Who.
    #[serde(default)]
    pub actor: String,
}

impl Engine {
    /// An engine persisting its plan in `plan_file` (and its overrides
    /// beside it: [`Files`]), measuring demand with `demand`, answering
    /// through `service`. Overrides persisted earlier are read back.
    pub fn new(service: Arc<Service>, demand: CachedDemand, plan_file: PathBuf) -> Engine {
        Engine::with_persistence(service, demand, Arc::new(Files::new(plan_file)))
    }

    /// An engine keeping its plan and overrides in `persist` (files, or the
    /// store's documents), measuring demand with `demand`, answering
    /// through `service`. Overrides persisted earlier are read back.
    pub fn with_persistence(
        service: Arc<Service>,
        demand: CachedDemand,
        persist: Arc<dyn Persistence>,
    ) -> Engine {
        let (version, overrides) = read_overrides(persist.as_ref());
        let next = next_override_id(&overrides);
        Engine {
            service,
            demand,
            base: Mutex::new(None),
            persist,
            overrides: Mutex::new(overrides),
            overrides_version: AtomicU64::new(version),
            unhealthy: Mutex::new(BTreeSet::new()),
            next_override: std::sync::atomic::AtomicU64::new(next),
        }
    }

    /// Demand per job at `now`: measured again when due (or `force`d), else
    /// the last good measurement (a warning says when it is not current).
    pub fn demand_now(&self, now: Timestamp, force: bool) -> BTreeMap<String, f64> {
        let status = self.demand.refresh(now, force);
        if status.is_stale() {
            tracing::warn!(?status, "demand is not current; the last good one is used");
        }
        self.demand
            .current()
            .map(|d| d.jobs.clone())
            .unwrap_or_default()
    }

    /// The last base plan's previous assignment (job -> cluster): the plan in
    /// memory, else the persisted one.
    pub fn previous(&self) -> (BTreeMap<String, String>, u64) {
        if let Some(b) = self.base.locked().as_ref() {
            let map = b
                .plan
                .assignments
                .iter()
                .map(|(j, a)| (j.clone(), a.cluster.clone()))
                .collect();
            return (map, b.plan.generation);
        }
        let text = self.persist.read_plan().ok().flatten();
        let map = text
            .as_deref()
            .and_then(|t| format::previous_from_json(t).ok())
            .unwrap_or_default();
        let generation = text
            .as_deref()
            .and_then(|t| format::plan_from_json(t).ok())
            .map_or(0, |p| p.generation);
        (map, generation)
    }

    /// Plans again from `inputs`: in full (`full`), or, when the inventory
    /// did not change, placing only new jobs. Keeps the last plan on error.
    /// Returns whether a plan is in force.
    pub fn replan(
        &self,
        inputs: Result<Inputs, String>,
        full: bool,
        reason: &str,
        now: Timestamp,
    ) -> bool {
        let inputs = match inputs {
            Ok(i) => i,
            Err(e) => {
                tracing::error!(reason, error = %e, "cannot plan; the last plan stays in force");
                return self.base.locked().is_some();
            }
        };
        for w in &inputs.warnings {
            tracing::warn!("{w}");
        }
        let last = self.base.locked().clone();
        let (_, generation) = self.previous();
        let plan = match &last {
            // The same inventory: new jobs are placed, gone ones dropped,
            // nothing else moves.
            Some(b) if !full && b.input.clusters == inputs.input.clusters => {
                incremental(&b.plan, &inputs.input)
            }
            _ => bosun_dispatch::plan::plan(&inputs.input, generation),
        };
        // An unchanged plan is not written again.
        let unchanged = last.as_ref().is_some_and(|b| *b.plan == plan);
        if !unchanged {
            if let Err(e) = self.persist.write_plan(&format::to_json(&plan)) {
                tracing::error!(to = %self.persist.describe(), error = %e, "cannot write the plan");
            }
        }
        tracing::info!(
            reason,
            generation = plan.generation,
            jobs = plan.assignments.len(),
            moves = plan.moves.len(),
            unplaced = plan.unplaced.len(),
            "plan in force"
        );
        *self.base.locked() = Some(Arc::new(Base {
            plan: Arc::new(plan),
            input: inputs.input,
            repos: inputs.repos,
            files: inputs.files,
        }));
        self.publish(now);
        true
    }

    /// Puts the kept plan in force unchanged, as another engine wrote it
    /// (a replica that does not plan serves the plan the leader wrote),
    /// with `inputs` for what a plan needs beside its assignments (the
    /// clusters, units and files overrides are checked against). Returns
    /// whether the plan in force changed; none is kept or it does not read:
    /// false, the plan in force stays.
    pub fn adopt(&self, inputs: Inputs, now: Timestamp) -> bool {
        let text = match self.persist.read_plan() {
            Ok(Some(t)) => t,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(from = %self.persist.describe(), error = %e, "cannot read the kept plan");
                return false;
            }
        };
        let plan = match format::plan_from_json(&text) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(from = %self.persist.describe(), error = %e, "the kept plan does not read");
                return false;
            }
        };
        if self.base.locked().as_ref().is_some_and(|b| *b.plan == plan) {
            return false;
        }
        tracing::info!(generation = plan.generation, "the kept plan is in force");
        *self.base.locked() = Some(Arc::new(Base {
            plan: Arc::new(plan),
            input: inputs.input,
            repos: inputs.repos,
            files: inputs.files,
        }));
        self.publish(now);
        true
    }

    /// Makes the effective plan from the base plan, the overrides in force
    /// at `now` and the clusters in the health overlay, and puts it in
    /// force. Expired overrides are dropped (and the file rewritten).
    pub fn publish(&self, now: Timestamp) {
        let Some(base) = self.base.locked().clone() else {
            return;
        };
        let expired = self.change_overrides(|all| {
            let before = all.len();
            all.retain(|o| o.expires_at > now);
            (all.len() != before).then_some(before - all.len())
        });
        match expired {
            Ok(Some(n)) => tracing::info!(expired = n, "overrides expired"),
            Ok(None) => {}
            Err(e) => {
                tracing::error!(to = %self.persist.describe(), error = %e, "cannot write the overrides")
            }
        }
        let overrides = self.overrides.locked().clone();
        let unhealthy = self.unhealthy.locked().clone();
        let adjusted = adjust::adjust_with_files(
            &base.plan,
            &base.input,
            &overrides,
            &unhealthy,
            now,
            &base.files,
        );
        for (id, why) in &adjusted.skipped {
            tracing::warn!(r#override = %id, "override not applied: {why}");
        }
        self.service.set_adjustments(
            adjusted.overlay.len(),
            unhealthy.len(),
            adjusted.overridden.len(),
            adjusted.active_overrides,
        );
        self.service.set_plan(adjusted.plan, &base.repos);
    }

    /// The base plan in force (before adjustments).
    pub fn base_plan(&self) -> Option<Arc<Plan>> {
        self.base.locked().as_ref().map(|b| b.plan.clone())
    }

    /// Sets the clusters in the health overlay; re-publishes when it changed.
    /// Returns whether it changed.
    pub fn set_unhealthy(&self, clusters: BTreeSet<String>, now: Timestamp) -> bool {
        {
            let mut current = self.unhealthy.locked();
            if *current == clusters {
                return false;
            }
            tracing::info!(clusters = ?clusters, "clusters in the health overlay");
            *current = clusters;
        }
        self.publish(now);
        true
    }

    /// Whether an override kept in memory has expired at `now` (the
    /// effective plan is then made again).
    pub fn expired_overrides(&self, now: Timestamp) -> bool {
        self.overrides.locked().iter().any(|o| o.expires_at <= now)
    }

    /// When the first override in force expires (the effective plan
    /// changes then).
    pub fn next_override_expiry(&self) -> Option<Timestamp> {
        self.overrides.locked().iter().map(|o| o.expires_at).min()
    }

    /// The overrides in force at `now`.
    pub fn overrides(&self, now: Timestamp) -> Vec<Override> {
        self.overrides
            .locked()
            .iter()
            .filter(|o| o.expires_at > now)
            .cloned()
            .collect()
    }

    /// Adds an override (validated against the base plan), persists it and
    /// re-publishes.
    pub fn add_override(
        &self,
        req: OverrideRequest,
        now: Timestamp,
    ) -> Result<Override, OverrideError> {
        let target = match (req.job, req.file, req.drain) {
            (Some(j), None, None) => OverrideTarget::Job(j),
            (None, Some(f), None) => OverrideTarget::File(f),
            (None, None, Some(c)) => OverrideTarget::Drain(c),
            _ => {
                return Err(OverrideError::Invalid(
                    "give exactly one of job, file or drain".into(),
                ))
            }
        };
        let ttl = bosun_config::duration::GoDuration::parse(&req.ttl)
            .map_err(|e| OverrideError::Invalid(format!("ttl {:?}: {e}", req.ttl)))?;
        let expires_at = now
            .checked_add(jiff::SignedDuration::try_from(ttl.to_std()).unwrap_or_default())
            .map_err(|e| OverrideError::Invalid(format!("ttl: {e}")))?;
        let id = format!(
            "ov-{}",
            self.next_override
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let mut o = Override {
            id,
            target,
            cluster: req.cluster,
            created_at: now,
            expires_at,
            reason: req.reason,
            actor: req.actor,
        };
        {
            let base = self.base.locked().clone();
            let base = base.ok_or(OverrideError::NoPlan)?;
            adjust::validate_with_files(&base.input, &base.plan, &o, now, &base.files)
                .map_err(OverrideError::Invalid)?;
            // Another engine may have given the id meanwhile: then it
            // takes the next free one.
            let added = self.change_overrides(|all| {
                let mut o = o.clone();
                if all.iter().any(|x| x.id == o.id) {
                    o.id = format!("ov-{}", next_override_id(all));
                }
                all.push(o.clone());
                Some(o)
            });
            match added {
                Ok(Some(added)) => o = added,
                Ok(None) => {}
                Err(e) => return Err(OverrideError::Persist(e.to_string())),
            }
        }
        tracing::info!(r#override = %o.id, actor = %o.actor, "override added");
        self.publish(now);
        Ok(o)
    }

    /// Cancels override `id`; whether it existed.
    pub fn cancel_override(&self, id: &str, now: Timestamp) -> Result<bool, OverrideError> {
        let cancelled = self
            .change_overrides(|all| {
                let before = all.len();
                all.retain(|o| o.id != id);
                (all.len() != before).then_some(())
            })
            .map_err(|e| OverrideError::Persist(e.to_string()))?;
        if cancelled.is_none() {
            return Ok(false);
        }
        tracing::info!(r#override = id, "override cancelled");
        self.publish(now);
        Ok(true)
    }

    /// Reads the kept overrides again: when another engine changed them
    /// (their version moved), they replace the ones in memory and the
    /// effective plan is made again at `now`. Returns whether they changed.
    pub fn refresh_overrides(&self, now: Timestamp) -> bool {
        let changed = {
            let mut all = self.overrides.locked();
            match self.persist.read_overrides() {
                Ok((version, _)) if version == self.overrides_version.load(Ordering::SeqCst) => {
                    false
                }
                Ok((version, text)) => {
                    *all = parse_overrides(self.persist.as_ref(), text.as_deref());
                    self.overrides_version.store(version, Ordering::SeqCst);
                    self.bump_next_override(&all);
                    true
                }
                Err(e) => {
                    tracing::warn!(from = %self.persist.describe(), error = %e, "cannot read the overrides");
                    false
                }
            }
        };
        if changed {
            tracing::info!("the kept overrides changed");
            self.publish(now);
        }
        changed
    }

    /// Applies `change` to the overrides and keeps them; `change` says
    /// `None` when it changed nothing (nothing is written). When another
    /// engine wrote them since this one read them, the kept ones are read
    /// again and `change` applied to them again (a few times at most).
    fn change_overrides<T>(
        &self,
        change: impl Fn(&mut Vec<Override>) -> Option<T>,
    ) -> Result<Option<T>, PersistError> {
        const ATTEMPTS: usize = 5;
        let mut all = self.overrides.locked();
        for _ in 0..ATTEMPTS {
            let mut next = all.clone();
            let Some(out) = change(&mut next) else {
                return Ok(None);
            };
            let text = serde_json::to_string_pretty(&next)
                .map_err(|e| PersistError::Failed(e.to_string()))?;
            let expected = self.overrides_version.load(Ordering::SeqCst);
            match self.persist.write_overrides(expected, &text) {
                Ok(version) => {
                    self.bump_next_override(&next);
                    *all = next;
                    self.overrides_version.store(version, Ordering::SeqCst);
                    return Ok(Some(out));
                }
                Err(PersistError::Conflict) => {
                    let (version, text) = self.persist.read_overrides()?;
                    *all = parse_overrides(self.persist.as_ref(), text.as_deref());
                    self.overrides_version.store(version, Ordering::SeqCst);
                    self.bump_next_override(&all);
                }
                Err(e) => return Err(e),
            }
        }
        Err(PersistError::Conflict)
    }

    /// Keeps the next override's id above the ids of `all` (another engine
    /// may have added some).
    fn bump_next_override(&self, all: &[Override]) {
        self.next_override
            .fetch_max(next_override_id(all), Ordering::SeqCst);
    }
}

/// The number after the highest `ov-N` id among `overrides`.
fn next_override_id(overrides: &[Override]) -> u64 {
    overrides
        .iter()
        .filter_map(|o| o.id.strip_prefix("ov-")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        + 1
}

/// The kept overrides and their version; none (a warning) when they cannot
/// be read.
fn read_overrides(persist: &dyn Persistence) -> (u64, Vec<Override>) {
    match persist.read_overrides() {
        Ok((version, text)) => (version, parse_overrides(persist, text.as_deref())),
        Err(e) => {
            tracing::warn!(from = %persist.describe(), error = %e, "cannot read the overrides; starting with none");
            (0, Vec::new())
        }
    }
}

/// Overrides from their kept text; none (a warning) when it does not parse.
fn parse_overrides(persist: &dyn Persistence, text: Option<&str>) -> Vec<Override> {
    let Some(text) = text else {
        return Vec::new();
    };
    serde_json::from_str(text).unwrap_or_else(|e| {
        tracing::warn!(from = %persist.describe(), error = %e, "cannot read the overrides; starting with none");
        Vec::new()
    })
}

/// `plan` with the units of `input` it does not know placed (each on its
/// own, moving nothing else) and the jobs `input` no longer has dropped.
pub fn incremental(plan: &Plan, input: &PlanInput) -> Plan {
    let mut next = plan.clone();
    let known: std::collections::HashSet<&str> = input
        .units
        .iter()
        .flat_map(|u| u.jobs.iter().map(String::as_str))
        .collect();
    next.assignments
        .retain(|job, _| known.contains(job.as_str()));
    let mut changed = next.assignments.len() != plan.assignments.len();
    for unit in &input.units {
        if unit.jobs.iter().any(|j| !next.assignments.contains_key(j)) {
            next = bosun_dispatch::plan::place_new(&next, input, unit);
            changed = true;
        }
    }
    if changed && next.generation == plan.generation {
        next.generation += 1;
    }
    next
}

/// The service's routes plus the overrides':
/// - `GET /overrides`: the overrides in force;
/// - `POST /overrides` [`OverrideRequest`] (token): 201 with the override,
///   422 when it is refused (why), 503 before the first plan;
/// - `DELETE /overrides/{id}` (token): 204, or 404.
pub fn router(engine: Arc<Engine>) -> axum::Router {
    router_at(engine.clone(), "").merge(crate::service::router(engine.service.clone()))
}

/// [`router`]'s overrides routes under `prefix`, beside the service's
/// (`router_at`), with no fallback: `bosun serve` mounts them at
/// `/api/v1/dispatch`.
pub fn router_at(engine: Arc<Engine>, prefix: &str) -> axum::Router {
    use crate::service::{text, unauthorized};
    use axum::extract::{Path as UrlPath, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use axum::routing::{delete, get};

    async fn list(State(e): State<Arc<Engine>>) -> axum::response::Response {
        axum::Json(serde_json::json!({"overrides": e.overrides(Timestamp::now())})).into_response()
    }
    async fn create(
        State(e): State<Arc<Engine>>,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> axum::response::Response {
        if !e.service.authorized(&headers) {
            return unauthorized();
        }
        let req: OverrideRequest = match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(err) => return text(StatusCode::BAD_REQUEST, &err.to_string()),
        };
        let e2 = e.clone();
        let made =
            tokio::task::spawn_blocking(move || e2.add_override(req, Timestamp::now())).await;
        match made {
            Ok(Ok(o)) => (StatusCode::CREATED, axum::Json(o)).into_response(),
            Ok(Err(OverrideError::NoPlan)) => {
                text(StatusCode::SERVICE_UNAVAILABLE, "No plan loaded yet")
            }
            Ok(Err(OverrideError::Invalid(why))) => text(StatusCode::UNPROCESSABLE_ENTITY, &why),
            Ok(Err(err)) => text(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
            Err(err) => text(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
        }
    }
    async fn cancel(
        State(e): State<Arc<Engine>>,
        headers: HeaderMap,
        UrlPath(id): UrlPath<String>,
    ) -> axum::response::Response {
        if !e.service.authorized(&headers) {
            return unauthorized();
        }
        let e2 = e.clone();
        match tokio::task::spawn_blocking(move || e2.cancel_override(&id, Timestamp::now())).await {
            Ok(Ok(true)) => StatusCode::NO_CONTENT.into_response(),
            Ok(Ok(false)) => text(StatusCode::NOT_FOUND, "no such override"),
            Ok(Err(err)) => text(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
            Err(err) => text(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
        }
    }
    let overrides = axum::Router::new()
        .route(&format!("{prefix}/overrides"), get(list).post(create))
        .route(&format!("{prefix}/overrides/{{id}}"), delete(cancel))
        .with_state(engine.clone());
    if prefix.is_empty() {
        overrides
    } else {
        crate::service::router_at(engine.service.clone(), prefix).merge(overrides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::DemandSource;
    use crate::persist::{InStore, OVERRIDES_DOCUMENT, PLAN_DOCUMENT};
    use bosun_dispatch::model::{ClusterSpec, UnitSpec};
    use bosun_store::SharedStore;

    fn inputs() -> Inputs {
        let cluster = |name: &str| ClusterSpec {
            name: name.into(),
            ..ClusterSpec::default()
        };
        let unit = |job: &str| UnitSpec {
            id: format!("job:{job}"),
            jobs: vec![job.into()],
            demand: 1.0,
            eligible: vec!["a".into(), "b".into()],
            pinned: None,
            keeps_blocked_pin: false,
            previous: None,
            rule: "default".into(),
        };
        Inputs {
            input: PlanInput {
                clusters: vec![cluster("a"), cluster("b")],
                units: vec![unit("j1"), unit("j2")],
                options: Default::default(),
            },
            repos: Vec::new(),
            warnings: Vec::new(),
            files: BTreeMap::new(),
        }
    }

    fn engine(persist: Arc<dyn Persistence>) -> Engine {
        Engine::with_persistence(
            Service::new(None),
            CachedDemand::new(DemandSource::Ones),
            persist,
        )
    }

    fn move_job(job: &str, to: &str) -> OverrideRequest {
        OverrideRequest {
            job: Some(job.into()),
            file: None,
            drain: None,
            cluster: Some(to.into()),
            ttl: "1h".into(),
            reason: "a test".into(),
            actor: "test".into(),
        }
    }

    fn ids(overrides: &[Override]) -> Vec<&str> {
        overrides.iter().map(|o| o.id.as_str()).collect()
    }

    /// Two engines on one store (replicas of `bosun serve`): the plan one
    /// writes is the other's previous one, and overrides both change at
    /// once are all kept, none lost and no id given twice.
    #[test]
    fn engines_on_one_store_share_the_plan_and_lose_no_override() {
        let store: SharedStore = Arc::new(bosun_store::memory::MemoryStore::new());
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let a = engine(Arc::new(InStore::new(store.clone())));
        let b = engine(Arc::new(InStore::new(store.clone())));
        assert!(a.replan(Ok(inputs()), true, "test", now));
        let plan = a.base_plan().unwrap();
        assert!(store.document(PLAN_DOCUMENT).unwrap().is_some());
        let (previous, generation) = b.previous();
        assert_eq!(generation, plan.generation);
        assert_eq!(previous.len(), 2);
        assert!(b.replan(Ok(inputs()), true, "test", now));

        let first = a.add_override(move_job("j1", "b"), now).unwrap();
        // `b` has not seen it: its write conflicts, it reads them again and
        // adds its own, under an id of its own.
        let second = b.add_override(move_job("j2", "a"), now).unwrap();
        assert_ne!(first.id, second.id);
        assert_eq!(
            ids(&b.overrides(now)),
            [first.id.as_str(), second.id.as_str()]
        );
        let kept = store.document(OVERRIDES_DOCUMENT).unwrap().unwrap();
        assert_eq!(kept.version, 2);
        // `a` learns of it when it looks again (once).
        assert_eq!(ids(&a.overrides(now)), [first.id.as_str()]);
        assert!(a.refresh_overrides(now));
        assert!(!a.refresh_overrides(now));
        assert_eq!(
            ids(&a.overrides(now)),
            [first.id.as_str(), second.id.as_str()]
        );
        // A cancel on one; the other's stale cancel of it finds it gone.
        assert!(a.cancel_override(&first.id, now).unwrap());
        assert!(!b.cancel_override(&first.id, now).unwrap());
        assert_eq!(ids(&b.overrides(now)), [second.id.as_str()]);
        // A new engine on the store starts with them.
        let c = engine(Arc::new(InStore::new(store.clone())));
        assert_eq!(ids(&c.overrides(now)), [second.id.as_str()]);
        assert!(c.replan(Ok(inputs()), true, "test", now));
        let third = c.add_override(move_job("j1", "a"), now).unwrap();
        assert!(![first.id.as_str(), second.id.as_str()].contains(&third.id.as_str()));
    }

    /// An engine of files keeps the plan in its file, in OpenShift's
    /// format, and the overrides beside it, read back by the next engine.
    #[test]
    fn an_engine_of_files_keeps_the_plan_and_overrides_in_them() {
        let dir = tempfile::tempdir().unwrap();
        let plan_file = dir.path().join("dispatcher-plan.json");
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let e = Engine::new(
            Service::new(None),
            CachedDemand::new(DemandSource::Ones),
            plan_file.clone(),
        );
        assert!(e.replan(Ok(inputs()), true, "test", now));
        let text = std::fs::read_to_string(&plan_file).unwrap();
        assert_eq!(text, format::to_json(&e.base_plan().unwrap()));
        let o = e.add_override(move_job("j1", "b"), now).unwrap();
        let again = Engine::new(
            Service::new(None),
            CachedDemand::new(DemandSource::Ones),
            plan_file,
        );
        assert_eq!(ids(&again.overrides(now)), [o.id.as_str()]);
        assert!(dir.path().join("dispatcher-plan.overrides.json").exists());
        assert!(
            !again.refresh_overrides(now),
            "a file has no versions to follow"
        );
    }
}
