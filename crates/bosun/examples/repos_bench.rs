//! Repositories as the source of jobs, measured on the real `bosun serve`:
//!
//! - `push`: 100 repositories of 10 in-repo periodics each, served over
//!   HTTP by `git http-backend` on loopback; a commit renaming one periodic
//!   is pushed, then its signed push webhook sent, and the time from the
//!   webhook to the new periodic in force (`jobs_in_force` of `GET
//!   /api/v1/repos/ORG/REPO`, read from the snapshot in force) is taken:
//!   one push at a time, then all 100 repositories at once. Side by side,
//!   the peer: the same repositories as local checkouts (`in_repo[].path`)
//!   kept current by `git pull`, which bosun's file watch reloads (the way
//!   in-repo configuration was followed before, and Lighthouse's git-sync
//!   way): the time from the pull to the periodic in force (`GET
//!   /api/v1/periodics`).
//! - `intake`: GitHub's example `push` payload, signed, delivered by 16
//!   clients on kept-alive connections, each delivery with its own id: the
//!   deliveries answered 200 (stored first) per second, and the time from
//!   acceptance to processing (the daemon's
//!   `bosun_webhook_delivery_processed_seconds`).
//!
//! `repos_bench BOSUN_BINARY push [PUSHES=200]`,
//! `repos_bench BOSUN_BINARY intake [DELIVERIES=20000] [CLIENTS=16]`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_forge::testing::{github_example, github_push, Request};
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

/// A daemon, killed when dropped.
struct Daemon {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(bosun: &str, dir: &Path, name: &str, extra: &[&str]) -> Daemon {
    let log = dir.join(format!("{name}.log"));
    let mut child = Command::new(bosun)
        .arg("serve")
        .arg("--config")
        .arg(dir.join(format!("{name}.yaml")))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join(format!("{name}-data")))
        .args(["--listen", "127.0.0.1:0"])
        .arg("--hmac-secret-file")
        .arg(dir.join("hmac"))
        .args(extra)
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
    Daemon { child, port, log }
}

/// One request on its own connection: status and body.
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    // Chunked: the JSON lies between the first line and the last chunk.
    let body = if out.contains("chunked") {
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
    } else {
        body.to_string()
    };
    (status, body)
}

/// A kept-alive connection posting to `/hook`.
struct Hook {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Hook {
    fn connect(port: u16) -> Hook {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_nodelay(true).unwrap();
        Hook {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    /// Sends `req` (its delivery id replaced by `id`); the status.
    fn send(&mut self, req: &Request, id: &str) -> u16 {
        let mut head = String::from("POST /hook HTTP/1.1\r\nHost: x\r\n");
        for (name, value) in &req.headers {
            let value = if name == "x-github-delivery" {
                id
            } else {
                value.to_str().unwrap()
            };
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        self.writer.write_all(head.as_bytes()).unwrap();
        self.writer.write_all(&req.body).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut length = 0;
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                if n.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).unwrap();
        status
    }
}

/// `triggers.yaml` with 10 periodics, the last named `last`.
fn triggers(last: &str) -> String {
    let mut out = String::from(
        "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n",
    );
    for i in 0..10 {
        let name = if i == 9 {
            last.to_string()
        } else {
            format!("p{i}")
        };
        out.push_str(&format!(
            "  - name: {name}\n    cron: \"{i} 3 * * *\"\n    spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"
        ));
    }
    out
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

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn in_force(port: u16, repo: &str, name: &str) -> bool {
    let (status, body) = get(port, &format!("/api/v1/repos/{repo}"));
    if status != 200 {
        return false;
    }
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    v["jobs_in_force"]["periodics"]
        .as_array()
        .is_some_and(|p| p.iter().any(|n| n == name))
}

fn push_bench(bosun: &str, pushes: usize) {
    const REPOS: usize = 100;
    let dir = std::env::temp_dir().join(format!("bosun-repos-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("hmac"), TOKEN).unwrap();
    let git = GitServer::start(dir.join("git"));
    let mut works = Vec::new();
    let mut heads = Vec::new();
    let mut entries = String::new();
    let mut checkouts = String::new();
    for r in 0..REPOS {
        let repo = format!("bench/r{r}");
        git.create(&repo, "main");
        let work = WorkRepo::init(dir.join(format!("work/r{r}")), "main");
        work.write(".lighthouse/jobs/triggers.yaml", &triggers("p9"));
        heads.push(work.commit("ten periodics"));
        work.push(&git.repo_dir(&repo), "main", false);
        entries.push_str(&format!(
            "- {{repo: {repo}, clone_uri: '{}', branch: main}}\n",
            git.url(&repo)
        ));
        let checkout = dir.join(format!("checkouts/r{r}"));
        let out = Command::new("git")
            .args(["clone", "-q"])
            .arg(git.repo_dir(&repo))
            .arg(&checkout)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        checkouts.push_str(&format!(
            "- {{repo: {repo}, path: '{}', branch: main}}\n",
            checkout.display()
        ));
        works.push(work);
    }
    let clusters = "build_clusters:\n  default: {kind: local}\nrepos: {resync: 1h}\n";
    std::fs::write(
        dir.join("followed.yaml"),
        format!("{clusters}in_repo:\n{entries}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("checkouts.yaml"),
        format!("{clusters}in_repo:\n{checkouts}"),
    )
    .unwrap();

    let followed = start(bosun, &dir, "followed", &[]);
    let t = Instant::now();
    wait_until(
        "every repository followed",
        Duration::from_secs(300),
        || {
            let (_, body) = get(followed.port, "/api/v1/repos");
            body.matches("\"state\":\"following\"").count() == REPOS
        },
    );
    println!(
        "{REPOS} repositories x 10 periodics followed from their remotes in {:?}",
        t.elapsed()
    );
    let peer = start(bosun, &dir, "checkouts", &[]);
    wait_until("the peer's periodics", Duration::from_secs(120), || {
        get(peer.port, "/readyz").0 == 200
    });

    // The schema check once: every body below has this shape.
    let probe = github_push(
        "bench/r0",
        &git.url("bench/r0"),
        &heads[0],
        &heads[0],
        false,
    );
    let _ = Request::github("push", probe, TOKEN);

    let mut hook = Hook::connect(followed.port);
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for i in 0..pushes {
        let r = i % REPOS;
        let repo = format!("bench/r{r}");
        let name = format!("p9-v{i}");
        let work = &works[r];
        work.write(".lighthouse/jobs/triggers.yaml", &triggers(&name));
        let after = work.commit(&name);
        work.push(&git.repo_dir(&repo), "main", false);
        let body = github_push(&repo, &git.url(&repo), &heads[r], &after, false);
        heads[r] = after;
        let req = Request::github_unchecked("push", body, TOKEN);
        // Turns: bosun's webhook, then the peer's pull.
        let t0 = Instant::now();
        assert_eq!(hook.send(&req, &format!("push-{i}")), 200);
        wait_until("the pushed periodic", Duration::from_secs(30), || {
            in_force(followed.port, &repo, &name)
        });
        ours.push(t0.elapsed());
        let identity = format!("{repo}:{name}");
        let t0 = Instant::now();
        let out = Command::new("git")
            .args(["-C"])
            .arg(dir.join(format!("checkouts/r{r}")))
            .args(["pull", "-q", "--ff-only"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        wait_until("the pulled periodic", Duration::from_secs(30), || {
            get(peer.port, "/api/v1/periodics").1.contains(&identity)
        });
        theirs.push(t0.elapsed());
    }
    quantiles(
        "push webhook -> periodic in force (bosun, one at a time)",
        ours,
    );
    quantiles(
        "git pull -> periodic in force (checkouts + file watch)",
        theirs,
    );

    // Every repository at once: 100 commits pushed, then their 100 webhooks
    // from 8 clients together.
    let mut burst = Vec::new();
    for (r, work) in works.iter().enumerate() {
        let repo = format!("bench/r{r}");
        let name = format!("p9-burst{r}");
        work.write(".lighthouse/jobs/triggers.yaml", &triggers(&name));
        let after = work.commit(&name);
        work.push(&git.repo_dir(&repo), "main", false);
        let body = github_push(&repo, &git.url(&repo), &heads[r], &after, false);
        burst.push((repo, name, Request::github_unchecked("push", body, TOKEN)));
    }
    let burst = Arc::new(burst);
    let next = Arc::new(AtomicUsize::new(0));
    let port = followed.port;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (burst, next) = (burst.clone(), next.clone());
            std::thread::spawn(move || {
                let mut hook = Hook::connect(port);
                let mut sent = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((_, _, req)) = burst.get(i) else {
                        break;
                    };
                    let t0 = Instant::now();
                    assert_eq!(hook.send(req, &format!("burst-{i}")), 200);
                    sent.push((i, t0));
                }
                sent
            })
        })
        .collect();
    let sent: Vec<(usize, Instant)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let mut pending: Vec<(usize, Instant)> = sent;
    let mut latencies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pending.is_empty() {
        assert!(Instant::now() < deadline, "the burst was not in force");
        pending.retain(|(i, t0)| {
            let (repo, name, _) = &burst[*i];
            if in_force(port, repo, name) {
                latencies.push(t0.elapsed());
                false
            } else {
                true
            }
        });
    }
    quantiles(
        "push webhook -> periodic in force (bosun, 100 repositories at once)",
        latencies,
    );
    for d in [&followed, &peer] {
        let rss = proc::status_kib(d.child.id(), "VmRSS");
        println!("{}: VmRSS {rss} kB", d.log.display());
    }
    drop(followed);
    drop(peer);
    drop(git);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The histogram `name`'s count and sum, and its bucket bounds with counts.
fn histogram(port: u16, name: &str) -> (f64, f64, Vec<(f64, f64)>) {
    let (_, text) = get(port, "/metrics");
    let mut count = 0.0;
    let mut sum = 0.0;
    let mut buckets = Vec::new();
    for l in text.lines() {
        let value = || l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
        if l.starts_with(&format!("{name}_count")) {
            count = value();
        } else if l.starts_with(&format!("{name}_sum")) {
            sum = value();
        } else if let Some(rest) = l.strip_prefix(&format!("{name}_bucket{{le=\"")) {
            let le = rest.split('"').next().unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            buckets.push((le, value()));
        }
    }
    (count, sum, buckets)
}

fn intake_bench(bosun: &str, deliveries: usize, clients: usize) {
    let dir = std::env::temp_dir().join(format!("bosun-intake-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("hmac"), TOKEN).unwrap();
    std::fs::write(
        dir.join("intake.yaml"),
        "build_clusters:\n  default: {kind: local}\n",
    )
    .unwrap();
    let daemon = start(bosun, &dir, "intake", &[]);
    let body = serde_json::to_vec(&github_example("push-branch-created.json")).unwrap();
    println!("payload: GitHub's example push, {} bytes", body.len());
    let req = Arc::new(Request::github("push", body, TOKEN));
    let next = Arc::new(AtomicUsize::new(0));
    let port = daemon.port;
    let t0 = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (req, next) = (req.clone(), next.clone());
            std::thread::spawn(move || {
                let mut hook = Hook::connect(port);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= deliveries {
                        break;
                    }
                    assert_eq!(hook.send(&req, &format!("delivery-{i}")), 200);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let answered = t0.elapsed();
    let name = "bosun_webhook_delivery_processed_seconds";
    wait_until("every delivery processed", Duration::from_secs(300), || {
        histogram(port, name).0 >= deliveries as f64
    });
    let processed = t0.elapsed();
    let (count, sum, buckets) = histogram(port, name);
    let p = |q: f64| {
        buckets
            .iter()
            .find(|(_, c)| *c >= q * count)
            .map_or(f64::INFINITY, |(le, _)| *le)
    };
    println!(
        "{deliveries} signed deliveries from {clients} clients answered 200 (stored) in {answered:?}: {:.0}/s; all processed after {processed:?}",
        deliveries as f64 / answered.as_secs_f64()
    );
    println!(
        "acceptance -> processed: mean {:.1} ms, p50 <= {} s, p99 <= {} s (histogram buckets)",
        sum / count * 1000.0,
        p(0.5),
        p(0.99)
    );
    let hwm = proc::status_kib(daemon.child.id(), "VmHWM");
    println!("daemon: VmHWM {hwm} kB");
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    println!("store: {}", bench_store().name());
    let mut args = std::env::args().skip(1);
    let bosun = args.next().expect("the path of the bosun binary");
    match args.next().as_deref() {
        Some("push") => {
            let pushes = args.next().and_then(|v| v.parse().ok()).unwrap_or(200);
            push_bench(&bosun, pushes);
        }
        Some("intake") => {
            let n = args.next().and_then(|v| v.parse().ok()).unwrap_or(20_000);
            let clients = args.next().and_then(|v| v.parse().ok()).unwrap_or(16);
            intake_bench(&bosun, n, clients);
        }
        _ => panic!("repos_bench BOSUN_BINARY push [PUSHES] | intake [DELIVERIES] [CLIENTS]"),
    }
}
