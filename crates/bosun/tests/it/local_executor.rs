//! The local executor with the real `bosun run-shim` and real processes.

use std::path::Path;
use std::time::{Duration, Instant};

use bosun_cluster::executor::{JobProcess, RunStatus};
use bosun_cluster::local::{command_of, LocalExecutor};

fn executor(root: &Path) -> LocalExecutor {
    LocalExecutor::new(
        root,
        vec![
            env!("CARGO_BIN_EXE_bosun").to_string(),
            "run-shim".to_string(),
        ],
    )
}

/// A run's state as the supervisor recorded it: the log's attribute, else
/// the state file.
fn state_of(root: &Path, id: &str) -> String {
    let mut buf = [0u8; 256];
    match rustix::fs::getxattr(
        root.join(format!("{id}.log")),
        "user.bosun.state",
        &mut buf[..],
    ) {
        Ok(n) => String::from_utf8(buf[..n].to_vec()).unwrap(),
        Err(_) => std::fs::read_to_string(root.join(format!("{id}.state"))).unwrap(),
    }
}

/// Replaces a run's state behind the executor's back.
fn set_state(root: &Path, id: &str, text: &str) {
    rustix::fs::setxattr(
        root.join(format!("{id}.log")),
        "user.bosun.state",
        text.as_bytes(),
        rustix::fs::XattrFlags::REPLACE,
    )
    .unwrap();
}

fn job(script: &str) -> JobProcess {
    JobProcess {
        command: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("CI".into(), "true".into()),
            ("JOB_NAME".into(), "unit".into()),
        ],
        working_dir: None,
        decoration: None,
        pipeline: None,
    }
}

fn wait_end(ex: &LocalExecutor, id: &str) -> RunStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match ex.status(id) {
            RunStatus::Starting | RunStatus::Ending | RunStatus::Running { .. }
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10))
            }
            s => return s,
        }
    }
}

#[test]
fn runs_a_job_with_a_cleared_environment_and_records_its_exit() {
    let root = tempfile::tempdir().unwrap();
    let ex = executor(root.path());
    ex.start(
        "r1",
        &job("echo out; echo err >&2; env | sort; pwd; exit 3"),
    )
    .unwrap();
    assert_eq!(wait_end(&ex, "r1"), RunStatus::Exited { code: 3 });
    let log = std::fs::read_to_string(ex.log_path("r1")).unwrap();
    assert!(log.contains("out\n") && log.contains("err\n"), "{log}");
    assert!(
        log.contains("JOB_NAME=unit\n") && log.contains("CI=true\n"),
        "{log}"
    );
    assert!(
        !log.contains("HOME=") && !log.contains("CARGO"),
        "the environment is cleared: {log}"
    );
    assert!(
        log.contains(&format!("{}\n", ex.run_dir("r1").display())),
        "{log}"
    );
    // Starting again does not run it twice.
    ex.start("r1", &job("echo twice")).unwrap();
    assert!(!std::fs::read_to_string(ex.log_path("r1"))
        .unwrap()
        .contains("twice"));
}

#[test]
fn a_restarted_daemon_reattaches_to_running_jobs() {
    let root = tempfile::tempdir().unwrap();
    {
        let ex = executor(root.path());
        ex.start("long", &job("sleep 1; echo done")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(ex.status("long"), RunStatus::Running { .. }) {
            assert!(Instant::now() < deadline, "never started");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // A new executor (a new daemon) knows the run only from its files.
    let ex = executor(root.path());
    assert!(matches!(ex.status("long"), RunStatus::Running { .. }));
    assert_eq!(wait_end(&ex, "long"), RunStatus::Exited { code: 0 });
    assert!(std::fs::read_to_string(ex.log_path("long"))
        .unwrap()
        .contains("done"));
}

#[test]
fn abort_kills_the_whole_process_group() {
    let root = tempfile::tempdir().unwrap();
    let ex = executor(root.path());
    // The job ignores SIGTERM and has a grandchild.
    ex.start(
        "stubborn",
        &job("trap '' TERM; sleep 300 & echo $! > grandchild; wait"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let grandchild = loop {
        if let Ok(s) = std::fs::read_to_string(ex.run_dir("stubborn").join("grandchild")) {
            if let Ok(pid) = s.trim().parse::<u32>() {
                break pid;
            }
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    };
    let started = Instant::now();
    let end = ex.abort("stubborn", Duration::from_millis(300));
    assert!(
        matches!(end, RunStatus::Exited { code } if code == 128 + 9 || code == 128 + 15),
        "{end:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "SIGKILL only after the grace period"
    );
    std::thread::sleep(Duration::from_millis(100));
    let alive = std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
        .is_ok_and(|s| !s.contains(") Z"));
    assert!(!alive, "the grandchild was killed with the group");
}

#[test]
fn a_lost_process_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let ex = executor(root.path());
    // Pids that are alive (this test) but with the wrong start time: neither
    // the job nor its supervisor.
    let me = std::process::id();
    std::fs::write(root.path().join("ghost.state"), format!("{me} 1 {me} 1\n")).unwrap();
    assert_eq!(ex.status("ghost"), RunStatus::Lost);
    assert_eq!(ex.status("never-started"), RunStatus::Lost);
}

#[test]
fn commands_come_from_the_single_container() {
    let spec: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(serde_json::json!({
        "containers": [{"name": "test", "image": "x", "command": ["make"], "args": ["test", "-j2"]}]
    }))
    .unwrap();
    assert_eq!(command_of(&spec).unwrap(), ["make", "test", "-j2"]);
    let two: k8s_openapi::api::core::v1::PodSpec =
        serde_json::from_value(serde_json::json!({"containers": [{"name": "a"}, {"name": "b"}]}))
            .unwrap();
    assert_eq!(
        command_of(&two).unwrap_err().to_string(),
        "a local cluster runs exactly one container, this job has 2"
    );
    let none: k8s_openapi::api::core::v1::PodSpec =
        serde_json::from_value(serde_json::json!({"containers": [{"name": "a", "image": "x"}]}))
            .unwrap();
    assert!(command_of(&none)
        .unwrap_err()
        .to_string()
        .contains("needs the container's command"));
}

#[test]
fn many_short_jobs_at_once_all_record_their_exit() {
    // Jobs that end at once are often reaped before their start has
    // registered them: each must still get its exit code, in its state file
    // and in the executor's answer.
    let root = tempfile::tempdir().unwrap();
    let ex = std::sync::Arc::new(executor(root.path()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let ex = ex.clone();
            std::thread::spawn(move || {
                for i in 0..40 {
                    let id = format!("short-{t}-{i}");
                    let code = (t * 40 + i) % 3;
                    let job = JobProcess {
                        command: vec!["/bin/sh".into(), "-c".into(), format!("exit {code}")],
                        ..job("")
                    };
                    ex.start(&id, &job).unwrap();
                    assert_eq!(wait_end(&ex, &id), RunStatus::Exited { code }, "{id}");
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    for t in 0..8 {
        for i in 0..40 {
            let state = state_of(root.path(), &format!("short-{t}-{i}"));
            let code = (t * 40 + i) % 3;
            assert!(state.ends_with(&format!("\nexit {code}\n")), "{state}");
        }
    }
}

#[test]
fn ends_come_from_the_supervisors_reports_and_from_the_files_once_it_is_gone() {
    let root = tempfile::tempdir().unwrap();
    let ex = executor(root.path());
    // A run whose end the executor has from the supervisor's report: its
    // state file is not read again (overwritten here, it is not believed).
    // The first starts may come before the subscription is acknowledged.
    let mut reported = None;
    for i in 0..50 {
        let id = format!("r{i}");
        ex.start(&id, &job("exit 0")).unwrap();
        assert_eq!(wait_end(&ex, &id), RunStatus::Exited { code: 0 });
        let text = state_of(root.path(), &id);
        set_state(root.path(), &id, &text.replace("exit 0", "exit 5"));
        if ex.status(&id) == (RunStatus::Exited { code: 0 }) {
            reported = Some((id, text));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (id, text) = reported.expect("an end known from the supervisor's report");
    // The supervisor goes away (killed): what it reported may be incomplete
    // from now on, so the files answer again.
    let supervisor: i32 = text.split_whitespace().nth(2).unwrap().parse().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(supervisor).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ex.status(&id) != (RunStatus::Exited { code: 5 }) {
        assert!(
            Instant::now() < deadline,
            "still answered from the reports after the supervisor died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A new supervisor takes over for the next start.
    ex.start("after", &job("exit 4")).unwrap();
    assert_eq!(wait_end(&ex, "after"), RunStatus::Exited { code: 4 });
}

#[test]
fn without_user_attributes_states_live_in_files() {
    // What a filesystem without user attributes gets.
    let root = tempfile::tempdir().unwrap();
    let ex = LocalExecutor::new(
        root.path(),
        vec![
            env!("CARGO_BIN_EXE_bosun").to_string(),
            "run-shim".to_string(),
            "--state-files".to_string(),
        ],
    );
    ex.start("f", &job("exit 6")).unwrap();
    assert_eq!(wait_end(&ex, "f"), RunStatus::Exited { code: 6 });
    let log = root.path().join("f.log");
    assert!(
        rustix::fs::getxattr(&log, "user.bosun.state", &mut [0u8; 256][..]).is_err(),
        "no attribute"
    );
    let state = std::fs::read_to_string(root.path().join("f.state")).unwrap();
    assert!(state.ends_with("\nexit 6\n"), "{state}");
    // A new executor (a restarted daemon) reads it from the file.
    drop(ex);
    assert_eq!(
        executor(root.path()).status("f"),
        RunStatus::Exited { code: 6 }
    );
}

/// Starts sent to the supervisor together get each their own outcome, in
/// order: a refused one fails alone, a repeated one does nothing, and every
/// job started records its exit.
#[test]
fn starts_sent_together_each_get_their_own_outcome() {
    let root = tempfile::tempdir().unwrap();
    let ex = executor(root.path());
    ex.start("before", &job("exit 0")).unwrap();
    assert_eq!(wait_end(&ex, "before"), RunStatus::Exited { code: 0 });
    let exits: Vec<JobProcess> = (0..4).map(|i| job(&format!("exit {i}"))).collect();
    let outside = JobProcess {
        working_dir: Some("../elsewhere".into()),
        ..job("exit 0")
    };
    let again = job("exit 9");
    let starts = [
        ("together-0", &exits[0]),
        ("together-1", &exits[1]),
        ("outside", &outside),
        ("before", &again),
        ("together-2", &exits[2]),
        ("together-3", &exits[3]),
    ];
    let out = ex.start_all(&starts);
    assert_eq!(out.len(), 6);
    for (i, (id, _)) in starts.iter().enumerate() {
        match *id {
            "outside" => {
                let e = out[i].as_ref().unwrap_err().to_string();
                assert!(e.contains("leaves the run's directory"), "{e}");
            }
            _ => assert_eq!(out[i], Ok(()), "{id}"),
        }
    }
    for i in 0..4 {
        let id = format!("together-{i}");
        assert_eq!(wait_end(&ex, &id), RunStatus::Exited { code: i }, "{id}");
    }
    // The repeated start did nothing: the first job's exit stays.
    assert_eq!(wait_end(&ex, "before"), RunStatus::Exited { code: 0 });
    assert!(!root.path().join("outside").exists());
}

/// The supervisor holds its replies while more requests are waiting on the
/// connection: requests written together are answered in one write (the
/// daemon wakes once for a pass's starts, not once each).
#[test]
fn the_supervisor_answers_requests_written_together_in_one_write() {
    use bosun_cluster::shim::{Request, StartRequest, SOCKET};
    use std::io::{Read, Write};
    let root = tempfile::tempdir().unwrap();
    let ex = executor(root.path());
    // The first start brings the supervisor up.
    ex.start("first", &job("exit 0")).unwrap();
    let mut lines = String::new();
    for i in 0..5 {
        let req = Request::Start(StartRequest {
            id: format!("raw-{i}"),
            command: vec!["/bin/sh".into(), "-c".into(), "exit 0".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            working_dir: None,
            run_as: None,
            want_pid: true,
        });
        lines.push_str(&serde_json::to_string(&req).unwrap());
        lines.push('\n');
    }
    let mut conn = std::os::unix::net::UnixStream::connect(root.path().join(SOCKET)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.write_all(lines.as_bytes()).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let n = conn.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert_eq!(text.matches('\n').count(), 5, "the first read: {text:?}");
    for line in text.lines() {
        assert!(line.starts_with("{\"spawned\""), "{line}");
    }
    for i in 0..5 {
        assert_eq!(
            wait_end(&ex, &format!("raw-{i}")),
            RunStatus::Exited { code: 0 }
        );
    }
}

/// A job that ends while its start is under way (here: before the
/// supervisor's one reply to a batch of starts is read) is not reported to
/// `on_exit`, whose wake-up would come before the start is done: its start's
/// caller finds the end in `status` when the start returns. Every end is
/// seen one way or the other.
#[test]
fn an_end_during_its_start_is_seen_by_the_start_not_on_exit() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let root = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let ex = {
        let calls = calls.clone();
        executor(root.path()).on_exit(move || {
            calls.fetch_add(1, Ordering::SeqCst);
        })
    };
    // Up, subscribed and acknowledged: an end known from the report.
    let mut n = 0;
    loop {
        let id = format!("warm-{n}");
        ex.start(&id, &job("exit 0")).unwrap();
        wait_end(&ex, &id);
        let text = state_of(root.path(), &id);
        set_state(root.path(), &id, &text.replace("exit 0", "exit 5"));
        if ex.status(&id) == (RunStatus::Exited { code: 0 }) {
            break;
        }
        n += 1;
        assert!(n < 50, "no end known from the supervisor's report");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = calls.load(Ordering::SeqCst);
    let jobs: Vec<(String, JobProcess)> = (0..32)
        .map(|i| (format!("batch-{i}"), job("exit 0")))
        .collect();
    let starts: Vec<(&str, &JobProcess)> = jobs.iter().map(|(id, j)| (id.as_str(), j)).collect();
    assert!(ex.start_all(&starts).iter().all(Result::is_ok));
    let ended_at_return = starts
        .iter()
        .filter(|(id, _)| matches!(ex.status(id), RunStatus::Exited { .. }))
        .count();
    for (id, _) in &starts {
        assert_eq!(wait_end(&ex, id), RunStatus::Exited { code: 0 }, "{id}");
    }
    std::thread::sleep(Duration::from_millis(200));
    let reported = calls.load(Ordering::SeqCst) - before;
    assert!(
        reported + ended_at_return >= starts.len(),
        "{reported} reported, {ended_at_return} ended by the start's return"
    );
    assert!(
        reported < starts.len(),
        "every end of the batch was reported to on_exit ({reported}), \
         {ended_at_return} ended before the start returned"
    );
}
