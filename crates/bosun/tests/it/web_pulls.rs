//! Pull request runs are findable, through a real `bosun serve` with a read
//! token: presubmit runs made over the API with `refs.pulls` are listed by
//! repository, pull request and head commit (`GET /api/v1/runs`, `bosun
//! runs --repo --pull --sha`, the dashboard's runs filters), a run's page
//! links its pull request (on the forge, and its page here), and
//! `/pulls/{org}/{repo}/{number}` shows the pull request's runs by head
//! commit.

use std::process::Command;

use serde_json::{json, Value};

use crate::web_support::{
    call, first_event, get, start_with, wait_plan, wait_state, Answer, API_TOKEN, READ_TOKEN,
};

/// Presubmits of two repositories, one name in both.
const PRESUBMITS: &str = r#"presubmits:
  org/app:
  - name: unit
    cluster: build-b
    spec: {containers: [{image: x, command: ["true"]}]}
  - name: lint
    cluster: build-b
    spec: {containers: [{image: x, command: ["true"]}]}
  org/other:
  - name: unit
    cluster: build-b
    spec: {containers: [{image: x, command: ["true"]}]}
"#;

const SHA_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const SHA_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// The runs of the test, by what they test.
struct Runs {
    /// org/app#12 at A: unit, lint, unit again.
    unit_a1: String,
    lint_a1: String,
    unit_a2: String,
    /// org/app#12 at B (its new head): unit.
    unit_b: String,
    /// org/app#12 at A again, after B: lint.
    lint_a2: String,
    /// org/other#12: unit.
    other: String,
    /// org/app#13: unit.
    app13: String,
}

fn read() -> String {
    format!("Bearer {READ_TOKEN}")
}

/// `GET path` with the read token.
fn get_read(port: u16, path: &str) -> Answer {
    get(port, path, &[("Authorization", &read())])
}

/// A presubmit run of `job` in `org/repo` for `pull` (its refs' JSON);
/// waits for it to end (the listing's order is then settled).
fn create(port: u16, job: &str, org: &str, repo: &str, extra: Value, pull: Value) -> String {
    let mut refs = json!({"org": org, "repo": repo, "base_ref": "main", "pulls": [pull]});
    if let (Some(r), Some(e)) = (refs.as_object_mut(), extra.as_object()) {
        r.extend(e.clone());
    }
    let body = json!({"job": job, "repo": format!("{org}/{repo}"), "refs": refs}).to_string();
    let auth = format!("Bearer {API_TOKEN}");
    let a = call(
        port,
        "POST",
        "/api/v1/runs",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        Some(&body),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.json()["id"].as_str().unwrap().to_string();
    wait_state(port, &id, "success", Some(READ_TOKEN));
    id
}

/// A daemon with the presubmits, an API token and a read token, and the
/// runs of the test.
fn setup(dir: &std::path::Path) -> (crate::common::Serve, Runs) {
    let daemon = start_with(dir, true, true, PRESUBMITS);
    let port = daemon.port;
    wait_plan(port);
    let at_a = json!({"number": 12, "sha": SHA_A, "author": "alice",
        "title": "Fix <b>it</b>", "link": "https://ghe.example/org/app/pull/12"});
    let none = json!({});
    let unit_a1 = create(port, "unit", "org", "app", none.clone(), at_a.clone());
    let lint_a1 = create(port, "lint", "org", "app", none.clone(), at_a.clone());
    let unit_a2 = create(port, "unit", "org", "app", none.clone(), at_a.clone());
    // The new head: no link of its own, the repository's link.
    let unit_b = create(
        port,
        "unit",
        "org",
        "app",
        json!({"repo_link": "https://git.example/org/app"}),
        json!({"number": 12, "sha": SHA_B, "author": "alice"}),
    );
    let lint_a2 = create(port, "lint", "org", "app", none.clone(), at_a);
    let other = create(
        port,
        "unit",
        "org",
        "other",
        none.clone(),
        json!({"number": 12, "sha": "cccc"}),
    );
    // No usable link: GitHub's page.
    let app13 = create(
        port,
        "unit",
        "org",
        "app",
        none,
        json!({"number": 13, "sha": "dddd", "link": "javascript:alert(1)"}),
    );
    let runs = Runs {
        unit_a1,
        lint_a1,
        unit_a2,
        unit_b,
        lint_a2,
        other,
        app13,
    };
    (daemon, runs)
}

/// The ids of a listing's runs, in its order.
fn ids(port: u16, query: &str) -> Vec<String> {
    let a = get_read(port, &format!("/api/v1/runs?{query}"));
    assert_eq!(a.status, 200, "{query}: {}", a.body);
    a.json()["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// `bosun ARGS` against the daemon on `port`, with the read token: exit
/// code, stdout, stderr.
fn bosun(dir: &std::path::Path, port: u16, args: &[&str]) -> (i32, String, String) {
    let token = dir.join("cli-token");
    std::fs::write(&token, READ_TOKEN).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(args)
        .arg("--server")
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--token-file")
        .arg(&token)
        .env_remove("BOSUN_SERVER")
        .env_remove("BOSUN_TOKEN_FILE")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The ids `bosun runs ARGS -o json` lists.
fn cli_ids(dir: &std::path::Path, port: u16, args: &[&str]) -> Vec<String> {
    let mut all = vec!["runs"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let (code, out, err) = bosun(dir, port, &all);
    assert_eq!(code, 0, "{args:?}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn runs_are_listed_by_repository_pull_request_and_head_over_the_api_and_the_cli() {
    let d = tempfile::tempdir().unwrap();
    let (daemon, r) = setup(d.path());
    let port = daemon.port;

    // A repository's runs: every pull's, no other repository's.
    assert_eq!(
        ids(port, "repo=org/app"),
        [
            r.app13.as_str(),
            r.lint_a2.as_str(),
            r.unit_b.as_str(),
            r.unit_a2.as_str(),
            r.lint_a1.as_str(),
            r.unit_a1.as_str()
        ]
    );
    // A pull request's, newest first; the same number elsewhere is not it.
    let pull12 = [
        r.lint_a2.as_str(),
        r.unit_b.as_str(),
        r.unit_a2.as_str(),
        r.lint_a1.as_str(),
        r.unit_a1.as_str(),
    ];
    assert_eq!(ids(port, "repo=org%2Fapp&pull=12"), pull12);
    assert_eq!(ids(port, "repo=org/other&pull=12"), [r.other.as_str()]);
    // At one head; with the other filters; by cursors.
    assert_eq!(
        ids(port, &format!("repo=org/app&pull=12&sha={SHA_A}")),
        [
            r.lint_a2.as_str(),
            r.unit_a2.as_str(),
            r.lint_a1.as_str(),
            r.unit_a1.as_str()
        ]
    );
    assert_eq!(
        ids(port, "repo=org/app&pull=12&job=unit"),
        [r.unit_b.as_str(), r.unit_a2.as_str(), r.unit_a1.as_str()]
    );
    assert_eq!(
        ids(port, "repo=org/app&pull=12&limit=2"),
        [r.lint_a2.as_str(), r.unit_b.as_str()]
    );
    assert_eq!(
        ids(
            port,
            &format!("repo=org/app&pull=12&limit=2&after={}", r.unit_b)
        ),
        [r.unit_a2.as_str(), r.lint_a1.as_str()]
    );
    assert_eq!(
        ids(
            port,
            &format!("repo=org/app&pull=12&limit=2&before={}", r.unit_a2)
        ),
        [r.lint_a2.as_str(), r.unit_b.as_str()]
    );
    assert!(ids(port, "repo=org/app&pull=99").is_empty());

    // Malformed, or without what they narrow: 400, saying what is wanted.
    for (query, says) in [
        ("pull=12", "pull needs repo (org/repo)"),
        ("repo=org/app&pull=abc", "positive integer"),
        ("repo=org/app&pull=0", "positive integer"),
        ("repo=org/app&pull=-2", "positive integer"),
        ("repo=org/app&sha=abc", "needs pull"),
        ("repo=app&pull=1", "org/repo"),
        ("repo=org/app&pull=1&sha=not-hex", "hexadecimal"),
    ] {
        let a = get_read(port, &format!("/api/v1/runs?{query}"));
        assert_eq!(a.status, 400, "{query}: {}", a.body);
        let error = a.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(says), "{query}: {error}");
    }
    // Reads need the token.
    assert_eq!(
        get(port, "/api/v1/runs?repo=org/app&pull=12", &[]).status,
        401
    );

    // The command line: --repo, --pull N or ORG/REPO#N, --sha.
    let dir = d.path();
    assert_eq!(
        cli_ids(dir, port, &["--repo", "org/app", "--pull", "12"]),
        pull12
    );
    assert_eq!(cli_ids(dir, port, &["--pull", "org/app#12"]), pull12);
    assert_eq!(
        cli_ids(dir, port, &["--pull", "org/app#12", "--sha", SHA_B]),
        [r.unit_b.as_str()]
    );
    assert_eq!(
        cli_ids(dir, port, &["--repo", "org/other"]),
        [r.other.as_str()]
    );
    let (code, out, _) = bosun(dir, port, &["runs", "--pull", "org/app#12"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("ID "), "a table: {out}");
    assert_eq!(out.lines().count(), 6, "{out}");
    for (args, code, says) in [
        (
            &["runs", "--pull", "12"][..],
            1,
            "--pull 12 needs its repository: add --repo ORG/REPO, or give --pull ORG/REPO#12",
        ),
        (
            &["runs", "--repo", "org/x", "--pull", "org/app#12"][..],
            1,
            "name different repositories",
        ),
        (&["runs", "--pull", "org/app#x"][..], 2, "positive integer"),
        (&["runs", "--sha", SHA_A][..], 2, "--pull"),
    ] {
        let (got, _, err) = bosun(dir, port, args);
        assert_eq!(got, code, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The rows of a runs table: (run id, state), in order.
fn rows(body: &str) -> Vec<String> {
    body.split("<tr class=\"st-")
        .skip(1)
        .filter_map(|r| {
            Some(
                r.split("data-run=\"")
                    .nth(1)?
                    .split('"')
                    .next()?
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn the_dashboard_filters_links_and_shows_a_pull_request_by_head() {
    let d = tempfile::tempdir().unwrap();
    let (daemon, r) = setup(d.path());
    let port = daemon.port;

    // The runs list, filtered by repository and pull request.
    let a = get_read(port, "/?repo=org%2Fapp&pull=12");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        rows(&a.body),
        [
            r.lint_a2.as_str(),
            r.unit_b.as_str(),
            r.unit_a2.as_str(),
            r.lint_a1.as_str(),
            r.unit_a1.as_str()
        ]
    );
    assert!(
        a.body.contains(r#"name="repo" value="org/app""#),
        "{}",
        a.body
    );
    assert!(a.body.contains(r#"name="pull" value="12""#), "{}", a.body);
    assert!(
        a.body
            .contains("data-live=\"/live/runs?repo=org%2Fapp&#38;pull=12\""),
        "the live rows follow the filters: {}",
        a.body
    );
    assert_eq!(
        rows(&get_read(port, "/?repo=org%2Fother").body),
        [r.other.as_str()]
    );
    let live = first_event(
        port,
        "/live/runs?repo=org%2Fapp&pull=13",
        &[("Authorization", &read())],
    );
    assert!(
        live.contains(r.app13.as_str()) && !live.contains(r.unit_b.as_str()),
        "{live}"
    );
    // A pull request without its repository: the page says why.
    let a = get_read(port, "/?pull=12");
    assert_eq!(a.status, 400);
    assert!(a.body.contains("pull needs repo (org/repo)"), "{}", a.body);
    assert!(rows(&a.body).is_empty());
    let a = get_read(port, "/?repo=org%2Fapp&pull=twelve");
    assert_eq!(a.status, 400);
    assert!(a.body.contains("positive integer"), "{}", a.body);

    // A run's page links its pull request: the pull's own link, else the
    // repository's, else GitHub's; and this dashboard's page.
    let page = get_read(port, &format!("/runs/{}", r.unit_a1));
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(r#"<a href="/pulls/org/app/12" class="pull-page">org/app#12</a>"#),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(r#"href="https://ghe.example/org/app/pull/12" rel="noopener noreferrer" class="pull-forge""#),
        "{}",
        page.body
    );
    // The title is escaped.
    assert!(
        page.body.contains("Fix &#60;b&#62;it&#60;/b&#62;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<b>it</b>"));
    let page = get_read(port, &format!("/runs/{}", r.unit_b));
    assert!(
        page.body
            .contains(r#"href="https://git.example/org/app/pull/12""#),
        "{}",
        page.body
    );
    let page = get_read(port, &format!("/runs/{}", r.app13));
    assert!(
        page.body
            .contains(r#"href="https://github.com/org/app/pull/13""#)
            && page.body.contains(r#"href="/pulls/org/app/13""#),
        "{}",
        page.body
    );
    assert!(!page.body.contains("javascript:"), "{}", page.body);

    // The pull request's page: heads newest first (a head is as new as its
    // first run, so a later run on the old head does not move it up), each
    // job's latest run and its older attempts.
    let a = get_read(port, "/pulls/org/app/12");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.header("content-security-policy")
            .map(|c| c.contains("default-src 'none'")),
        Some(true)
    );
    let b_at = a
        .body
        .find(&format!("data-sha=\"{SHA_B}\""))
        .expect("head B");
    let a_at = a
        .body
        .find(&format!("data-sha=\"{SHA_A}\""))
        .expect("head A");
    assert!(b_at < a_at, "the newest head first: {}", a.body);
    let (head_b, head_a) = (&a.body[b_at..a_at], &a.body[a_at..]);
    assert_eq!(rows(head_b), [r.unit_b.as_str()]);
    assert!(!head_b.contains("data-older"), "{head_b}");
    // Head A: lint (latest the retest after B), then unit, by name.
    assert_eq!(rows(head_a), [r.lint_a2.as_str(), r.unit_a2.as_str()]);
    let lint = &head_a[..head_a.find(&format!("data-run=\"{}\"", r.unit_a2)).unwrap()];
    assert!(
        lint.contains(&format!(
            "href=\"/runs/{}\" data-older=\"{}\"",
            r.lint_a1, r.lint_a1
        )),
        "{lint}"
    );
    assert!(
        head_a.contains(&format!("data-older=\"{}\"", r.unit_a1)),
        "{head_a}"
    );
    assert!(head_a.contains(&format!("href=\"/runs/{}\"", r.unit_a2)));
    for absent in [r.other.as_str(), r.app13.as_str()] {
        assert!(!a.body.contains(absent), "{absent}: {}", a.body);
    }
    assert!(a.body.contains("5 runs"), "{}", a.body);
    // Its links: the forge's (the newest run's refs), the filtered list.
    assert!(
        a.body
            .contains(r#"id="pull-forge">https://ghe.example/org/app/pull/12</a>"#),
        "{}",
        a.body
    );
    assert!(
        a.body
            .contains(r#"href="/?repo=org%2Fapp&#38;pull=12" id="pull-list""#),
        "{}",
        a.body
    );
    assert!(
        a.body.contains("Fix &#60;b&#62;it&#60;/b&#62;"),
        "{}",
        a.body
    );
    assert!(!a.body.contains("<b>it</b>"));
    // Live: the heads as a fragment.
    assert!(a.body.contains(r#"data-live="/live/pulls/org/app/12""#));
    let live = first_event(
        port,
        "/live/pulls/org/app/12",
        &[("Authorization", &read())],
    );
    assert!(live.contains(&format!("data-sha=\"{SHA_B}\"")), "{live}");
    // Another repository's pull of the same number; none; not a number.
    let other = get_read(port, "/pulls/org/other/12");
    assert_eq!(rows(&other.body), [r.other.as_str()]);
    assert_eq!(get_read(port, "/pulls/org/app/99").status, 404);
    assert_eq!(get_read(port, "/pulls/org/app/x").status, 404);
    assert_eq!(get_read(port, "/pulls/org/app/0").status, 404);
    // Read behind the read token, as every page.
    let a = get(port, "/pulls/org/app/12", &[]);
    assert_eq!(a.status, 303);
    assert!(a.header("location").unwrap().starts_with("/login?next="));
    assert_eq!(get(port, "/live/pulls/org/app/12", &[]).status, 401);
}
