//! Pull requests, comments and pushes start jobs, and the results go back
//! to the forge, end to end through `bosun serve` on local clusters: real
//! git (`git http-backend` on loopback), signed webhooks built from
//! GitHub's example payloads (each validated against GitHub's webhook
//! description first), and a fake GitHub API that validates every request
//! bosun sends against GitHub's REST description
//! (`bosun_forge::testing::github_api`).

use std::path::Path;
use std::time::{Duration, Instant};

use bosun_forge::testing::github_api::{FakeGitHub, PullSpec, Status};
use bosun_forge::testing::{
    bytes, github_example, github_pull_request, github_schema_errors, PullEvent, Request,
};
use bosun_git::testing::{GitServer, WorkRepo};
use serde_json::{json, Value};

use crate::common::{json, request, serve, tmp, Serve};

/// The token the tests' secret file gives every repository.
const TOKEN: &[u8] = b"s3cret-token";
const REPO: &str = "acme/app";

/// The central presubmits: `unit` always runs and passes, `lint` runs when
/// `src/` changes and fails, `docs` runs when `docs/` changes; `slow` runs
/// when `slow/` changes and takes a minute.
const JOBS: &str = r#"presubmits:
  acme/app:
  - name: unit
    always_run: true
    spec: {containers: [{image: x, command: ["true"]}]}
  - name: lint
    run_if_changed: '^src/'
    spec: {containers: [{image: x, command: ["false"]}]}
  - name: docs
    run_if_changed: '^docs/'
    spec: {containers: [{image: x, command: ["true"]}]}
  - name: slow
    run_if_changed: '^slow/'
    spec: {containers: [{image: x, command: ["sleep", "60"]}]}
postsubmits:
  acme/app:
  - name: publish
    branches: [main]
    spec: {containers: [{image: x, command: ["true"]}]}
  - name: release
    branches: ['^v\d+']
    spec: {containers: [{image: x, command: ["true"]}]}
"#;

/// A test's world: the git server with `acme/app`, its working copy, the
/// fake GitHub, and the daemon's directory.
struct World {
    dir: std::path::PathBuf,
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
        gh.add_commit(REPO, &base);
        std::fs::write(dir.join("gh-token"), gh.token()).unwrap();
        World {
            dir: dir.to_path_buf(),
            git,
            work,
            gh,
            base,
        }
    }

    fn start(&self) -> Serve {
        self.start_with(&[])
    }

    fn start_with(&self, more: &[&std::ffi::OsStr]) -> Serve {
        let token = self.dir.join("gh-token");
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["--github-token-path".as_ref(), token.as_os_str()];
        args.extend_from_slice(more);
        self.start_bare(&args)
    }

    /// The daemon with the webhook secret, the fake's endpoint and `more`
    /// (its credentials).
    fn start_bare(&self, more: &[&std::ffi::OsStr]) -> Serve {
        let secret = self.dir.join("hmac.yaml");
        let url = self.gh.url();
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "--hmac-secret-file".as_ref(),
            secret.as_os_str(),
            "--github-endpoint".as_ref(),
            url.as_ref(),
            "--external-url".as_ref(),
            "https://bosun.example.com".as_ref(),
        ];
        args.extend_from_slice(more);
        serve(&self.dir, &args, &[])
    }

    /// A pull request `number` by `author` from a branch changing `files`,
    /// pushed as GitHub keeps it (`refs/pull/N/head`) and registered with
    /// the fake: its head commit.
    fn open_pull(&self, number: u64, author: &str, files: &[(&str, &str)]) -> String {
        let branch = format!("pr-{number}");
        self.work
            .git(&["checkout", "--quiet", "-B", &branch, &self.base]);
        for (path, text) in files {
            self.work.write(path, text);
        }
        let head = self.work.commit(&format!("pull {number}"));
        self.work.push(
            &self.git.repo_dir(REPO),
            &format!("{branch}:refs/pull/{number}/head"),
            true,
        );
        self.work.git(&["checkout", "--quiet", "main"]);
        self.gh.add_pull(
            REPO,
            PullSpec {
                number,
                author: author.into(),
                head_ref: branch,
                head_sha: head.clone(),
                base_ref: "main".into(),
                base_sha: self.base.clone(),
                ..PullSpec::default()
            },
        );
        head
    }

    /// GitHub's `pull_request` event `action` of pull request `number` at
    /// `head`, validated against GitHub's webhook description.
    fn pull_event(
        &self,
        action: &str,
        number: u64,
        author: &str,
        head: &str,
        draft: bool,
    ) -> Vec<u8> {
        let url = self.git.url(REPO);
        github_pull_request(&PullEvent {
            action,
            repo: REPO,
            clone_url: &url,
            number,
            author,
            head,
            base: &self.base,
            draft,
        })
    }

    /// GitHub's `issue_comment` event: `author` says `text` on pull request
    /// `number`.
    fn comment_event(&self, number: u64, author: &str, text: &str) -> Vec<u8> {
        let mut body = github_example("issue-comment-created.json");
        let (org, name) = REPO.split_once('/').unwrap();
        let r = &mut body["repository"];
        r["name"] = json!(name);
        r["full_name"] = json!(REPO);
        r["owner"]["login"] = json!(org);
        r["clone_url"] = json!(self.git.url(REPO));
        let issue = &mut body["issue"];
        issue["number"] = json!(number);
        issue["state"] = json!("open");
        issue["pull_request"] = json!({
            "url": format!("https://api.github.com/repos/{REPO}/pulls/{number}"),
            "html_url": format!("https://github.com/{REPO}/pull/{number}"),
            "diff_url": format!("https://github.com/{REPO}/pull/{number}.diff"),
            "patch_url": format!("https://github.com/{REPO}/pull/{number}.patch"),
        });
        body["comment"]["body"] = json!(text);
        body["comment"]["user"]["login"] = json!(author);
        body["sender"]["login"] = json!(author);
        let raw = bytes(&body);
        let errors = github_schema_errors("issue_comment", &raw);
        assert!(
            errors.is_empty(),
            "not a valid issue_comment event: {errors:#?}"
        );
        raw
    }

    fn send(&self, port: u16, event: &str, body: Vec<u8>, id: &str) {
        let req = Request::github(event, body, TOKEN).with("X-GitHub-Delivery", id);
        let (status, text) = crate::repos::raw_request(port, &req);
        assert_eq!(
            (status, text.as_str()),
            (200, "Event received. Have a nice day.")
        );
    }
}

/// The runs of pull request `number`, newest first.
fn pull_runs(port: u16, number: u64) -> Vec<Value> {
    let (status, body) = request(
        port,
        "GET",
        &format!("/api/v1/runs?repo={REPO}&pull={number}"),
        None,
        None,
    );
    assert_eq!(status, 200, "{body}");
    json(&body)["runs"].as_array().unwrap().clone()
}

fn jobs_of(runs: &[Value]) -> Vec<String> {
    let mut jobs: Vec<String> = runs
        .iter()
        .map(|r| r["job"].as_str().unwrap().to_string())
        .collect();
    jobs.sort();
    jobs
}

/// Waits until `cond` holds (of the fake's latest statuses on `sha`).
fn wait_statuses(
    gh: &FakeGitHub,
    sha: &str,
    what: &str,
    cond: impl Fn(&[Status]) -> bool,
) -> Vec<Status> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = gh.latest_statuses(REPO, sha);
        if cond(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: {s:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn state_of<'a>(s: &'a [Status], context: &str) -> Option<&'a str> {
    s.iter()
        .find(|s| s.context == context)
        .map(|s| s.state.as_str())
}

#[test]
fn a_pull_request_runs_its_jobs_and_its_statuses_and_comment_reach_github() {
    let dir = tmp();
    let w = World::new(&dir.1);
    w.gh.set_member("acme", "alice");
    let head = w.open_pull(1, "alice", &[("src/lib.rs", "fn f() {}\n")]);
    let d = w.start();

    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 1, "alice", &head, false),
        "d-open",
    );
    // unit always runs; lint because src/ changed; docs and slow do not.
    let statuses = wait_statuses(&w.gh, &head, "unit and lint end", |s| {
        state_of(s, "unit") == Some("success") && state_of(s, "lint") == Some("failure")
    });
    assert_eq!(state_of(&statuses, "docs"), None);
    assert_eq!(state_of(&statuses, "slow"), None);
    let unit = statuses.iter().find(|s| s.context == "unit").unwrap();
    // Prow's text, then the base commit pushed out of view with U+2001.
    let description = unit.description.as_deref().unwrap();
    let (text, base) = description.split_once(" BaseSHA:").unwrap();
    assert_eq!(text.trim_end_matches('\u{2001}'), "Job succeeded.");
    assert_eq!(base, w.base);
    assert!(description.len() <= 140);
    let url = unit.target_url.as_deref().unwrap();
    assert!(url.starts_with("https://bosun.example.com/runs/"), "{url}");
    // No context went back from an end to pending.
    assert_no_older_over_newer(&w.gh.statuses(REPO, &head));
    assert_eq!(jobs_of(&pull_runs(d.port, 1)), ["lint", "unit"]);

    // The failure comment, marked, listing lint.
    let deadline = Instant::now() + Duration::from_secs(30);
    let comment = loop {
        let c = w.gh.comments(REPO, 1);
        if let Some(c) = c
            .into_iter()
            .find(|c| c.body.contains("<!-- test report -->"))
        {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "no failure comment: {:#?}",
            w.gh.comments(REPO, 1)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(comment.body.contains("lint"), "{}", comment.body);
    assert!(!comment.body.contains("| unit"), "{}", comment.body);

    // /retest reruns the failed job only.
    w.send(
        d.port,
        "issue_comment",
        w.comment_event(1, "alice", "/retest"),
        "d-retest",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while jobs_of(&pull_runs(d.port, 1)) != ["lint", "lint", "unit"] {
        assert!(
            Instant::now() < deadline,
            "lint not rerun: {:?}",
            jobs_of(&pull_runs(d.port, 1))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing bosun sent was refused as malformed.
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

#[test]
fn an_untrusted_author_runs_nothing_until_ok_to_test() {
    let dir = tmp();
    let w = World::new(&dir.1);
    w.gh.set_member("acme", "maintainer");
    let head = w.open_pull(2, "stranger", &[("src/lib.rs", "fn f() {}\n")]);
    let d = w.start();
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 2, "stranger", &head, false),
        "u-open",
    );
    // The needs-ok-to-test label and reply, and no run.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w
        .gh
        .labels(REPO, 2)
        .contains(&"needs-ok-to-test".to_string())
    {
        assert!(
            Instant::now() < deadline,
            "no needs-ok-to-test label: {:?}",
            w.gh.labels(REPO, 2)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The reply too (the outbox sends the label and the reply apart).
    while !w
        .gh
        .comments(REPO, 2)
        .iter()
        .any(|c| c.body.contains("ok-to-test"))
    {
        assert!(
            Instant::now() < deadline,
            "no needs-ok-to-test reply: {:#?}",
            w.gh.comments(REPO, 2)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pull_runs(d.port, 2).is_empty());
    // A comment of the author's own does nothing.
    w.send(
        d.port,
        "issue_comment",
        w.comment_event(2, "stranger", "/test all"),
        "u-self",
    );
    // A member's /ok-to-test runs the jobs.
    w.send(
        d.port,
        "issue_comment",
        w.comment_event(2, "maintainer", "/ok-to-test"),
        "u-ok",
    );
    wait_statuses(&w.gh, &head, "unit runs after /ok-to-test", |s| {
        state_of(s, "unit") == Some("success")
    });
    assert_eq!(jobs_of(&pull_runs(d.port, 2)), ["lint", "unit"]);
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

#[test]
fn a_draft_runs_nothing_until_test_or_ready_and_a_new_head_or_close_aborts() {
    let dir = tmp();
    let w = World::new(&dir.1);
    w.gh.set_member("acme", "alice");
    let head = w.open_pull(3, "alice", &[("slow/x", "1\n")]);
    let d = w.start();
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 3, "alice", &head, true),
        "x-open",
    );
    // The draft runs nothing until asked.
    w.send(
        d.port,
        "issue_comment",
        w.comment_event(3, "alice", "/test slow"),
        "x-test",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while jobs_of(&pull_runs(d.port, 3)) != ["slow"] {
        assert!(
            Instant::now() < deadline,
            "/test slow on a draft: {:?}",
            jobs_of(&pull_runs(d.port, 3))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Ready: the always_run and changed-file jobs of the head run.
    w.send(
        d.port,
        "pull_request",
        w.pull_event("ready_for_review", 3, "alice", &head, false),
        "x-ready",
    );
    wait_statuses(&w.gh, &head, "unit after ready", |s| {
        state_of(s, "unit") == Some("success")
    });
    // A new head aborts the old head's slow run.
    let head2 = w.open_pull(3, "alice", &[("slow/x", "2\n")]);
    w.send(
        d.port,
        "pull_request",
        w.pull_event("synchronize", 3, "alice", &head2, false),
        "x-sync",
    );
    let old_slow = |runs: &[Value]| {
        runs.iter()
            .filter(|r| r["job"] == "slow" && r["refs"]["pulls"][0]["sha"] == head.as_str())
            .map(|r| r["state"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while old_slow(&pull_runs(d.port, 3))
        .iter()
        .any(|s| s != "aborted")
    {
        assert!(
            Instant::now() < deadline,
            "old head's slow not aborted: {:?}",
            old_slow(&pull_runs(d.port, 3))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Closing aborts the new head's.
    w.send(
        d.port,
        "pull_request",
        w.pull_event("closed", 3, "alice", &head2, false),
        "x-close",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while pull_runs(d.port, 3).iter().any(|r| {
        !["success", "failure", "aborted", "error"].contains(&r["state"].as_str().unwrap())
    }) {
        assert!(
            Instant::now() < deadline,
            "runs left after close: {:#?}",
            pull_runs(d.port, 3)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

/// Every context's statuses, in the order GitHub got them, never go from
/// an ended state back to `pending`.
fn assert_no_older_over_newer(all: &[Status]) {
    let mut ended = std::collections::BTreeSet::new();
    for s in all {
        if s.state == "pending" {
            assert!(
                !ended.contains(&s.context),
                "pending after an end on {}: {all:#?}",
                s.context
            );
        } else {
            ended.insert(s.context.clone());
        }
    }
}

#[test]
fn statuses_survive_a_forge_outage_and_a_kill_and_a_refusal_holds_nothing_back() {
    let dir = tmp();
    let w = World::new(&dir.1);
    // The runs wait for a gate opened once the forge is down, so that no
    // end can reach it before (a quick run's end could, under load). In
    // /tmp: whatever user a local run runs as sees it.
    let gate = std::env::temp_dir().join(format!(
        "bosun-gate-{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    let held = |then: &str| {
        format!(
            r#"command: ["sh", "-c", "while [ ! -e {} ]; do sleep 0.05; done; {then}"]"#,
            gate.display()
        )
    };
    std::fs::write(
        w.dir.join("jobs/jobs.yaml"),
        JOBS.replace(r#"command: ["true"]"#, &held("true"))
            .replace(r#"command: ["false"]"#, &held("false")),
    )
    .unwrap();
    w.gh.set_member("acme", "alice");
    let head = w.open_pull(4, "alice", &[("src/lib.rs", "x\n"), ("docs/a.md", "a\n")]);
    let mut d = w.start();
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 4, "alice", &head, false),
        "k-open",
    );
    // The forge goes down once the runs are made, while they run and end.
    let deadline = Instant::now() + Duration::from_secs(60);
    while pull_runs(d.port, 4).len() < 3 {
        assert!(
            Instant::now() < deadline,
            "runs not made: {:#?}",
            pull_runs(d.port, 4)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.gh.down(true);
    std::fs::write(&gate, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = pull_runs(d.port, 4);
        if runs
            .iter()
            .all(|r| ["success", "failure"].contains(&r["state"].as_str().unwrap()))
        {
            break;
        }
        assert!(Instant::now() < deadline, "runs did not end: {runs:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&gate);
    let before = w.gh.statuses(REPO, &head);
    assert!(
        before.iter().all(|s| s.state == "pending"),
        "an end reached the forge while it was down: {before:#?}"
    );
    // Killed with every status pending in the outbox.
    let _ = d.child.kill();
    let _ = d.child.wait();
    w.gh.down(false);
    // The first status sent after the restart is refused for good (422):
    // it is recorded and the others are delivered all the same.
    w.gh.fail_next(
        "POST",
        &format!("/repos/{REPO}/statuses/*"),
        1,
        bosun_forge::testing::github_api::Failure::Unprocessable(format!(
            "No commit found for SHA: {head}"
        )),
    );
    d = w.start();
    let statuses = wait_statuses(
        &w.gh,
        &head,
        "two of the three ends after the restart",
        |s| s.iter().filter(|s| s.state != "pending").count() >= 2,
    );
    let all = w.gh.statuses(REPO, &head);
    assert_no_older_over_newer(&all);
    // Each run's end, but the one refused: nothing else was sent since.
    let ended: Vec<&Status> = statuses.iter().filter(|s| s.state != "pending").collect();
    assert_eq!(ended.len(), 2, "{all:#?}");
    for s in ended {
        assert_eq!(
            s.state,
            if s.context == "lint" {
                "failure"
            } else {
                "success"
            }
        );
    }
    // The refused one is recorded with the forge's answer, on its run.
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(d.port, "bosun_reports_refused") != 1.0 {
        assert!(
            Instant::now() < deadline,
            "the refusal is not counted: {}",
            std::fs::read_to_string(&d.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Shown on its run.
    let refused_run = pull_runs(d.port, 4).into_iter().find(|r| {
        let (_, b) = request(
            d.port,
            "GET",
            &format!("/api/v1/runs/{}/reports", r["id"].as_str().unwrap()),
            None,
            None,
        );
        b.contains("No commit found for SHA")
    });
    assert!(refused_run.is_some(), "no run shows the forge's refusal");
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

/// A metric's value from `/metrics` (0 when absent).
fn metric(port: u16, name: &str) -> f64 {
    let (_, body) = request(port, "GET", "/metrics", None, None);
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn branch_and_tag_pushes_run_their_postsubmits() {
    let dir = tmp();
    let w = World::new(&dir.1);
    let d = w.start();
    w.work.write("src/x.rs", "x\n");
    let after = w.work.commit("push");
    w.work.push(&w.git.repo_dir(REPO), "main", false);
    let mut body =
        bosun_forge::testing::github_push(REPO, &w.git.url(REPO), &w.base, &after, false);
    w.send(d.port, "push", std::mem::take(&mut body), "p-main");
    w.work.git(&["tag", "v1.0"]);
    w.work.push(&w.git.repo_dir(REPO), "refs/tags/v1.0", false);
    let mut tag: Value = serde_json::from_slice(&bosun_forge::testing::github_push(
        REPO,
        &w.git.url(REPO),
        &"0".repeat(40),
        &after,
        false,
    ))
    .unwrap();
    tag["ref"] = json!("refs/tags/v1.0");
    tag["created"] = json!(true);
    tag["base_ref"] = json!("refs/heads/main");
    w.send(d.port, "push", bytes(&tag), "p-tag");
    let deadline = Instant::now() + Duration::from_secs(30);
    let runs = loop {
        let (_, b) = request(
            d.port,
            "GET",
            &format!("/api/v1/runs?repo={REPO}&type=postsubmit"),
            None,
            None,
        );
        let runs = json(&b)["runs"].as_array().unwrap().clone();
        if runs.len() >= 2 {
            break runs;
        }
        assert!(Instant::now() < deadline, "postsubmits: {runs:#?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut got: Vec<(String, String)> = runs
        .iter()
        .map(|r| {
            (
                r["job"].as_str().unwrap().to_string(),
                r["refs"]["base_ref"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("publish".to_string(), "main".to_string()),
            ("release".to_string(), "v1.0".to_string())
        ]
    );
    for r in &runs {
        assert_eq!(r["refs"]["base_sha"], after.as_str());
    }
}

#[test]
fn a_pull_requests_presubmits_run_on_a_kubernetes_cluster_and_report() {
    use bosun_kubetest::ControlPlane;
    let dir = tmp();
    let w = World::new(&dir.1);
    let plane = ControlPlane::shared();
    let tenant = plane.tenant("k-pulls", "build-a");
    std::fs::write(
        w.dir.join("config.yaml"),
        "pod_namespace: k-pulls\nbuild_clusters:\n  default: {kind: local}\n",
    )
    .unwrap();
    std::fs::write(
        w.dir.join("jobs/jobs.yaml"),
        r#"presubmits:
  acme/app:
  - name: kunit
    always_run: true
    cluster: build-a
    spec: {containers: [{image: alpine, command: ["true"]}]}
  - name: klint
    run_if_changed: '^src/'
    cluster: build-a
    spec: {containers: [{image: alpine, command: ["true"]}]}
  - name: kdocs
    run_if_changed: '^docs/'
    cluster: build-a
    spec: {containers: [{image: alpine, command: ["true"]}]}
"#,
    )
    .unwrap();
    w.gh.set_member("acme", "alice");
    let head = w.open_pull(5, "alice", &[("src/lib.rs", "fn f() {}\n")]);
    let d = w.start_with(&["--kubeconfig".as_ref(), tenant.kubeconfig.as_os_str()]);
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 5, "alice", &head, false),
        "kube-open",
    );
    // Two pods on the build cluster (kdocs does not run), each a run of the
    // pull request with its refs.
    let deadline = Instant::now() + Duration::from_secs(60);
    let runs = loop {
        let runs = pull_runs(d.port, 5);
        if runs.len() == 2
            && runs.iter().all(|r| {
                plane
                    .kubelet()
                    .pod("k-pulls", r["id"].as_str().unwrap())
                    .is_some()
            })
        {
            break runs;
        }
        assert!(Instant::now() < deadline, "pods: {runs:#?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(jobs_of(&runs), ["klint", "kunit"]);
    for r in &runs {
        let id = r["id"].as_str().unwrap();
        let pod = plane.kubelet().pod("k-pulls", id).unwrap();
        let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
        let var = |name: &str| {
            env.iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
                .unwrap_or_default()
        };
        assert_eq!(var("PULL_NUMBER"), "5");
        assert_eq!(var("PULL_PULL_SHA"), head);
        assert_eq!(var("JOB_TYPE"), "presubmit");
        plane.kubelet().run("k-pulls", id);
        if r["job"] == "kunit" {
            plane.kubelet().succeed("k-pulls", id);
        } else {
            plane.kubelet().fail("k-pulls", id);
        }
    }
    let statuses = wait_statuses(&w.gh, &head, "kunit and klint end", |s| {
        state_of(s, "kunit") == Some("success") && state_of(s, "klint") == Some("failure")
    });
    assert_eq!(state_of(&statuses, "kdocs"), None);
    assert_no_older_over_newer(&w.gh.statuses(REPO, &head));
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

#[test]
fn a_github_app_reports_as_its_bot() {
    use bosun_forge::testing::github_api::{app_private_key_pem, app_public_key_pem};
    let dir = tmp();
    let w = World::new(&dir.1);
    w.gh.app(4242, &app_public_key_pem());
    w.gh.install_app("acme");
    w.gh.set_member("acme", "alice");
    let key = w.dir.join("app.pem");
    std::fs::write(&key, app_private_key_pem()).unwrap();
    let head = w.open_pull(6, "alice", &[("src/lib.rs", "x\n")]);
    let d = w.start_bare(&[
        "--github-app-id".as_ref(),
        "4242".as_ref(),
        "--github-app-private-key-path".as_ref(),
        key.as_os_str(),
    ]);
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 6, "alice", &head, false),
        "app-open",
    );
    let statuses = wait_statuses(&w.gh, &head, "the App's statuses", |s| {
        state_of(s, "unit") == Some("success") && state_of(s, "lint") == Some("failure")
    });
    for s in &statuses {
        assert_eq!(s.creator, "bosun[bot]", "{s:#?}");
    }
    // Its failure comment is the bot's too.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w
        .gh
        .comments(REPO, 6)
        .iter()
        .any(|c| c.author == "bosun[bot]" && c.body.contains("lint"))
    {
        assert!(Instant::now() < deadline, "{:#?}", w.gh.comments(REPO, 6));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

#[test]
fn a_minute_without_the_forge_loses_no_status_and_sends_none_older() {
    let dir = tmp();
    let w = World::new(&dir.1);
    w.gh.set_member("acme", "alice");
    let head = w.open_pull(7, "alice", &[("src/lib.rs", "x\n"), ("slow/x", "1\n")]);
    // slow ends a minute after it starts, while the forge is down.
    std::fs::write(
        w.dir.join("jobs/jobs.yaml"),
        JOBS.replace(r#"command: ["sleep", "60"]"#, r#"command: ["sleep", "3"]"#),
    )
    .unwrap();
    let d = w.start();
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 7, "alice", &head, false),
        "m-open",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while pull_runs(d.port, 7).len() < 3 {
        assert!(
            Instant::now() < deadline,
            "runs: {:#?}",
            pull_runs(d.port, 7)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    w.gh.down(true);
    let down = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    while pull_runs(d.port, 7)
        .iter()
        .any(|r| !["success", "failure"].contains(&r["state"].as_str().unwrap()))
    {
        assert!(
            Instant::now() < deadline,
            "runs: {:#?}",
            pull_runs(d.port, 7)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(60).saturating_sub(down.elapsed()));
    w.gh.down(false);
    let statuses = wait_statuses(&w.gh, &head, "every end after the outage", |s| {
        s.len() == 3 && s.iter().all(|s| s.state != "pending")
    });
    assert_eq!(state_of(&statuses, "lint"), Some("failure"));
    assert_eq!(state_of(&statuses, "unit"), Some("success"));
    assert_eq!(state_of(&statuses, "slow"), Some("success"));
    assert_no_older_over_newer(&w.gh.statuses(REPO, &head));
    assert!(metric(d.port, "bosun_report_failures_total") > 0.0);
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}

#[test]
fn a_pull_requests_in_repo_jobs_come_from_its_merge_and_a_broken_one_runs_the_central() {
    let dir = tmp();
    let w = World::new(&dir.1);
    // acme/app defines a presubmit of its own, and is followed.
    w.work.write(
        ".prow.yaml",
        "presubmits:\n- name: inrepo-unit\n  always_run: true\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    );
    let base = w.work.commit("in-repo jobs");
    w.work.push(&w.git.repo_dir(REPO), "main", false);
    std::fs::write(
        w.dir.join("config.yaml"),
        format!(
            "build_clusters:\n  default: {{kind: local}}\nin_repo:\n- repo: {REPO}\n  clone_uri: {}\n  branch: main\n",
            w.git.url(REPO)
        ),
    )
    .unwrap();
    let w = World { base, ..w };
    w.gh.set_member("acme", "alice");
    w.gh.add_commit(REPO, &w.base);
    let d = w.start();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = request(d.port, "GET", &format!("/api/v1/repos/{REPO}"), None, None);
        if body.contains("inrepo-unit") {
            break;
        }
        assert!(Instant::now() < deadline, "not followed: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A pull request adding a presubmit in .prow.yaml runs it, with the
    // base's own and the central ones its changes select.
    let added = "presubmits:\n- name: inrepo-unit\n  always_run: true\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n- name: inrepo-new\n  always_run: true\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n";
    let head = w.open_pull(8, "alice", &[(".prow.yaml", added)]);
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 8, "alice", &head, false),
        "ir-open",
    );
    let statuses = wait_statuses(&w.gh, &head, "the merged in-repo jobs", |s| {
        ["unit", "inrepo-unit", "inrepo-new"]
            .iter()
            .all(|c| state_of(s, c) == Some("success"))
    });
    assert_eq!(state_of(&statuses, "lint"), None);
    assert_eq!(state_of(&statuses, "bosun/in-repo-config"), None);
    // One whose .prow.yaml does not load: the central presubmits run, and
    // the failure is reported once on its head.
    let head = w.open_pull(9, "alice", &[(".prow.yaml", "presubmits: [\n")]);
    w.send(
        d.port,
        "pull_request",
        w.pull_event("opened", 9, "alice", &head, false),
        "ir-bad",
    );
    w.send(
        d.port,
        "issue_comment",
        w.comment_event(9, "alice", "/test all"),
        "ir-bad-again",
    );
    let statuses = wait_statuses(&w.gh, &head, "central jobs and the failure", |s| {
        state_of(s, "unit") == Some("success")
            && state_of(s, "bosun/in-repo-config") == Some("error")
    });
    assert_eq!(state_of(&statuses, "inrepo-unit"), None);
    let deadline = Instant::now() + Duration::from_secs(30);
    let said = |gh: &FakeGitHub| {
        gh.comments(REPO, 9)
            .into_iter()
            .filter(|c| c.body.contains("in-repo configuration"))
            .count()
    };
    while said(&w.gh) == 0 {
        assert!(Instant::now() < deadline, "{:#?}", w.gh.comments(REPO, 9));
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        said(&w.gh),
        1,
        "once per head: {:#?}",
        w.gh.comments(REPO, 9)
    );
    let failures =
        w.gh.statuses(REPO, &head)
            .into_iter()
            .filter(|s| s.context == "bosun/in-repo-config")
            .count();
    assert_eq!(failures, 1);
    assert_eq!(w.gh.violations(), Vec::<String>::new());
}
