//! Memory of `bosun serve` following repositories from their git remotes,
//! side by side with the same periodics from the central configuration:
//! REPOS bare repositories (`file://` remotes), each with one commit whose
//! `.lighthouse/jobs/triggers.yaml` defines PER_REPO periodics, followed by
//! daemon A (`in_repo: [{repo, clone_uri, branch}]`); and daemon B with the
//! same REPOS x PER_REPO periodics (same crons, same specs) in one central
//! job-config file. Each daemon is measured once it has them all in force
//! and has settled: its resident set (`VmRSS`) and its peak (`VmHWM`); for
//! A also how long the first clone and load of every repository took.
//! Then A is started again on its data directory: every repository's
//! snapshot comes from the store and is composed once, so what A holds
//! beyond that is what following them one by one left behind.
//!
//! The machine's load changes from one second to the next, so A (then A
//! restarted) and B run in turns, `BOSUN_BENCH_ROUNDS` times (default 3),
//! each round on new data directories; the ratio reported is the median of
//! the rounds' ratios.
//! Every periodic's cron fires once a year, about six months from now, so
//! no run starts while the daemons are measured.
//!
//! `repos_memory_bench BOSUN_BINARY [REPOS=1000] [PER_REPO=10]` (target:
//! RSS A / RSS B at most 1.5). `BOSUN_BENCH_SETTLE` seconds to settle
//! (default 10); `BOSUN_BENCH_KEEP=1` keeps the temporary directory and
//! the daemons' logs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/local.rs"]
mod local;

#[path = "common/proc.rs"]
mod proc;

/// A daemon, killed when dropped (a panic included).
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one daemon measured.
#[derive(Clone, Copy)]
struct Measured {
    /// From the start to every periodic in force (and, for A, every
    /// repository `following`) and `/readyz` 200.
    ready: Duration,
    /// `VmRSS` once settled, KiB.
    rss: u64,
    /// `VmHWM`, KiB.
    peak: u64,
    /// `RssAnon` once settled, KiB (the heap, without the binary's pages).
    anon: u64,
    /// The daemon's CPU time when it was ready, seconds.
    cpu: f64,
}

/// The i-th repository's name.
fn repo_name(i: usize) -> (String, String) {
    (format!("org{}", i / 100), format!("repo{}", i % 100))
}

/// The k-th periodic's cron (k over every repository's periodics): distinct
/// for 40,320 periodics, each firing once a year in `month`.
fn cron(k: usize, month: i8) -> String {
    format!(
        "{} {} {} {month} *",
        k % 60,
        (k / 60) % 24,
        1 + (k / 1440) % 28
    )
}

const SPEC: &str = "spec: {containers: [{image: x, command: [\"true\"]}]}";

/// REPOS bare repositories under `dir/remotes/ORG/REPO.git`, each with one
/// commit on `main` holding its `.lighthouse/jobs/triggers.yaml`. One `git
/// fast-import` writes every commit into one shared repository; each
/// repository is then a few files (its `HEAD`, its branch, and the shared
/// objects as its alternates), which git serves as any other.
fn make_remotes(dir: &Path, repos: usize, per_repo: usize, month: i8) {
    let shared = dir.join("remotes/shared.git");
    let ok = Command::new("git")
        .args(["init", "--quiet", "--bare"])
        .arg(&shared)
        .status()
        .unwrap();
    assert!(ok.success(), "git init --bare");
    let marks = dir.join("remotes/marks");
    let mut import = Command::new("git")
        .arg("--git-dir")
        .arg(&shared)
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stream = std::io::BufWriter::new(import.stdin.take().unwrap());
        for i in 0..repos {
            let mut text = String::from(
                "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n",
            );
            for j in 0..per_repo {
                text.push_str(&format!(
                    "  - name: p{j}\n    cron: \"{}\"\n    {SPEC}\n",
                    cron(i * per_repo + j, month)
                ));
            }
            let message = format!("jobs of repository {i}\n");
            write!(
                stream,
                "blob\nmark :{}\ndata {}\n{text}\ncommit refs/heads/r{i}\nmark :{}\ncommitter bench <bench@example.com> 1700000000 +0000\ndata {}\n{message}M 100644 :{} .lighthouse/jobs/triggers.yaml\n\n",
                2 * i + 1,
                text.len(),
                2 * i + 2,
                message.len(),
                2 * i + 1,
            )
            .unwrap();
        }
        stream.flush().unwrap();
    }
    assert!(import.wait().unwrap().success(), "git fast-import");
    let commits: std::collections::HashMap<usize, String> = std::fs::read_to_string(&marks)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (mark, sha) = l.split_once(' ')?;
            let mark: usize = mark.trim_start_matches(':').parse().ok()?;
            mark.is_multiple_of(2)
                .then(|| (mark / 2 - 1, sha.to_string()))
        })
        .collect();
    let objects = shared.join("objects").canonicalize().unwrap();
    for i in 0..repos {
        let (org, name) = repo_name(i);
        let git = dir.join(format!("remotes/{org}/{name}.git"));
        for sub in ["objects/info", "objects/pack", "refs/heads", "refs/tags"] {
            std::fs::create_dir_all(git.join(sub)).unwrap();
        }
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            git.join("config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
        )
        .unwrap();
        std::fs::write(
            git.join("objects/info/alternates"),
            format!("{}\n", objects.display()),
        )
        .unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{}\n", commits[&i])).unwrap();
    }
}

/// Daemon A's configuration (every repository followed from its remote)
/// and daemon B's (the same periodics in one central job-config file).
fn write_configs(dir: &Path, repos: usize, per_repo: usize, month: i8) {
    let mut a = String::from("build_clusters:\n  default: {kind: local}\nin_repo:\n");
    for i in 0..repos {
        let (org, name) = repo_name(i);
        let uri = dir.join(format!("remotes/{org}/{name}.git"));
        a.push_str(&format!(
            "- {{repo: {org}/{name}, clone_uri: \"file://{}\", branch: main}}\n",
            uri.display()
        ));
    }
    std::fs::create_dir_all(dir.join("a/jobs")).unwrap();
    std::fs::write(dir.join("a/config.yaml"), a).unwrap();

    std::fs::create_dir_all(dir.join("b/jobs")).unwrap();
    std::fs::write(
        dir.join("b/config.yaml"),
        "build_clusters:\n  default: {kind: local}\n",
    )
    .unwrap();
    let mut b = String::from("periodics:\n");
    for i in 0..repos {
        let (org, name) = repo_name(i);
        for j in 0..per_repo {
            b.push_str(&format!(
                "- name: {org}-{name}-p{j}\n  cron: \"{}\"\n  {SPEC}\n",
                cron(i * per_repo + j, month)
            ));
        }
    }
    std::fs::write(dir.join("b/jobs/periodics.yaml"), b).unwrap();
}

/// Starts `bosun serve` on `dir`'s configuration with the data directory
/// `data`; its port, once it logs it.
fn serve(bosun: &str, dir: &Path, data: &Path, log: PathBuf) -> (Daemon, u16) {
    let child = Command::new(bosun)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = Daemon { child, log };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let text = std::fs::read_to_string(&daemon.log).unwrap_or_default();
        if let Some(port) = proc::serving_port(&text) {
            return (daemon, port);
        }
        if let Some(status) = daemon.child.try_wait().unwrap() {
            panic!("the daemon exited ({status}) before serving:\n{text}");
        }
        assert!(Instant::now() < deadline, "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A GET: status and JSON body (null when it is not JSON).
fn get(agent: &ureq::Agent, port: u16, path: &str) -> (u16, serde_json::Value) {
    let Ok(mut r) = agent.get(format!("http://127.0.0.1:{port}{path}")).call() else {
        return (0, serde_json::Value::Null);
    };
    let status = r.status().as_u16();
    let text = r
        .body_mut()
        .with_config()
        .limit(u64::MAX)
        .read_to_string()
        .unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or_default())
}

/// Runs one daemon on `dir` until it has `periodics` periodics in force,
/// `repos` repositories `following` and `/readyz` 200, lets it settle, and
/// measures it.
fn measure(
    bosun: &str,
    dir: &Path,
    data: &Path,
    log: PathBuf,
    repos: usize,
    periodics: usize,
    settle: Duration,
) -> Measured {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let t0 = Instant::now();
    let (mut daemon, port) = serve(bosun, dir, data, log);
    let pid = daemon.child.id();
    let deadline = t0 + Duration::from_secs(1800);
    // The cheap count first (every 100 ms); the repositories' states once
    // the count is reached.
    loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            panic!(
                "the daemon exited ({status}); its log: {}",
                daemon.log.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "not every periodic in force after 30 minutes; the daemon's log: {}",
            daemon.log.display()
        );
        let (_, status) = get(&agent, port, "/api/v1/config/status");
        if status["periodics"].as_u64() == Some(periodics as u64) {
            let (_, list) = get(&agent, port, "/api/v1/repos");
            let following = list["repos"].as_array().map_or(0, |a| {
                a.iter().filter(|r| r["state"] == "following").count()
            });
            if following == repos && get(&agent, port, "/readyz").0 == 200 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ready = t0.elapsed();
    let cpu_ready = proc::cpu_seconds(pid);
    let (_, list) = get(&agent, port, "/api/v1/periodics");
    assert_eq!(
        list["periodics"].as_array().map_or(0, Vec::len),
        periodics,
        "GET /api/v1/periodics lists every periodic"
    );
    std::thread::sleep(settle / 2);
    for path in [
        "/api/v1/repos",
        "/api/v1/periodics",
        "/api/v1/config/status",
        "/readyz",
    ] {
        assert_eq!(get(&agent, port, path).0, 200, "GET {path}");
    }
    std::thread::sleep(settle / 2);
    let m = Measured {
        ready,
        rss: proc::status_kib(pid, "VmRSS"),
        peak: proc::status_kib(pid, "VmHWM"),
        anon: proc::status_kib(pid, "RssAnon"),
        cpu: cpu_ready,
    };
    drop(daemon);
    m
}

/// One round: A, A restarted on A's data directory, B.
struct Round {
    a: Measured,
    again: Measured,
    b: Measured,
}

impl Round {
    /// RSS A / RSS B.
    fn ratio(&self) -> f64 {
        self.a.rss as f64 / self.b.rss as f64
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let bosun = args.next().expect("path of the bosun binary");
    let bosun = std::fs::canonicalize(&bosun)
        .unwrap_or_else(|e| panic!("{bosun}: {e}"))
        .display()
        .to_string();
    let repos: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let per_repo: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10);
    let rounds: usize = std::env::var("BOSUN_BENCH_ROUNDS")
        .map(|v| v.parse().expect("BOSUN_BENCH_ROUNDS: a number"))
        .unwrap_or(3);
    let settle = Duration::from_secs(
        std::env::var("BOSUN_BENCH_SETTLE")
            .map(|v| v.parse().expect("BOSUN_BENCH_SETTLE: seconds"))
            .unwrap_or(10),
    );
    let periodics = repos * per_repo;
    let tmp = tempfile::Builder::new()
        .prefix("bosun-repos-memory-bench-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    // About six months away: nothing fires while the daemons are measured.
    let month = (jiff::Zoned::now().month() + 5) % 12 + 1;

    let t = Instant::now();
    make_remotes(&dir, repos, per_repo, month);
    write_configs(&dir, repos, per_repo, month);
    println!(
        "{repos} repositories x {per_repo} periodics ({periodics}) made in {:.2} s; {rounds} rounds, settling {} s",
        t.elapsed().as_secs_f64(),
        settle.as_secs()
    );

    let mut results: Vec<Round> = Vec::new();
    for round in 1..=rounds {
        let daemon = |which: &str, data: &str, log: &str, nrepos: usize| {
            measure(
                &bosun,
                &dir.join(which),
                &dir.join(data),
                dir.join(log),
                nrepos,
                periodics,
                settle,
            )
        };
        let a_data = format!("data-a-{round}");
        let a = daemon("a", &a_data, &format!("a-{round}.log"), repos);
        // A again on its data directory: every repository's snapshot read
        // from the store and composed once at start, as after a restart.
        let again = daemon("a", &a_data, &format!("a-again-{round}.log"), repos);
        let _ = std::fs::remove_dir_all(dir.join(&a_data));
        let b_data = format!("data-b-{round}");
        let b = daemon("b", &b_data, &format!("b-{round}.log"), 0);
        let _ = std::fs::remove_dir_all(dir.join(&b_data));
        let r = Round { a, again, b };
        println!(
            "round {round}: RSS A {:.1} MiB, B {:.1} MiB, A / B {:.3}; peak A {:.1} MiB, B {:.1} MiB; RssAnon A {:.1} MiB, B {:.1} MiB; A followed every repository in {:.1} s (CPU {:.1} s), B ready in {:.1} s (CPU {:.1} s); A restarted: RSS {:.1} MiB (/ B {:.3}), peak {:.1} MiB, ready in {:.1} s",
            mib(a.rss),
            mib(b.rss),
            r.ratio(),
            mib(a.peak),
            mib(b.peak),
            mib(a.anon),
            mib(b.anon),
            a.ready.as_secs_f64(),
            a.cpu,
            b.ready.as_secs_f64(),
            b.cpu,
            mib(again.rss),
            again.rss as f64 / b.rss as f64,
            mib(again.peak),
            again.ready.as_secs_f64(),
        );
        results.push(r);
    }
    if !results.is_empty() {
        let med = |f: &dyn Fn(&Round) -> f64| local::median(results.iter().map(f).collect());
        let ratio = med(&Round::ratio);
        println!(
            "median of {rounds}: RSS A {:.1} MiB, B {:.1} MiB, A / B {ratio:.3} (target <= 1.5: {}); peak A {:.1} MiB, B {:.1} MiB; A followed every repository in {:.1} s, B ready in {:.1} s; A restarted: RSS {:.1} MiB (/ B {:.3})",
            med(&|r| mib(r.a.rss)),
            med(&|r| mib(r.b.rss)),
            if ratio <= 1.5 { "met" } else { "NOT met" },
            med(&|r| mib(r.a.peak)),
            med(&|r| mib(r.b.peak)),
            med(&|r| r.a.ready.as_secs_f64()),
            med(&|r| r.b.ready.as_secs_f64()),
            med(&|r| mib(r.again.rss)),
            med(&|r| r.again.rss as f64 / r.b.rss as f64),
        );
    }
    if std::env::var_os("BOSUN_BENCH_KEEP").is_some() {
        println!("kept {}", tmp.keep().display());
    }
}
