//! `bosun serve` placing runs in `scheduling` (Prow's flow,
//! `scheduler.enabled`): through an external dispatcher
//! (`scheduler.external`, here a stub speaking Prow's contract), and through
//! its own plan (`dispatcher:`), with overrides.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, json, request, start};

type Daemon = common::Serve;

fn trigger(port: u16, job: &str) -> String {
    trigger_with(port, job, None)
}

fn trigger_with(port: u16, job: &str, token: Option<&str>) -> String {
    let (status, body) = request(
        port,
        "POST",
        "/api/v1/runs",
        Some(&format!(r#"{{"job": "{job}"}}"#)),
        token,
    );
    assert_eq!(status, 201, "{body}");
    json(&body)["id"].as_str().unwrap().to_string()
}

fn wait_state(port: u16, id: &str, state: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
        let run = json(&body);
        if run["state"] == state {
            return run;
        }
        assert!(Instant::now() < deadline, "never {state}: {run}");
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// A dispatcher speaking Prow's contract: `{"job"}` -> `{"cluster"}` from
/// a fixed table, `404 Cluster not found` for other jobs; counts requests;
/// while `down`, it closes every connection without answering.
struct Stub {
    port: u16,
    requests: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

fn stub(table: &'static [(&'static str, &'static str)]) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let down = Arc::new(AtomicBool::new(false));
    let (r, d) = (requests.clone(), down.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            if d.load(Ordering::SeqCst) {
                continue; // dropped: the connection closes unanswered
            }
            r.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let job = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["job"].as_str().map(str::to_string))
                .unwrap_or_default();
            let (status, text, kind) = match table.iter().find(|(j, _)| *j == job) {
                Some((_, c)) => (
                    "200 OK",
                    format!(r#"{{"cluster":"{c}"}}"#),
                    "application/json",
                ),
                None => (
                    "404 Not Found",
                    "Cluster not found\n".to_string(),
                    "text/plain; charset=utf-8",
                ),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    Stub {
        port,
        requests,
        down,
    }
}

fn job(name: &str, cluster: &str) -> String {
    format!("- name: {name}\n  cron: \"0 0 31 2 *\"\n  cluster: {cluster}\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
}

fn setup(config: &str, jobs: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    let text: String = jobs.iter().map(|(n, c)| job(n, c)).collect();
    std::fs::write(dir.join("jobs/jobs.yaml"), format!("periodics:\n{text}")).unwrap();
    d
}

const CLUSTERS: &str = "build_clusters:
  build-a: {kind: local, run_as: nobody}
  build-b: {kind: local, run_as: nobody}
  build-c: {kind: local, run_as: nobody}
";

#[test]
fn runs_land_where_an_external_dispatcher_says_and_fall_back_on_any_error() {
    let s = stub(&[
        ("to-b", "build-b"),
        ("to-c", "build-c"),
        ("nowhere", "build-x"),
        ("slow", "build-c"),
    ]);
    let config = format!(
        "scheduler:\n  enabled: true\n  external: {{url: \"http://127.0.0.1:{}/\"}}\n{}",
        s.port,
        CLUSTERS.replace(
            "build-c: {kind: local, run_as: nobody}",
            "build-c: {kind: local, run_as: nobody, max_concurrency: 1}"
        )
    );
    let d = setup(
        &config,
        &[
            ("to-b", "build-a"),
            ("to-c", "build-a"),
            ("unknown-to-it", "build-a"),
            ("nowhere", "build-a"),
            ("later", "build-b"),
        ],
    );
    let jobs = std::fs::read_to_string(d.path().join("jobs/jobs.yaml")).unwrap();
    std::fs::write(
        d.path().join("jobs/jobs.yaml"),
        format!("{jobs}- name: slow\n  cron: \"0 0 31 2 *\"\n  cluster: build-a\n  spec: {{containers: [{{image: x, command: [\"sleep\", \"3\"]}}]}}\n"),
    )
    .unwrap();
    let daemon = start(d.path(), &[]);
    let port = daemon.port;
    let placed = |job: &str| {
        let id = trigger(port, job);
        wait_state(port, &id, "success")
    };
    let run = placed("to-b");
    assert_eq!(run["configured_cluster"], "build-a");
    assert_eq!(run["cluster"], "build-b", "{run}");
    assert_eq!(placed("to-c")["cluster"], "build-c");
    // Asked once: the answer is cached.
    let asked = s.requests.load(Ordering::SeqCst);
    assert_eq!(placed("to-b")["cluster"], "build-b");
    assert_eq!(
        s.requests.load(Ordering::SeqCst),
        asked,
        "not served from the cache"
    );
    // 404 and an alias bosun does not know: the configured cluster.
    assert_eq!(placed("unknown-to-it")["cluster"], "build-a");
    assert_eq!(placed("nowhere")["cluster"], "build-a");
    // The dispatcher down: the configured cluster, no run lost.
    s.down.store(true, Ordering::SeqCst);
    let runs: Vec<String> = (0..5).map(|_| trigger(port, "later")).collect();
    for id in &runs {
        let run = wait_state(port, id, "success");
        assert_eq!(run["cluster"], "build-b", "{run}");
    }
    let (_, metrics) = request(port, "GET", "/metrics", None, None);
    let value = |prefix: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert!(
        value("bosun_scheduler_external_cache_hits") >= 1.0,
        "{metrics}"
    );
    assert!(
        value("bosun_scheduler_external_fallbacks_total{reason=\"status\"}") >= 1.0,
        "{metrics}"
    );
    assert!(
        value("bosun_scheduler_external_fallbacks_total{reason=\"unknown_cluster\"}") >= 1.0,
        "{metrics}"
    );
    assert!(
        value("bosun_scheduler_external_fallbacks_total{reason=\"error\"}") >= 1.0,
        "{metrics}"
    );
    // While it waits for a slot, a run's description says where its
    // cluster came from.
    s.down.store(false, Ordering::SeqCst);
    let first = trigger(port, "slow");
    wait_state(port, &first, "pending");
    let second = trigger(port, "slow");
    let run = wait_state(port, &second, "triggered");
    let desc = run["description"].as_str().unwrap_or_default();
    assert_eq!(run["cluster"], "build-c", "{run}");
    assert!(
        desc.contains(&format!("the dispatcher at http://127.0.0.1:{}/", s.port)),
        "the description says where: {desc}"
    );
}

#[test]
fn bosun_serve_places_runs_by_its_own_plan_and_takes_overrides() {
    let config = format!(
        "scheduler:\n  enabled: true\ndispatcher:\n  relocatable_clusters: [build-a]\n  unit: job\n{CLUSTERS}"
    );
    let d = setup(
        &config,
        &[
            ("r1", "build-a"),
            ("r2", "build-a"),
            ("r3", "build-a"),
            ("pinned", "elsewhere-not-listed"),
        ],
    );
    // `pinned` names no cluster bosun has: write it onto a real one, not
    // relocatable.
    let jobs = std::fs::read_to_string(d.path().join("jobs/jobs.yaml"))
        .unwrap()
        .replace("elsewhere-not-listed", "build-c");
    std::fs::write(d.path().join("jobs/jobs.yaml"), jobs).unwrap();
    std::fs::write(d.path().join("token"), "sesame\n").unwrap();
    let token_file = d.path().join("token");
    let daemon = start(
        d.path(),
        &["--api-token-file", token_file.to_str().unwrap()],
    );
    let port = daemon.port;
    // The plan comes up; every job has a cluster.
    let deadline = Instant::now() + Duration::from_secs(20);
    let plan = loop {
        let (status, body) = request(port, "GET", "/api/v1/dispatch/plan", None, None);
        if status == 200 {
            break json(&body);
        }
        assert!(Instant::now() < deadline, "no plan: {status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let assigned = |plan: &serde_json::Value, job: &str| {
        plan["assignments"][job].as_str().unwrap().to_string()
    };
    assert_eq!(assigned(&plan, "pinned"), "build-c");
    // A lookup as Prow's external strategy asks, with no token.
    let (status, body) = request(
        port,
        "POST",
        "/api/v1/dispatch",
        Some(r#"{"job": "r1"}"#),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["cluster"], assigned(&plan, "r1"));
    let (status, body) = request(
        port,
        "POST",
        "/api/v1/dispatch",
        Some(r#"{"job": "nope"}"#),
        None,
    );
    assert_eq!((status, body.as_str()), (404, "Cluster not found\n"));
    let (status, body) = request(port, "GET", "/api/v1/dispatch/explain?job=r2", None, None);
    assert_eq!(status, 200, "{body}");
    // Runs land where the plan says.
    for j in ["r1", "r2", "r3", "pinned"] {
        let id = trigger_with(port, j, Some("sesame"));
        let run = wait_state(port, &id, "success");
        assert_eq!(
            run["cluster"].as_str().unwrap(),
            assigned(&plan, j),
            "{run}"
        );
    }
    // An override: refused without the token, then r1 forced elsewhere.
    let target = ["build-a", "build-b", "build-c"]
        .into_iter()
        .find(|c| *c != assigned(&plan, "r1"))
        .unwrap();
    let body = format!(
        r#"{{"job": "r1", "cluster": "{target}", "ttl": "2h", "reason": "capacity test", "actor": "alice"}}"#
    );
    let (status, _) = request(
        port,
        "POST",
        "/api/v1/dispatch/overrides",
        Some(&body),
        None,
    );
    assert_eq!(status, 401);
    let (status, created) = request(
        port,
        "POST",
        "/api/v1/dispatch/overrides",
        Some(&body),
        Some("sesame"),
    );
    assert_eq!(status, 201, "{created}");
    let id = json(&created)["id"].as_str().unwrap().to_string();
    let too_long = format!(r#"{{"job": "r1", "cluster": "{target}", "ttl": "25h"}}"#);
    let (status, why) = request(
        port,
        "POST",
        "/api/v1/dispatch/overrides",
        Some(&too_long),
        Some("sesame"),
    );
    assert_eq!(status, 422, "{why}");
    let (_, list) = request(port, "GET", "/api/v1/dispatch/overrides", None, None);
    assert_eq!(json(&list)["overrides"][0]["id"], id, "{list}");
    let (_, explained) = request(port, "GET", "/api/v1/dispatch/explain?job=r1", None, None);
    assert_eq!(json(&explained)["cluster"], target, "{explained}");
    assert!(explained.contains("alice"), "{explained}");
    let run_id = trigger_with(port, "r1", Some("sesame"));
    assert_eq!(wait_state(port, &run_id, "success")["cluster"], target);
    // Cancelled: back to the plan.
    let (status, _) = request(
        port,
        "DELETE",
        &format!("/api/v1/dispatch/overrides/{id}"),
        None,
        Some("sesame"),
    );
    assert_eq!(status, 204);
    let (_, explained) = request(port, "GET", "/api/v1/dispatch/explain?job=r1", None, None);
    assert_eq!(json(&explained)["cluster"], assigned(&plan, "r1"));
    // A file override (`unit: job`): every relocatable job of the file
    // moves, the pinned one stays.
    let body = r#"{"file": "jobs.yaml", "cluster": "build-b", "ttl": "30m", "reason": "file test", "actor": "bob"}"#;
    let (status, created) = request(
        port,
        "POST",
        "/api/v1/dispatch/overrides",
        Some(body),
        Some("sesame"),
    );
    assert_eq!(status, 201, "{created}");
    let (_, now_plan) = request(port, "GET", "/api/v1/dispatch/plan", None, None);
    let now_plan = json(&now_plan);
    for j in ["r1", "r2", "r3"] {
        assert_eq!(assigned(&now_plan, j), "build-b", "{now_plan}");
    }
    assert_eq!(assigned(&now_plan, "pinned"), "build-c");
    let (_, metrics) = request(port, "GET", "/metrics", None, None);
    assert!(
        metrics.contains("bosun_dispatcher_plan_generation"),
        "{metrics}"
    );
}

/// `bosun dispatcher` over `DIR/dispatcher.yaml` and `DIR/jobs`, its plan in
/// `DIR/dispatcher-data`, with `extra` arguments; returns once it has a
/// plan.
fn start_dispatcher(dir: &Path, extra: &[&std::ffi::OsStr]) -> Daemon {
    let log = dir.join("dispatcher.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("dispatcher")
        .arg("--config")
        .arg(dir.join("dispatcher.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("dispatcher-data"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = common::logged_port(&mut child, &log, deadline);
    let dispatcher = Daemon { child, port, log };
    while request(port, "GET", "/readyz", None, None).0 != 200 {
        assert!(Instant::now() < deadline, "the dispatcher made no plan");
        std::thread::sleep(Duration::from_millis(50));
    }
    dispatcher
}

/// Prow's deployment with OpenShift's files: `bosun serve` asks `bosun
/// dispatcher` (`scheduler.external`), which reads `_config.yaml` and
/// `_clusters.yaml`. A run of a job whose `ci-operator.openshift.io/cluster`
/// label names a blocked cluster lands on `_config.yaml`'s `default`; a
/// `periodic-buildNN-upgrade` job's run stays on its blocked cluster.
#[test]
fn a_run_pinned_to_a_blocked_openshift_cluster_lands_on_the_default() {
    let d = setup(CLUSTERS, &[]);
    let dir = d.path();
    let pinned = |name: &str| {
        format!(
            "- name: {name}\n  cron: \"0 0 31 2 *\"\n  cluster: build-c\n  labels:\n    ci-operator.openshift.io/cluster: build-c\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"
        )
    };
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        format!(
            "periodics:\n{}{}",
            pinned("on-c"),
            pinned("periodic-build07-upgrade")
        ),
    )
    .unwrap();
    std::fs::write(dir.join("dispatcher.yaml"), CLUSTERS).unwrap();
    std::fs::write(
        dir.join("_config.yaml"),
        "default: build-a\nbuildFarm:\n  aws:\n    build-a: {}\n    build-b: {}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("_clusters.yaml"),
        "aws:\n- name: build-a\n- name: build-b\n- name: build-c\n  blocked: true\n",
    )
    .unwrap();
    let (config, clusters) = (dir.join("_config.yaml"), dir.join("_clusters.yaml"));
    let dispatcher = start_dispatcher(
        dir,
        &[
            "--openshift-config".as_ref(),
            config.as_os_str(),
            "--openshift-clusters".as_ref(),
            clusters.as_os_str(),
        ],
    );
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "scheduler:\n  enabled: true\n  external: {{url: \"http://127.0.0.1:{}/\"}}\n{CLUSTERS}",
            dispatcher.port
        ),
    )
    .unwrap();
    let daemon = start(dir, &[]);
    let port = daemon.port;
    let run = wait_state(port, &trigger(port, "on-c"), "success");
    assert_eq!(run["configured_cluster"], "build-c", "{run}");
    assert_eq!(run["cluster"], "build-a", "{run}");
    let run = wait_state(port, &trigger(port, "periodic-build07-upgrade"), "success");
    assert_eq!(run["cluster"], "build-c", "{run}");
}
