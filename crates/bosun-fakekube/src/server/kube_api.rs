//! The Kubernetes side: `/version`, discovery, pods (CRUD, list, watch, log) and
//! `SelfSubjectAccessReview`, behind the fault gate (hang, down) and bearer auth.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::ApiError;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{key, Event, EventType, Filter, Shared};
use crate::wire::RequestRecord;

/// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

type Params = Query<HashMap<String, String>>;

/// The router of the Kubernetes API.
pub fn router(shared: Arc<Shared>) -> Router {
    let pods = "/api/v1/namespaces/{ns}/pods";
    Router::new()
        .route("/version", get(version))
        .route("/api", get(api_versions))
        .route("/api/v1", get(core_resources))
        .route("/apis", get(api_groups))
        .route(
            "/apis/authorization.k8s.io/v1",
            get(authorization_resources),
        )
        .route("/api/v1/pods", get(list_all))
        .route(pods, get(list_namespaced).post(create))
        .route(
            &format!("{pods}/{{name}}"),
            get(get_pod).put(replace).patch(patch).delete(delete),
        )
        .route(&format!("{pods}/{{name}}/log"), get(log))
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            post(self_subject_access_review),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(shared.clone(), gate))
        .with_state(shared)
}

/// Records the request, then applies the faults (hang, down) and the bearer token.
async fn gate(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    s.read().log_request(RequestRecord {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or("").to_string(),
    });
    let mut changed = s.subscribe();
    while s.read().hang {
        if changed.changed().await.is_err() {
            break;
        }
    }
    if s.read().down.is_some() {
        // In `Refuse` mode the connection is being closed; answer 503 all the same.
        return ApiError::unavailable().into_response();
    }
    let authorized = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|token| token == s.token);
    if !authorized {
        return ApiError::unauthorized().into_response();
    }
    next.run(req).await
}

async fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-bosun-fakekube",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }))
}

async fn api_versions(State(s): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": s.api_addr},
        ],
    }))
}

async fn core_resources() -> Json<Value> {
    Json(json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "pods",
                "singularName": "pod",
                "namespaced": true,
                "kind": "Pod",
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                "shortNames": ["po"],
            },
            {
                "name": "pods/log",
                "singularName": "",
                "namespaced": true,
                "kind": "Pod",
                "verbs": ["get"],
            },
        ],
    }))
}

async fn api_groups() -> Json<Value> {
    let version = json!({"groupVersion": "authorization.k8s.io/v1", "version": "v1"});
    Json(json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {"name": "authorization.k8s.io", "versions": [version], "preferredVersion": version},
        ],
    }))
}

async fn authorization_resources() -> Json<Value> {
    Json(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "authorization.k8s.io/v1",
        "resources": [
            {
                "name": "selfsubjectaccessreviews",
                "singularName": "selfsubjectaccessreview",
                "namespaced": false,
                "kind": "SelfSubjectAccessReview",
                "verbs": ["create"],
            },
        ],
    }))
}

fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    matches!(q.get(name).map(String::as_str), Some("1" | "true"))
}

fn filter(namespace: Option<String>, q: &HashMap<String, String>) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    Ok(Filter {
        namespace,
        labels,
        fields,
    })
}

async fn list_all(State(s): State<Arc<Shared>>, Query(q): Params) -> Result<Response, ApiError> {
    list_or_watch(s, None, q)
}

async fn list_namespaced(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Params,
) -> Result<Response, ApiError> {
    list_or_watch(s, Some(ns), q)
}

/// Lists always answer from the latest state, whatever `resourceVersion` says;
/// `limit` and `continue` are ignored (everything fits in one page).
fn list_or_watch(
    s: Arc<Shared>,
    namespace: Option<String>,
    q: HashMap<String, String>,
) -> Result<Response, ApiError> {
    let filter = filter(namespace, &q)?;
    if flag(&q, "watch") {
        return watch(s, filter, &q);
    }
    let store = s.read();
    let list = json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": store.rv.to_string()},
        "items": store.list(&filter),
    });
    Ok(Json(list).into_response())
}

/// A response body fed line by line from a task; the task sees the client go away
/// through `Sender::closed`.
fn streaming_body(content_type: &'static str) -> (mpsc::Sender<Bytes>, Response) {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let response = (
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(stream),
    )
        .into_response();
    (tx, response)
}

fn watch_line(kind: &str, object: &impl serde::Serialize) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))
        .expect("watch events serialize");
    line.push(b'\n');
    Bytes::from(line)
}

/// The watch event type a client with `filter` sees for `event`, if any: a pod
/// that starts matching is ADDED, one that stops matching is DELETED.
fn event_type(filter: &Filter, event: &Event) -> Option<&'static str> {
    let now = filter.matches(&event.pod);
    let before = event.prev.as_ref().is_some_and(|p| filter.matches(p));
    match (event.kind, before, now) {
        (EventType::Deleted, b, n) if b || n => Some("DELETED"),
        (EventType::Deleted, _, _) => None,
        (_, true, true) => Some("MODIFIED"),
        (_, false, true) => Some("ADDED"),
        (_, true, false) => Some("DELETED"),
        (_, false, false) => None,
    }
}

fn expired_line(message: String) -> Bytes {
    watch_line("ERROR", &ApiError::expired(message).status())
}

fn bookmark_line(rv: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    watch_line(
        "BOOKMARK",
        &json!({"kind": "Pod", "apiVersion": "v1", "metadata": metadata}),
    )
}

fn watch(
    s: Arc<Shared>,
    filter: Filter,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let start = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {v:?}")))?,
        ),
    };
    let timeout = match q.get("timeoutSeconds") {
        None => None,
        Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid timeoutSeconds {t:?}"))
        })?)),
    };
    let options = WatchOptions {
        filter,
        start,
        bookmarks: flag(q, "allowWatchBookmarks"),
        send_initial_events: flag(q, "sendInitialEvents"),
        deadline: timeout.map(|t| Instant::now() + t),
    };
    let (tx, response) = streaming_body("application/json");
    tokio::spawn(run_watch(s, options, tx));
    Ok(response)
}

struct WatchOptions {
    filter: Filter,
    /// `None`: start with synthetic ADDED events for the current state.
    start: Option<u64>,
    bookmarks: bool,
    send_initial_events: bool,
    deadline: Option<Instant>,
}

enum Step {
    Gone(String),
    Events(Vec<Event>, u64),
}

async fn run_watch(s: Arc<Shared>, o: WatchOptions, tx: mpsc::Sender<Bytes>) {
    let mut changed = s.subscribe();
    let (mut last, epoch, initial) = {
        let store = s.read();
        match o.start {
            Some(rv) if o.send_initial_events => (store.rv.max(rv), store.gone_epoch, {
                Some(store.list(&o.filter))
            }),
            Some(rv) => (rv, store.gone_epoch, None),
            None => (store.rv, store.gone_epoch, Some(store.list(&o.filter))),
        }
    };
    if let Some(pods) = initial {
        for pod in pods {
            if tx.send(watch_line("ADDED", &pod)).await.is_err() {
                return;
            }
        }
        if o.send_initial_events && tx.send(bookmark_line(last, true)).await.is_err() {
            return;
        }
    }
    let mut ticks = tokio::time::interval_at(Instant::now() + BOOKMARK_INTERVAL, BOOKMARK_INTERVAL);
    let deadline = o.deadline.unwrap_or_else(far_future);
    loop {
        let step = {
            let store = s.read();
            if store.gone_epoch != epoch {
                Step::Gone("the watch was ended by /control/gone".to_string())
            } else {
                match store.events_after(last) {
                    Ok(events) => Step::Events(events, store.rv),
                    Err(_) => Step::Gone(format!("too old resource version: {last}")),
                }
            }
        };
        match step {
            Step::Gone(message) => {
                let _ = tx.send(expired_line(message)).await;
                return;
            }
            Step::Events(events, rv) => {
                for event in events {
                    if let Some(kind) = event_type(&o.filter, &event) {
                        if tx.send(watch_line(kind, &event.pod)).await.is_err() {
                            return;
                        }
                    }
                }
                last = last.max(rv);
            }
        }
        tokio::select! {
            _ = tx.closed() => return,
            r = changed.changed() => if r.is_err() { return },
            _ = ticks.tick(), if o.bookmarks => {
                if tx.send(bookmark_line(last, false)).await.is_err() {
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))
}

async fn create(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Pod>), ApiError> {
    let mut pod: Pod = parse_json(&body)?;
    match &pod.metadata.namespace {
        Some(n) if n != &ns => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => pod.metadata.namespace = Some(ns),
    }
    if pod.metadata.name.as_deref().unwrap_or("").is_empty() {
        let Some(prefix) = pod.metadata.generate_name.clone().filter(|g| !g.is_empty()) else {
            return Err(ApiError::invalid(
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        };
        let suffix: String = uuid::Uuid::new_v4().simple().to_string()[..5].to_string();
        pod.metadata.name = Some(format!("{prefix}{suffix}"));
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    if pod.spec.as_ref().is_none_or(|s| s.containers.is_empty()) {
        return Err(ApiError::invalid(&name, "spec.containers: Required value"));
    }
    let pod = s.mutate(|st| st.create(pod))?;
    Ok((StatusCode::CREATED, Json(pod)))
}

async fn get_pod(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
) -> Result<Json<Pod>, ApiError> {
    Ok(Json(s.read().get(&ns, &name)?.clone()))
}

/// Fails with 409 Conflict when `expected` is set and differs from the pod's.
fn check_resource_version(
    current: &Pod,
    expected: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    match expected {
        Some(rv) if !rv.is_empty() && Some(rv) != current.metadata.resource_version.as_deref() => {
            Err(ApiError::conflict(
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ))
        }
        _ => Ok(()),
    }
}

/// `PUT`: replaces metadata and spec; status, uid and creationTimestamp are kept.
async fn replace(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Pod>, ApiError> {
    let new: Pod = parse_json(&body)?;
    if new.metadata.name.as_deref() != Some(name.as_str()) {
        return Err(ApiError::bad_request(
            "the name of the object does not match the name on the URL",
        ));
    }
    let pod = s.mutate(|st| {
        st.update(&ns, &name, |pod| {
            check_resource_version(pod, new.metadata.resource_version.as_deref(), &name)?;
            let keep = pod.clone();
            *pod = new;
            pod.metadata.namespace = keep.metadata.namespace;
            pod.metadata.uid = keep.metadata.uid;
            pod.metadata.creation_timestamp = keep.metadata.creation_timestamp;
            pod.metadata.generation = keep.metadata.generation.map(|g| g + 1);
            pod.status = keep.status;
            Ok(())
        })
    })?;
    Ok(Json(pod))
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let object = target.as_object_mut().expect("just made an object");
    for (k, v) in fields {
        if v.is_null() {
            object.remove(k);
        } else {
            merge_patch(object.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// `PATCH`: merge, strategic-merge and apply patches are all applied as JSON merge
/// patches; JSON patches are refused (415). Status, uid, name, namespace and
/// creationTimestamp cannot be changed this way.
async fn patch(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Pod>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let supported = [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "application/apply-patch+json",
    ];
    if !supported.iter().any(|t| content_type.starts_with(t)) {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the fake does not support patches of type {content_type:?}"),
        ));
    }
    let patch: Value = parse_json(&body)?;
    let pod = s.mutate(|st| {
        st.update(&ns, &name, |pod| {
            let expected = patch["metadata"]["resourceVersion"].as_str();
            check_resource_version(pod, expected, &name)?;
            let mut value = serde_json::to_value(&*pod).expect("pods serialize");
            merge_patch(&mut value, &patch);
            let mut patched: Pod = serde_json::from_value(value).map_err(|e| {
                ApiError::invalid(&name, format!("the patched pod is invalid: {e}"))
            })?;
            patched.metadata.name = pod.metadata.name.take();
            patched.metadata.namespace = pod.metadata.namespace.take();
            patched.metadata.uid = pod.metadata.uid.take();
            patched.metadata.creation_timestamp = pod.metadata.creation_timestamp.take();
            patched.status = pod.status.take();
            *pod = patched;
            Ok(())
        })
    })?;
    Ok(Json(pod))
}

/// `DELETE`: the pod goes at once, whatever the grace period; the deletion (with
/// its grace period) is recorded for `/control/deleted`.
async fn delete(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Params,
    body: Bytes,
) -> Result<Json<Pod>, ApiError> {
    let options: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        parse_json(&body)?
    };
    let grace = options["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()));
    let pod = s.mutate(|st| st.delete(&ns, &name, "api", grace))?;
    Ok(Json(pod))
}

fn container_started(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let statuses = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[]);
    matches!(phase, "Succeeded" | "Failed")
        || statuses.iter().any(|c| {
            c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
}

/// True when the pod's containers will write no more log.
pub fn containers_terminated(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let statuses = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[]);
    matches!(phase, "Succeeded" | "Failed")
        || (!statuses.is_empty()
            && statuses
                .iter()
                .all(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some())))
}

fn tail(text: &str, lines: Option<usize>) -> &str {
    let Some(n) = lines else { return text };
    let starts: Vec<usize> = text
        .split_inclusive('\n')
        .scan(0, |offset, line| {
            let start = *offset;
            *offset += line.len();
            Some(start)
        })
        .collect();
    let cut = starts.len().saturating_sub(n);
    starts.get(cut).map_or("", |&start| &text[start..])
}

/// `GET .../log`: one log per pod (the `container` parameter is checked against the
/// spec but all containers share the log). Like a real API server, a pod whose
/// containers have not started answers 400.
async fn log(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Params,
) -> Result<Response, ApiError> {
    let follow = flag(&q, "follow");
    let tail_lines = match q.get("tailLines") {
        None => None,
        Some(t) => Some(
            t.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid tailLines {t:?}")))?,
        ),
    };
    let (text, done) = {
        let store = s.read();
        let pod = store.get(&ns, &name)?;
        let containers: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter().map(|c| c.name.as_str()))
            .collect();
        let container = match q.get("container") {
            Some(c) if !containers.contains(&c.as_str()) => {
                return Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
            Some(c) => c.clone(),
            None => containers.first().copied().unwrap_or("").to_string(),
        };
        if !container_started(pod) {
            return Err(ApiError::bad_request(format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
            )));
        }
        let text = store
            .logs
            .get(&key(&ns, &name))
            .cloned()
            .unwrap_or_default();
        (text, containers_terminated(pod))
    };
    let first = Bytes::from(tail(&text, tail_lines).to_string());
    if !follow || done {
        return Ok(([(header::CONTENT_TYPE, "text/plain")], first).into_response());
    }
    let (tx, response) = streaming_body("text/plain");
    tokio::spawn(follow_log(s, ns, name, text.len(), first, tx));
    Ok(response)
}

async fn follow_log(
    s: Arc<Shared>,
    ns: String,
    name: String,
    mut sent: usize,
    first: Bytes,
    tx: mpsc::Sender<Bytes>,
) {
    let mut changed = s.subscribe();
    if !first.is_empty() && tx.send(first).await.is_err() {
        return;
    }
    loop {
        let (new, done) = {
            let store = s.read();
            let text = store.logs.get(&key(&ns, &name)).map_or("", String::as_str);
            let new = Bytes::from(text.get(sent..).unwrap_or("").to_string());
            sent = text.len();
            let done = store.get(&ns, &name).map_or(true, containers_terminated);
            (new, done)
        };
        if !new.is_empty() && tx.send(new).await.is_err() {
            return;
        }
        if done {
            return;
        }
        tokio::select! {
            _ = tx.closed() => return,
            r = changed.changed() => if r.is_err() { return },
        }
    }
}

/// Answers `status.allowed` from the deny set; `*` in a deny rule's verb matches
/// every verb. Non-resource reviews are always allowed.
async fn self_subject_access_review(
    State(s): State<Arc<Shared>>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut review: Value = parse_json(&body)?;
    let attrs = &review["spec"]["resourceAttributes"];
    let denied = if attrs.is_object() {
        let verb = attrs["verb"].as_str().unwrap_or("");
        let resource = attrs["resource"].as_str().unwrap_or("");
        let subresource = attrs["subresource"].as_str().unwrap_or("");
        let store = s.read();
        [verb, "*"].iter().any(|v| {
            store
                .deny
                .contains(&(v.to_string(), resource.to_string(), subresource.to_string()))
        })
    } else {
        false
    };
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    review["metadata"] = json!({});
    review["status"] = if denied {
        json!({"allowed": false, "denied": true, "reason": "denied by bosun-fakekube /control/deny"})
    } else {
        json!({"allowed": true, "reason": "allowed by bosun-fakekube"})
    };
    Ok((StatusCode::CREATED, Json(review)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", Some(2)), "b\nc\n");
        assert_eq!(tail("a\nb\nc", Some(1)), "c");
        assert_eq!(tail("a\nb\n", Some(5)), "a\nb\n");
        assert_eq!(tail("a\nb\n", Some(0)), "");
        assert_eq!(tail("a\nb\n", None), "a\nb\n");
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut v = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge_patch(&mut v, &json!({"a": {"b": null, "e": 3}, "d": [2]}));
        assert_eq!(v, json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }
}
