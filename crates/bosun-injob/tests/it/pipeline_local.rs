//! The local runner of Tekton pipelines (`bosun_injob::pipeline::run_pipeline`) with
//! real processes: ordering, parallelism, workspaces, params, results,
//! `when`, `finally`, failures, timeouts, abort, and what it refuses.
//!
//! Signals and the runner's stdout are process-wide, so every run happens in
//! a process of its own: this test binary re-executed with [`HELPER_ENV`]
//! set, running only the ignored test [`runner_process`], which calls
//! `run_pipeline` and exits with its code, as `bosun run-pipeline` does.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bosun_injob::pipeline::run_pipeline;
use bosun_tekton::local::{
    check, PipelineOptions, ProblemKind, RunStatus, ABORTED, FAILED, INVALID, REFUSED, SUCCEEDED,
};
use bosun_tekton::model::{ParamValue, PipelineRunSpec};
use serde_json::{json, Value};

/// Set in the runner process: the options, as JSON.
const HELPER_ENV: &str = "BOSUN_PIPELINE_TEST_OPTIONS";

/// The runner process (see the module's doc); does nothing when not
/// re-executed by a test.
#[test]
#[ignore = "the runner process the other tests start"]
fn runner_process() {
    let Ok(json) = std::env::var(HELPER_ENV) else {
        return;
    };
    let opts: PipelineOptions = serde_json::from_str(&json).expect("options");
    std::process::exit(run_pipeline(&opts));
}

/// A run's directory and its options.
struct Run {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    opts: PipelineOptions,
}

/// How a run ended.
struct Ended {
    code: i32,
    log: String,
    status: RunStatus,
    took: Duration,
}

impl Ended {
    fn task(&self, name: &str) -> &bosun_tekton::local::TaskStatus {
        self.status
            .tasks
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no task {name} in {:?}", self.status))
    }

    /// The lines a step wrote, without their prefix.
    fn lines_of(&self, label: &str) -> Vec<&str> {
        let prefix = format!("[{label}] ");
        self.log
            .lines()
            .filter_map(|l| l.strip_prefix(prefix.as_str()))
            .collect()
    }
}

impl Run {
    fn new(spec: Value) -> Run {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        let spec: PipelineRunSpec = serde_json::from_value(spec).expect("a PipelineRun spec");
        let opts = PipelineOptions {
            spec,
            name: "pr-1".into(),
            namespace: "jx".into(),
            uid: "u-1".into(),
            dir: root.join("run"),
            env: vec![("FROM_OPTIONS".into(), "opt".into())],
            max_parallel: 4,
            grace_period: Some(Duration::from_secs(2)),
            status_file: Some(root.join("status.json")),
        };
        Run {
            _tmp: tmp,
            root,
            opts,
        }
    }

    /// A path under the test's directory, for steps to write marks to.
    fn mark(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn spawn(&self) -> Child {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "pipeline_local::runner_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env(HELPER_ENV, serde_json::to_string(&self.opts).unwrap())
            .env("MARKS", &self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runner process")
    }

    fn finish(&self, child: Child, start: Instant) -> Ended {
        let out = child.wait_with_output().expect("runner output");
        let took = start.elapsed();
        let log = String::from_utf8_lossy(&out.stdout).into_owned();
        let code = out.status.code().expect("the runner exits");
        let status = fs::read_to_string(self.root.join("status.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default();
        eprintln!(
            "--- runner exited {code} after {took:?}\n{log}--- stderr\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ended {
            code,
            log,
            status,
            took,
        }
    }

    fn run(&self) -> Ended {
        let start = Instant::now();
        let child = self.spawn();
        self.finish(child, start)
    }
}

/// A task of one script step.
fn script_task(name: &str, script: &str) -> Value {
    json!({"name": name, "taskSpec": {"steps": [{"name": "main", "image": "alpine", "script": script}]}})
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is gone (or a zombie no one has reaped yet).
fn gone(pid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z') =>
            {
                return true
            }
            Ok(_) if Instant::now() > deadline => return false,
            Ok(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn tasks_run_in_run_after_and_result_order() {
    // Declared in reverse: c after b, b uses a's result.
    let run = Run::new(json!({
        "workspaces": [{"name": "shared", "emptyDir": {}}],
        "pipelineSpec": {
            "workspaces": [{"name": "shared"}],
            "tasks": [
                {"name": "c", "runAfter": ["b"], "workspaces": [{"name": "shared"}],
                 "taskSpec": {"workspaces": [{"name": "shared"}], "steps": [{"name": "s", "script":
                    "echo c >> $(workspaces.shared.path)/order"}]}},
                {"name": "b", "workspaces": [{"name": "shared"}],
                 "params": [{"name": "v", "value": "$(tasks.a.results.version)"}],
                 "taskSpec": {"params": [{"name": "v"}], "workspaces": [{"name": "shared"}], "steps": [{"name": "s", "script":
                    "echo \"b saw $(params.v)\"\necho b >> $(workspaces.shared.path)/order"}]}},
                {"name": "a", "workspaces": [{"name": "shared"}],
                 "taskSpec": {"workspaces": [{"name": "shared"}], "results": [{"name": "version"}],
                  "steps": [{"name": "s", "script":
                    "sleep 0.3\nprintf 1.2.3 > $(results.version.path)\necho a >> $(workspaces.shared.path)/order"}]}}
            ]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    let order = fs::read_to_string(run.opts.dir.join("workspaces/shared/order")).unwrap();
    assert_eq!(order, "a\nb\nc\n");
    assert_eq!(ended.lines_of("b/s"), ["b saw 1.2.3"]);
    assert_eq!(ended.status.reason, "Succeeded");
    assert_eq!(
        ended.status.message,
        "Tasks Completed: 3 (Failed: 0, Cancelled 0), Skipped: 0"
    );
    assert_eq!(
        ended.task("a").results["version"],
        ParamValue::String("1.2.3".into())
    );
}

/// Two tasks, each waiting (up to `wait` seconds) for the other to have
/// started.
fn rendezvous(run_marks: &Path, wait: u32) -> Value {
    let task = |me: &str, other: &str| {
        script_task(
            me,
            &format!(
                "touch {dir}/{me}-started\n\
                 i=0\n\
                 while [ ! -e {dir}/{other}-started ]; do\n\
                   i=$((i+1)); [ $i -gt {n} ] && {{ echo never saw {other}; exit 1; }}\n\
                   sleep 0.1\n\
                 done\n\
                 echo saw {other}",
                dir = run_marks.display(),
                n = wait * 10
            ),
        )
    };
    json!({"pipelineSpec": {"tasks": [task("left", "right"), task("right", "left")]}})
}

#[test]
fn independent_tasks_run_at_once_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let run = Run::new(rendezvous(tmp.path(), 60));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED, "each task saw the other start");
    assert_eq!(ended.lines_of("left/main"), ["saw right"]);
    assert_eq!(ended.lines_of("right/main"), ["saw left"]);

    // One at a time: the first waits for the second in vain.
    let tmp = tempfile::tempdir().unwrap();
    let mut run = Run::new(rendezvous(tmp.path(), 2));
    run.opts.max_parallel = 1;
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert_eq!(ended.lines_of("left/main"), ["never saw right"]);
    assert_eq!(ended.task("right").status, "Skipped");
    assert!(!tmp.path().join("right-started").exists());
}

#[test]
fn workspaces_are_shared_directories_with_sub_paths_and_mount_paths() {
    let run = Run::new(json!({
        "workspaces": [{"name": "source", "emptyDir": {}, "subPath": "run"}],
        "pipelineSpec": {
            "workspaces": [{"name": "source"}],
            "tasks": [
                {"name": "write", "workspaces": [{"name": "out", "workspace": "source", "subPath": "sub"}],
                 "taskSpec": {"workspaces": [{"name": "out", "mountPath": "/src"}],
                  "steps": [{"name": "s", "workingDir": "/src/deeper", "script":
                    "pwd\necho hello > made-here\necho path=$(workspaces.out.path) bound=$(workspaces.out.bound)"}]}},
                {"name": "read", "runAfter": ["write"], "workspaces": [{"name": "in", "workspace": "source"}],
                 "taskSpec": {"workspaces": [{"name": "in"}],
                  "steps": [{"name": "s", "workingDir": "/workspace/in", "script": "cat sub/deeper/made-here"},
                            {"name": "home", "script": "pwd"}]}}
            ]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    let ws = run.opts.dir.join("workspaces/source/run");
    let out = ws.join("sub");
    assert_eq!(
        ended.lines_of("write/s"),
        [
            out.join("deeper").display().to_string(),
            format!("path={} bound=true", out.display())
        ]
    );
    assert_eq!(ended.lines_of("read/s"), ["hello"]);
    // A step without workingDir runs in the task's `/workspace`.
    assert_eq!(
        ended.lines_of("read/home"),
        [run.opts
            .dir
            .join("tasks/read/workspace")
            .display()
            .to_string()]
    );
}

#[test]
fn params_take_defaults_values_arrays_objects_and_propagate() {
    let run = Run::new(json!({
        "params": [
            {"name": "given", "value": "from-run"},
            {"name": "list", "value": ["x", "y z"]},
            {"name": "undeclared", "value": "propagated"}
        ],
        "pipelineSpec": {
            "params": [
                {"name": "given", "default": "unused"},
                {"name": "defaulted", "default": "the-default"},
                {"name": "list", "type": "array"},
                {"name": "obj", "type": "object", "default": {"url": "https://x", "rev": "main"}}
            ],
            "tasks": [{
                "name": "t",
                "params": [
                    {"name": "items", "value": ["first", "$(params.list[*])"]},
                    {"name": "msg", "value": "$(params.given)/$(params.defaulted)"}
                ],
                "taskSpec": {
                    "params": [
                        {"name": "items", "type": "array"},
                        {"name": "msg"},
                        {"name": "own", "default": "task-default"}
                    ],
                    "steps": [
                        {"name": "args", "command": ["printf", "[%s]\\n"], "args": ["$(params.items[*])"]},
                        {"name": "text", "script":
                          "echo '$(params.msg) $(params.own) $(params.undeclared) $(params.list[1]) $(params.obj.rev) $(params[\"given\"])'"}
                    ]
                }
            }]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    assert_eq!(ended.lines_of("t/args"), ["[first]", "[x]", "[y z]"]);
    assert_eq!(
        ended.lines_of("t/text"),
        ["from-run/the-default task-default propagated y z main from-run"]
    );
}

#[test]
fn results_pass_strings_and_arrays_and_make_pipeline_results() {
    let run = Run::new(json!({
        "pipelineSpec": {
            "results": [
                {"name": "sha", "value": "$(tasks.produce.results.sha)"},
                {"name": "missing", "value": "$(tasks.produce.results.never)"}
            ],
            "tasks": [
                {"name": "produce", "taskSpec": {
                    "results": [{"name": "sha"}, {"name": "files", "type": "array"}, {"name": "never"}],
                    "steps": [{"name": "s", "script":
                        "printf 'abc\\n' > $(results.sha.path)\necho '[\"a.go\", \"b.go\"]' > $(results.files.path)"}]}},
                {"name": "consume", "taskSpec": {"steps": [
                    {"name": "s", "command": ["printf", "<%s>\\n"],
                     "args": ["$(tasks.produce.results.sha)", "$(tasks.produce.results.files[*])", "$(tasks.produce.results.files[1])"]}
                ]}}
            ]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    // The trailing newline is kept, as Tekton keeps it.
    assert_eq!(
        ended.lines_of("consume/s"),
        ["<abc", ">", "<a.go>", "<b.go>", "<b.go>"]
    );
    assert_eq!(
        ended.status.results["sha"],
        ParamValue::String("abc\n".into())
    );
    assert!(!ended.status.results.contains_key("missing"));
    assert!(ended
        .log
        .contains("bosun: pipeline result missing is not available"));
}

#[test]
fn a_failure_skips_later_steps_and_dependents_and_finally_still_runs() {
    let run = Run::new(json!({
        "pipelineSpec": {
            "tasks": [
                {"name": "bad", "taskSpec": {"steps": [
                    {"name": "one", "script": "echo failing; echo to stderr >&2; exit 3"},
                    {"name": "two", "script": "touch $MARKS/two-ran"}]}},
                {"name": "after", "runAfter": ["bad"], "taskSpec": {"steps": [
                    {"name": "s", "script": "touch $MARKS/after-ran"}]}}
            ],
            "finally": [
                {"name": "report", "params": [{"name": "st", "value": "$(tasks.bad.status)"}],
                 "taskSpec": {"params": [{"name": "st"}], "steps": [
                    {"name": "s", "script": "echo bad=$(params.st) all=$(tasks.status) reason=$(tasks.bad.reason)"}]}}
            ]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert_eq!(ended.lines_of("bad/one"), ["failing", "to stderr"]);
    assert!(!run.mark("two-ran").exists());
    assert!(!run.mark("after-ran").exists());
    assert_eq!(
        ended.lines_of("report/s"),
        ["bad=Failed all=Failed reason=Failed"]
    );
    assert_eq!(ended.status.reason, "Failed");
    assert_eq!(ended.task("bad").status, "Failed");
    assert_eq!(ended.task("bad").message, "step one exited with code 3");
    assert_eq!(ended.task("after").status, "Skipped");
    assert_eq!(ended.task("report").status, "Succeeded");
    assert!(ended
        .log
        .contains("bosun: step bad/one: step one exited with code 3"));
    assert_eq!(
        ended.status.message,
        "Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 1"
    );
}

#[test]
fn when_expressions_skip_tasks_and_their_result_dependents_as_tekton() {
    let run = Run::new(json!({
        "params": [{"name": "env", "value": "prod"}],
        "pipelineSpec": {
            "params": [{"name": "env"}],
            "tasks": [
                {"name": "runs", "when": [{"input": "$(params.env)", "operator": "in", "values": ["staging", "prod"]}],
                 "taskSpec": {"steps": [{"name": "s", "script": "echo ran"}]}},
                {"name": "guarded", "when": [{"input": "$(params.env)", "operator": "notin", "values": ["prod"]}],
                 "taskSpec": {"results": [{"name": "r"}], "steps": [{"name": "s", "script": "touch $MARKS/guarded-ran"}]}},
                {"name": "ordered-after", "runAfter": ["guarded"],
                 "taskSpec": {"steps": [{"name": "s", "script": "echo still runs"}]}},
                {"name": "needs-result", "params": [{"name": "p", "value": "$(tasks.guarded.results.r)"}],
                 "taskSpec": {"params": [{"name": "p"}], "results": [{"name": "r"}],
                   "steps": [{"name": "s", "script": "touch $MARKS/needs-result-ran"}]}},
                {"name": "after-skipped", "runAfter": ["needs-result"],
                 "taskSpec": {"steps": [{"name": "s", "script": "touch $MARKS/after-skipped-ran"}]}}
            ]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    assert_eq!(ended.status.reason, "Completed");
    assert_eq!(ended.lines_of("runs/s"), ["ran"]);
    assert_eq!(ended.lines_of("ordered-after/s"), ["still runs"]);
    assert_eq!(
        ended.task("guarded").reason,
        "When Expressions evaluated to false"
    );
    assert_eq!(ended.task("needs-result").reason, "Results were missing");
    assert_eq!(
        ended.task("after-skipped").reason,
        "Parent Tasks were skipped"
    );
    for t in ["guarded", "needs-result", "after-skipped"] {
        assert!(!run.mark(&format!("{t}-ran")).exists(), "{t} ran");
    }
}

#[test]
fn step_templates_merge_into_steps() {
    let run = Run::new(json!({
        "pipelineSpec": {"tasks": [{"name": "t", "taskSpec": {
            "stepTemplate": {
                "env": [{"name": "A", "value": "tpl-a"}, {"name": "B", "value": "tpl-b"}],
                "workingDir": "/workspace/tpl",
                "command": ["sh", "-c"],
                "args": ["echo from template A=$A"]
            },
            "steps": [
                {"name": "inherits"},
                {"name": "overrides", "env": [{"name": "B", "value": "step-b"}, {"name": "C", "value": "c $(B)"}],
                 "script": "echo A=$A B=$B C=$C FROM_OPTIONS=$FROM_OPTIONS; pwd"},
                {"name": "own-command", "command": ["echo", "no template args"]}
            ]
        }}]}
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    assert_eq!(ended.lines_of("t/inherits"), ["from template A=tpl-a"]);
    let tpl_dir = run.opts.dir.join("tasks/t/workspace/tpl");
    assert_eq!(
        ended.lines_of("t/overrides"),
        [
            "A=tpl-a B=step-b C=c step-b FROM_OPTIONS=opt".to_string(),
            tpl_dir.display().to_string()
        ]
    );
    assert_eq!(ended.lines_of("t/own-command"), ["no template args"]);
}

#[test]
fn on_error_continue_goes_on_and_records_the_exit_code() {
    let run = Run::new(json!({
        "pipelineSpec": {"tasks": [{"name": "t", "taskSpec": {"steps": [
            {"name": "lint", "onError": "continue", "script": "exit 5"},
            {"name": "after", "script": "echo lint exited $(cat $(steps.step-lint.exitCode.path))"}
        ]}}]}
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    assert_eq!(ended.lines_of("t/after"), ["lint exited 5"]);
    assert!(ended
        .log
        .contains("bosun: step t/lint: step lint exited with code 5 (onError: continue)"));
}

#[test]
fn a_step_timeout_kills_its_process_group() {
    let run = Run::new(json!({
        "pipelineSpec": {"tasks": [
            {"name": "slow", "taskSpec": {"steps": [
                {"name": "s", "timeout": "1s", "script":
                    "trap '' TERM\nsleep 120 &\necho $! > $MARKS/child.pid\nwait\nwait"},
                {"name": "never", "script": "touch $MARKS/never"}]}}
        ]}
    }));
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert!(
        ended.took < Duration::from_secs(60),
        "took {:?}",
        ended.took
    );
    assert_eq!(ended.task("slow").message, "step s timed out after 1s");
    assert!(!run.mark("never").exists());
    let pid = fs::read_to_string(run.mark("child.pid")).unwrap();
    assert!(gone(pid.trim()), "the step's child {pid} outlived it");
}

#[test]
fn the_pipeline_timeout_stops_everything_and_finally_does_not_run() {
    let run = Run::new(json!({
        "timeouts": {"pipeline": "2s"},
        "pipelineSpec": {
            "tasks": [script_task("slow", "sleep 120")],
            "finally": [script_task("cleanup", "touch $MARKS/cleanup-ran")]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert!(
        ended.took < Duration::from_secs(60),
        "took {:?}",
        ended.took
    );
    assert_eq!(ended.status.reason, "PipelineRunTimeout");
    assert!(!run.mark("cleanup-ran").exists());
    assert_eq!(ended.task("cleanup").status, "Skipped");
}

#[test]
fn the_tasks_timeout_stops_the_tasks_and_finally_runs() {
    let run = Run::new(json!({
        "timeouts": {"pipeline": "5m", "tasks": "2s"},
        "pipelineSpec": {
            "tasks": [script_task("slow", "sleep 120")],
            "finally": [script_task("cleanup", "echo cleaning up")]
        }
    }));
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert!(
        ended.took < Duration::from_secs(60),
        "took {:?}",
        ended.took
    );
    assert_eq!(ended.task("slow").reason, "TaskRunTimeout");
    assert_eq!(ended.lines_of("cleanup/main"), ["cleaning up"]);
}

#[test]
fn a_task_timeout_fails_the_attempt_and_retries_run_again() {
    let run = Run::new(json!({
        "pipelineSpec": {"tasks": [
            {"name": "flaky", "retries": 2, "taskSpec": {"steps": [{"name": "s", "script":
                "echo attempt $(context.task.retry-count) of $(context.pipelineTask.retries)\n\
                 [ -e $MARKS/tried ] || { touch $MARKS/tried; exit 1; }"}]}},
            {"name": "hangs", "timeout": "1s", "retries": 1,
             "taskSpec": {"steps": [{"name": "s", "script": "echo try; sleep 120"}]}}
        ]}
    }));
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert_eq!(
        ended.lines_of("flaky/s"),
        ["attempt 0 of 2", "attempt 1 of 2"]
    );
    assert_eq!(ended.task("flaky").status, "Succeeded");
    assert_eq!(ended.task("flaky").attempts, 2);
    assert_eq!(ended.lines_of("hangs/s"), ["try", "try"]);
    assert_eq!(ended.task("hangs").reason, "TaskRunTimeout");
    assert_eq!(ended.task("hangs").attempts, 2);
}

#[test]
fn sigterm_aborts_the_run_and_starts_nothing_more() {
    let run = Run::new(json!({
        "pipelineSpec": {
            "tasks": [
                {"name": "long", "taskSpec": {"steps": [{"name": "s", "script":
                    "sleep 120 &\necho $! > $MARKS/child.pid\ntouch $MARKS/started\nwait"}]}},
                {"name": "next", "runAfter": ["long"], "taskSpec": {"steps": [{"name": "s", "script": "touch $MARKS/next-ran"}]}}
            ],
            "finally": [script_task("cleanup", "touch $MARKS/cleanup-ran")]
        }
    }));
    let start = Instant::now();
    let child = run.spawn();
    wait_for(&run.mark("started"));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let ended = run.finish(child, start);
    assert_eq!(ended.code, ABORTED);
    assert_eq!(ended.status.reason, "Cancelled");
    assert!(ended
        .log
        .contains("bosun: received SIGTERM: stopping the running steps"));
    assert_eq!(ended.task("long").status, "Cancelled");
    assert!(!run.mark("next-ran").exists());
    assert!(!run.mark("cleanup-ran").exists());
    let pid = fs::read_to_string(run.mark("child.pid")).unwrap();
    assert!(
        gone(pid.trim()),
        "the step's child {pid} outlived the abort"
    );
}

#[test]
fn references_are_refused_before_anything_runs() {
    let cases = [
        (
            json!({"name": "clone", "taskRef": {"name": "git-clone"}}),
            "task clone: taskRef git-clone cannot be resolved on a local cluster",
        ),
        (
            json!({"name": "build", "taskSpec": {"steps": [
                {"image": "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream", "name": ""}]}}),
            "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream (task build, a step)",
        ),
        (
            json!({"name": "clone", "taskRef": {"resolver": "git", "params": [{"name": "url", "value": "https://example.com/c.git"}]}}),
            "taskRef resolver git (url=https://example.com/c.git)",
        ),
        (
            json!({"name": "push", "taskSpec": {"steps": [{"name": "s", "script": "true",
                "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "bot", "key": "token"}}}]}]}}),
            "task push, step s: env TOKEN takes its value from secretKeyRef bot/token",
        ),
        (
            json!({"name": "img", "taskSpec": {"steps": [{"name": "s", "image": "golang"}]}}),
            "task img, step s has neither script nor command: a local cluster cannot run the entrypoint of its image golang",
        ),
    ];
    for (task, message) in cases {
        let run = Run::new(json!({"pipelineSpec": {"tasks": [
            script_task("first", "touch $MARKS/first-ran"),
            task
        ]}}));
        let ended = run.run();
        assert_eq!(ended.code, REFUSED, "{message}");
        assert!(ended.log.contains(message), "{message}");
        assert!(ended.status.message.contains(message));
        assert_eq!(ended.status.reason, "Refused");
        assert!(!run.mark("first-ran").exists());
    }

    let run = Run::new(json!({"pipelineRef": {"name": "shared-pipeline"}}));
    let ended = run.run();
    assert_eq!(ended.code, REFUSED);
    assert!(ended.log.contains("pipelineRef shared-pipeline"));
}

#[test]
fn invalid_pipelines_are_refused_with_tektons_reasons() {
    let cases = [
        (
            json!({"tasks": [{"name": "a", "runAfter": ["nope"], "taskSpec": {"steps": [{"name": "s", "script": "true"}]}}]}),
            "task a: runAfter names nope, which is not a task",
        ),
        (
            json!({"params": [{"name": "p"}], "tasks": [script_task("a", "true")]}),
            "parameter p has no value",
        ),
        (
            json!({"tasks": [script_task("a", "echo $(params.nope)")]}),
            "task a: step main: $(params.nope): there is no parameter nope",
        ),
        (
            json!({"tasks": [
                {"name": "a", "runAfter": ["b"], "taskSpec": {"steps": [{"name": "s", "script": "true"}]}},
                {"name": "b", "runAfter": ["a"], "taskSpec": {"steps": [{"name": "s", "script": "true"}]}}]}),
            "the tasks depend on each other in a cycle: a -> b -> a",
        ),
        (
            json!({"tasks": [script_task("a", "echo $(tasks.status)")]}),
            "only finally tasks can use the tasks' status",
        ),
        (
            json!({"tasks": [script_task("Build_It", "true")]}),
            "task name \"Build_It\" is not a DNS-1123 label",
        ),
        (
            json!({"workspaces": [{"name": "ws"}], "tasks": [
                {"name": "a", "workspaces": [{"name": "ws", "subPath": "../../escape"}],
                 "taskSpec": {"workspaces": [{"name": "ws"}], "steps": [{"name": "s", "script": "true"}]}}]}),
            "task a: workspace subPath ../../escape leaves the volume",
        ),
    ];
    for (pipeline, message) in cases {
        let spec =
            json!({"pipelineSpec": pipeline, "workspaces": [{"name": "ws", "emptyDir": {}}]});
        let problems = check(&serde_json::from_value(spec.clone()).unwrap());
        assert!(
            problems
                .iter()
                .any(|p| p.kind == ProblemKind::Invalid && p.message.contains(message)),
            "{message}: {problems:?}"
        );
        let ended = Run::new(spec).run();
        assert_eq!(ended.code, INVALID, "{message}");
        assert!(ended.log.contains(message), "{message}");
    }
}

#[test]
fn context_variables_and_kubernetes_expansion() {
    let run = Run::new(json!({
        "pipelineSpec": {"tasks": [{"name": "ctx", "taskSpec": {"steps": [
            {"name": "s", "env": [{"name": "WHO", "value": "$(context.taskRun.name)"}],
             "command": ["echo"],
             "args": ["$(context.pipelineRun.name)", "$(context.pipelineRun.namespace)", "$(WHO)", "$(context.task.name)", "$$(WHO)", "$(UNSET)"]},
            {"name": "bash", "script": "#!/usr/bin/env bash\nset -eu\narr=(one two)\necho \"${arr[1]} $(echo shell)\" \"$@\"", "args": ["an-arg"]}
        ]}}]}
    }));
    let ended = run.run();
    assert_eq!(ended.code, SUCCEEDED);
    assert_eq!(
        ended.lines_of("ctx/s"),
        ["pr-1 jx pr-1-ctx pr-1-ctx $(WHO) $(UNSET)"]
    );
    assert_eq!(ended.lines_of("ctx/bash"), ["two shell an-arg"]);
}

#[test]
fn a_missing_command_fails_the_step() {
    let run = Run::new(json!({
        "pipelineSpec": {"tasks": [{"name": "t", "taskSpec": {"steps": [
            {"name": "s", "command": ["bosun-no-such-command-here"]}]}}]}
    }));
    let ended = run.run();
    assert_eq!(ended.code, FAILED);
    assert_eq!(
        ended.task("t").message,
        "step s could not start: bosun-no-such-command-here: command not found"
    );
}
