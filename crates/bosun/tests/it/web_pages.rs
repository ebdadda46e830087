//! The dashboard over HTTP, through a real `bosun serve`: every page answers
//! with its content (runs filtered and paginated, a run's log and
//! artifacts, periodics with schedules in words, skipped ticks and the
//! timeline, clusters, the dispatcher's plan and explanations, the
//! configuration), live fragments, the pages' headers; and the
//! authentication: reads behind the read token, every mutating form and
//! API route refusing a missing or wrong token and a cross-site post, and
//! accepting the right ones.

use std::time::{Duration, Instant};

use crate::common;
use crate::web_support::{
    self, call, first_event, get, post_form, start, start_with, trigger, wait_plan, wait_state,
    Answer, API_TOKEN, READ_TOKEN,
};

/// A periodic whose ticks come every second while its one run sleeps: each
/// tick is skipped (`overlap`, as `concurrency_policy: forbid` says).
const TICKER: &str = r#"- name: ticker
  cron: "@every 1s"
  cluster: build-b
  spec: {containers: [{image: x, command: ["sleep", "60"]}]}
"#;

fn assert_page(a: &Answer, what: &str) {
    assert_eq!(a.status, 200, "{what}: {}", a.body);
    assert_eq!(
        a.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{what}"
    );
    let csp = a.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{what}: {csp}"
    );
    assert_eq!(a.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(
        a.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    // Nothing loaded from elsewhere: every script and stylesheet is the
    // dashboard's own (links to elsewhere, a job's results, are fine).
    for needle in [
        "src=\"http",
        "src=\"//",
        "stylesheet\" href=\"http",
        "stylesheet\" href=\"//",
    ] {
        assert!(!a.body.contains(needle), "{what}: {needle}");
    }
}

/// Rows of the runs list: (run id, state).
fn rows(body: &str) -> Vec<(String, String)> {
    body.split("<tr class=\"st-")
        .skip(1)
        .filter_map(|r| {
            let id = r.split("data-run=\"").nth(1)?.split('"').next()?;
            let state = r.split("data-state=\"").nth(1)?.split('"').next()?;
            Some((id.to_string(), state.to_string()))
        })
        .collect()
}

#[test]
fn every_page_answers_with_its_content() {
    let d = tempfile::tempdir().unwrap();
    let daemon = start_with(d.path(), false, false, TICKER);
    let port = daemon.port;
    let plan = wait_plan(port);

    // A run that ends: its row, its page, its log.
    let quick = trigger(port, "quick", None);
    wait_state(port, &quick, "success", None);
    let a = get(port, "/", &[]);
    assert_page(&a, "/");
    assert!(
        rows(&a.body).contains(&(quick.clone(), "success".into())),
        "{}",
        a.body
    );
    // A browser without a cookie gets the one its forms' CSRF tokens are
    // bound to: HttpOnly, SameSite=Strict.
    let cookie = a.set_cookie_line("bosun_csrf").expect("a CSRF cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        a.body.contains("action=\"/runs/trigger\""),
        "no token: actions open"
    );

    let a = get(port, &format!("/runs/{quick}"), &[]);
    assert_page(&a, "run page");
    assert!(a.body.contains("hello from quick"), "the log: {}", a.body);
    assert!(a.body.contains(r#"id="run-state" data-state="success""#));
    assert!(a.body.contains(r#"id="rerun""#) && !a.body.contains(r#"id="abort""#));
    assert!(a.body.contains("has no artifacts"), "{}", a.body);
    assert_eq!(get(port, "/runs/no-such-run", &[]).status, 404);
    // An ended run's live fragment: the last state, then the end.
    let live = call(port, "GET", &format!("/live/runs/{quick}"), &[], None);
    assert_eq!(live.header("content-type"), Some("text/event-stream"));
    assert!(
        live.body.contains("event: html") && live.body.contains("event: end"),
        "{}",
        live.body
    );
    assert!(live.body.contains(r#"data-state="success""#));

    // A running run: abort button, its artifacts listed, files linked to the API.
    let slow = trigger(port, "slow", None);
    let run = wait_state(port, &slow, "pending", None);
    let cluster = run["cluster"].as_str().unwrap().to_string();
    let logs = d
        .path()
        .join("data/runs")
        .join(&cluster)
        .join(&slow)
        .join("logs");
    std::fs::create_dir_all(logs.join("artifacts")).unwrap();
    std::fs::write(logs.join("build-log.txt"), "line 1\n").unwrap();
    std::fs::write(
        logs.join("artifacts/report.html"),
        "<script>alert(1)</script>",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", logs.join("artifacts/passwd")).unwrap();
    let a = get(port, &format!("/runs/{slow}"), &[]);
    assert_page(&a, "running run");
    assert!(a.body.contains(r#"id="abort""#));
    assert!(a.body.contains(&format!("data-live=\"/live/runs/{slow}\"")));
    assert!(
        a.body.contains(&format!(
            "href=\"/api/v1/runs/{slow}/artifacts/build-log.txt\""
        )),
        "{}",
        a.body
    );
    assert!(a.body.contains("href=\"?artifacts=artifacts\""));
    let a = get(port, &format!("/runs/{slow}?artifacts=artifacts"), &[]);
    let report = format!("/api/v1/runs/{slow}/artifacts/artifacts/report.html");
    assert!(a.body.contains(&format!("href=\"{report}\"")), "{}", a.body);
    // A link is listed, never linked.
    assert!(
        a.body.contains("passwd") && !a.body.contains("artifacts/passwd\""),
        "{}",
        a.body
    );
    // What the artifacts' walk refuses, the page says, in the API's words.
    for (path, says) in [
        ("../x", "are not allowed"),
        ("nothing", "no artifact nothing"),
        ("artifacts/passwd", "is (or goes through) a symbolic link"),
        // A file lists nothing: it is opened through its link to the API.
        ("build-log.txt", "This directory is empty."),
    ] {
        let a = get(port, &format!("/runs/{slow}?artifacts={path}"), &[]);
        assert!(a.body.contains(says), "{path}: {}", a.body);
    }
    // The job's HTML is a download, sandboxed: it never acts on this origin.
    let file = get(port, &report, &[]);
    assert_eq!(file.header("content-disposition"), Some("attachment"));
    assert!(file
        .header("content-security-policy")
        .unwrap()
        .contains("sandbox"));
    let live = first_event(port, &format!("/live/runs/{slow}"), &[]);
    assert!(live.contains(r#"data-state="pending""#), "{live}");

    // Filters and pages: a full cluster keeps its runs waiting.
    let holder = trigger(port, "parked-holder", None);
    wait_state(port, &holder, "pending", None);
    let parked: Vec<String> = (0..52).map(|_| trigger(port, "parked-job", None)).collect();
    let a = get(port, "/?job=parked-job", &[]);
    assert_page(&a, "filtered");
    let first = rows(&a.body);
    assert_eq!(first.len(), 50, "a page of 50");
    assert_eq!(first[0].0, parked[51], "newest first");
    assert!(
        first.iter().all(|(id, _)| parked.contains(id)),
        "only that job"
    );
    // The next page is found by a cursor: the last run shown.
    let next = format!("/?job=parked-job&after={}&page=2", first[49].0);
    assert!(
        a.body
            .contains(&format!(r#"href="{}""#, next.replace('&', "&#38;"))),
        "{}",
        a.body
    );
    let b = get(port, &next, &[]);
    let second = rows(&b.body);
    assert_eq!(second.len(), 2);
    assert_eq!(second[1].0, parked[0]);
    assert!(
        b.body.contains(r#"href="/?job=parked-job" rel="prev""#),
        "{}",
        b.body
    );
    assert!(!b.body.contains(r#"rel="next""#), "{}", b.body);
    // A bare page number (an old link) still skips to the same rows.
    assert_eq!(
        rows(&get(port, "/?job=parked-job&page=2", &[]).body),
        second
    );
    // Counted back from the oldest run: the 50 just newer, one more beyond.
    let c = get(
        port,
        &format!("/?job=parked-job&before={}&page=2", parked[0]),
        &[],
    );
    let back = rows(&c.body);
    assert_eq!(
        back.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        parked[1..51].iter().rev().cloned().collect::<Vec<_>>()
    );
    assert!(
        c.body.contains(r#"href="/?job=parked-job" rel="prev""#),
        "{}",
        c.body
    );
    assert!(
        c.body.contains(&format!("after={}&#38;page=3", parked[1])),
        "{}",
        c.body
    );
    // Counted back with nothing newer beyond (41 newer runs): the newest
    // runs, page 1, however the link numbered it.
    let newest = get(
        port,
        &format!("/?job=parked-job&before={}&page=3", parked[10]),
        &[],
    );
    assert_eq!(rows(&newest.body).len(), 41);
    assert!(
        newest.body.contains("<span>page 1</span>"),
        "{}",
        newest.body
    );
    assert!(!newest.body.contains(r#"rel="prev""#), "{}", newest.body);
    assert!(
        newest
            .body
            .contains(&format!("after={}&#38;page=2", parked[11])),
        "{}",
        newest.body
    );
    // Past the oldest run: no rows, and the way back counts from the cursor.
    let past = get(
        port,
        &format!("/?job=parked-job&after={}&page=3", parked[0]),
        &[],
    );
    assert!(rows(&past.body).is_empty());
    assert!(
        past.body
            .contains(&format!("before={}&#38;page=2", parked[0])),
        "{}",
        past.body
    );
    assert!(!past.body.contains(r#"rel="next""#), "{}", past.body);
    // The API takes an empty cursor as none.
    let api = get(port, "/api/v1/runs?job=parked-job&after=&limit=1", &[]);
    assert_eq!(api.status, 200, "{}", api.body);
    // A cursor run that is gone: said, with the way back to the newest.
    let gone = get(port, "/?job=parked-job&after=no-such-run&page=2", &[]);
    assert_eq!(gone.status, 404);
    assert!(
        gone.body.contains("no-such-run") && gone.body.contains("is gone"),
        "{}",
        gone.body
    );
    let successes = rows(&get(port, "/?state=success", &[]).body);
    assert!(!successes.is_empty() && successes.iter().all(|(_, s)| s == "success"));
    let on_parked = rows(&get(port, "/?cluster=parked&state=pending&type=periodic", &[]).body);
    assert_eq!(on_parked, vec![(holder.clone(), "pending".to_string())]);
    let bad = get(port, "/?state=bogus", &[]);
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("bogus"), "{}", bad.body);
    let live = first_event(port, "/live/runs?job=quick", &[]);
    assert!(live.contains(&format!("data-run=\"{quick}\"")), "{live}");

    // Periodics: schedules in words, time zone, next fire, strip, skipped
    // ticks, the timeline.
    let deadline = Instant::now() + Duration::from_secs(20);
    let a = loop {
        let a = get(port, "/periodics", &[]);
        if a.body.contains("overlap") || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_page(&a, "/periodics");
    for needle in [
        "nightly-paris",
        "Monday through Friday",
        "time zone Europe/Paris",
        "id=\"timeline\"",
        &format!("class=\"sq st-success\" href=\"/runs/{quick}\""),
        "<span class=\"reason\">overlap</span>",
        "Never (",
    ] {
        assert!(a.body.contains(needle), "{needle}: {}", a.body);
    }
    let caption = a.body.split("id=\"timeline-caption\">").nth(1).unwrap();
    let fires: u64 = caption.split_whitespace().next().unwrap().parse().unwrap();
    // `ticker` every second, `hourly` every hour.
    assert!(fires >= 85_000 + 23, "{caption}");
    let found = get(port, "/periodics?q=paris", &[]);
    assert!(found.body.contains("data-periodic=\"nightly-paris\""));
    assert!(!found.body.contains("data-periodic=\"hourly\""));

    // Clusters: health, capacity, running against max_concurrency, trust.
    let a = get(port, "/clusters", &[]);
    assert_page(&a, "/clusters");
    for needle in [
        "data-cluster=\"vault\" data-health=\"Reachable\"",
        "badge trusted",
        "jobs secure-.*; types periodic",
        "1 / 1",
        "id=\"cluster-usage\"",
        "id=\"cluster-load\"",
        "badge blocked",
    ] {
        assert!(a.body.contains(needle), "{needle}: {}", a.body);
    }

    // The dispatcher: the chart has every cluster with its load and target.
    let a = get(port, "/dispatcher", &[]);
    assert_page(&a, "/dispatcher");
    for c in plan["clusters"].as_array().unwrap() {
        let needle = format!(
            "data-name=\"{}\" data-value=\"{}\" data-target=\"{}\"",
            c["name"].as_str().unwrap(),
            c["load"].as_f64().unwrap(),
            c["target"].as_f64().unwrap()
        );
        assert!(a.body.contains(&needle), "{needle}: {}", a.body);
    }
    let explained = get(port, "/dispatcher?job=quick", &[]);
    let cluster = plan["assignments"]["quick"].as_str().unwrap();
    assert!(
        explained
            .body
            .contains(&format!("<strong class=\"cluster\">{cluster}</strong>")),
        "{}",
        explained.body
    );
    let unknown = get(port, "/dispatcher?job=no-such-job", &[]);
    assert!(unknown.body.contains("is not in the plan"));

    // The configuration: version, then a bad reload's errors with file and
    // line, the last good one in force.
    let a = get(port, "/config", &[]);
    assert_page(&a, "/config");
    assert!(a.body.contains("id=\"config-version\""));
    assert!(a.body.contains("in force"));
    std::fs::write(
        d.path().join("jobs/broken.yaml"),
        "periodics:\n- name: broken\n  cron: \"61 * * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let a = loop {
        let a = get(port, "/config", &[]);
        if a.body.contains("id=\"config-errors\"") || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        a.body.contains("broken.yaml</td><td class=\"mono\">3:"),
        "{}",
        a.body
    );
    assert!(a
        .body
        .contains("the last good configuration stays in force"));

    // The assets are the binary's.
    let css = get(port, "/assets/style.css", &[]);
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    let js = get(port, "/assets/live.js", &[]);
    assert!(js.body.contains("EventSource"));
    assert_eq!(get(port, "/assets/nope.js", &[]).status, 404);

    for id in std::iter::once(&slow).chain(&parked).chain([&holder]) {
        call(port, "POST", &format!("/api/v1/runs/{id}/abort"), &[], None);
    }
}

/// A form's `fields` and its CSRF token.
fn with<'a>(fields: &[(&'a str, &'a str)], csrf: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut f = fields.to_vec();
    f.push(("csrf", csrf));
    f
}

/// The pre-login CSRF cookie and the token of its forms.
fn csrf_of(port: u16, headers: &[(&str, &str)]) -> (String, String) {
    let a = get(port, "/login", headers);
    assert_eq!(a.status, 200, "{}", a.body);
    let cookie = a
        .set_cookie("bosun_csrf")
        .map(|v| format!("bosun_csrf={v}"))
        .unwrap_or_else(|| {
            headers
                .iter()
                .find(|(k, _)| *k == "Cookie")
                .map(|(_, v)| v.to_string())
                .unwrap_or_default()
        });
    (cookie, a.csrf())
}

/// Logs in with `token`: the session cookie and a CSRF token of its forms.
fn login(port: u16, token: &str) -> (String, String) {
    let (cookie, csrf) = csrf_of(port, &[]);
    let a = post_form(
        port,
        "/login",
        &[
            ("Cookie", &cookie),
            ("Origin", &format!("http://127.0.0.1:{port}")),
        ],
        &[("csrf", &csrf), ("token", token), ("next", "/periodics")],
    );
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(a.header("location"), Some("/periodics"));
    let line = a
        .set_cookie_line("bosun_session")
        .expect("a session cookie");
    assert!(
        line.contains("HttpOnly") && line.contains("SameSite=Strict"),
        "{line}"
    );
    let session = format!("bosun_session={}", a.set_cookie("bosun_session").unwrap());
    let page = get(port, "/", &[("Cookie", &session)]);
    assert_eq!(page.status, 200, "{}", page.body);
    (session, page.csrf())
}

#[test]
fn reads_need_the_read_token_and_actions_the_api_token_and_no_cross_site_post_acts() {
    let d = tempfile::tempdir().unwrap();
    let daemon = start(d.path(), true, true);
    let port = daemon.port;
    let origin = format!("http://127.0.0.1:{port}");
    let read = format!("Bearer {READ_TOKEN}");
    let act = format!("Bearer {API_TOKEN}");
    wait_plan(port);

    // Reads: never for health, metrics, dispatcher lookups, login, assets.
    for path in [
        "/healthz",
        "/metrics",
        "/login",
        "/assets/style.css",
        "/api/v1/dispatch/plan",
        "/api/v1/dispatch/explain?job=quick",
        "/api/v1/dispatch/overrides",
    ] {
        assert_eq!(get(port, path, &[]).status, 200, "{path}");
    }
    let lookup = call(
        port,
        "POST",
        "/api/v1/dispatch",
        &[("Content-Type", "application/json")],
        Some(r#"{"job": "quick"}"#),
    );
    assert_eq!(lookup.status, 200, "{}", lookup.body);
    // Everything else: the read token (or the API token), as a bearer or a
    // session; a page sends the browser to the login page.
    let quick = trigger(port, "quick", Some(API_TOKEN));
    wait_state(port, &quick, "success", Some(READ_TOKEN));
    for path in [
        "/".to_string(),
        format!("/runs/{quick}"),
        "/periodics".into(),
        "/clusters".into(),
        "/dispatcher".into(),
        "/config".into(),
    ] {
        let a = get(port, &path, &[]);
        assert_eq!(a.status, 303, "{path}");
        assert!(
            a.header("location").unwrap().starts_with("/login?next="),
            "{path}"
        );
        let wrong = get(port, &path, &[("Authorization", "Bearer nope")]);
        assert_eq!(wrong.status, 303, "{path}: a wrong token");
        assert_eq!(
            get(port, &path, &[("Authorization", &read)]).status,
            200,
            "{path}"
        );
        assert_eq!(
            get(port, &path, &[("Authorization", &act)]).status,
            200,
            "{path}"
        );
    }
    for path in [
        "/api/v1/runs".to_string(),
        format!("/api/v1/runs/{quick}"),
        format!("/api/v1/runs/{quick}/log"),
        format!("/api/v1/runs/{quick}/artifacts"),
        "/api/v1/periodics".into(),
        "/api/v1/clusters".into(),
        "/api/v1/config/status".into(),
        "/live/runs".into(),
    ] {
        assert_eq!(get(port, &path, &[]).status, 401, "{path}");
        assert_eq!(
            get(port, &path, &[("Authorization", "Bearer nope")]).status,
            401,
            "{path}"
        );
    }
    assert_eq!(
        get(port, "/api/v1/runs", &[("Authorization", &read)]).status,
        200
    );

    // The login form: a wrong token is refused; the read token reads.
    let (cookie, csrf) = csrf_of(port, &[]);
    let wrong = post_form(
        port,
        "/login",
        &[("Cookie", &cookie), ("Origin", &origin)],
        &[("csrf", &csrf), ("token", "nope")],
    );
    assert_eq!(wrong.status, 401);
    assert!(wrong.set_cookie("bosun_session").is_none());
    // A login posted from another site is refused too.
    let forged = post_form(
        port,
        "/login",
        &[("Cookie", &cookie), ("Origin", "http://evil.example")],
        &[("csrf", &csrf), ("token", API_TOKEN)],
    );
    assert_eq!(forged.status, 403);
    let (reader, reader_csrf) = login(port, READ_TOKEN);
    assert_eq!(
        get(port, "/api/v1/runs", &[("Cookie", &reader)]).status,
        200
    );
    let page = get(port, "/periodics", &[("Cookie", &reader)]);
    assert!(
        !page.body.contains("action=\"/periodics/pause\""),
        "a reader sees no action"
    );

    let (operator, op_csrf) = login(port, API_TOKEN);
    let slow = trigger(port, "slow", Some(API_TOKEN));
    wait_state(port, &slow, "pending", Some(API_TOKEN));
    let done = trigger(port, "quick", Some(API_TOKEN));
    wait_state(port, &done, "success", Some(API_TOKEN));

    // Every mutating form: (path, fields); the last ones act.
    let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
        ("/runs/trigger".into(), vec![("job", "quick")]),
        (format!("/runs/{done}/rerun"), vec![]),
        ("/periodics/trigger".into(), vec![("identity", "quick")]),
        ("/periodics/pause".into(), vec![("identity", "hourly")]),
        ("/periodics/resume".into(), vec![("identity", "hourly")]),
        ("/dispatcher/replan".into(), vec![]),
        (
            "/dispatcher/overrides".into(),
            vec![
                ("kind", "job"),
                ("target", "quick"),
                ("cluster", "build-b"),
                ("ttl", "1h"),
                ("reason", "a test"),
            ],
        ),
        ("/config/reload".into(), vec![]),
        (format!("/runs/{slow}/abort"), vec![]),
    ];
    let (anon_cookie, anon_csrf) = csrf_of(port, &[]);
    for (path, fields) in &forms {
        // No token: an anonymous browser, its own valid CSRF token.
        let a = post_form(
            port,
            path,
            &[("Cookie", &anon_cookie), ("Origin", &origin)],
            &with(fields, &anon_csrf),
        );
        assert_eq!(a.status, 401, "{path}: no token: {}", a.body);
        // A wrong token.
        let a = post_form(
            port,
            path,
            &[
                ("Cookie", &anon_cookie),
                ("Origin", &origin),
                ("Authorization", "Bearer nope"),
            ],
            &with(fields, &anon_csrf),
        );
        assert_eq!(a.status, 401, "{path}: a wrong token");
        // The read token's session.
        let a = post_form(
            port,
            path,
            &[("Cookie", &reader), ("Origin", &origin)],
            &with(fields, &reader_csrf),
        );
        assert_eq!(a.status, 401, "{path}: a reader");
        // Cross-site, with the operator's session: no CSRF token, a wrong
        // one, another session's, a foreign Origin, Sec-Fetch-Site.
        let session = [("Cookie", operator.as_str()), ("Origin", origin.as_str())];
        for (why, csrf) in [
            ("none", ""),
            ("wrong", "00ff"),
            ("another session's", reader_csrf.as_str()),
        ] {
            let a = post_form(port, path, &session, &with(fields, csrf));
            assert_eq!(a.status, 403, "{path}: CSRF token {why}: {}", a.body);
        }
        let a = post_form(
            port,
            path,
            &[("Cookie", &operator), ("Origin", "http://evil.example")],
            &with(fields, &op_csrf),
        );
        assert_eq!(a.status, 403, "{path}: a foreign Origin");
        let a = post_form(
            port,
            path,
            &[("Cookie", &operator), ("Sec-Fetch-Site", "cross-site")],
            &with(fields, &op_csrf),
        );
        assert_eq!(a.status, 403, "{path}: Sec-Fetch-Site cross-site");
        let a = post_form(
            port,
            path,
            &[("Cookie", &operator), ("Origin", "null")],
            &with(fields, &op_csrf),
        );
        assert_eq!(a.status, 403, "{path}: Origin null");
    }
    // Nothing acted: hourly is not paused, slow still runs, no override.
    let periodics = get(port, "/api/v1/periodics", &[("Authorization", &read)]).json();
    let hourly = periodics["periodics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["identity"] == "hourly")
        .unwrap()
        .clone();
    assert_eq!(hourly["paused"], false);
    assert_eq!(
        web_support::run_state(port, &slow, Some(READ_TOKEN))["state"],
        "pending"
    );
    let overrides = get(port, "/api/v1/dispatch/overrides", &[]).json();
    assert_eq!(
        overrides["overrides"].as_array().unwrap().len(),
        0,
        "{overrides}"
    );

    // The operator's session with its CSRF token acts (same origin).
    for (path, fields) in &forms {
        let mut f = fields.clone();
        f.push(("csrf", &op_csrf));
        let a = post_form(
            port,
            path,
            &[
                ("Cookie", &operator),
                ("Origin", &origin),
                ("Sec-Fetch-Site", "same-origin"),
            ],
            &f,
        );
        assert_eq!(a.status, 303, "{path}: {}", a.body);
        if path == "/periodics/pause" {
            let p = get(port, "/api/v1/periodics", &[("Authorization", &read)]).json();
            assert!(p["periodics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["identity"] == "hourly" && p["paused"] == true));
        }
    }
    wait_state(port, &slow, "aborted", Some(READ_TOKEN));
    let overrides = get(port, "/api/v1/dispatch/overrides", &[]).json();
    assert_eq!(
        overrides["overrides"][0]["target"]["job"], "quick",
        "{overrides}"
    );
    assert!(
        overrides["overrides"][0]["actor"]
            .as_str()
            .unwrap()
            .contains("dashboard"),
        "{overrides}"
    );
    // A bearer API token needs no CSRF token (no browser sends one by itself).
    let a = post_form(
        port,
        "/periodics/pause",
        &[("Authorization", &act)],
        &[("identity", "hourly")],
    );
    assert_eq!(a.status, 303, "{}", a.body);

    // The API's mutating routes take the API token as a bearer, never a
    // session cookie (a cookie would let another site's page use them).
    let id = trigger(port, "slow", Some(API_TOKEN));
    let json = [("Content-Type", "application/json")];
    let api: Vec<(&str, String, &str)> = vec![
        ("POST", "/api/v1/runs".into(), r#"{"job": "quick"}"#),
        ("POST", format!("/api/v1/runs/{done}/rerun"), ""),
        ("POST", "/api/v1/periodics/quick/trigger".into(), ""),
        ("POST", "/api/v1/periodics/hourly/pause".into(), ""),
        ("POST", "/api/v1/periodics/hourly/resume".into(), ""),
        ("POST", "/api/v1/config/reload".into(), ""),
        ("POST", "/api/v1/dispatch/replan".into(), ""),
        (
            "POST",
            "/api/v1/dispatch/overrides".into(),
            r#"{"job": "quick", "cluster": "build-a", "ttl": "1h", "reason": "t", "actor": "t"}"#,
        ),
        ("POST", format!("/api/v1/runs/{id}/abort"), ""),
    ];
    for (method, path, body) in &api {
        for headers in [
            vec![],
            vec![("Authorization", "Bearer nope")],
            vec![("Authorization", read.as_str())],
            vec![("Cookie", operator.as_str())],
        ] {
            let mut h = json.to_vec();
            h.extend(headers.iter().copied());
            let a = call(port, method, path, &h, Some(body));
            assert_eq!(a.status, 401, "{method} {path} {headers:?}: {}", a.body);
        }
        let mut h = json.to_vec();
        h.push(("Authorization", &act));
        let a = call(port, method, path, &h, Some(body));
        assert!(
            (200..300).contains(&a.status),
            "{method} {path}: {} {}",
            a.status,
            a.body
        );
    }
    let created = get(port, "/api/v1/dispatch/overrides", &[]).json();
    let ov = created["overrides"].as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v1/dispatch/overrides/{ov}");
    assert_eq!(call(port, "DELETE", &path, &[], None).status, 401);
    assert_eq!(
        call(port, "DELETE", &path, &[("Cookie", &operator)], None).status,
        401
    );
    assert_eq!(
        call(port, "DELETE", &path, &[("Authorization", &act)], None).status,
        204
    );

    // Logged out: the session no longer reads or acts.
    let a = post_form(
        port,
        "/logout",
        &[("Cookie", &operator), ("Origin", &origin)],
        &[("csrf", &op_csrf)],
    );
    assert_eq!(a.status, 303);
    assert_eq!(get(port, "/", &[("Cookie", &operator)]).status, 303);
}

/// Sessions and the CSRF key are kept in the store: a login made before a
/// restart still reads and acts after it, and a form shown before it (the
/// login form of a browser not logged in, an operator's logout) is
/// accepted after it.
#[test]
fn a_session_and_a_form_shown_before_a_restart_work_after_it() {
    let d = tempfile::tempdir().unwrap();
    let daemon = start(d.path(), true, true);
    let (operator, op_csrf) = login(daemon.port, API_TOKEN);
    let (anon_cookie, anon_csrf) = csrf_of(daemon.port, &[]);
    drop(daemon);

    let daemon = start(d.path(), true, true);
    let port = daemon.port;
    let origin = format!("http://127.0.0.1:{port}");
    let page = get(port, "/", &[("Cookie", &operator)]);
    assert_eq!(page.status, 200, "the session reads: {}", page.body);
    assert_eq!(page.csrf(), op_csrf, "the same key signs the forms");
    // The login form shown before the restart logs in after it.
    let a = post_form(
        port,
        "/login",
        &[("Cookie", &anon_cookie), ("Origin", &origin)],
        &[("csrf", &anon_csrf), ("token", READ_TOKEN), ("next", "/")],
    );
    assert_eq!(a.status, 303, "{}", a.body);
    assert!(a.set_cookie("bosun_session").is_some());
    // The operator's form from before acts: it logs out, for good.
    let a = post_form(
        port,
        "/logout",
        &[("Cookie", &operator), ("Origin", &origin)],
        &[("csrf", &op_csrf)],
    );
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(get(port, "/", &[("Cookie", &operator)]).status, 303);
    drop(daemon);
    let daemon = start(d.path(), true, true);
    assert_eq!(get(daemon.port, "/", &[("Cookie", &operator)]).status, 303);
}

/// A kubeconfig whose one context points at nothing (port 1): its runs
/// never start, which is all a run page's link needs.
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: gone, context: {cluster: c, user: u}}]\ncurrent-context: gone\n";

#[test]
fn a_kubernetes_runs_page_links_to_its_results_through_prows_job_url_template() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("k.yaml"), KUBECONFIG).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "plank:\n  job_url_template: 'https://prow.example.com/view/gs/ci/{{{{if eq .Spec.Type \"presubmit\"}}}}pr-logs{{{{else}}}}logs{{{{end}}}}/{{{{.Spec.Job}}}}/{{{{.Status.BuildID}}}}'\nbuild_clusters:\n  default: {{kind: local}}\n  k8s: {{kind: kubernetes, kubeconfig: {}, context: gone}}\n",
            dir.join("k.yaml").display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/jobs.yaml"),
        "periodics:\n- name: on-kubernetes\n  cron: \"0 0 31 2 *\"\n  cluster: k8s\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n- name: here\n  cron: \"0 0 31 2 *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let daemon = common::serve(dir, &[], &[]);
    let port = daemon.port;
    let id = trigger(port, "on-kubernetes", None);
    let run = web_support::run_state(port, &id, None);
    let build = run["build_id"].as_str().unwrap();
    let a = get(port, &format!("/runs/{id}"), &[]);
    assert_page(&a, "a Kubernetes run");
    let url = format!("https://prow.example.com/view/gs/ci/logs/on-kubernetes/{build}");
    assert!(
        a.body.contains(&format!(
            "<a href=\"{url}\" rel=\"noopener noreferrer\" id=\"job-url\">"
        )),
        "{}",
        a.body
    );
    assert!(
        a.body
            .contains("bosun keeps no artifacts of Kubernetes runs"),
        "{}",
        a.body
    );
    // A local run's artifacts are here: no link to a bucket.
    let here = trigger(port, "here", None);
    wait_state(port, &here, "success", None);
    let a = get(port, &format!("/runs/{here}"), &[]);
    assert!(!a.body.contains("id=\"job-url\""), "{}", a.body);
}
