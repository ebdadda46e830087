//! Decorated jobs on a local cluster, end to end through `bosun serve`:
//! refs cloned with real `git` from `file://` repositories (a pull request
//! merged on its base, the working directory, a clone failure), the test
//! wrapped with entrypoint's timeout and grace period, an abort, Prow's files
//! served by the artifacts endpoint, and a real corpus periodic pointed at a
//! local mirror through `clone_uri`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::wait_state;
use crate::common::{self, json, request, request_full, tmp};

type Daemon = common::Serve;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        // A clone a run made as another user (a cluster's `run_as`).
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .unwrap_or_else(|e| {
            panic!("git could not run ({e}): install it with `apt-get install -y git`, or run the tests with tools/test")
        });
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository at `dir` whose branch `branch` holds `files`; returns the
/// branch's commit.
fn repo(dir: &Path, branch: &str, files: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", branch]);
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "base"]);
    git(dir, &["rev-parse", "HEAD"])
}

/// Adds a pull request to `origin`: a commit on top of `base` with
/// `files`, published as `refs/pull/N/head`; returns its commit.
fn pull(origin: &Path, number: u32, files: &[(&str, &str)]) -> String {
    let branch = format!("pr-{number}");
    git(origin, &["checkout", "-q", "-b", &branch]);
    for (name, text) in files {
        std::fs::write(origin.join(name), text).unwrap();
    }
    git(origin, &["add", "."]);
    git(origin, &["commit", "-q", "-m", &format!("pull {number}")]);
    let sha = git(origin, &["rev-parse", "HEAD"]);
    git(
        origin,
        &["update-ref", &format!("refs/pull/{number}/head"), &sha],
    );
    git(origin, &["checkout", "-q", "-"]);
    git(origin, &["branch", "-q", "-D", &branch]);
    sha
}

fn start(dir: &Path, config: &str, jobs: &str, envs: &[(&str, &str)]) -> Daemon {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), jobs).unwrap();
    common::serve(dir, &[], envs)
}

const CONFIG: &str =
    "plank:\n  max_concurrency: 4\nbuild_clusters:\n  default: {kind: local, max_concurrency: 4}\n";

fn trigger(port: u16, body: &str) -> String {
    let (status, body) = request(port, "POST", "/api/v1/runs", Some(body), None);
    assert_eq!(status, 201, "{body}");
    json(&body)["id"].as_str().unwrap().to_string()
}

/// A file of the run's artifacts, through the API.
fn artifact(port: u16, id: &str, path: &str) -> (u16, String) {
    request(
        port,
        "GET",
        &format!("/api/v1/runs/{id}/artifacts/{path}"),
        None,
        None,
    )
}

fn artifact_json(port: u16, id: &str, path: &str) -> serde_json::Value {
    let (status, body) = artifact(port, id, path);
    assert_eq!(status, 200, "{path}: {body}");
    json(&body)
}

/// `finished.json` once written (the wrapper writes it after the test
/// ends, which may be after the run's end is recorded for an abort).
fn finished(port: u16, id: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = artifact(port, id, "finished.json");
        if status == 200 {
            return json(&body);
        }
        assert!(Instant::now() < deadline, "no finished.json for {id}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log(port: u16, id: &str) -> String {
    request(port, "GET", &format!("/api/v1/runs/{id}/log"), None, None).1
}

#[test]
fn a_presubmit_clones_merges_its_pull_and_lays_out_prows_files() {
    let (_d, dir) = tmp();
    let origin = dir.join("origin");
    let base = repo(
        &origin,
        "main",
        &[("README", "base\n"), ("shared.txt", "one\n")],
    );
    let pull_sha = pull(&origin, 7, &[("pull.txt", "from the pull\n")]);
    let helper = dir.join("helper");
    repo(&helper, "main", &[("tool.sh", "echo helper tool\n")]);
    let jobs = format!(
        r#"
presubmits:
  example/app:
  - name: unit
    decorate: true
    decoration_config: {{timeout: 5m, grace_period: 2s}}
    path_alias: example.com/app
    clone_uri: file://{origin}
    extra_refs:
    - {{org: example, repo: helper, base_ref: main, clone_uri: "file://{helper}"}}
    spec:
      containers:
      - image: x
        command: [sh, -c]
        args:
        - |
          set -e
          echo "in $(pwd)"
          cat pull.txt
          git log --format=%s -n 3
          sh "$GOPATH/src/github.com/example/helper/tool.sh"
          echo "$JOB_SPEC" > "$ARTIFACTS/job-spec.json"
          echo result > "$ARTIFACTS/result.txt"
          mkdir -p "$ARTIFACTS/sub"
          echo '<script>alert(1)</script>' > "$ARTIFACTS/sub/page.html"
          echo '{{"component": "app", "ok": true}}' > "$ARTIFACTS/metadata.json"
"#,
        origin = origin.display(),
        helper = helper.display(),
    );
    let daemon = start(&dir, CONFIG, &jobs, &[]);
    let port = daemon.port;
    let refs = serde_json::json!({
        "org": "example", "repo": "app", "base_ref": "main", "base_sha": base,
        "pulls": [{"number": 7, "author": "a", "sha": pull_sha}],
    });
    let id = trigger(
        port,
        &serde_json::json!({"job": "unit", "refs": refs}).to_string(),
    );
    let run = wait_state(port, &id, |s| {
        !matches!(s, "triggered" | "pending" | "scheduling")
    });
    let out = log(port, &id);
    assert_eq!(run["state"], "success", "{run}\n{out}");

    // The test ran in the pull's clone, merged on its base, under GOPATH.
    let workdir = dir.join(format!("data/runs/default/{id}/go/src/example.com/app"));
    assert!(out.contains(&format!("in {}", workdir.display())), "{out}");
    assert!(out.contains("from the pull"), "{out}");
    assert!(out.contains("Merge"), "a merge commit on top: {out}");
    assert!(out.contains("helper tool"), "{out}");
    assert_eq!(git(&workdir, &["rev-parse", "HEAD^1"]), base);
    assert_eq!(git(&workdir, &["rev-parse", "HEAD^2"]), pull_sha);
    assert_eq!(
        git(&workdir, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "main"
    );

    // Prow's files, through the API.
    let (status, listing) = artifact(port, &id, "");
    assert_eq!(status, 200, "{listing}");
    let names: Vec<String> = json(&listing)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    for want in [
        "artifacts",
        "build-log.txt",
        "clone-log.txt",
        "clone-records.json",
        "finished.json",
        "prowjob.json",
        "started.json",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    let records = artifact_json(port, &id, "clone-records.json");
    let records = records.as_array().unwrap();
    // The environment's setup record first, as clonerefs writes it, then
    // one per ref.
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(
        records[0]["refs"],
        serde_json::json!({"org": "", "repo": ""})
    );
    let app = records
        .iter()
        .find(|r| r["refs"]["repo"] == "app")
        .expect("the app's record");
    assert_eq!(app["final_sha"], git(&workdir, &["rev-parse", "HEAD"]));
    assert!(app.get("failed").is_none(), "{app}");
    let started = artifact_json(port, &id, "started.json");
    assert_eq!(started["pull"], "7", "{started}");
    assert_eq!(started["repo-commit"], app["final_sha"], "{started}");
    assert_eq!(
        started["repos"]["example/app"],
        format!("main:{base},7:{pull_sha}"),
        "{started}"
    );
    let finished = artifact_json(port, &id, "finished.json");
    assert_eq!(finished["passed"], true, "{finished}");
    assert_eq!(finished["result"], "SUCCESS", "{finished}");
    assert_eq!(finished["metadata"]["component"], "app", "{finished}");
    let (_, build_log) = artifact(port, &id, "build-log.txt");
    assert!(build_log.contains("from the pull"), "{build_log}");
    assert_eq!(
        artifact(port, &id, "artifacts/result.txt"),
        (200, "result\n".to_string())
    );
    let job_spec = artifact_json(port, &id, "artifacts/job-spec.json");
    assert_eq!(
        job_spec["decoration_config"]["grace_period"], "2s",
        "{job_spec}"
    );
    assert_eq!(job_spec["refs"]["pulls"][0]["number"], 7, "{job_spec}");
    let prowjob = artifact_json(port, &id, "prowjob.json");
    assert_eq!(prowjob["spec"]["job"], "unit");
    assert_eq!(prowjob["spec"]["refs"]["path_alias"], "example.com/app");
    assert_eq!(prowjob["spec"]["decoration_config"]["timeout"], "5m0s");
    assert_eq!(prowjob["status"]["state"], "success");
    // Job-written HTML cannot act on bosun's origin.
    let (status, head, _) = request_full(
        port,
        "GET",
        &format!("/api/v1/runs/{id}/artifacts/artifacts/sub/page.html"),
        None,
        None,
    );
    assert_eq!(status, 200);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-disposition: attachment"), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    assert!(!head.contains("content-type: text/html"), "{head}");
}

#[test]
fn a_timeout_interrupts_the_test_then_kills_it() {
    let (_d, dir) = tmp();
    let jobs = r#"
periodics:
- name: stubborn
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  decoration_config: {timeout: 1s, grace_period: 1s}
  spec:
    containers:
    - image: x
      command: [sh, -c, 'trap "echo ignoring INT" INT; echo started; while :; do sleep 0.1; done']
- name: polite
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  decoration_config: {timeout: 1s, grace_period: 20s}
  spec:
    containers:
    - image: x
      command: [sh, -c, 'trap "echo stopping; exit 3" INT; echo started; while :; do sleep 0.1; done']
"#;
    let daemon = start(&dir, CONFIG, jobs, &[]);
    let port = daemon.port;
    let stubborn = trigger(port, r#"{"job": "stubborn"}"#);
    let polite = trigger(port, r#"{"job": "polite"}"#);

    let run = wait_state(port, &stubborn, |s| s == "failure");
    assert_eq!(run["description"], "Job failed (exit code 127).", "{run}");
    let out = log(port, &stubborn);
    assert!(
        out.contains("Process did not finish before 1s timeout"),
        "{out}"
    );
    assert!(out.contains("ignoring INT"), "SIGINT came first: {out}");
    assert!(
        out.contains("Process did not exit before 1s grace period"),
        "{out}"
    );
    let f = finished(port, &stubborn);
    assert_eq!(
        (f["passed"].as_bool(), f["result"].as_str()),
        (Some(false), Some("FAILURE"))
    );

    // A test that stops on SIGINT is not killed: well inside its 20 s grace.
    let run = wait_state(port, &polite, |s| s == "failure");
    assert_eq!(run["description"], "Job failed (exit code 127).", "{run}");
    let out = log(port, &polite);
    assert!(out.contains("stopping"), "{out}");
    assert!(
        out.contains("Process gracefully exited before 20s grace period"),
        "{out}"
    );
}

#[test]
fn an_aborted_run_ends_aborted_and_its_files_say_so() {
    let (_d, dir) = tmp();
    let jobs = r#"
periodics:
- name: slow
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  decoration_config: {grace_period: 2s}
  spec:
    containers:
    - image: x
      workingDir: sub/dir
      command: [sh, -c, 'trap "echo interrupted; exit 1" INT TERM; echo "started in $(pwd)"; while :; do sleep 0.1; done']
"#;
    let daemon = start(&dir, CONFIG, jobs, &[]);
    let port = daemon.port;
    let id = trigger(port, r#"{"job": "slow"}"#);
    let deadline = Instant::now() + Duration::from_secs(30);
    // (The log endpoint follows an active run; build-log.txt is read as is.)
    while !artifact(port, &id, "build-log.txt").1.contains("started") {
        assert!(Instant::now() < deadline, "the test did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let abort = request(
        port,
        "POST",
        &format!("/api/v1/runs/{id}/abort"),
        None,
        None,
    );
    assert_eq!(abort.0, 202, "{abort:?}");
    wait_state(port, &id, |s| s == "aborted");
    let f = finished(port, &id);
    assert_eq!(f["result"], "ABORTED", "{f}");
    assert_eq!(f["passed"], false, "{f}");
    let (_, build_log) = artifact(port, &id, "build-log.txt");
    // Nothing cloned: the container's workingDir, inside the run's directory.
    let workdir = dir.join(format!("data/runs/default/{id}/sub/dir"));
    assert!(
        build_log.contains(&format!("started in {}", workdir.display())),
        "{build_log}"
    );
    assert!(
        build_log.contains("interrupted"),
        "SIGINT first: {build_log}"
    );
    assert!(
        build_log.contains("Entrypoint received interrupt: terminated"),
        "{build_log}"
    );
}

#[test]
fn a_clone_failure_fails_the_run_with_the_clone_log() {
    let (_d, dir) = tmp();
    let origin = dir.join("origin");
    repo(&origin, "main", &[("README", "base\n")]);
    let jobs = format!(
        r#"
periodics:
- name: missing-branch
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  extra_refs:
  - {{org: example, repo: app, base_ref: no-such-branch, clone_uri: "file://{}"}}
  spec:
    containers:
    - image: x
      command: [sh, -c, 'echo the test must not run']
"#,
        origin.display()
    );
    let daemon = start(&dir, CONFIG, &jobs, &[]);
    let port = daemon.port;
    let id = trigger(port, r#"{"job": "missing-branch"}"#);
    let run = wait_state(port, &id, |s| {
        !matches!(s, "triggered" | "pending" | "scheduling")
    });
    let out = log(port, &id);
    assert_eq!(run["state"], "failure", "{run}\n{out}");
    assert!(!out.contains("the test must not run"), "{out}");
    assert!(out.contains("no-such-branch"), "the clone log: {out}");
    let (_, clone_log) = artifact(port, &id, "clone-log.txt");
    let (_, build_log) = artifact(port, &id, "build-log.txt");
    assert_eq!(build_log, clone_log);
    let records = artifact_json(port, &id, "clone-records.json");
    assert_eq!(records[1]["failed"], true, "{records}");
    let f = artifact_json(port, &id, "finished.json");
    assert_eq!(f["result"], "FAILURE", "{f}");
}

/// The sinker drops a clone mirror no run has used for
/// `sinker.max_prowjob_age`.
#[test]
fn the_sinker_prunes_unused_clone_mirrors() {
    let (_d, dir) = tmp();
    let origin = dir.join("origin");
    repo(&origin, "main", &[("README", "base\n")]);
    let jobs = format!(
        r#"
periodics:
- name: clones
  cron: "0 0 31 2 *"  # never fires: runs only when triggered
  decorate: true
  extra_refs:
  - {{org: example, repo: app, base_ref: main, clone_uri: "file://{}"}}
  spec:
    containers:
    - image: x
      command: [sh, -c, 'cat README']
"#,
        origin.display()
    );
    let config = format!("{CONFIG}sinker:\n  resync_period: 1s\n  max_prowjob_age: 3s\n");
    let daemon = start(&dir, &config, &jobs, &[]);
    let port = daemon.port;
    let id = trigger(port, r#"{"job": "clones"}"#);
    let run = wait_state(port, &id, |s| {
        !matches!(s, "triggered" | "pending" | "scheduling")
    });
    assert_eq!(run["state"], "success", "{run}\n{}", log(port, &id));
    let mirrors = dir.join("data/runs/default/.mirrors");
    let repos = || -> Vec<String> {
        std::fs::read_dir(&mirrors)
            .map(|d| {
                d.filter_map(|e| {
                    let n = e.ok()?.file_name().to_string_lossy().into_owned();
                    n.ends_with(".git").then_some(n)
                })
                .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(repos().len(), 1, "the run's clone made a mirror");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !repos().is_empty() {
        assert!(Instant::now() < deadline, "the mirror was never pruned");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The run stays: the latest run of a periodic is kept.
    let (status, _) = request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
    assert_eq!(status, 200);
}

/// The lines of one job of a corpus file: from its `- name:` line to the
/// next job's.
fn corpus_job(file: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let start = text
        .find(&format!("- name: {name}\n"))
        .unwrap_or_else(|| panic!("{name} in {}", file.display()));
    let rest = &text[start..];
    let end = rest[1..].find("\n- name: ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

#[test]
fn a_corpus_periodic_with_extra_refs_runs_end_to_end() {
    // The job clones with git and runs its `make` target.
    common::needs("git", "git");
    common::needs("make", "make");
    let (_d, dir) = tmp();
    // etcd's release-3.7 branch, as a local repository: its Makefile has
    // the job's `test-unit` target.
    let origin = dir.join("etcd");
    let base = repo(
        &origin,
        "release-3.7",
        &[(
            "Makefile",
            "test-unit:\n\t@echo \"unit tests of $$(git rev-parse --abbrev-ref HEAD) pass\"\n",
        )],
    );
    // The job's image provides `runner.sh`; a local cluster runs the
    // command, so a stand-in is on PATH.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("runner.sh"),
        "#!/bin/sh\necho \"runner.sh: $*\"\nexec \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        bin.join("runner.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    // The corpus beside the project (`../shared`), or where the machine
    // keeps it.
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/test-infra")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from("/work/shared/corpus/test-infra"))
        .join("config/jobs/etcd/etcd-periodics-release-3.7.yaml");
    let job = corpus_job(&corpus, "ci-etcd-unit-test-release37-amd64");
    // Its only change: the repository comes from the local mirror.
    let job = job.replacen(
        "      base_ref: release-3.7\n",
        &format!(
            "      base_ref: release-3.7\n      clone_uri: file://{}\n",
            origin.display()
        ),
        1,
    );
    assert!(job.contains("clone_uri: file://"), "{job}");
    let config = "plank:\n  max_concurrency: 4\nbuild_clusters:\n  eks-prow-build-cluster: {kind: local, max_concurrency: 2}\n";
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let daemon = start(
        &dir,
        config,
        &format!("periodics:\n{job}"),
        &[("PATH", &path)],
    );
    let port = daemon.port;
    // An `interval` periodic fires when it is first seen.
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let (_, body) = request(
            port,
            "GET",
            "/api/v1/runs?job=ci-etcd-unit-test-release37-amd64",
            None,
            None,
        );
        if let Some(id) = json(&body)["runs"][0]["id"].as_str() {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the periodic did not fire: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let run = wait_state(port, &id, |s| {
        !matches!(s, "triggered" | "pending" | "scheduling")
    });
    let out = log(port, &id);
    assert_eq!(run["state"], "success", "{run}\n{out}");
    assert!(out.contains("runner.sh: make test-unit"), "{out}");
    assert!(out.contains("unit tests of release-3.7 pass"), "{out}");
    let started = artifact_json(port, &id, "started.json");
    assert_eq!(started["repo-commit"], base, "{started}");
    let f = artifact_json(port, &id, "finished.json");
    assert_eq!(f["result"], "SUCCESS", "{f}");
    let prowjob = artifact_json(port, &id, "prowjob.json");
    assert_eq!(prowjob["spec"]["extra_refs"][0]["repo"], "etcd");
    assert_eq!(prowjob["spec"]["decoration_config"]["timeout"], "1h0m0s");
}

#[test]
fn the_quickstarts_decorated_job_clones_this_checkout() {
    common::needs("git", "git");
    let (_d, dir) = tmp();
    // As root, the quickstart's jobs run as nobody: the daemon runs from a
    // copy of the project every user can reach, its `bosun` included.
    let copy = common::reachable_copy(&dir);
    let root = copy.checkout.clone();
    let daemon_log = dir.join("daemon.log");
    let mut child = Command::new(copy.bin.join("bosun"))
        .arg("serve")
        .arg("--config")
        .arg(root.join("examples/quickstart/config.yaml"))
        .arg("--job-config")
        .arg(root.join("examples/quickstart/jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&daemon_log).unwrap())
        .spawn()
        .unwrap();
    let port = common::logged_port(
        &mut child,
        &daemon_log,
        Instant::now() + Duration::from_secs(20),
    );
    let daemon = Daemon {
        child,
        port,
        log: daemon_log,
    };
    // Its `interval` fires at start.
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let (_, body) = request(port, "GET", "/api/v1/runs?job=count-rust-lines", None, None);
        if let Some(id) = json(&body)["runs"][0]["id"].as_str() {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the periodic did not fire: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let run = wait_state(port, &id, |s| {
        !matches!(s, "triggered" | "pending" | "scheduling")
    });
    let out = log(port, &id);
    assert_eq!(run["state"], "success", "{run}\n{out}");
    // The cluster the dispatcher placed it on.
    let cluster = run["cluster"].as_str().unwrap().to_string();
    let clone = dir.join(format!("data/runs/{cluster}/{id}/go/src/example.com/bosun"));
    assert!(out.contains(&format!("in {}", clone.display())), "{out}");
    let (status, lines) = artifact(port, &id, "artifacts/rust-lines.txt");
    assert_eq!(status, 200);
    let lines: u64 = lines.trim().parse().unwrap();
    assert!(lines > 1000, "{lines}");
    // A shallow clone of the checkout's `main`.
    assert_eq!(git(&clone, &["rev-list", "--count", "HEAD"]), "1");
    assert_eq!(
        git(&clone, &["rev-parse", "HEAD"]),
        git(&root, &["rev-parse", "main"])
    );
    drop(daemon);
}
