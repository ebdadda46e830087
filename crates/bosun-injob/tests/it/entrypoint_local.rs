//! The local executor's entrypoint (`bosun_injob::entrypoint`) with real
//! processes, and the job-path files (`bosun_job::artifacts`) byte for byte.
//!
//! Signals are process-wide, so every wrapped run happens in a process of its
//! own: this test binary re-executed with [`HELPER_ENV`] set, running only
//! the ignored test [`wrapper_process`], which calls `run_wrapped` and exits
//! with its code — as `bosun run-decorated` does.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bosun_config::types::{Pull, Refs};
use bosun_injob::entrypoint::{run_wrapped, WrapOptions};
use bosun_job::artifacts::{
    self, combine_metadata, go_float, go_json, prowjob_json, read_metadata, revision, Finished,
    ProwJob, Started,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Set in the wrapper process: the options, as JSON.
const HELPER_ENV: &str = "BOSUN_ENTRYPOINT_TEST_OPTIONS";

/// [`WrapOptions`] on their way to the wrapper process.
#[derive(Serialize, Deserialize, Default, Clone)]
struct Opts {
    args: Vec<String>,
    dir: PathBuf,
    env: Vec<(String, String)>,
    timeout_ms: u64,
    grace_ms: u64,
    process_log: PathBuf,
    marker_file: PathBuf,
    artifact_dir: PathBuf,
    /// After the test: SIGTERM to the wrapper itself, then `after.txt` in
    /// `dir` (as `bosun run-decorated` writes `finished.json`).
    signal_self_after: bool,
}

/// The wrapper process (see the module's doc); does nothing when not
/// re-executed by a test.
#[test]
#[ignore = "the wrapper process the other tests start"]
fn wrapper_process() {
    let Ok(json) = std::env::var(HELPER_ENV) else {
        return;
    };
    let o: Opts = serde_json::from_str(&json).expect("options");
    let ms = |n: u64| (n > 0).then(|| Duration::from_millis(n));
    let code = run_wrapped(&WrapOptions {
        args: o.args,
        dir: o.dir.clone(),
        env: o.env,
        timeout: ms(o.timeout_ms),
        grace_period: ms(o.grace_ms),
        process_log: o.process_log,
        marker_file: o.marker_file,
        artifact_dir: o.artifact_dir,
    });
    if o.signal_self_after {
        use rustix::process::{getpid, kill_process, Signal};
        kill_process(getpid(), Signal::TERM).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        fs::write(o.dir.join("after.txt"), code.to_string()).unwrap();
    }
    std::process::exit(code);
}

/// A run's directory with its `logs/`.
struct Run {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Run {
    fn new() -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        fs::create_dir_all(root.join("logs")).unwrap();
        Run { _dir: dir, root }
    }

    fn opts(&self, script: &str) -> Opts {
        Opts {
            args: vec!["sh".into(), "-c".into(), script.into()],
            dir: self.root.clone(),
            env: vec![],
            timeout_ms: 0,
            grace_ms: 0,
            process_log: self.root.join("logs/build-log.txt"),
            marker_file: self.root.join("logs/marker-file.txt"),
            artifact_dir: self.root.join("logs/artifacts"),
            signal_self_after: false,
        }
    }

    fn build_log(&self) -> String {
        fs::read_to_string(self.root.join("logs/build-log.txt")).unwrap_or_default()
    }

    fn marker(&self) -> String {
        fs::read_to_string(self.root.join("logs/marker-file.txt")).expect("marker file")
    }

    /// Waits (generously) for a file the test writes; its content.
    fn wait_for(&self, name: &str) -> String {
        let path = self.root.join(name);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(s) = fs::read_to_string(&path) {
                if s.ends_with('\n') {
                    return s.trim().to_string();
                }
            }
            assert!(Instant::now() < deadline, "{name} never appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn spawn(opts: &Opts) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "entrypoint_local::wrapper_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(HELPER_ENV, serde_json::to_string(opts).unwrap())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wrapper process")
}

fn finish(child: Child) -> (i32, String) {
    let Output { status, stdout, .. } = child.wait_with_output().unwrap();
    (
        status.code().expect("the wrapper exits"),
        String::from_utf8_lossy(&stdout).into_owned(),
    )
}

fn wrap(opts: &Opts) -> (i32, String) {
    finish(spawn(opts))
}

/// entrypoint's JSON log lines in `text`, as (msg, error).
fn log_lines(text: &str) -> Vec<(String, Option<String>)> {
    text.lines()
        .filter_map(|l| {
            let l = &l[l.find("{\"component\"")?..];
            serde_json::from_str::<Value>(l).ok()
        })
        .map(|v| {
            assert_eq!(v["component"], "entrypoint");
            assert_eq!(v["level"], "error");
            assert_eq!(v["severity"], "error");
            assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
            (
                v["msg"].as_str().unwrap().to_string(),
                v["error"].as_str().map(String::from),
            )
        })
        .collect()
}

fn msgs(text: &str) -> Vec<String> {
    log_lines(text).into_iter().map(|(m, _)| m).collect()
}

/// Whether `pid` is gone (or a zombie nobody has collected yet).
fn gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.rfind(')').is_some_and(|i| s[i + 2..].starts_with('Z')),
    }
}

fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn exit_codes_pass_through() {
    for (script, code) in [("exit 0", 0), ("exit 1", 1), ("exit 42", 42)] {
        let run = Run::new();
        let (status, stdout) = wrap(&run.opts(script));
        assert_eq!(status, code, "{script}");
        assert_eq!(run.marker(), code.to_string(), "{script}");
        assert!(run.root.join("logs/artifacts").is_dir());
        // Nothing of entrypoint's own in the build log; the failure is
        // logged to stdout only.
        assert_eq!(run.build_log(), "", "{script}");
        if code == 0 {
            assert!(log_lines(&stdout).is_empty(), "{stdout}");
        } else {
            assert_eq!(
                log_lines(&stdout),
                [(
                    "Error executing test process".to_string(),
                    Some(format!("wrapped process failed: exit status {code}"))
                )]
            );
        }
    }
}

#[test]
fn killed_by_a_signal_is_minus_one() {
    let run = Run::new();
    let (status, stdout) = wrap(&run.opts("kill -9 $$"));
    assert_eq!(status, 255);
    assert_eq!(run.marker(), "-1");
    assert_eq!(
        log_lines(&stdout),
        [(
            "Error executing test process".to_string(),
            Some("wrapped process failed: signal: killed".to_string())
        )]
    );
}

#[test]
fn output_goes_to_stdout_and_the_process_log() {
    let run = Run::new();
    let mut opts = run.opts("echo out; echo err >&2; printf 'dir=%s env=%s' \"$(pwd)\" \"$FOO\"");
    opts.env = vec![("FOO".into(), "bar <&>".into())];
    fs::create_dir(run.root.join("work")).unwrap();
    opts.dir = run.root.join("work");
    let (status, stdout) = wrap(&opts);
    assert_eq!(status, 0);
    let want = format!(
        "out\nerr\ndir={} env=bar <&>",
        run.root.join("work").canonicalize().unwrap().display()
    );
    assert_eq!(run.build_log(), want);
    assert!(stdout.contains(&want), "{stdout}");
}

#[test]
fn a_command_that_is_not_there_is_127() {
    let run = Run::new();
    let mut opts = run.opts("");
    opts.args = vec!["bosun-no-such-command".into(), "x".into()];
    let (status, stdout) = wrap(&opts);
    assert_eq!(status, 127);
    assert_eq!(run.marker(), "127");
    let msg = "could not start the process: exec: \"bosun-no-such-command\": executable file not found in $PATH";
    assert_eq!(run.build_log(), msg);
    assert_eq!(
        log_lines(&stdout),
        [(
            "Error executing test process".to_string(),
            Some(msg.to_string())
        )]
    );

    let run = Run::new();
    let mut opts = run.opts("");
    opts.args = vec!["./not-here".into()];
    let (status, _) = wrap(&opts);
    assert_eq!(status, 127);
    assert_eq!(
        run.build_log(),
        "could not start the process: fork/exec ./not-here: no such file or directory"
    );
}

#[test]
fn timeout_interrupts_and_the_test_exits() {
    let run = Run::new();
    let mut opts = run.opts("echo started; exec sleep 1000");
    opts.timeout_ms = 500;
    opts.grace_ms = 60_000;
    let t = Instant::now();
    let (status, stdout) = wrap(&opts);
    // SIGINT ends `sleep` at once: far less than the grace.
    assert!(t.elapsed() < Duration::from_secs(50), "{:?}", t.elapsed());
    assert_eq!(status, 127);
    assert_eq!(run.marker(), "127");
    let log = run.build_log();
    assert!(log.starts_with("started\n"), "{log}");
    assert_eq!(
        msgs(&log),
        [
            "Process did not finish before 500ms timeout",
            "Process gracefully exited before 1m0s grace period",
        ]
    );
    assert_eq!(
        log_lines(&stdout).last().unwrap(),
        &(
            "Error executing test process".to_string(),
            Some("process timed out".to_string())
        )
    );
}

#[test]
fn a_test_that_ignores_sigint_is_killed_after_the_grace() {
    let run = Run::new();
    let mut opts = run.opts("trap '' INT; echo $$ > pid.txt; while :; do sleep 1; done");
    opts.timeout_ms = 1000;
    opts.grace_ms = 2000;
    let t = Instant::now();
    let (status, _) = wrap(&opts);
    let elapsed = t.elapsed();
    assert!(elapsed >= Duration::from_secs(3), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
    assert_eq!(status, 127);
    assert_eq!(run.marker(), "127");
    assert_eq!(
        msgs(&run.build_log()),
        [
            "Process did not finish before 1s timeout",
            "Process did not exit before 2s grace period",
        ]
    );
    let pid: i32 = run.wait_for("pid.txt").parse().unwrap();
    assert!(gone(pid));
}

#[test]
fn sigterm_to_the_wrapper_aborts_with_130() {
    let run = Run::new();
    // The wrapper sends SIGINT, then SIGTERM to the group: `wait` returns on
    // SIGINT and the INT trap runs. The background `sleep` ignores SIGINT
    // (a shell without job control starts it so), so the second `wait`
    // holds the shell until SIGTERM comes, however late, and the TERM trap
    // runs.
    let mut opts = run.opts(
        "trap 'echo got INT' INT; trap 'echo got TERM; exit 3' TERM; \
         echo $$ > pid.txt; sleep 1000 & wait; wait",
    );
    opts.grace_ms = 60_000;
    let child = spawn(&opts);
    let pid: i32 = run.wait_for("pid.txt").parse().unwrap();
    let t = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let (status, stdout) = finish(child);
    assert!(t.elapsed() < Duration::from_secs(50), "{:?}", t.elapsed());
    assert_eq!(status, 130);
    assert_eq!(run.marker(), "130");
    let log = run.build_log();
    assert_eq!(
        msgs(&log),
        [
            "Entrypoint received interrupt: terminated",
            "Process gracefully exited before 1m0s grace period",
        ]
    );
    assert!(log.contains("got TERM\n"), "{log}");
    assert!(stdout.contains("got TERM\n"), "{stdout}");
    assert_eq!(
        log_lines(&stdout).last().unwrap(),
        &(
            "Error executing test process".to_string(),
            Some("process aborted".to_string())
        )
    );
    assert!(gone(pid));
}

#[test]
fn signals_after_the_test_are_ignored() {
    // The caller writes finished.json after run_wrapped: an abort then does
    // not cut it short.
    let run = Run::new();
    let mut opts = run.opts("exit 4");
    opts.signal_self_after = true;
    let (status, _) = wrap(&opts);
    assert_eq!(status, 4);
    assert_eq!(fs::read_to_string(run.root.join("after.txt")).unwrap(), "4");
}

#[test]
fn grandchildren_do_not_outlive_the_test() {
    // Interrupted: `sleep` started in the background ignores SIGINT (as
    // background jobs of a script do); the shell ends, the group is killed.
    let run = Run::new();
    let mut opts = run.opts("sleep 1000 & echo $! > bg.txt; wait");
    opts.timeout_ms = 500;
    opts.grace_ms = 60_000;
    let (status, _) = wrap(&opts);
    assert_eq!(status, 127);
    let bg: i32 = run.wait_for("bg.txt").parse().unwrap();
    assert!(wait_gone(bg), "background sleep {bg} still runs");

    // Ending by itself: what it left behind is killed, and the wrapper does
    // not wait for it although it holds the output open.
    let run = Run::new();
    let opts = run.opts("sleep 1000 & echo $! > bg.txt; exit 5");
    let t = Instant::now();
    let (status, _) = wrap(&opts);
    assert!(t.elapsed() < Duration::from_secs(50), "{:?}", t.elapsed());
    assert_eq!(status, 5);
    let bg: i32 = run.wait_for("bg.txt").parse().unwrap();
    assert!(wait_gone(bg), "background sleep {bg} still runs");
}

#[test]
fn the_test_dies_with_the_wrapper() {
    let run = Run::new();
    let opts = run.opts("echo $$ > pid.txt; exec sleep 1000");
    let mut child = spawn(&opts);
    let pid: i32 = run.wait_for("pid.txt").parse().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(wait_gone(pid), "test {pid} outlived its wrapper");
}

#[test]
fn marker_is_replaced_atomically() {
    let run = Run::new();
    fs::write(run.root.join("logs/marker-file.txt"), "old content").unwrap();
    let (status, _) = wrap(&run.opts("exit 7"));
    assert_eq!(status, 7);
    assert_eq!(run.marker(), "7");
    let names: Vec<_> = fs::read_dir(run.root.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(names, ["artifacts", "build-log.txt", "marker-file.txt"]);
}

#[test]
fn unwritable_process_log_is_127() {
    let run = Run::new();
    let mut opts = run.opts("echo ran > ran.txt");
    opts.process_log = run.root.join("no-such-dir/build-log.txt");
    let (status, stdout) = wrap(&opts);
    assert_eq!(status, 127);
    assert_eq!(run.marker(), "127");
    assert!(!run.root.join("ran.txt").exists());
    assert_eq!(
        log_lines(&stdout),
        [(
            "Error executing test process".to_string(),
            Some(format!(
                "could not create process logfile({}): no such file or directory",
                opts.process_log.display()
            ))
        )]
    );
}

#[test]
fn unwritable_marker_is_127() {
    let run = Run::new();
    let mut opts = run.opts("exit 0");
    opts.marker_file = run.root.join("no-such-dir/marker-file.txt");
    let (status, stdout) = wrap(&opts);
    assert_eq!(status, 127);
    assert_eq!(msgs(&stdout), ["Error writing exit code to marker file"]);
}

// ---- job-path files ----------------------------------------------------

fn refs(org: &str, repo: &str, base_ref: &str, base_sha: Option<&str>) -> Refs {
    Refs {
        org: org.into(),
        repo: repo.into(),
        base_ref: Some(base_ref.into()),
        base_sha: base_sha.map(String::from),
        ..Refs::default()
    }
}

fn pull(number: i64, sha: &str) -> Pull {
    Pull {
        number,
        author: "alice".into(),
        sha: sha.into(),
        ..Pull::default()
    }
}

// The fixtures are what Go's encoding/json writes for testgrid's
// `metadata.Started` / `metadata.Finished` (GoogleCloudPlatform/testgrid
// metadata/job.go) filled as initupload and the sidecar fill them.

#[test]
fn started_json_of_a_presubmit() {
    let mut main = refs("kubernetes", "test-infra", "master", Some("base1"));
    main.pulls = vec![pull(1234, "head1"), pull(99, "head2")];
    main.pulls[1].ref_ = Some("refs/pull/99/head".into());
    let extra = refs("kubernetes", "release", "main", None);
    let all = [main.clone(), extra.clone()];
    let started = Started::new(1_700_000_000, &all, true, [(&all[0], "merged1")]);
    assert_eq!(
        started.to_json(),
        r#"{"timestamp":1700000000,"pull":"1234","repos":{"kubernetes/release":"main","kubernetes/test-infra":"master:base1,1234:head1,99:head2:refs/pull/99/head"},"repo-commit":"merged1","repo-version":"merged1"}"#
    );
    // Without the main ref's clone record: its revision (first pull's SHA).
    let started = Started::new(1_700_000_000, &all, true, [(&all[1], "other")]);
    assert_eq!(
        started.to_json(),
        r#"{"timestamp":1700000000,"pull":"1234","repos":{"kubernetes/release":"main","kubernetes/test-infra":"master:base1,1234:head1,99:head2:refs/pull/99/head"},"repo-commit":"head1","repo-version":"head1"}"#
    );
}

#[test]
fn started_json_of_a_periodic() {
    // The first extra ref that is not auxiliary is the main one; no pull.
    let mut aux = refs("etcd-io", "tools", "main", Some("aux1"));
    aux.auxiliary = true;
    let etcd = refs("etcd-io", "etcd", "release-3.7", None);
    let all = [aux, etcd];
    let started = Started::new(5, &all, false, []);
    assert_eq!(
        started.to_json(),
        r#"{"timestamp":5,"repos":{"etcd-io/etcd":"release-3.7","etcd-io/tools":"main:aux1"},"repo-commit":"release-3.7","repo-version":"release-3.7"}"#
    );
    let started = Started::new(5, &all, false, [(&all[1], "abc")]);
    assert_eq!(started.repo_commit, "abc");
    // No refs at all: only the timestamp.
    assert_eq!(
        Started::new(7, &[], false, []).to_json(),
        r#"{"timestamp":7}"#
    );
    assert_eq!(revision(&all, false), "release-3.7");
    assert_eq!(revision(&[], false), "");
}

#[test]
fn finished_json() {
    let meta = |v: Value| v.as_object().unwrap().clone();
    assert_eq!(
        Finished::from_exit(1_700_000_100, 0, Map::new(), "head1").to_json(),
        r#"{"timestamp":1700000100,"passed":true,"result":"SUCCESS","revision":"head1"}"#
    );
    assert_eq!(
        Finished::from_exit(
            1_700_000_100,
            130,
            meta(json!({"job-version": "v1.2<3>", "n": 1.0, "big": 1e21, "tiny": 1.5e-7})),
            "base1"
        )
        .to_json(),
        r#"{"timestamp":1700000100,"passed":false,"metadata":{"big":1e+21,"job-version":"v1.2\u003c3\u003e","n":1,"tiny":1.5e-7},"result":"ABORTED","revision":"base1"}"#
    );
    for code in [1, 127, -1] {
        assert_eq!(
            Finished::from_exit(9, code, Map::new(), "").to_json(),
            r#"{"timestamp":9,"passed":false,"result":"FAILURE"}"#
        );
    }
    // `passed` is written even when unknown.
    assert_eq!(go_json(&Finished::default()), r#"{"passed":null}"#);
}

#[test]
fn metadata_is_merged_from_the_job_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["make".to_string(), "test".to_string()];
    let path = dir.path().join("metadata.json");
    // Absent: nothing.
    assert!(read_metadata(&path, &args).is_empty());
    fs::write(
        &path,
        r#"{"job-version":"v1","links":{"b":"2","a":"1"},"count":12345678901234567891,"ok":true}"#,
    )
    .unwrap();
    let m = read_metadata(&path, &args);
    assert_eq!(
        go_json(&m),
        r#"{"count":12345678901234567000,"job-version":"v1","links":{"a":"1","b":"2"},"ok":true}"#
    );
    fs::write(&path, "null").unwrap();
    assert!(read_metadata(&path, &args).is_empty());
    // Not an object, or not JSON: reported under sidecar-errors.
    fs::write(&path, "[1]").unwrap();
    assert_eq!(
        go_json(&read_metadata(&path, &args)),
        r#"{"sidecar-errors":{"entry 0: make test":"json: cannot unmarshal array into Go value of type map[string]interface {}"}}"#
    );
    fs::write(&path, "{oops").unwrap();
    let m = read_metadata(&path, &args);
    assert!(
        m["sidecar-errors"]["entry 0: make test"].is_string(),
        "{m:?}"
    );
    // Several entries: later keys win.
    let second = dir.path().join("second.json");
    fs::write(&path, r#"{"a":"first","b":"first"}"#).unwrap();
    fs::write(&second, r#"{"b":"second"}"#).unwrap();
    let m = combine_metadata(&[("entry 0: x".into(), &path), ("entry 1: y".into(), &second)]);
    assert_eq!(go_json(&m), r#"{"a":"first","b":"second"}"#);
}

#[test]
fn json_files_are_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("finished.json");
    fs::write(&path, "old").unwrap();
    let finished = Finished::from_exit(3, 0, Map::new(), "");
    artifacts::write_json_atomic(&path, &finished).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        r#"{"timestamp":3,"passed":true,"result":"SUCCESS"}"#
    );
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    assert!(artifacts::write_json_atomic(&dir.path().join("no/such"), &finished).is_err());
}

#[test]
fn go_json_scalars() {
    // Go escapes \b and \f by name, other controls as \u00xx, and the
    // HTML-sensitive characters; DEL stays as it is.
    assert_eq!(
        go_json("\u{8}\u{c}\u{1}\u{7f}\u{2028}<"),
        "\"\\b\\f\\u0001\u{7f}\\u2028\\u003c\""
    );
    for (f, want) in [
        (0.0, "0"),
        (1.0, "1"),
        (-2.5, "-2.5"),
        (0.000001, "0.000001"),
        (0.0000001, "1e-7"),
        (1.5e-10, "1.5e-10"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (123456789.125, "123456789.125"),
    ] {
        assert_eq!(go_float(f), want, "{f}");
    }
}

#[test]
fn prowjob_json_is_tab_indented_in_prows_order() {
    let mut pj = ProwJob::default();
    pj.metadata.name = "6c1e-run".into();
    pj.metadata.namespace = "default".into();
    pj.metadata.creation_timestamp = Some(artifacts::go_time(
        "2024-05-06T07:08:09.5Z".parse().unwrap(),
    ));
    pj.metadata.labels = BTreeMap::from([
        ("prow.k8s.io/type".to_string(), "periodic".to_string()),
        ("created-by-prow".to_string(), "true".to_string()),
    ]);
    pj.spec.job_type = "periodic".into();
    pj.spec.agent = "kubernetes".into();
    pj.spec.cluster = "default".into();
    pj.spec.namespace = "test-pods".into();
    pj.spec.job = "ci-unit".into();
    pj.spec.extra_refs = vec![json!({"org": "o", "repo": "r", "base_ref": "main"})];
    pj.spec.report = true;
    pj.spec.pod_spec = Some(json!({"containers": [{"command": ["make"], "args": []}]}));
    pj.spec.decoration_config = Some(json!({"timeout": "2h0m0s"}));
    pj.status.start_time = Some("2024-05-06T07:08:09Z".into());
    pj.status.state = "pending".into();
    pj.status.build_id = "1790".into();
    let want = "{\n\t\"kind\": \"ProwJob\",\n\t\"apiVersion\": \"prow.k8s.io/v1\",\n\t\"metadata\": {\n\t\t\"name\": \"6c1e-run\",\n\t\t\"namespace\": \"default\",\n\t\t\"creationTimestamp\": \"2024-05-06T07:08:09Z\",\n\t\t\"labels\": {\n\t\t\t\"created-by-prow\": \"true\",\n\t\t\t\"prow.k8s.io/type\": \"periodic\"\n\t\t}\n\t},\n\t\"spec\": {\n\t\t\"type\": \"periodic\",\n\t\t\"agent\": \"kubernetes\",\n\t\t\"cluster\": \"default\",\n\t\t\"namespace\": \"test-pods\",\n\t\t\"job\": \"ci-unit\",\n\t\t\"extra_refs\": [\n\t\t\t{\n\t\t\t\t\"base_ref\": \"main\",\n\t\t\t\t\"org\": \"o\",\n\t\t\t\t\"repo\": \"r\"\n\t\t\t}\n\t\t],\n\t\t\"report\": true,\n\t\t\"pod_spec\": {\n\t\t\t\"containers\": [\n\t\t\t\t{\n\t\t\t\t\t\"args\": [],\n\t\t\t\t\t\"command\": [\n\t\t\t\t\t\t\"make\"\n\t\t\t\t\t]\n\t\t\t\t}\n\t\t\t]\n\t\t},\n\t\t\"decoration_config\": {\n\t\t\t\"timeout\": \"2h0m0s\"\n\t\t}\n\t},\n\t\"status\": {\n\t\t\"startTime\": \"2024-05-06T07:08:09Z\",\n\t\t\"state\": \"pending\",\n\t\t\"build_id\": \"1790\"\n\t}\n}";
    assert_eq!(prowjob_json(&pj), want);

    // Ended: completion time and description; it reads back the same.
    pj.status.state = "success".into();
    pj.status.description = "Job succeeded.".into();
    pj.status.completion_time = Some("2024-05-06T08:00:00Z".into());
    let text = prowjob_json(&pj);
    assert!(text.contains("\t\t\"completionTime\": \"2024-05-06T08:00:00Z\",\n\t\t\"state\": \"success\",\n\t\t\"description\": \"Job succeeded.\",\n"), "{text}");
    let back: ProwJob = serde_json::from_str(&text).unwrap();
    assert_eq!(back, pj);

    // A bare one: Kubernetes' zero times are null.
    assert_eq!(
        prowjob_json(&ProwJob::default()),
        "{\n\t\"kind\": \"ProwJob\",\n\t\"apiVersion\": \"prow.k8s.io/v1\",\n\t\"metadata\": {\n\t\t\"creationTimestamp\": null\n\t},\n\t\"spec\": {},\n\t\"status\": {\n\t\t\"startTime\": null\n\t}\n}"
    );
}
