//! The run model (Prow's ProwJob, the fields that matter) and its state machine.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use bosun_config::types::{JobType, Refs};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Prow's run states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Waiting for a cluster (`scheduler.enabled`).
    Scheduling,
    /// Waiting to start.
    Triggered,
    /// Started on its cluster.
    Pending,
    /// Ended: every container exited 0.
    Success,
    /// Ended: the job failed.
    Failure,
    /// Ended: aborted (by a user, `replace`, or the running timeout).
    Aborted,
    /// Ended: could not run (bad config, unknown cluster, lost process, ...).
    Error,
}

impl RunState {
    /// Every state, in Prow's order.
    pub const ALL: [RunState; 7] = [
        RunState::Scheduling,
        RunState::Triggered,
        RunState::Pending,
        RunState::Success,
        RunState::Failure,
        RunState::Aborted,
        RunState::Error,
    ];

    /// Prow's name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Scheduling => "scheduling",
            RunState::Triggered => "triggered",
            RunState::Pending => "pending",
            RunState::Success => "success",
            RunState::Failure => "failure",
            RunState::Aborted => "aborted",
            RunState::Error => "error",
        }
    }

    /// Success, failure, aborted or error: nothing moves it any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunState::Success | RunState::Failure | RunState::Aborted | RunState::Error
        )
    }

    /// `scheduling`, `triggered` or `pending`.
    pub fn is_active(self) -> bool {
        !self.is_final()
    }

    /// Plank's state machine: which moves are legal. `pending -> pending` is a
    /// revival (the pod is recreated); `triggered -> triggered` and
    /// `scheduling -> scheduling` only say anew why a run waits (its
    /// description).
    pub fn can_move_to(self, to: RunState) -> bool {
        use RunState::*;
        match self {
            Scheduling => matches!(to, Scheduling | Triggered | Aborted | Error),
            Triggered => matches!(to, Triggered | Pending | Aborted | Error),
            Pending => matches!(to, Pending | Success | Failure | Aborted | Error),
            Success | Failure | Aborted | Error => false,
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown run state {s:?}"))
    }
}

/// Parses Prow's job type name.
pub fn job_type_from_str(s: &str) -> Option<JobType> {
    match s {
        "periodic" => Some(JobType::Periodic),
        "presubmit" => Some(JobType::Presubmit),
        "postsubmit" => Some(JobType::Postsubmit),
        "batch" => Some(JobType::Batch),
        _ => None,
    }
}

/// Labels or annotations: shared, because every run of a job starts with the
/// same ones (a periodic's run copies its template's by a reference count, not
/// a dozen string copies; mutate with `Arc::make_mut`).
pub type Labels = std::sync::Arc<BTreeMap<String, String>>;

/// How many label sets [`shared_labels`] keeps to share (then it starts
/// again).
const SHARED_LABELS: usize = 1024;

/// Labels or annotations from their stored JSON text, shared with the runs
/// read before whose text was the same: the runs of a job carry the same
/// ones, and every active run is kept in memory (the writer's copies, the
/// controller's view), where a map of its own was about 550 bytes a run.
/// Both stores decode their rows' labels with this.
pub fn shared_labels(text: &str) -> Result<Labels, serde_json::Error> {
    use bosun_base::sync::Lock;
    static SHARED: std::sync::OnceLock<std::sync::Mutex<HashMap<Box<str>, Labels>>> =
        std::sync::OnceLock::new();
    let shared = SHARED.get_or_init(Default::default);
    if let Some(l) = shared.locked().get(text) {
        return Ok(l.clone());
    }
    let l: Labels = serde_json::from_str(text)?;
    let mut kept = shared.locked();
    if kept.len() >= SHARED_LABELS {
        kept.clear();
    }
    kept.insert(text.into(), l.clone());
    Ok(l)
}

/// A run: one execution of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Lowercase UUIDv4; also the pod name on Kubernetes.
    pub id: String,
    /// Prow's `BUILD_ID`: a decimal string, increasing with every run.
    pub build_id: String,
    /// The job's name (`JOB_NAME`).
    pub job: String,
    /// presubmit, postsubmit, periodic or batch.
    pub job_type: JobType,
    /// The periodic's identity (name, or `ORG/REPO:name` in-repo), for periodic
    /// runs. The name in it is the run's `job` (see [`crate::periodic_job`]):
    /// the SQLite store finds a periodic's runs among its job's.
    pub periodic: Option<String>,
    /// The cluster the job's configuration names.
    pub configured_cluster: String,
    /// The cluster the run actually runs on, once known.
    pub cluster: Option<String>,
    /// The code under test. Boxed: a periodic's run has none, and every
    /// active run is kept in memory (the writer's copy, shared with the
    /// controller's view), where the inline field took 256 bytes.
    pub refs: Option<Box<Refs>>,
    /// Further repositories.
    pub extra_refs: Vec<Refs>,
    /// Labels (Prow's plus the job's).
    pub labels: Labels,
    /// Annotations.
    pub annotations: Labels,
    /// Content hash of the job spec snapshot (see [`crate::Store::spec`]).
    pub spec_hash: String,
    /// The nominal tick of a scheduled periodic run (UTC).
    pub scheduled_at: Option<Timestamp>,
    /// 0 for a tick's run, 1.. for Prow `retry` re-runs.
    pub attempt: u32,
    /// How many times its pod was recreated.
    pub pod_revival_count: u32,
    /// Created (Prow's `startTime`).
    pub created_at: Timestamp,
    /// Started on its cluster.
    pub pending_at: Option<Timestamp>,
    /// Reached a final state.
    pub completed_at: Option<Timestamp>,
    /// Current state.
    pub state: RunState,
    /// Why it is in that state.
    pub description: String,
    /// Where to look at it.
    pub url: Option<String>,
}

/// What a new run is made of; the store assigns id, build id and times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The job's name.
    pub job: String,
    /// Its type.
    pub job_type: JobType,
    /// The periodic's identity, for periodic runs.
    pub periodic: Option<String>,
    /// The configured cluster.
    pub configured_cluster: String,
    /// `scheduling` or `triggered`.
    pub state: RunState,
    /// The code under test.
    pub refs: Option<Refs>,
    /// Further repositories.
    pub extra_refs: Vec<Refs>,
    /// Labels.
    pub labels: Labels,
    /// Annotations.
    pub annotations: Labels,
    /// The job spec snapshot, stored once per content.
    pub spec: Spec,
    /// Nominal tick, for scheduled periodic runs; with `periodic` and `attempt`
    /// the run's unique key.
    pub scheduled_at: Option<Timestamp>,
    /// Re-run number.
    pub attempt: u32,
    /// Initial description.
    pub description: String,
}

impl NewRun {
    /// The run this becomes, with the identity and times the store assigned
    /// (the spec itself is stored apart, by `spec_hash`).
    pub fn into_run(self, id: String, build_id: i64, spec_hash: String, at: Timestamp) -> Run {
        Run {
            id,
            build_id: build_id.to_string(),
            job: self.job,
            job_type: self.job_type,
            periodic: self.periodic,
            configured_cluster: self.configured_cluster,
            cluster: None,
            refs: self.refs.map(Box::new),
            extra_refs: self.extra_refs,
            labels: self.labels,
            annotations: self.annotations,
            spec_hash,
            scheduled_at: self.scheduled_at,
            attempt: self.attempt,
            pod_revival_count: 0,
            created_at: at,
            pending_at: None,
            completed_at: None,
            state: self.state,
            description: self.description,
            url: None,
        }
    }
}

/// A job spec snapshot: its JSON text and content hash, computed once and
/// shared by every run made from the same template (a periodic's runs clone an
/// `Arc`, not the spec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    json: std::sync::Arc<str>,
    hash: std::sync::Arc<str>,
}

impl Spec {
    /// The spec of `value`.
    pub fn new(value: &serde_json::Value) -> Self {
        let json = serde_json::to_string(value).expect("JSON values serialize");
        let hash = crate::hash_hex(json.as_bytes());
        Spec {
            json: json.into(),
            hash: hash.into(),
        }
    }

    /// Its JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Its content hash (hex SHA-256 of the JSON text).
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Its JSON text, shared.
    pub fn json_arc(&self) -> std::sync::Arc<str> {
        self.json.clone()
    }

    /// Its value.
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.json).unwrap_or(serde_json::Value::Null)
    }
}

impl Serialize for Spec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(|v| Spec::new(&v))
    }
}

impl From<serde_json::Value> for Spec {
    fn from(v: serde_json::Value) -> Self {
        Spec::new(&v)
    }
}

/// A state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The new state.
    pub to: RunState,
    /// Why.
    pub description: String,
    /// When.
    pub at: Timestamp,
    /// The cluster, when it is decided (scheduling -> triggered, or at start).
    pub cluster: Option<String>,
    /// A URL, when there is one.
    pub url: Option<String>,
}

impl Transition {
    /// A change to `to` at `at`.
    pub fn to(to: RunState, at: Timestamp, description: impl Into<String>) -> Self {
        Transition {
            to,
            description: description.into(),
            at,
            cluster: None,
            url: None,
        }
    }
}

/// `t` truncated to whole microseconds, the precision every store keeps.
pub fn micros(t: Timestamp) -> Timestamp {
    Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)
}

/// Applies a validated transition to a run (shared by every store, so the state
/// machine has one implementation).
pub fn apply(run: &mut Run, t: &Transition) -> Result<(), crate::StoreError> {
    if !run.state.can_move_to(t.to) {
        return Err(crate::StoreError::InvalidTransition {
            id: run.id.clone(),
            from: run.state,
            to: t.to,
        });
    }
    if run.state == RunState::Pending && t.to == RunState::Pending {
        run.pod_revival_count += 1;
    }
    if t.to == RunState::Pending && run.pending_at.is_none() {
        run.pending_at = Some(micros(t.at));
    }
    if t.to.is_final() {
        run.completed_at = Some(micros(t.at));
    }
    if let Some(c) = &t.cluster {
        run.cluster = Some(c.clone());
    }
    if let Some(u) = &t.url {
        run.url = Some(u.clone());
    }
    run.state = t.to;
    run.description = t.description.clone();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_states_never_move() {
        for from in RunState::ALL.into_iter().filter(|s| s.is_final()) {
            for to in RunState::ALL {
                assert!(!from.can_move_to(to), "{from} -> {to}");
            }
        }
        assert!(RunState::Scheduling.can_move_to(RunState::Triggered));
        assert!(!RunState::Triggered.can_move_to(RunState::Success));
        assert!(RunState::Pending.can_move_to(RunState::Pending));
        assert!(RunState::Triggered.can_move_to(RunState::Triggered));
        assert!(!RunState::Pending.can_move_to(RunState::Triggered));
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>(), Ok(s));
        }
    }

    #[test]
    fn runs_with_the_same_labels_share_one_map() {
        let labels = shared_labels;
        let text = r#"{"prow.k8s.io/job":"unit","team":"a"}"#;
        let (a, b) = (labels(text).unwrap(), labels(text).unwrap());
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert_eq!(a.get("team").map(String::as_str), Some("a"));
        let other = labels(r#"{"team":"b"}"#).unwrap();
        assert_eq!(other.get("team").map(String::as_str), Some("b"));
        assert!(labels("[1]").is_err());
    }
}
