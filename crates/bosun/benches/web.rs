//! The dashboard with 1,000,000 runs in the SQLite store, through a real
//! `bosun serve` on loopback: time to first byte of the runs page (`/`),
//! beside the API's JSON of the same rows (`/api/v1/runs?limit=51`) and
//! `/healthz` (the server's own floor); a filtered API page of 100
//! (`/api/v1/runs?job=JOB&limit=100`) and the filtered runs page, each as
//! p50/p99 over repeated requests. Targets (issue 20): the runs page's
//! first byte under 100 ms; the filtered API page under 20 ms at p99.
//!
//! `cargo bench -p bosun --bench web` (the store is built once, in about
//! two minutes, under `target/bench-data/web-1m/`, and reused; `BOSUN_BENCH_RUNS=N`
//! for another size).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bosun_config::types::JobType;
use bosun_store::sqlite::SqliteStore;
use bosun_store::{Created, NewRun, RunState, Store, Transition};

#[path = "../examples/common/proc.rs"]
mod proc;
use jiff::{SignedDuration, Timestamp};

const JOBS: usize = 1000;
const CLUSTERS: [&str; 4] = ["build01", "build02", "build03", "build04"];

fn new_run(i: usize) -> NewRun {
    let job = format!("job-{:04}", i % JOBS);
    NewRun {
        job: job.clone(),
        job_type: JobType::Periodic,
        periodic: Some(job.clone()),
        configured_cluster: CLUSTERS[i % CLUSTERS.len()].into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![],
        labels: BTreeMap::from([
            ("created-by-prow".to_string(), "true".to_string()),
            ("prow.k8s.io/job".to_string(), job.clone()),
            ("prow.k8s.io/type".to_string(), "periodic".to_string()),
        ])
        .into(),
        annotations: BTreeMap::from([("prow.k8s.io/job".to_string(), job)]).into(),
        spec: serde_json::json!({"job": {"name": "x"}, "pod_spec": {"containers": [{"image": "x", "command": ["true"]}]}}).into(),
        scheduled_at: None,
        attempt: 0,
        description: "Job triggered.".into(),
    }
}

/// Builds the store with `n` ended runs over the last four days (creation,
/// start and end each committed as the daemon commits them, in batches).
fn build(db: &Path, n: usize) {
    let store = SqliteStore::open(db).unwrap();
    let now = Timestamp::now();
    let span = 4 * 86400 * 1_000_000 / n.max(1) as i64;
    let t0 = Instant::now();
    const CHUNK: usize = 20_000;
    let mut done = 0;
    while done < n {
        let k = CHUNK.min(n - done);
        let (tx, rx) = mpsc::channel::<(usize, String)>();
        for i in done..done + k {
            let at = now - SignedDuration::from_micros(span * (n - i) as i64);
            let tx = tx.clone();
            store.create_run_then(
                new_run(i),
                at,
                Box::new(move |r| {
                    if let Ok(Created::New(run)) = r {
                        let _ = tx.send((i, run.id.clone()));
                    }
                }),
            );
        }
        drop(tx);
        let ids: Vec<(usize, String)> = rx.iter().collect();
        assert_eq!(ids.len(), k, "every run created");
        let at = |i: usize, secs: i64| {
            now - SignedDuration::from_micros(span * (n - i) as i64)
                + SignedDuration::from_secs(secs)
        };
        let pending = ids
            .iter()
            .map(|(i, id)| {
                let mut t = Transition::to(RunState::Pending, at(*i, 2), "Job triggered.");
                t.cluster = Some(CLUSTERS[i % CLUSTERS.len()].into());
                (id.clone(), t)
            })
            .collect();
        store.transitions(pending).into_iter().for_each(|r| {
            r.unwrap();
        });
        let ended = ids
            .iter()
            .map(|(i, id)| {
                let to = if i % 10 == 7 {
                    RunState::Failure
                } else {
                    RunState::Success
                };
                (
                    id.clone(),
                    Transition::to(to, at(*i, 30 + (*i % 300) as i64), "Job ended."),
                )
            })
            .collect();
        store.transitions(ended).into_iter().for_each(|r| {
            r.unwrap();
        });
        done += k;
        eprint!("\r{done} runs ({:.0} s)", t0.elapsed().as_secs_f64());
    }
    eprintln!();
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path) -> (Daemon, u16) {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    let clusters: String = CLUSTERS
        .iter()
        .map(|c| format!("  {c}: {{kind: local}}\n"))
        .collect();
    std::fs::write(
        dir.join("config.yaml"),
        format!("sinker:\n  max_prowjob_age: 720h\nbuild_clusters:\n{clusters}"),
    )
    .unwrap();
    let jobs: String = (0..JOBS)
        .map(|j| {
            format!(
                "- name: job-{j:04}\n  cron: \"0 0 31 2 *\"\n  cluster: {}\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n",
                CLUSTERS[j % CLUSTERS.len()]
            )
        })
        .collect();
    std::fs::write(dir.join("jobs/jobs.yaml"), format!("periodics:\n{jobs}")).unwrap();
    let log = dir.join("daemon.log");
    let child = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let daemon = Daemon(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(port) = proc::serving_port(&text) {
            return (daemon, port);
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not come up:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One request: time to the first byte of the answer, and to its end.
fn time(port: u16, path: &str) -> (Duration, Duration, u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let t0 = Instant::now();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    let ttfb = t0.elapsed();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let status = String::from_utf8_lossy(&rest[..12.min(rest.len())])
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (ttfb, t0.elapsed(), status)
}

/// The body of one GET answer (200 or the bench stops).
fn body(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(all.starts_with("HTTP/1.1 200"), "{path}: {all}");
    let (_, body) = all.split_once("\r\n\r\n").unwrap();
    body.to_string()
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn measure(port: u16, label: &str, paths: &[String], n: usize) {
    // Warm up.
    for p in paths.iter().take(5) {
        let (_, _, status) = time(port, p);
        assert_eq!(status, 200, "{p}");
    }
    let mut ttfb = Vec::with_capacity(n);
    let mut total = Vec::with_capacity(n);
    for i in 0..n {
        let (a, b, _) = time(port, &paths[i % paths.len()]);
        ttfb.push(a);
        total.push(b);
    }
    ttfb.sort();
    total.sort();
    println!(
        "{label:<44} first byte p50 {:>7.2} ms  p99 {:>7.2} ms | whole p50 {:>7.2} ms  p99 {:>7.2} ms  (n={n})",
        pct(&ttfb, 0.5),
        pct(&ttfb, 0.99),
        pct(&total, 0.5),
        pct(&total, 0.99),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (a filter) is ignored.
    let n: usize = std::env::var("BOSUN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    let dir = target.join(format!("bench-data/web-{n}"));
    let db = dir.join("data/bosun.db");
    let marker = dir.join("built");
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        eprintln!("building a store of {n} runs in {}", dir.display());
        build(&db, n);
        std::fs::write(&marker, "").unwrap();
    }
    let (_daemon, port) = serve(&dir);
    println!("{n} runs in the store; bosun serve on 127.0.0.1:{port}");
    let jobs: Vec<String> = (0..JOBS)
        .step_by(37)
        .map(|j| format!("job-{j:04}"))
        .collect();
    measure(
        port,
        "/healthz (the server's floor)",
        &["/healthz".into()],
        500,
    );
    measure(port, "/ (the runs page, 50 runs)", &["/".into()], 300);
    measure(
        port,
        "/api/v1/runs?limit=51 (the same rows, JSON)",
        &["/api/v1/runs?limit=51".into()],
        300,
    );
    let api: Vec<String> = jobs
        .iter()
        .map(|j| format!("/api/v1/runs?job={j}&limit=100"))
        .collect();
    measure(port, "/api/v1/runs?job=J&limit=100 (filtered)", &api, 1000);
    let api_state: Vec<String> = jobs
        .iter()
        .map(|j| format!("/api/v1/runs?job={j}&state=failure&limit=100"))
        .collect();
    measure(
        port,
        "/api/v1/runs?job=J&state=failure&limit=100",
        &api_state,
        500,
    );
    let pages: Vec<String> = jobs.iter().map(|j| format!("/?job={j}")).collect();
    measure(port, "/?job=J (the runs page, filtered)", &pages, 300);
    measure(port, "/?page=20 (offset 950)", &["/?page=20".into()], 100);
    measure(
        port,
        "/?page=10000 (offset 499,950)",
        &["/?page=10000".into()],
        10,
    );
    // The same depth found by a cursor: the next link on page 9,999.
    let listing: serde_json::Value =
        serde_json::from_str(&body(port, "/api/v1/runs?offset=499949&limit=1")).unwrap();
    let cursor = listing["runs"][0]["id"].as_str().unwrap().to_string();
    measure(
        port,
        "/?after=ID&page=10000 (cursor at 499,950)",
        &[format!("/?after={cursor}&page=10000")],
        300,
    );
    measure(
        port,
        "/?before=ID&page=9999 (cursor, backwards)",
        &[format!("/?before={cursor}&page=9999")],
        300,
    );
    measure(
        port,
        "/api/v1/runs?after=ID&limit=100 (cursor)",
        &[format!("/api/v1/runs?after={cursor}&limit=100")],
        300,
    );
}
