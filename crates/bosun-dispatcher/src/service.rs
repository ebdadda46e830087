//! The dispatcher's HTTP service, wire-compatible with Prow's external
//! scheduling strategy and OpenShift's prowjob-dispatcher:
//!
//! - `POST /` `{"job": NAME}` -> 200 `{"cluster": ALIAS}`; a rehearsal
//!   (`rehearse-N-NAME`) is answered as NAME; an unknown job is 404 with the
//!   plain text `Cluster not found`; a body that is not JSON is 400 with the
//!   decoder's error; a method other than POST is 405 `Invalid request
//!   method`; any other path is 404 `Not found` (OpenShift's texts).
//! - A name starting `ephemeralcluster-` (an ephemeral cluster's request,
//!   not a job) is answered by OpenShift's round robin over the schedulable
//!   clusters in name order, each name's answer kept for 24 h; the round
//!   robin starts over with every plan.
//! - `POST /` `{"organization", "repository", "type", "branch"}` -> the
//!   cluster of the unit holding that repository's jobs of that type on
//!   that branch (several: the one with the most demand).
//! - `GET /explain?job=NAME`: the job's assignment with its explanation.
//! - `GET /plan`: the whole plan as JSON (`bosun dispatch plan --format
//!   json`'s format, accepted back as `--previous`).
//! - `POST /replan`: plans again now (needs the API token when one is set).
//! - `/metrics`, `/healthz`, `/readyz` (503 until a plan is loaded).
//!
//! Lookups never need a token. A lookup is one hash probe over the plan in
//! force, whose answer bodies are made once per plan.

use bosun_base::sync::{Lock, ReadWrite};
use std::sync::{Arc, RwLock};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use bosun_dispatch::lookup::{JobRepo, Lookup};
use bosun_dispatch::model::Plan;
use bosun_dispatch::openshift::{is_ephemeral, EphemeralPicker};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use subtle::ConstantTimeEq;

/// The plan in force and what answers from it.
struct InForce {
    plan: Arc<Plan>,
    lookup: Lookup,
    /// Ephemeral clusters' round robin over the plan's schedulable clusters.
    ephemeral: std::sync::Mutex<EphemeralPicker>,
    /// `GET /plan`'s body, made once per plan.
    plan_json: Bytes,
}

/// The service's metrics (`bosun_dispatcher_*`).
#[derive(Default)]
struct ServiceMetrics {
    registry: Registry,
    lookups: Family<Vec<(String, String)>, Counter>,
    generation: Gauge,
    target: Family<Vec<(String, String)>, Gauge<f64, std::sync::atomic::AtomicU64>>,
    load: Family<Vec<(String, String)>, Gauge<f64, std::sync::atomic::AtomicU64>>,
    relative_load: Family<Vec<(String, String)>, Gauge<f64, std::sync::atomic::AtomicU64>>,
    moves: Gauge,
    unplaced: Gauge,
    overlay_units: Gauge,
    overridden_units: Gauge,
    overrides: Gauge,
    overlay_clusters: Gauge,
    /// The lookup counters, made once: (job, repository) x (not found,
    /// found). A lookup only increments one (no labels built per request).
    lookup_counters: Vec<Counter>,
}

/// What a lookup asked by.
#[derive(Clone, Copy)]
enum Kind {
    Job = 0,
    Repository = 1,
}

impl ServiceMetrics {
    fn new() -> ServiceMetrics {
        let mut m = ServiceMetrics::default();
        let r = &mut m.registry;
        r.register(
            "bosun_dispatcher_lookups",
            "Lookups answered, by kind (job, repository) and result (found, not_found)",
            m.lookups.clone(),
        );
        r.register(
            "bosun_dispatcher_plan_generation",
            "Generation of the plan in force",
            m.generation.clone(),
        );
        r.register(
            "bosun_dispatcher_cluster_target",
            "Demand a cluster should carry in the plan in force",
            m.target.clone(),
        );
        r.register(
            "bosun_dispatcher_cluster_load",
            "Demand a cluster carries in the plan in force",
            m.load.clone(),
        );
        r.register(
            "bosun_dispatcher_cluster_relative_load",
            "Load over target of a cluster in the plan in force (1 is balanced)",
            m.relative_load.clone(),
        );
        r.register(
            "bosun_dispatcher_plan_moves",
            "Units the plan in force moved",
            m.moves.clone(),
        );
        r.register(
            "bosun_dispatcher_plan_unplaced",
            "Units the plan in force could not place",
            m.unplaced.clone(),
        );
        r.register(
            "bosun_dispatcher_overlay_units",
            "Units the health overlay serves from another cluster",
            m.overlay_units.clone(),
        );
        r.register(
            "bosun_dispatcher_overlay_clusters",
            "Clusters in the health overlay (not Reachable for unhealthy_after)",
            m.overlay_clusters.clone(),
        );
        r.register(
            "bosun_dispatcher_overridden_units",
            "Units moved by overrides and drains",
            m.overridden_units.clone(),
        );
        r.register(
            "bosun_dispatcher_overrides",
            "Overrides in force",
            m.overrides.clone(),
        );
        for kind in ["job", "repository"] {
            for result in ["not_found", "found"] {
                let counter = m
                    .lookups
                    .get_or_create(&vec![
                        ("kind".to_string(), kind.to_string()),
                        ("result".to_string(), result.to_string()),
                    ])
                    .clone();
                m.lookup_counters.push(counter);
            }
        }
        m
    }

    fn plan(&self, plan: &Plan) {
        self.generation.set(plan.generation as i64);
        self.moves.set(plan.moves.len() as i64);
        self.unplaced.set(plan.unplaced.len() as i64);
        self.target.clear();
        self.load.clear();
        self.relative_load.clear();
        for c in &plan.clusters {
            let labels = vec![("cluster".to_string(), c.name.clone())];
            self.target.get_or_create(&labels).set(c.target);
            self.load.get_or_create(&labels).set(c.load);
            self.relative_load
                .get_or_create(&labels)
                .set(c.relative_load);
        }
    }

    fn lookup(&self, kind: Kind, found: bool) {
        self.lookup_counters[kind as usize * 2 + usize::from(found)].inc();
    }
}

/// The dispatcher service: the plan in force, swapped whole by a re-plan.
pub struct Service {
    in_force: RwLock<Option<Arc<InForce>>>,
    metrics: ServiceMetrics,
    token: Option<String>,
    /// Told when a re-plan is requested (`POST /replan`).
    pub replan: tokio::sync::Notify,
    /// Told when a plan is put in force (a re-plan, an override, the health
    /// overlay): whoever places runs by it (the daemon's controller) looks
    /// again.
    pub changed: tokio::sync::Notify,
}

impl Service {
    /// A service with no plan yet (not ready); `token` guards `POST /replan`.
    pub fn new(token: Option<String>) -> Arc<Service> {
        Arc::new(Service {
            in_force: RwLock::new(None),
            metrics: ServiceMetrics::new(),
            token,
            replan: tokio::sync::Notify::new(),
            changed: tokio::sync::Notify::new(),
        })
    }

    /// Puts `plan` in force; `repos` tells the repository of each job (for
    /// the lookup by repository).
    pub fn set_plan(&self, plan: Plan, repos: &[JobRepo]) {
        let lookup = Lookup::new(&plan, repos);
        let plan_json = Bytes::from(bosun_dispatch::format::to_json(&plan));
        self.metrics.plan(&plan);
        let schedulable = plan
            .clusters
            .iter()
            .filter(|c| c.target > 0.0)
            .map(|c| c.name.clone())
            .collect();
        let next = Arc::new(InForce {
            ephemeral: std::sync::Mutex::new(EphemeralPicker::with_clusters(schedulable)),
            plan: Arc::new(plan),
            lookup,
            plan_json,
        });
        *self.in_force.write_locked() = Some(next);
        self.changed.notify_one();
    }

    /// Records what the effective plan's adjustments do (metrics).
    pub fn set_adjustments(
        &self,
        overlay_units: usize,
        overlay_clusters: usize,
        overridden_units: usize,
        overrides: usize,
    ) {
        let m = &self.metrics;
        m.overlay_units.set(overlay_units as i64);
        m.overlay_clusters.set(overlay_clusters as i64);
        m.overridden_units.set(overridden_units as i64);
        m.overrides.set(overrides as i64);
    }

    /// Job `job`'s assignment in the plan in force, and the plan's
    /// generation.
    pub fn assignment(&self, job: &str) -> Option<(bosun_dispatch::model::Assignment, u64)> {
        let current = self.current()?;
        let (a, _) = current.lookup.job(job)?;
        Some((a.clone(), current.plan.generation))
    }

    /// The plan in force, if one is loaded.
    pub fn plan(&self) -> Option<Arc<Plan>> {
        self.current().map(|c| c.plan.clone())
    }

    fn current(&self) -> Option<Arc<InForce>> {
        self.in_force.read_locked().clone()
    }
}

/// The service's routes.
pub fn router(service: Arc<Service>) -> Router {
    router_at(service, "").fallback(|| async { text(StatusCode::NOT_FOUND, "Not found") })
}

/// The service's routes under `prefix` (`""`: at the root; `bosun serve`
/// mounts them at `/api/v1/dispatch`), with no fallback. The routes are
/// flat, so a lookup is routed by one match, as the standalone service's.
pub fn router_at(service: Arc<Service>, prefix: &str) -> Router {
    let root = if prefix.is_empty() { "/" } else { prefix };
    let at = |p: &str| format!("{prefix}{p}");
    Router::new()
        .route(root, any(lookup))
        .route(&at("/explain"), get(explain))
        .route(&at("/plan"), get(plan))
        .route(&at("/replan"), post(replan))
        .route(&at("/metrics"), get(metrics))
        .route(&at("/healthz"), get(|| async { "ok" }))
        .route(&at("/readyz"), get(readyz))
        .with_state(service)
}

/// A plain-text answer as Go's `http.Error` writes it.
pub fn text(status: StatusCode, message: &str) -> Response {
    let mut r = (status, format!("{message}\n")).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// A lookup request: by job, or by repository.
#[derive(Deserialize)]
struct LookupRequest<'a> {
    #[serde(borrow)]
    job: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    organization: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    repository: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    job_type: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    branch: Option<std::borrow::Cow<'a, str>>,
}

/// `POST /`.
async fn lookup(State(service): State<Arc<Service>>, method: Method, body: Bytes) -> Response {
    if method != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "Invalid request method");
    }
    let req: LookupRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let Some(current) = service.current() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "No plan loaded yet");
    };
    if let Some(name) = req.job.as_deref().filter(|j| is_ephemeral(j)) {
        let picked = current
            .ephemeral
            .locked()
            .pick(name, std::time::SystemTime::now());
        return match picked {
            Some(cluster) => axum::Json(serde_json::json!({ "cluster": cluster })).into_response(),
            None => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Failed to get the cluster",
            ),
        };
    }
    let (kind, found) =
        match (&req.job, &req.organization, &req.repository) {
            (Some(job), _, _) => (Kind::Job, current.lookup.job(job)),
            (None, Some(org), Some(repo)) => (
                Kind::Repository,
                current.lookup.repository(
                    org,
                    repo,
                    req.job_type.as_deref().unwrap_or("presubmit"),
                    req.branch.as_deref(),
                ),
            ),
            _ => return text(
                StatusCode::BAD_REQUEST,
                "want {\"job\": NAME} or {\"organization\", \"repository\", \"type\", \"branch\"}",
            ),
        };
    service.metrics.lookup(kind, found.is_some());
    match found {
        Some((_, body)) => {
            let mut r = Response::new(Body::from(Bytes::from_owner(body.clone())));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        None => text(StatusCode::NOT_FOUND, "Cluster not found"),
    }
}

#[derive(Deserialize)]
struct ExplainQuery {
    job: String,
}

/// `GET /explain?job=NAME`.
async fn explain(State(service): State<Arc<Service>>, Query(q): Query<ExplainQuery>) -> Response {
    let Some(current) = service.current() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "No plan loaded yet");
    };
    match current.lookup.job(&q.job) {
        Some((a, _)) => axum::Json(serde_json::json!({
            "job": q.job,
            "cluster": a.cluster,
            "unit": a.unit,
            "rule": a.rule,
            "previous": a.previous,
            "explanation": a.reason,
            "plan_generation": current.plan.generation,
        }))
        .into_response(),
        None => text(StatusCode::NOT_FOUND, "Cluster not found"),
    }
}

/// `GET /plan`.
async fn plan(State(service): State<Arc<Service>>) -> Response {
    match service.current() {
        Some(c) => (
            [(header::CONTENT_TYPE, "application/json")],
            c.plan_json.clone(),
        )
            .into_response(),
        None => text(StatusCode::SERVICE_UNAVAILABLE, "No plan loaded yet"),
    }
}

impl Service {
    /// Whether `headers` carry the token (`Authorization: Bearer TOKEN`,
    /// compared in constant time); always, when no token is set.
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        bool::from(given.as_bytes().ct_eq(token.as_bytes()))
    }

    /// The service's metrics, in the text format.
    pub fn metrics_text(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.metrics.registry);
        out
    }
}

/// The 401 of a request without the token.
pub fn unauthorized() -> Response {
    text(StatusCode::UNAUTHORIZED, "a valid bearer token is required")
}

/// `POST /replan`: 202; the service plans again at once.
async fn replan(State(service): State<Arc<Service>>, headers: HeaderMap) -> Response {
    if !service.authorized(&headers) {
        return unauthorized();
    }
    service.replan.notify_one();
    (StatusCode::ACCEPTED, "re-planning\n").into_response()
}

/// `GET /metrics`.
async fn metrics(State(service): State<Arc<Service>>) -> Response {
    let mut out = String::new();
    if encode(&mut out, &service.metrics.registry).is_err() {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics");
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
        .into_response()
}

/// `GET /readyz`: 503 until a plan is loaded.
async fn readyz(State(service): State<Arc<Service>>) -> Response {
    match service.current() {
        Some(_) => "ok".into_response(),
        None => text(StatusCode::SERVICE_UNAVAILABLE, "No plan loaded yet"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;
    use bosun_dispatch::model::Assignment;
    use tower::ServiceExt;

    fn plan() -> Plan {
        let mut p = Plan {
            generation: 4,
            clusters: ["build01", "build02"]
                .iter()
                .map(|c| bosun_dispatch::model::ClusterLoad {
                    name: c.to_string(),
                    capacity: 100,
                    target: 1.0,
                    load: 1.0,
                    relative_load: 1.0,
                })
                .collect(),
            ..Plan::default()
        };
        for (job, cluster) in [
            ("pull-ci-acme-widget-main-unit", "build01"),
            ("periodic-acme-nightly", "build02"),
        ] {
            p.assignments.insert(
                job.into(),
                Assignment {
                    cluster: cluster.into(),
                    unit: "acme/widget.yaml".into(),
                    rule: "balance".into(),
                    previous: Some("build03".into()),
                    reason: format!("moved from build03 to {cluster} to balance load"),
                },
            );
        }
        p
    }

    /// The status, content type and body of `method path` with `body`.
    async fn call(
        service: &Arc<Service>,
        method: &str,
        path: &str,
        body: &str,
        token: Option<&str>,
    ) -> (u16, String, String) {
        let mut req = axum::http::Request::builder().method(method).uri(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let r = router(service.clone())
            .oneshot(req.body(Body::from(body.to_string())).unwrap())
            .await
            .unwrap();
        let status = r.status().as_u16();
        let kind = r
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, kind, String::from_utf8_lossy(&body).to_string())
    }

    #[tokio::test]
    async fn prows_external_strategy_and_openshifts_status_codes() {
        let s = Service::new(Some("sesame".into()));
        // No plan yet: not ready.
        assert_eq!(call(&s, "GET", "/readyz", "", None).await.0, 503);
        assert_eq!(call(&s, "GET", "/healthz", "", None).await.0, 200);
        s.set_plan(
            plan(),
            &[JobRepo {
                job: "pull-ci-acme-widget-main-unit".into(),
                organization: "acme".into(),
                repository: "widget".into(),
                job_type: "presubmit".into(),
                branches: vec!["main".into()],
                demand: 3.0,
            }],
        );
        assert_eq!(call(&s, "GET", "/readyz", "", None).await.0, 200);
        let job = |name: &str| format!(r#"{{"job": "{name}"}}"#);
        assert_eq!(
            call(&s, "POST", "/", &job("periodic-acme-nightly"), None).await,
            (
                200,
                "application/json".into(),
                r#"{"cluster":"build02"}"#.into()
            )
        );
        assert_eq!(
            call(
                &s,
                "POST",
                "/",
                &job("rehearse-17-periodic-acme-nightly"),
                None
            )
            .await
            .2,
            r#"{"cluster":"build02"}"#
        );
        assert_eq!(
            call(&s, "POST", "/", &job("nope"), None).await,
            (
                404,
                "text/plain; charset=utf-8".into(),
                "Cluster not found\n".into()
            )
        );
        assert_eq!(
            call(&s, "GET", "/", "", None).await,
            (
                405,
                "text/plain; charset=utf-8".into(),
                "Invalid request method\n".into()
            )
        );
        let (status, _, body) = call(&s, "POST", "/", "{not json", None).await;
        assert_eq!(status, 400);
        assert!(body.contains("key must be a string"), "{body}");
        assert_eq!(
            call(&s, "POST", "/nowhere", "{}", None).await.2,
            "Not found\n"
        );
        // Ephemeral clusters: a round robin, each name's answer kept.
        let eph = |n: &str| format!(r#"{{"job": "ephemeralcluster-ci-{n}"}}"#);
        let (status, _, first) = call(&s, "POST", "/", &eph("a"), None).await;
        assert_eq!(status, 200);
        let (_, _, second) = call(&s, "POST", "/", &eph("b"), None).await;
        assert_ne!(first, second, "round robin");
        assert_eq!(
            call(&s, "POST", "/", &eph("a"), None).await.2,
            first,
            "kept"
        );
        // By repository.
        let repo = r#"{"organization": "acme", "repository": "widget", "type": "presubmit", "branch": "main"}"#;
        assert_eq!(
            call(&s, "POST", "/", repo, None).await.2,
            r#"{"cluster":"build01"}"#
        );
        let other = r#"{"organization": "acme", "repository": "widget", "type": "postsubmit", "branch": "main"}"#;
        assert_eq!(call(&s, "POST", "/", other, None).await.0, 404);
        // Explanations and the plan.
        let (status, _, body) = call(
            &s,
            "GET",
            "/explain?job=pull-ci-acme-widget-main-unit",
            "",
            None,
        )
        .await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["cluster"], "build01");
        assert_eq!(v["previous"], "build03");
        assert_eq!(v["plan_generation"], 4);
        assert!(v["explanation"].as_str().unwrap().contains("balance"));
        assert_eq!(call(&s, "GET", "/explain?job=nope", "", None).await.0, 404);
        let (status, _, body) = call(&s, "GET", "/plan", "", None).await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["assignments"]["periodic-acme-nightly"], "build02");
        // A re-plan needs the token; a lookup never does.
        assert_eq!(call(&s, "POST", "/replan", "", None).await.0, 401);
        assert_eq!(call(&s, "POST", "/replan", "", Some("wrong")).await.0, 401);
        assert_eq!(call(&s, "POST", "/replan", "", Some("sesame")).await.0, 202);
        let (_, _, metrics) = call(&s, "GET", "/metrics", "", None).await;
        assert!(
            metrics.contains(r#"bosun_dispatcher_lookups_total{kind="job",result="found"} 2"#),
            "{metrics}"
        );
        assert!(
            metrics.contains("bosun_dispatcher_plan_generation 4"),
            "{metrics}"
        );
    }
}
