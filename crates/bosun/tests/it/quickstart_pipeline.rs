//! The quickstart's Lighthouse pipeline, end to end, as the README runs it:
//! `bosun serve` on `examples/quickstart/` from the project's root, with the
//! Lighthouse-style repository `examples/quickstart/lighthouse-app` followed
//! from the `file://` remote the quickstart's script makes; `bosun run release-notes --follow` triggers its pipeline periodic
//! and follows its log. The pipeline runs on the quickstart's local `default`
//! cluster, step by step: `draft` writes the notes into the shared
//! workspace and gives a result, `publish` prints them with that result,
//! and the `finally` task reports the outcome.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, json, request};

/// The daemon, stopped when the test ends (passed or not).
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "daemon log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

#[test]
fn the_quickstarts_pipeline_periodic_runs_its_tasks_locally() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The project's root: the README's commands run there. The quickstart's
    // script makes the remote its config.yaml follows (`in_repo:`, a
    // `clone_uri` beside that file) and runs the daemon, here the built one.
    // As root, the quickstart's jobs run as nobody: the daemon runs from a
    // copy of the project every user can reach, its `bosun` included.
    let copy = common::reachable_copy(dir);
    let root = copy.checkout.clone();
    let daemon_log = dir.join("daemon.log");
    let mut child = Command::new("bash")
        .arg("examples/quickstart/serve")
        .env("BOSUN", copy.bin.join("bosun"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(&root)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&daemon_log).unwrap())
        .spawn()
        .unwrap();
    let port = common::logged_port(
        &mut child,
        &daemon_log,
        Instant::now() + Duration::from_secs(30),
    );
    let daemon = Daemon {
        child,
        log: daemon_log,
    };

    // The periodic is known by its in-repo identity once the remote is
    // cloned (nothing waits on it); its cron has not fired.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = request(port, "GET", "/api/v1/periodics", None, None);
        assert_eq!(status, 200, "{body}");
        if body.contains("example/lighthouse-app:release-notes") {
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // As the README says: trigger it and follow its log (a few kilobytes:
    // the pipes do not fill while it runs).
    let mut follow = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["run", "release-notes", "--follow"])
        .args(["--server", &format!("http://127.0.0.1:{port}")])
        .current_dir(&root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while follow.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = follow.kill();
            panic!(
                "bosun run --follow did not end: {:?}",
                follow.wait_with_output()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = follow.wait_with_output().unwrap();
    let followed = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{followed}\n{stderr}");
    let id = followed
        .split_whitespace()
        .next()
        .expect("the run's id first")
        .to_string();

    let (_, body) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
    let run = json(&body);
    assert_eq!(run["state"], "success", "{run}\n{followed}");
    assert_eq!(run["job"], "release-notes");
    assert_eq!(run["job_type"], "periodic", "{run}");
    assert_eq!(run["cluster"], "default", "{run}");

    // The log, as the API serves it once the run has ended: the steps'
    // output in task order, Lighthouse's parameters in their environment,
    // draft's result in publish, and finally's report last.
    let (_, log) = request(port, "GET", &format!("/api/v1/runs/{id}/log"), None, None);
    let build_id = run["build_id"].as_str().expect("a build id");
    for line in [
        "[draft/write] drafted NOTES.md".to_string(),
        "[publish/show] # Release notes for everyone".into(),
        format!("[publish/show] - example/lighthouse-app at main, build {build_id}"),
        "[publish/show] published 3 lines".into(),
        "[announce/say] release notes pipeline: Succeeded".into(),
    ] {
        assert!(log.contains(&line), "{line:?} not in:\n{log}");
    }
    let pos = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {log}"))
    };
    assert!(pos("[draft/write]") < pos("[publish/show]"), "{log}");
    assert!(pos("[publish/show]") < pos("[announce/say]"), "{log}");
    // What `--follow` printed is that log.
    assert!(
        followed.contains("[announce/say] release notes pipeline: Succeeded"),
        "{followed}"
    );

    // The notes are in the run's workspace directory.
    let notes = std::fs::read_to_string(
        dir.join(format!("data/runs/default/{id}/workspaces/notes/NOTES.md")),
    )
    .unwrap();
    assert!(
        notes.starts_with("# Release notes for everyone\n"),
        "{notes}"
    );
    assert_eq!(notes.lines().count(), 3, "{notes}");
    drop(daemon);
}
