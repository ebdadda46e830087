//! The local executor with the real `bosun run-shim` and real processes.

use std::path::Path;
use std::time::{Duration, Instant};

use bosun_cluster::local::{command_of, JobProcess, LocalExecutor, ProcessState};

fn executor(root: &Path) -> LocalExecutor {
    LocalExecutor::new(
        root,
        vec![
            env!("CARGO_BIN_EXE_bosun").to_string(),
            "run-shim".to_string(),
        ],
    )
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
    }
}

fn wait_end(ex: &LocalExecutor, id: &str) -> ProcessState {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match ex.status(id) {
            ProcessState::Starting | ProcessState::Running { .. } if Instant::now() < deadline => {
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
    assert_eq!(wait_end(&ex, "r1"), ProcessState::Exited { code: 3 });
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
        while !matches!(ex.status("long"), ProcessState::Running { .. }) {
            assert!(Instant::now() < deadline, "never started");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // A new executor (a new daemon) knows the run only from its files.
    let ex = executor(root.path());
    assert!(matches!(ex.status("long"), ProcessState::Running { .. }));
    assert_eq!(wait_end(&ex, "long"), ProcessState::Exited { code: 0 });
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
        matches!(end, ProcessState::Exited { code } if code == 128 + 9 || code == 128 + 15),
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
    assert_eq!(ex.status("ghost"), ProcessState::Lost);
    assert_eq!(ex.status("never-started"), ProcessState::Lost);
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
