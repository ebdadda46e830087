//! Pull requests to runs and statuses, measured on the real `bosun serve`
//! (local cluster), with `acme/app` served over HTTP by `git http-backend`
//! on loopback and the fake GitHub API (`bosun_forge::testing::github_api`,
//! every request checked against GitHub's REST description):
//!
//! - `one`: pull requests opened one at a time (a commit changing `src/`,
//!   pushed as `refs/pull/N/head`, then its signed `pull_request` webhook):
//!   the time from the webhook to its two runs committed (`unit`, always;
//!   `lint`, by `run_if_changed` on the changed files, which bosun reads
//!   from its mirror after fetching the pull request over loopback).
//! - `burst`: 100 pull requests whose webhooks are all sent in the same
//!   second (16 clients): the same time per pull request, then every run
//!   and every final status accounted for.
//!
//! For both, each run's end to its final status accepted by the fake
//! GitHub (the run's `completed_at` to the status's `created_at`, both on
//! this machine's clock).
//!
//! `pulls_bench BOSUN_BINARY one [PULLS=50]`, `pulls_bench BOSUN_BINARY burst [PULLS=100]`.

use std::io::Read;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bosun_forge::testing::github_api::{FakeGitHub, PullSpec};
use bosun_forge::testing::{github_pull_request, PullEvent, Request};
use bosun_git::testing::{GitServer, WorkRepo};
use serde_json::Value;

#[path = "common/proc.rs"]
mod proc;
#[path = "common/store.rs"]
mod store;

/// The daemons' store (`BOSUN_BENCH_STORE`), one for the whole run.
fn bench_store() -> &'static store::BenchStore {
    static STORE: std::sync::OnceLock<store::BenchStore> = std::sync::OnceLock::new();
    STORE.get_or_init(store::BenchStore::from_env)
}

const TOKEN: &[u8] = b"bench-token";
const REPO: &str = "acme/app";
const JOBS: &str = r#"presubmits:
  acme/app:
  - name: unit
    always_run: true
    spec: {containers: [{image: x, command: ["true"]}]}
  - name: lint
    run_if_changed: '^src/'
    spec: {containers: [{image: x, command: ["true"]}]}
  - name: docs
    run_if_changed: '^docs/'
    spec: {containers: [{image: x, command: ["true"]}]}
"#;

struct Daemon {
    child: Child,
    port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    if !out.contains("chunked") {
        return body.to_string();
    }
    let mut text = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        text.push_str(&after[..n.min(after.len())]);
        rest = after.get(n + 2..).unwrap_or("");
    }
    text
}

fn post_hook(port: u16, req: &Request) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut head = String::from("POST /hook HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (name, value) in &req.headers {
        head.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", req.body.len()));
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&req.body).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn pull_runs(port: u16, n: u64) -> Vec<Value> {
    let v: Value = serde_json::from_str(&get(port, &format!("/api/v1/runs?repo={REPO}&pull={n}")))
        .unwrap_or_default();
    v["runs"].as_array().cloned().unwrap_or_default()
}

fn quantiles(label: &str, mut v: Vec<Duration>) {
    v.sort();
    let q = |p: f64| v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1];
    println!(
        "{label}: n={} p50={:?} p90={:?} p99={:?} max={:?}",
        v.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        v[v.len() - 1]
    );
}

struct World {
    dir: PathBuf,
    git: GitServer,
    work: WorkRepo,
    gh: FakeGitHub,
    base: String,
}

impl World {
    fn new(dir: &Path) -> World {
        let git = GitServer::start(dir.join("git"));
        git.create(REPO, "main");
        let work = WorkRepo::init(dir.join("work"), "main");
        work.write("README.md", "app\n");
        let base = work.commit("first");
        work.push(&git.repo_dir(REPO), "main", false);
        std::fs::create_dir_all(dir.join("jobs")).unwrap();
        std::fs::write(dir.join("jobs/jobs.yaml"), JOBS).unwrap();
        std::fs::write(
            dir.join("config.yaml"),
            "build_clusters:\n  default: {kind: local}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("hmac.yaml"),
            format!(
                "'*': [{{value: {}, created_at: 2026-01-01T00:00:00Z}}]\n",
                String::from_utf8_lossy(TOKEN)
            ),
        )
        .unwrap();
        let gh = FakeGitHub::start();
        gh.set_member("acme", "alice");
        gh.set_rate_limit(1_000_000, Duration::from_secs(3600));
        std::fs::write(dir.join("gh-token"), gh.token()).unwrap();
        World {
            dir: dir.to_path_buf(),
            git,
            work,
            gh,
            base,
        }
    }

    fn start(&self) -> Daemon {
        let log = self.dir.join("daemon.log");
        let mut child = Command::new(std::env::args().nth(1).unwrap())
            .arg("serve")
            .arg("--config")
            .arg(self.dir.join("config.yaml"))
            .arg("--job-config")
            .arg(self.dir.join("jobs"))
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--github-endpoint",
                &self.gh.url(),
            ])
            .arg("--hmac-secret-file")
            .arg(self.dir.join("hmac.yaml"))
            .arg("--github-token-path")
            .arg(self.dir.join("gh-token"))
            .args(["--external-url", "https://bosun.example.com"])
            .args(bench_store().args())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(p) = proc::serving_port(&text) {
                break p;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the daemon exited ({status}):\n{text}");
            }
            assert!(Instant::now() < deadline, "no daemon:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        };
        Daemon { child, port }
    }

    /// Pull request `n`: a commit changing `src/`, pushed as GitHub keeps
    /// it; its head and its signed `opened` webhook.
    fn pull(&self, n: u64) -> (String, Request) {
        let branch = format!("pr-{n}");
        self.work
            .git(&["checkout", "--quiet", "-B", &branch, &self.base]);
        self.work.write(&format!("src/f{n}.rs"), "x\n");
        let head = self.work.commit(&format!("pull {n}"));
        self.work.push(
            &self.git.repo_dir(REPO),
            &format!("{branch}:refs/pull/{n}/head"),
            true,
        );
        self.work.git(&["checkout", "--quiet", "main"]);
        self.gh.add_pull(
            REPO,
            PullSpec {
                number: n,
                author: "alice".into(),
                head_ref: branch.clone(),
                head_sha: head.clone(),
                base_ref: "main".into(),
                base_sha: self.base.clone(),
                ..PullSpec::default()
            },
        );
        let url = self.git.url(REPO);
        let body = github_pull_request(&PullEvent {
            action: "opened",
            repo: REPO,
            clone_url: &url,
            number: n,
            author: "alice",
            head: &head,
            base: &self.base,
            draft: false,
        });
        let req = Request::github("pull_request", body, TOKEN)
            .with("X-GitHub-Delivery", &format!("pr-{n}"));
        (head, req)
    }
}

/// Waits for pull request `n`'s two runs; the time since `sent`.
fn runs_committed(port: u16, n: u64, sent: Instant) -> Duration {
    let deadline = sent + Duration::from_secs(300);
    loop {
        if pull_runs(port, n).len() >= 2 {
            return sent.elapsed();
        }
        assert!(Instant::now() < deadline, "pull request {n}: no runs");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Every run of pulls `1..=n` ended and its final status on the fake: the
/// time from each run's end to its status.
fn statuses_accounted(w: &World, port: u16, heads: &[(u64, String)]) -> Vec<Duration> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut out = Vec::new();
    for (n, head) in heads {
        let runs = loop {
            let runs = pull_runs(port, *n);
            if runs.len() == 2 && runs.iter().all(|r| r["state"] == "success") {
                break runs;
            }
            assert!(Instant::now() < deadline, "pull {n}'s runs: {runs:#?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let statuses = loop {
            let s = w.gh.latest_statuses(REPO, head);
            if s.len() == 2 && s.iter().all(|s| s.state == "success") {
                break s;
            }
            assert!(Instant::now() < deadline, "pull {n}'s statuses: {s:#?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in &runs {
            let done: jiff::Timestamp = r["completed_at"].as_str().unwrap().parse().unwrap();
            let s = statuses
                .iter()
                .find(|s| s.context == r["job"].as_str().unwrap())
                .unwrap();
            let d = s.created_at.duration_since(done);
            out.push(Duration::from_micros(d.as_micros().max(0) as u64));
        }
    }
    assert_eq!(w.gh.violations(), Vec::<String>::new());
    out
}

fn main() {
    println!("store: {}", bench_store().name());
    let mut args = std::env::args().skip(2);
    let mode = args.next().unwrap_or_else(|| "one".into());
    let pulls: u64 = args
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if mode == "burst" { 100 } else { 50 });
    let tmp = tempfile::tempdir().unwrap();
    let w = World::new(tmp.path());
    let d = w.start();
    let mut heads = Vec::new();
    let mut latency = Vec::new();
    match mode.as_str() {
        "one" => {
            for n in 1..=pulls {
                let (head, req) = w.pull(n);
                let sent = Instant::now();
                assert_eq!(post_hook(d.port, &req), 200);
                latency.push(runs_committed(d.port, n, sent));
                heads.push((n, head));
            }
        }
        "burst" => {
            let reqs: Vec<(u64, String, Request)> = (1..=pulls)
                .map(|n| {
                    let (h, r) = w.pull(n);
                    (n, h, r)
                })
                .collect();
            let sent = Instant::now();
            let port = d.port;
            let chunks: Vec<Vec<(u64, Request)>> = (0..16)
                .map(|c| {
                    reqs.iter()
                        .filter(|(n, _, _)| n % 16 == c)
                        .map(|(n, _, r)| (*n, r.clone()))
                        .collect()
                })
                .collect();
            std::thread::scope(|s| {
                for chunk in chunks {
                    s.spawn(move || {
                        for (_, r) in chunk {
                            assert_eq!(post_hook(port, &r), 200);
                        }
                    });
                }
            });
            println!("burst: {pulls} webhooks answered in {:?}", sent.elapsed());
            for (n, h, _) in &reqs {
                latency.push(runs_committed(d.port, *n, sent));
                heads.push((*n, h.clone()));
            }
        }
        _ => panic!("pulls_bench BOSUN one [PULLS] | burst [PULLS]"),
    }
    quantiles(&format!("{mode}: webhook to runs committed"), latency);
    let to_status = statuses_accounted(&w, d.port, &heads);
    println!(
        "{mode}: {} runs ended, {} final statuses on the fake GitHub, none refused as malformed",
        heads.len() * 2,
        to_status.len()
    );
    quantiles(
        &format!("{mode}: run end to its status accepted"),
        to_status,
    );
}
