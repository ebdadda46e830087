//! Lighthouse pipeline jobs on a local cluster, end to end through `bosun
//! serve`: an in-repo `.lighthouse/*/triggers.yaml` whose jobs name
//! `source:` PipelineRun files; the pipeline runs step by step as processes
//! (tasks in order, a workspace, params, results, `finally`), fails, is
//! aborted, and what a local cluster cannot resolve ends the run `error`
//! naming the reference.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{self, json, request, tmp};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const TRIGGERS: &str = r#"
apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  periodics:
  - name: nightly
    cron: "0 0 31 2 *"  # never fires: runs only when triggered
    source: nightly.yaml
  - name: broken
    cron: "0 0 31 2 *"
    source: broken.yaml
  - name: slow
    cron: "0 0 31 2 *"
    source: slow.yaml
  - name: catalog
    cron: "0 0 31 2 *"
    source: catalog.yaml
  - name: by-reference
    cron: "0 0 31 2 *"
    source: by-reference.yaml
  - name: a-task
    cron: "0 0 31 2 *"
    source: task.yaml
  - name: a-taskrun
    cron: "0 0 31 2 *"
    source: taskrun.yaml
  - name: timed
    cron: "0 0 31 2 *"
    source: timed.yaml
"#;

/// A pipeline whose step outlives its `timeouts.pipeline`.
const TIMED: &str = r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
spec:
  timeouts:
    pipeline: 3s
  pipelineSpec:
    tasks:
    - name: wait
      taskSpec:
        steps:
        - name: sleep
          image: alpine
          script: |
            echo "sleeping past the timeout"
            sleep 120
"#;

/// A Task as the source: wrapped in a PipelineRun of one task, its params
/// declared with their defaults and passed on, its workspace bound.
const TASK: &str = r#"
apiVersion: tekton.dev/v1beta1
kind: Task
metadata:
  name: greet
spec:
  params:
  - name: greeting
    default: hi
  - name: names
    type: array
    default: [ann, bob]
  workspaces:
  - name: scratch
  steps:
  - name: write
    image: alpine
    script: |
      #!/bin/sh
      echo "$(params.greeting) from $REPO_OWNER/$REPO_NAME" > $(workspaces.scratch.path)/note
  - name: read
    image: alpine
    command: [sh, -c, 'echo "read: $(cat $(workspaces.scratch.path)/note) to $0 $1"']
    args: ["$(params.names[*])"]
"#;

/// A TaskRun as the source: its given params are the task's values, its
/// workspace binding is the run's.
const TASKRUN: &str = r#"
apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  generateName: tr-
spec:
  params:
  - name: word
    value: given
  workspaces:
  - name: out
    emptyDir: {}
  taskSpec:
    params:
    - name: word
      default: unused
    workspaces:
    - name: out
    steps:
    - name: say
      image: alpine
      script: |
        #!/bin/sh
        echo "taskrun says $(params.word)" | tee $(workspaces.out.path)/said
"#;

const NIGHTLY: &str = r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata:
  name: nightly
spec:
  params:
  - name: greeting
    value: hello
  workspaces:
  - name: shared
    emptyDir: {}
  pipelineSpec:
    params:
    - name: greeting
    - name: who
      default: world
    workspaces:
    - name: shared
    tasks:
    - name: write
      workspaces:
      - name: out
        workspace: shared
      params:
      - name: text
        value: $(params.greeting) $(params.who)
      taskSpec:
        params:
        - name: text
        workspaces:
        - name: out
        results:
        - name: size
        steps:
        - name: save
          image: alpine
          script: |
            #!/bin/sh
            echo "$(params.text) from $REPO_OWNER/$REPO_NAME" > $(workspaces.out.path)/message
            printf '%s' "$(wc -c < $(workspaces.out.path)/message | tr -d ' ')" > $(results.size.path)
    - name: read
      runAfter: [write]
      workspaces:
      - name: in
        workspace: shared
      params:
      - name: size
        value: $(tasks.write.results.size)
      taskSpec:
        params:
        - name: size
        workspaces:
        - name: in
        steps:
        - name: show
          image: alpine
          script: |
            #!/bin/sh
            echo "read $(params.size) bytes: $(cat $(workspaces.in.path)/message)"
    finally:
    - name: report
      taskSpec:
        steps:
        - name: done
          image: alpine
          script: echo "finally ran"
"#;

const BROKEN: &str = r#"
apiVersion: tekton.dev/v1beta1
kind: PipelineRun
spec:
  pipelineSpec:
    tasks:
    - name: first
      taskSpec:
        steps:
        - name: fail
          image: alpine
          script: |
            echo "about to fail"
            exit 4
    - name: second
      runAfter: [first]
      taskSpec:
        steps:
        - name: never
          image: alpine
          script: echo "must not run"
    finally:
    - name: cleanup
      taskSpec:
        steps:
        - name: tidy
          image: alpine
          script: echo "cleaned up"
"#;

const SLOW: &str = r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
spec:
  pipelineSpec:
    tasks:
    - name: wait
      taskSpec:
        steps:
        - name: sleep
          image: alpine
          script: |
            echo "waiting as $$"
            exec sleep 600
"#;

const CATALOG: &str = r#"
apiVersion: tekton.dev/v1beta1
kind: PipelineRun
spec:
  pipelineSpec:
    tasks:
    - name: from-build-pack
      taskSpec:
        stepTemplate:
          image: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream
        steps:
        - name: build
"#;

const BY_REFERENCE: &str = r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
spec:
  pipelineSpec:
    tasks:
    - name: clone
      taskRef:
        name: git-clone
"#;

fn setup(dir: &Path) -> common::Serve {
    setup_with(dir, 4)
}

/// As [`setup`], the local cluster running at most `slots` runs at once.
fn setup_with(dir: &Path, slots: u32) -> common::Serve {
    let app = dir.join("app");
    let at = |f: &str| app.join(".lighthouse/jobs").join(f);
    write(&at("triggers.yaml"), TRIGGERS);
    write(&at("nightly.yaml"), NIGHTLY);
    write(&at("broken.yaml"), BROKEN);
    write(&at("slow.yaml"), SLOW);
    write(&at("catalog.yaml"), CATALOG);
    write(&at("by-reference.yaml"), BY_REFERENCE);
    write(&at("task.yaml"), TASK);
    write(&at("taskrun.yaml"), TASKRUN);
    write(&at("timed.yaml"), TIMED);
    let config = format!(
        "plank:\n  max_concurrency: 4\nbuild_clusters:\n  default: {{kind: local, max_concurrency: {slots}}}\nin_repo:\n- {{repo: example/app, path: {}, branch: main}}\n",
        app.display()
    );
    write(&dir.join("config.yaml"), &config);
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    common::serve(dir, &[], &[])
}

fn trigger(port: u16, job: &str) -> String {
    let body = format!(r#"{{"job": "{job}"}}"#);
    let (status, body) = request(port, "POST", "/api/v1/runs", Some(&body), None);
    assert_eq!(status, 201, "{body}");
    json(&body)["id"].as_str().unwrap().to_string()
}

fn wait_end(port: u16, id: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
        let run = json(&body);
        if !matches!(
            run["state"].as_str().unwrap_or(""),
            "triggered" | "pending" | "scheduling"
        ) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} stuck: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The run's log file as written so far (the log endpoint follows an
/// active run).
fn log_file(dir: &Path, id: &str) -> String {
    std::fs::read_to_string(dir.join(format!("data/runs/default/{id}.log"))).unwrap_or_default()
}

#[test]
fn a_pipeline_runs_its_tasks_in_order_with_a_workspace_params_and_results() {
    let (_d, dir) = tmp();
    let daemon = setup(&dir);
    let id = trigger(daemon.port, "nightly");
    let run = wait_end(daemon.port, &id);
    let log = log_file(&dir, &id);
    assert_eq!(run["state"], "success", "{run}\n{log}");
    let message = "hello world from example/app";
    assert!(
        log.contains(&format!(
            "[read/show] read {} bytes: {message}",
            message.len() + 1
        )),
        "{log}"
    );
    assert!(log.contains("[report/done] finally ran"), "{log}");
    // `write` ran before `read`, `finally` last.
    let pos = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {log}"))
    };
    assert!(pos("[read/show]") < pos("[report/done]"), "{log}");
    // The shared workspace is a directory of the run.
    let saved = std::fs::read_to_string(
        dir.join(format!("data/runs/default/{id}/workspaces/shared/message")),
    )
    .unwrap();
    assert_eq!(saved.trim(), message);
}

/// A Task and a TaskRun checked in as the `source:` run as Lighthouse wraps
/// them: one task, params, workspaces.
#[test]
fn a_task_and_a_taskrun_source_run_as_one_task_pipelines() {
    let (_d, dir) = tmp();
    let daemon = setup(&dir);
    let task = trigger(daemon.port, "a-task");
    let taskrun = trigger(daemon.port, "a-taskrun");
    let run = wait_end(daemon.port, &task);
    let log = log_file(&dir, &task);
    assert_eq!(run["state"], "success", "{run}\n{log}");
    assert!(
        log.contains("[greet/read] read: hi from example/app to ann bob"),
        "{log}"
    );
    let run = wait_end(daemon.port, &taskrun);
    let log = log_file(&dir, &taskrun);
    assert_eq!(run["state"], "success", "{run}\n{log}");
    // No name: the task is `default`, as Lighthouse names it.
    assert!(log.contains("[default/say] taskrun says given"), "{log}");
    let said = std::fs::read_to_string(
        dir.join(format!("data/runs/default/{taskrun}/workspaces/out/said")),
    )
    .unwrap();
    assert_eq!(said.trim(), "taskrun says given");
}

/// Pipeline runs take the cluster's slots as pod runs do (a second waits
/// while the only slot is taken), and a run past its `timeouts.pipeline`
/// ends `failure` and frees its slot.
#[test]
fn pipeline_runs_keep_the_clusters_concurrency_and_their_timeouts() {
    let (_d, dir) = tmp();
    let daemon = setup_with(&dir, 1);
    let port = daemon.port;
    let timed = trigger(port, "timed");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log_file(&dir, &timed).contains("sleeping past the timeout") {
        assert!(Instant::now() < deadline, "the timed run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let waiting = trigger(port, "a-task");
    // While the timed run holds the only slot, the other waits.
    std::thread::sleep(Duration::from_secs(1));
    let (_, body) = request(port, "GET", &format!("/api/v1/runs/{waiting}"), None, None);
    let run = json(&body);
    assert_eq!(run["state"], "triggered", "{run}");
    assert!(run["pending_at"].is_null(), "{run}");
    let started = Instant::now();
    let run = wait_end(port, &timed);
    let log = log_file(&dir, &timed);
    assert_eq!(run["state"], "failure", "{run}\n{log}");
    assert!(log.contains("PipelineRunTimeout"), "{log}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // Its slot freed, the waiting run runs.
    let run = wait_end(port, &waiting);
    assert_eq!(
        run["state"],
        "success",
        "{run}\n{}",
        log_file(&dir, &waiting)
    );
}

#[test]
fn a_failing_step_fails_the_run_skips_the_rest_and_runs_finally() {
    let (_d, dir) = tmp();
    let daemon = setup(&dir);
    let id = trigger(daemon.port, "broken");
    let run = wait_end(daemon.port, &id);
    let log = log_file(&dir, &id);
    assert_eq!(run["state"], "failure", "{run}\n{log}");
    assert!(log.contains("[first/fail] about to fail"), "{log}");
    assert!(!log.contains("must not run"), "{log}");
    assert!(log.contains("[cleanup/tidy] cleaned up"), "{log}");
}

#[test]
fn an_aborted_pipeline_stops_its_steps() {
    let (_d, dir) = tmp();
    let daemon = setup(&dir);
    let port = daemon.port;
    let id = trigger(port, "slow");
    // The step prints its pid, then becomes `sleep 600` (by `exec`): only
    // this run's process is looked at, not another test's.
    let sleeping = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00600\x00")
    };
    let pid_in_log = || {
        log_file(&dir, &id)
            .lines()
            .find_map(|l| l.split("[wait/sleep] waiting as ").nth(1))
            .and_then(|p| p.trim().parse::<u32>().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        // Seen running first, so that its absence below means something.
        if let Some(pid) = pid_in_log().filter(|&p| sleeping(p)) {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "the step did not start:\n{}",
            log_file(&dir, &id)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (status, body) = request(
        port,
        "POST",
        &format!("/api/v1/runs/{id}/abort"),
        None,
        None,
    );
    assert_eq!(status, 202, "{body}");
    let run = wait_end(port, &id);
    assert_eq!(run["state"], "aborted", "{run}");
    // The step is gone with the runner (a zombie's command line reads
    // empty: it no longer runs).
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeping(pid) {
        assert!(Instant::now() < deadline, "the step still runs (pid {pid})");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn what_a_local_cluster_cannot_resolve_ends_the_run_in_error_naming_it() {
    let (_d, dir) = tmp();
    let daemon = setup(&dir);
    let catalog = trigger(daemon.port, "catalog");
    let run = wait_end(daemon.port, &catalog);
    assert_eq!(run["state"], "error", "{run}");
    let why = run["description"].as_str().unwrap();
    assert!(
        why.contains("uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream"),
        "{why}"
    );
    let by_ref = trigger(daemon.port, "by-reference");
    let run = wait_end(daemon.port, &by_ref);
    assert_eq!(run["state"], "error", "{run}");
    let why = run["description"].as_str().unwrap();
    assert!(why.contains("git-clone"), "{why}");
    assert!(why.contains("local cluster"), "{why}");
}
