//! The command line over the API: `bosun logs`, `abort`, `rerun`,
//! `clusters`, `config`, `-o json` on every listing, `run --follow`'s exit
//! code, the errors that say what to do, and the man pages and completions,
//! each run as the real binary against a real `bosun serve` of the test
//! (local clusters, jobs as processes).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::wait_state;
use crate::common::{json, request, start, tmp, Run, Serve};

const CONFIG: &str = "build_clusters:\n  default: {kind: local, max_concurrency: 4}\n";
const JOBS: &str = r#"
periodics:
- name: ok
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  spec: {containers: [{image: x, command: ["sh", "-c", "echo hello from $JOB_NAME"]}]}
- name: bad
  cron: "0 0 31 2 *"
  spec: {containers: [{image: x, command: ["sh", "-c", "echo failing; exit 3"]}]}
- name: talk
  cron: "0 0 31 2 *"
  spec: {containers: [{image: x, command: ["sh", "-c", "echo one; sleep 1; echo two"]}]}
- name: sleeper
  cron: "0 0 31 2 *"
  spec: {containers: [{image: x, command: ["sh", "-c", "echo started; exec sleep 300"]}]}
"#;

/// A daemon on `CONFIG` and `JOBS`, with `extra` arguments.
fn daemon(dir: &Path, extra: &[&str]) -> Serve {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), JOBS).unwrap();
    start(dir, extra)
}

/// `bosun ARGS --server` the daemon on `port`, its outcome; none of the
/// environment's `BOSUN_*` settings apply.
fn bosun(port: u16, args: &[&str]) -> Run {
    let server = format!("http://127.0.0.1:{port}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--server", &server]);
    bosun_bare(&all)
}

/// `bosun ARGS` as given; killed, and the test failed, if it has not ended
/// within 60 seconds.
fn bosun_bare(args: &[&str]) -> Run {
    bosun_within(args, Duration::from_secs(60))
}

/// `bosun ARGS`; the test fails if it has not ended within `limit`.
fn bosun_within(args: &[&str], limit: Duration) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(args)
        .env_remove("BOSUN_SERVER")
        .env_remove("BOSUN_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bosun {args:?} still running after {limit:?}; stdout so far:\n{}",
                std::fs::read_to_string(&stdout).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&stdout).unwrap(),
        stderr: std::fs::read_to_string(&stderr).unwrap(),
    }
}

/// `GET path` of the daemon on `port`: status and body; the test fails if
/// the whole answer has not come within 5 seconds.
fn get_at_once(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    if let Err(e) = s.read_to_end(&mut out) {
        panic!(
            "GET {path}: no whole answer within 5 s ({e}): {}",
            String::from_utf8_lossy(&out)
        );
    }
    let out = String::from_utf8(out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, crate::common::dechunk(body))
}

/// Waits until the log of run `id`, as it is now (`?follow=false`, which
/// must answer at once), holds `text`.
fn wait_log(port: u16, id: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, log) = get_at_once(port, &format!("/api/v1/runs/{id}/log?follow=false"));
        if status == 200 && log.contains(text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the log of {id} never held {text:?}: {status} {log:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `bosun run JOB` (not followed): the new run's id.
fn trigger(port: u16, job: &str) -> String {
    let run = bosun(port, &["run", job]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let id = run.stdout.split_whitespace().next().unwrap().to_string();
    assert_eq!(run.stdout, format!("{id} {job} triggered\n"));
    id
}

#[test]
fn logs_prints_what_a_run_wrote_now_or_followed() {
    let (_d, dir) = tmp();
    let d = daemon(&dir, &[]);
    let port = d.port;

    // An ended run: its whole log.
    let ok = trigger(port, "ok");
    wait_state(port, &ok, |s| s == "success");
    let run = bosun(port, &["logs", &ok]);
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (0, "hello from ok\n", "")
    );

    // A running run: what its log holds now, at once (not when it ends).
    let sleeper = trigger(port, "sleeper");
    wait_log(port, &sleeper, "started");
    let run = bosun_within(
        &[
            "logs",
            &sleeper,
            "--server",
            &format!("http://127.0.0.1:{port}"),
        ],
        Duration::from_secs(10),
    );
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (0, "started\n", "")
    );
    // Still running (its start may not be committed as `pending` yet:
    // the process writes before the controller records it).
    let state = wait_state(port, &sleeper, |_| true)["state"].clone();
    assert!(state == "pending" || state == "triggered", "{state}");
    // The route itself: at once with `follow=false`.
    let (status, log) = get_at_once(port, &format!("/api/v1/runs/{sleeper}/log?follow=false"));
    assert_eq!((status, log.as_str()), (200, "started\n"));
    // Its process is not left behind the test's daemon.
    assert_eq!(bosun(port, &["abort", &sleeper]).code, 0);
    wait_state(port, &sleeper, |s| s == "aborted");

    // Followed: every line, as the run writes them, until it ends.
    let talk = trigger(port, "talk");
    let run = bosun(port, &["logs", &talk, "--follow"]);
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (0, "one\ntwo\n", "")
    );
    assert_eq!(wait_state(port, &talk, |_| true)["state"], "success");

    // No such run.
    let run = bosun(port, &["logs", "no-such-run"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "bosun: no run no-such-run; list runs with `bosun runs`\n"
    );
    assert_eq!(run.stdout, "");
}

#[test]
fn abort_ends_a_running_run_in_aborted() {
    let (_d, dir) = tmp();
    let d = daemon(&dir, &[]);
    let port = d.port;
    let id = trigger(port, "sleeper");
    wait_log(port, &id, "started");
    let run = bosun(port, &["abort", &id]);
    assert_eq!(
        (run.code, run.stdout.clone(), run.stderr.as_str()),
        (0, format!("{id} sleeper aborting\n"), "")
    );
    let ended = wait_state(port, &id, |s| s != "pending" && s != "triggered");
    assert_eq!(ended["state"], "aborted", "{ended}");
    // An ended run is not aborted again: the API's reason, exit 1.
    let run = bosun(port, &["abort", &id]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(
        run.stderr,
        format!("bosun: 409: run {id} already ended: aborted\n")
    );
    let run = bosun(port, &["abort", "no-such-run"]);
    assert_eq!(
        (run.code, run.stderr.as_str()),
        (
            1,
            "bosun: no run no-such-run; list runs with `bosun runs`\n"
        )
    );
}

#[test]
fn rerun_makes_a_new_run_of_the_same_job_and_follow_exits_with_its_result() {
    let (_d, dir) = tmp();
    let d = daemon(&dir, &[]);
    let port = d.port;

    // `run --follow`: the log, then `ID STATE`; 0 on success, 1 on failure.
    let run = bosun(port, &["run", "ok", "--follow"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let first = run.stdout.split_whitespace().next().unwrap().to_string();
    assert_eq!(
        run.stdout,
        format!("{first} ok triggered\nhello from ok\n{first} success\n")
    );
    let run = bosun(port, &["run", "bad", "--follow"]);
    let bad = run.stdout.split_whitespace().next().unwrap().to_string();
    assert_eq!(
        (run.code, run.stdout.clone(), run.stderr.as_str()),
        (
            1,
            format!("{bad} bad triggered\nfailing\n{bad} failure\n"),
            ""
        )
    );

    // `rerun`: a new run of the same job, its id printed.
    let run = bosun(port, &["rerun", &first]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let again = run.stdout.split_whitespace().next().unwrap().to_string();
    assert_ne!(again, first);
    assert_eq!(run.stdout, format!("{again} ok triggered\n"));
    let new = wait_state(port, &again, |s| s == "success");
    assert_eq!(new["job"], "ok");
    assert_eq!(new["job_type"], "periodic");

    // `rerun --follow` keeps `run --follow`'s exit codes.
    let run = bosun(port, &["rerun", &first, "--follow"]);
    let id = run.stdout.split_whitespace().next().unwrap().to_string();
    assert_eq!(
        (run.code, run.stdout.clone()),
        (
            0,
            format!("{id} ok triggered\nhello from ok\n{id} success\n")
        )
    );
    let run = bosun(port, &["rerun", &bad, "--follow"]);
    let id = run.stdout.split_whitespace().next().unwrap().to_string();
    assert_ne!(id, bad);
    assert_eq!(
        (run.code, run.stdout.clone()),
        (1, format!("{id} bad triggered\nfailing\n{id} failure\n"))
    );

    let run = bosun(port, &["rerun", "no-such-run"]);
    assert_eq!(
        (run.code, run.stderr.as_str()),
        (
            1,
            "bosun: no run no-such-run; list runs with `bosun runs`\n"
        )
    );
    // Five runs of the two jobs in all.
    let (_, body) = request(port, "GET", "/api/v1/runs", None, None);
    assert_eq!(json(&body)["runs"].as_array().unwrap().len(), 5, "{body}");
}

#[test]
fn clusters_show_a_trusted_cluster_with_its_rules_and_refusals_say_why() {
    let (_d, dir) = tmp();
    // The daemon runs as root in CI: with a trusted cluster, every local
    // cluster runs its jobs as `nobody`, who must reach their directories.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        r#"
build_clusters:
  default: {kind: local, run_as: nobody, max_concurrency: 2}
  secure:
    kind: local
    run_as: nobody
    max_concurrency: 3
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
  cluster: secure
  spec: {containers: [{image: x, command: ["true"]}]}
"#,
    )
    .unwrap();
    let d = start(&dir, &[]);
    let port = d.port;

    // The API: `trusted` is the allow rules, or null.
    let (status, body) = request(port, "GET", "/api/v1/clusters", None, None);
    assert_eq!(status, 200, "{body}");
    let api = json(&body);
    let by_alias = |alias: &str| {
        api["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["alias"] == alias)
            .cloned()
            .unwrap_or_else(|| panic!("no {alias}: {api}"))
    };
    assert_eq!(
        by_alias("secure")["trusted"],
        serde_json::json!([
            {"jobs": ["label-sync"], "repos": [], "types": ["periodic"]},
            {"jobs": [], "repos": ["org/app"], "types": ["postsubmit"]},
        ])
    );
    assert_eq!(by_alias("default")["trusted"], serde_json::Value::Null);

    // The table.
    let run = bosun(port, &["clusters"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let status = by_alias("secure")["status"].as_str().unwrap().to_string();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["ALIAS", "KIND", "SLOTS", "STATUS", "TRUSTED"]
    );
    let row = |alias: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(alias))
            .unwrap_or_else(|| panic!("no {alias} row:\n{}", run.stdout))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        row("secure"),
        format!(
            "secure local 3 {status} yes: jobs=label-sync types=periodic; repos=org/app types=postsubmit"
        )
    );
    assert_eq!(
        row("default"),
        format!(
            "default local 2 {} no",
            by_alias("default")["status"].as_str().unwrap()
        )
    );

    // `-o json`: the API's answer.
    let run = bosun(port, &["clusters", "-o", "json"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let printed = json(&run.stdout);
    assert_eq!(printed["clusters"].as_array().unwrap().len(), 2);
    for c in printed["clusters"].as_array().unwrap() {
        let alias = c["alias"].as_str().unwrap();
        assert_eq!(c["trusted"], by_alias(alias)["trusted"], "{alias}");
    }

    // A refusal of the trusted cluster: the API's reason, as it is.
    let refs = r#"{"org": "evil", "repo": "app", "base_ref": "main"}"#;
    let (status, answer) = request(
        port,
        "POST",
        "/api/v1/runs",
        Some(&format!(r#"{{"job": "label-sync", "refs": {refs}}}"#)),
        None,
    );
    assert_eq!(status, 403, "{answer}");
    let reason = json(&answer)["error"].as_str().unwrap().to_string();
    assert!(reason.contains("trusted cluster \"secure\""), "{reason}");
    let run = bosun(port, &["run", "label-sync", "--refs", refs]);
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr),
        (1, "", format!("bosun: refused: {reason}\n"))
    );
}

#[test]
fn config_reload_of_a_broken_job_file_names_the_file_and_line_and_fails() {
    let (_d, dir) = tmp();
    let d = daemon(&dir, &[]);
    let port = d.port;
    let run = bosun(port, &["config", "status"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    assert!(
        run.stdout.starts_with("configuration: valid\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("4 periodics"), "{}", run.stdout);

    // The cron on line 3 of broken.yaml is invalid.
    std::fs::write(
        dir.join("jobs/broken.yaml"),
        "periodics:\n- name: nightly\n  cron: \"99 4 * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n",
    )
    .unwrap();
    let run = bosun(port, &["config", "reload"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .starts_with("configuration: invalid: the last good one stays in force\n"),
        "{}",
        run.stdout
    );
    let error = run
        .stdout
        .lines()
        .skip_while(|l| *l != "errors:")
        .nth(1)
        .unwrap_or_else(|| panic!("no error listed:\n{}", run.stdout));
    assert!(
        error.contains("broken.yaml:3") && error.contains("nightly"),
        "the error names the file, line and job: {error}"
    );
    assert!(
        run.stderr
            .starts_with("bosun: the configuration is invalid (1 error); version "),
        "{}",
        run.stderr
    );
    // The status says so too, and so does its JSON.
    let run = bosun(port, &["config", "status"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains(error), "{}", run.stdout);
    let run = bosun(port, &["config", "status", "-o", "json"]);
    assert_eq!(run.code, 1);
    let status = json(&run.stdout);
    assert_eq!(status["ok"], false);
    let first = status["errors"][0].as_str().unwrap();
    assert!(first.starts_with(error.trim()), "{first}");

    // Fixed: the reload succeeds.
    std::fs::remove_file(dir.join("jobs/broken.yaml")).unwrap();
    let run = bosun(port, &["config", "reload"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    assert!(
        run.stdout.starts_with("configuration: valid\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn every_listing_prints_the_apis_json_with_o_json() {
    let (_d, dir) = tmp();
    let d = daemon(&dir, &[]);
    let port = d.port;
    let id = trigger(port, "ok");
    wait_state(port, &id, |s| s == "success");
    for (args, key) in [
        (&["runs", "-o", "json"][..], "runs"),
        (&["runs", "--output", "json", "--job", "ok"][..], "runs"),
        (&["periodics", "-o", "json"][..], "periodics"),
        (&["periodics", "list", "-o", "json"][..], "periodics"),
        (&["clusters", "--output", "json"][..], "clusters"),
        (&["config", "status", "-o", "json"][..], "errors"),
    ] {
        let run = bosun(port, args);
        assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{args:?}");
        let v = json(&run.stdout);
        assert!(
            v.get(key).is_some_and(|x| x.is_array()),
            "{args:?}: no {key} list in {v}"
        );
        // The table is not JSON.
        let table_args: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| !["-o", "--output", "json"].contains(a))
            .collect();
        let table = bosun(port, &table_args);
        assert_eq!(table.code, 0, "{args:?}: {}", table.stderr);
        assert!(
            serde_json::from_str::<serde_json::Value>(&table.stdout).is_err(),
            "{args:?}"
        );
    }
    let run = bosun(port, &["runs", "-o", "json"]);
    assert_eq!(json(&run.stdout)["runs"][0]["id"], id);
    let run = bosun(port, &["periodics", "-o", "json"]);
    assert_eq!(json(&run.stdout)["periodics"].as_array().unwrap().len(), 4);
}

#[test]
fn errors_say_what_to_do() {
    // Nothing listens: the URL is named, and how to start or find a daemon.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [
        &["runs"][..],
        &["logs", "x"],
        &["clusters"],
        &["config", "reload"],
    ] {
        let run = bosun(port, args);
        assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{args:?}");
        assert!(
            run.stderr.starts_with(&format!("bosun: cannot reach the daemon at {url} ("))
                && run.stderr.ends_with(
                    "): start it with `bosun serve`, or give its URL with --server URL (or set BOSUN_SERVER)\n"
                ),
            "{args:?}: {}",
            run.stderr
        );
    }

    // Tokens: reads need the read token, actions the API token.
    let (_d, dir) = tmp();
    std::fs::write(dir.join("api-token"), "api-s3cret\n").unwrap();
    std::fs::write(dir.join("read-token"), "read-s3cret\n").unwrap();
    std::fs::write(dir.join("wrong-token"), "nope\n").unwrap();
    let file = |n: &str| dir.join(n).display().to_string();
    let d = daemon(
        &dir,
        &[
            "--api-token-file",
            &file("api-token"),
            "--read-token-file",
            &file("read-token"),
        ],
    );
    let url = format!("http://127.0.0.1:{}", d.port);
    let wants = format!(
        "bosun: the daemon at {url} wants a token (401): pass --token-file FILE (or set BOSUN_TOKEN_FILE) with its API token\n"
    );
    for args in [
        &["runs"][..],
        &["run", "ok"],
        &["clusters"],
        &["config", "status"],
    ] {
        let run = bosun(d.port, args);
        assert_eq!(
            (run.code, run.stderr.as_str()),
            (1, wants.as_str()),
            "{args:?}"
        );
    }
    let run = bosun(d.port, &["run", "ok", "--token-file", &file("wrong-token")]);
    assert_eq!(
        (run.code, run.stderr),
        (
            1,
            format!(
                "bosun: the daemon at {url} refused the token in {} (401): pass --token-file FILE (or set BOSUN_TOKEN_FILE) with its API token\n",
                file("wrong-token")
            )
        )
    );
    // The read token reads; the API token acts, and reads too.
    let run = bosun(d.port, &["runs", "--token-file", &file("read-token")]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let run = bosun(d.port, &["run", "ok", "--token-file", &file("read-token")]);
    assert_eq!(run.code, 1, "the read token does not act");
    let run = bosun(d.port, &["run", "ok", "--token-file", &file("api-token")]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let id = run.stdout.split_whitespace().next().unwrap().to_string();
    // BOSUN_TOKEN_FILE is the same as --token-file.
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["logs", &id, "--follow", "--server", &url])
        .env("BOSUN_TOKEN_FILE", file("api-token"))
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(0), "hello from ok\n")
    );
}

/// The subcommands `bosun --help` lists (clap's own listing of its
/// definitions), `help` aside.
fn listed_subcommands() -> Vec<String> {
    let run = bosun_bare(&["--help"]);
    assert_eq!(run.code, 0);
    let names: Vec<String> = run
        .stdout
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    assert!(names.len() > 10, "{}", run.stdout);
    names
}

#[test]
fn the_man_pages_and_completions_name_every_subcommand_help_lists() {
    let names = listed_subcommands();
    for new in [
        "logs",
        "abort",
        "rerun",
        "clusters",
        "config",
        "completions",
        "man",
    ] {
        assert!(names.iter().any(|n| n == new), "{new} not in {names:?}");
    }
    let hidden = ["run-shim", "run-decorated", "run-pipeline"];

    // `bosun man`: bosun.1 on standard output, listing each subcommand.
    let run = bosun_bare(&["man"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert!(
        run.stdout.starts_with(".ie"),
        "roff: {}",
        &run.stdout[..200.min(run.stdout.len())]
    );
    for n in &names {
        let entry = format!("bosun\\-{}(1)", n.replace('-', "\\-"));
        assert!(run.stdout.contains(&entry), "bosun.1 lacks {entry}");
    }
    for h in hidden {
        assert!(
            !run.stdout.contains(&h.replace('-', "\\-")),
            "bosun.1 names {h}"
        );
    }

    // `bosun man --dir`: a page per subcommand.
    let (_d, dir) = tmp();
    let out = dir.join("man1");
    let run = bosun_bare(&["man", "--dir", out.to_str().unwrap()]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert!(out.join("bosun.1").is_file());
    for n in &names {
        let page = out.join(format!("bosun-{n}.1"));
        assert!(page.is_file(), "no {}", page.display());
        assert!(
            run.stdout.contains(&page.display().to_string()),
            "{}",
            run.stdout
        );
    }
    assert!(out.join("bosun-periodics-list.1").is_file());
    assert!(out.join("bosun-config-reload.1").is_file());
    for h in hidden {
        assert!(!out.join(format!("bosun-{h}.1")).exists(), "{h}");
    }

    // `bosun completions SHELL`.
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = bosun_bare(&["completions", shell]);
        assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{shell}");
        for n in &names {
            let entry = match shell {
                "bash" => format!("bosun,{n})"),
                "zsh" => format!("'{n}:"),
                "fish" => format!("-a \"{n}\" -d"),
                "elvish" => format!("cand {n} '"),
                _ => format!("[CompletionResult]::new('{n}', '{n}'"),
            };
            assert!(run.stdout.contains(&entry), "{shell} lacks {entry:?}");
        }
        for h in hidden {
            assert!(!run.stdout.contains(h), "{shell} names {h}");
        }
    }
    let run = bosun_bare(&["completions", "tcsh"]);
    assert_eq!(run.code, 2, "clap refuses an unknown shell");
}
