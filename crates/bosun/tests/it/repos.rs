//! Repositories as the source of jobs, end to end through `bosun serve`:
//! bare repositories served over HTTP by `git http-backend` on loopback
//! (`bosun_git::testing`), real commits pushed to them, and bosun driven by
//! signed webhooks built as each forge sends them (`bosun_forge::testing`;
//! every GitHub payload validated against GitHub's webhook description
//! first), by its resync, and by refreshes over the API and the CLI.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use bosun_forge::testing::{fixture_json, github_example, github_push, Request};
use bosun_git::testing::{GitServer, WorkRepo};
use serde_json::{json, Value};

use crate::common::{answer, json, request, serve, tmp, Serve};

/// The token the tests' secret file gives every repository.
const TOKEN: &[u8] = b"s3cret-token";

/// A Lighthouse `triggers.yaml` with the periodic `nightly` on `cron` (and
/// `weekly` beside it), running `true` on the local `default` cluster.
fn triggers(cron: &str) -> String {
    format!(
        "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - name: nightly\n    cron: \"{cron}\"\n    spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n  - name: weekly\n    cron: \"0 5 * * 1\"\n    spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"
    )
}

/// `triggers.yaml` with `weekly` only.
fn triggers_weekly_only() -> String {
    "apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics:\n  - name: weekly\n    cron: \"0 5 * * 1\"\n    spec: {containers: [{image: x, command: [\"true\"]}]}\n".to_string()
}

/// A test's world: a git server, a working copy of `acme/app` pushed to
/// it, and the daemon's directory.
struct World {
    dir: std::path::PathBuf,
    git: GitServer,
    work: WorkRepo,
}

impl World {
    /// `acme/app` with `triggers.yaml` on `cron`, pushed; the daemon's
    /// configuration follows it (with `extra` config lines), its secret
    /// file gives every repository [`TOKEN`].
    fn new(dir: &Path, extra: &str) -> World {
        let git = GitServer::start(dir.join("git"));
        git.create("acme/app", "main");
        let work = WorkRepo::init(dir.join("work"), "main");
        work.write(".lighthouse/jobs/triggers.yaml", &triggers("0 3 * * *"));
        work.write(
            ".prow.yaml",
            "presubmits:\n- name: unit\n  always_run: true\n  spec: {containers: [{image: x, command: [\"true\"]}]}\npostsubmits:\n- name: publish\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
        );
        work.commit("first");
        work.push(&git.repo_dir("acme/app"), "main", false);
        std::fs::create_dir_all(dir.join("jobs")).unwrap();
        let world = World {
            dir: dir.to_path_buf(),
            git,
            work,
        };
        world.write_config(extra);
        std::fs::write(
            dir.join("hmac.yaml"),
            format!(
                "'*': [{{value: {}, created_at: 2026-01-01T00:00:00Z}}]\n",
                String::from_utf8_lossy(TOKEN)
            ),
        )
        .unwrap();
        world
    }

    fn write_config(&self, extra: &str) {
        std::fs::write(
            self.dir.join("config.yaml"),
            format!(
                "build_clusters:\n  default: {{kind: local}}\n  other: {{kind: local}}\nin_repo:\n- repo: acme/app\n  clone_uri: {}\n  branch: main\n{extra}",
                self.git.url("acme/app")
            ),
        )
        .unwrap();
    }

    fn start(&self, more: &[&str]) -> Serve {
        let secret = self.dir.join("hmac.yaml");
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["--hmac-secret-file".as_ref(), secret.as_os_str()];
        args.extend(more.iter().map(|a| std::ffi::OsStr::new(*a)));
        serve(&self.dir, &args, &[])
    }

    /// Commits `file` with `text` (or removes it) and pushes; the commit.
    fn push(&self, file: &str, text: Option<&str>) -> String {
        match text {
            Some(t) => self.work.write(file, t),
            None => self.work.remove(file),
        };
        let c = self.work.commit(&format!("change {file}"));
        self.work
            .push(&self.git.repo_dir("acme/app"), "main", false);
        c
    }
}

/// Sends `req` to `POST /hook` with delivery id `id`: status and body.
fn send(port: u16, req: Request, id: &str) -> (u16, String) {
    let req = if req.headers.contains_key("X-GitHub-Delivery") {
        req.with("X-GitHub-Delivery", id)
    } else {
        req
    };
    let req = if req.headers.contains_key("X-Gitea-Delivery") {
        req.with("X-Gitea-Delivery", id)
    } else {
        req
    };
    let req = if req.headers.contains_key("Idempotency-Key") {
        req.with("Idempotency-Key", id)
    } else {
        req
    };
    raw_request(port, &req)
}

/// `req` as it is on the wire.
pub fn raw_request(port: u16, req: &Request) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut head = format!(
        "{} /hook HTTP/1.1\r\nHost: x\r\nConnection: close\r\n",
        req.method
    );
    for (name, value) in &req.headers {
        head.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    if !req.headers.contains_key("Content-Length") {
        head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(&req.body);
    let (status, _, body) = answer(s);
    (status, body)
}

/// A signed GitHub push to `acme/app` of `before..after`, answered 200.
fn hook_push(w: &World, port: u16, id: &str, before: &str, after: &str) {
    let body = github_push("acme/app", &w.git.url("acme/app"), before, after, false);
    let (status, text) = send(port, Request::github("push", body, TOKEN), id);
    assert_eq!(
        (status, text.as_str()),
        (200, "Event received. Have a nice day.")
    );
}

fn repos(port: u16) -> Vec<Value> {
    let (status, body) = request(port, "GET", "/api/v1/repos", None, None);
    assert_eq!(status, 200, "{body}");
    json(&body)["repos"].as_array().unwrap().clone()
}

fn repo(port: u16, name: &str) -> Option<Value> {
    repos(port).into_iter().find(|r| r["repo"] == name)
}

/// Waits until `name`'s repository satisfies `cond` (loads are
/// asynchronous).
fn wait_repo(port: u16, name: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(r) = repo(port, name) {
            if cond(&r) {
                return r;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {:#}",
            repo(port, name).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn periodic(port: u16, identity: &str) -> Option<Value> {
    let (_, body) = request(port, "GET", "/api/v1/periodics", None, None);
    let v = json(&body);
    v["periodics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["identity"] == identity)
        .cloned()
}

fn wait_periodic(port: u16, identity: &str, what: &str, cond: impl Fn(Option<&Value>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = periodic(port, identity);
        if cond(p.as_ref()) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {p:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Triggers `identity` now; the run.
fn trigger(port: u16, identity: &str) -> Value {
    let path = format!("/api/v1/periodics/{}/trigger", identity.replace('/', "%2F"));
    let (status, body) = request(port, "POST", &path, None, None);
    assert_eq!(status, 201, "{body}");
    json(&body)
}

fn metric(port: u16, prefix: &str) -> f64 {
    let (_, body) = request(port, "GET", "/metrics", None, None);
    body.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Pushes, webhooks and their effects on one repository's periodics: in
/// force at start, changed by a push, a broken push refused with file:line
/// and commit (the last good stays, runs take the new head), a periodic
/// removed and retired with its history kept, pushes delivered out of
/// order, a force-push, a push with no webhook caught up by a refresh.
#[test]
fn pushes_register_change_refuse_and_retire_in_repo_periodics() {
    let (_d, dir) = tmp();
    let w = World::new(&dir, "");
    let first = w.work.git(&["rev-parse", "HEAD"]).trim().to_string();
    let daemon = w.start(&[]);
    let port = daemon.port;

    // Followed from the remote at start: its periodics, presubmits and
    // postsubmits in force.
    let r = wait_repo(port, "acme/app", "the first load", |r| {
        r["state"] == "following"
    });
    assert_eq!(r["commit"], first.as_str());
    assert_eq!(r["branch"], "main");
    assert_eq!(r["followed_because"], "in_repo[0] of the configuration");
    assert_eq!(
        r["jobs_in_force"]["periodics"],
        json!(["nightly", "weekly"])
    );
    assert_eq!(r["jobs_in_force"]["presubmits"], json!(["unit"]));
    assert_eq!(r["jobs_in_force"]["postsubmits"], json!(["publish"]));
    let p = periodic(port, "acme/app:nightly").expect("the in-repo periodic");
    assert_eq!(p["schedule"], "0 3 * * *");

    // A run: the branch head as its refs, the definition's commit beside.
    let run = trigger(port, "acme/app:nightly");
    assert_eq!(run["refs"]["base_sha"], first.as_str(), "{run:#}");
    assert_eq!(run["refs"]["base_ref"], "main");
    assert_eq!(
        run["annotations"]["bosun.dev/definition-commit"],
        first.as_str()
    );
    let first_run = run["id"].as_str().unwrap().to_string();

    // A second push changes the schedule.
    let second = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 4 * * *")),
    );
    hook_push(&w, port, "d-2", &first, &second);
    wait_periodic(port, "acme/app:nightly", "the new schedule", |p| {
        p.is_some_and(|p| p["schedule"] == "0 4 * * *")
    });
    let r = wait_repo(port, "acme/app", "the second commit", |r| {
        r["commit"] == second.as_str()
    });
    assert_eq!(r["head"]["by"], "push");
    assert!(r["last_webhook_at"].is_string(), "{r:#}");

    // A third breaks the YAML: the last good stays, the error names the
    // file, the line and the commit; runs take the new head as refs.
    let third = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some("apiVersion: config.lighthouse.jenkins-x.io/v1alpha1\nkind: TriggerConfig\nspec:\n  periodics: [\n"),
    );
    hook_push(&w, port, "d-3", &second, &third);
    let r = wait_repo(port, "acme/app", "the refused commit", |r| {
        r["state"] == "error"
    });
    assert_eq!(r["commit"], second.as_str(), "the last good stays: {r:#}");
    assert_eq!(r["error"]["commit"], third.as_str());
    let diagnostics = r["error"]["diagnostics"].as_array().unwrap();
    let place = format!("acme/app@{third}/.lighthouse/jobs/triggers.yaml:");
    assert!(
        diagnostics
            .iter()
            .any(|d| d.as_str().unwrap().starts_with(&place)),
        "an error at {place}LINE: {diagnostics:#?}"
    );
    assert_eq!(
        periodic(port, "acme/app:nightly").unwrap()["schedule"],
        "0 4 * * *"
    );
    assert_eq!(
        metric(port, "bosun_repo_config_error{repo=\"acme/app\"}"),
        1.0
    );
    // The same error on the dashboard's Config page, and from `bosun check`
    // on a checkout of that commit.
    let (status, page) = request(port, "GET", "/config", None, None);
    assert_eq!(status, 200);
    assert!(page.contains(r#"id="repos""#), "{page}");
    assert!(
        page.contains(&format!("acme/app@{third}/.lighthouse/jobs/triggers.yaml")),
        "{page}"
    );
    let line = diagnostics[0].as_str().unwrap()[place.len()..]
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["check", "--in-repo"])
        .arg(format!("acme/app={}", w.work.dir().display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&checked.stdout).to_string()
        + &String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success(), "{text}");
    assert!(
        text.contains(&format!(".lighthouse/jobs/triggers.yaml:{line}:")),
        "bosun check names the same line {line}: {text}"
    );
    let run = trigger(port, "acme/app:nightly");
    assert_eq!(run["refs"]["base_sha"], third.as_str());
    assert_eq!(
        run["annotations"]["bosun.dev/definition-commit"],
        second.as_str()
    );

    // A fourth removes `nightly`: retired with the commit, its runs kept.
    let fourth = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers_weekly_only()),
    );
    hook_push(&w, port, "d-4", &third, &fourth);
    wait_periodic(port, "acme/app:nightly", "nightly retired", |p| p.is_none());
    let r = wait_repo(port, "acme/app", "the fourth commit", |r| {
        r["commit"] == fourth.as_str()
    });
    assert_eq!(r["state"], "following");
    let retired = r["retired_jobs"].as_array().unwrap();
    assert!(
        retired.iter().any(|j| j["name"] == "nightly"
            && j["kind"] == "periodic"
            && j["commit"] == fourth.as_str()),
        "{retired:#?}"
    );
    assert!(periodic(port, "acme/app:weekly").is_some());
    let (status, _) = request(
        port,
        "GET",
        &format!("/api/v1/runs/{first_run}"),
        None,
        None,
    );
    assert_eq!(status, 200, "a retired periodic's history is kept");

    // Two pushes delivered out of order: the older never wins.
    let fifth = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 6 * * *")),
    );
    let sixth = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 7 * * *")),
    );
    hook_push(&w, port, "d-6", &fifth, &sixth);
    wait_repo(port, "acme/app", "the sixth commit", |r| {
        r["commit"] == sixth.as_str()
    });
    hook_push(&w, port, "d-5", &fourth, &fifth);
    // The older delivery is processed (the counter of pushes moves) and
    // changes nothing.
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(port, "bosun_repo_pushes") < 5.0 {
        assert!(
            Instant::now() < deadline,
            "the fifth push was not processed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(repo(port, "acme/app").unwrap()["commit"], sixth.as_str());
    assert_eq!(
        periodic(port, "acme/app:nightly").unwrap()["schedule"],
        "0 7 * * *"
    );

    // A force-push back to the fifth commit's tree applies.
    w.work.git(&["reset", "--hard", &fifth]);
    w.work
        .write(".lighthouse/jobs/triggers.yaml", &triggers("0 8 * * *"));
    let forced = w.work.commit("forced");
    w.work.push(&w.git.repo_dir("acme/app"), "main", true);
    let body = github_push("acme/app", &w.git.url("acme/app"), &sixth, &forced, true);
    let (status, _) = send(port, Request::github("push", body, TOKEN), "d-forced");
    assert_eq!(status, 200);
    wait_repo(port, "acme/app", "the forced commit", |r| {
        r["commit"] == forced.as_str()
    });
    wait_periodic(port, "acme/app:nightly", "the forced schedule", |p| {
        p.is_some_and(|p| p["schedule"] == "0 8 * * *")
    });

    // A push with no webhook: a refresh by the API loads it.
    let quiet = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 9 * * *")),
    );
    let (status, body) = request(port, "POST", "/api/v1/repos/acme/app/refresh", None, None);
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["outcome"], "applied");
    assert_eq!(v["commit"], quiet.as_str());
    assert_eq!(
        periodic(port, "acme/app:nightly").unwrap()["schedule"],
        "0 9 * * *"
    );
    // And once more: nothing moved.
    let (_, body) = request(port, "POST", "/api/v1/repos/acme/app/refresh", None, None);
    assert_eq!(json(&body)["outcome"], "unchanged");
    // A delivery id seen before is acknowledged and not processed again.
    let pushes = metric(port, "bosun_repo_pushes");
    hook_push(&w, port, "d-2", &first, &second);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(metric(port, "bosun_repo_pushes"), pushes);
    // Seven pushes answered 200 (one of them a redelivery), by Prow's names.
    assert_eq!(
        metric(port, "prow_webhook_counter{event_type=\"push\"}"),
        7.0
    );
    assert_eq!(
        metric(port, "prow_webhook_response_codes{response_code=\"200\"}"),
        7.0
    );
}

/// The resync catches a push whose webhook never came; a repository gone
/// from its remote for longer than `repos.gone_after` is retired, and comes
/// back with its jobs when it is there again.
#[test]
fn the_resync_catches_missed_pushes_and_retires_a_repository_gone_for_the_grace() {
    let (_d, dir) = tmp();
    let w = World::new(&dir, "repos: {resync: 1s, gone_after: 3s}\n");
    let daemon = w.start(&[]);
    let port = daemon.port;
    wait_repo(port, "acme/app", "the first load", |r| {
        r["state"] == "following"
    });
    let missed = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 11 * * *")),
    );
    let r = wait_repo(port, "acme/app", "the resync", |r| {
        r["commit"] == missed.as_str()
    });
    assert_eq!(r["head"]["by"], "resync");
    assert_eq!(
        periodic(port, "acme/app:nightly").unwrap()["schedule"],
        "0 11 * * *"
    );
    // Gone: moved away on the server.
    let repo_dir = w.git.repo_dir("acme/app");
    let away = dir.join("away.git");
    std::fs::rename(&repo_dir, &away).unwrap();
    let r = wait_repo(port, "acme/app", "missing", |r| {
        r["missing_since"].is_string()
    });
    assert_eq!(r["state"], "error", "missing, not retired yet: {r:#}");
    assert!(periodic(port, "acme/app:nightly").is_some());
    let r = wait_repo(port, "acme/app", "retired after the grace", |r| {
        r["state"] == "retired"
    });
    assert!(
        r["retired"]["reason"].as_str().unwrap().starts_with("gone"),
        "{r:#}"
    );
    wait_periodic(port, "acme/app:nightly", "retired", |p| p.is_none());
    // Back: the next resync finds it, and its jobs come back.
    std::fs::rename(&away, &repo_dir).unwrap();
    wait_repo(port, "acme/app", "back", |r| r["state"] == "following");
    wait_periodic(port, "acme/app:nightly", "back", |p| p.is_some());
}

/// A delivery answered 200 and then lost to a kill -9 before it was
/// processed is processed once at the next start; a start with the remote
/// down fires from the stored snapshot at once.
#[test]
fn a_delivery_stored_before_a_crash_is_processed_once_and_the_stored_snapshot_serves_offline() {
    let (_d, dir) = tmp();
    let w = World::new(&dir, "");
    let first = w.work.git(&["rev-parse", "HEAD"]).trim().to_string();
    let mut daemon = w.start(&[]);
    wait_repo(daemon.port, "acme/app", "the first load", |r| {
        r["state"] == "following"
    });
    drop(daemon);
    // Stored, answered, not processed: then killed.
    daemon = w.start(&["--webhook-hold"]);
    // Its resync at start has asked the remote (the next is minutes away).
    wait_repo(daemon.port, "acme/app", "the resync at start", |r| {
        r["last_answer_at"].is_string()
    });
    let second = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 12 * * *")),
    );
    hook_push(&w, daemon.port, "crash-1", &first, &second);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        repo(daemon.port, "acme/app").unwrap()["commit"],
        first.as_str()
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.child.id() as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    drop(daemon);
    // The next start replays it, once.
    daemon = w.start(&[]);
    let port = daemon.port;
    wait_repo(port, "acme/app", "the replayed push", |r| {
        r["commit"] == second.as_str()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(port, "bosun_repo_pushes") < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the stored push was not replayed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Redelivered by the forge: acknowledged, not processed again.
    hook_push(&w, port, "crash-1", &first, &second);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(metric(port, "bosun_repo_pushes"), 1.0);
    drop(daemon);
    // The remote down: the stored snapshot is in force at once.
    drop(w.git);
    let daemon = serve(
        &dir,
        &[
            "--hmac-secret-file".as_ref(),
            dir.join("hmac.yaml").as_os_str(),
        ],
        &[],
    );
    let port = daemon.port;
    let p = periodic(port, "acme/app:nightly").expect("in force from the store at start");
    assert_eq!(p["schedule"], "0 12 * * *");
    let run = trigger(port, "acme/app:nightly");
    assert_eq!(run["refs"]["base_sha"], second.as_str());
}

/// A reload that adds a repository follows it; a reload whose central
/// configuration refuses an in-repo job keeps that job's last good form and
/// shows the error; `bosun repos` and `bosun repos refresh` show and load.
#[test]
fn reloads_add_repositories_and_a_refused_in_repo_job_keeps_its_last_good_form() {
    let (_d, dir) = tmp();
    let w = World::new(&dir, "");
    w.git.create("acme/lib", "main");
    let lib = WorkRepo::init(dir.join("lib"), "main");
    lib.write(".lighthouse/jobs/triggers.yaml", &triggers_weekly_only());
    lib.commit("lib");
    lib.push(&w.git.repo_dir("acme/lib"), "main", false);
    let daemon = w.start(&[]);
    let port = daemon.port;
    wait_repo(port, "acme/app", "the first load", |r| {
        r["state"] == "following"
    });
    assert!(repo(port, "acme/lib").is_none());
    // Added by the configuration's `in_repo_config.enabled`.
    w.write_config(&format!(
        "repos: {{clone_base: {}}}\nin_repo_config:\n  enabled: {{acme/lib: true}}\n",
        w.git.url("acme/lib").trim_end_matches("/acme/lib.git")
    ));
    let (status, body) = request(port, "POST", "/api/v1/config/reload", None, None);
    assert_eq!(status, 200, "{body}");
    let r = wait_repo(port, "acme/lib", "added by the reload", |r| {
        r["state"] == "following"
    });
    assert_eq!(r["followed_because"], "in_repo_config.enabled[acme/lib]");
    assert!(periodic(port, "acme/lib:weekly").is_some());
    // A central configuration that refuses the in-repo jobs' cluster.
    w.write_config("in_repo_config:\n  allowed_clusters: {'*': [other]}\n");
    let (status, body) = request(port, "POST", "/api/v1/config/reload", None, None);
    assert_eq!(status, 200, "{body}");
    let r = wait_repo(
        port,
        "acme/app",
        "refused by the central configuration",
        |r| r["state"] == "error",
    );
    let diagnostics = r["error"]["diagnostics"].to_string();
    assert!(diagnostics.contains("allowed_clusters"), "{r:#}");
    assert!(
        periodic(port, "acme/app:nightly").is_some(),
        "the last good form stays"
    );
    // acme/lib is no longer wanted: retired.
    let r = wait_repo(port, "acme/lib", "retired", |r| r["state"] == "retired");
    assert!(r["retired"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("removed from the configuration"));
    assert!(periodic(port, "acme/lib:weekly").is_none());
    // The CLI lists them, and refreshes one.
    let server = format!("http://127.0.0.1:{port}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["repos", "--server", &server])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("acme/app") && text.contains("allowed_clusters"),
        "{text}"
    );
    assert!(
        text.contains("acme/lib") && text.contains("retired"),
        "{text}"
    );
    w.write_config("");
    request(port, "POST", "/api/v1/config/reload", None, None);
    let change = w.push(
        ".lighthouse/jobs/triggers.yaml",
        Some(&triggers("0 13 * * *")),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["repos", "refresh", "acme/app", "--server", &server])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "the configuration at {} is in force",
            &change[..12]
        )),
        "{text}"
    );
}

/// Every way a webhook is refused, and the forges' other shapes: a
/// missing or wrong signature, an old token during a rotation, an org-level
/// versus a repository-level token, an oversized body; a Gitea-signed push
/// (GitHub's headers also present) and a GitLab token push each register a
/// periodic of a repository followed from its first webhook.
#[test]
fn webhooks_are_signed_with_the_secret_files_levels_and_every_forge_registers() {
    let (_d, dir) = tmp();
    let w = World::new(&dir, "in_repo_config:\n  enabled: {tea: true, lab: true}\n");
    for (repo, branch) in [("tea/app", "main"), ("lab/app", "main")] {
        w.git.create(repo, branch);
        w.work.push(&w.git.repo_dir(repo), "main", false);
    }
    let head = w.work.git(&["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(
        dir.join("hmac.yaml"),
        "'*': [{value: s3cret-token}]\nacme: [{value: org-old}, {value: org-new}]\nacme/app: [{value: repo-only}]\ntea: [{value: tea-token}]\nlab: [{value: lab-token}]\n",
    )
    .unwrap();
    let daemon = w.start(&["--hook-max-body", "200000"]);
    let port = daemon.port;
    let push = github_push("acme/app", &w.git.url("acme/app"), &head, &head, false);
    // Unsigned.
    let (status, body) = send(
        port,
        Request::github("push", push.clone(), b"x").without("X-Hub-Signature-256"),
        "s-1",
    );
    assert_eq!(
        (status, body.as_str()),
        (403, "403 Forbidden: Missing X-Hub-Signature-256\n")
    );
    // Wrong, and the organization's token where the repository has its own.
    for token in [&b"wrong"[..], b"org-new", b"s3cret-token"] {
        let (status, _) = send(port, Request::github("push", push.clone(), token), "s-2");
        assert_eq!(status, 403, "{}", String::from_utf8_lossy(token));
    }
    let (status, _) = send(
        port,
        Request::github("push", push.clone(), b"repo-only"),
        "s-3",
    );
    assert_eq!(status, 200);
    // Rotation: both of the organization's tokens, for its other repositories.
    let other = github_push("acme/other", &w.git.url("acme/other"), &head, &head, false);
    for (i, token) in [&b"org-old"[..], b"org-new"].iter().enumerate() {
        let (status, _) = send(
            port,
            Request::github("push", other.clone(), token),
            &format!("s-rot-{i}"),
        );
        assert_eq!(status, 200);
    }
    // Too large.
    let mut big = github_example("push-branch-created.json");
    big["head_commit"]["message"] = json!("x".repeat(300_000));
    let big = serde_json::to_vec(&big).unwrap();
    let (status, body) = send(port, Request::github("push", big, TOKEN), "s-big");
    assert_eq!(status, 413, "{body}");
    // Gitea, with GitHub's headers too: followed from this first webhook.
    let mut tea = fixture_json("gitea/push.json");
    tea["before"] = json!("0000000000000000000000000000000000000000");
    tea["after"] = json!(head);
    tea["repository"]["full_name"] = json!("tea/app");
    tea["repository"]["name"] = json!("app");
    tea["repository"]["owner"]["login"] = json!("tea");
    tea["repository"]["owner"]["username"] = json!("tea");
    tea["repository"]["clone_url"] = json!(w.git.url("tea/app"));
    let (status, body) = send(
        port,
        Request::gitea("push", serde_json::to_vec(&tea).unwrap(), b"tea-token"),
        "tea-1",
    );
    assert_eq!(status, 200, "{body}");
    let r = wait_repo(port, "tea/app", "followed from Gitea", |r| {
        r["state"] == "following"
    });
    assert_eq!(
        r["followed_because"],
        "webhook for tea/app under in_repo_config.enabled[tea]"
    );
    assert!(periodic(port, "tea/app:nightly").is_some());
    // GitLab's token.
    let mut lab = fixture_json("gitlab/push.json");
    lab["after"] = json!(head);
    lab["checkout_sha"] = json!(head);
    lab["project"]["path_with_namespace"] = json!("lab/app");
    lab["project"]["git_http_url"] = json!(w.git.url("lab/app"));
    lab["project"]["default_branch"] = json!("main");
    let (status, body) = send(
        port,
        Request::gitlab("Push Hook", serde_json::to_vec(&lab).unwrap(), b"lab-token"),
        "lab-1",
    );
    assert_eq!(status, 200, "{body}");
    wait_repo(port, "lab/app", "followed from GitLab", |r| {
        r["state"] == "following"
    });
    assert!(periodic(port, "lab/app:nightly").is_some());
    // A repository under no enabled key is not followed.
    assert!(repo(port, "acme/other").is_none());
    assert!(metric(port, "prow_webhook_response_codes{response_code=\"403\"}") >= 4.0);
    assert!(metric(port, "prow_webhook_response_codes{response_code=\"413\"}") >= 1.0);
}

/// A remote that needs a token is followed with `in_repo[].token_file`,
/// sent as a header: the token is never in the API's answers nor the log;
/// a wrong token is an error that says what to check.
#[test]
fn a_remote_needing_a_token_is_followed_with_the_token_file_and_never_shows_it() {
    use base64::Engine as _;
    let (_d, dir) = tmp();
    let w = World::new(&dir, "");
    let token = "tok-3f9a1c7e5b2d";
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
    w.git.require_authorization(Some(&format!("Basic {basic}")));
    std::fs::write(dir.join("token"), "wrong-token\n").unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "build_clusters:\n  default: {{kind: local}}\nin_repo:\n- repo: acme/app\n  clone_uri: {}\n  branch: main\n  token_file: token\nin_repo_config:\n  enabled: {{tea: true}}\nrepos: {{token_file: token}}\n",
            w.git.url("acme/app")
        ),
    )
    .unwrap();
    let daemon = w.start(&[]);
    let port = daemon.port;
    let r = wait_repo(port, "acme/app", "refused", |r| r["state"] == "error");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("acme/app"), "{message}");
    // The token file is read at each use: the right token, then a refresh.
    std::fs::write(dir.join("token"), format!("{token}\n")).unwrap();
    let (status, body) = request(port, "POST", "/api/v1/repos/acme/app/refresh", None, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["outcome"], "applied");
    assert!(periodic(port, "acme/app:nightly").is_some());
    // A repository followed from its first webhook takes `repos.token_file`.
    w.git.create("tea/app", "main");
    w.work.push(&w.git.repo_dir("tea/app"), "main", false);
    let head = w.work.git(&["rev-parse", "HEAD"]).trim().to_string();
    let body = github_push("tea/app", &w.git.url("tea/app"), &head, &head, false);
    let (status, _) = send(port, Request::github("push", body, TOKEN), "tok-1");
    assert_eq!(status, 200);
    wait_repo(port, "tea/app", "followed with the token", |r| {
        r["state"] == "following"
    });
    let (_, all) = request(port, "GET", "/api/v1/repos", None, None);
    let log = std::fs::read_to_string(&daemon.log).unwrap();
    for text in [&all, &log] {
        assert!(!text.contains(token) && !text.contains(&basic), "{text}");
        assert!(!text.contains("wrong-token"), "{text}");
    }
}

/// GitHub's `repository` events: an archived repository's jobs are retired
/// and come back when it is unarchived; a deleted or renamed one's are
/// retired, with the reason.
#[test]
fn repository_events_retire_and_bring_back_a_repositorys_jobs() {
    let (_d, dir) = tmp();
    let w = World::new(&dir, "");
    w.git.create("acme/lib", "main");
    w.work.push(&w.git.repo_dir("acme/lib"), "main", false);
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "build_clusters:\n  default: {{kind: local}}\nin_repo:\n- {{repo: acme/app, clone_uri: '{}', branch: main}}\n- {{repo: acme/lib, clone_uri: '{}', branch: main}}\n",
            w.git.url("acme/app"),
            w.git.url("acme/lib")
        ),
    )
    .unwrap();
    let daemon = w.start(&[]);
    let port = daemon.port;
    for repo in ["acme/app", "acme/lib"] {
        wait_repo(port, repo, "the first load", |r| r["state"] == "following");
    }
    let event = |action: &str, repo: &str, renamed_from: Option<&str>| {
        let mut body = fixture_json("github/repository-deleted.json");
        let (org, name) = repo.split_once('/').unwrap();
        body["action"] = json!(action);
        body["repository"]["full_name"] = json!(repo);
        body["repository"]["name"] = json!(name);
        body["repository"]["owner"]["login"] = json!(org);
        body["organization"]["login"] = json!(org);
        body["repository"]["archived"] = json!(action == "archived");
        if let Some(from) = renamed_from {
            body["changes"] = json!({"repository": {"name": {"from": from}}});
        }
        serde_json::to_vec(&body).unwrap()
    };
    let send_event = |action: &str, repo: &str, from: Option<&str>, id: &str| {
        let req = Request::github("repository", event(action, repo, from), TOKEN);
        let (status, body) = send(port, req, id);
        assert_eq!(status, 200, "{body}");
    };
    send_event("archived", "acme/app", None, "r-1");
    let r = wait_repo(port, "acme/app", "archived", |r| r["state"] == "retired");
    assert_eq!(r["retired"]["reason"], "archived (repository webhook)");
    wait_periodic(port, "acme/app:nightly", "retired", |p| p.is_none());
    send_event("unarchived", "acme/app", None, "r-2");
    wait_repo(port, "acme/app", "unarchived", |r| {
        r["state"] == "following"
    });
    wait_periodic(port, "acme/app:nightly", "back", |p| p.is_some());
    // Renamed: the old name's jobs retire.
    send_event("renamed", "acme/library", Some("lib"), "r-3");
    let r = wait_repo(port, "acme/lib", "renamed", |r| r["state"] == "retired");
    assert_eq!(
        r["retired"]["reason"],
        "renamed to acme/library (repository webhook)"
    );
    wait_periodic(port, "acme/lib:nightly", "retired", |p| p.is_none());
    send_event("deleted", "acme/app", None, "r-4");
    let r = wait_repo(port, "acme/app", "deleted", |r| r["state"] == "retired");
    assert_eq!(r["retired"]["reason"], "deleted (repository webhook)");
}
