//! bosun against Kubernetes build clusters. No Kubernetes API server can be
//! installed on these machines, so the clusters are `bosun-fakekube`
//! processes: fake API servers speaking TLS with a generated CA, reached
//! through kube-rs exactly as a real cluster would be. (Build the fake first
//! when running this file alone: `cargo build -p bosun-fakekube`;
//! `cargo test --workspace` builds it.)

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use bosun_fakekube::FakeCluster;

struct Daemon {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failed test shows what the daemon said.
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!("--- the daemon's log (last 200 lines) ---");
            for l in &lines[lines.len().saturating_sub(200)..] {
                eprintln!("{l}");
            }
        }
    }
}

fn start_jobs(dir: &std::path::Path, kubeconfigs: &[std::path::PathBuf], jobs: &str) -> Daemon {
    start_full(dir, kubeconfigs, "{}\n", jobs)
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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bosun"));
    cmd.arg("serve")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .env("BOSUN_HEALTH_INTERVAL_MS", "200")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap());
    for k in kubeconfigs {
        cmd.arg("--kubeconfig").arg(k);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let port = common::logged_port(&mut child, &dir.join("stderr.log"), deadline);
    let daemon = Daemon {
        child,
        port,
        log: dir.join("stderr.log"),
    };
    while get(port, "/healthz").is_none() {
        assert!(
            Instant::now() < deadline,
            "daemon did not answer: {}",
            std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon
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

#[test]
fn cluster_health_follows_each_api_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let b = FakeCluster::start(&dir.path().join("b"), "build-b");
    // A kubeconfig whose context cannot make a client (it names a cluster the
    // file does not define).
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\", certificate-authority-data: bm90IGEgY2VydA==}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: broken, context: {cluster: missing, user: u}}]\n",
    )
    .unwrap();
    let daemon = start_jobs(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path(), b.kubeconfig_path(), broken],
        JOBS,
    );
    let port = daemon.port;
    let quick = Duration::from_secs(10);
    let c = wait_status(port, "broken", "Unreachable", quick);
    assert!(
        c["reason"].as_str().is_some_and(|r| r != "not probed yet"),
        "{c}"
    );
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
    // Missing permissions are named.
    b.deny(&["create"], "pods", None);
    let c = wait_status(port, "build-b", "MissingPermissions", quick);
    assert_eq!(c["prow_status"], "MissingPermissions");
    assert!(c["reason"].as_str().unwrap().contains("create pods"), "{c}");
    assert_eq!(
        wait_status(port, "build-a", "Reachable", quick)["status"],
        "Reachable"
    );
    // A cluster whose API is down is Unreachable after two failed probes;
    // its runs wait, and start once it is back.
    a.set_down(true);
    let c = wait_status(port, "build-a", "Unreachable", quick);
    assert_eq!(c["prow_status"], "Error");
    let waiting = trigger(port, "k-job");
    std::thread::sleep(Duration::from_millis(500));
    let run: serde_json::Value =
        serde_json::from_str(&get(port, &format!("/api/v1/runs/{waiting}")).unwrap()).unwrap();
    assert_eq!(run["state"], "triggered", "{run}");
    assert_eq!(
        run["description"], "Waiting: build cluster build-a is Unreachable.",
        "a waiting run says why: {run}"
    );
    a.set_down(false);
    wait_status(port, "build-a", "Reachable", quick);
    wait_pod(&a, &waiting);
    a.run_pod("default", &waiting);
    a.succeed_pod("default", &waiting);
    wait_run(port, &waiting, "success");
    // A cluster that hangs does not hold back another's probes: b's fix is
    // seen long before a's calls time out (10 s).
    a.set_hang(true);
    std::thread::sleep(Duration::from_millis(300));
    b.clear_denies();
    let started = Instant::now();
    wait_status(port, "build-b", "Reachable", quick);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "b waited for a: {:?}",
        started.elapsed()
    );
    // The hung cluster is Unreachable once its calls have timed out twice.
    wait_status(port, "build-a", "Unreachable", Duration::from_secs(40));
    a.set_hang(false);
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

fn wait_run(port: u16, id: &str, state: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let run: serde_json::Value =
            serde_json::from_str(&get(port, &format!("/api/v1/runs/{id}")).unwrap()).unwrap();
        if run["state"] == state {
            return run;
        }
        assert!(Instant::now() < deadline, "run never became {state}: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_pod(fake: &FakeCluster, name: &str) -> k8s_openapi::api::core::v1::Pod {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(p) = fake.pod("default", name) {
            return p;
        }
        assert!(Instant::now() < deadline, "no pod {name}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A job on the second fake cluster, `build-b`.
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
fn runs_on_a_kubernetes_cluster_follow_their_pods() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let data = dir.path().join("bosun");
    let daemon = start_jobs(&data, &[a.kubeconfig_path()], JOBS);
    let port = daemon.port;

    // A run becomes a pod as Prow builds it, and follows its phases.
    let ok = trigger(port, "k-job");
    let pod = wait_pod(&a, &ok);
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["created-by-prow"], "true");
    assert_eq!(labels["prow.k8s.io/id"], ok);
    assert_eq!(labels["prow.k8s.io/job"], "k-job");
    assert_eq!(labels["team"], "infra");
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    for c in &spec.containers {
        let env = c.env.clone().unwrap();
        assert!(env
            .iter()
            .any(|e| e.name == "PROW_JOB_ID" && e.value.as_deref() == Some(ok.as_str())));
    }
    let run = wait_run(port, &ok, "pending");
    assert_eq!(run["cluster"], "build-a");
    a.run_pod("default", &ok);
    a.append_log("default", &ok, "hello from the pod\n");
    a.succeed_pod("default", &ok);
    wait_run(port, &ok, "success");
    // The pod's log is the run's log.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = get(port, &format!("/api/v1/runs/{ok}/log")).unwrap_or_default();
        if log.contains("hello from the pod") {
            break;
        }
        assert!(Instant::now() < deadline, "log: {log:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Local and Kubernetes clusters side by side.
    let local = trigger(port, "local-job");
    assert_eq!(wait_run(port, &local, "success")["cluster"], "default");

    // The watch outlives a 410 Gone (it lists again).
    let after_gone = trigger(port, "k-job");
    wait_pod(&a, &after_gone);
    wait_run(port, &after_gone, "pending");
    a.gone();
    a.run_pod("default", &after_gone);
    a.succeed_pod("default", &after_gone);
    wait_run(port, &after_gone, "success");

    // A failed pod is a failed run; a container killed for memory, an error.
    let failed = trigger(port, "k-job");
    wait_pod(&a, &failed);
    a.fail_pod("default", &failed);
    wait_run(port, &failed, "failure");
    let oom = trigger(port, "k-job");
    wait_pod(&a, &oom);
    let mut update = bosun_fakekube::PhaseUpdate::new("Failed");
    update.containers = Some(vec![bosun_fakekube::ContainerOutcome {
        name: "test".into(),
        exit_code: Some(137),
        reason: Some("OOMKilled".into()),
    }]);
    a.set_phase("default", &oom, &update);
    let run = wait_run(port, &oom, "error");
    assert!(
        run["description"].as_str().unwrap().contains("OOMKilled"),
        "{run}"
    );

    // Abort deletes the pod.
    let aborted = trigger(port, "k-job");
    wait_pod(&a, &aborted);
    wait_run(port, &aborted, "pending");
    let (status, _) = post(port, &format!("/api/v1/runs/{aborted}/abort"), "");
    assert_eq!(status, 202);
    wait_run(port, &aborted, "aborted");
    assert!(a
        .deleted()
        .iter()
        .any(|d| d.name == aborted && d.source == "api"));

    // A restarted daemon re-adopts a running pod and creates no second one.
    let adopted = trigger(port, "k-job");
    wait_pod(&a, &adopted);
    wait_run(port, &adopted, "pending");
    a.run_pod("default", &adopted);
    drop(daemon);
    let daemon = start_jobs(&data, &[a.kubeconfig_path()], JOBS);
    let port = daemon.port;
    a.succeed_pod("default", &adopted);
    wait_run(port, &adopted, "success");
    let creates = a
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pods"))
        .count();
    assert_eq!(creates, 6, "one pod per run, none twice");
}

#[test]
fn pods_past_plank_timeouts_end_in_error_and_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path()],
        // The scheduling timeout is the longest: the test must see each pod,
        // and bind or start the next two, before it runs out.
        "plank: {pod_unscheduled_timeout: 4s, pod_pending_timeout: 1s, pod_running_timeout: 2s}\n",
        JOBS,
    );
    let port = daemon.port;
    // Never scheduled.
    let unscheduled = trigger(port, "k-job");
    wait_pod(&a, &unscheduled);
    a.unschedulable("default", &unscheduled, None);
    let run = wait_run(port, &unscheduled, "error");
    assert_eq!(run["description"], "Pod scheduling timeout.");
    // Bound to a node but never running.
    let stuck = trigger(port, "k-job");
    wait_pod(&a, &stuck);
    let mut update = bosun_fakekube::PhaseUpdate::new("Pending");
    update.node = Some("node-1".into());
    a.set_phase("default", &stuck, &update);
    let run = wait_run(port, &stuck, "error");
    assert_eq!(run["description"], "Pod pending timeout.");
    // Running too long: aborted.
    let long = trigger(port, "k-job");
    wait_pod(&a, &long);
    a.run_pod("default", &long);
    let run = wait_run(port, &long, "aborted");
    assert_eq!(run["description"], "Pod running timeout.");
    // All three pods are deleted, as plank deletes them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while [&unscheduled, &stuck, &long]
        .iter()
        .any(|id| a.pod("default", id).is_some())
    {
        assert!(
            Instant::now() < deadline,
            "pods not deleted: {:?}",
            a.pods().len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn evicted_and_lost_pods_are_revived_up_to_max_revivals() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path()],
        "plank: {max_revivals: 2}\n",
        JOBS,
    );
    let port = daemon.port;
    let id = trigger(port, "k-job");
    let first = wait_pod(&a, &id);
    a.run_pod("default", &id);
    let uid = |p: &k8s_openapi::api::core::v1::Pod| p.metadata.uid.clone().unwrap();
    // Evicted: a new pod of the same name, the run still pending.
    let mut evict = bosun_fakekube::PhaseUpdate::new("Failed");
    evict.reason = Some("Evicted".into());
    a.set_phase("default", &id, &evict);
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        if let Some(p) = a.pod("default", &id).filter(|p| uid(p) != uid(&first)) {
            break p;
        }
        assert!(Instant::now() < deadline, "not revived");
        std::thread::sleep(Duration::from_millis(50));
    };
    let run = wait_run(port, &id, "pending");
    assert_eq!(run["pod_revival_count"], 1, "{run}");
    // Its node lost: revived again.
    a.run_pod("default", &id);
    a.set_phase("default", &id, &bosun_fakekube::PhaseUpdate::new("Unknown"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while a
        .pod("default", &id)
        .is_none_or(|p| uid(&p) == uid(&second))
    {
        assert!(Instant::now() < deadline, "not revived twice");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A third loss is past max_revivals: the run ends in error.
    a.run_pod("default", &id);
    a.set_phase("default", &id, &evict);
    let run = wait_run(port, &id, "error");
    assert_eq!(
        run["description"], "Job pod reached max revivals (2) after being evicted.",
        "{run}"
    );
    assert_eq!(run["pod_revival_count"], 2);
}

#[test]
fn finished_pods_are_deleted_after_their_ttl_except_in_excluded_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let b = FakeCluster::start(&dir.path().join("b"), "build-b");
    let jobs = format!("{JOBS}{B_JOB}");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path(), b.kubeconfig_path()],
        "sinker: {terminated_pod_ttl: 1s, exclude_clusters: [build-b]}\n",
        &jobs,
    );
    let port = daemon.port;
    let on_a = trigger(port, "k-job");
    let on_b = trigger(port, "b-job");
    wait_pod(&a, &on_a);
    wait_pod(&b, &on_b);
    for (fake, id) in [(&a, &on_a), (&b, &on_b)] {
        fake.run_pod("default", id);
        fake.append_log("default", id, "kept\n");
        fake.succeed_pod("default", id);
        wait_run(port, id, "success");
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while a.pod("default", &on_a).is_some() {
        assert!(
            Instant::now() < deadline,
            "the finished pod was not deleted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(a
        .deleted()
        .iter()
        .any(|d| d.name == on_a && d.source == "api"));
    // Its log was copied first and outlives it.
    assert!(get(port, &format!("/api/v1/runs/{on_a}/log"))
        .unwrap()
        .contains("kept"));
    // Excluded cluster: still there well past the TTL.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        b.pod("default", &on_b).is_some(),
        "pods of excluded clusters stay"
    );
}

#[test]
fn max_concurrency_holds_on_a_kubernetes_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let config = format!(
        "build_clusters:\n  build-a: {{kind: kubernetes, kubeconfig: {}, context: build-a, max_concurrency: 1}}\n",
        a.kubeconfig_path().display()
    );
    let daemon = start_full(&dir.path().join("bosun"), &[], &config, JOBS);
    let port = daemon.port;
    let first = trigger(port, "k-job");
    let second = trigger(port, "k-job");
    wait_pod(&a, &first);
    wait_run(port, &first, "pending");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        a.pod("default", &second).is_none(),
        "one slot: the second waits"
    );
    a.run_pod("default", &first);
    a.succeed_pod("default", &first);
    wait_run(port, &first, "success");
    wait_pod(&a, &second);
    wait_run(port, &second, "pending");
}

/// As plank: a pod creation that fails for a reason that may pass (here the
/// API drops the connection) leaves the run `triggered`, and the start is
/// tried again; only a request the API refuses ends it.
#[test]
fn a_pod_creation_that_fails_on_the_way_is_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path()],
        "{}\n",
        JOBS,
    );
    let port = daemon.port;
    let retried = |id: &str| {
        std::fs::read_to_string(&daemon.log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("cannot create the pod yet") && l.contains(id))
    };
    // The connection must drop between the run's admission and its pod's
    // creation, before the health probes see the cluster down and hold its
    // runs back (then no creation is tried): one try in a few may miss.
    let mut tried = Vec::new();
    for _ in 0..5 {
        wait_status(port, "build-a", "Reachable", Duration::from_secs(20));
        a.set_down(true);
        let id = trigger(port, "k-job");
        std::thread::sleep(Duration::from_millis(1500));
        let run: serde_json::Value =
            serde_json::from_str(&get(port, &format!("/api/v1/runs/{id}")).unwrap()).unwrap();
        assert_eq!(run["state"], "triggered", "{run}");
        a.set_down(false);
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
        wait_pod(&a, id);
        wait_run(port, id, "pending");
    }
}

#[test]
fn a_hanging_cluster_never_delays_runs_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let b = FakeCluster::start(&dir.path().join("b"), "build-b");
    let jobs = format!("{JOBS}{B_JOB}");
    let daemon = start_full(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path(), b.kubeconfig_path()],
        "{}\n",
        &jobs,
    );
    let port = daemon.port;
    let on_a = trigger(port, "k-job");
    wait_pod(&a, &on_a);
    wait_run(port, &on_a, "pending");
    a.run_pod("default", &on_a);
    // Cluster a stops answering: aborting its run (a pod deletion) and
    // starting another there (a pod creation) both hang on it.
    a.set_hang(true);
    let (status, _) = post(port, &format!("/api/v1/runs/{on_a}/abort"), "");
    assert_eq!(status, 202);
    wait_run(port, &on_a, "aborted");
    let _stuck = trigger(port, "k-job");
    // Meanwhile cluster b runs a job from start to end, far within a's 10 s
    // API timeout.
    let started = Instant::now();
    let on_b = trigger(port, "b-job");
    wait_pod(&b, &on_b);
    wait_run(port, &on_b, "pending");
    b.run_pod("default", &on_b);
    b.succeed_pod("default", &on_b);
    wait_run(port, &on_b, "success");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cluster b waited for cluster a: {:?}",
        started.elapsed()
    );
    a.set_hang(false);
}
