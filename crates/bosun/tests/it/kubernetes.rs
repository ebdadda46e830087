//! bosun against Kubernetes build clusters: a real kube-apiserver and etcd
//! (`bosun-kubetest`, built by `tools/kube/build.sh`), reached through
//! kube-rs as a service account bound to a Role with exactly the verbs bosun
//! needs. There is no kubelet and no scheduler: the tests play them through
//! the real API (binding, status, finishing graceful deletions) and serve
//! pod logs as a kubelet behind kube-apiserver's `pods/log` proxy.
//!
//! One server is shared by this binary's tests, each in its own namespace
//! (`pod_namespace`); a test that stops, hangs or compacts a server, or
//! needs two clusters, starts its own.

use std::time::{Duration, Instant};

use bosun_kubetest::{ControlPlane, Options, Outcome, Tenant};
use k8s_openapi::api::core::v1::Pod;

use crate::common;

type Daemon = common::Serve;

/// A build cluster of a test: a namespace on a control plane, and bosun's
/// kubeconfig for it.
struct Cluster<'a> {
    plane: &'a ControlPlane,
    tenant: Tenant,
}

impl<'a> Cluster<'a> {
    fn new(plane: &'a ControlPlane, namespace: &str, context: &str) -> Self {
        Cluster {
            plane,
            tenant: plane.tenant(namespace, context),
        }
    }
    fn ns(&self) -> &str {
        &self.tenant.namespace
    }
    fn kubeconfig(&self) -> std::path::PathBuf {
        self.tenant.kubeconfig.clone()
    }
    fn pod(&self, name: &str) -> Option<Pod> {
        self.plane.kubelet().pod(self.ns(), name)
    }
    fn wait_pod(&self, name: &str) -> Pod {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(p) = self.pod(name) {
                return p;
            }
            assert!(Instant::now() < deadline, "no pod {name}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn wait_gone(&self, name: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.pod(name).is_some() {
            assert!(Instant::now() < deadline, "pod {name} is still there");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn run(&self, name: &str) {
        self.plane.kubelet().run(self.ns(), name)
    }
    fn succeed(&self, name: &str) {
        self.plane.kubelet().succeed(self.ns(), name)
    }
    fn log(&self, name: &str, text: &str) {
        self.plane.kubelet().append_log(self.ns(), name, text)
    }
}

fn config_for(namespace: &str, extra: &str) -> String {
    format!("pod_namespace: {namespace}\n{extra}")
}

/// [`config_for`] `a`'s namespace, with `build-a` declared as `a`'s cluster
/// and its `settings` (YAML flow fields, each after a comma).
fn config_declaring(a: &Cluster, settings: &str) -> String {
    config_for(
        a.ns(),
        &format!(
            "build_clusters:\n  build-a: {{kind: kubernetes, kubeconfig: {}, context: build-a{settings}}}\n",
            a.kubeconfig().display()
        ),
    )
}

fn start_full(
    dir: &std::path::Path,
    kubeconfigs: &[std::path::PathBuf],
    config: &str,
    jobs: &str,
) -> Daemon {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), jobs).unwrap();
    let mut args: Vec<&std::ffi::OsStr> = Vec::new();
    for k in kubeconfigs {
        args.push("--kubeconfig".as_ref());
        args.push(k.as_os_str());
    }
    args.push("--health-interval".as_ref());
    args.push("200ms".as_ref());
    common::serve(dir, &args, &[])
}

fn get(port: u16, path: &str) -> Option<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .get(format!("http://127.0.0.1:{port}{path}"))
        .call()
        .ok()?;
    r.body_mut().read_to_string().ok()
}

/// Waits until cluster `alias` has `status`; returns its entry.
fn wait_status(port: u16, alias: &str, status: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let body = get(port, "/api/v1/clusters").unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let c = v["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["alias"] == alias)
            .cloned()
            .unwrap_or_else(|| panic!("no cluster {alias}: {v}"));
        if c["status"] == status {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "{alias} never became {status}: {c}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn post(port: u16, path: &str, body: &str) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .post(format!("http://127.0.0.1:{port}{path}"))
        .header("Content-Type", "application/json")
        .send(body)
        .unwrap();
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

fn trigger(port: u16, job: &str) -> String {
    let (status, run) = post(port, "/api/v1/runs", &format!(r#"{{"job": "{job}"}}"#));
    assert_eq!(status, 201, "{run}");
    run["id"].as_str().unwrap().to_string()
}

fn run_of(port: u16, id: &str) -> serde_json::Value {
    serde_json::from_str(&get(port, &format!("/api/v1/runs/{id}")).unwrap()).unwrap()
}

fn wait_run_within(port: u16, id: &str, state: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let run = run_of(port, id);
        if run["state"] == state {
            return run;
        }
        assert!(Instant::now() < deadline, "run never became {state}: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_run(port: u16, id: &str, state: &str) -> serde_json::Value {
    wait_run_within(port, id, state, Duration::from_secs(20))
}

/// Waits until the run has `n` pod revivals: the daemon creates the new pod,
/// then records the revival, so the run may be read in between.
fn wait_revivals(port: u16, id: &str, n: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let run = run_of(port, id);
        if run["pod_revival_count"] == n {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "run never had {n} revivals: {run}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The run's log once `done` holds: from the API when the run has ended
/// (the endpoint follows a running run's log), else from its file under
/// the daemon's data directory `data`.
fn wait_log(port: u16, id: &str, done: impl Fn(&str) -> bool) -> String {
    wait_log_in(port, None, id, done)
}

fn log_file(dir: &std::path::Path, id: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = log_file(&path, id) {
                return Some(found);
            }
        } else if path
            .file_name()
            .is_some_and(|n| n == format!("{id}.log").as_str())
        {
            return Some(path);
        }
    }
    None
}

fn wait_log_in(
    port: u16,
    data: Option<&std::path::Path>,
    id: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let log = match data {
            Some(data) => log_file(data, id)
                .and_then(|p| std::fs::read_to_string(p).ok())
                .unwrap_or_default(),
            None => get(port, &format!("/api/v1/runs/{id}/log")).unwrap_or_default(),
        };
        if done(&log) {
            return log;
        }
        assert!(Instant::now() < deadline, "log: {log:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A job on the second cluster, `build-b`.
const B_JOB: &str = "- name: b-job\n  cron: \"0 0 31 2 *\"\n  cluster: build-b\n  spec: {containers: [{image: alpine, command: [\"true\"]}]}\n";

const JOBS: &str = "periodics:
- name: k-job
  cron: \"0 0 31 2 *\"
  cluster: build-a
  labels: {team: infra}
  spec: {containers: [{image: alpine, command: [\"true\"]}]}
- name: local-job
  cron: \"0 0 31 2 *\"
  spec: {containers: [{image: alpine, command: [\"true\"]}]}
";

#[test]
fn cluster_health_follows_each_api_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let own = ControlPlane::dedicated(Options::default());
    let a = Cluster::new(&own, "k-health", "build-a");
    let b = Cluster::new(ControlPlane::shared(), "k-health", "build-b");
    // A kubeconfig whose context cannot make a client (it names a cluster the
    // file does not define).
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\", certificate-authority-data: bm90IGEgY2VydA==}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: broken, context: {cluster: missing, user: u}}]\n",
    )
    .unwrap();
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig(), b.kubeconfig(), broken],
        &config_for("k-health", ""),
        JOBS,
    );
    let port = daemon.port;
    let quick = Duration::from_secs(10);
    // Unreachable from the start ("not probed yet"), then for its own
    // reason once probed.
    let deadline = Instant::now() + quick;
    loop {
        let c = wait_status(port, "broken", "Unreachable", quick);
        if c["reason"].as_str().is_some_and(|r| r != "not probed yet") {
            break;
        }
        assert!(Instant::now() < deadline, "never probed: {c}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let metrics = get(port, "/metrics").unwrap();
    let failed = metrics
        .lines()
        .find(|l| l.starts_with("kubernetes_failed_client_creations{cluster=\"broken\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    assert!(failed.is_some_and(|n| n >= 1.0), "{metrics}");
    for alias in ["build-a", "build-b"] {
        let c = wait_status(port, alias, "Reachable", quick);
        assert_eq!(c["kind"], "kubernetes");
        assert_eq!(c["context"], alias);
    }
    // Missing permissions, from real SelfSubjectAccessReviews: bosun's Role
    // loses `create` on pods.
    b.tenant.grant(&["delete", "list", "watch", "get", "patch"]);
    let c = wait_status(port, "build-b", "MissingPermissions", quick);
    assert_eq!(c["prow_status"], "MissingPermissions");
    assert!(c["reason"].as_str().unwrap().contains("create pods"), "{c}");
    assert_eq!(
        wait_status(port, "build-a", "Reachable", quick)["status"],
        "Reachable"
    );
    // A cluster whose API server is stopped is Unreachable after two failed
    // probes; its runs wait, and start once it is back.
    own.stop_apiserver();
    let c = wait_status(port, "build-a", "Unreachable", quick);
    assert_eq!(c["prow_status"], "Error");
    let waiting = trigger(port, "k-job");
    std::thread::sleep(Duration::from_millis(500));
    let run = run_of(port, &waiting);
    assert_eq!(run["state"], "triggered", "{run}");
    assert_eq!(
        run["description"], "Waiting: build cluster build-a is Unreachable.",
        "a waiting run says why: {run}"
    );
    own.start_apiserver();
    wait_status(port, "build-a", "Reachable", Duration::from_secs(30));
    a.wait_pod(&waiting);
    a.run(&waiting);
    a.succeed(&waiting);
    wait_run(port, &waiting, "success");
    // A cluster that hangs (its API server stopped with SIGSTOP: connections
    // open, nothing answers) does not hold back another's probes: b's fix is
    // seen long before a's calls time out (10 s).
    own.pause();
    std::thread::sleep(Duration::from_millis(300));
    b.tenant.grant(&bosun_kubetest::POD_VERBS);
    let started = Instant::now();
    wait_status(port, "build-b", "Reachable", quick);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "b waited for a: {:?}",
        started.elapsed()
    );
    // The hung cluster is Unreachable once its calls have timed out twice.
    wait_status(port, "build-a", "Unreachable", Duration::from_secs(40));
    own.resume();
    wait_status(port, "build-a", "Reachable", Duration::from_secs(30));
}

#[test]
fn runs_on_a_kubernetes_cluster_follow_their_pods() {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), "k-follow", "build-a");
    let data = dir.path().join("bosun");
    let config = config_for("k-follow", "");
    let daemon = start_full(&data, &[a.kubeconfig()], &config, JOBS);
    let port = daemon.port;

    // A run becomes a pod as Prow builds it (the real API server accepted
    // it), and follows its phases.
    let ok = trigger(port, "k-job");
    let pod = a.wait_pod(&ok);
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["created-by-prow"], "true");
    assert_eq!(labels["prow.k8s.io/id"], ok);
    assert_eq!(labels["prow.k8s.io/job"], "k-job");
    assert_eq!(labels["team"], "infra");
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.containers[0].name, "test");
    assert_eq!(spec.automount_service_account_token, Some(false));
    for c in &spec.containers {
        let env = c.env.clone().unwrap();
        assert!(env
            .iter()
            .any(|e| e.name == "PROW_JOB_ID" && e.value.as_deref() == Some(ok.as_str())));
    }
    let run = wait_run(port, &ok, "pending");
    assert_eq!(run["cluster"], "build-a");
    a.run(&ok);
    a.log(&ok, "hello from the pod\n");
    a.succeed(&ok);
    wait_run(port, &ok, "success");
    // The pod's log is the run's log.
    wait_log(port, &ok, |l| l.contains("hello from the pod"));

    // Local and Kubernetes clusters side by side.
    let local = trigger(port, "local-job");
    assert_eq!(wait_run(port, &local, "success")["cluster"], "default");

    // A failed pod is a failed run; a container killed for memory, an error.
    let failed = trigger(port, "k-job");
    a.wait_pod(&failed);
    a.run(&failed);
    a.plane.kubelet().fail(a.ns(), &failed);
    wait_run(port, &failed, "failure");
    let oom = trigger(port, "k-job");
    a.wait_pod(&oom);
    a.run(&oom);
    a.plane
        .kubelet()
        .finish(a.ns(), &oom, Outcome::oom_killed());
    let run = wait_run(port, &oom, "error");
    assert!(
        run["description"].as_str().unwrap().contains("OOMKilled"),
        "{run}"
    );

    // Abort deletes the pod: a running pod goes once the kubelet confirms
    // its graceful deletion.
    let aborted = trigger(port, "k-job");
    a.wait_pod(&aborted);
    wait_run(port, &aborted, "pending");
    a.run(&aborted);
    let (status, _) = post(port, &format!("/api/v1/runs/{aborted}/abort"), "");
    assert_eq!(status, 202);
    wait_run(port, &aborted, "aborted");
    a.wait_gone(&aborted, Duration::from_secs(10));

    // A restarted daemon re-adopts a running pod and creates no second one
    // (the pod keeps its uid).
    let adopted = trigger(port, "k-job");
    let uid = a.wait_pod(&adopted).metadata.uid;
    wait_run(port, &adopted, "pending");
    a.run(&adopted);
    a.log(&adopted, "before the restart\n");
    drop(daemon);
    a.log(&adopted, "while bosun was away\n");
    let daemon = start_full(&data, &[a.kubeconfig()], &config, JOBS);
    let port = daemon.port;
    a.log(&adopted, "after the restart\n");
    a.succeed(&adopted);
    wait_run(port, &adopted, "success");
    assert_eq!(a.pod(&adopted).unwrap().metadata.uid, uid);
    let log = wait_log(port, &adopted, |l| l.contains("after the restart"));
    assert_eq!(
        log,
        "before the restart\nwhile bosun was away\nafter the restart\n"
    );
}

/// The watch outlives `410 Gone`: kube-apiserver (pods watch cache off) is
/// stopped, etcd moves on and is compacted, and the watch bosun resumes
/// from its last resourceVersion is gone; it lists again and sees the pod's
/// change it missed.
#[test]
fn a_watch_from_a_compacted_revision_lists_again() {
    let dir = tempfile::tempdir().unwrap();
    let own = ControlPlane::dedicated(Options {
        pods_watch_cache: false,
        compaction: false,
        min_request_timeout: None,
    });
    let a = Cluster::new(&own, "k-gone", "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig()],
        &config_for("k-gone", ""),
        JOBS,
    );
    let port = daemon.port;
    let id = trigger(port, "k-job");
    a.wait_pod(&id);
    wait_run(port, &id, "pending");
    own.stop_apiserver();
    own.advance_etcd(5);
    own.compact();
    own.start_apiserver();
    a.run(&id);
    a.succeed(&id);
    wait_run(port, &id, "success");
    // Counters start again with the restarted server: a resumed watch
    // never lists, only one refused as gone does.
    let lists = own.request_total(|l| {
        l.get("resource") == "pods" && l.get("verb") == "LIST" && l.get("scope") == "namespace"
    });
    assert!(lists >= 1.0, "bosun never listed its pods again");
}

#[test]
fn pods_past_plank_timeouts_end_in_error_and_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), "k-timeouts", "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig()],
        // The scheduling timeout is the longest: the test must see each pod,
        // and bind or start the next two, before it runs out.
        &config_for(
            "k-timeouts",
            "plank: {pod_unscheduled_timeout: 4s, pod_pending_timeout: 1s, pod_running_timeout: 2s}\n",
        ),
        JOBS,
    );
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    // Never scheduled.
    let unscheduled = trigger(port, "k-job");
    a.wait_pod(&unscheduled);
    kubelet.unschedulable(a.ns(), &unscheduled);
    let run = wait_run(port, &unscheduled, "error");
    assert_eq!(run["description"], "Pod scheduling timeout.");
    // Bound to a node but never running.
    let stuck = trigger(port, "k-job");
    a.wait_pod(&stuck);
    kubelet.pending_on_node(a.ns(), &stuck);
    let run = wait_run(port, &stuck, "error");
    assert_eq!(run["description"], "Pod pending timeout.");
    // Running too long: aborted.
    let long = trigger(port, "k-job");
    a.wait_pod(&long);
    a.run(&long);
    let run = wait_run(port, &long, "aborted");
    assert_eq!(run["description"], "Pod running timeout.");
    // All three pods are deleted, as plank deletes them (the bound ones
    // once the kubelet confirms).
    for id in [&unscheduled, &stuck, &long] {
        a.wait_gone(id, Duration::from_secs(10));
    }
}

/// What a decorated job needs besides its own settings.
const DECORATION: &str =
    "utility_images: {clonerefs: a, initupload: b, entrypoint: c, sidecar: d}, \
     gcs_configuration: {bucket: b, path_strategy: explicit}";

/// A daemon on cluster `build-a` of namespace `ns` whose plank timeouts are
/// an hour for the two pending ones and 2s for the running one, with job
/// `own` whose decoration config sets `timeout` (`FIELD: VALUE`).
fn own_timeout_daemon(ns: &str, timeout: &str) -> (tempfile::TempDir, Cluster<'static>, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), ns, "build-a");
    let jobs = format!(
        "periodics:\n- name: own\n  cron: \"0 0 31 2 *\"\n  cluster: build-a\n  decorate: true\n  decoration_config: {{{timeout}, {DECORATION}}}\n  spec: {{containers: [{{image: alpine, command: [\"true\"]}}]}}\n"
    );
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig()],
        &config_for(
            ns,
            "plank: {pod_unscheduled_timeout: 1h, pod_pending_timeout: 1h, pod_running_timeout: 2s}\n",
        ),
        &jobs,
    );
    (dir, a, daemon)
}

/// As plank: a job's own `decoration_config.pod_unscheduled_timeout`
/// replaces plank's, here a shorter one.
#[test]
fn a_jobs_own_shorter_unscheduled_timeout_ends_its_pod_at_its_own() {
    let (_dir, a, daemon) = own_timeout_daemon("k-own-unscheduled", "pod_unscheduled_timeout: 2s");
    let id = trigger(daemon.port, "own");
    a.wait_pod(&id);
    a.plane.kubelet().unschedulable(a.ns(), &id);
    let run = wait_run(daemon.port, &id, "error");
    assert_eq!(run["description"], "Pod scheduling timeout.");
    a.wait_gone(&id, Duration::from_secs(10));
}

/// As plank: a job's own `decoration_config.pod_pending_timeout` replaces
/// plank's, here a shorter one.
#[test]
fn a_jobs_own_shorter_pending_timeout_ends_its_pod_at_its_own() {
    let (_dir, a, daemon) = own_timeout_daemon("k-own-pending", "pod_pending_timeout: 1s");
    let id = trigger(daemon.port, "own");
    a.wait_pod(&id);
    a.plane.kubelet().pending_on_node(a.ns(), &id);
    let run = wait_run(daemon.port, &id, "error");
    assert_eq!(run["description"], "Pod pending timeout.");
    a.wait_gone(&id, Duration::from_secs(10));
}

/// As plank: a job's own `decoration_config.pod_running_timeout` replaces
/// plank's, here a longer one: the run outlives plank's.
#[test]
fn a_jobs_own_longer_running_timeout_outlives_the_global_one() {
    let (_dir, a, daemon) = own_timeout_daemon("k-own-running", "pod_running_timeout: 8s");
    let port = daemon.port;
    let id = trigger(port, "own");
    a.wait_pod(&id);
    a.run(&id);
    let started = Instant::now();
    wait_run(port, &id, "pending");
    while started.elapsed() < Duration::from_secs(5) {
        let run = run_of(port, &id);
        assert_eq!(
            run["state"], "pending",
            "aborted before its own timeout: {run}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let run = wait_run(port, &id, "aborted");
    assert_eq!(run["description"], "Pod running timeout.");
    a.wait_gone(&id, Duration::from_secs(10));
}

#[test]
fn evicted_and_lost_pods_are_revived_up_to_max_revivals() {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), "k-revive", "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig()],
        &config_for("k-revive", "plank: {max_revivals: 2}\n"),
        JOBS,
    );
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    let id = trigger(port, "k-job");
    let first = a.wait_pod(&id);
    a.run(&id);
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap();
    let replaced = |old: &Pod, within: Duration| {
        let deadline = Instant::now() + within;
        loop {
            if let Some(p) = a.pod(&id).filter(|p| uid(p) != uid(old)) {
                return p;
            }
            assert!(Instant::now() < deadline, "not revived");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // Evicted: a new pod of the same name, the run still pending.
    kubelet.evict(a.ns(), &id);
    let second = replaced(&first, Duration::from_secs(20));
    let run = wait_revivals(port, &id, 1);
    assert_eq!(run["state"], "pending", "{run}");
    // Its node lost: revived again, but only once the old pod is really
    // gone, however long its graceful deletion takes (here longer than
    // any API call's timeout).
    a.run(&id);
    kubelet.hold_deletion(a.ns(), &id, true);
    kubelet.lose_node(a.ns(), &id);
    let deadline = Instant::now() + Duration::from_secs(12);
    while Instant::now() < deadline {
        let p = a.pod(&id).expect("the old pod lingers");
        assert_eq!(uid(&p), uid(&second), "created before the old pod went");
        let run = run_of(port, &id);
        assert_eq!(run["state"], "pending", "{run}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(a.pod(&id).unwrap().metadata.deletion_timestamp.is_some());
    kubelet.hold_deletion(a.ns(), &id, false);
    let third = replaced(&second, Duration::from_secs(20));
    let run = wait_revivals(port, &id, 2);
    assert_eq!(run["state"], "pending", "{run}");
    // A third loss is past max_revivals: the run ends in error.
    a.run(&id);
    kubelet.evict(a.ns(), &id);
    let run = wait_run(port, &id, "error");
    assert_eq!(
        run["description"], "Job pod reached max revivals (2) after being evicted.",
        "{run}"
    );
    assert_eq!(run["pod_revival_count"], 2);
    assert_eq!(uid(&a.pod(&id).unwrap()), uid(&third));
}

/// As plank: a pod deleted under a pending run (someone else's graceful
/// deletion) ends the run in error.
#[test]
fn a_pod_deleted_under_its_run_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), "k-deleted", "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig()],
        &config_for("k-deleted", ""),
        JOBS,
    );
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    let id = trigger(port, "k-job");
    a.wait_pod(&id);
    a.run(&id);
    wait_run(port, &id, "pending");
    kubelet.hold_deletion(a.ns(), &id, true);
    kubelet.delete_gracefully(a.ns(), &id);
    let run = wait_run(port, &id, "error");
    assert_eq!(run["description"], "Pod got deleted unexpectedly", "{run}");
    kubelet.hold_deletion(a.ns(), &id, false);
    a.wait_gone(&id, Duration::from_secs(10));
}

#[test]
fn finished_pods_are_deleted_after_their_ttl_except_in_excluded_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let own = ControlPlane::dedicated(Options::default());
    let a = Cluster::new(ControlPlane::shared(), "k-sinker", "build-a");
    let b = Cluster::new(&own, "k-sinker", "build-b");
    let jobs = format!("{JOBS}{B_JOB}");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig(), b.kubeconfig()],
        &config_for(
            "k-sinker",
            "sinker: {terminated_pod_ttl: 1s, exclude_clusters: [build-b]}\n",
        ),
        &jobs,
    );
    let port = daemon.port;
    let on_a = trigger(port, "k-job");
    let on_b = trigger(port, "b-job");
    a.wait_pod(&on_a);
    b.wait_pod(&on_b);
    for (c, id) in [(&a, &on_a), (&b, &on_b)] {
        c.run(id);
        c.log(id, "kept\n");
        c.succeed(id);
        wait_run(port, id, "success");
    }
    a.wait_gone(&on_a, Duration::from_secs(15));
    // Its log was copied first and outlives it.
    assert!(get(port, &format!("/api/v1/runs/{on_a}/log"))
        .unwrap()
        .contains("kept"));
    // Excluded cluster: still there well past the TTL.
    std::thread::sleep(Duration::from_secs(2));
    assert!(b.pod(&on_b).is_some(), "pods of excluded clusters stay");
}

/// A log stream that drops mid-way is resumed (no line lost or written
/// twice); a log that cannot be read is never taken as copied, so the
/// sinker keeps its pod until it is.
#[test]
fn pod_logs_survive_dropped_streams_and_keep_their_pod_until_copied() {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), "k-logs", "build-a");
    let data = dir.path().join("bosun");
    let daemon = start_full(
        &data,
        &[a.kubeconfig()],
        &config_for("k-logs", "sinker: {terminated_pod_ttl: 1s}\n"),
        JOBS,
    );
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    let id = trigger(port, "k-job");
    a.wait_pod(&id);
    a.run(&id);
    let mut want = String::new();
    for i in 0..3 {
        let line = format!("line {i}\n");
        a.log(&id, &line);
        want.push_str(&line);
    }
    wait_log_in(port, Some(&data), &id, |l| l == want);
    kubelet.cut_log_streams(a.ns(), &id);
    for i in 3..6 {
        let line = format!("line {i}\n");
        a.log(&id, &line);
        want.push_str(&line);
    }
    wait_log_in(port, Some(&data), &id, |l| l == want);
    assert!(kubelet.log_requests(a.ns(), &id) >= 2);
    // The kubelet fails every log request now; the pod ends meanwhile.
    kubelet.fail_logs(a.ns(), &id, true);
    a.log(&id, "the last line\n");
    want.push_str("the last line\n");
    a.succeed(&id);
    wait_run(port, &id, "success");
    // The run has ended but its log is not whole: the log endpoint keeps
    // following it instead of answering with what it has so far.
    let (tx, rx) = std::sync::mpsc::channel();
    let path = format!("/api/v1/runs/{id}/log");
    std::thread::spawn(move || tx.send(get(port, &path)));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        a.pod(&id).is_some(),
        "the sinker deleted a pod whose log was not copied"
    );
    assert!(
        rx.try_recv().is_err(),
        "the log endpoint ended before the log was copied to its end"
    );
    kubelet.fail_logs(a.ns(), &id, false);
    let followed = rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert_eq!(followed, want);
    wait_log(port, &id, |l| l == want);
    a.wait_gone(&id, Duration::from_secs(15));
}

/// A daemon with `JOBS` on cluster `build-a` (pods in `ns`) and its data
/// directory, where run logs are copied.
fn log_daemon(
    ns: &str,
) -> (
    tempfile::TempDir,
    Cluster<'static>,
    std::path::PathBuf,
    Daemon,
) {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), ns, "build-a");
    let data = dir.path().join("bosun");
    let daemon = start_full(&data, &[a.kubeconfig()], &config_for(ns, ""), JOBS);
    (dir, a, data, daemon)
}

/// A pod's log costs one request when nothing goes wrong: the follow,
/// whose end after the watch has shown the container's end is the log's end
/// (no read of the pod, no second read of the log). A stream that ends
/// before the status says the container ended may have been cut: the log is
/// read once more, to its end.
#[test]
fn a_pods_log_is_one_follow_unless_its_stream_ends_first() {
    let (_dir, a, data, daemon) = log_daemon("k-onelog");
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    let copy = |id: &str, stream_first: bool| {
        a.wait_pod(id);
        if stream_first {
            kubelet.streams_end_before_status(a.ns(), id);
        }
        a.run(id);
        a.log(id, "one\n");
        wait_log_in(port, Some(&data), id, |l| l == "one\n");
        a.log(id, "two\n");
        a.succeed(id);
        wait_run(port, id, "success");
        // Whole, and taken as whole (the endpoint answers once it is).
        assert_eq!(wait_log(port, id, |l| l == "one\ntwo\n"), "one\ntwo\n");
        kubelet.log_requests(a.ns(), id)
    };
    let usual = trigger(port, "k-job");
    assert_eq!(copy(&usual, false), 1, "the follow alone");
    let early = trigger(port, "k-job");
    assert_eq!(copy(&early, true), 2, "the follow, then a read to the end");
}

/// A container quiet for longer than any call to the API may take (10 s)
/// keeps its one follow: a log stream has no read timeout.
#[test]
fn a_quiet_containers_log_keeps_its_one_follow() {
    let (_dir, a, data, daemon) = log_daemon("k-quiet");
    let port = daemon.port;
    let id = trigger(port, "k-job");
    a.wait_pod(&id);
    a.run(&id);
    a.log(&id, "before\n");
    wait_log_in(port, Some(&data), &id, |l| l == "before\n");
    std::thread::sleep(Duration::from_secs(12));
    a.log(&id, "after\n");
    wait_log_in(port, Some(&data), &id, |l| l == "before\nafter\n");
    a.succeed(&id);
    wait_run(port, &id, "success");
    wait_log(port, &id, |l| l == "before\nafter\n");
    assert_eq!(a.plane.kubelet().log_requests(a.ns(), &id), 1);
}

/// A follow the API answers with an error while the container runs is an
/// error (logged with the answer's status), not a log that ended: the log
/// is followed again once the API serves it, and copied whole.
#[test]
fn a_refused_follow_is_an_error_and_is_followed_again() {
    let (_dir, a, data, daemon) = log_daemon("k-refused");
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    let id = trigger(port, "k-job");
    a.wait_pod(&id);
    a.run(&id);
    a.log(&id, "before\n");
    wait_log_in(port, Some(&data), &id, |l| l == "before\n");
    kubelet.fail_logs(a.ns(), &id, true);
    // The open follow ends, and the next is refused (500 from the kubelet).
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let log = std::fs::read_to_string(&daemon.log).unwrap_or_default();
        let line = log
            .lines()
            .find(|l| l.contains("the pod's log stream broke") && l.contains("code: 500"))
            .map(str::to_string);
        if let Some(line) = line {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "no refused follow logged with its status:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(refused.contains(&id), "{refused}");
    a.log(&id, "after\n");
    kubelet.fail_logs(a.ns(), &id, false);
    wait_log_in(port, Some(&data), &id, |l| l == "before\nafter\n");
    a.succeed(&id);
    wait_run(port, &id, "success");
    wait_log(port, &id, |l| l == "before\nafter\n");
}

/// More logs followed at once than one connection carries (100 streams
/// each): every follow is answered and every log copied as it is written.
/// (At 200 streams a connection, about 100 of them were answered and the
/// others waited.)
#[test]
fn more_logs_followed_at_once_than_one_connection_carries_are_all_copied() {
    const RUNS: usize = 150;
    let (_dir, a, data, daemon) = log_daemon("k-many");
    let port = daemon.port;
    let ids: Vec<String> = (0..RUNS).map(|_| trigger(port, "k-job")).collect();
    for id in &ids {
        a.wait_pod(id);
        a.run(id);
    }
    // Every pod runs, so every log is followed at once.
    for id in &ids {
        wait_run(port, id, "pending");
        a.log(id, &format!("hello from {id}\n"));
    }
    for id in &ids {
        let want = format!("hello from {id}\n");
        wait_log_in(port, Some(&data), id, |l| l == want);
    }
    for id in &ids {
        a.succeed(id);
    }
    for id in &ids {
        wait_run(port, id, "success");
    }
}

/// A log the kubelet rotates while bosun follows it is copied whole: the
/// follow goes on into the new file, and a stream cut after the rotation
/// resumes from the current file, after the last line copied.
#[test]
fn a_rotated_log_is_copied_whole() {
    let (_dir, a, data, daemon) = log_daemon("k-rotate");
    let port = daemon.port;
    let kubelet = a.plane.kubelet();
    let id = trigger(port, "k-job");
    a.wait_pod(&id);
    a.run(&id);
    let mut want = String::new();
    let mut write = |from: usize, to: usize| {
        let text: String = (from..to)
            .map(|i| format!("line {i} of a long log\n"))
            .collect();
        a.log(&id, &text);
        want.push_str(&text);
        want.clone()
    };
    let so_far = write(0, 300);
    wait_log_in(port, Some(&data), &id, |l| l == so_far);
    kubelet.rotate_log(a.ns(), &id);
    let so_far = write(300, 600);
    wait_log_in(port, Some(&data), &id, |l| l == so_far);
    kubelet.cut_log_streams(a.ns(), &id);
    let so_far = write(600, 650);
    wait_log_in(port, Some(&data), &id, |l| l == so_far);
    assert_eq!(kubelet.log_requests(a.ns(), &id), 2, "followed again once");
    a.succeed(&id);
    wait_run(port, &id, "success");
    assert_eq!(wait_log(port, &id, |l| l == so_far), so_far);
}

/// A burst of runs on a cluster whose API server sheds bosun's creations
/// over three at once: with the default 16 in flight, the shed creations
/// wait their `Retry-After` and are tried again by the executor (never
/// failing their start back to the controller), and every run gets its
/// pod; with `creations_in_flight: 2`, the same burst meets no 429 at all.
#[test]
fn pod_creations_are_paced_and_a_shed_one_waits_its_retry_after() {
    let burst = |ns: &str, limit: Option<usize>, rounds: usize| {
        let dir = tempfile::tempdir().unwrap();
        let a = Cluster::new(ControlPlane::shared(), ns, "build-a");
        a.tenant.shed_creations_over_three(("", "pods"));
        let limit = limit.map_or(String::new(), |n| format!(", creations_in_flight: {n}"));
        let config = config_declaring(&a, &limit);
        let daemon = start_full(&dir.path().join("bosun"), &[], &config, JOBS);
        let port = daemon.port;
        wait_status(port, "build-a", "Reachable", Duration::from_secs(30));
        let clusters: serde_json::Value =
            serde_json::from_str(&get(port, "/api/v1/clusters").unwrap()).unwrap();
        let in_flight = clusters["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["alias"] == "build-a")
            .map(|c| c["creations_in_flight"].clone());
        let (mut shed, mut failed_back) = (0, 0);
        // Until a round meets the API server's shedding (the creations in
        // flight at once depend on how the machine schedules the starts).
        for _ in 0..rounds {
            let ids: Vec<String> = std::thread::scope(|s| {
                let posters: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| (0..15).map(|_| trigger(port, "k-job")).collect::<Vec<_>>())
                    })
                    .collect();
                posters
                    .into_iter()
                    .flat_map(|p| p.join().unwrap())
                    .collect()
            });
            for id in &ids {
                wait_run_within(port, id, "pending", Duration::from_secs(60));
                assert!(a.pod(id).is_some(), "{id}: no pod");
            }
            let log = std::fs::read_to_string(&daemon.log).unwrap();
            let count = |keep: &dyn Fn(&str) -> bool| log.lines().filter(|l| keep(l)).count();
            failed_back = count(&|l| l.contains("cannot create the pod yet"));
            shed = count(&|l| {
                l.contains("shed the pod's creation (429)")
                    || (l.contains("cannot create the pod yet") && l.contains("Too many requests"))
            });
            if shed > 0 {
                break;
            }
        }
        (in_flight, shed, failed_back)
    };
    let (in_flight, shed, failed_back) = burst("k-pace-16", None, 3);
    assert_eq!(in_flight, Some(16.into()), "the default");
    assert!(shed > 0, "no burst met a 429: the test proves nothing");
    assert_eq!(
        failed_back, 0,
        "a shed creation was failed back to the controller"
    );
    let (in_flight, shed, failed_back) = burst("k-pace-2", Some(2), 1);
    assert_eq!(in_flight, Some(2.into()));
    assert_eq!(
        (shed, failed_back),
        (0, 0),
        "two in flight stay within three seats"
    );
}

/// A daemon with `JOBS` on a declared cluster `build-a` (pods in `ns`) that
/// runs one run at a time.
fn one_at_a_time_daemon(ns: &str) -> (tempfile::TempDir, Cluster<'static>, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let a = Cluster::new(ControlPlane::shared(), ns, "build-a");
    let config = config_declaring(&a, ", max_concurrency: 1");
    let daemon = start_full(&dir.path().join("bosun"), &[], &config, JOBS);
    (dir, a, daemon)
}

/// A run whose pod exists already when its creation is tried (a creation
/// that timed out but went through, a restart between a creation and its
/// commit) keeps that pod: the creation's 409 is its start, and the pod the
/// watch showed stays the run's, never taken for gone and revived.
#[test]
fn a_pod_there_before_its_creation_is_kept_not_revived() {
    let (_dir, a, daemon) = one_at_a_time_daemon("k-there");
    let port = daemon.port;
    let first = trigger(port, "k-job");
    a.wait_pod(&first);
    let second = trigger(port, "k-job");
    std::thread::sleep(Duration::from_millis(500));
    assert!(a.pod(&second).is_none(), "one slot: the second waits");
    // Its pod, there before bosun creates it, running.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": second, "labels": {"created-by-prow": "true"}},
        "spec": {"containers": [{"name": "test", "image": "alpine"}]}
    }))
    .unwrap();
    let api: kube::Api<Pod> = kube::Api::namespaced(a.plane.admin(), a.ns());
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(api.create(&kube::api::PostParams::default(), &pod))
        .unwrap();
    a.run(&second);
    a.run(&first);
    a.succeed(&first);
    wait_run(port, &first, "success");
    wait_run(port, &second, "pending");
    // Past the grace a started run's pod may take to show.
    std::thread::sleep(Duration::from_secs(35));
    let run = run_of(port, &second);
    assert_eq!(run["state"], "pending", "{run}");
    assert_eq!(run["pod_revival_count"], 0, "{run}");
}

#[test]
fn max_concurrency_holds_on_a_kubernetes_cluster() {
    let (_dir, a, daemon) = one_at_a_time_daemon("k-concurrency");
    let port = daemon.port;
    let first = trigger(port, "k-job");
    let second = trigger(port, "k-job");
    a.wait_pod(&first);
    wait_run(port, &first, "pending");
    std::thread::sleep(Duration::from_millis(500));
    assert!(a.pod(&second).is_none(), "one slot: the second waits");
    a.run(&first);
    a.succeed(&first);
    wait_run(port, &first, "success");
    a.wait_pod(&second);
    wait_run(port, &second, "pending");
}

/// As plank: a pod creation that fails for a reason that may pass (here the
/// API server was killed) leaves the run `triggered`, and the start is
/// tried again; only a request the API refuses ends it.
#[test]
fn a_pod_creation_that_fails_on_the_way_is_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let own = ControlPlane::dedicated(Options::default());
    let a = Cluster::new(&own, "k-retry", "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig()],
        &config_for("k-retry", ""),
        JOBS,
    );
    let port = daemon.port;
    let retried = |id: &str| {
        std::fs::read_to_string(&daemon.log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("cannot create the pod yet") && l.contains(id))
    };
    // The API server must go between the run's admission and its pod's
    // creation, before the health probes see the cluster down and hold its
    // runs back (then no creation is tried): one try in a few may miss.
    let mut tried = Vec::new();
    for _ in 0..5 {
        wait_status(port, "build-a", "Reachable", Duration::from_secs(30));
        own.kill_apiserver();
        let id = trigger(port, "k-job");
        std::thread::sleep(Duration::from_millis(1500));
        let run = run_of(port, &id);
        assert_eq!(run["state"], "triggered", "{run}");
        own.start_apiserver();
        let was_retried = retried(&id);
        tried.push(id);
        if was_retried {
            break;
        }
    }
    let last = tried.last().unwrap();
    assert!(
        retried(last),
        "no creation failed on the way in {} tries",
        tried.len()
    );
    for id in &tried {
        a.wait_pod(id);
        wait_run_within(port, id, "pending", Duration::from_secs(30));
    }
}

#[test]
fn a_hanging_cluster_never_delays_runs_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let own = ControlPlane::dedicated(Options::default());
    let a = Cluster::new(&own, "k-hang", "build-a");
    let b = Cluster::new(ControlPlane::shared(), "k-hang", "build-b");
    let jobs = format!("{JOBS}{B_JOB}");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig(), b.kubeconfig()],
        &config_for("k-hang", ""),
        &jobs,
    );
    let port = daemon.port;
    let on_a = trigger(port, "k-job");
    a.wait_pod(&on_a);
    wait_run(port, &on_a, "pending");
    a.run(&on_a);
    // Cluster a stops answering (SIGSTOP): aborting its run (a pod
    // deletion) and starting another there (a pod creation) both hang on
    // it.
    own.pause();
    let (status, _) = post(port, &format!("/api/v1/runs/{on_a}/abort"), "");
    assert_eq!(status, 202);
    wait_run(port, &on_a, "aborted");
    let _stuck = trigger(port, "k-job");
    // Meanwhile cluster b runs a job from start to end, far within a's 10 s
    // API timeout.
    let started = Instant::now();
    let on_b = trigger(port, "b-job");
    b.wait_pod(&on_b);
    wait_run(port, &on_b, "pending");
    b.run(&on_b);
    b.succeed(&on_b);
    wait_run(port, &on_b, "success");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cluster b waited for cluster a: {:?}",
        started.elapsed()
    );
    own.resume();
}
