//! The fake's state: pods, the resourceVersion counter, the watch history, logs,
//! recorded requests and deletions, and the injected faults.
//!
//! Everything lives behind one mutex that is never held across an `.await`. Every
//! mutation bumps a generation counter on a `tokio::sync::watch` channel so that
//! long-running responses (watches, log follows, hung requests) wake up and re-check.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use super::error::ApiError;
use super::selector::{FieldSelector, LabelSelector};
use crate::wire::{Deletion, DownMode, RequestRecord};

/// How many watch events are retained; watches from older resourceVersions get 410.
pub const HISTORY_LIMIT: usize = 10_000;
/// How many requests `GET /control/requests` keeps.
const REQUEST_LOG_LIMIT: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change to one pod, as retained in the watch history.
#[derive(Clone, Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    /// The pod after the change (for deletions: the last state).
    pub pod: Pod,
    /// The pod before the change (`None` for additions), so that a watch with a
    /// selector can turn "stopped matching" into DELETED like a real API server.
    pub prev: Option<Pod>,
}

pub type PodKey = (String, String);

pub fn key(ns: &str, name: &str) -> PodKey {
    (ns.to_string(), name.to_string())
}

/// Namespace, label and field filters of a list or watch.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn matches(&self, pod: &Pod) -> bool {
        if let Some(ns) = &self.namespace {
            if pod.metadata.namespace.as_deref() != Some(ns.as_str()) {
                return false;
            }
        }
        self.labels.matches(pod.metadata.labels.as_ref()) && self.fields.matches(pod)
    }
}

#[derive(Default)]
pub struct Store {
    /// The global resourceVersion: the version of the latest change.
    pub rv: u64,
    pub pods: BTreeMap<PodKey, Pod>,
    /// Changes with `rv > floor`, oldest first.
    history: VecDeque<Event>,
    /// Watches may start from any resourceVersion `>= floor`.
    floor: u64,
    /// Bumped by `/control/gone`: open watches end with a 410 ERROR event.
    pub gone_epoch: u64,
    pub logs: HashMap<PodKey, String>,
    pub deleted: Vec<Deletion>,
    pub requests: VecDeque<RequestRecord>,
    /// Denied (verb, resource, subresource) triples; `""` is "no subresource".
    pub deny: BTreeSet<(String, String, String)>,
    pub hang: bool,
    /// `Some` while the API is down (`/control/down`).
    pub down: Option<DownMode>,
}

/// Why a watch cannot start from the requested resourceVersion.
#[derive(Debug)]
pub struct TooOld;

impl Store {
    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, kind: EventType, pod: Pod, prev: Option<Pod>) {
        let rv = self.rv;
        self.history.push_back(Event {
            rv,
            kind,
            pod,
            prev,
        });
        while self.history.len() > HISTORY_LIMIT {
            if let Some(old) = self.history.pop_front() {
                self.floor = old.rv;
            }
        }
    }

    pub fn get(&self, ns: &str, name: &str) -> Result<&Pod, ApiError> {
        self.pods
            .get(&key(ns, name))
            .ok_or_else(|| ApiError::pod_not_found(name))
    }

    /// Creates a pod: the caller has checked namespace and name.
    pub fn create(&mut self, mut pod: Pod) -> Result<Pod, ApiError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let k = key(&ns, &name);
        if self.pods.contains_key(&k) {
            return Err(ApiError::already_exists(&name));
        }
        let rv = self.bump();
        let meta = &mut pod.metadata;
        meta.uid = Some(uuid::Uuid::new_v4().to_string());
        meta.creation_timestamp = Some(Time(now()));
        meta.resource_version = Some(rv.to_string());
        meta.generation = Some(1);
        meta.deletion_timestamp = None;
        pod.status = Some(PodStatus {
            phase: Some("Pending".to_string()),
            qos_class: Some("BestEffort".to_string()),
            ..Default::default()
        });
        self.pods.insert(k, pod.clone());
        self.record(EventType::Added, pod.clone(), None);
        Ok(pod)
    }

    /// Applies `change` to a pod, bumps its resourceVersion and records MODIFIED.
    pub fn update(
        &mut self,
        ns: &str,
        name: &str,
        change: impl FnOnce(&mut Pod) -> Result<(), ApiError>,
    ) -> Result<Pod, ApiError> {
        let k = key(ns, name);
        let prev = self
            .pods
            .get(&k)
            .cloned()
            .ok_or_else(|| ApiError::pod_not_found(name))?;
        let mut pod = prev.clone();
        change(&mut pod)?;
        let rv = self.bump();
        pod.metadata.resource_version = Some(rv.to_string());
        self.pods.insert(k, pod.clone());
        self.record(EventType::Modified, pod.clone(), Some(prev));
        Ok(pod)
    }

    /// Removes a pod at once, records the deletion and a DELETED event.
    pub fn delete(
        &mut self,
        ns: &str,
        name: &str,
        source: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<Pod, ApiError> {
        let mut pod = self
            .pods
            .remove(&key(ns, name))
            .ok_or_else(|| ApiError::pod_not_found(name))?;
        let prev = pod.clone();
        let rv = self.bump();
        pod.metadata.resource_version = Some(rv.to_string());
        pod.metadata.deletion_timestamp = Some(Time(now()));
        pod.metadata.deletion_grace_period_seconds = grace_period_seconds;
        self.deleted.push(Deletion {
            namespace: ns.to_string(),
            name: name.to_string(),
            source: source.to_string(),
            grace_period_seconds,
        });
        self.record(EventType::Deleted, pod.clone(), Some(prev));
        Ok(pod)
    }

    pub fn list(&self, filter: &Filter) -> Vec<Pod> {
        self.pods
            .values()
            .filter(|p| filter.matches(p))
            .cloned()
            .collect()
    }

    /// The changes after `rv`, or [`TooOld`] if some of them are no longer retained.
    pub fn events_after(&self, rv: u64) -> Result<Vec<Event>, TooOld> {
        if rv < self.floor {
            return Err(TooOld);
        }
        Ok(self.history.iter().filter(|e| e.rv > rv).cloned().collect())
    }

    /// Simulates an etcd compaction: forgets the history (so watches from any
    /// earlier resourceVersion get 410) and ends every open watch with 410.
    pub fn gone(&mut self) {
        let rv = self.bump();
        self.history.clear();
        self.floor = rv;
        self.gone_epoch += 1;
    }

    pub fn log_request(&mut self, record: RequestRecord) {
        self.requests.push_back(record);
        while self.requests.len() > REQUEST_LOG_LIMIT {
            self.requests.pop_front();
        }
    }
}

/// The current time, to the second (Kubernetes `Time` has second precision).
pub fn now() -> Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Timestamp::from_second(i64::try_from(secs).unwrap_or(0)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The store plus its change notification.
pub struct Shared {
    /// The bearer token every Kubernetes request must carry.
    pub token: String,
    /// `127.0.0.1:PORT` of the Kubernetes API (for discovery answers).
    pub api_addr: String,
    store: Mutex<Store>,
    changed: watch::Sender<u64>,
}

impl Shared {
    pub fn new(token: String, api_addr: String) -> Self {
        Shared {
            token,
            api_addr,
            store: Mutex::new(Store::default()),
            changed: watch::channel(0).0,
        }
    }

    /// Read access (no notification). Also used for the request log.
    pub fn read(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Mutates the store and wakes every waiter.
    pub fn mutate<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let r = f(&mut self.read());
        self.changed.send_modify(|g| *g += 1);
        r
    }

    /// A receiver that sees every later mutation.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}
