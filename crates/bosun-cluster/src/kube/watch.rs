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
    /// bosun's pods by name, as much of them as the cache keeps. Boxed: a
    /// map's slots are about half empty after it grows, and a slot holds a
    /// pointer instead of the whole record.
    pods: Mutex<HashMap<String, Box<Seen>>>,
    /// Runs started (by this executor) that the watch has not shown yet.
    started: Mutex<HashMap<String, Instant>>,
    /// The watch has listed the pods at least once.
    synced: AtomicBool,
    /// Woken on every change the watch sees.
    changed: tokio::sync::Notify,
}

/// What the cache knows of a run's pod ([`PodCache::lookup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup<T> {
    /// The watch shows it (what was read of it).
    Seen(T),
    /// Started recently, not shown yet.
    Starting,
    /// Neither: gone, or started long ago and never shown.
    Unseen,
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
    fn pods(&self) -> std::sync::MutexGuard<'_, HashMap<String, Box<Seen>>> {
        self.pods.locked()
    }

    fn started(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.started.locked()
    }

    /// Until the watch shows the run's new pod, the run is starting (a
    /// revived run's old pod no longer counts). Expected before the old pod
    /// goes, so that a [`lookup`](Self::lookup) in between finds one of them.
    /// The pod of uid `new_uid` (the one just created or adopted), which the
    /// watch may have shown already, stays.
    pub(crate) fn mark_started(&self, run_id: &str, new_uid: Option<&str>) {
        self.expect(run_id);
        let mut pods = self.pods();
        let shown_new = pods
            .get(run_id)
            .is_some_and(|p| new_uid.is_some_and(|new| p.uid.as_deref() == Some(new)));
        if !shown_new {
            pods.remove(run_id);
        }
    }

    /// The watch shows pod `name`: it is kept, and its run is no longer
    /// waiting to be seen. Kept before the wait ends, so that a
    /// [`lookup`](Self::lookup) in between finds one of them.
    fn show(&self, name: String, seen: Box<Seen>) {
        self.pods().insert(name.clone(), seen);
        self.started().remove(&name);
    }

    /// `f` of run `run_id`'s pod as the watch showed it, else whether the
    /// run was started less than `grace` ago and its pod is not shown yet.
    /// The two are read under two locks, and the watch moves a run from
    /// the second to the first ([`show`](Self::show)): the pods are read
    /// again when the run is not waiting, so a run whose pod was shown
    /// meanwhile is never taken for one without a pod.
    pub(crate) fn lookup<T>(
        &self,
        run_id: &str,
        grace: Duration,
        f: impl Fn(&Seen) -> T,
    ) -> Lookup<T> {
        if let Some(t) = self.with_pod(run_id, &f) {
            return Lookup::Seen(t);
        }
        if self.started_within(run_id, grace) {
            return Lookup::Starting;
        }
        match self.with_pod(run_id, &f) {
            Some(t) => Lookup::Seen(t),
            None => Lookup::Unseen,
        }
    }

    /// Run `run_id`'s pod is being created: until the watch shows it, the
    /// run is starting. A pod of the run the watch shows already stays: a
    /// creation tried again after one that timed out but went through
    /// meets that pod (409), and the watch, which showed it, shows it no
    /// more unless it changes.
    pub(crate) fn expect(&self, run_id: &str) {
        self.started().insert(run_id.to_string(), Instant::now());
    }

    /// Pod `name` as the API showed it when asked, where the watch did not
    /// show it (yet): kept until the watch shows it or its deletion.
    pub(crate) fn learn(&self, name: &str, pod: &Pod) {
        if !self.pods().contains_key(name) {
            self.pods()
                .insert(name.to_string(), Box::new(Seen::of(pod)));
        }
        self.changed.notify_waiters();
    }

    /// `f` of pod `name`, if the watch has seen it.
    pub(crate) fn with_pod<T>(&self, name: &str, f: impl FnOnce(&Seen) -> T) -> Option<T> {
        self.pods().get(name).map(|seen| f(seen))
    }

    /// The names of the pods `keep` takes.
    pub(crate) fn names_where(&self, mut keep: impl FnMut(&str, &Seen) -> bool) -> Vec<String> {
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
            if pod.uid.as_deref() != Some(uid) {
                return ContainerEnd::Unknown;
            }
            if pod.container_ended(container) {
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
    Seen::of(pod).container_ended(container)
}

/// What the cache keeps of a pod: what a run's state, a log copy's end and
/// the sinker read (its uid, instants, phase, reason and containers' ends),
/// not its spec, labels, annotations or managed fields, which are most of
/// its size; a few hundred bytes where a decoded `Pod` is kilobytes even
/// when mostly empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// `metadata.uid`.
    pub(crate) uid: Option<Box<str>>,
    /// `metadata.creationTimestamp`.
    pub(crate) created: Option<jiff::Timestamp>,
    /// `metadata.deletionTimestamp` is set.
    pub(crate) deleting: bool,
    /// `status.phase`.
    pub(crate) phase: Option<Box<str>>,
    /// `status.reason`.
    pub(crate) reason: Option<Box<str>>,
    /// `status.startTime`.
    pub(crate) started: Option<jiff::Timestamp>,
    /// `status.containerStatuses`: each container's name and end, if it
    /// has ended.
    pub(crate) containers: Box<[(Box<str>, Option<Ended>)]>,
}

/// A container's end (`state.terminated`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    /// `exitCode`.
    pub(crate) exit_code: i32,
    /// `reason` (`Completed`, `Error`, `OOMKilled`, ...).
    pub(crate) reason: Option<Box<str>>,
    /// `finishedAt`.
    pub(crate) finished_at: Option<jiff::Timestamp>,
}

impl Seen {
    /// What the cache keeps of `pod`.
    pub(crate) fn of(pod: &Pod) -> Seen {
        let m = &pod.metadata;
        let status = pod.status.as_ref();
        let boxed = |s: &Option<String>| s.as_deref().map(Box::from);
        Seen {
            uid: boxed(&m.uid),
            created: m.creation_timestamp.as_ref().map(|t| t.0),
            deleting: m.deletion_timestamp.is_some(),
            phase: status.and_then(|s| boxed(&s.phase)),
            reason: status.and_then(|s| boxed(&s.reason)),
            started: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            containers: status
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| {
                    let end = c
                        .state
                        .as_ref()
                        .and_then(|s| s.terminated.as_ref())
                        .map(|t| Ended {
                            exit_code: t.exit_code,
                            reason: boxed(&t.reason),
                            finished_at: t.finished_at.as_ref().map(|t| t.0),
                        });
                    (Box::from(c.name.as_str()), end)
                })
                .collect(),
        }
    }

    /// The phase, if known.
    pub(crate) fn phase(&self) -> Option<&str> {
        self.phase.as_deref()
    }

    /// The phase is final (`Succeeded` or `Failed`).
    pub(crate) fn is_final(&self) -> bool {
        matches!(self.phase(), Some("Succeeded") | Some("Failed"))
    }

    /// The ends of the containers that have ended.
    pub(crate) fn ends(&self) -> impl Iterator<Item = &Ended> {
        self.containers.iter().filter_map(|(_, e)| e.as_ref())
    }

    /// Whether `container` has ended: its state is `terminated`, or the
    /// pod's phase is final.
    pub(crate) fn container_ended(&self, container: &str) -> bool {
        self.is_final()
            || self
                .containers
                .iter()
                .any(|(name, end)| &**name == container && end.is_some())
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
        let mut listing: HashMap<String, Box<Seen>> = HashMap::new();
        while let Some(event) = events.next().await {
            let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(p)) => {
                    seen(&p);
                    listing.insert(name(&p), Box::new(Seen::of(&p)));
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
                        cache.mark_started(&n, None);
                    }
                    *cache.pods() = std::mem::take(&mut listing);
                    cache.synced.store(true, Ordering::SeqCst);
                    cache.changed.notify_waiters();
                    changed();
                }
                Ok(Event::Apply(p)) => {
                    seen(&p);
                    cache.show(name(&p), Box::new(Seen::of(&p)));
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
                        .is_some_and(|q| q.uid.as_deref() == p.metadata.uid.as_deref())
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
    use crate::executor::RunStatus;
    use crate::kube::executor::pod_state;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    fn at(t: &str) -> jiff::Timestamp {
        t.parse().unwrap()
    }

    #[test]
    fn a_run_whose_pod_the_watch_shows_meanwhile_is_never_without_one() {
        // One thread starts runs and has the watch show their pods; the
        // other looks each current run up as fast as it can. A lookup that
        // fell between the two locks used to find neither the pod nor the
        // start, and the run was taken for one whose pod had gone.
        let cache = PodCache::default();
        let current = std::sync::atomic::AtomicUsize::new(usize::MAX);
        let done = AtomicBool::new(false);
        let shown = pod(serde_json::json!({"metadata": {"name": "r", "uid": "u"},
            "status": {"phase": "Running"}}));
        let grace = Duration::from_secs(30);
        let unseen = std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let mut unseen = 0;
                while !done.load(Ordering::Acquire) {
                    let i = current.load(Ordering::Acquire);
                    if i == usize::MAX {
                        continue;
                    }
                    if cache.lookup(&format!("r{i}"), grace, |_| ()) == Lookup::Unseen {
                        unseen += 1;
                    }
                }
                unseen
            });
            for i in 0..100_000 {
                let name = format!("r{i}");
                cache.expect(&name);
                current.store(i, Ordering::Release);
                cache.show(name.clone(), Box::new(Seen::of(&shown)));
                // A revival: the new pod is waited for, the old one goes.
                if i % 3 == 0 {
                    cache.mark_started(&name, None);
                    cache.show(name, Box::new(Seen::of(&shown)));
                }
            }
            done.store(true, Ordering::Release);
            reader.join().unwrap()
        });
        assert_eq!(
            unseen, 0,
            "lookups that found neither the pod nor its start"
        );
    }

    #[test]
    fn a_revived_pod_the_watch_showed_before_its_start_was_marked_stays() {
        // The watch may show a revival's new pod before the reviver marks
        // the start: that pod is the run's, and is not dropped.
        let cache = PodCache::default();
        let old = pod(serde_json::json!({"metadata": {"name": "r1", "uid": "old"},
            "status": {"phase": "Failed"}}));
        let new = pod(serde_json::json!({"metadata": {"name": "r1", "uid": "new"},
            "status": {"phase": "Pending"}}));
        let grace = Duration::from_secs(30);
        let uid = |s: &Seen| s.uid.clone();
        cache.show("r1".into(), Box::new(Seen::of(&old)));
        cache.show("r1".into(), Box::new(Seen::of(&new)));
        cache.mark_started("r1", Some("new"));
        assert_eq!(
            cache.lookup("r1", grace, uid),
            Lookup::Seen(Some("new".into()))
        );
        // Marked first, the old pod goes and the run waits for the new one.
        cache.show("r1".into(), Box::new(Seen::of(&old)));
        cache.mark_started("r1", Some("new"));
        assert_eq!(cache.lookup("r1", grace, uid), Lookup::Starting);
        cache.show("r1".into(), Box::new(Seen::of(&new)));
        assert_eq!(
            cache.lookup("r1", grace, uid),
            Lookup::Seen(Some("new".into()))
        );
    }

    #[test]
    fn a_creation_tried_again_keeps_the_pod_the_watch_showed() {
        let cache = PodCache::default();
        let p = pod(serde_json::json!({"metadata": {"name": "r1", "uid": "u1",
            "creationTimestamp": "2026-12-06T10:00:00Z"}, "status": {"phase": "Running"}}));
        cache.pods().insert("r1".into(), Box::new(Seen::of(&p)));
        cache.expect("r1");
        assert_eq!(
            cache.with_pod("r1", |s| s.uid.clone()),
            Some(Some("u1".into()))
        );
        assert!(cache.started_within("r1", Duration::from_secs(30)));
        // A revival's new pod replaces the old: the old one no longer counts.
        cache.mark_started("r1", None);
        assert_eq!(cache.with_pod("r1", |s| s.uid.clone()), None);
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
        let container = |state: serde_json::Value| {
            serde_json::json!([{"name": "test",
            "image": "alpine", "imageID": "sha", "ready": false, "restartCount": 0, "state": state}])
        };
        let created = at("2026-12-06T10:00:00Z");
        let finished = Some(at("2026-12-06T10:00:09Z"));
        // Each pod, what its run's state is, whether its container `test`
        // has ended, and when the sinker counts it finished.
        let table = [
            (
                serde_json::json!({"metadata": meta, "spec": spec}),
                RunStatus::PodPending {
                    created,
                    scheduled: None,
                },
                false,
                None,
            ),
            (
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Pending",
                    "startTime": "2026-12-06T10:00:01Z"}}),
                RunStatus::PodPending {
                    created,
                    scheduled: Some(at("2026-12-06T10:00:01Z")),
                },
                false,
                None,
            ),
            (
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Running",
                    "containerStatuses": container(serde_json::json!({"running": {"startedAt": "2026-12-06T10:00:01Z"}}))}}),
                RunStatus::Running { pid: 0 },
                false,
                None,
            ),
            (
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Running",
                    "containerStatuses": container(terminated(3, "Error"))}}),
                RunStatus::Running { pid: 0 },
                true,
                None,
            ),
            (
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Failed",
                    "containerStatuses": container(terminated(137, "OOMKilled"))}}),
                RunStatus::Failed(
                    "a container was killed for running out of memory (OOMKilled)".into(),
                ),
                true,
                finished,
            ),
            (
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Succeeded",
                    "containerStatuses": container(terminated(0, "Completed"))}}),
                RunStatus::Exited { code: 0 },
                true,
                finished,
            ),
            (
                serde_json::json!({"metadata": meta, "spec": spec, "status": {"phase": "Failed",
                    "reason": "Evicted"}}),
                RunStatus::Revivable("being evicted".into()),
                true,
                Some(created),
            ),
            (
                serde_json::json!({"metadata": {"name": "r1", "uid": "u1",
                    "creationTimestamp": "2026-12-06T10:00:00Z",
                    "deletionTimestamp": "2026-12-06T10:01:00Z"}, "spec": spec,
                    "status": {"phase": "Running"}}),
                RunStatus::Failed("Pod got deleted unexpectedly".into()),
                false,
                None,
            ),
        ];
        for (row, (json, state, ended, finished_at)) in table.into_iter().enumerate() {
            let full = pod(json);
            let seen = Seen::of(&full);
            assert_eq!(pod_state(&full), state, "row {row}");
            assert_eq!(crate::kube::executor::state_of(&seen), state);
            assert_eq!(seen.container_ended("test"), ended, "{seen:?}");
            assert_eq!(
                crate::kube::sinker::finished_at(&seen),
                finished_at,
                "{seen:?}"
            );
            assert_eq!(seen.uid.as_deref(), Some("u1"));
        }
        assert!(
            std::mem::size_of::<Seen>() <= 128,
            "{}",
            std::mem::size_of::<Seen>()
        );
    }
}
