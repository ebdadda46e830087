//! The watch of bosun's pods (label `created-by-prow=true`; not the pods of
//! Tekton's TaskRuns, label `tekton.dev/pipelineRun`, which may carry a
//! PipelineRun's labels but are no run's own pod) and the cache it keeps,
//! which a run's status reads without a call to the cluster. kube-rs's
//! watcher lists the pods first and lists them again when the watch expires
//! (`410 Gone`); the cache is replaced at the end of each listing.
//!
//! It knows nothing of logs, the sinker or runs' states: it tells its owner
//! about the pods it sees and the ones that go.

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::client::Connection;

/// bosun's pods by name, as the watch last saw them, and the runs started
/// since that the watch has not shown yet.
#[derive(Default)]
pub(crate) struct PodCache {
    /// bosun's pods by name.
    pods: Mutex<HashMap<String, Pod>>,
    /// Runs started (by this executor) that the watch has not shown yet.
    started: Mutex<HashMap<String, Instant>>,
    /// The watch has listed the pods at least once.
    synced: AtomicBool,
    /// Woken on every change the watch sees.
    changed: tokio::sync::Notify,
}

/// Where a pod's container stands, as the watch last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContainerEnd {
    /// The watch shows no pod of that uid (gone, or not seen yet).
    Unknown,
    /// Still running (or not started).
    Running,
    /// Ended: its state is `terminated`, or the pod's phase is final.
    Ended,
}

impl PodCache {
    fn pods(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pod>> {
        self.pods.locked()
    }

    fn started(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.started.locked()
    }

    /// Until the watch shows the run's new pod, the run is starting (a
    /// revived run's old pod no longer counts).
    pub(crate) fn mark_started(&self, run_id: &str) {
        self.pods().remove(run_id);
        self.started().insert(run_id.to_string(), Instant::now());
    }

    /// `f` of pod `name`, if the watch has seen it.
    pub(crate) fn with_pod<T>(&self, name: &str, f: impl FnOnce(&Pod) -> T) -> Option<T> {
        self.pods().get(name).map(f)
    }

    /// The names of the pods `keep` takes.
    pub(crate) fn names_where(&self, mut keep: impl FnMut(&str, &Pod) -> bool) -> Vec<String> {
        self.pods()
            .iter()
            .filter(|(name, pod)| keep(name, pod))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether run `run_id` was started less than `grace` ago (and its pod
    /// not seen since).
    pub(crate) fn started_within(&self, run_id: &str, grace: Duration) -> bool {
        self.started()
            .get(run_id)
            .is_some_and(|t| t.elapsed() < grace)
    }

    /// Whether the watch has listed the pods at least once.
    pub(crate) fn synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }

    /// Resolves at the watch's next change (create it before looking at
    /// the cache, so that no change in between is missed).
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Whether `container` of pod `name` (of `uid`) has ended, as the watch
    /// last saw it.
    pub(crate) fn container_end(&self, name: &str, uid: &str, container: &str) -> ContainerEnd {
        self.with_pod(name, |pod| {
            if pod.metadata.uid.as_deref() != Some(uid) {
                return ContainerEnd::Unknown;
            }
            if container_ended(pod, container) {
                ContainerEnd::Ended
            } else {
                ContainerEnd::Running
            }
        })
        .unwrap_or(ContainerEnd::Unknown)
    }
}

/// Whether `pod`'s `container` has ended: its state is `terminated`, or the
/// pod's phase is final.
pub(crate) fn container_ended(pod: &Pod, container: &str) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    matches!(status.phase.as_deref(), Some("Succeeded") | Some("Failed"))
        || status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == container)
            .and_then(|c| c.state.as_ref())
            .is_some_and(|s| s.terminated.is_some())
}

/// What the cache keeps of a pod: what a run's state, a log copy's end and
/// the sinker read (its name, uid, instants, phase, reason and containers'
/// states), not its spec, labels, annotations or managed fields, which are
/// most of its size: one copy of what the watch shows, and a small one.
pub(crate) fn kept(pod: Pod) -> Pod {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let m = pod.metadata;
    let status = pod.status.map(|s| PodStatus {
        phase: s.phase,
        reason: s.reason,
        start_time: s.start_time,
        container_statuses: s.container_statuses.map(|cs| {
            cs.into_iter()
                .map(|c| ContainerStatus {
                    name: c.name,
                    state: c.state.map(|st| ContainerState {
                        terminated: st.terminated.map(|t| ContainerStateTerminated {
                            exit_code: t.exit_code,
                            reason: t.reason,
                            finished_at: t.finished_at,
                            ..Default::default()
                        }),
                        running: st.running,
                        waiting: None,
                    }),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    });
    Pod {
        metadata: ObjectMeta {
            name: m.name,
            uid: m.uid,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            ..Default::default()
        },
        spec: None,
        status,
    }
}

/// Follows bosun's pods into `cache` until the runtime ends: `seen` is
/// called with every pod the watch shows, `gone` with the name of every pod
/// deleted, `changed` after each change to the cache.
pub(crate) async fn follow(
    conn: &Connection,
    cache: &PodCache,
    seen: impl Fn(&Pod),
    gone: impl Fn(&str),
    changed: impl Fn(),
) {
    use futures_util::StreamExt;
    use kube::runtime::watcher::{self, Event};
    loop {
        let api = match conn.pods().await {
            Ok(a) => a,
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let config =
            watcher::Config::default().labels("created-by-prow=true,!tekton.dev/pipelineRun");
        let mut events = watcher::watcher(api, config).boxed();
        let mut listing: HashMap<String, Pod> = HashMap::new();
        while let Some(event) = events.next().await {
            let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(p)) => {
                    seen(&p);
                    listing.insert(name(&p), kept(p));
                }
                Ok(Event::InitDone) => {
                    // A pod the cache had and this listing lacks may be gone,
                    // or only missing from a list taken just before it was
                    // made (its event follows): it counts as starting for a
                    // while, not as lost at once.
                    let missing: Vec<String> = cache
                        .pods()
                        .keys()
                        .filter(|n| !listing.contains_key(*n))
                        .cloned()
                        .collect();
                    for n in missing {
                        cache.mark_started(&n);
                    }
                    *cache.pods() = std::mem::take(&mut listing);
                    cache.synced.store(true, Ordering::SeqCst);
                    cache.changed.notify_waiters();
                    changed();
                }
                Ok(Event::Apply(p)) => {
                    seen(&p);
                    let n = name(&p);
                    cache.started().remove(&n);
                    cache.pods().insert(n, kept(p));
                    cache.changed.notify_waiters();
                    changed();
                }
                Ok(Event::Delete(p)) => {
                    let n = name(&p);
                    gone(&n);
                    let mut pods = cache.pods();
                    // Only the pod that was deleted: a revived run's new
                    // pod (same name, new uid) stays.
                    if pods
                        .get(&n)
                        .is_some_and(|q| q.metadata.uid == p.metadata.uid)
                    {
                        pods.remove(&n);
                    }
                    drop(pods);
                    cache.changed.notify_waiters();
                    changed();
                }
                // The watcher re-lists by itself (410 Gone included); wait
                // a little before it tries again.
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::executor::pod_state;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_cache_keeps_what_states_log_ends_and_the_sinker_read() {
        let spec = serde_json::json!({"containers": [{"name": "test", "image": "alpine",
            "env": [{"name": "JOB_SPEC", "value": "x".repeat(2000)}]}]});
        let meta = serde_json::json!({"name": "r1", "uid": "u1",
            "creationTimestamp": "2026-12-06T10:00:00Z",
            "labels": {"created-by-prow": "true", "prow.k8s.io/job": "j"},
            "annotations": {"prow.k8s.io/job": "j"},
            "managedFields": [{"manager": "bosun", "operation": "Update", "fieldsV1": {"f:spec": {}}}]});
        let terminated = |code: i32, reason: &str| {
            serde_json::json!({"terminated": {
            "exitCode": code, "reason": reason, "containerID": "containerd://1",
            "startedAt": "2026-12-06T10:00:01Z", "finishedAt": "2026-12-06T10:00:09Z"}})
        };
        let pods = [
            pod(serde_json::json!({"metadata": meta, "spec": spec})),
            pod(
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Pending",
                "startTime": "2026-12-06T10:00:01Z"}}),
            ),
            pod(
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Running",
                "containerStatuses": [{"name": "test", "image": "alpine", "imageID": "sha", "ready": true,
                    "restartCount": 0, "state": {"running": {"startedAt": "2026-12-06T10:00:01Z"}}}]}}),
            ),
            pod(
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Running",
                "containerStatuses": [{"name": "test", "image": "alpine", "imageID": "sha", "ready": false,
                    "restartCount": 0, "state": terminated(3, "Error")}]}}),
            ),
            pod(
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Failed",
                "containerStatuses": [{"name": "test", "image": "alpine", "imageID": "sha", "ready": false,
                    "restartCount": 0, "state": terminated(137, "OOMKilled")}]}}),
            ),
            pod(
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Failed",
                "reason": "Evicted"}}),
            ),
            pod(serde_json::json!({"metadata": {"name": "r1", "uid": "u1",
                "creationTimestamp": "2026-12-06T10:00:00Z",
                "deletionTimestamp": "2026-12-06T10:01:00Z"}, "spec": spec,
                "status": {"phase": "Running"}})),
        ];
        for full in pods {
            let small = kept(full.clone());
            assert_eq!(pod_state(&small), pod_state(&full), "{full:?}");
            assert_eq!(
                container_ended(&small, "test"),
                container_ended(&full, "test")
            );
            assert_eq!(
                crate::kube::sinker::finished_at(&small),
                crate::kube::sinker::finished_at(&full)
            );
            assert_eq!(small.metadata.uid, full.metadata.uid);
            assert_eq!(small.metadata.name, full.metadata.name);
            let (a, b) = (
                serde_json::to_vec(&small).unwrap().len(),
                serde_json::to_vec(&full).unwrap().len(),
            );
            assert!(a * 5 < b, "kept {a} bytes of {b}");
        }
    }
}
