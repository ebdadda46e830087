//! `bosun dispatcher` as a user runs it: a real process over a job-config
//! tree, answering Prow's external scheduling strategy; a job added to the
//! configuration is placed within seconds without moving any other; the
//! plan survives a restart.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, request};

const CONFIG: &str = "build_clusters:
  build-a: {kind: local, capacity: 100}
  build-b: {kind: local, capacity: 100}
  build-c: {kind: local, capacity: 50}
dispatcher:
  relocatable_clusters: [default]
";

/// A job file of `n` periodics named `PREFIX-i`, none writing a cluster:
/// all relocatable, one unit per file.
fn jobs(prefix: &str, n: usize) -> String {
    let mut s = String::from("periodics:\n");
    for i in 0..n {
        s.push_str(&format!(
            "- name: {prefix}-{i}\n  interval: 1h\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"
        ));
    }
    s
}

struct Dispatcher {
    child: Child,
    port: u16,
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, n: usize) -> Dispatcher {
    start_in(dir, &dir.join("data"), n)
}

fn start_in(dir: &Path, data: &Path, n: usize) -> Dispatcher {
    start_with(dir, data, n, &[])
}

/// [`start_in`] with `extra` arguments.
fn start_with(dir: &Path, data: &Path, n: usize, extra: &[&std::ffi::OsStr]) -> Dispatcher {
    let log = dir.join(format!("dispatcher-{n}.log"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("dispatcher")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--demand")
        .arg(dir.join("demand.json"))
        .arg("--data-dir")
        .arg(data)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = common::logged_port(&mut child, &log, deadline);
    while request(port, "GET", "/readyz", None, None).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "no plan:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Dispatcher { child, port }
}

/// The plan in force: job -> cluster.
fn assignments(port: u16) -> serde_json::Map<String, serde_json::Value> {
    let (status, body) = request(port, "GET", "/plan", None, None);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["assignments"].as_object().unwrap().clone()
}

fn cluster_of(port: u16, job: &str) -> (u16, String) {
    request(
        port,
        "POST",
        "/",
        Some(&format!(r#"{{"job": "{job}"}}"#)),
        None,
    )
}

#[test]
fn the_dispatcher_answers_places_new_jobs_alone_and_keeps_its_plan() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    let mut demand = serde_json::Map::new();
    for (i, file) in ["alpha", "beta", "gamma", "delta", "epsilon"]
        .iter()
        .enumerate()
    {
        std::fs::write(dir.join(format!("jobs/{file}.yaml")), jobs(file, 3)).unwrap();
        for j in 0..3 {
            demand.insert(format!("{file}-{j}"), (10 * (i + 1)).into());
        }
    }
    std::fs::write(
        dir.join("demand.json"),
        serde_json::Value::Object(demand).to_string(),
    )
    .unwrap();

    let first = start(dir, 0);
    let plan = assignments(first.port);
    assert_eq!(plan.len(), 15, "{plan:?}");
    // A file's jobs are one unit: one cluster.
    for file in ["alpha", "beta", "gamma", "delta", "epsilon"] {
        let clusters: std::collections::BTreeSet<&str> = (0..3)
            .map(|j| plan[&format!("{file}-{j}")].as_str().unwrap())
            .collect();
        assert_eq!(clusters.len(), 1, "{file}: {plan:?}");
        let c = *clusters.iter().next().unwrap();
        assert!(["build-a", "build-b", "build-c"].contains(&c), "{c}");
    }
    // Prow's external strategy, a rehearsal, and an unknown job.
    let (status, body) = cluster_of(first.port, "beta-1");
    assert_eq!(status, 200);
    assert_eq!(
        body,
        format!(r#"{{"cluster":"{}"}}"#, plan["beta-1"].as_str().unwrap())
    );
    assert_eq!(cluster_of(first.port, "rehearse-9-beta-1").1, body);
    assert_eq!(
        cluster_of(first.port, "zeta-0"),
        (404, "Cluster not found\n".to_string())
    );

    // A job file added while it runs: placed within 5 s, nothing else moves.
    let added = Instant::now();
    std::fs::write(dir.join("jobs/zeta.yaml"), jobs("zeta", 2)).unwrap();
    loop {
        if cluster_of(first.port, "zeta-0").0 == 200 {
            break;
        }
        assert!(
            added.elapsed() < Duration::from_secs(5),
            "the new job was not placed within 5 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = assignments(first.port);
    for (job, cluster) in &plan {
        assert_eq!(&after[job], cluster, "{job} moved");
    }
    assert_eq!(after.len(), 17);
    assert_eq!(after["zeta-0"], after["zeta-1"], "one unit");
    drop(first);

    // Restarted on the same data directory: the same plan.
    let second = start(dir, 1);
    assert_eq!(assignments(second.port), after);
    let plan_file = std::fs::read_to_string(dir.join("data/dispatcher-plan.json")).unwrap();
    assert!(plan_file.contains("\"zeta-1\""), "{plan_file}");
}

/// The plan file written into a watched directory (the config file's) does
/// not make the dispatcher plan again: its own writes are not changes.
#[test]
fn the_plan_file_in_a_watched_directory_does_not_replan_itself() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("jobs/alpha.yaml"), jobs("alpha", 2)).unwrap();
    std::fs::write(dir.join("demand.json"), r#"{"alpha-0": 3}"#).unwrap();
    let dispatcher = start_in(dir, dir, 0);
    let generation = |port| {
        let (_, body) = request(port, "GET", "/plan", None, None);
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["generation"].clone()
    };
    let first = generation(dispatcher.port);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(generation(dispatcher.port), first);
    let log = std::fs::read_to_string(dir.join("dispatcher-0.log")).unwrap();
    assert_eq!(log.matches("plan in force").count(), 1, "{log}");
}

/// `bosun dispatch override` against the standalone service: a drain moves
/// every unit off a cluster (the plan itself unchanged), is listed, and is
/// cancelled back to the plan; the overrides survive a restart.
#[test]
fn overrides_drain_a_cluster_until_cancelled_and_survive_a_restart() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    for f in 0..6 {
        std::fs::write(
            dir.join(format!("jobs/f{f}.yaml")),
            jobs(&format!("f{f}"), 2),
        )
        .unwrap();
    }
    std::fs::write(dir.join("demand.json"), "{}").unwrap();
    let dispatcher = start(dir, 12);
    let port = dispatcher.port;
    let plan = assignments(port);
    let on_a = |a: &serde_json::Map<String, serde_json::Value>| {
        a.values().filter(|c| *c == "build-a").count()
    };
    assert!(on_a(&plan) > 0, "{plan:?}");
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args(["dispatch", "override"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let server = format!("http://127.0.0.1:{port}");
    let (ok, created, err) = cli(&[
        "create",
        "--server",
        &server,
        "--drain",
        "build-a",
        "--ttl",
        "2h",
        "--reason",
        "maintenance",
        "--actor",
        "ops",
    ]);
    assert!(ok, "{err}");
    let id = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for job in plan.keys() {
        let (status, body) = cluster_of(port, job);
        assert_eq!(status, 200);
        assert!(
            !body.contains("build-a"),
            "{job} still on the drained cluster: {body}"
        );
    }
    // An ineligible or too long override is refused, saying why.
    let (ok, _, err) = cli(&[
        "create",
        "--server",
        &server,
        "--job",
        "f0-0",
        "--cluster",
        "nowhere",
        "--ttl",
        "1h",
        "--reason",
        "x",
        "--actor",
        "ops",
    ]);
    assert!(
        !ok && err.contains("422") && err.contains("nowhere"),
        "{err}"
    );
    let (ok, _, err) = cli(&[
        "create", "--server", &server, "--drain", "build-b", "--ttl", "48h", "--reason", "x",
        "--actor", "ops",
    ]);
    assert!(!ok && err.contains("24h"), "{err}");
    // The plan in force says why.
    let (_, body) = request(port, "GET", "/plan", None, None);
    assert!(
        body.contains("drain"),
        "the plan in force shows the drain: {body}"
    );
    drop(dispatcher);
    let dispatcher = start(dir, 12);
    let port = dispatcher.port;
    let server = format!("http://127.0.0.1:{port}");
    let (ok, listed, err) = cli(&["list", "--server", &server]);
    assert!(ok && listed.contains(&id), "{listed} {err}");
    let (ok, _, err) = cli(&["cancel", "--server", &server, &id]);
    assert!(ok, "{err}");
    assert_eq!(on_a(&assignments(port)), on_a(&plan));
}

/// With OpenShift's files, a job whose `ci-operator.openshift.io/cluster`
/// label names a cluster `_clusters.yaml` blocks is answered
/// `_config.yaml`'s `default`, and explained so; a
/// `periodic-buildNN-upgrade` job keeps its blocked cluster.
#[test]
fn a_job_pinned_to_a_blocked_cluster_is_answered_the_openshift_default() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  build-a: {kind: local}\n  build-b: {kind: local}\n  build-c: {kind: local}\n",
    )
    .unwrap();
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
    let pinned = |name: &str| {
        format!(
            "- name: {name}\n  interval: 1h\n  cluster: build-c\n  labels:\n    ci-operator.openshift.io/cluster: build-c\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"
        )
    };
    std::fs::write(
        dir.join("jobs/org-repo-main-periodics.yaml"),
        format!(
            "periodics:\n{}{}",
            pinned("periodic-on-c"),
            pinned("periodic-build07-upgrade")
        ),
    )
    .unwrap();
    std::fs::write(dir.join("demand.json"), "{}").unwrap();
    let config = dir.join("_config.yaml");
    let clusters = dir.join("_clusters.yaml");
    let dispatcher = start_with(
        dir,
        &dir.join("data"),
        0,
        &[
            "--openshift-config".as_ref(),
            config.as_os_str(),
            "--openshift-clusters".as_ref(),
            clusters.as_os_str(),
        ],
    );
    let port = dispatcher.port;
    assert_eq!(
        cluster_of(port, "periodic-on-c"),
        (200, r#"{"cluster":"build-a"}"#.to_string())
    );
    assert_eq!(
        cluster_of(port, "rehearse-7-periodic-on-c"),
        (200, r#"{"cluster":"build-a"}"#.to_string())
    );
    let (status, body) = request(port, "GET", "/explain?job=periodic-on-c", None, None);
    assert_eq!(status, 200, "{body}");
    let explained: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rule = explained["rule"].as_str().unwrap();
    assert_eq!(
        rule,
        "openshift rule 5: pinned to build-c, which is blocked: sent to _config.yaml's default build-a"
    );
    assert!(
        explained["explanation"]
            .as_str()
            .unwrap()
            .contains("sent to _config.yaml's default build-a"),
        "{body}"
    );
    // The exception stays on its blocked cluster.
    assert_eq!(
        cluster_of(port, "periodic-build07-upgrade"),
        (200, r#"{"cluster":"build-c"}"#.to_string())
    );
}
