//! The dispatcher's engine, shared by `bosun dispatcher` and `bosun serve`:
//! the base plan (made from the planner's input, persisted, re-made on a
//! schedule, on request and when the inventory changes), and the *effective*
//! plan the service answers from: the base plan with the operators'
//! overrides (with a TTL, persisted beside the plan) and the health overlay
//! (clusters not Reachable for `dispatcher.unhealthy_after`) applied on top,
//! outside the movement budget (`bosun_dispatch::adjust`).
//!
//! Where the input comes from is the caller's business: the standalone
//! service reads its configuration files, the daemon uses the configuration
//! in force.

use bosun_base::sync::Lock;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bosun_dispatch::adjust::{self, Override, OverrideTarget};
use bosun_dispatch::format;
use bosun_dispatch::lookup::JobRepo;
use bosun_dispatch::model::{Plan, PlanInput};
use jiff::Timestamp;

use crate::demand::CachedDemand;
use crate::inputs::Inputs;
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
    plan_file: PathBuf,
    overrides_file: PathBuf,
    overrides: Mutex<Vec<Override>>,
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
    /// beside it), measuring demand with `demand`, answering through
    /// `service`. Overrides persisted earlier are read back.
    pub fn new(service: Arc<Service>, demand: CachedDemand, plan_file: PathBuf) -> Engine {
        let overrides_file = overrides_file(&plan_file);
        let overrides: Vec<Override> = std::fs::read_to_string(&overrides_file)
            .ok()
            .and_then(|t| match serde_json::from_str(&t) {
                Ok(o) => Some(o),
                Err(e) => {
                    tracing::warn!(file = %overrides_file.display(), error = %e, "cannot read the overrides; starting with none");
                    None
                }
            })
            .unwrap_or_default();
        let next = overrides
            .iter()
            .filter_map(|o| o.id.strip_prefix("ov-")?.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
            + 1;
        Engine {
            service,
            demand,
            base: Mutex::new(None),
            plan_file,
            overrides_file,
            overrides: Mutex::new(overrides),
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
        let text = crate::persist::read(&self.plan_file).ok().flatten();
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
            if let Err(e) =
                crate::persist::write_atomically(&self.plan_file, format::to_json(&plan).as_bytes())
            {
                tracing::error!(file = %self.plan_file.display(), error = %e, "cannot write the plan");
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

    /// Makes the effective plan from the base plan, the overrides in force
    /// at `now` and the clusters in the health overlay, and puts it in
    /// force. Expired overrides are dropped (and the file rewritten).
    pub fn publish(&self, now: Timestamp) {
        let Some(base) = self.base.locked().clone() else {
            return;
        };
        let overrides = {
            let mut all = self.overrides.locked();
            let before = all.len();
            all.retain(|o| o.expires_at > now);
            if all.len() != before {
                tracing::info!(expired = before - all.len(), "overrides expired");
                self.persist_overrides(&all);
            }
            all.clone()
        };
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
        let o = Override {
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
            let mut all = self.overrides.locked();
            let mut next = all.clone();
            next.push(o.clone());
            self.try_persist_overrides(&next)
                .map_err(|e| OverrideError::Persist(e.to_string()))?;
            *all = next;
        }
        tracing::info!(r#override = %o.id, actor = %o.actor, "override added");
        self.publish(now);
        Ok(o)
    }

    /// Cancels override `id`; whether it existed.
    pub fn cancel_override(&self, id: &str, now: Timestamp) -> Result<bool, OverrideError> {
        {
            let mut all = self.overrides.locked();
            if !all.iter().any(|o| o.id == id) {
                return Ok(false);
            }
            let next: Vec<Override> = all.iter().filter(|o| o.id != id).cloned().collect();
            self.try_persist_overrides(&next)
                .map_err(|e| OverrideError::Persist(e.to_string()))?;
            *all = next;
        }
        tracing::info!(r#override = id, "override cancelled");
        self.publish(now);
        Ok(true)
    }

    fn try_persist_overrides(&self, all: &[Override]) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(all).map_err(std::io::Error::other)?;
        crate::persist::write_atomically(&self.overrides_file, text.as_bytes())
    }

    fn persist_overrides(&self, all: &[Override]) {
        if let Err(e) = self.try_persist_overrides(all) {
            tracing::error!(file = %self.overrides_file.display(), error = %e, "cannot write the overrides");
        }
    }
}

/// Where the overrides of the plan in `plan_file` are kept.
fn overrides_file(plan_file: &Path) -> PathBuf {
    let stem = plan_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dispatcher-plan".into());
    plan_file.with_file_name(format!("{stem}.overrides.json"))
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
