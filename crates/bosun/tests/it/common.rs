//! What the test modules share: a `bosun serve` of a test and the port a
//! daemon logs, a minimal HTTP client, JSON, temporary directories, the
//! outcome of a `bosun` command, and the programs a test needs on PATH.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use expect_test::Expect;

/// The port a daemon started with `--listen 127.0.0.1:0` listens on, read
/// from its log (`log`, its stderr) once it says it is serving (`bosun serving`, `bosun dispatcher serving`). The daemon
/// binds port 0 itself: a port picked by the test and handed over could be
/// taken in between by a parallel test's daemon. Panics, with the log, if the
/// daemon exits first or says nothing before `deadline`.
pub fn logged_port(child: &mut Child, log: &Path, deadline: Instant) -> u16 {
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(port) = crate::proc::serving_port(&text) {
            return port;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the daemon exited ({status}) before serving:\n{text}");
        }
        assert!(Instant::now() < deadline, "daemon did not come up:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A minimal HTTP/1.1 client (one request per connection): status and body.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String) {
    let (status, _, body) = request_full(port, method, path, body, token);
    (status, body)
}

/// Status, head and body.
pub fn request_full(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String, String) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new(), String::new());
    };
    let body = body.unwrap_or("");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    answer(s)
}

/// The answer on `s` (a request sent with `Connection: close`): status,
/// head and body.
pub fn answer(mut s: TcpStream) -> (u16, String, String) {
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = out
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_string(), b.to_string()))
        .unwrap_or_default();
    (status, head, dechunk(&body))
}

pub fn dechunk(body: &str) -> String {
    // Chunked bodies: size line, data, CRLF ... (good enough for tests).
    if !body.contains("\r\n") {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            break;
        }
        out.push_str(&after[..n.min(after.len())]);
        rest = after.get(n + 2..).unwrap_or("");
    }
    out
}

/// A `bosun serve` process of a test: SIGKILLed when dropped (the daemon
/// gets no chance to clean up); a failing test shows the end of its log.
pub struct Serve {
    pub child: Child,
    pub port: u16,
    pub log: std::path::PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "--- the daemon's log ({}, last 200 lines) ---",
                self.log.display()
            );
            for l in &lines[lines.len().saturating_sub(200)..] {
                eprintln!("{l}");
            }
        }
    }
}

/// Starts `bosun serve` on `DIR/config.yaml` and `DIR/jobs`, its data in
/// `DIR/data`, its log in `DIR/daemon-N.log` (a restarted daemon's in a
/// file of its own), on a port of its own, with `args` and `envs` more;
/// returns once `/healthz` answers.
pub fn serve(dir: &Path, args: &[&std::ffi::OsStr], envs: &[(&str, &str)]) -> Serve {
    serve_through(&[], dir, args, envs)
}

/// [`serve`], the daemon started through `through` (a program and its
/// arguments, which run bosun's binary with what follows it: `prlimit
/// --nofile=...`).
pub fn serve_through(
    through: &[&str],
    dir: &Path,
    args: &[&std::ffi::OsStr],
    envs: &[(&str, &str)],
) -> Serve {
    static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = dir.join(format!("daemon-{n}.log"));
    let bosun = env!("CARGO_BIN_EXE_bosun");
    let (program, lead) = match through.split_first() {
        Some((p, lead)) => (*p, [lead, &[bosun]].concat()),
        None => (bosun, Vec::new()),
    };
    let mut child = std::process::Command::new(program)
        .args(lead)
        .arg("serve")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--listen")
        .arg("127.0.0.1:0")
        .args(args)
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let port = logged_port(&mut child, &log, deadline);
    let daemon = Serve { child, port, log };
    while request(port, "GET", "/healthz", None, None).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "the daemon did not answer: {}",
            std::fs::read_to_string(&daemon.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon
}

/// [`serve`] with `extra` arguments and no more environment.
pub fn start(dir: &Path, extra: &[&str]) -> Serve {
    let args: Vec<&std::ffi::OsStr> = extra.iter().map(|a| a.as_ref()).collect();
    serve(dir, &args, &[])
}

/// `s` parsed as JSON; panics with `s` if it is not.
pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// A temporary directory, removed when its `TempDir` is dropped, and its path.
pub fn tmp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_path_buf();
    (d, p)
}

/// Fails the test unless `program` is on PATH, naming the Debian `package`
/// that provides it and `tools/test` (which installs every part the tests
/// need): without it the test would fail later, and less clearly.
pub fn needs(program: &str, package: &str) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join(program).is_file()) {
        panic!(
            "`{program}` is not on PATH, and this test runs it: install it with \
             `apt-get install -y {package}`, or run the tests with tools/test, \
             which installs what they need"
        );
    }
}

/// What one run of `bosun` gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `run` printed `stdout` and nothing on stderr, and exited with `code`.
pub fn assert_run(run: &Run, code: i32, stdout: Expect) {
    assert_eq!(run.stderr, "", "nothing on stderr");
    stdout.assert_eq(&run.stdout);
    assert_eq!(run.code, code, "exit code; stdout:\n{}", run.stdout);
}

/// A copy of the project that every user can reach, for daemons whose jobs
/// run as another user (the quickstart's `run_as: unprivileged` is `nobody`
/// when the tests run as root): the project's root may lie below a
/// directory only its owner can search, wherever it was cloned.
pub struct Reachable {
    /// `DIR/checkout`: `git clone -b main` of the project, with the working
    /// tree's `examples/` copied over it (uncommitted changes included).
    pub checkout: PathBuf,
    /// `DIR/bin`: this test build's `bosun`, linked or copied there.
    pub bin: PathBuf,
}

/// Makes a [`Reachable`] copy in `dir`, which is made searchable by all.
pub fn reachable_copy(dir: &Path) -> Reachable {
    use std::os::unix::fs::PermissionsExt;
    let project = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let checkout = dir.join("checkout");
    let run = |cmd: &mut std::process::Command| {
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {out:?}");
    };
    run(std::process::Command::new("git")
        .args(["clone", "-q", "--no-hardlinks", "-b", "main"])
        .arg(&project)
        .arg(&checkout));
    run(std::process::Command::new("cp")
        .arg("-a")
        .arg(project.join("examples/."))
        .arg(checkout.join("examples")));
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    // A hard link, not a copy: a file being written while another test
    // forks can be held open by that child, and exec'ing it then fails
    // ("Text file busy"). A copy only across file systems.
    let exe = Path::new(env!("CARGO_BIN_EXE_bosun"));
    if std::fs::hard_link(exe, bin.join("bosun")).is_err() {
        std::fs::copy(exe, bin.join("bosun")).unwrap();
    }
    Reachable { checkout, bin }
}

/// The run `id` once `done` holds for its state (within a minute; panics
/// with the run otherwise).
pub fn wait_state(port: u16, id: &str, done: impl Fn(&str) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
        let run = json(&body);
        if done(run["state"].as_str().unwrap_or("")) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} stuck: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What [`check_every_second`] read: every tick with its outcome, by time;
/// and each scheduled run's tick and creation, by tick.
pub struct Ticks {
    /// Every tick of the recorded outcomes, expanded, with its outcome.
    pub seen: Vec<(jiff::Timestamp, String)>,
    /// The scheduled runs' (tick, created_at).
    pub scheduled: Vec<(jiff::Timestamp, jiff::Timestamp)>,
}

/// The checker of an every-second periodic `name` through the API of the
/// daemon on `port`: every second from its first recorded tick to its last
/// has exactly one outcome (a run or a skip), the last at most `fresh`
/// seconds ago; each run outcome names a run of that tick; no tick has two
/// runs; runs and run outcomes match one for one.
pub fn check_every_second(port: u16, name: &str, fresh: i64) -> Ticks {
    use jiff::{SignedDuration, Timestamp};
    let (_, body) = request(
        port,
        "GET",
        &format!("/api/v1/periodics/{name}/ticks"),
        None,
        None,
    );
    let ticks = json(&body)["ticks"].as_array().unwrap().clone();
    let (_, body) = request(
        port,
        "GET",
        &format!("/api/v1/runs?job={name}&limit=10000"),
        None,
        None,
    );
    let runs = json(&body)["runs"].as_array().unwrap().clone();
    let ts = |v: &serde_json::Value| v.as_str().unwrap().parse::<Timestamp>().unwrap();
    let mut seen: Vec<(Timestamp, String)> = Vec::new();
    for o in &ticks {
        let (first, last) = (ts(&o["first_tick"]), ts(&o["last_tick"]));
        let count = o["count"].as_u64().unwrap();
        let span = last.duration_since(first).as_secs() as u64 + 1;
        assert_eq!(
            count, span,
            "{name}: a per-second range counts every second: {o}"
        );
        for i in 0..count {
            seen.push((
                first + SignedDuration::from_secs(i as i64),
                o["outcome"].as_str().unwrap().to_string(),
            ));
        }
        if o["outcome"] == "run" {
            let id = o["run_id"].as_str().expect("a run outcome names its run");
            let run = runs
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("{name}: the run of {o} exists"));
            assert_eq!(ts(&run["scheduled_at"]), first);
        }
    }
    seen.sort();
    let n = seen.len();
    assert!(n > 0, "{name}: no tick recorded");
    let mut distinct: Vec<Timestamp> = seen.iter().map(|(t, _)| *t).collect();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        n,
        "{name}: a tick with two outcomes: {ticks:?}"
    );
    assert_eq!(
        distinct[n - 1].duration_since(distinct[0]).as_secs() as usize + 1,
        n,
        "{name}: every second from the first tick to the last has an outcome: {ticks:?}"
    );
    assert!(
        Timestamp::now().duration_since(distinct[n - 1]).as_secs() <= fresh,
        "{name}: ticks are still being recorded"
    );
    // The runs were read after the ticks: a tick fired in between has its
    // run in `runs` and not its outcome in `ticks`. Runs of ticks after the
    // last one read are left out.
    let last_read = distinct[n - 1];
    let mut scheduled: Vec<(Timestamp, Timestamp)> = runs
        .iter()
        .filter(|r| !r["scheduled_at"].is_null())
        .map(|r| (ts(&r["scheduled_at"]), ts(&r["created_at"])))
        .filter(|(t, _)| *t <= last_read)
        .collect();
    let m = scheduled.len();
    scheduled.sort();
    scheduled.dedup_by_key(|(t, _)| *t);
    assert_eq!(scheduled.len(), m, "{name}: no tick has two runs");
    assert_eq!(
        m,
        seen.iter().filter(|(_, o)| o == "run").count(),
        "{name}: runs and run outcomes match"
    );
    Ticks { seen, scheduled }
}
