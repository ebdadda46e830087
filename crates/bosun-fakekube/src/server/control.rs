//! The control API (plain HTTP, no auth): tests play scheduler and kubelet through
//! it, inject faults, and inspect what the client did. Errors are Kubernetes
//! `Status` objects too (404 for unknown pods, 400 for bad bodies).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};

use super::error::ApiError;
use super::store::{key, now, Shared};
use crate::wire::{ContainerOutcome, Deletion, DenyRule, Down, Hang, PhaseUpdate, RequestRecord};

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/control/pods", get(pods))
        .route("/control/pods/{ns}/{name}/phase", post(phase))
        .route(
            "/control/pods/{ns}/{name}/unschedulable",
            post(unschedulable),
        )
        .route(
            "/control/pods/{ns}/{name}/log",
            post(append_log).get(read_log),
        )
        .route("/control/pods/{ns}/{name}/delete", post(delete))
        .route("/control/gone", post(gone))
        .route("/control/hang", post(hang))
        .route("/control/down", post(down))
        .route("/control/deny", post(deny).delete(clear_denies).get(denies))
        .route("/control/requests", get(requests).delete(clear_requests))
        .route("/control/deleted", get(deleted))
        .with_state(shared)
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("bad control body: {e}")))
}

async fn pods(State(s): State<Arc<Shared>>) -> Json<Vec<Pod>> {
    Json(s.read().pods.values().cloned().collect())
}

const PHASES: &[&str] = &["Pending", "Running", "Succeeded", "Failed", "Unknown"];

fn set_condition(
    status: &mut PodStatus,
    type_: &str,
    value: bool,
    reason: Option<&str>,
    message: Option<&str>,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let value = if value { "True" } else { "False" };
    let condition = PodCondition {
        type_: type_.to_string(),
        status: value.to_string(),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        last_transition_time: Some(Time(now())),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == value && c.reason == condition.reason => {}
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

/// The state of one container under `phase`, as described in [`PhaseUpdate`].
fn container_state(
    phase: &str,
    outcome: &ContainerOutcome,
    previous: Option<&ContainerState>,
) -> ContainerState {
    let started = previous
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.clone())
        .unwrap_or_else(|| Time(now()));
    let terminated = |code: i32, default_reason: &str| ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            reason: Some(
                outcome
                    .reason
                    .clone()
                    .unwrap_or_else(|| default_reason.to_string()),
            ),
            started_at: Some(started.clone()),
            finished_at: Some(Time(now())),
            container_id: Some(format!("fake://{}", outcome.name)),
            ..Default::default()
        }),
        ..Default::default()
    };
    match (outcome.exit_code, phase) {
        (Some(0), _) => terminated(0, "Completed"),
        (Some(code), _) => terminated(code, "Error"),
        (None, "Running") => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(started.clone()),
            }),
            ..Default::default()
        },
        (None, "Succeeded") => terminated(0, "Completed"),
        (None, "Failed") => terminated(1, "Error"),
        (None, _) => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(
                    outcome
                        .reason
                        .clone()
                        .unwrap_or_else(|| "ContainerCreating".to_string()),
                ),
                message: None,
            }),
            ..Default::default()
        },
    }
}

/// Applies a [`PhaseUpdate`]: phase, reason, message, node, container statuses and
/// the PodScheduled / Initialized / ContainersReady / Ready conditions.
fn apply_phase(pod: &mut Pod, update: &PhaseUpdate) -> Result<(), ApiError> {
    let phase = update.phase.as_str();
    if !PHASES.contains(&phase) {
        return Err(ApiError::bad_request(format!(
            "unknown phase {phase:?}; expected one of {PHASES:?}"
        )));
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if let Some(node) = &update.node {
        spec.node_name = Some(node.clone());
    }
    let images: BTreeMap<String, String> = spec
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect();
    let outcomes = update.containers.clone().unwrap_or_else(|| {
        images
            .keys()
            .map(|name| ContainerOutcome {
                name: name.clone(),
                ..Default::default()
            })
            .collect()
    });
    let bound = spec.node_name.is_some();
    let status = pod.status.get_or_insert_with(Default::default);
    let previous = status.container_statuses.take().unwrap_or_default();
    let statuses: Vec<ContainerStatus> = outcomes
        .iter()
        .map(|o| {
            let prev = previous
                .iter()
                .find(|c| c.name == o.name)
                .and_then(|c| c.state.as_ref());
            let state = container_state(phase, o, prev);
            let running = state.running.is_some();
            ContainerStatus {
                name: o.name.clone(),
                image: images.get(&o.name).cloned().unwrap_or_default(),
                image_id: String::new(),
                ready: running,
                started: Some(running),
                restart_count: 0,
                container_id: state
                    .waiting
                    .is_none()
                    .then(|| format!("fake://{}", o.name)),
                state: Some(state),
                ..Default::default()
            }
        })
        .collect();
    let all_running = !statuses.is_empty() && statuses.iter().all(|c| c.ready);
    status.container_statuses = Some(statuses);
    status.phase = Some(phase.to_string());
    status.reason = update.reason.clone();
    status.message = update.message.clone();
    // A kubelet acknowledges a pod bound to its node (start time) while it is
    // still Pending (pulling images, ...).
    if phase != "Pending" || update.node.is_some() {
        status.start_time.get_or_insert_with(|| Time(now()));
        status
            .host_ip
            .get_or_insert_with(|| "192.0.2.1".to_string());
        status
            .pod_ip
            .get_or_insert_with(|| "198.51.100.1".to_string());
    }
    if phase != "Pending" || bound {
        set_condition(status, "PodScheduled", true, None, None);
    }
    if phase != "Pending" {
        set_condition(status, "Initialized", true, None, None);
    }
    let ready = phase == "Running" && all_running;
    let reason = (!ready && phase != "Pending").then_some("PodCompleted");
    set_condition(status, "ContainersReady", ready, reason, None);
    set_condition(status, "Ready", ready, reason, None);
    Ok(())
}

async fn phase(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Pod>, ApiError> {
    let update: PhaseUpdate = parse(&body)?;
    let pod = s.mutate(|st| st.update(&ns, &name, |pod| apply_phase(pod, &update)))?;
    Ok(Json(pod))
}

/// Body (optional): `{"message": "..."}`.
async fn unschedulable(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Pod>, ApiError> {
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        parse(&body)?
    };
    let message = body["message"]
        .as_str()
        .unwrap_or("0/1 nodes are available: 1 Insufficient cpu.")
        .to_string();
    let pod = s.mutate(|st| {
        st.update(&ns, &name, |pod| {
            let status = pod.status.get_or_insert_with(Default::default);
            set_condition(
                status,
                "PodScheduled",
                false,
                Some("Unschedulable"),
                Some(&message),
            );
            Ok(())
        })
    })?;
    Ok(Json(pod))
}

/// Appends the raw body to the pod's log (no resourceVersion change).
async fn append_log(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::bad_request("log text must be UTF-8"))?;
    s.mutate(|st| {
        st.get(&ns, &name)?;
        st.logs.entry(key(&ns, &name)).or_default().push_str(&text);
        Ok::<_, ApiError>(())
    })?;
    Ok(StatusCode::NO_CONTENT)
}

async fn read_log(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
) -> String {
    s.read()
        .logs
        .get(&key(&ns, &name))
        .cloned()
        .unwrap_or_default()
}

/// The pod vanishes (node lost, garbage collected): DELETED, recorded as `control`.
async fn delete(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
) -> Result<Json<Pod>, ApiError> {
    Ok(Json(s.mutate(|st| st.delete(&ns, &name, "control", None))?))
}

async fn gone(State(s): State<Arc<Shared>>) -> Json<Value> {
    let rv = s.mutate(|st| {
        st.gone();
        st.rv
    });
    Json(json!({"resourceVersion": rv.to_string()}))
}

async fn hang(State(s): State<Arc<Shared>>, body: Bytes) -> Result<StatusCode, ApiError> {
    let Hang { hang } = parse(&body)?;
    s.mutate(|st| st.hang = hang);
    Ok(StatusCode::NO_CONTENT)
}

async fn down(State(s): State<Arc<Shared>>, body: Bytes) -> Result<StatusCode, ApiError> {
    let Down { down, mode } = parse(&body)?;
    s.mutate(|st| st.down = down.then_some(mode));
    Ok(StatusCode::NO_CONTENT)
}

async fn deny(State(s): State<Arc<Shared>>, body: Bytes) -> Result<StatusCode, ApiError> {
    let rule: DenyRule = parse(&body)?;
    s.mutate(|st| {
        for verb in &rule.verbs {
            st.deny.insert((
                verb.clone(),
                rule.resource.clone(),
                rule.subresource.clone().unwrap_or_default(),
            ));
        }
    });
    Ok(StatusCode::NO_CONTENT)
}

async fn clear_denies(State(s): State<Arc<Shared>>) -> StatusCode {
    s.mutate(|st| st.deny.clear());
    StatusCode::NO_CONTENT
}

async fn denies(State(s): State<Arc<Shared>>) -> Json<Vec<DenyRule>> {
    let rules = s
        .read()
        .deny
        .iter()
        .map(|(verb, resource, sub)| DenyRule {
            verbs: vec![verb.clone()],
            resource: resource.clone(),
            subresource: (!sub.is_empty()).then(|| sub.clone()),
        })
        .collect();
    Json(rules)
}

async fn requests(State(s): State<Arc<Shared>>) -> Json<Vec<RequestRecord>> {
    Json(s.read().requests.iter().cloned().collect())
}

async fn clear_requests(State(s): State<Arc<Shared>>) -> StatusCode {
    s.read().requests.clear();
    StatusCode::NO_CONTENT
}

async fn deleted(State(s): State<Arc<Shared>>) -> Json<Vec<Deletion>> {
    Json(s.read().deleted.clone())
}
