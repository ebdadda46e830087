//! JSON types of the control API, shared by the server and [`crate::FakeCluster`].

use serde::{Deserialize, Serialize};

/// The line the server prints on stdout (and writes to `DIR/ready.json`) when ready.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// `https://127.0.0.1:PORT`: the Kubernetes API (TLS, bearer token).
    pub api: String,
    /// `http://127.0.0.1:PORT`: the control API (plain HTTP, no auth).
    pub control: String,
    /// Path of the generated kubeconfig.
    pub kubeconfig: String,
}

/// Body of `POST /control/pods/{ns}/{name}/phase`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseUpdate {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: String,
    /// Per-container outcomes. When absent, every container of the pod spec gets a
    /// state derived from the phase (waiting, running, terminated 0 or terminated 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<ContainerOutcome>>,
    /// Pod `status.reason`, e.g. `Evicted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Pod `status.message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Node to bind the pod to (`spec.nodeName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl PhaseUpdate {
    /// An update to `phase` with containers derived from the phase.
    pub fn new(phase: &str) -> Self {
        PhaseUpdate {
            phase: phase.to_string(),
            ..Default::default()
        }
    }
}

/// One container's state in a [`PhaseUpdate`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerOutcome {
    pub name: String,
    /// When set, the container is terminated with this exit code; otherwise its state
    /// follows the pod phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Termination (or waiting) reason: `Completed`, `Error`, `OOMKilled`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Body of `POST /control/deny`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyRule {
    pub verbs: Vec<String>,
    pub resource: String,
    #[serde(default)]
    pub subresource: Option<String>,
}

/// One entry of `GET /control/requests`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    /// The raw query string (without `?`), empty when none.
    pub query: String,
}

/// One entry of `GET /control/deleted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deletion {
    pub namespace: String,
    pub name: String,
    /// `api` (a DELETE request) or `control` (`/control/pods/{ns}/{name}/delete`).
    pub source: String,
    /// `gracePeriodSeconds` of the DELETE request, if any.
    pub grace_period_seconds: Option<i64>,
}

/// Body of `POST /control/hang`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hang {
    pub hang: bool,
}

/// Body of `POST /control/down`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Down {
    pub down: bool,
    /// How the API is down; default [`DownMode::Refuse`].
    #[serde(default)]
    pub mode: DownMode,
}

/// How a "down" Kubernetes API behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DownMode {
    /// Connections are closed: new ones right after accept (before the TLS
    /// handshake), open ones at once. Clients see transport errors, which kube-rs
    /// does not retry.
    #[default]
    #[serde(rename = "refuse")]
    Refuse,
    /// Every request gets 503 `ServiceUnavailable`. Note that kube-rs's default
    /// client retries 503 (and 429, 504) with exponential backoff (15 attempts) unless
    /// `Config::default_retry` is false.
    #[serde(rename = "503")]
    Unavailable,
}
