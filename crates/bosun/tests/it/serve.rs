//! `bosun serve` as a real process: runs triggered over the API run as local
//! processes and reach their final states; errors are clear 4xx answers; the
//! token guards mutating requests; a restarted daemon finishes what the killed
//! one started.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::wait_state;
use crate::common::{json, request, request_full, start, tmp};

const CONFIG: &str =
    "plank:\n  max_concurrency: 4\nbuild_clusters:\n  default: {kind: local, max_concurrency: 2}\n";
const JOBS: &str = r#"
periodics:
- name: ok
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  spec: {containers: [{image: x, command: ["sh", "-c", "echo hi $JOB_NAME"]}]}
- name: bad
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  spec: {containers: [{image: x, command: ["sh", "-c", "exit 7"]}]}
- name: slow
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  spec: {containers: [{image: x, command: ["sh", "-c", "sleep 2; echo slept"]}]}
- name: decorated
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  decoration_config:
    utility_images: {clonerefs: a, initupload: b, entrypoint: c, sidecar: d}
    gcs_configuration: {bucket: b, path_strategy: explicit}
  spec: {containers: [{image: x, command: ["true"]}]}
- name: two-containers
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  decoration_config:
    utility_images: {clonerefs: a, initupload: b, entrypoint: c, sidecar: d}
    gcs_configuration: {bucket: b, path_strategy: explicit}
  spec: {containers: [{name: a, image: x, command: ["true"]}, {name: b, image: x, command: ["true"]}]}
- name: no-command
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  spec: {containers: [{image: x}]}
presubmits:
  o/r:
  - name: ok
    spec: {containers: [{image: x, command: ["true"]}]}
"#;

fn setup(dir: &Path) {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), JOBS).unwrap();
}

fn trigger(port: u16, body: &str) -> String {
    let (status, body) = request(port, "POST", "/api/v1/runs", Some(body), None);
    assert_eq!(status, 201, "{body}");
    json(&body)["id"].as_str().unwrap().to_string()
}

/// The `prowjobs` count of `job`'s runs in `state` (summed over the other
/// labels) in the daemon's `/metrics`; none without a series.
fn prowjobs(port: u16, job: &str, state: &str) -> Option<u64> {
    let (status, text) = request(port, "GET", "/metrics", None, None);
    assert_eq!(status, 200, "{text}");
    let (job, state) = (
        format!(",job_name=\"{job}\","),
        format!(",state=\"{state}\","),
    );
    text.lines()
        .filter(|l| l.starts_with("prowjobs{") && l.contains(&job) && l.contains(&state))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .reduce(|a, b| a + b)
}

/// Waits until `prowjobs(port, job, state)` is `want`.
fn wait_prowjobs(port: u16, job: &str, state: &str, want: Option<u64>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = prowjobs(port, job, state);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "prowjobs {job} {state}: {got:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn runs_reach_their_final_states() {
    let (_d, dir) = tmp();
    setup(&dir);
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    let ok = trigger(port, r#"{"job": "ok", "type": "periodic"}"#);
    let bad = trigger(port, r#"{"job": "bad"}"#);
    let dec = trigger(port, r#"{"job": "decorated"}"#);
    let run = wait_state(port, &ok, |s| s == "success");
    assert_eq!(run["description"], "Job succeeded.");
    assert_eq!(run["cluster"], "default");
    assert_eq!(
        wait_state(port, &bad, |s| s == "failure")["description"],
        "Job failed (exit code 7)."
    );
    // Decorated, without refs: entrypoint runs the command in the run's
    // directory.
    assert_eq!(
        wait_state(port, &dec, |s| s == "success")["description"],
        "Job succeeded."
    );
    let (status, log) = request(port, "GET", &format!("/api/v1/runs/{ok}/log"), None, None);
    assert_eq!((status, log.as_str()), (200, "hi ok\n"));
    let (_, list) = request(port, "GET", "/api/v1/runs?state=success", None, None);
    let mut succeeded: Vec<String> = json(&list)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["job"].as_str().unwrap().to_string())
        .collect();
    succeeded.sort();
    assert_eq!(succeeded, ["decorated", "ok"]);
    let (_, metrics) = request(port, "GET", "/metrics", None, None);
    assert!(
        metrics.contains("job_name=\"bad\",type=\"periodic\",state=\"failure\""),
        "{metrics}"
    );
    // Retained runs by state: one `ok` run that succeeded.
    let retained = "prowjobs{job_namespace=\"default\",job_name=\"ok\",type=\"periodic\",state=\"success\",org=\"\",repo=\"\",base_ref=\"\",cluster=\"default\",retest=\"false\"} 1";
    assert!(metrics.lines().any(|l| l == retained), "{metrics}");
}

/// A local job that runs on is committed `pending` while it runs, with
/// nothing else happening: no job's end comes to bring the pass that
/// settles its start, so a timer does.
#[test]
fn a_running_local_job_is_pending_before_it_ends() {
    let (_d, dir) = tmp();
    setup(&dir);
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    let slow = trigger(port, r#"{"job": "slow"}"#);
    let run = wait_state(port, &slow, |s| !matches!(s, "triggered" | "scheduling"));
    assert_eq!(run["state"], "pending", "{run}");
    assert_eq!(run["cluster"], "default", "{run}");
    assert_eq!(
        wait_state(port, &slow, |s| s != "pending")["state"],
        "success"
    );
}

#[test]
fn bad_requests_get_clear_answers_and_store_nothing() {
    let (_d, dir) = tmp();
    setup(&dir);
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    assert_eq!(
        request(
            port,
            "POST",
            "/api/v1/runs",
            Some(r#"{"job": "nope"}"#),
            None
        )
        .0,
        404
    );
    let (status, body) = request(port, "POST", "/api/v1/runs", Some(r#"{"job": "ok"}"#), None);
    assert_eq!(status, 409, "{body}");
    assert_eq!(json(&body)["candidates"].as_array().unwrap().len(), 2);
    let (status, body) = request(
        port,
        "POST",
        "/api/v1/runs",
        Some(r#"{"job": "ok", "type": "presubmit"}"#),
        None,
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        request(port, "POST", "/api/v1/runs", Some("{not json"), None).0,
        400
    );
    assert_eq!(
        request(
            port,
            "POST",
            "/api/v1/runs",
            Some(r#"{"job": "ok", "color": 1}"#),
            None
        )
        .0,
        400
    );
    let (_, list) = request(port, "GET", "/api/v1/runs", None, None);
    assert!(
        json(&list)["runs"].as_array().unwrap().is_empty(),
        "nothing stored"
    );
    let ok = trigger(
        port,
        r#"{"job": "ok", "type": "presubmit", "refs": {"org": "o", "repo": "r", "base_ref": "main", "pulls": [{"number": 1, "author": "a", "sha": "abc"}]}}"#,
    );
    wait_state(port, &ok, |s| s == "success");
    assert_eq!(
        request(port, "GET", "/api/v1/runs/missing", None, None).0,
        404
    );
}

#[test]
fn tokens_guard_mutations_and_exposed_addresses_need_one() {
    let (_d, dir) = tmp();
    setup(&dir);
    std::fs::write(dir.join("token"), "s3cret\n").unwrap();
    let token_file = dir.join("token").display().to_string();
    let daemon = start(&dir, &["--api-token-file", &token_file]);
    let port = daemon.port;
    assert_eq!(
        request(
            port,
            "POST",
            "/api/v1/runs",
            Some(r#"{"job": "bad"}"#),
            None
        )
        .0,
        401
    );
    assert_eq!(
        request(
            port,
            "POST",
            "/api/v1/runs",
            Some(r#"{"job": "bad"}"#),
            Some("wrong")
        )
        .0,
        401
    );
    assert_eq!(
        request(
            port,
            "POST",
            "/api/v1/runs",
            Some(r#"{"job": "bad"}"#),
            Some("s3cret")
        )
        .0,
        201
    );
    assert_eq!(
        request(port, "GET", "/api/v1/runs", None, None).0,
        200,
        "reads need no token"
    );
    // A non-loopback address without a token is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.join("data2"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing to serve a non-loopback address")
    );
}

#[test]
fn abort_and_a_restarted_daemon_finishes_the_runs() {
    let (_d, dir) = tmp();
    setup(&dir);
    let (slow, aborted) = {
        let daemon = start(&dir, &[]);
        let port = daemon.port;
        let slow = trigger(port, r#"{"job": "slow"}"#);
        let aborted = trigger(port, r#"{"job": "slow"}"#);
        wait_state(port, &slow, |s| s == "pending");
        wait_state(port, &aborted, |s| s == "pending");
        assert_eq!(
            request(
                port,
                "POST",
                &format!("/api/v1/runs/{aborted}/abort"),
                None,
                None
            )
            .0,
            202
        );
        assert_eq!(
            wait_state(port, &aborted, |s| s == "aborted")["description"],
            "Run aborted."
        );
        (slow, aborted)
        // The daemon is killed (SIGKILL) here, while `slow` runs.
    };
    let daemon = start(&dir, &[]);
    let run = wait_state(daemon.port, &slow, |s| s == "success");
    assert_eq!(run["description"], "Job succeeded.");
    // `prowjobs` was seeded from the store at start (the aborted run, the
    // pending one), then followed the pending run to its end.
    wait_prowjobs(daemon.port, "slow", "success", Some(1));
    assert_eq!(prowjobs(daemon.port, "slow", "aborted"), Some(1));
    assert_eq!(prowjobs(daemon.port, "slow", "pending"), None);
    let (_, log) = request(
        daemon.port,
        "GET",
        &format!("/api/v1/runs/{slow}/log"),
        None,
        None,
    );
    assert_eq!(log, "slept\n");
    assert_eq!(
        request(
            daemon.port,
            "POST",
            &format!("/api/v1/runs/{aborted}/abort"),
            None,
            None
        )
        .0,
        409
    );
    let (_, list) = request(daemon.port, "GET", "/api/v1/runs", None, None);
    assert_eq!(
        json(&list)["runs"].as_array().unwrap().len(),
        2,
        "no run was duplicated"
    );
}

#[test]
fn a_locked_store_answers_503_with_retry_after() {
    let (_d, dir) = tmp();
    setup(&dir);
    let daemon = start(&dir, &[]);
    let mut other = rusqlite_lock(&dir.join("data/bosun.db"));
    let (status, head, body) = request_full(
        daemon.port,
        "POST",
        "/api/v1/runs",
        Some(r#"{"job": "bad"}"#),
        None,
    );
    assert_eq!(status, 503, "{body}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 5"),
        "{head}"
    );
    assert!(body.contains("the store cannot commit"), "{body}");
    other.kill().unwrap();
    other.wait().unwrap();
    assert_eq!(
        request(
            daemon.port,
            "POST",
            "/api/v1/runs",
            Some(r#"{"job": "bad"}"#),
            None
        )
        .0,
        201
    );
    let (_, list) = request(daemon.port, "GET", "/api/v1/runs", None, None);
    assert_eq!(
        json(&list)["runs"].as_array().unwrap().len(),
        1,
        "the refused run was not half-written"
    );
}

/// Holds an exclusive lock on the database (as another process could) until dropped.
fn rusqlite_lock(path: &Path) -> Child {
    // sqlite3's shell is not installed everywhere; a python3 one-liner holds the lock.
    let child = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3,sys,time\nc=sqlite3.connect({:?},isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\nprint('locked',flush=True)\ntime.sleep(60)",
            path.display().to_string()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("python3 could not run ({e}): install it with `apt-get install -y python3`, or run the tests with tools/test")
        });
    let mut child = child;
    let mut buf = [0u8; 7];
    child.stdout.as_mut().unwrap().read_exact(&mut buf).unwrap();
    assert_eq!(&buf[..6], b"locked");
    child
}

#[test]
fn kill_9_three_times_loses_and_duplicates_nothing() {
    let (_d, dir) = tmp();
    setup(&dir);
    let mut ids = Vec::new();
    // 3 in CI; `BOSUN_KILL_CYCLES=30 cargo test -p bosun --test it serve::kill_9`
    // by hand.
    let cycles: u64 = std::env::var("BOSUN_KILL_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for cycle in 0..cycles {
        let daemon = start(&dir, &[]);
        for job in ["slow", "ok", "bad"] {
            ids.push(trigger(
                daemon.port,
                &format!(r#"{{"job": "{job}", "type": "periodic"}}"#),
            ));
        }
        // Kill at a different point of the runs' lives each cycle.
        std::thread::sleep(Duration::from_millis(50 + (cycle * 137) % 900));
        // Dropping the daemon kills it with SIGKILL, mid-run.
    }
    let daemon = start(&dir, &[]);
    for id in &ids {
        let run = wait_state(daemon.port, id, |s| {
            ["success", "failure", "error", "aborted"].contains(&s)
        });
        let want = match run["job"].as_str().unwrap() {
            "bad" => "failure",
            _ => "success",
        };
        assert_eq!(run["state"], want, "{run}");
    }
    let (_, list) = request(daemon.port, "GET", "/api/v1/runs?limit=1000", None, None);
    assert_eq!(
        json(&list)["runs"].as_array().unwrap().len(),
        ids.len(),
        "no run duplicated or lost"
    );
}

#[test]
fn bosun_run_and_runs_use_the_api() {
    let (_d, dir) = tmp();
    setup(&dir);
    let daemon = start(&dir, &[]);
    let server = format!("http://127.0.0.1:{}", daemon.port);
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args([
            "run", "ok", "--type", "periodic", "--follow", "--server", &server,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("hi ok\n") && stdout.trim_end().ends_with("success"),
        "{stdout}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["run", "bad", "--follow", "--server", &server])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["runs", "--server", &server])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 3, "header and two runs: {stdout}");
    assert!(stdout.contains("Job failed (exit code 7)."), "{stdout}");
}

#[test]
fn running_timeout_aborts_and_the_sinker_deletes_old_runs_but_the_latest() {
    let (_d, dir) = tmp();
    setup(&dir);
    std::fs::write(
        dir.join("config.yaml"),
        "plank:\n  pod_running_timeout: 1s\nsinker:\n  max_prowjob_age: 1s\n  resync_period: 1s\n",
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    let slow = trigger(port, r#"{"job": "slow"}"#);
    let run = wait_state(port, &slow, |s| s == "aborted");
    assert_eq!(run["description"], "Pod running timeout.");
    // Two runs of `ok`: once they are older than max_prowjob_age, the sinker
    // deletes the older one with its log and keeps the latest of the periodic.
    let first = trigger(port, r#"{"job": "ok", "type": "periodic"}"#);
    wait_state(port, &first, |s| s == "success");
    let second = trigger(port, r#"{"job": "ok", "type": "periodic"}"#);
    wait_state(port, &second, |s| s == "success");
    let deadline = Instant::now() + Duration::from_secs(20);
    while request(port, "GET", &format!("/api/v1/runs/{first}"), None, None).0 != 404 {
        assert!(
            Instant::now() < deadline,
            "the sinker never deleted the old run"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        request(port, "GET", &format!("/api/v1/runs/{second}"), None, None).0,
        200
    );
    // `prowjobs` lost the deleted run.
    wait_prowjobs(port, "ok", "success", Some(1));
    assert_eq!(prowjobs(port, "slow", "aborted"), Some(1));
    assert!(
        !dir.join(format!("data/runs/default/{first}.log")).exists()
            && !dir.join(format!("data/runs/default/{first}")).exists(),
        "its log and directory went too"
    );
    assert!(dir.join(format!("data/runs/default/{second}.log")).exists());
}

#[test]
fn job_and_queue_limits_hold_through_the_daemon() {
    let (_d, dir) = tmp();
    setup(&dir);
    std::fs::write(
        dir.join("config.yaml"),
        "plank:\n  job_queue_capacities: {q: 1}\nbuild_clusters:\n  default: {kind: local, max_concurrency: 8}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/limits.yaml"),
        r#"
periodics:
- name: one-at-a-time
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  max_concurrency: 1
  spec: {containers: [{image: x, command: ["sh", "-c", "sleep 0.4"]}]}
- name: queued-a
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  job_queue_name: q
  spec: {containers: [{image: x, command: ["sh", "-c", "sleep 0.4"]}]}
- name: queued-b
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  job_queue_name: q
  spec: {containers: [{image: x, command: ["sh", "-c", "sleep 0.4"]}]}
"#,
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    let mut ids = Vec::new();
    for job in [
        "one-at-a-time",
        "one-at-a-time",
        "one-at-a-time",
        "queued-a",
        "queued-b",
        "queued-a",
    ] {
        ids.push(trigger(port, &format!(r#"{{"job": "{job}"}}"#)));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut max_job, mut max_queue) = (0, 0);
    loop {
        let (_, body) = request(
            port,
            "GET",
            "/api/v1/runs?state=pending&limit=100",
            None,
            None,
        );
        let pending = json(&body)["runs"].as_array().unwrap().clone();
        let count = |pred: &dyn Fn(&str) -> bool| {
            pending
                .iter()
                .filter(|r| pred(r["job"].as_str().unwrap()))
                .count()
        };
        max_job = max_job.max(count(&|j| j == "one-at-a-time"));
        max_queue = max_queue.max(count(&|j| j.starts_with("queued-")));
        let (_, body) = request(port, "GET", "/api/v1/runs?active=true&limit=1", None, None);
        if json(&body)["runs"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "runs did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!((max_job, max_queue), (1, 1), "limits exceeded");
    for id in &ids {
        assert_eq!(
            wait_state(port, id, |s| s != "triggered" && s != "pending")["state"],
            "success"
        );
    }
    // FIFO: the runs of one job started in the order they were created.
    let mut starts: Vec<(jiff::Timestamp, String)> = ids[..3]
        .iter()
        .map(|id| {
            let (_, body) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
            let run = json(&body);
            (
                run["pending_at"].as_str().unwrap().parse().unwrap(),
                id.clone(),
            )
        })
        .collect();
    starts.sort();
    assert_eq!(
        starts.iter().map(|(_, id)| id.clone()).collect::<Vec<_>>(),
        ids[..3].to_vec()
    );
}

#[test]
fn periodics_fire_on_their_own_once_per_tick() {
    let (_d, dir) = tmp();
    setup(&dir);
    std::fs::write(
        dir.join("jobs/every-second.yaml"),
        "periodics:\n- name: tick\n  cron: \"* * * * * *\"\n  concurrency_policy: allow\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n- name: at-once\n  interval: 1h\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    std::thread::sleep(Duration::from_millis(3500));
    let (_, body) = request(
        daemon.port,
        "GET",
        "/api/v1/runs?job=tick&limit=1000",
        None,
        None,
    );
    let runs = json(&body)["runs"].as_array().unwrap().clone();
    assert!(runs.len() >= 2, "{runs:?}");
    let mut ticks: Vec<String> = runs
        .iter()
        .map(|r| r["scheduled_at"].as_str().unwrap().to_string())
        .collect();
    let n = ticks.len();
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), n, "one run per tick");
    assert!(
        ticks.iter().all(|t| !t.contains('.')),
        "ticks are whole seconds: {ticks:?}"
    );
    // An interval periodic that never ran runs at once, as in Prow.
    let (_, body) = request(daemon.port, "GET", "/api/v1/runs?job=at-once", None, None);
    assert_eq!(json(&body)["runs"].as_array().unwrap().len(), 1);
}

#[test]
fn a_long_queue_on_one_cluster_never_holds_back_another() {
    let (_d, dir) = tmp();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  busy: {kind: local, max_concurrency: 1}\n  free: {kind: local, max_concurrency: 1}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        r#"
periodics:
- name: hog
  cron: "0 0 31 2 *"
  cluster: busy
  spec: {containers: [{image: x, command: ["sleep", "30"]}]}
- name: quick
  cron: "0 0 31 2 *"
  cluster: free
  spec: {containers: [{image: x, command: ["true"]}]}
"#,
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    // More waiting runs on `busy` than a controller pass reads.
    let hogs: Vec<String> = (0..300)
        .map(|_| trigger(port, r#"{"job": "hog"}"#))
        .collect();
    let quick = trigger(port, r#"{"job": "quick"}"#);
    let run = wait_state(port, &quick, |s| s == "success");
    assert_eq!(run["cluster"], "free");
    // Aborting a run deep in the queue acts at once.
    let last = hogs.last().unwrap();
    let (status, _) = request(
        port,
        "POST",
        &format!("/api/v1/runs/{last}/abort"),
        None,
        None,
    );
    assert_eq!(status, 202);
    wait_state(port, last, |s| s == "aborted");
    // Only one hog runs at a time.
    let (_, body) = request(
        port,
        "GET",
        "/api/v1/runs?job=hog&state=pending&limit=1000",
        None,
        None,
    );
    assert_eq!(json(&body)["runs"].as_array().unwrap().len(), 1, "{body}");
    let first = &hogs[0];
    request(
        port,
        "POST",
        &format!("/api/v1/runs/{first}/abort"),
        None,
        None,
    );
    wait_state(port, first, |s| s == "aborted");
}

fn periodics_list(port: u16) -> Vec<serde_json::Value> {
    let (status, body) = request(port, "GET", "/api/v1/periodics", None, None);
    assert_eq!(status, 200, "{body}");
    json(&body)["periodics"].as_array().unwrap().clone()
}

fn find_periodic(port: u16, identity: &str) -> Option<serde_json::Value> {
    periodics_list(port)
        .into_iter()
        .find(|p| p["identity"] == identity)
}

/// Waits until `cond` holds for the config status (reloads are asynchronous).
fn wait_config(
    port: u16,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = request(port, "GET", "/api/v1/config/status", None, None);
        let v = json(&body);
        if cond(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn metric(port: u16, name_and_labels: &str) -> Option<f64> {
    let (_, body) = request(port, "GET", "/metrics", None, None);
    body.lines()
        .find(|l| l.starts_with(name_and_labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn config_changes_apply_while_running_and_a_broken_config_keeps_the_last_good_one() {
    let (_d, dir) = tmp();
    setup(&dir);
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    assert!(find_periodic(port, "nightly").is_none());
    let v0 = wait_config(port, "initial", |v| v["ok"] == true)["version"]
        .as_u64()
        .unwrap();

    // Add.
    std::fs::write(
        dir.join("jobs/more.yaml"),
        "periodics:\n- name: nightly\n  cron: \"0 3 * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let v1 = wait_config(port, "add", |v| {
        v["version"].as_u64() > Some(v0) && v["ok"] == true
    });
    let p = find_periodic(port, "nightly").expect("added");
    assert_eq!(p["schedule"], "0 3 * * *");
    let next = p["next_fire"].as_str().unwrap().to_string();
    assert!(next.ends_with("T03:00:00Z"), "{next}");

    // Change: rescheduled.
    std::fs::write(
        dir.join("jobs/more.yaml"),
        "periodics:\n- name: nightly\n  cron: \"30 4 * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let v2 = wait_config(port, "change", |v| {
        v["version"].as_u64() > v1["version"].as_u64()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = find_periodic(port, "nightly").unwrap();
        if p["next_fire"]
            .as_str()
            .is_some_and(|n| n.ends_with("T04:30:00Z"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "never rescheduled: {p}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Break: the last good configuration stays in force, the error is reported.
    std::fs::write(
        dir.join("jobs/more.yaml"),
        "periodics:\n- name: nightly\n  cron: \"99 4 * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let broken = wait_config(port, "break", |v| v["ok"] == false);
    assert_eq!(
        broken["version"], v2["version"],
        "the snapshot in force did not change"
    );
    let errors = broken["errors"].as_array().unwrap();
    assert!(
        errors.iter().any(|e| {
            let e = e.as_str().unwrap();
            e.contains("more.yaml:3") && e.contains("nightly")
        }),
        "the error names the file, line and job: {errors:?}"
    );
    assert_eq!(
        find_periodic(port, "nightly").unwrap()["schedule"],
        "30 4 * * *"
    );
    assert_eq!(
        metric(port, "bosun_config_last_reload_successful"),
        Some(0.0)
    );
    assert!(metric(port, "bosun_config_reloads_total{result=\"error\"}").unwrap() >= 1.0);
    // A run of a job still works while the config is broken.
    let id = trigger(port, r#"{"job": "ok", "type": "periodic"}"#);
    wait_state(port, &id, |s| s == "success");

    // Fix, then remove.
    std::fs::remove_file(dir.join("jobs/more.yaml")).unwrap();
    wait_config(port, "fix", |v| {
        v["ok"] == true && v["version"].as_u64() > v2["version"].as_u64()
    });
    assert!(find_periodic(port, "nightly").is_none(), "removed");
    assert_eq!(
        metric(port, "bosun_config_last_reload_successful"),
        Some(1.0)
    );

    // SIGHUP reloads even without a change.
    let pid = rustix::process::Pid::from_raw(daemon.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    wait_config(port, "SIGHUP", |v| v["last_attempt_reason"] == "SIGHUP");
}

#[test]
fn a_configmap_style_symlink_swap_is_a_change() {
    let (_d, dir) = tmp();
    setup(&dir);
    // A job-config directory laid out as Kubernetes mounts a ConfigMap:
    // cm-jobs.yaml -> ..data/cm-jobs.yaml, ..data -> ..v1.
    let cm = dir.join("cm");
    std::fs::create_dir_all(cm.join("..v1")).unwrap();
    std::fs::write(
        cm.join("..v1/cm-jobs.yaml"),
        "periodics:\n- name: from-cm\n  cron: \"0 1 * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("..v1", cm.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/cm-jobs.yaml", cm.join("cm-jobs.yaml")).unwrap();
    let daemon = start(&dir, &["--job-config", cm.to_str().unwrap()]);
    let port = daemon.port;
    assert_eq!(
        find_periodic(port, "from-cm").unwrap()["schedule"],
        "0 1 * * *"
    );
    // The update: a new directory, a new `..data` link renamed over the old one.
    std::fs::create_dir_all(cm.join("..v2")).unwrap();
    std::fs::write(
        cm.join("..v2/cm-jobs.yaml"),
        "periodics:\n- name: from-cm\n  cron: \"0 2 * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("..v2", cm.join("..data_tmp")).unwrap();
    std::fs::rename(cm.join("..data_tmp"), cm.join("..data")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while find_periodic(port, "from-cm").unwrap()["schedule"] != "0 2 * * *" {
        assert!(Instant::now() < deadline, "the swap was not picked up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn periodics_can_be_listed_triggered_paused_and_resumed() {
    let (_d, dir) = tmp();
    setup(&dir);
    std::fs::write(
        dir.join("jobs/every-second.yaml"),
        "periodics:\n- name: tick\n  cron: \"* * * * * *\"\n  concurrency_policy: allow\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let mut daemon = start(&dir, &[]);
    let port = daemon.port;
    let all = periodics_list(port);
    assert!(all
        .iter()
        .any(|p| p["identity"] == "ok" && p["paused"] == false));
    // Trigger: a run now, with no tick.
    let (status, body) = request(port, "POST", "/api/v1/periodics/ok/trigger", None, None);
    assert_eq!(status, 201, "{body}");
    let run = json(&body);
    assert!(run["scheduled_at"].is_null());
    wait_state(port, run["id"].as_str().unwrap(), |s| s == "success");
    let p = find_periodic(port, "ok").unwrap();
    assert_eq!(p["last_run"]["id"], run["id"]);
    assert_eq!(
        request(port, "POST", "/api/v1/periodics/nope/trigger", None, None).0,
        404
    );

    // The per-second periodic fires; its gauges and the lateness histogram show it.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(metric(
        port,
        "bosun_periodic_last_scheduled_timestamp_seconds{job=\"tick\""
    )
    .is_some());
    assert!(metric(
        port,
        "bosun_periodic_next_fire_timestamp_seconds{job=\"tick\""
    )
    .is_some());
    assert!(metric(port, "bosun_periodic_fire_lateness_seconds_count").unwrap() >= 1.0);

    // Pause: no new runs; the ticks are recorded as skipped (`paused`).
    let (status, body) = request(port, "POST", "/api/v1/periodics/tick/pause", None, None);
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(Duration::from_millis(300));
    let count = |port| {
        let (_, body) = request(port, "GET", "/api/v1/runs?job=tick&limit=1000", None, None);
        json(&body)["runs"].as_array().unwrap().len()
    };
    let before = count(port);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(count(port), before, "a paused periodic creates no runs");
    assert!(find_periodic(port, "tick").unwrap()["paused"] == true);
    assert!(
        metric(
            port,
            "bosun_periodic_skipped_total{job=\"tick\",periodic=\"tick\",reason=\"paused\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "paused ticks are counted"
    );

    // Paused survives a restart.
    drop(daemon);
    daemon = start(&dir, &[]);
    let port = daemon.port;
    assert!(find_periodic(port, "tick").unwrap()["paused"] == true);
    std::thread::sleep(Duration::from_millis(1500));
    let before = count(port);
    // Resume: it fires again.
    let (status, _) = request(port, "POST", "/api/v1/periodics/tick/resume", None, None);
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(port) == before {
        assert!(Instant::now() < deadline, "never fired after resume");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(find_periodic(port, "tick").unwrap()["paused"] == false);

    // The CLI.
    let server = format!("http://127.0.0.1:{port}");
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["periodics", "--server", &server])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("tick ") && l.contains("* * * * * *")),
        "{stdout}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["periodics", "pause", "tick", "--server", &server])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tick paused");
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["periodics", "trigger", "nope", "--server", &server])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));
}

/// `BOSUN_TICK_KILL_CYCLES=30 cargo test -p bosun --test it
/// serve::kill_9_while` by hand (3 in CI): per-second periodics, the daemon
/// killed with SIGKILL at varying points and restarted after varying
/// downtimes.
#[test]
fn kill_9_while_periodics_fire_every_second_accounts_for_every_tick_once() {
    kill_9_while_periodics_fire(&[]);
}

/// The same with every fire going through the store's fire log (the path of a
/// burst), so that kills also land between a log's commit and its fold.
#[test]
fn kill_9_while_periodics_fire_through_the_fire_log_accounts_for_every_tick_once() {
    kill_9_while_periodics_fire(&["--fire-log-min", "1"]);
}

/// The same on PostgreSQL (a real server started by the test): the store's
/// transactions and unique tick key keep the promise SQLite keeps.
#[test]
fn kill_9_while_periodics_fire_on_postgres_accounts_for_every_tick_once() {
    let url = bosun_kubetest::postgres::Postgres::shared().database();
    kill_9_while_periodics_fire(&["--store", &url]);
}

/// 2,000 periodics due in the same second, three times (ticks T1, T2, T3,
/// eight seconds apart): their fires are decided ahead, and the daemon is
/// killed with SIGKILL at T1's instant and 25 ms after T2's, while their
/// commit (the fire log's record, then its fold) is in flight, and restarted
/// at once. Every periodic's every tick has exactly one outcome, a run of
/// that tick or a skip with its reason: none lost, none twice, and no tick
/// has two runs.
#[test]
fn kill_9_at_the_instant_of_a_burst_accounts_for_every_tick_once() {
    use jiff::{SignedDuration, Timestamp};
    const N: usize = 2000;
    let (_d, dir) = tmp();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    // One run at a time: the runs wait, the test measures the scheduler.
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  default: {kind: local, max_concurrency: 1}\n",
    )
    .unwrap();
    // T1 far enough ahead for the start-up, all three ticks in one minute.
    let whole = |t: Timestamp| Timestamp::from_second(t.as_second()).unwrap();
    let mut t1 = whole(Timestamp::now()) + SignedDuration::from_secs(12);
    if t1.as_second() % 60 > 43 {
        t1 = t1 + SignedDuration::from_secs(60 - t1.as_second() % 60 + 1);
    }
    let ticks = [
        t1,
        t1 + SignedDuration::from_secs(8),
        t1 + SignedDuration::from_secs(16),
    ];
    let utc = |t: Timestamp| t.to_zoned(jiff::tz::TimeZone::UTC);
    let z = utc(t1);
    let seconds: Vec<String> = ticks.iter().map(|t| utc(*t).second().to_string()).collect();
    let cron = format!("{} {} {} * * *", seconds.join(","), z.minute(), z.hour());
    let jobs: String = (0..N)
        .map(|i| {
            format!("- name: burst-{i}\n  cron: \"{cron}\"\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
        })
        .collect();
    std::fs::write(dir.join("jobs/burst.yaml"), format!("periodics:\n{jobs}")).unwrap();
    let sleep_until = |t: Timestamp| {
        if let Ok(d) = Duration::try_from(t.duration_since(Timestamp::now())) {
            std::thread::sleep(d);
        }
    };
    let daemon = start(&dir, &[]);
    sleep_until(ticks[0]);
    drop(daemon); // SIGKILL at T1's instant
    let daemon = start(&dir, &[]);
    sleep_until(ticks[1] + SignedDuration::from_millis(25));
    drop(daemon); // SIGKILL 25 ms after T2's instant
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    // T3's fires are decided ahead and committed at their instant: the path
    // the kills above cut.
    let prepared = || {
        metric(
            port,
            "bosun_periodic_prepared_fires_total{outcome=\"committed\"}",
        )
        .unwrap_or(0.0)
    };
    sleep_until(ticks[2]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while prepared() < 1.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(prepared() >= 1.0, "no fire of T3 was decided ahead");
    // Every fire of T3 is committed (a stale one is decided again at once).
    let deadline = Instant::now() + Duration::from_secs(30);
    let fired = |port| {
        let (_, body) = request(port, "GET", "/api/v1/periodics/burst-0/ticks", None, None);
        json(&body)["ticks"].as_array().is_some_and(|t| {
            t.iter().any(|o| {
                o["last_tick"]
                    .as_str()
                    .and_then(|s| s.parse::<Timestamp>().ok())
                    == Some(ticks[2])
            })
        })
    };
    while !fired(port) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    drop(daemon);
    // The store as the daemon left it (a log not folded yet is folded first).
    let store = bosun_store::sqlite::SqliteStore::open(dir.join("data/bosun.db")).unwrap();
    use bosun_store::Store;
    let (mut runs_total, mut skips) = (0, std::collections::BTreeMap::<String, usize>::new());
    for i in 0..N {
        let name = format!("burst-{i}");
        let mut seen: Vec<(Timestamp, String, Option<String>)> = Vec::new();
        for o in store.outcomes(&name).unwrap() {
            assert_eq!(
                o.first_tick, o.last_tick,
                "{name}: one tick per outcome: {o:?}"
            );
            assert_eq!(o.count, 1, "{name}: {o:?}");
            seen.push((o.first_tick, o.outcome, o.run_id));
        }
        seen.sort();
        let got: Vec<Timestamp> = seen.iter().map(|(t, ..)| *t).collect();
        assert_eq!(got, ticks, "{name}: each tick exactly once: {seen:?}");
        let runs = store
            .list(&bosun_store::RunFilter {
                periodic: Some(name.clone()),
                limit: 100,
                ..Default::default()
            })
            .unwrap();
        let mut scheduled: Vec<Timestamp> = runs.iter().filter_map(|r| r.scheduled_at).collect();
        scheduled.sort();
        let before = scheduled.len();
        scheduled.dedup();
        assert_eq!(
            scheduled.len(),
            before,
            "{name}: a tick with two runs: {runs:?}"
        );
        let run_ticks: Vec<Timestamp> = seen
            .iter()
            .filter(|(_, o, _)| o == "run")
            .map(|(t, ..)| *t)
            .collect();
        assert_eq!(
            scheduled, run_ticks,
            "{name}: runs and run outcomes match: {seen:?}"
        );
        for (t, o, id) in &seen {
            if o == "run" {
                let id = id.as_deref().expect("a run outcome names its run");
                let run = runs.iter().find(|r| r.id == id);
                assert_eq!(run.and_then(|r| r.scheduled_at), Some(*t), "{name}: {id}");
                runs_total += 1;
            } else {
                *skips.entry(o.clone()).or_default() += 1;
            }
        }
    }
    eprintln!("{N} periodics, 3 ticks: {runs_total} runs, skips {skips:?}");
}

fn kill_9_while_periodics_fire(extra: &[&str]) {
    use jiff::{SignedDuration, Timestamp};
    let (_d, dir) = tmp();
    setup(&dir);
    // sec-c's runs outlast a second: most of its ticks are overlap skips,
    // decided ahead and committed as such (a quick run moves after the next
    // tick is decided, which makes that decision stale).
    let names = ["sec-a", "sec-b", "sec-c"];
    let jobs: String = names
        .iter()
        .map(|n| {
            let command = if *n == "sec-c" { "[sleep, \"2\"]" } else { "[\"true\"]" };
            format!("- name: {n}\n  cron: \"* * * * * *\"\n  spec: {{containers: [{{image: x, command: {command}}}]}}\n")
        })
        .collect();
    std::fs::write(dir.join("jobs/seconds.yaml"), format!("periodics:\n{jobs}")).unwrap();
    let cycles: u64 = std::env::var("BOSUN_TICK_KILL_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut up: Vec<(Timestamp, Timestamp)> = Vec::new();
    for cycle in 0..cycles {
        let daemon = start(&dir, extra);
        let t_up = Timestamp::now();
        std::thread::sleep(Duration::from_millis(700 + (cycle * 613) % 1800));
        let t_down = Timestamp::now();
        drop(daemon); // SIGKILL, wherever the scheduler is
        up.push((t_up, t_down));
        std::thread::sleep(Duration::from_millis((cycle * 389) % 1200));
    }
    let daemon = start(&dir, extra);
    let t_up = Timestamp::now();
    std::thread::sleep(Duration::from_millis(2500));
    let port = daemon.port;
    let mut total_runs = 0;
    for name in names {
        let checked = crate::common::check_every_second(port, name, 2);
        let (seen, m) = (checked.seen, checked.scheduled.len());
        total_runs += m;
        // No tick that fell while the daemon was up (and settled) is missed.
        for (t, o) in &seen {
            if o != "missed" {
                continue;
            }
            let during = up.iter().chain([&(t_up, Timestamp::now())]).any(|(a, b)| {
                *t > *a + SignedDuration::from_secs(1) && *t < *b - SignedDuration::from_millis(500)
            });
            assert!(
                !during,
                "{name}: tick {t} was missed while the daemon was up"
            );
        }
    }
    assert!(total_runs >= 3, "periodics fired: {total_runs}");
    // Fires were decided ahead (the daemon's path for every periodic due
    // within two seconds): committed at their instant, or stale when the
    // previous second's run moved after the decision, and decided again.
    let prepared = |o: &str| {
        metric(
            port,
            &format!("bosun_periodic_prepared_fires_total{{outcome=\"{o}\"}}"),
        )
        .unwrap_or(0.0)
    };
    // A loaded machine may make the first ones stale: wait a while.
    let deadline = Instant::now() + Duration::from_secs(15);
    while prepared("committed") < 1.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (committed, stale) = (prepared("committed"), prepared("stale"));
    eprintln!("fires decided ahead since the last start: {committed} committed, {stale} stale");
    assert!(
        committed >= 1.0,
        "fires decided ahead and committed: {committed}, stale: {stale}"
    );
}

#[test]
fn in_repo_lighthouse_periodics_are_scheduled_and_picked_up_on_change() {
    let (_d, dir) = tmp();
    setup(&dir);
    let checkout = dir.join("checkouts/app");
    std::fs::create_dir_all(checkout.join(".lighthouse/jx")).unwrap();
    let triggers = |cron: &str| {
        format!(
            "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - name: nightly\n    cron: \"{cron}\"\n    spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n  - name: tekton-daily\n    cron: \"0 5 * * *\"\n    source: daily.yaml\n"
        )
    };
    std::fs::write(
        checkout.join(".lighthouse/jx/triggers.yaml"),
        triggers("0 4 * * *"),
    )
    .unwrap();
    std::fs::write(
        checkout.join(".lighthouse/jx/daily.yaml"),
        "apiVersion: tekton.dev/v1\nkind: PipelineRun\nspec:\n  pipelineSpec:\n    tasks:\n    - name: say\n      taskSpec:\n        steps:\n        - {name: hi, image: alpine, script: echo daily for $REPO_OWNER/$REPO_NAME}\n",
    )
    .unwrap();
    let spec = format!("org/app={}", checkout.display());
    let daemon = start(&dir, &["--in-repo", &spec]);
    let port = daemon.port;
    let p =
        find_periodic(port, "org/app:nightly").expect("in-repo periodic, identity ORG/REPO:name");
    assert_eq!(p["job"], "nightly");
    assert_eq!(p["schedule"], "0 4 * * *");
    // A Tekton (`source:`) periodic: its pipeline runs step by step.
    let (status, body) = request(
        port,
        "POST",
        "/api/v1/periodics/org%2Fapp:tekton-daily/trigger",
        None,
        None,
    );
    assert_eq!(status, 201, "{body}");
    let id = json(&body)["id"].as_str().unwrap().to_string();
    let run = wait_state(port, &id, |s| s == "success");
    assert_eq!(run["description"], "Job succeeded.");
    let (_, log) = request(port, "GET", &format!("/api/v1/runs/{id}/log"), None, None);
    assert!(log.contains("[say/hi] daily for org/app"), "{log}");
    // A change in the checkout is picked up.
    std::fs::write(
        checkout.join(".lighthouse/jx/triggers.yaml"),
        triggers("15 6 * * *"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while find_periodic(port, "org/app:nightly").unwrap()["schedule"] != "15 6 * * *" {
        assert!(Instant::now() < deadline, "the change was not picked up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = wait_config(port, "loaded", |v| v["ok"] == true)["warnings"]
        .as_u64()
        .unwrap();
    // A reload reports what `bosun check` reports of pipeline jobs, with
    // its severity: a pipeline a local cluster cannot run is a warning, and
    // the configuration goes into force.
    std::fs::write(
        checkout.join(".lighthouse/jx/by-ref.yaml"),
        "apiVersion: tekton.dev/v1\nkind: PipelineRun\nspec:\n  pipelineSpec:\n    tasks:\n    - name: clone\n      taskRef: {name: git-clone}\n",
    )
    .unwrap();
    std::fs::write(
        checkout.join(".lighthouse/jx/triggers.yaml"),
        triggers("15 6 * * *")
            + "  - name: by-ref\n    cron: \"0 7 * * *\"\n    source: by-ref.yaml\n",
    )
    .unwrap();
    let status = wait_config(port, "a pipeline's warning", |v| {
        v["warnings"].as_u64() != Some(before)
    });
    assert_eq!(status["ok"], true, "{status}");
    assert_eq!(status["warnings"].as_u64(), Some(before + 1), "{status}");
    let warnings = status["warning_messages"].as_array().unwrap();
    let by_ref: Vec<_> = warnings
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains("job by-ref"))
        .collect();
    assert_eq!(by_ref.len(), 1, "{status}");
    let w = by_ref[0];
    assert!(
        w.contains("job by-ref: runs of this job on local cluster \"default\" end in error")
            && w.contains("taskRef git-clone cannot be resolved on a local cluster"),
        "{w}"
    );
    assert!(find_periodic(port, "org/app:by-ref").is_some());
}

#[test]
fn trusted_clusters_take_only_admitted_jobs_on_their_own_refs() {
    let (_d, dir) = tmp();
    // Jobs run as `nobody`, who must reach their directories.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        r#"
build_clusters:
  default: {kind: local, run_as: nobody}
  trusted:
    kind: local
    run_as: nobody
    trusted:
    - {jobs: [label-sync], types: [periodic]}
    - {repos: [org/app], types: [postsubmit]}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        r#"
periodics:
- name: label-sync
  cron: "0 0 31 2 *"
  cluster: trusted
  spec: {containers: [{image: x, command: ["true"]}]}
- name: open-job
  cron: "0 0 31 2 *"
  spec: {containers: [{image: x, command: ["true"]}]}
postsubmits:
  org/app:
  - name: post-app-publish
    cluster: trusted
    spec: {containers: [{image: x, command: ["true"]}]}
"#,
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    let sync = trigger(port, r#"{"job": "label-sync"}"#);
    assert_eq!(
        wait_state(port, &sync, |s| s == "success")["cluster"],
        "trusted"
    );
    let own = r#"{"org": "org", "repo": "app", "base_ref": "main"}"#;
    let post = trigger(
        port,
        &format!(r#"{{"job": "post-app-publish", "refs": {own}}}"#),
    );
    wait_state(port, &post, |s| s == "success");
    // Other code on the trusted cluster: another repo, a pull request, refs
    // on a periodic. Refused with 403, nothing stored.
    for body in [
        r#"{"job": "post-app-publish", "refs": {"org": "evil", "repo": "app", "base_ref": "main"}}"#,
        r#"{"job": "post-app-publish", "refs": {"org": "org", "repo": "app", "base_ref": "main", "pulls": [{"number": 1, "author": "a", "sha": "abc"}]}}"#,
        r#"{"job": "label-sync", "refs": {"org": "org", "repo": "app", "base_ref": "main"}}"#,
    ] {
        let (status, answer) = request(port, "POST", "/api/v1/runs", Some(body), None);
        assert_eq!(status, 403, "{body}: {answer}");
        assert!(
            json(&answer)["error"]
                .as_str()
                .unwrap()
                .contains("trusted cluster \"trusted\""),
            "{answer}"
        );
    }
    // Clusters without rules take any refs.
    trigger(
        port,
        r#"{"job": "open-job", "refs": {"org": "evil", "repo": "x", "base_ref": "main"}}"#,
    );
    // A rerun of an admitted run is admitted.
    let (status, body) = request(
        port,
        "POST",
        &format!("/api/v1/runs/{sync}/rerun"),
        None,
        None,
    );
    assert_eq!(status, 201, "{body}");
    let (_, body) = request(port, "GET", "/api/v1/runs?limit=100", None, None);
    assert_eq!(json(&body)["runs"].as_array().unwrap().len(), 4, "{body}");
    // Once label-sync is no longer configured, its runs are not rerun there.
    let jobs = std::fs::read_to_string(dir.join("jobs/jobs.yaml")).unwrap();
    let without = jobs.replace(
        "- name: label-sync\n  cron: \"0 0 31 2 *\"\n  cluster: trusted",
        "- name: label-sync-v2\n  cron: \"0 0 31 2 *\"",
    );
    assert_ne!(without, jobs);
    std::fs::write(dir.join("jobs/jobs.yaml"), without).unwrap();
    let (status, body) = request(port, "POST", "/api/v1/config/reload", None, None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(
        port,
        "POST",
        &format!("/api/v1/runs/{sync}/rerun"),
        None,
        None,
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("no longer configured"), "{body}");
}

#[test]
fn with_trusted_clusters_a_root_daemon_runs_local_jobs_only_as_their_run_as_user() {
    let (_d, dir) = tmp();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        "periodics:\n- name: whoami\n  cron: \"0 0 31 2 *\"\n  spec: {containers: [{image: x, command: [sh, -c, \"id -u; id -g; touch mine\"]}]}\n",
    )
    .unwrap();
    let trusted = "  trusted: {kind: local, run_as: nobody, trusted: [{jobs: [none]}]}\n";
    // No run_as on the (implicit) default cluster.
    std::fs::write(
        dir.join("config.yaml"),
        format!("build_clusters:\n{trusted}"),
    )
    .unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
            .arg("serve")
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .arg("--job-config")
            .arg(dir.join("jobs"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen")
            .arg("127.0.0.1:0")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("run_as") && err.contains("local cluster(s) default"),
            "{err}"
        );
    } else {
        // Not root: jobs already run as this unprivileged user; bosun starts,
        // and cannot switch users, so the rest needs root.
        drop(start(&dir, &[]));
        return;
    }
    // With run_as on every local cluster, jobs run as that user.
    std::fs::write(
        dir.join("config.yaml"),
        format!("build_clusters:\n  default: {{kind: local, run_as: nobody}}\n{trusted}"),
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    let id = trigger(daemon.port, r#"{"job": "whoami"}"#);
    let run = wait_state(daemon.port, &id, |s| s != "triggered" && s != "pending");
    let (_, log) = request(
        daemon.port,
        "GET",
        &format!("/api/v1/runs/{id}/log"),
        None,
        None,
    );
    assert_eq!(run["state"], "success", "{run} {log}");
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let nobody: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .expect("a nobody user")
        .split(':')
        .collect();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [nobody[2], nobody[3]],
        "{log}"
    );
    let file = dir.join("data/runs/default").join(&id).join("mine");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&file).unwrap());
    assert_eq!(owner.to_string(), nobody[2], "the job wrote as its user");
}

/// A local cluster's `run_as` user must reach its run directory: a root
/// daemon whose data directory that user cannot traverse (mode 0700, as
/// `mktemp -d` makes it) refuses to start, naming the directory and the
/// user, instead of failing every job with "Permission denied".
#[test]
fn a_run_as_user_that_cannot_reach_the_data_directory_is_refused_at_start() {
    let (_d, dir) = tmp();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        "periodics:\n- name: whoami\n  interval: 1h\n  spec: {containers: [{image: x, command: [id]}]}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  default: {kind: local, run_as: nobody}\n  trusted: {kind: local, run_as: nobody, trusted: [{jobs: [none]}]}\n",
    )
    .unwrap();
    if !rustix::process::geteuid().is_root() {
        // Not root: jobs run as this user, who owns the directory.
        drop(start(&dir, &[]));
        return;
    }
    let mut serve = Command::new(env!("CARGO_BIN_EXE_bosun"));
    serve
        .arg("serve")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = serve.spawn().unwrap();
    // A daemon that starts never exits by itself: give it a few seconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let status = status.unwrap_or_else(|| panic!("bosun started: {err}"));
    assert!(!status.success(), "{err}");
    let shown = dir.display().to_string();
    assert!(
        err.contains("\"nobody\"") && err.contains(&shown) && err.contains("mode 700"),
        "{err}"
    );
    // Made reachable, it starts.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o711)).unwrap();
    drop(start(&dir, &[]));
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: CONTEXT, context: {cluster: c, user: u}}]\ncurrent-context: CONTEXT\n";

#[test]
fn build_clusters_and_kubeconfig_contexts_change_without_a_restart() {
    let (_d, dir) = tmp();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::create_dir_all(dir.join("kube")).unwrap();
    let job = |name: &str, cluster: &str, cmd: &str| {
        format!("- name: {name}\n  cron: \"0 0 31 2 *\"\n  cluster: {cluster}\n  spec: {{containers: [{{image: x, command: [{cmd}]}}]}}\n")
    };
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  a: {kind: local}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        format!("periodics:\n{}", job("on-a", "a", "sleep, \"30\"")),
    )
    .unwrap();
    let kube = dir.join("kube");
    let daemon = start(&dir, &["--kubeconfig-dir", kube.to_str().unwrap()]);
    let port = daemon.port;
    let reload = |want: u16| {
        let (status, body) = request(port, "POST", "/api/v1/config/reload", None, None);
        assert_eq!(status, want, "{body}");
    };
    let long = trigger(port, r#"{"job": "on-a"}"#);
    wait_state(port, &long, |s| s == "pending");

    // A new local cluster takes runs at once.
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  a: {kind: local}\n  b: {kind: local}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        format!(
            "periodics:\n{}{}",
            job("on-a", "a", "sleep, \"30\""),
            job("on-b", "b", "\"true\"")
        ),
    )
    .unwrap();
    reload(200);
    let on_b = trigger(port, r#"{"job": "on-b"}"#);
    assert_eq!(wait_state(port, &on_b, |s| s == "success")["cluster"], "b");

    // A kubeconfig file dropped into the directory adds its contexts.
    std::fs::write(kube.join("x.yaml"), KUBECONFIG.replace("CONTEXT", "k8s-x")).unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        format!(
            "periodics:\n{}{}{}",
            job("on-a", "a", "sleep, \"30\""),
            job("on-b", "b", "\"true\""),
            job("on-k8s", "k8s-x", "\"true\"")
        ),
    )
    .unwrap();
    reload(200);
    // A known alias (an unknown one ends in error at once) of a cluster that
    // cannot be reached (nothing listens there): its run waits.
    let on_k8s = trigger(port, r#"{"job": "on-k8s"}"#);
    std::thread::sleep(Duration::from_millis(500));
    let (_, body) = request(port, "GET", &format!("/api/v1/runs/{on_k8s}"), None, None);
    assert_eq!(json(&body)["state"], "triggered", "{body}");

    // The same context in a second file is an error: the last good clusters
    // and configuration stay.
    std::fs::write(kube.join("y.yaml"), KUBECONFIG.replace("CONTEXT", "k8s-x")).unwrap();
    reload(422);
    let (_, status) = request(port, "GET", "/api/v1/config/status", None, None);
    assert!(status.contains("occurred more than once"), "{status}");
    let again = trigger(port, r#"{"job": "on-b"}"#);
    wait_state(port, &again, |s| s == "success");
    std::fs::remove_file(kube.join("y.yaml")).unwrap();

    // Removing cluster a ends its pending run in error.
    std::fs::write(
        dir.join("config.yaml"),
        "build_clusters:\n  b: {kind: local}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        format!(
            "periodics:\n{}{}",
            job("on-b", "b", "\"true\""),
            job("on-k8s", "k8s-x", "\"true\"")
        ),
    )
    .unwrap();
    // The job's process (`sleep 30`) is running now.
    // Its state: the log's attribute (see the local executor).
    let mut buf = [0u8; 256];
    let n = rustix::fs::getxattr(
        dir.join(format!("data/runs/a/{long}.log")),
        "user.bosun.state",
        &mut buf[..],
    )
    .unwrap();
    let state = String::from_utf8_lossy(&buf[..n]).to_string();
    let pid: u32 = state.split_whitespace().next().unwrap().parse().unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let running = |p: &Path| {
        std::fs::read_to_string(p.join("stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    assert!(running(&proc_dir), "the job runs before the removal");
    reload(200);
    let run = wait_state(port, &long, |s| s == "error");
    assert_eq!(run["description"], "build cluster a was removed", "{run}");
    // ... and is stopped with its run, not left behind on the host.
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(&proc_dir) {
        assert!(
            Instant::now() < deadline,
            "the removed cluster's job {pid} still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn clusters_report_their_health() {
    let (_d, dir) = tmp();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::create_dir_all(dir.join("kube")).unwrap();
    // Nothing listens on port 1: the cluster cannot be reached.
    std::fs::write(
        dir.join("kube/k.yaml"),
        KUBECONFIG.replace("CONTEXT", "gone"),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "disabled_clusters: [off]\nbuild_clusters:\n  off: {kind: local}\n",
    )
    .unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), "periodics: []\n").unwrap();
    let kube = dir.join("kube");
    let daemon = start(
        &dir,
        &[
            "--kubeconfig-dir",
            kube.to_str().unwrap(),
            "--health-interval",
            "100ms",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let clusters = loop {
        let (_, body) = request(daemon.port, "GET", "/api/v1/clusters", None, None);
        let v = json(&body);
        let gone = v["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["alias"] == "gone")
            .cloned()
            .unwrap();
        if gone["reason"]
            .as_str()
            .is_some_and(|r| r != "not probed yet")
        {
            break v;
        }
        assert!(Instant::now() < deadline, "never probed: {v}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let by_alias = |a: &str| {
        clusters["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["alias"] == a)
            .cloned()
            .unwrap()
    };
    let gone = by_alias("gone");
    assert_eq!(
        (
            gone["kind"].as_str(),
            gone["status"].as_str(),
            gone["prow_status"].as_str()
        ),
        (Some("kubernetes"), Some("Unreachable"), Some("Error")),
        "{clusters}"
    );
    let off = by_alias("off");
    assert_eq!(
        (off["status"].as_str(), off["prow_status"].as_str()),
        (Some("Disabled"), Some("No-Manager"))
    );
    let default = by_alias("default");
    assert_eq!(
        (default["kind"].as_str(), default["status"].as_str()),
        (Some("local"), Some("Reachable"))
    );
    assert_eq!(
        metric(daemon.port, "bosun_build_cluster_status{cluster=\"gone\",status=\"Unreachable\",prow_status=\"Error\"}"),
        Some(1.0)
    );
}

#[test]
fn runs_of_an_unreachable_cluster_wait_or_fail_over() {
    let (_d, dir) = tmp();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    let kubeconfig = dir.join("k.yaml");
    std::fs::write(&kubeconfig, KUBECONFIG.replace("CONTEXT", "gone")).unwrap();
    let k = kubeconfig.display();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "build_clusters:\n  gone: {{kind: kubernetes, kubeconfig: {k}, context: gone, failover_to: spare}}\n  stuck: {{kind: kubernetes, kubeconfig: {k}, context: gone}}\n  spare: {{kind: local}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        "periodics:\n- name: moved\n  cron: \"0 0 31 2 *\"\n  cluster: gone\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n- name: waits\n  cron: \"0 0 31 2 *\"\n  cluster: stuck\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let daemon = start(&dir, &["--health-interval", "100ms"]);
    let port = daemon.port;
    let moved = trigger(port, r#"{"job": "moved"}"#);
    let run = wait_state(port, &moved, |s| s == "success");
    assert_eq!(
        (run["configured_cluster"].as_str(), run["cluster"].as_str()),
        (Some("gone"), Some("spare")),
        "{run}"
    );
    let waits = trigger(port, r#"{"job": "waits"}"#);
    // Several probes and controller passes later, it still waits.
    std::thread::sleep(Duration::from_millis(1500));
    let (_, body) = request(port, "GET", &format!("/api/v1/runs/{waits}"), None, None);
    assert_eq!(json(&body)["state"], "triggered", "{body}");
}

#[test]
fn with_the_scheduler_enabled_failover_mappings_move_runs_but_never_onto_a_trusted_cluster() {
    let (_d, dir) = tmp();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        r#"
scheduler:
  enabled: true
  failover: {mappings: {old: new, x: trusted}}
build_clusters:
  default: {kind: local, run_as: nobody}
  old: {kind: local, run_as: nobody}
  new: {kind: local, run_as: nobody}
  x: {kind: local, run_as: nobody}
  trusted: {kind: local, run_as: nobody, trusted: [{jobs: [someone-else]}]}
"#,
    )
    .unwrap();
    let job = |name: &str, cluster: &str| {
        format!("- name: {name}\n  cron: \"0 0 31 2 *\"\n  cluster: {cluster}\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
    };
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        format!("periodics:\n{}{}", job("on-old", "old"), job("on-x", "x")),
    )
    .unwrap();
    let daemon = start(&dir, &[]);
    let port = daemon.port;
    let moved = trigger(port, r#"{"job": "on-old"}"#);
    let run = wait_state(port, &moved, |s| s == "success");
    assert_eq!(
        (run["configured_cluster"].as_str(), run["cluster"].as_str()),
        (Some("old"), Some("new")),
        "{run}"
    );
    let kept = trigger(port, r#"{"job": "on-x"}"#);
    let run = wait_state(port, &kept, |s| s == "success");
    assert_eq!(
        run["cluster"], "x",
        "the trusted cluster does not admit on-x: {run}"
    );
}

/// A daemon started under the usual soft limit of open files raises it to
/// the hard one (a pod and its log file each hold one, for every run at
/// once), and its local jobs still get the limit it started with.
#[test]
fn the_daemon_raises_its_open_files_limit_and_jobs_keep_the_usual_one() {
    crate::common::needs("prlimit", "util-linux");
    let hard = std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4).map(str::to_string))
        .unwrap();
    assert!(
        hard != "unlimited" && hard.parse::<u64>().unwrap() > 512,
        "{hard}"
    );
    let (_d, dir) = tmp();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), "").unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        "periodics:\n- name: limits\n  cron: \"0 0 31 2 *\"\n  spec: {containers: [{image: x, command: [sh, -c, \"ulimit -n\"]}]}\n",
    )
    .unwrap();
    let nofile = format!("--nofile=512:{hard}");
    let daemon = crate::common::serve_through(&["prlimit", &nofile, "--"], &dir, &[], &[]);
    let port = daemon.port;
    let soft_of = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/limits"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
            .unwrap()
    };
    assert_eq!(soft_of(daemon.child.id()), hard, "the daemon's own");
    let (status, body) = request(
        port,
        "POST",
        "/api/v1/runs",
        Some(r#"{"job": "limits"}"#),
        None,
    );
    assert_eq!(status, 201, "{body}");
    let id = json(&body)["id"].as_str().unwrap().to_string();
    wait_state(port, &id, |s| s == "success");
    let (_, log) = request(port, "GET", &format!("/api/v1/runs/{id}/log"), None, None);
    assert_eq!(log.trim(), "512", "the job's");
}
