//! `bosun check` on Lighthouse pipeline jobs, end to end: the real binary on
//! repositories written to a temporary directory (`app/.lighthouse/jobs/`),
//! run from that directory so the paths it prints are relative and stable.
//!
//! - a `source:` file that is missing, not a PipelineRun, or not YAML is an
//!   error at its job's line (the loader's);
//! - what would end every run in `error` is a warning at the job's line:
//!   a `pipeline_run_params` template bosun refuses or that fails over the
//!   refs such a run gets, jx `uses:` references (every cluster), and what a
//!   local cluster cannot run, only when the job can land on one (its own
//!   cluster, or a failover cluster);
//! - a pipeline that runs locally is clean.

use std::path::Path;
use std::process::Command;

use expect_test::expect;

use crate::common::{assert_run, Run};

/// Writes `files` (path, text) below a new temporary directory, with an empty
/// `jobs/`, and runs `bosun check` there on `config.yaml`, `jobs` and the
/// checkout `app` of `example/app`, with `extra` arguments.
fn check(files: &[(&str, &str)], extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("jobs")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["check", "--config", "config.yaml", "--job-config", "jobs"])
        .args(["--in-repo", "example/app=app"])
        .args(extra)
        .current_dir(dir.path())
        .env_remove("KUBECONFIG")
        .output()
        .expect("run bosun");
    Run {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

const LOCAL: &str = "build_clusters:\n  default: {kind: local}\n";

const TRIGGERS: &str = "app/.lighthouse/jobs/triggers.yaml";

fn source(name: &str) -> String {
    format!("app/.lighthouse/jobs/{name}")
}

/// A pipeline a local cluster runs: two tasks, a workspace, a param, a
/// result, `finally`, and Lighthouse's parameters in the steps' environment.
const RUNS_LOCALLY: &str = r#"
apiVersion: tekton.dev/v1beta1
kind: PipelineRun
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
    workspaces:
    - name: shared
    tasks:
    - name: write
      workspaces:
      - {name: out, workspace: shared}
      params:
      - {name: text, value: "$(params.greeting) from $(params.REPO_NAME)"}
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
            echo "$(params.text)" > $(workspaces.out.path)/message
            wc -c < $(workspaces.out.path)/message > $(results.size.path)
    - name: read
      params:
      - {name: size, value: $(tasks.write.results.size)}
      taskSpec:
        params:
        - name: size
        steps:
        - name: show
          image: alpine
          command: [echo]
          args: ["$(params.size) bytes from $REPO_OWNER at $(params.PULL_BASE_SHA)"]
    finally:
    - name: report
      taskSpec:
        steps:
        - name: done
          image: alpine
          script: echo done
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
    - name: build
      runAfter: [clone]
      taskSpec:
        steps:
        - name: make
          image: golang
          env:
          - name: TOKEN
            valueFrom:
              secretKeyRef: {name: bot, key: token}
          script: make
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
    - name: lint
      taskSpec:
        steps:
        - name: lint
          image: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/lint.yaml@versionStream
"#;

#[test]
fn a_source_that_is_missing_not_a_pipeline_run_or_not_yaml_is_an_error_at_its_job() {
    let triggers = r#"apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  presubmits:
  - name: missing
    context: missing
    source: missing.yaml
  - name: a-pipeline
    context: a-pipeline
    source: pipeline.yaml
  postsubmits:
  - name: not-yaml
    branches: [main]
    source: not-yaml.yaml
  periodics:
  - name: fine
    cron: "0 1 * * *"
    source: fine.yaml
"#;
    let pipeline = "apiVersion: tekton.dev/v1\nkind: ClusterTask\nspec:\n  steps: []\n";
    let run = check(
        &[
            ("config.yaml", LOCAL),
            (TRIGGERS, triggers),
            (&source("pipeline.yaml"), pipeline),
            (&source("not-yaml.yaml"), "spec: [unclosed\n"),
            (&source("fine.yaml"), RUNS_LOCALLY),
        ],
        &[],
    );
    assert_run(
        &run,
        1,
        expect![[r#"
            app/.lighthouse/jobs/not-yaml.yaml:2:1: error: job not-yaml: invalid YAML: while parsing a flow sequence, expected ',' or ']'
            app/.lighthouse/jobs/pipeline.yaml:2:7: error: job a-pipeline: kind must be PipelineRun, Pipeline, Task or TaskRun, found "ClusterTask"
            app/.lighthouse/jobs/triggers.yaml:7:5: error: job missing: source "missing.yaml": cannot read app/.lighthouse/jobs/missing.yaml: No such file or directory (os error 2)
            5 files: no snapshot (errors); 3 errors, 0 warnings
        "#]],
    );
}

#[test]
fn a_pipeline_a_local_cluster_runs_is_clean() {
    let triggers = r#"apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  presubmits:
  - name: pr
    context: pr
    source: fine.yaml
    pipeline_run_params:
    - name: PULL_BASE_SHA
      value_template: '{{ .Refs.BaseSHA }}{{ range .Refs.Pulls }} {{ .Number }}:{{ .SHA }}{{ end }}'
  postsubmits:
  - name: release
    branches: [main]
    source: fine.yaml
  periodics:
  - name: nightly
    cron: "0 1 * * *"
    source: fine.yaml
    pipeline_run_params:
    - name: PULL_BASE_SHA
      value_template: '{{ .Refs.BaseRef }}'
"#;
    let run = check(
        &[
            ("config.yaml", LOCAL),
            (TRIGGERS, triggers),
            (&source("fine.yaml"), RUNS_LOCALLY),
        ],
        &["--strict"],
    );
    assert_run(
        &run,
        0,
        expect![[r#"
            5 files: 1 periodic, 1 presubmit, 1 postsubmit; 0 errors, 0 warnings
        "#]],
    );
}

#[test]
fn templates_bosun_refuses_or_that_fail_over_the_runs_refs_are_warnings() {
    let triggers = r#"apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  presubmits:
  - name: pr
    context: pr
    source: fine.yaml
    pipeline_run_params:
    - name: sha
      value_template: '{{ (index .Refs.Pulls 0).SHA }}'
    - name: upper
      value_template: '{{ .Refs.Org | printf "%s" }}'
    - name: unclosed
      value_template: '{{ if .Refs.Pulls }}batch'
  postsubmits:
  - name: release
    branches: [main]
    source: fine.yaml
    pipeline_run_params:
    - name: sha
      value_template: '{{ (index .Refs.Pulls 0).SHA }}'
  periodics:
  - name: nightly
    cron: "0 1 * * *"
    source: fine.yaml
    pipeline_run_params:
    - name: author
      value_template: '{{ .Refs.Author }}'
"#;
    // A central periodic's runs have no refs.
    let central = r#"periodics:
- name: central
  interval: 1h
  agent: tekton-pipeline
  pipeline_run_params:
  - name: org
    value_template: '{{ .Refs.Org }}'
  pipeline_run_spec:
    pipelineSpec:
      tasks:
      - name: t
        taskSpec:
          steps:
          - {name: s, image: alpine, script: "echo $(params.org)"}
"#;
    let run = check(
        &[
            ("config.yaml", LOCAL),
            (TRIGGERS, triggers),
            (&source("fine.yaml"), RUNS_LOCALLY),
            ("jobs/central.yaml", central),
        ],
        &[],
    );
    assert_run(
        &run,
        0,
        expect![[r#"
            app/.lighthouse/jobs/triggers.yaml:8:5: warning: job pr: runs of this job end in error: pipeline_run_params unclosed: value_template "{{ if .Refs.Pulls }}batch": template: unclosed:1: unexpected EOF in if
              hint: bosun supports Go templates' field access, index, if, range, with and variables (see docs/lighthouse.md)
            app/.lighthouse/jobs/triggers.yaml:8:5: warning: job pr: runs of this job end in error: pipeline_run_params upper: value_template "{{ .Refs.Org | printf \"%s\" }}": template: upper:1: pipelines (|) are not supported by bosun
              hint: bosun supports Go templates' field access, index, if, range, with and variables (see docs/lighthouse.md)
            app/.lighthouse/jobs/triggers.yaml:19:5: warning: job release: runs of this job end in error: pipeline_run_params sha: value_template "{{ (index .Refs.Pulls 0).SHA }}": template: sha:1: executing "sha" at <index .Refs.Pulls 0>: error calling index: index out of range: 0
              hint: a postsubmit's refs have no pull requests
            app/.lighthouse/jobs/triggers.yaml:26:5: warning: job nightly: runs of this job end in error: pipeline_run_params author: value_template "{{ .Refs.Author }}": template: author:1: executing "author" at <.Refs.Author>: can't evaluate field Author in type *v1alpha1.Refs
              hint: an in-repo periodic's runs have its repository's refs, {org, repo, base_ref}
            jobs/central.yaml:5:3: warning: job central: runs of this job end in error: pipeline_run_params org: value_template "{{ .Refs.Org }}": template: org:1: executing "org" at <.Refs.Org>: nil pointer evaluating *v1alpha1.Refs.Org
              hint: a central periodic's runs have no refs (.Refs is nil)
            6 files: 2 periodics, 1 presubmit, 1 postsubmit; 0 errors, 5 warnings
        "#]],
    );
}

#[test]
fn what_a_local_cluster_cannot_run_is_a_warning_naming_the_reference() {
    let triggers = r#"apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  periodics:
  - name: by-reference
    cron: "0 1 * * *"
    source: by-reference.yaml
  - name: catalog
    cron: "0 1 * * *"
    source: catalog.yaml
"#;
    let files = [
        (TRIGGERS, triggers),
        (&*source("by-reference.yaml"), BY_REFERENCE),
        (&*source("catalog.yaml"), CATALOG),
    ];
    let with = |config: &'static str| {
        let mut f = vec![("config.yaml", config)];
        f.extend(files.iter().map(|(p, t)| (*p, *t)));
        f
    };
    // On a local cluster.
    assert_run(
        &check(&with(LOCAL), &[]),
        0,
        expect![[r#"
            app/.lighthouse/jobs/triggers.yaml:7:5: warning: job by-reference: runs of this job on local cluster "default" end in error: a local cluster cannot run this pipeline: task build, step make: env TOKEN takes its value from secretKeyRef bot/token, which a local cluster cannot read
              hint: a local cluster runs what the PipelineRun embeds (pipelineSpec, taskSpec), with nothing from a Kubernetes cluster (references, Secrets, ConfigMaps): run this job on a Kubernetes cluster with Tekton, or embed what it needs (Lighthouse's loadFileRefs annotation embeds Pipelines and Tasks from files beside the source)
            app/.lighthouse/jobs/triggers.yaml:7:5: warning: job by-reference: runs of this job on local cluster "default" end in error: a local cluster cannot run this pipeline: task clone: taskRef git-clone cannot be resolved on a local cluster (only tasks embedded with taskSpec run locally)
              hint: a local cluster runs what the PipelineRun embeds (pipelineSpec, taskSpec), with nothing from a Kubernetes cluster (references, Secrets, ConfigMaps): run this job on a Kubernetes cluster with Tekton, or embed what it needs (Lighthouse's loadFileRefs annotation embeds Pipelines and Tasks from files beside the source)
            app/.lighthouse/jobs/triggers.yaml:10:5: warning: job catalog: runs of this job end in error on every cluster: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/lint.yaml@versionStream (task lint, step lint): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them
              hint: write the steps the reference stands for into the pipeline (`jx pipeline effective` prints the pipeline with them)
            app/.lighthouse/jobs/triggers.yaml:10:5: warning: job catalog: runs of this job end in error on every cluster: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream (task from-build-pack, stepTemplate): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them
              hint: write the steps the reference stands for into the pipeline (`jx pipeline effective` prints the pipeline with them)
            4 files: 2 periodics, 0 presubmits, 0 postsubmits; 0 errors, 4 warnings
        "#]],
    );
    // On a Kubernetes cluster, only jx's references are left; in JSON too.
    let kube = "build_clusters:\n  default: {kind: kubernetes}\n";
    assert_run(
        &check(&with(kube), &[]),
        0,
        expect![[r#"
            app/.lighthouse/jobs/triggers.yaml:10:5: warning: job catalog: runs of this job end in error on every cluster: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/lint.yaml@versionStream (task lint, step lint): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them
              hint: write the steps the reference stands for into the pipeline (`jx pipeline effective` prints the pipeline with them)
            app/.lighthouse/jobs/triggers.yaml:10:5: warning: job catalog: runs of this job end in error on every cluster: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream (task from-build-pack, stepTemplate): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them
              hint: write the steps the reference stands for into the pipeline (`jx pipeline effective` prints the pipeline with them)
            4 files: 2 periodics, 0 presubmits, 0 postsubmits; 0 errors, 2 warnings
        "#]],
    );
    // Where the Kubernetes cluster's runs fail over to a local one, that
    // local cluster is named.
    let failover = "build_clusters:\n  default: {kind: kubernetes, failover_to: spare}\n  spare: {kind: local}\n";
    assert_run(
        &check(&with(failover), &[]),
        0,
        expect![[r#"
            app/.lighthouse/jobs/triggers.yaml:7:5: warning: job by-reference: runs of this job on local cluster "spare" end in error: a local cluster cannot run this pipeline: task build, step make: env TOKEN takes its value from secretKeyRef bot/token, which a local cluster cannot read
              hint: a local cluster runs what the PipelineRun embeds (pipelineSpec, taskSpec), with nothing from a Kubernetes cluster (references, Secrets, ConfigMaps): run this job on a Kubernetes cluster with Tekton, or embed what it needs (Lighthouse's loadFileRefs annotation embeds Pipelines and Tasks from files beside the source)
            app/.lighthouse/jobs/triggers.yaml:7:5: warning: job by-reference: runs of this job on local cluster "spare" end in error: a local cluster cannot run this pipeline: task clone: taskRef git-clone cannot be resolved on a local cluster (only tasks embedded with taskSpec run locally)
              hint: a local cluster runs what the PipelineRun embeds (pipelineSpec, taskSpec), with nothing from a Kubernetes cluster (references, Secrets, ConfigMaps): run this job on a Kubernetes cluster with Tekton, or embed what it needs (Lighthouse's loadFileRefs annotation embeds Pipelines and Tasks from files beside the source)
            app/.lighthouse/jobs/triggers.yaml:10:5: warning: job catalog: runs of this job end in error on every cluster: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/lint.yaml@versionStream (task lint, step lint): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them
              hint: write the steps the reference stands for into the pipeline (`jx pipeline effective` prints the pipeline with them)
            app/.lighthouse/jobs/triggers.yaml:10:5: warning: job catalog: runs of this job end in error on every cluster: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/pullrequest.yaml@versionStream (task from-build-pack, stepTemplate): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them
              hint: write the steps the reference stands for into the pipeline (`jx pipeline effective` prints the pipeline with them)
            4 files: 2 periodics, 0 presubmits, 0 postsubmits; 0 errors, 4 warnings
        "#]],
    );
    // Warnings fail a strict check; the JSON report carries them.
    let strict = check(&with(kube), &["--strict", "--format", "json"]);
    assert_eq!(strict.code, 1, "{}", strict.stdout);
    let doc: serde_json::Value = serde_json::from_str(&strict.stdout).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["warnings"], 2);
    let first = &doc["diagnostics"][0];
    assert_eq!(first["severity"], "warning");
    assert_eq!(first["file"], TRIGGERS);
    assert_eq!(first["job"], "catalog");
    assert_eq!(first["line"], 10);
}

#[test]
fn the_quickstart_is_clean() {
    // As the README runs it, from the project's root; the repository the
    // quickstart follows from its remote checked from its directory here.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["check", "--strict"])
        .args(["--config", "examples/quickstart/config.yaml"])
        .args(["--job-config", "examples/quickstart/jobs"])
        .args([
            "--in-repo",
            "example/lighthouse-app=examples/quickstart/lighthouse-app",
        ])
        .current_dir(&root)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run bosun");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.ends_with("; 0 errors, 0 warnings\n"), "{stdout}");
    assert!(stdout.contains(": 6 periodics,"), "{stdout}");
}
