//! [`Kubelet`]: the tests play the kubelet (and the scheduler) through the
//! real API: they bind pods with the `binding` subresource, write phases,
//! container states, exit codes, `OOMKilled`, evictions and lost nodes with
//! the `status` subresource, and finish graceful deletions with a delete of
//! grace period 0, as a kubelet confirms one.
//!
//! Pod logs: the harness registers a Node whose kubelet endpoint is its own
//! HTTPS log server (certificate signed by the control plane's CA, which
//! kube-apiserver verifies), so `pods/log` goes through kube-apiserver's
//! proxy exactly as to a kubelet: `GET /containerLogs/NS/POD/CONTAINER` with
//! `follow`, `timestamps`, `sinceTime`, `tailLines` and `limitBytes`. A follow
//! stream ends when the container ends, or when the test cuts it
//! ([`Kubelet::cut_log_streams`]). A pod's containers share one log, unless
//! the test gives them logs of their own ([`Kubelet::separate_container_logs`],
//! as a Tekton step pod's containers have).

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use crate::pki::Pki;
use crate::runtime;

/// How long after the status says a pod's containers ended the streams
/// that follow their log end (the kubelet's next look at the containers).
pub const STREAM_END_DELAY: Duration = Duration::from_millis(200);

/// The node every pod is bound to.
pub const NODE: &str = "kubetest-node";

/// How a pod ends.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// `Succeeded` or `Failed`.
    pub phase: &'static str,
    /// Every container's exit code.
    pub exit_code: i32,
    /// The containers' termination reason (`Completed`, `Error`,
    /// `OOMKilled`).
    pub reason: &'static str,
}

impl Outcome {
    /// Exit 0.
    pub fn success() -> Self {
        Outcome {
            phase: "Succeeded",
            exit_code: 0,
            reason: "Completed",
        }
    }
    /// Exit 1.
    pub fn failure() -> Self {
        Outcome {
            phase: "Failed",
            exit_code: 1,
            reason: "Error",
        }
    }
    /// Killed for memory: exit 137, `OOMKilled`.
    pub fn oom_killed() -> Self {
        Outcome {
            phase: "Failed",
            exit_code: 137,
            reason: "OOMKilled",
        }
    }
}

#[derive(Default)]
struct PodLog {
    /// Lines (each with its newline, but the last may lack one) and when
    /// they were written.
    lines: Vec<(jiff::Timestamp, String)>,
    started: bool,
    ended: bool,
    /// Bumped by `cut_log_streams`: open follow streams end abruptly.
    cuts: u64,
    /// Log requests fail (500) while set.
    failing: bool,
    /// The first line of the current log file: the lines before it were
    /// rotated away.
    rotated: usize,
}

#[derive(Default)]
struct State {
    logs: Mutex<HashMap<String, PodLog>>,
    /// Pods (`ns/name`) whose graceful deletion is not finished until
    /// released.
    held: Mutex<HashMap<String, bool>>,
    /// Log requests served, per pod.
    log_requests: Mutex<HashMap<String, u32>>,
    changed: tokio::sync::Notify,
    /// How long a graceful deletion takes before the kubelet confirms it.
    deletion_delay: Mutex<Option<Duration>>,
    /// Pods (`ns/name`) whose containers each have a log of their own
    /// (kept under `ns/name/container`).
    per_container: Mutex<std::collections::HashSet<String>>,
    /// Pods (`ns/name`) whose follow streams end before the status says
    /// their containers ended (else after it, at the kubelet's next look).
    streams_end_first: Mutex<std::collections::HashSet<String>>,
}

impl State {
    fn logs(&self) -> std::sync::MutexGuard<'_, HashMap<String, PodLog>> {
        self.logs.locked()
    }
}

/// The hand-played kubelet of one control plane.
pub struct Kubelet {
    port: u16,
    state: Arc<State>,
    admin: OnceLock<Client>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet").field("port", &self.port).finish()
    }
}

fn key(ns: &str, pod: &str) -> String {
    format!("{ns}/{pod}")
}

impl Kubelet {
    /// Starts the log server (before the API server, which is told its
    /// port).
    pub(crate) fn start(pki: &Pki) -> Kubelet {
        let state = Arc::new(State::default());
        let certs = CertificateDer::pem_slice_iter(pki.kubelet.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("kubelet certificate");
        let key =
            PrivateKeyDer::from_pem_slice(pki.kubelet.key_pem.as_bytes()).expect("kubelet key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("kubelet TLS");
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("kubelet port");
        let port = listener.local_addr().expect("kubelet address").port();
        runtime().spawn(serve(listener, Arc::new(tls), state.clone()));
        Kubelet {
            port,
            state,
            admin: OnceLock::new(),
        }
    }

    /// The log server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Registers the Node (its address and kubelet port in its status) and
    /// starts finishing graceful deletions.
    pub(crate) fn register(&self, admin: Client) {
        let _ = self.admin.set(admin.clone());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": NODE}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bosun-kubetest plays this kubelet"}],
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "10000"},
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "10000"},
            },
        }))
        .expect("node");
        let state = self.state.clone();
        runtime().block_on(async {
            match Api::<Node>::all(admin.clone())
                .create(&PostParams::default(), &node)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("node: {e}"),
            }
        });
        runtime().spawn(finish_deletions(admin, state));
    }

    fn admin(&self) -> Client {
        self.admin.get().expect("the kubelet is registered").clone()
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.admin(), ns)
    }

    /// Sets how long graceful deletions take before they are confirmed.
    pub fn set_deletion_delay(&self, delay: Duration) {
        *self.state.deletion_delay.lock().unwrap() = Some(delay);
    }

    /// Graceful deletions of pod `ns/pod` stay unfinished until released.
    pub fn hold_deletion(&self, ns: &str, pod: &str, hold: bool) {
        self.state.held.lock().unwrap().insert(key(ns, pod), hold);
        self.state.changed.notify_waiters();
    }

    /// The pod, if it exists.
    pub fn pod(&self, ns: &str, pod: &str) -> Option<Pod> {
        let api = self.pods(ns);
        let name = pod.to_string();
        runtime()
            .block_on(async move { api.get_opt(&name).await })
            .unwrap_or_else(|e| panic!("get pod {pod}: {e}"))
    }

    /// The pods of `ns`.
    pub fn list(&self, ns: &str) -> Vec<Pod> {
        let api = self.pods(ns);
        runtime()
            .block_on(async move { api.list(&Default::default()).await })
            .expect("list pods")
            .items
    }

    /// Binds the pod to the node (as the scheduler does).
    pub fn bind(&self, ns: &str, pod: &str) {
        let api = self.pods(ns);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
        });
        let name = pod.to_string();
        runtime()
            .block_on(async move {
                api.create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &body,
                )
                .await
            })
            .unwrap_or_else(|e| panic!("bind {pod}: {e}"));
    }

    fn patch_status(&self, ns: &str, pod: &str, status: serde_json::Value) {
        let api = self.pods(ns);
        let name = pod.to_string();
        runtime()
            .block_on(async move {
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
            })
            .unwrap_or_else(|e| panic!("status of {pod}: {e}"));
        self.state.changed.notify_waiters();
    }

    fn containers(&self, ns: &str, pod: &str) -> Vec<(String, String)> {
        let p = self
            .pod(ns, pod)
            .unwrap_or_else(|| panic!("no pod {ns}/{pod}"));
        containers_of(&p)
    }

    fn container_statuses(
        &self,
        ns: &str,
        pod: &str,
        state: impl Fn(&str) -> serde_json::Value,
        ready: bool,
    ) -> serde_json::Value {
        statuses(self.containers(ns, pod), state, ready)
    }

    /// Bound, and its containers being created (`Pending` with a start
    /// time).
    pub fn pending_on_node(&self, ns: &str, pod: &str) {
        self.bind_if_needed(ns, pod);
        let now = jiff::Timestamp::now().to_string();
        let statuses = self.container_statuses(
            ns,
            pod,
            |_| json!({"waiting": {"reason": "ContainerCreating"}}),
            false,
        );
        self.patch_status(
            ns,
            pod,
            json!({"phase": "Pending", "startTime": now, "hostIP": "127.0.0.1", "containerStatuses": statuses}),
        );
    }

    fn bind_if_needed(&self, ns: &str, pod: &str) {
        let bound = self.pod(ns, pod).and_then(|p| p.spec?.node_name).is_some();
        if !bound {
            self.bind(ns, pod);
        }
    }

    /// Bound (if it was not) and running: its containers started now.
    pub fn run(&self, ns: &str, pod: &str) {
        self.bind_if_needed(ns, pod);
        let containers = self.containers(ns, pod);
        self.start_containers(ns, pod, containers);
    }

    /// As [`Kubelet::run`], from the pod as the caller last saw it (its node
    /// and containers): no GET, only the binding (when `pod` has no node)
    /// and the status.
    pub fn run_pod(&self, pod: &Pod) {
        let (ns, name) = ns_name(pod);
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_none()
        {
            self.bind(ns, name);
        }
        self.start_containers(ns, name, containers_of(pod));
    }

    /// As [`Kubelet::finish`], from the pod as the caller last saw it (its
    /// containers): no GET, only the status.
    pub fn finish_pod(&self, pod: &Pod, outcome: Outcome) {
        let (ns, name) = ns_name(pod);
        self.end_containers(ns, name, containers_of(pod), outcome);
    }

    /// Every pod of `ns` the API shows from now on, each once (by uid) as
    /// first seen, through one watch as the admin: for a harness that plays
    /// the kubelet for pods as they come. The watch ends when the receiver
    /// is dropped and the next pod comes.
    pub fn new_pods(&self, ns: &str) -> std::sync::mpsc::Receiver<Pod> {
        let (tx, rx) = std::sync::mpsc::channel();
        let api = self.pods(ns);
        runtime().spawn(async move {
            let mut seen = std::collections::HashSet::new();
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(pod) = event else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let Some(uid) = pod.metadata.uid.clone() else {
                    continue;
                };
                if seen.insert(uid) && tx.send(pod).is_err() {
                    return;
                }
            }
        });
        rx
    }

    fn start_containers(&self, ns: &str, pod: &str, containers: Vec<(String, String)>) {
        let now = jiff::Timestamp::now().to_string();
        let statuses = statuses(containers, |_| json!({"running": {"startedAt": now}}), true);
        self.state.logs().entry(key(ns, pod)).or_default().started = true;
        self.patch_status(
            ns,
            pod,
            json!({
                "phase": "Running",
                "startTime": now,
                "hostIP": "127.0.0.1",
                "podIP": "10.1.0.1",
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                ],
                "containerStatuses": statuses,
            }),
        );
    }

    /// Its containers end with `outcome` (the pod must have run).
    pub fn finish(&self, ns: &str, pod: &str, outcome: Outcome) {
        let containers = self.containers(ns, pod);
        self.end_containers(ns, pod, containers, outcome);
    }

    /// The containers end: the status says so, then their follow streams
    /// end [`STREAM_END_DELAY`] later, as a kubelet reports a container's end
    /// (within a second) before its next look at the container (every five
    /// seconds) ends the streams that follow its log. With
    /// [`Kubelet::streams_end_before_status`], the other order, as when that
    /// look comes first.
    fn end_containers(
        &self,
        ns: &str,
        pod: &str,
        containers: Vec<(String, String)>,
        outcome: Outcome,
    ) {
        let now = jiff::Timestamp::now().to_string();
        let statuses = statuses(
            containers,
            |_| {
                json!({"terminated": {
                    "exitCode": outcome.exit_code,
                    "reason": outcome.reason,
                    "startedAt": now,
                    "finishedAt": now,
                    "containerID": "containerd://1",
                }})
            },
            false,
        );
        let first = self
            .state
            .streams_end_first
            .locked()
            .contains(&key(ns, pod));
        if first {
            self.end_log(ns, pod);
            // The status comes as long after as the streams' end comes
            // after it in the other order: were it sent at once, its watch
            // event could reach a client before the streams' end does (two
            // connections through the API server), and the order would not
            // be the one asked for.
            std::thread::sleep(STREAM_END_DELAY);
        }
        self.patch_status(
            ns,
            pod,
            json!({"phase": outcome.phase, "containerStatuses": statuses}),
        );
        if !first {
            let (state, k) = (self.state.clone(), key(ns, pod));
            runtime().spawn(async move {
                tokio::time::sleep(STREAM_END_DELAY).await;
                state.end_log(&k);
            });
        }
    }

    /// When pod `ns/pod`'s containers end, its log's follow streams end
    /// before the status says so (as when the kubelet's look at the
    /// container comes before its status report), not after.
    pub fn streams_end_before_status(&self, ns: &str, pod: &str) {
        self.state.streams_end_first.locked().insert(key(ns, pod));
    }

    /// The kubelet rotates the pod's log: the lines written so far move to
    /// a rotated file, which reads no longer see (a kubelet serves only the
    /// current file), while the streams following the log go on into the
    /// new one.
    pub fn rotate_log(&self, ns: &str, pod: &str) {
        let mut logs = self.state.logs();
        let log = logs.entry(key(ns, pod)).or_default();
        log.rotated = log.lines.len();
    }

    /// Exit 0.
    pub fn succeed(&self, ns: &str, pod: &str) {
        self.finish(ns, pod, Outcome::success());
    }

    /// Exit 1.
    pub fn fail(&self, ns: &str, pod: &str) {
        self.finish(ns, pod, Outcome::failure());
    }

    /// Evicted by the kubelet for memory pressure.
    pub fn evict(&self, ns: &str, pod: &str) {
        self.end_log(ns, pod);
        let now = jiff::Timestamp::now().to_string();
        let statuses = self.container_statuses(
            ns,
            pod,
            |_| json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "startedAt": now, "finishedAt": now}}),
            false,
        );
        self.patch_status(
            ns,
            pod,
            json!({
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
                "containerStatuses": statuses,
            }),
        );
    }

    /// Its node lost: phase `Unknown`, reason `NodeLost`.
    pub fn lose_node(&self, ns: &str, pod: &str) {
        self.end_log(ns, pod);
        self.patch_status(
            ns,
            pod,
            json!({"phase": "Unknown", "reason": "NodeLost", "message": "Node kubetest-node which was running pod is unresponsive"}),
        );
    }

    /// Cannot be scheduled (as the scheduler reports it).
    pub fn unschedulable(&self, ns: &str, pod: &str) {
        let now = jiff::Timestamp::now().to_string();
        self.patch_status(
            ns,
            pod,
            json!({"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu.", "lastTransitionTime": now,
            }]}),
        );
    }

    /// Deletes the pod now (grace period 0), as someone other than bosun
    /// would.
    pub fn delete_now(&self, ns: &str, pod: &str) {
        let api = self.pods(ns);
        let name = pod.to_string();
        runtime()
            .block_on(async move {
                api.delete(&name, &DeleteParams::default().grace_period(0))
                    .await
            })
            .unwrap_or_else(|e| panic!("delete {pod}: {e}"));
    }

    /// Deletes the pod gracefully (default grace period), as `kubectl
    /// delete` would.
    pub fn delete_gracefully(&self, ns: &str, pod: &str) {
        let api = self.pods(ns);
        let name = pod.to_string();
        runtime()
            .block_on(async move { api.delete(&name, &DeleteParams::default()).await })
            .unwrap_or_else(|e| panic!("delete {pod}: {e}"));
    }

    /// Appends `text` to the pod's log (its lines stamped now).
    pub fn append_log(&self, ns: &str, pod: &str, text: &str) {
        self.append(key(ns, pod), text);
    }

    /// From now on, each container of pod `ns/pod` has a log of its own
    /// ([`Kubelet::append_container_log`], [`Kubelet::end_container_log`]),
    /// as a kubelet keeps them; the pod's shared log is no longer served.
    pub fn separate_container_logs(&self, ns: &str, pod: &str) {
        self.state
            .per_container
            .lock()
            .unwrap()
            .insert(key(ns, pod));
    }

    /// Appends `text` to the log of `container` of the pod (see
    /// [`Kubelet::separate_container_logs`]), its lines stamped now.
    pub fn append_container_log(&self, ns: &str, pod: &str, container: &str, text: &str) {
        self.append(format!("{}/{container}", key(ns, pod)), text);
    }

    /// The log of `container` of the pod ends, as the container does (its
    /// follow streams end).
    pub fn end_container_log(&self, ns: &str, pod: &str, container: &str) {
        self.state
            .logs()
            .entry(format!("{}/{container}", key(ns, pod)))
            .or_default()
            .ended = true;
        self.state.changed.notify_waiters();
    }

    fn append(&self, k: String, text: &str) {
        {
            let mut logs = self.state.logs();
            let log = logs.entry(k).or_default();
            for line in text.split_inclusive('\n') {
                // Distinct, increasing stamps, as a runtime's log lines.
                let mut now = jiff::Timestamp::now();
                if let Some((last, _)) = log.lines.last() {
                    if now <= *last {
                        now = *last + jiff::SignedDuration::from_nanos(1);
                    }
                }
                log.lines.push((now, line.to_string()));
            }
        }
        self.state.changed.notify_waiters();
    }

    /// Open follow streams of the pod's log end abruptly (the connection to
    /// the kubelet drops).
    pub fn cut_log_streams(&self, ns: &str, pod: &str) {
        self.state.logs().entry(key(ns, pod)).or_default().cuts += 1;
        self.state.changed.notify_waiters();
    }

    /// While `failing`, the kubelet answers the pod's log requests with an
    /// error (500), and open follow streams end.
    pub fn fail_logs(&self, ns: &str, pod: &str, failing: bool) {
        {
            let mut logs = self.state.logs();
            let log = logs.entry(key(ns, pod)).or_default();
            log.failing = failing;
            log.cuts += 1;
        }
        self.state.changed.notify_waiters();
    }

    /// How many log requests reached the kubelet for the pod.
    pub fn log_requests(&self, ns: &str, pod: &str) -> u32 {
        self.state
            .log_requests
            .lock()
            .unwrap()
            .get(&key(ns, pod))
            .copied()
            .unwrap_or(0)
    }

    fn end_log(&self, ns: &str, pod: &str) {
        self.state.end_log(&key(ns, pod));
    }
}

impl State {
    /// Pod `k`'s logs (its own and its containers') end: their follow
    /// streams end.
    fn end_log(&self, k: &str) {
        {
            let mut logs = self.logs();
            let containers = format!("{k}/");
            for (name, log) in logs.iter_mut() {
                if name.starts_with(&containers) {
                    log.ended = true;
                }
            }
            logs.entry(k.to_string()).or_default().ended = true;
        }
        self.changed.notify_waiters();
    }
}

fn ns_name(pod: &Pod) -> (&str, &str) {
    (
        pod.metadata
            .namespace
            .as_deref()
            .expect("a pod's namespace"),
        pod.metadata.name.as_deref().expect("a pod's name"),
    )
}

/// A pod's containers: name and image.
fn containers_of(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// The `containerStatuses` of `containers`, each in `state`.
fn statuses(
    containers: Vec<(String, String)>,
    state: impl Fn(&str) -> serde_json::Value,
    ready: bool,
) -> serde_json::Value {
    containers
        .into_iter()
        .enumerate()
        .map(|(i, (name, image))| {
            json!({
                "name": name,
                "image": image,
                "imageID": format!("docker-pullable://{image}"),
                "containerID": format!("containerd://{:064x}", i + 1),
                "ready": ready,
                "started": ready,
                "restartCount": 0,
                "state": state(&name),
            })
        })
        .collect()
}

/// As a kubelet: a bound pod being deleted gracefully is deleted for good
/// (grace period 0, for its uid only) once its containers have stopped,
/// here after the deletion delay, unless the test holds it.
async fn finish_deletions(admin: Client, state: Arc<State>) {
    let api: Api<Pod> = Api::all(admin.clone());
    let mut events = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut pending: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    while let Some(event) = events.next().await {
        let Ok(pod) = event else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if pod.metadata.deletion_timestamp.is_none()
            || pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(NODE)
        {
            continue;
        }
        let (Some(ns), Some(name), Some(uid)) = (
            pod.metadata.namespace.clone(),
            pod.metadata.name.clone(),
            pod.metadata.uid.clone(),
        ) else {
            continue;
        };
        if pending.get(&uid).is_some_and(|h| !h.is_finished()) {
            continue;
        }
        let (admin, state) = (admin.clone(), state.clone());
        let wait = state
            .deletion_delay
            .lock()
            .unwrap()
            .unwrap_or(Duration::from_millis(300));
        let task = tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            loop {
                let held = state
                    .held
                    .lock()
                    .unwrap()
                    .get(&key(&ns, &name))
                    .copied()
                    .unwrap_or(false);
                if !held {
                    break;
                }
                let changed = state.changed.notified();
                tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
            {
                let k = key(&ns, &name);
                let containers = format!("{k}/");
                for (n, log) in state.logs().iter_mut() {
                    if *n == k || n.starts_with(&containers) {
                        log.ended = true;
                    }
                }
            }
            state.changed.notify_waiters();
            let api: Api<Pod> = Api::namespaced(admin, &ns);
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            for _ in 0..50 {
                match api.delete(&name, &params).await {
                    Ok(_) => return,
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
        pending.retain(|_, h| !h.is_finished());
        pending.insert(pod.metadata.uid.clone().unwrap_or_default(), task);
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

fn text(status: u16, body: String) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header("Content-Type", "text/plain")
        .body(
            Full::new(Bytes::from(body))
                .map_err(|e: Infallible| match e {})
                .boxed(),
        )
        .unwrap()
}

async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<State>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let (acceptor, state) = (acceptor.clone(), state.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(container_logs(&state, req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
        });
    }
}

/// `GET /containerLogs/NS/POD/CONTAINER?...`, as a kubelet answers it.
fn container_logs(
    state: &Arc<State>,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Body> {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ["containerLogs", ns, pod, container] = parts[..] else {
        return text(404, format!("404 page not found: {path}"));
    };
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), percent_decode(v)))
        .collect();
    let pod_key = key(ns, pod);
    *state
        .log_requests
        .lock()
        .unwrap()
        .entry(pod_key.clone())
        .or_default() += 1;
    let k = if state.per_container.lock().unwrap().contains(&pod_key) {
        format!("{pod_key}/{container}")
    } else {
        pod_key.clone()
    };
    let flag = |n: &str| query.get(n).is_some_and(|v| v == "true");
    let (follow, timestamps) = (flag("follow"), flag("timestamps"));
    let since: Option<jiff::Timestamp> = query.get("sinceTime").and_then(|t| t.parse().ok());
    let tail: Option<usize> = query.get("tailLines").and_then(|t| t.parse().ok());
    let limit: Option<usize> = query.get("limitBytes").and_then(|t| t.parse().ok());
    let (lines, cuts, mut next) = {
        let mut logs = state.logs();
        // A container's own log starts with the pod's containers.
        if k != pod_key && logs.get(&pod_key).is_some_and(|l| l.started) {
            logs.entry(k.clone()).or_default().started = true;
        }
        match logs.get(&k) {
            Some(log) if log.failing => {
                return text(500, format!("failed to get container logs of {pod}: injected by the test"))
            }
            Some(log) if log.started => (select(log, since, tail), log.cuts, log.lines.len()),
            _ => {
                return text(
                    400,
                    format!("container \"{container}\" in pod \"{pod}\" is waiting to start: ContainerCreating"),
                )
            }
        }
    };
    let render = move |(t, l): &(jiff::Timestamp, String)| {
        if timestamps {
            format!("{} {l}", t.strftime("%Y-%m-%dT%H:%M:%S%.fZ"))
        } else {
            l.clone()
        }
    };
    if !follow {
        let mut body: String = lines.iter().map(render).collect();
        if let Some(limit) = limit {
            body.truncate(limit);
        }
        return text(200, body);
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    let state = state.clone();
    tokio::spawn(async move {
        // `next`: the index in the pod's whole log of the next line to send.
        for chunk in lines.iter().map(render) {
            if tx.send(Ok(Frame::data(Bytes::from(chunk)))).await.is_err() {
                return;
            }
        }
        loop {
            let changed = state.changed.notified();
            let (new, ended, cut) = {
                let logs = state.logs();
                let Some(log) = logs.get(&k) else { return };
                let new: Vec<String> = log.lines[next.min(log.lines.len())..]
                    .iter()
                    .map(render)
                    .collect();
                next = log.lines.len();
                (new, log.ended, log.cuts != cuts)
            };
            if cut {
                let _ = tx
                    .send(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "cut by the test",
                    )))
                    .await;
                return;
            }
            for chunk in new {
                if tx.send(Ok(Frame::data(Bytes::from(chunk)))).await.is_err() {
                    return;
                }
            }
            if ended {
                return;
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    hyper::Response::builder()
        .status(200)
        .header("Content-Type", "text/plain")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap()
}

/// The lines a request selects: at or after `since`, then the last `tail`.
fn select(
    log: &PodLog,
    since: Option<jiff::Timestamp>,
    tail: Option<usize>,
) -> Vec<(jiff::Timestamp, String)> {
    let mut lines: Vec<_> = log.lines[log.rotated.min(log.lines.len())..]
        .iter()
        .filter(|(t, _)| since.is_none_or(|s| *t >= s))
        .cloned()
        .collect();
    if let Some(tail) = tail {
        lines.drain(..lines.len().saturating_sub(tail));
    }
    lines
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
