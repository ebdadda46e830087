//! Every rule of the validator (`src/validate.rs`), each with a failing and a
//! passing case, asserting on the exact diagnostics: file, line, column, severity,
//! job and message (Prow's text where Prow has one), and on the snapshot (present
//! exactly when there is no error).
//!
//! YAML is written indented in the tests; [`y`] strips the indentation, so line 1
//! is the line right after the opening quote.

use std::sync::Arc;
use std::time::Duration;

use bosun_config::model::Snapshot;
use bosun_config::source::MemFiles;
use bosun_config::types::{DecorationConfig, JobSource};
use bosun_config::{
    load, Diagnostic, Job, LoadOptions, Loaded, Periodic, ScheduleCheck, ScheduleProblem, Severity,
};
use k8s_openapi::api::core::v1::PodSpec;

const CONFIG: &str = "/c/config.yaml";
const JOBS: &str = "/c/jobs/jobs.yaml";
const PROW_YAML: &str = "/repo/.prow.yaml";

const DURATION_HINT: &str =
    "\n  hint: durations are Go durations such as 90s, 10m, 1h30m (no `d`: write 24h)";

/// A `config.yaml` whose decoration defaults make every decorated job valid.
const DECORATION_DEFAULTS: &str = "
    plank:
      default_decoration_config_entries:
      - config:
          utility_images:
            clonerefs: clonerefs:v1
            initupload: initupload:v1
            entrypoint: entrypoint:v1
            sidecar: sidecar:v1
          gcs_configuration:
            bucket: artifacts
            path_strategy: explicit
";

/// A `config.yaml` line making `default` a Kubernetes cluster: decorated jobs
/// there need everything Prow requires (on local-only clusters bosun relaxes
/// the utility images and the upload configuration).
const KUBERNETES_DEFAULT: &str = "build_clusters: {default: {kind: kubernetes}}\n";

/// Strips the first newline and the common indentation.
fn y(s: &str) -> String {
    let s = s.strip_prefix('\n').unwrap_or(s);
    let indent = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    for l in s.lines() {
        out.push_str(l.get(indent..).unwrap_or_else(|| l.trim_start()));
        out.push('\n');
    }
    out
}

fn options() -> LoadOptions {
    LoadOptions {
        config: Some(CONFIG.into()),
        job_config: vec!["/c/jobs".into()],
        ..LoadOptions::default()
    }
}

/// Loads `files` (path, indented YAML) with `opts`.
fn load_files(files: &[(&str, &str)], opts: &LoadOptions) -> Loaded {
    let mut fs = MemFiles::new();
    for (path, text) in files {
        fs.file(*path, y(text));
    }
    load(opts, &fs)
}

/// Loads `/c/config.yaml` and `/c/jobs/jobs.yaml`.
fn check(config: &str, jobs: &str) -> Loaded {
    load_files(&[(CONFIG, config), (JOBS, jobs)], &options())
}

/// Asserts the rendered diagnostics (`file:line:col: severity: job NAME: message`
/// and an indented hint), in order, and that a snapshot exists exactly when none
/// of them is an error.
#[track_caller]
fn assert_diags<S: AsRef<str>>(l: &Loaded, want: &[S]) {
    let got: Vec<String> = l.diagnostics.iter().map(ToString::to_string).collect();
    let want: Vec<&str> = want.iter().map(AsRef::as_ref).collect();
    assert_eq!(got, want, "diagnostics");
    let errors = l.diagnostics.iter().any(Diagnostic::is_error);
    assert_eq!(
        l.snapshot.is_some(),
        !errors,
        "a snapshot exists exactly when there is no error"
    );
}

/// Asserts there is no diagnostic at all, and returns the snapshot.
#[track_caller]
fn clean(l: &Loaded) -> &Snapshot {
    assert_diags::<&str>(l, &[]);
    l.snapshot.as_ref().expect("snapshot")
}

/// Asserts there is no error (warnings are checked by the caller), and returns the snapshot.
#[track_caller]
fn snapshot(l: &Loaded) -> &Snapshot {
    assert_eq!(l.errors(), 0, "{:#?}", l.diagnostics);
    l.snapshot.as_ref().expect("snapshot")
}

fn periodic<'s>(s: &'s Snapshot, name: &str) -> &'s Periodic {
    s.periodic(name)
        .unwrap_or_else(|| panic!("periodic {name}"))
}

/// The pod spec a run of `job` gets (the job's spec with its presets merged).
fn pod_spec<K>(s: &Snapshot, job: &Job<K>) -> PodSpec {
    s.pod_spec(job).expect("spec")
}

/// The decoration config a run of `job` gets (`repo`: the job's repository, or
/// `extra_refs[0]` for periodics): its own over the matching default entries.
fn decoration<K>(s: &Snapshot, job: &Job<K>, repo: &str) -> Option<DecorationConfig> {
    s.decoration_config(job, repo)
}

fn env_names(spec: &PodSpec, container: usize) -> Vec<String> {
    spec.containers[container]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect()
}

const UNSUPPORTED_JENKINS: &str =
    "agent jenkins is not supported by bosun: the job loads, but its runs end in error";

// --- Diagnostics and snapshots.

#[test]
fn diagnostic_fields_match_the_rendering() {
    let l = check(
        "",
        "
        periodics:
        - name: p
          interval: 1h
          max_concurrency: -2
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_eq!(l.diagnostics.len(), 1);
    let d = &l.diagnostics[0];
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.file.as_deref(), Some(JOBS));
    assert_eq!(d.mark.map(|m| (m.line, m.col)), Some((4, 3)));
    assert_eq!(d.job.as_deref(), Some("p"));
    assert_eq!(
        d.message,
        "max_concurrency: -2 must be a non-negative number"
    );
    assert_eq!(d.hint, None);
    assert_eq!(
        d.to_string(),
        format!("{JOBS}:4:3: error: job p: max_concurrency: -2 must be a non-negative number")
    );
    assert!(l.snapshot.is_none());
    assert_eq!((l.errors(), l.warnings()), (1, 0));
}

#[test]
fn any_error_means_no_snapshot_and_warnings_alone_keep_it() {
    let jobs = "
        periodics:
        - name: warned
          interval: 1h
          agent: jenkins
        - name: fine
          interval: 1h
          spec: {containers: [{image: alpine}]}
        ";
    let l = check("", jobs);
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:4:3: warning: job warned: {UNSUPPORTED_JENKINS}"
        )],
    );
    let s = snapshot(&l);
    assert_eq!(s.counts().periodics, 2);
    assert!(s.version > 0);

    let broken = "- name: broken\n  interval: 1d\n  spec: {containers: [{image: alpine}]}\n";
    let l = check("", &format!("{}{broken}", y(jobs)));
    assert_eq!((l.errors(), l.warnings()), (1, 1));
    assert!(l.snapshot.is_none());
}

// --- Job base: name, max_concurrency.

#[test]
fn job_name_must_match_prow_regex() {
    let l = check(
        "",
        "
        periodics:
        - name: nightly build
          interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: Nightly-1.2_x
          interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: folder/job
          interval: 1h
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:2:3: error: job nightly build: name: must match regex "^[A-Za-z0-9-._]+$""#
            ),
            format!(
                r#"{JOBS}:8:3: error: job folder/job: name: must match regex "^[A-Za-z0-9-._]+$""#
            ),
        ],
    );
}

#[test]
fn jenkins_job_names_may_contain_slashes() {
    let l = check(
        "",
        "
        periodics:
        - name: folder/job
          interval: 1h
          agent: jenkins
        - name: folder/job/
          interval: 1h
          agent: jenkins
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:3: warning: job folder/job: {UNSUPPORTED_JENKINS}"),
            format!(
                r#"{JOBS}:5:3: error: job folder/job/: name: must match regex "^[A-Za-z0-9-._]([A-Za-z0-9-._/]*[A-Za-z0-9-_])?$""#
            ),
            format!("{JOBS}:7:3: warning: job folder/job/: {UNSUPPORTED_JENKINS}"),
        ],
    );
}

#[test]
fn max_concurrency_must_not_be_negative() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: negative
            max_concurrency: -1
            spec: {containers: [{image: alpine}]}
          - name: zero
            max_concurrency: 0
            spec: {containers: [{image: alpine}]}
          - name: five
            max_concurrency: 5
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:4:5: error: job negative: max_concurrency: -1 must be a non-negative number"
        )],
    );
}

// --- Agents (Prow's validateAgent, first matching rule).

#[test]
fn agent_rules_fail() {
    let l = check(
        "",
        "
        periodics:
        - name: spec-needs-kubernetes
          interval: 1h
          agent: jenkins
          spec: {containers: [{image: alpine}]}
        - name: kubernetes-needs-spec
          interval: 1h
        - name: pipeline-needs-tekton
          interval: 1h
          agent: kubernetes
          spec: {containers: [{image: alpine}]}
          pipeline_run_spec: {pipelineRef: {name: build}}
        - name: tekton-needs-pipeline
          interval: 1h
          agent: tekton-pipeline
        - name: decoration-needs-kubernetes
          interval: 1h
          agent: jenkins
          decoration_config: {timeout: 1h}
        - name: eviction-needs-kubernetes
          interval: 1h
          agent: jenkins
          error_on_eviction: true
        - name: namespace-needs-tekton
          interval: 1h
          namespace: other
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(r#"{JOBS}:4:3: error: job spec-needs-kubernetes: job specs require agent: kubernetes (found "jenkins")"#),
            format!("{JOBS}:4:3: warning: job spec-needs-kubernetes: {UNSUPPORTED_JENKINS}"),
            format!("{JOBS}:6:3: error: job kubernetes-needs-spec: kubernetes jobs require a spec"),
            format!(r#"{JOBS}:10:3: error: job pipeline-needs-tekton: job pipeline_run_spec require agent: tekton-pipeline (found "kubernetes")"#),
            format!("{JOBS}:15:3: error: job tekton-needs-pipeline: agent: tekton-pipeline jobs require a pipeline_run_spec"),
            format!("{JOBS}:18:3: warning: job decoration-needs-kubernetes: {UNSUPPORTED_JENKINS}"),
            format!(r#"{JOBS}:19:3: error: job decoration-needs-kubernetes: decoration requires agent: kubernetes (found "jenkins")"#),
            format!("{JOBS}:22:3: warning: job eviction-needs-kubernetes: {UNSUPPORTED_JENKINS}"),
            format!(r#"{JOBS}:23:3: error: job eviction-needs-kubernetes: error_on_eviction only applies to agent: kubernetes (found "jenkins")"#),
            format!(r#"{JOBS}:26:3: error: job namespace-needs-tekton: namespace customization requires agent: tekton-pipeline (found "kubernetes")"#),
        ],
    );
}

#[test]
fn agent_rules_pass() {
    let l = check(
        "pod_namespace: test-pods",
        "
        periodics:
        - name: kubernetes-in-pod-namespace
          interval: 1h
          namespace: test-pods
          error_on_eviction: true
          spec: {containers: [{image: alpine}]}
        - name: tekton-elsewhere
          interval: 1h
          agent: tekton-pipeline
          namespace: elsewhere
          pipeline_run_spec: {pipelineRef: {name: build}}
        - name: tekton-versioned
          interval: 1h
          agent: tekton-pipeline
          tekton_pipeline_run_spec: {v1beta1: {pipelineRef: {name: build}}}
        - name: jenkins
          interval: 1h
          agent: jenkins
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:18:3: warning: job jenkins: {UNSUPPORTED_JENKINS}"
        )],
    );
    let s = snapshot(&l);
    assert_eq!(
        periodic(s, "kubernetes-in-pod-namespace")
            .base
            .namespace
            .as_deref(),
        Some("test-pods")
    );
}

#[test]
fn unknown_agent_is_a_warning_and_skips_agent_rules() {
    let l = check(
        "",
        "
        periodics:
        - name: custom
          interval: 1h
          agent: my-agent
          namespace: anywhere
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:4:3: warning: job custom: agent my-agent is unknown and cannot be validated: use at your own risk"
        )],
    );
}

#[test]
fn jenkins_may_not_set_a_cluster() {
    let l = check(
        "",
        "
        periodics:
        - name: jenkins-build
          interval: 1h
          agent: jenkins
          cluster: build
        - name: jenkins-default
          interval: 1h
          agent: jenkins
          cluster: default
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:3: warning: job jenkins-build: {UNSUPPORTED_JENKINS}"),
            format!("{JOBS}:5:3: warning: job jenkins-build: jenkins-build: cannot set cluster field if agent is jenkins"),
            format!("{JOBS}:8:3: warning: job jenkins-default: {UNSUPPORTED_JENKINS}"),
        ],
    );
}

// --- Pod spec (Prow's validatePodSpec).

#[test]
fn pod_spec_container_counts() {
    let l = check(
        "",
        "
        periodics:
        - name: init
          interval: 1h
          spec:
            initContainers: [{name: setup, image: alpine}]
            containers: [{image: alpine}]
        - name: none
          interval: 1h
          spec:
            containers: []
        - name: two
          interval: 1h
          spec:
            containers:
            - {name: a, image: alpine}
            - {name: b, image: alpine}
        - name: one
          interval: 1h
          spec:
            containers: [{image: alpine}]
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:5:5: error: job init: pod spec may not use init containers"),
            format!("{JOBS}:10:5: error: job none: pod spec must specify at least 1 container, found: 0"),
            format!("{JOBS}:14:5: error: job two: pod utility decoration must be enabled to use multiple containers: 2"),
        ],
    );
}

#[test]
fn decorated_multi_container_names() {
    let l = check(
        DECORATION_DEFAULTS,
        "
        periodics:
        - name: names
          interval: 1h
          decorate: true
          spec:
            containers:
            - image: alpine
              command: [make]
            - name: c
              command: [make]
            - name: c
              command: [make]
            - name: sidecar
              command: [make]
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:7:7: error: job names: container does not have name. all containers must have names when defining multiple containers"),
            format!(r#"{JOBS}:11:7: error: job names: container named "c" is defined more than once"#),
            format!("{JOBS}:13:7: error: job names: container name sidecar is a reserved for decoration. please specify a different container name that does not conflict with pod utility container names"),
        ],
    );
}

#[test]
fn decorated_multi_container_passes_with_distinct_names() {
    let l = check(
        DECORATION_DEFAULTS,
        "
        periodics:
        - name: two
          interval: 1h
          decorate: true
          spec:
            containers:
            - name: test
              command: [make]
              env: [{name: A, value: '1'}]
            - name: helper
              args: [serve]
              env: [{name: A, value: '2'}]
        ",
    );
    clean(&l);
}

#[test]
fn reserved_container_names() {
    for name in ["clonerefs", "initupload", "place-entrypoint", "sidecar"] {
        let l = check(
            DECORATION_DEFAULTS,
            &format!(
                "
                periodics:
                - name: p
                  interval: 1h
                  decorate: true
                  spec:
                    containers:
                    - {{name: test, command: [make]}}
                    - {{name: {name}, command: [make]}}
                "
            ),
        );
        assert_diags(
            &l,
            &[format!("{JOBS}:8:7: error: job p: container name {name} is a reserved for decoration. please specify a different container name that does not conflict with pod utility container names")],
        );
    }
}

#[test]
fn env_duplicates_and_reserved_names() {
    let l = check(
        "",
        "
        periodics:
        - name: env
          interval: 1h
          spec:
            containers:
            - image: alpine
              env:
              - {name: A, value: '1'}
              - {name: A, value: '2'}
              - {name: JOB_NAME, value: x}
              - {name: REPO_OWNER, value: allowed-for-periodics}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(r#"{JOBS}:9:9: error: job env: env var named "A" is defined more than once"#),
            format!("{JOBS}:10:9: error: job env: env JOB_NAME is reserved"),
        ],
    );
}

/// Prow's `downwardapi.EnvForType`: each type reserves its own list.
#[test]
fn reserved_env_depends_on_the_job_type() {
    const BASE: &[&str] = &[
        "CI",
        "JOB_NAME",
        "JOB_SPEC",
        "JOB_TYPE",
        "PROW_JOB_ID",
        "BUILD_ID",
        "BUILD_NUMBER",
    ];
    const REFS: &[&str] = &[
        "REPO_OWNER",
        "REPO_NAME",
        "SRC_BASE",
        "SRC_HOST",
        "PULL_BASE_REF",
        "PULL_BASE_SHA",
        "PULL_REFS",
    ];
    const PULL: &[&str] = &[
        "PULL_NUMBER",
        "PULL_PULL_SHA",
        "PULL_HEAD_REF",
        "PULL_TITLE",
        "TRIGGER_COMMENT_ID",
        "TRIGGER_COMMENT_URL",
    ];
    let env = |names: &[&str], indent: &str| -> String {
        names
            .iter()
            .map(|n| format!("{indent}- {{name: {n}, value: x}}\n"))
            .collect()
    };
    // (kind, reserved, allowed)
    let cases: [(&str, Vec<&str>, Vec<&str>); 3] = [
        ("periodic", BASE.to_vec(), [REFS, PULL].concat()),
        ("postsubmit", [BASE, REFS].concat(), PULL.to_vec()),
        ("presubmit", [BASE, REFS, PULL].concat(), vec!["OTHER"]),
    ];
    for (kind, reserved, allowed) in cases {
        let all: Vec<&str> = reserved.iter().chain(&allowed).copied().collect();
        let (jobs, first_line, col) = if kind == "periodic" {
            let head = "periodics:\n- name: j\n  interval: 1h\n  spec:\n    containers:\n    - image: alpine\n      env:\n";
            (format!("{head}{}", env(&all, "      ")), 8, 9)
        } else {
            let head = format!("{kind}s:\n  o/r:\n  - name: j\n    spec:\n      containers:\n      - image: alpine\n        env:\n");
            (format!("{head}{}", env(&all, "        ")), 8, 11)
        };
        let mut fs = MemFiles::new();
        fs.file(CONFIG, "").file(JOBS, jobs);
        let l = load(&options(), &fs);
        let want: Vec<String> = reserved
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    "{JOBS}:{}:{col}: error: job j: env {n} is reserved",
                    first_line + i
                )
            })
            .collect();
        assert_diags(&l, &want);
    }
}

#[test]
fn volumes_and_volume_mounts() {
    let l = check(
        "",
        "
        periodics:
        - name: vols
          interval: 1h
          spec:
            containers:
            - image: alpine
              volumeMounts:
              - {name: data, mountPath: /data}
              - {name: missing, mountPath: /m}
              - {name: logs, mountPath: /x}
              - {name: data, mountPath: /tools}
              - {name: gcs-credentials, mountPath: /secrets/gcs}
            volumes:
            - {name: data, emptyDir: {}}
            - {name: data, emptyDir: {}}
            - {name: logs, emptyDir: {}}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(r#"{JOBS}:9:9: error: job vols: volumeMount named "missing" is undefined"#),
            format!("{JOBS}:10:9: error: job vols: volumeMount name logs is reserved for decoration"),
            format!("{JOBS}:11:9: error: job vols: mount data at /tools conflicts with decoration mount"),
            format!(r#"{JOBS}:15:7: error: job vols: volume named "data" is defined more than once"#),
            format!("{JOBS}:16:7: error: job vols: volume logs is a reserved for decoration"),
        ],
    );
}

#[test]
fn volumes_and_mounts_pass() {
    let l = check(
        "",
        "
        periodics:
        - name: vols
          interval: 1h
          spec:
            containers:
            - image: alpine
              volumeMounts:
              - {name: data, mountPath: /data}
              - {name: cache, mountPath: /home/prow/cache}
            volumes:
            - {name: data, emptyDir: {}}
            - {name: cache, emptyDir: {}}
        ",
    );
    clean(&l);
}

#[test]
fn reserved_volume_names_mount_names_and_paths() {
    for name in ["logs", "code", "tools", "gcs-credentials", "s3-credentials"] {
        let l = check(
            "",
            &format!(
                "
                periodics:
                - name: p
                  interval: 1h
                  spec:
                    containers: [{{image: alpine}}]
                    volumes:
                    - {{name: {name}, emptyDir: {{}}}}
                "
            ),
        );
        assert_diags(
            &l,
            &[format!(
                "{JOBS}:7:7: error: job p: volume {name} is a reserved for decoration"
            )],
        );
    }
    for name in ["logs", "code", "tools"] {
        let l = check(
            "",
            &format!(
                "
                periodics:
                - name: p
                  interval: 1h
                  spec:
                    containers: [{{image: alpine, volumeMounts: [{{name: {name}, mountPath: /ok}}]}}]
                "
            ),
        );
        assert_eq!(
            l.diagnostics
                .iter()
                .map(|d| d.message.as_str())
                .collect::<Vec<_>>(),
            [format!(
                "volumeMount name {name} is reserved for decoration"
            )],
        );
    }
    for path in ["/logs", "/home/prow/go", "/tools"] {
        let l = check(
            "",
            &format!(
                "
                periodics:
                - name: p
                  interval: 1h
                  spec:
                    containers: [{{image: alpine, volumeMounts: [{{name: v, mountPath: {path}}}]}}]
                    volumes: [{{name: v, emptyDir: {{}}}}]
                "
            ),
        );
        assert_eq!(
            l.diagnostics
                .iter()
                .map(|d| d.message.as_str())
                .collect::<Vec<_>>(),
            [format!("mount v at {path} conflicts with decoration mount")],
        );
    }
}

/// `decorate.VolumeMounts(dc)` also reserves the OAuth and SSH key secret names.
#[test]
fn decoration_secrets_reserve_volume_names() {
    let l = check(
        DECORATION_DEFAULTS,
        "
        periodics:
        - name: ssh
          interval: 1h
          decorate: true
          decoration_config:
            ssh_key_secrets: [ssh-key]
          spec:
            containers:
            - image: alpine
              command: [make]
              volumeMounts: [{name: ssh-key, mountPath: /ssh}]
            volumes:
            - {name: ssh-key, emptyDir: {}}
        - name: oauth
          interval: 1h
          decorate: true
          decoration_config:
            oauth_token_secret: {name: oauth-token, key: token}
          spec:
            containers: [{image: alpine, command: [make]}]
            volumes:
            - {name: oauth-token, emptyDir: {}}
        - name: undecorated
          interval: 1h
          spec:
            containers: [{image: alpine}]
            volumes:
            - {name: ssh-key, emptyDir: {}}
            - {name: oauth-token, emptyDir: {}}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:13:7: error: job ssh: volume ssh-key is a reserved for decoration"),
            format!(
                "{JOBS}:22:7: error: job oauth: volume oauth-token is a reserved for decoration"
            ),
        ],
    );
}

// --- Labels and annotations.

const QUALIFIED_NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

#[test]
fn labels_and_annotations_fail() {
    let long = "v".repeat(64);
    let l = check(
        "",
        &format!(
            "
            periodics:
            - name: labels
              interval: 1h
              spec: {{containers: [{{image: alpine}}]}}
              labels:
                prow.k8s.io/type: periodic
                created-by-prow: 'true'
                prow.k8s.io/id: x
                bad key: x
                /empty-prefix: x
                dash: -x
                long: {long}
              annotations:
                a/b/c: x
                Example.com/x: y
            "
        ),
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:6:5: error: job labels: label prow.k8s.io/type is reserved for decoration"),
            format!("{JOBS}:7:5: error: job labels: label created-by-prow is reserved for decoration"),
            format!("{JOBS}:8:5: error: job labels: label prow.k8s.io/id is reserved for decoration"),
            format!("{JOBS}:9:5: error: job labels: invalid label bad key: [name part {QUALIFIED_NAME}]"),
            format!("{JOBS}:10:5: error: job labels: invalid label /empty-prefix: [prefix part must be non-empty]"),
            format!("{JOBS}:11:5: error: job labels: label dash has invalid value -x: [{LABEL_VALUE}]"),
            format!("{JOBS}:12:5: error: job labels: label long has invalid value {long}: [must be no more than 63 characters]"),
            format!(r#"{JOBS}:14:5: error: job labels: invalid annotation key "a/b/c": [a qualified name {QUALIFIED_NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')]"#),
            format!(r#"{JOBS}:15:5: error: job labels: invalid annotation key "Example.com/x": [prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]"#),
        ],
    );
}

#[test]
fn labels_and_annotations_pass() {
    let l = check(
        "",
        &format!(
            "
            periodics:
            - name: labels
              interval: 1h
              spec: {{containers: [{{image: alpine}}]}}
              labels:
                preset-service-account: 'true'
                testgrid.k8s.io/dashboard: sig-testing_e2e.x
                empty: ''
                max: {}
              annotations:
                testgrid-dashboards: any value, even with spaces / and slashes
                fork-per-release-periodic-interval: 2h 4h
                example.com/{}: x
            ",
            "v".repeat(63),
            "n".repeat(63),
        ),
    );
    clean(&l);
}

// --- Job queues and rerun authorisation.

#[test]
fn job_queue_name_must_be_a_configured_queue() {
    let l = check(
        "
        plank:
          job_queue_capacities:
            heavy: 2
        ",
        "
        periodics:
        - name: known
          interval: 1h
          job_queue_name: heavy
          spec: {containers: [{image: alpine}]}
        - name: unknown
          interval: 1h
          job_queue_name: light
          spec: {containers: [{image: alpine}]}
        - name: none
          interval: 1h
          job_queue_name: ''
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:8:3: error: job unknown: invalid job queue name light\n  hint: add it to plank.job_queue_capacities"
        )],
    );
}

#[test]
fn rerun_auth_allow_anyone_conflicts_with_users_and_groups() {
    let l = check(
        "",
        "
        periodics:
        - name: users
          interval: 1h
          rerun_auth_config: {allow_anyone: true, github_users: [alice]}
          spec: {containers: [{image: alpine}]}
        - name: team-ids
          interval: 1h
          rerun_auth_config: {allow_anyone: true, github_team_ids: [42]}
          spec: {containers: [{image: alpine}]}
        - name: team-slugs
          interval: 1h
          rerun_auth_config: {allow_anyone: true, github_team_slugs: [{slug: s, org: o}]}
          spec: {containers: [{image: alpine}]}
        - name: orgs
          interval: 1h
          rerun_auth_config: {allow_anyone: true, github_orgs: [o]}
          spec: {containers: [{image: alpine}]}
        - name: anyone
          interval: 1h
          rerun_auth_config: {allow_anyone: true}
          spec: {containers: [{image: alpine}]}
        - name: listed
          interval: 1h
          rerun_auth_config: {github_users: [alice], github_orgs: [o]}
          spec: {containers: [{image: alpine}]}
        ",
    );
    let msg = "allow anyone is set to true and permitted users or groups are specified";
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:3: error: job users: {msg}"),
            format!("{JOBS}:8:3: error: job team-ids: {msg}"),
            format!("{JOBS}:12:3: error: job team-slugs: {msg}"),
            format!("{JOBS}:16:3: error: job orgs: {msg}"),
        ],
    );
}

/// Prow stops validating a job base without containers before the rerun and
/// decoration checks.
#[test]
fn rerun_auth_and_decoration_are_checked_only_with_containers() {
    let l = check(
        "",
        "
        periodics:
        - name: jenkins
          interval: 1h
          agent: jenkins
          rerun_auth_config: {allow_anyone: true, github_users: [alice]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:4:3: warning: job jenkins: {UNSUPPORTED_JENKINS}"
        )],
    );
}

// --- Decoration.

#[test]
fn decoration_config_validation_fails() {
    let l = check(
        KUBERNETES_DEFAULT,
        "
        periodics:
        - name: no-images
          interval: 1h
          decorate: true
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: some-images
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: no-gcs
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: bad-strategy
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: weird}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: no-strategy
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: legacy-needs-org
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: legacy, default_org: o}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: oauth-and-ssh
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: explicit}
            oauth_token_secret: {name: oauth, key: token}
            ssh_key_secrets: [ssh]
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    let strategy = r#"gcs_path_strategy must be one of "legacy", "explicit", or "single""#;
    assert_diags(
        &l,
        &[
            format!("{JOBS}:2:3: error: job no-images: invalid decoration config: utility image config is not specified"),
            format!(r#"{JOBS}:8:3: error: job some-images: invalid decoration config: the following utility images are not specified: ["initupload" "entrypoint" "sidecar"]"#),
            format!("{JOBS}:13:3: error: job no-gcs: invalid decoration config: GCS upload configuration is not specified"),
            format!("{JOBS}:18:3: error: job bad-strategy: invalid decoration config: GCS configuration is invalid: {strategy}"),
            format!("{JOBS}:24:3: error: job no-strategy: invalid decoration config: GCS configuration is invalid: {strategy}"),
            format!(r#"{JOBS}:30:3: error: job legacy-needs-org: invalid decoration config: GCS configuration is invalid: default org and repo must be provided for GCS strategy "legacy""#),
            format!("{JOBS}:36:3: error: job oauth-and-ssh: invalid decoration config: both OAuth token and SSH key secrets are specified"),
        ],
    );
}

#[test]
fn decoration_config_validation_passes() {
    let l = check(
        "",
        "
        periodics:
        - name: legacy
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: legacy, default_org: o, default_repo: r}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: single
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: single, default_org: o, default_repo: r}
            oauth_token_secret: {name: oauth, key: token}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: explicit
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: explicit}
            ssh_key_secrets: [ssh]
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    clean(&l);
}

#[test]
fn decorated_containers_need_command_or_args() {
    let l = check(
        DECORATION_DEFAULTS,
        "
        periodics:
        - name: no-command
          interval: 1h
          decorate: true
          spec:
            containers:
            - image: alpine
        - name: empty-command
          interval: 1h
          decorate: true
          spec:
            containers:
            - {image: alpine, command: [''], args: [x]}
        - name: command-only
          interval: 1h
          decorate: true
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: args-only
          interval: 1h
          decorate: true
          spec: {containers: [{image: alpine, args: [test]}]}
        - name: undecorated-without-command
          interval: 1h
          spec: {containers: [{image: alpine}]}
        ",
    );
    let msg = "decorated job containers must specify command and/or args";
    assert_diags(
        &l,
        &[
            format!("{JOBS}:7:7: error: job no-command: {msg}"),
            format!("{JOBS}:13:7: error: job empty-command: {msg}"),
        ],
    );
}

/// Prow joins `command` and `args` and refuses an empty first element, whichever
/// list it comes from.
#[test]
fn decorated_containers_need_a_non_empty_first_argument() {
    let l = check(
        DECORATION_DEFAULTS,
        "
        periodics:
        - name: empty-arg
          interval: 1h
          decorate: true
          spec:
            containers:
            - {image: alpine, args: ['', x]}
        ",
    );
    assert_diags(
        &l,
        &[format!("{JOBS}:7:7: error: job empty-arg: decorated job containers must specify command and/or args")],
    );
}

/// `decorate: false` with a `decoration_config` is still validated as decorated
/// (Prow keys on `DecorationConfig != nil`).
#[test]
fn explicit_decoration_config_counts_even_when_not_decorated() {
    let l = check(
        KUBERNETES_DEFAULT,
        "
        periodics:
        - name: half
          interval: 1h
          decorate: false
          decoration_config: {timeout: 1h}
          spec:
            containers:
            - image: alpine
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:5:3: error: job half: invalid decoration config: utility image config is not specified"),
            format!("{JOBS}:8:7: error: job half: decorated job containers must specify command and/or args"),
        ],
    );
}

#[test]
fn decorate_all_jobs_decorates_by_default() {
    let config = format!("decorate_all_jobs: true\n{}", y(DECORATION_DEFAULTS));
    let l = check(
        &config,
        "
        periodics:
        - name: decorated-by-default
          interval: 1h
          spec:
            containers:
            - image: alpine
        - name: opted-out
          interval: 1h
          decorate: false
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[format!("{JOBS}:6:7: error: job decorated-by-default: decorated job containers must specify command and/or args")],
    );

    let l = check(
        &config,
        "
        periodics:
        - name: decorated-by-default
          interval: 1h
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: opted-out
          interval: 1h
          decorate: false
          spec: {containers: [{image: alpine}]}
        ",
    );
    let s = clean(&l);
    let on = periodic(s, "decorated-by-default");
    assert_eq!(on.base.decorate, Some(true));
    let dc = decoration(s, on, "").expect("merged defaults");
    let images = dc.utility_images.as_ref().expect("images");
    assert_eq!(images["sidecar"], "sidecar:v1");
    assert_eq!(
        dc.gcs_configuration.as_ref().expect("gcs")["bucket"],
        "artifacts"
    );
    let off = periodic(s, "opted-out");
    assert_eq!(off.base.decorate, Some(false));
    assert_eq!(decoration(s, off, ""), None);
}

#[test]
fn decorate_all_jobs_without_defaults_fails_decoration() {
    let l = check(
        &format!("decorate_all_jobs: true\n{KUBERNETES_DEFAULT}"),
        "
        periodics:
        - name: p
          interval: 1h
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:2:3: error: job p: invalid decoration config: utility image config is not specified"
        )],
    );
}

const ENTRIES: &str = "
    plank:
      default_decoration_config_entries:
      - config:
          gcs_configuration: {bucket: artifacts, path_strategy: explicit}
      - repo: o
        config:
          utility_images: {clonerefs: clonerefs:o, initupload: i, entrypoint: e, sidecar: s}
      - repo: o/special
        cluster: build
        config:
          utility_images: {clonerefs: clonerefs:special}
";

#[test]
fn default_decoration_entries_merge_by_repo_and_cluster() {
    let l = check(
        ENTRIES,
        "
        presubmits:
          o/r:
          - name: org-entry
            decorate: true
            spec: {containers: [{image: alpine, command: [make]}]}
          o/special:
          - name: on-build
            decorate: true
            cluster: build
            spec: {containers: [{image: alpine, command: [make]}]}
          - name: on-default
            decorate: true
            spec: {containers: [{image: alpine, command: [make]}]}
        periodics:
        - name: by-extra-refs
          interval: 1h
          decorate: true
          extra_refs: [{org: o, repo: r}]
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    let s = clean(&l);
    let image = |repo: &str, name: &str| {
        let job = s.presubmits[repo]
            .iter()
            .find(|j| j.name() == name)
            .expect(name);
        decoration(s, job, repo)
            .expect("decorated")
            .utility_images
            .as_ref()
            .expect("images")["clonerefs"]
            .clone()
    };
    assert_eq!(image("o/r", "org-entry"), "clonerefs:o");
    assert_eq!(image("o/special", "on-build"), "clonerefs:special");
    assert_eq!(image("o/special", "on-default"), "clonerefs:o");
    let p = decoration(s, periodic(s, "by-extra-refs"), "o/r");
    assert_eq!(
        p.as_ref()
            .and_then(|d| d.utility_images.as_ref())
            .map(|i| i["sidecar"].as_str()),
        Some("s")
    );
}

#[test]
fn default_decoration_entries_do_not_match_other_repos_and_job_config_wins() {
    let l = check(
        &format!("{KUBERNETES_DEFAULT}{}", y(ENTRIES)),
        "
        presubmits:
          other/r:
          - name: no-entry
            decorate: true
            spec: {containers: [{image: alpine, command: [make]}]}
        postsubmits:
          o/r:
          - name: own-override
            decorate: true
            decoration_config:
              gcs_configuration: {path_strategy: single}
            spec: {containers: [{image: alpine, command: [make]}]}
        periodics:
        - name: no-refs
          interval: 1h
          decorate: true
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:3:5: error: job no-entry: invalid decoration config: utility image config is not specified"),
            format!(r#"{JOBS}:10:5: error: job own-override: invalid decoration config: GCS configuration is invalid: default org and repo must be provided for GCS strategy "single""#),
            format!("{JOBS}:14:3: error: job no-refs: invalid decoration config: utility image config is not specified"),
        ],
    );
}

/// A decorated job with no utility images and no upload configuration: what a
/// job needs on local clusters only.
const BARE_DECORATED: &str = "
    periodics:
    - name: bare
      interval: 1h
      decorate: true
      spec: {containers: [{image: alpine, command: [make]}]}
";

/// bosun's relaxation: a job that can only run on local clusters needs no
/// utility images and no `gcs_configuration` (the implicit local `default`,
/// or clusters of `kind: local`, including their failover targets).
#[test]
fn decoration_on_local_only_clusters_needs_no_images_or_upload() {
    for config in [
        "",
        "build_clusters: {default: {kind: local}}",
        "
        build_clusters:
          default: {kind: local, failover_to: spare}
          spare: {kind: local}
          other: {kind: local}
        scheduler:
          failover: {mappings: {default: other}}
        ",
        // Relocatable, but the inventory is all local.
        "
        build_clusters:
          default: {kind: local}
          other: {kind: local}
        dispatcher: {relocatable_clusters: [default]}
        ",
    ] {
        let config = y(config);
        let l = check(&config, BARE_DECORATED);
        let s = clean(&l);
        let dc = s
            .periodic_decoration(periodic(s, "bare"))
            .expect("decorated");
        assert_eq!(dc, DecorationConfig::default(), "{config}");
    }
}

/// The same job fails with Prow's text as soon as some way leads it to a
/// Kubernetes cluster: its own cluster, a kubeconfig context named `default`, a
/// failover mapping, a `failover_to`, relocation by the dispatcher or an
/// external scheduler.
#[test]
fn decoration_that_can_reach_kubernetes_needs_images_and_upload() {
    let no_images = format!(
        "{JOBS}:2:3: error: job bare: invalid decoration config: utility image config is not specified"
    );
    let cases: &[(&str, &str)] = &[
        (
            "own cluster",
            "build_clusters: {default: {kind: kubernetes}}",
        ),
        (
            "failover mapping",
            "
            build_clusters: {default: {kind: local}, kube: {kind: kubernetes}}
            scheduler: {failover: {mappings: {default: kube}}}
            ",
        ),
        (
            "failover_to",
            "
            build_clusters:
              default: {kind: local, failover_to: kube}
              kube: {kind: kubernetes}
            ",
        ),
        (
            "failover_to after a mapping",
            "
            build_clusters:
              default: {kind: local}
              spare: {kind: local, failover_to: kube}
              kube: {kind: kubernetes}
            scheduler: {failover: {mappings: {default: spare}}}
            ",
        ),
        (
            "dispatcher, cluster not written",
            "
            build_clusters: {default: {kind: local}, kube: {kind: kubernetes}}
            dispatcher: {}
            ",
        ),
        (
            "external scheduler",
            "
            build_clusters: {default: {kind: local}, kube: {kind: kubernetes}}
            scheduler: {enabled: true, external: {url: 'http://dispatcher:8080'}}
            ",
        ),
    ];
    for (why, config) in cases {
        let l = check(config, BARE_DECORATED);
        let got: Vec<String> = l.diagnostics.iter().map(ToString::to_string).collect();
        assert_eq!(got, std::slice::from_ref(&no_images), "{why}");
    }

    // A kubeconfig context named `default` makes `default` a Kubernetes cluster.
    let l = load_files(
        &[(CONFIG, ""), (JOBS, BARE_DECORATED)],
        &LoadOptions {
            kubeconfig_clusters: vec!["default".into()],
            ..options()
        },
    );
    assert_diags(&l, &[&no_images]);

    // An unknown cluster is not known to be local: Prow's rules apply.
    let l = check(
        "build_clusters: {build: {kind: local}}",
        "
        periodics:
        - name: bare
          interval: 1h
          decorate: true
          cluster: elsewhere
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    assert_diags(
        &l,
        &[
            no_images.clone(),
            format!("{JOBS}:5:3: error: job bare: job configuration for \"bare\" specifies unknown 'cluster' value \"elsewhere\"\n  hint: known clusters: default, build"),
        ],
    );
}

/// Relocation only counts where bosun would move the job: a pinned job (its
/// written cluster is not relocatable) stays local, and a trusted Kubernetes
/// cluster that does not admit the job is never a destination.
#[test]
fn decoration_relaxation_follows_pins_and_trusted_clusters() {
    let pinned = "
        build_clusters: {default: {kind: local}, kube: {kind: kubernetes}}
        dispatcher: {relocatable_clusters: [kube]}
    ";
    let l = check(
        pinned,
        "
        periodics:
        - name: bare
          interval: 1h
          decorate: true
          cluster: default
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    clean(&l);
    let trusted = "
        build_clusters:
          default: {kind: local, failover_to: kube}
          kube:
            kind: kubernetes
            trusted: [{jobs: [release-.*]}]
        dispatcher: {}
    ";
    clean(&check(trusted, BARE_DECORATED));
    let l = check(
        trusted,
        "
        periodics:
        - name: release-bare
          interval: 1h
          decorate: true
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    assert_diags(
        &l,
        &[format!("{JOBS}:2:3: error: job release-bare: invalid decoration config: utility image config is not specified")],
    );
}

/// On local-only clusters what is written is still checked: a written upload
/// configuration must be valid, and OAuth and SSH keys still exclude each other.
#[test]
fn decoration_relaxation_still_checks_what_is_written() {
    let l = check(
        "",
        "
        periodics:
        - name: bad-gcs
          interval: 1h
          decorate: true
          decoration_config:
            gcs_configuration: {bucket: b, path_strategy: weird}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: oauth-and-ssh
          interval: 1h
          decorate: true
          decoration_config:
            oauth_token_secret: {name: oauth, key: token}
            ssh_key_secrets: [ssh]
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: some-images
          interval: 1h
          decorate: true
          decoration_config:
            utility_images: {clonerefs: c}
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(r#"{JOBS}:5:3: error: job bad-gcs: invalid decoration config: GCS configuration is invalid: gcs_path_strategy must be one of "legacy", "explicit", or "single""#),
            format!("{JOBS}:11:3: error: job oauth-and-ssh: invalid decoration config: both OAuth token and SSH key secrets are specified"),
            format!("{JOBS}:20:23: error: job some-images: decorated job containers must specify command and/or args"),
        ],
    );
}

/// Prow's remaining `GCSConfiguration.Validate` checks: the bucket must parse
/// as a URL and every media type must parse (Go's `mime` texts).
#[test]
fn gcs_bucket_and_media_types_are_validated() {
    let l = check(
        KUBERNETES_DEFAULT,
        "
        periodics:
        - name: bad-bucket
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: 'my bucket', path_strategy: explicit}
          spec: {containers: [{image: alpine, command: [make]}]}
        - name: bad-media-type
          interval: 1h
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration:
              bucket: s3://b
              path_strategy: explicit
              mediaTypes: {log: text/plain, md: text, txt: 'text/'}
          spec: {containers: [{image: alpine, command: [make]}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:4:3: error: job bad-bucket: invalid decoration config: GCS configuration is invalid: path "gs://my bucket" has invalid format, expected either <bucket-name>[/<path>] or <storage-provider>://<bucket-name>[/<path>]"#
            ),
            format!(
                r#"{JOBS}:10:3: error: job bad-media-type: invalid decoration config: GCS configuration is invalid: invalid extension media type "text/": mime: expected token after slash"#
            ),
        ],
    );
}

/// Prow's older `plank.default_decoration_configs` map and the entries may not
/// both be set.
#[test]
fn legacy_decoration_map_and_entries_are_mutually_exclusive() {
    let l = check(
        "
        plank:
          default_decoration_configs:
            '*': {timeout: 1h}
          default_decoration_config_entries:
          - config: {timeout: 2h}
        ",
        "",
    );
    assert_diags(
        &l,
        &[format!("{CONFIG}:2:3: error: plank.default_decoration_configs and plank.default_decoration_config_entries are mutually exclusive, please use one or the other")],
    );
}

/// Prow's `github_reporter.job_types_to_report`: unset or empty means
/// presubmits and postsubmits; only those two may be listed
/// (`validateGitHubReporter`'s "invalid job_types_to_report").
#[test]
fn github_reporter_job_types_default_and_allowed() {
    use bosun_config::types::JobType;
    let s = snapshot(&check("", "")).config.github_reporter.clone();
    assert_eq!(
        s.job_types_to_report,
        [JobType::Presubmit, JobType::Postsubmit]
    );
    let l = check("github_reporter: {job_types_to_report: []}", "");
    assert_eq!(
        clean(&l).config.github_reporter.job_types_to_report,
        [JobType::Presubmit, JobType::Postsubmit]
    );
    let l = check(
        "
        github_reporter:
          job_types_to_report: [presubmit]
          no_comment_repos: [org-a, org-b/repo]
          summary_comment_repos: [org-c]
        ",
        "",
    );
    let r = &clean(&l).config.github_reporter;
    assert_eq!(r.job_types_to_report, [JobType::Presubmit]);
    assert_eq!(r.no_comment_repos, ["org-a", "org-b/repo"]);
    assert_eq!(r.summary_comment_repos, ["org-c"]);
    let l = check(
        "
        github_reporter:
          job_types_to_report:
          - presubmit
          - periodic
        ",
        "",
    );
    assert_diags(
        &l,
        &[format!("{CONFIG}:4:5: error: github_reporter.job_types_to_report[1]: invalid job_types_to_report: periodic\n  hint: only presubmit and postsubmit runs are reported to the forge")],
    );
}

/// `plank.report_templates` by `*`, `org`, `org/repo` (Prow's
/// `ReportTemplateForRepo`); the deprecated `report_template` is `*`, and
/// not both (Prow: "both report_template and report_templates are
/// specified").
#[test]
fn report_templates_by_repo_org_or_star() {
    let l = check(
        "
        plank:
          report_templates:
            '*': star
            org: by-org
            org/repo: by-repo
        ",
        "",
    );
    let p = &clean(&l).config.plank;
    assert_eq!(p.report_template_for("org", "repo"), Some("by-repo"));
    assert_eq!(p.report_template_for("org", "other"), Some("by-org"));
    assert_eq!(p.report_template_for("else", "repo"), Some("star"));
    let l = check("plank: {report_templates: {org: x}}", "");
    assert_eq!(
        clean(&l).config.plank.report_template_for("else", "r"),
        None
    );
    let l = check("plank: {report_template: old}", "");
    assert_eq!(
        clean(&l).config.plank.report_template_for("a", "b"),
        Some("old")
    );
    let l = check(
        "
        plank:
          report_templates: {'*': new}
          report_template: old
        ",
        "",
    );
    assert_diags(
        &l,
        &[format!("{CONFIG}:3:3: error: plank.report_template: both report_template and report_templates are specified\n  hint: move the template to plank.report_templates under \"*\"")],
    );
}

// --- Presets.

#[test]
fn presets_merge_into_matching_jobs_only() {
    let l = check(
        "
        presets:
        - labels: {preset-config: 'true'}
          env: [{name: FROM_CONFIG, value: x}]
        ",
        "
        presets:
        - labels: {preset-a: 'true'}
          env: [{name: A, value: '1'}]
          volumes: [{name: pv, emptyDir: {}}]
          volumeMounts: [{name: pv, mountPath: /p}]
        - labels: {preset-b: 'true', preset-c: 'true'}
          env: [{name: BC, value: '2'}]
        - env: [{name: ALL, value: '3'}]
        periodics:
        - name: with-a
          interval: 1h
          labels: {preset-a: 'true'}
          spec: {containers: [{image: alpine}]}
        - name: with-b-and-c
          interval: 1h
          labels: {preset-b: 'true', preset-c: 'true', preset-config: 'true'}
          spec: {containers: [{image: alpine}]}
        - name: with-b-only
          interval: 1h
          labels: {preset-b: 'true'}
          spec: {containers: [{image: alpine}]}
        - name: with-a-false
          interval: 1h
          labels: {preset-a: 'false'}
          spec: {containers: [{image: alpine}]}
        - name: decorated
          interval: 1h
          labels: {preset-a: 'true'}
          decoration_config:
            utility_images: {clonerefs: c, initupload: i, entrypoint: e, sidecar: s}
            gcs_configuration: {bucket: b, path_strategy: explicit}
          spec:
            containers:
            - {name: one, image: alpine, command: [make]}
            - {name: two, image: alpine, command: [make]}
        presubmits:
          o/r:
          - name: pre-with-a
            labels: {preset-a: 'true'}
            spec: {containers: [{image: alpine}]}
        ",
    );
    let s = clean(&l);
    let spec = |name: &str| pod_spec(s, periodic(s, name));
    assert_eq!(env_names(&spec("with-a"), 0), ["A", "ALL"]);
    assert_eq!(
        env_names(&spec("with-b-and-c"), 0),
        ["FROM_CONFIG", "BC", "ALL"]
    );
    assert_eq!(env_names(&spec("with-b-only"), 0), ["ALL"]);
    assert_eq!(env_names(&spec("with-a-false"), 0), ["ALL"]);
    assert_eq!(env_names(&spec("decorated"), 0), ["A", "ALL"]);
    assert_eq!(env_names(&spec("decorated"), 1), ["A", "ALL"]);
    let pre = pod_spec(s, &s.presubmits["o/r"][0]);
    assert_eq!(env_names(&pre, 0), ["A", "ALL"]);

    let with_a = spec("with-a");
    let volumes: Vec<&str> = with_a
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["pv"]);
    let mounts: Vec<(&str, &str)> = with_a.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    assert_eq!(mounts, [("pv", "/p")]);
    for c in &spec("decorated").containers {
        assert_eq!(c.volume_mounts.as_ref().map(Vec::len), Some(1));
    }

    let without = spec("with-a-false");
    assert_eq!(without.volumes, None);
    assert_eq!(without.containers[0].volume_mounts, None);
}

#[test]
fn presets_must_not_duplicate_the_pod_spec() {
    let l = check(
        "",
        "
        presets:
        - labels: {preset-a: 'true'}
          env: [{name: A, value: '1'}]
        - labels: {preset-v: 'true'}
          volumes: [{name: v, emptyDir: {}}]
        - labels: {preset-m: 'true'}
          volumeMounts: [{name: m, mountPath: /m}]
        periodics:
        - name: env-dup
          interval: 1h
          labels: {preset-a: 'true'}
          spec:
            containers:
            - image: alpine
              env: [{name: A, value: mine}]
        - name: vol-dup
          interval: 1h
          labels: {preset-v: 'true'}
          spec:
            containers: [{image: alpine}]
            volumes: [{name: v, emptyDir: {}}]
        - name: mount-dup
          interval: 1h
          labels: {preset-m: 'true'}
          spec:
            containers: [{image: alpine, volumeMounts: [{name: m, mountPath: /other}]}]
            volumes: [{name: m, emptyDir: {}}]
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:11:3: error: job env-dup: failed to merge presets for podspec: env var duplicated in pod spec: A\n  hint: the preset at {JOBS}:2:3 adds it"),
            format!("{JOBS}:18:3: error: job vol-dup: failed to merge presets for podspec: volume duplicated in pod spec: v\n  hint: the preset at {JOBS}:4:3 adds it"),
            format!("{JOBS}:24:3: error: job mount-dup: failed to merge presets for podspec: volume mount duplicated in pod spec: m\n  hint: the preset at {JOBS}:6:3 adds it"),
        ],
    );
}

const TOLERATION_PRESET: &str = "
    presets:
    - labels: {preset-t: 'true'}
      tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
";

/// Prow's presets also add tolerations (pod level).
#[test]
fn preset_tolerations_are_merged() {
    let jobs = format!(
        "{}{}",
        y(TOLERATION_PRESET),
        y("
            periodics:
            - name: tolerated
              interval: 1h
              labels: {preset-t: 'true'}
              spec:
                containers: [{image: alpine}]
                tolerations: [{key: other, operator: Exists}]
            - name: untouched
              interval: 1h
              spec: {containers: [{image: alpine}]}
            ")
    );
    let l = check("", &jobs);
    let s = clean(&l);
    let keys = |name: &str| -> Vec<String> {
        pod_spec(s, periodic(s, name))
            .tolerations
            .iter()
            .flatten()
            .map(|t| t.key.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(keys("tolerated"), ["other", "dedicated"]);
    assert_eq!(keys("untouched"), Vec::<String>::new());
}

/// Prow's `mergePreset` refuses a toleration the pod spec already has
/// (`toleration duplicated in pod spec: %v`, a Go struct rendering, so only the
/// prefix is compared).
#[test]
fn preset_duplicate_toleration_is_an_error() {
    let jobs = format!(
        "{}{}",
        y(TOLERATION_PRESET),
        y("
            periodics:
            - name: dup
              interval: 1h
              labels: {preset-t: 'true'}
              spec:
                containers: [{image: alpine}]
                tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
            ")
    );
    let l = check("", &jobs);
    assert!(l.snapshot.is_none());
    let [d] = l.diagnostics.as_slice() else {
        panic!("{:#?}", l.diagnostics)
    };
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.job.as_deref(), Some("dup"));
    assert_eq!(d.mark.map(|m| (m.line, m.col)), Some((7, 3)));
    assert!(
        d.message.starts_with(
            "failed to merge presets for podspec: toleration duplicated in pod spec: "
        ),
        "{}",
        d.message
    );
    assert_eq!(
        d.hint.as_deref(),
        Some(format!("the preset at {JOBS}:2:3 adds it").as_str())
    );
}

/// Presets are merged before the pod spec is validated, so what they add is checked.
#[test]
fn preset_env_is_validated_like_the_job_own() {
    let l = check(
        "",
        "
        presets:
        - env: [{name: JOB_NAME, value: x}]
        periodics:
        - name: p
          interval: 1h
          spec:
            containers:
            - image: alpine
        ",
    );
    assert_diags(
        &l,
        &[format!(
            "{JOBS}:8:7: error: job p: env JOB_NAME is reserved"
        )],
    );
}

#[test]
fn preset_label_value_pairs_must_be_unique() {
    let l = check(
        "
        presets:
        - labels: {shared: 'yes'}
        ",
        "
        presets:
        - labels: {a: '1'}
        - labels: {a: '2'}
        - labels: {b: '2', a: '1'}
        - labels: {shared: 'yes'}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:20: error: duplicated preset 'label:value' pair : a:1\n  hint: also used by the preset at {JOBS}:2:3"),
            format!("{JOBS}:5:12: error: duplicated preset 'label:value' pair : shared:yes\n  hint: also used by the preset at {CONFIG}:2:3"),
        ],
    );
}

// --- Periodics.

#[test]
fn duplicate_periodics() {
    let l = check(
        "
        periodics:
        - name: both-files
          interval: 1h
          spec: {containers: [{image: alpine}]}
        ",
        "
        periodics:
        - name: p
          interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: p
          cron: '0 * * * *'
          spec: {containers: [{image: alpine}]}
        - name: both-files
          interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: q
          interval: 1h
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:5:3: error: job p: duplicated periodic job: p\n  hint: first defined at {JOBS}:2:3"),
            format!("{JOBS}:8:3: error: job both-files: duplicated periodic job: both-files\n  hint: first defined at {CONFIG}:2:3"),
        ],
    );
}

#[test]
fn periodic_schedules_are_exclusive_and_required() {
    let l = check(
        "",
        "
        periodics:
        - name: cron-and-interval
          cron: '0 * * * *'
          interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: interval-and-minimum
          interval: 1h
          minimum_interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: no-schedule
          spec: {containers: [{image: alpine}]}
        - name: cron
          cron: '0 * * * *'
          spec: {containers: [{image: alpine}]}
        - name: interval
          interval: 1h
          cron: ''
          spec: {containers: [{image: alpine}]}
        - name: minimum-interval
          minimum_interval: 1h30m
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:3:3: error: job cron-and-interval: cron, interval, and minimum_interval are mutually exclusive in periodic cron-and-interval"),
            format!("{JOBS}:6:3: error: job interval-and-minimum: cron, interval, and minimum_interval are mutually exclusive in periodic interval-and-minimum"),
            format!("{JOBS}:10:3: error: job no-schedule: at least one of cron, interval, or minimum_interval must be set in periodic no-schedule\n  hint: add e.g. `interval: 1h` or `cron: \"0 * * * *\"`"),
        ],
    );
}

#[test]
fn periodic_durations_are_go_durations() {
    let l = check(
        "",
        "
        periodics:
        - name: interval-days
          interval: 1d
          spec: {containers: [{image: alpine}]}
        - name: minimum-days
          minimum_interval: 2d
          spec: {containers: [{image: alpine}]}
        - name: retry-days
          interval: 1h
          retry:
            attempts: 2
            interval: 1d
          spec: {containers: [{image: alpine}]}
        - name: missing-unit
          interval: '7'
          spec: {containers: [{image: alpine}]}
        - name: good
          interval: 1h30m
          retry: {attempts: 3, interval: 10m}
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:3:3: error: job interval-days: cannot parse duration for interval-days: time: unknown unit "d" in duration "1d"{DURATION_HINT}"#
            ),
            format!(
                r#"{JOBS}:6:3: error: job minimum-days: cannot parse duration for minimum-days: time: unknown unit "d" in duration "2d"{DURATION_HINT}"#
            ),
            format!(
                r#"{JOBS}:12:5: error: job retry-days: cannot parse Retry duration for retry-days: time: unknown unit "d" in duration "1d"{DURATION_HINT}"#
            ),
            format!(
                r#"{JOBS}:15:3: error: job missing-unit: cannot parse duration for missing-unit: time: missing unit in duration "7"{DURATION_HINT}"#
            ),
        ],
    );
}

#[test]
fn retry_attempts_are_non_negative_and_capped() {
    let l = check(
        "",
        "
        periodics:
        - name: negative
          interval: 1h
          retry: {attempts: -1}
          spec: {containers: [{image: alpine}]}
        - name: too-many
          interval: 1h
          retry:
            attempts: 11
          spec: {containers: [{image: alpine}]}
        - name: ten
          interval: 1h
          retry: {attempts: 10, run_all: true}
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                "{JOBS}:4:11: error: job negative: retry.attempts -1 must be a non-negative number"
            ),
            format!("{JOBS}:9:5: warning: job too-many: retry.attempts 11 is capped at 10"),
        ],
    );
}

#[test]
fn bosun_periodic_durations() {
    let l = check(
        "",
        "
        periodics:
        - name: deadline-days
          interval: 1h
          starting_deadline: 1d
          spec: {containers: [{image: alpine}]}
        - name: deadline-negative
          interval: 1h
          starting_deadline: -1m
          spec: {containers: [{image: alpine}]}
        - name: jitter-word
          interval: 1h
          jitter: soon
          spec: {containers: [{image: alpine}]}
        - name: jitter-negative
          interval: 1h
          jitter: -5m
          spec: {containers: [{image: alpine}]}
        - name: good
          cron: '0 * * * *'
          timezone: Europe/Berlin
          starting_deadline: 10m
          jitter: 30s
          concurrency_policy: queue_one
          catch_up: skip
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:4:3: error: job deadline-days: starting_deadline: time: unknown unit "d" in duration "1d"{DURATION_HINT}"#
            ),
            format!(
                "{JOBS}:8:3: error: job deadline-negative: starting_deadline: must not be negative"
            ),
            format!(
                r#"{JOBS}:12:3: error: job jitter-word: jitter: time: invalid duration "soon"{DURATION_HINT}"#
            ),
            format!("{JOBS}:16:3: error: job jitter-negative: jitter: must not be negative"),
        ],
    );
}

#[test]
fn bosun_periodic_enums_are_checked_when_read() {
    let l = check(
        "",
        "
        periodics:
        - name: policy
          interval: 1h
          concurrency_policy: sometimes
          spec: {containers: [{image: alpine}]}
        - name: catch-up
          interval: 1h
          catch_up: all
          spec: {containers: [{image: alpine}]}
        - name: fine
          interval: 1h
          concurrency_policy: replace
          catch_up: latest
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:23: error: job policy: unknown variant `sometimes`, expected one of `forbid`, `allow`, `replace`, `queue_one`"),
            format!("{JOBS}:8:13: error: job catch-up: unknown variant `all`, expected `latest` or `skip`"),
        ],
    );
}

#[test]
fn periodic_top_level_clone_config_warns() {
    let l = check(
        "",
        "
        periodics:
        - name: clone-depth
          interval: 1h
          clone_depth: 1
          spec: {containers: [{image: alpine}]}
        - name: clone-uri
          interval: 1h
          clone_uri: https://example.com/o/r.git
          spec: {containers: [{image: alpine}]}
        - name: path-alias
          interval: 1h
          path_alias: k8s.io/test-infra
          spec: {containers: [{image: alpine}]}
        - name: on-refs
          interval: 1h
          extra_refs: [{org: o, repo: r, clone_depth: 1, path_alias: k8s.io/x}]
          spec: {containers: [{image: alpine}]}
        presubmits:
          o/r:
          - name: presubmit
            clone_depth: 1
            path_alias: k8s.io/x
            spec: {containers: [{image: alpine}]}
        ",
    );
    let msg = |name: &str| {
        format!("periodic jobs might clone 0, 1, or more repos, top level `clone_depth`, `clone_uri`, and `path_alias` don't have any effect. Name: {name:?}")
    };
    assert_diags(
        &l,
        &[
            format!(
                "{JOBS}:2:3: warning: job clone-depth: {}",
                msg("clone-depth")
            ),
            format!("{JOBS}:6:3: warning: job clone-uri: {}", msg("clone-uri")),
            format!(
                "{JOBS}:10:3: warning: job path-alias: {}",
                msg("path-alias")
            ),
        ],
    );
}

/// The schedule engine's problems are reported at the field it names, and only for
/// periodics with exactly one schedule.
#[test]
fn schedule_check_problems_are_reported() {
    struct Checker;
    impl ScheduleCheck for Checker {
        fn check(&self, p: &Periodic) -> Vec<ScheduleProblem> {
            let mut out = Vec::new();
            if p.kind.cron.as_deref() == Some("bad") {
                out.push(ScheduleProblem {
                    severity: Severity::Error,
                    field: "cron",
                    message: format!("invalid cron string bad in periodic {}", p.name()),
                    hint: Some("five fields".into()),
                });
            }
            if p.kind.timezone.is_some() {
                out.push(ScheduleProblem {
                    severity: Severity::Warning,
                    field: "timezone",
                    message: "zone".into(),
                    hint: None,
                });
            }
            out
        }
    }
    let opts = LoadOptions {
        schedule_check: Some(Arc::new(Checker)),
        ..options()
    };
    let l = load_files(
        &[
            (CONFIG, ""),
            (
                JOBS,
                "
                periodics:
                - name: bad-cron
                  cron: bad
                  spec: {containers: [{image: alpine}]}
                - name: zoned
                  interval: 1h
                  timezone: Mars/Olympus
                  spec: {containers: [{image: alpine}]}
                - name: two-schedules
                  cron: bad
                  interval: 1h
                  spec: {containers: [{image: alpine}]}
                ",
            ),
        ],
        &opts,
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:3:3: error: job bad-cron: invalid cron string bad in periodic bad-cron\n  hint: five fields"),
            format!("{JOBS}:7:3: warning: job zoned: zone"),
            format!("{JOBS}:10:3: error: job two-schedules: cron, interval, and minimum_interval are mutually exclusive in periodic two-schedules"),
        ],
    );
}

// --- Presubmits.

#[test]
fn duplicate_presubmits_with_intersecting_branches() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: dup
            spec: {containers: [{image: alpine}]}
          - name: dup
            spec: {containers: [{image: alpine}]}
          - name: release
            branches: [release-1.0]
            spec: {containers: [{image: alpine}]}
          - name: release
            skip_branches: [main]
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:5:5: error: job dup: duplicated presubmit jobs (consider both inrepo and central config): [dup]\n  hint: also defined at {JOBS}:3:5 for intersecting branches"),
            format!("{JOBS}:10:5: error: job release: duplicated presubmit jobs (consider both inrepo and central config): [release]\n  hint: also defined at {JOBS}:7:5 for intersecting branches"),
        ],
    );
}

#[test]
fn same_name_presubmits_on_disjoint_branches_or_repos_pass() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: by-branch
            branches: [main]
            spec: {containers: [{image: alpine}]}
          - name: by-branch
            branches: [release]
            spec: {containers: [{image: alpine}]}
          - name: by-branch
            branches: ['^main$']
            spec: {containers: [{image: alpine}]}
          - name: skipping
            skip_branches: [main]
            spec: {containers: [{image: alpine}]}
          - name: skipping
            branches: [main]
            spec: {containers: [{image: alpine}]}
          - name: both-kinds
            spec: {containers: [{image: alpine}]}
          o/other:
          - name: by-branch
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: both-kinds
            spec: {containers: [{image: alpine}]}
        ",
    );
    let s = clean(&l);
    assert_eq!(s.presubmits["o/r"].len(), 6);
}

#[test]
fn shared_context_with_intersecting_branches() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: a
            context: ci/test
            branches: [main]
            spec: {containers: [{image: alpine}]}
          - name: b
            context: ci/test
            branches: [main]
            spec: {containers: [{image: alpine}]}
          - name: c
            context: ci/test
            branches: [release]
            spec: {containers: [{image: alpine}]}
          - name: d
            spec: {containers: [{image: alpine}]}
          - name: e
            context: d
            branches: [main]
            spec: {containers: [{image: alpine}]}
          o/other:
          - name: f
            context: ci/test
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: g
            context: ci/test
            spec: {containers: [{image: alpine}]}
          - name: h
            context: ci/test
            skip_branches: [release]
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:4:5: error: job a: jobs b and a report to the same GitHub context "ci/test""#
            ),
            format!(
                r#"{JOBS}:8:5: error: job b: jobs a and b report to the same GitHub context "ci/test""#
            ),
            format!(
                r#"{JOBS}:15:5: error: job d: jobs e and d report to the same GitHub context "d""#
            ),
            format!(
                r#"{JOBS}:18:5: error: job e: jobs d and e report to the same GitHub context "d""#
            ),
            format!(
                r#"{JOBS}:28:5: error: job g: jobs h and g report to the same GitHub context "ci/test""#
            ),
            format!(
                r#"{JOBS}:31:5: error: job h: jobs g and h report to the same GitHub context "ci/test""#
            ),
        ],
    );
}

#[test]
fn presubmit_triggering_is_exclusive() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: always-and-changed
            always_run: true
            run_if_changed: '^src/'
            spec: {containers: [{image: alpine}]}
          - name: always-and-skip
            always_run: true
            skip_if_only_changed: '^docs/'
            spec: {containers: [{image: alpine}]}
          - name: changed-and-skip
            run_if_changed: '^src/'
            skip_if_only_changed: '^docs/'
            spec: {containers: [{image: alpine}]}
          - name: always
            always_run: true
            run_if_changed: ''
            spec: {containers: [{image: alpine}]}
          - name: not-always-but-changed
            always_run: false
            run_if_changed: '^src/'
            spec: {containers: [{image: alpine}]}
          - name: skip-only
            skip_if_only_changed: '\\.md$'
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:5: error: job always-and-changed: job always-and-changed is set to always run but also declares run_if_changed targets, which are mutually exclusive"),
            format!("{JOBS}:8:5: error: job always-and-skip: job always-and-skip is set to always run but also declares skip_if_only_changed targets, which are mutually exclusive"),
            format!("{JOBS}:11:5: error: job changed-and-skip: job changed-and-skip declares run_if_changed and skip_if_only_changed, which are mutually exclusive"),
        ],
    );
}

#[test]
fn presubmit_trigger_and_rerun_command() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: trigger-only
            trigger: '.*'
            spec: {containers: [{image: alpine}]}
          - name: rerun-only
            rerun_command: /test rerun-only
            spec: {containers: [{image: alpine}]}
          - name: mismatch
            trigger: '(?m)^/run mismatch$'
            rerun_command: /test mismatch
            spec: {containers: [{image: alpine}]}
          - name: bad-trigger
            trigger: '('
            rerun_command: /x
            spec: {containers: [{image: alpine}]}
          - name: custom
            trigger: '(?m)^/run-e2e( |$)'
            rerun_command: /run-e2e
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(r#"{JOBS}:4:5: error: job trigger-only: either both of job.Trigger and job.RerunCommand must be set, wasnt the case for job "trigger-only""#),
            format!(r#"{JOBS}:6:5: error: job rerun-only: either both of job.Trigger and job.RerunCommand must be set, wasnt the case for job "rerun-only""#),
            format!(r#"{JOBS}:11:5: error: job mismatch: for job mismatch, rerun command "/test mismatch" does not match trigger "(?m)^/run mismatch$""#),
            format!("{JOBS}:14:5: error: job bad-trigger: could not compile trigger regex for bad-trigger: unclosed group"),
        ],
    );
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: custom
            trigger: '(?m)^/run-e2e( |$)'
            rerun_command: /run-e2e
            spec: {containers: [{image: alpine}]}
        ",
    );
    let s = clean(&l);
    let k = &s.presubmits["o/r"][0].kind;
    assert_eq!(k.trigger, "(?m)^/run-e2e( |$)");
    assert_eq!(k.rerun_command, "/run-e2e");
}

const BAD_REGEXES: &str = "
        presubmits:
          o/r:
          - name: branches
            branches: ['(']
            spec: {containers: [{image: alpine}]}
          - name: skip-branches
            skip_branches: ['[']
            spec: {containers: [{image: alpine}]}
          - name: run-if-changed
            run_if_changed: '('
            spec: {containers: [{image: alpine}]}
          - name: skip-if-only-changed
            skip_if_only_changed: '('
            spec: {containers: [{image: alpine}]}
          - name: good
            branches: ['^main$', '^release-\\d+\\.\\d+$']
            skip_branches: [wip]
            run_if_changed: '^(src|test)/.*\\.go$'
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: post-branches
            branches: ['(']
            spec: {containers: [{image: alpine}]}
          - name: post-run-if-changed
            run_if_changed: '('
            spec: {containers: [{image: alpine}]}
        ";

/// The diagnostics for [`BAD_REGEXES`]; the text after `regex: ` is the regex
/// parser's own (Go's reads differently: `missing closing )`).
fn bad_regex_diagnostics() -> Vec<String> {
    vec![
        format!("{JOBS}:4:5: error: job branches: could not set branch regexes for branches: could not compile positive branch regex: unclosed group"),
        format!("{JOBS}:7:5: error: job skip-branches: could not set branch regexes for skip-branches: could not compile negative branch regex: unclosed character class"),
        format!("{JOBS}:10:5: error: job run-if-changed: could not set change regexes for run-if-changed: could not compile run_if_changed regex: unclosed group"),
        format!("{JOBS}:13:5: error: job skip-if-only-changed: could not set change regexes for skip-if-only-changed: could not compile skip_if_only_changed regex: unclosed group"),
        format!("{JOBS}:23:5: error: job post-branches: could not set branch regexes for post-branches: could not compile positive branch regex: unclosed group"),
        format!("{JOBS}:26:5: error: job post-run-if-changed: could not set change regexes for post-run-if-changed: could not compile run_if_changed regex: unclosed group"),
    ]
}

#[test]
fn presubmit_branch_and_change_regexes() {
    let l = check("", BAD_REGEXES);
    let cut = |s: &str| -> String {
        let (head, detail) = s.rsplit_once("regex: ").expect("a regex error");
        assert!(!detail.is_empty(), "{s}");
        format!("{head}regex: ")
    };
    let got: Vec<String> = l.diagnostics.iter().map(|d| cut(&d.to_string())).collect();
    let want: Vec<String> = bad_regex_diagnostics().iter().map(|s| cut(s)).collect();
    assert_eq!(got, want);
    assert!(l.snapshot.is_none());
}

/// The parser's message is given without its own `error:` prefix, as for
/// trigger regexes (`could not compile trigger regex for X: unclosed group`);
/// otherwise the rendering reads `error: ... regex: error: unclosed group`.
#[test]
fn regex_errors_have_no_error_prefix() {
    assert_diags(&check("", BAD_REGEXES), &bad_regex_diagnostics());
}

/// `skip_report: false` with an empty context cannot happen (the context defaults
/// to the name), so Prow's other reporting rule is the one to test.
#[test]
fn gerrit_report_label_needs_reporting() {
    let l = check(
        "",
        "
        presubmits:
          o/r:
          - name: skip-with-label
            skip_report: true
            labels: {prow.k8s.io/gerrit-report-label: Verified}
            spec: {containers: [{image: alpine}]}
          - name: report-with-label
            labels: {prow.k8s.io/gerrit-report-label: Verified}
            spec: {containers: [{image: alpine}]}
          - name: skip-with-empty-label
            skip_report: true
            labels: {prow.k8s.io/gerrit-report-label: ''}
            spec: {containers: [{image: alpine}]}
          - name: empty-context
            context: ''
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: post-skip-with-label
            skip_report: true
            labels: {prow.k8s.io/gerrit-report-label: Verified}
            spec: {containers: [{image: alpine}]}
        ",
    );
    let msg = "gerrit report label prow.k8s.io/gerrit-report-label set to non-empty string but job is configured to skip reporting.";
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:5: error: job skip-with-label: {msg}"),
            format!("{JOBS}:20:5: error: job post-skip-with-label: {msg}"),
        ],
    );
}

// --- Postsubmits.

#[test]
fn postsubmit_duplicates_and_triggering() {
    let l = check(
        "",
        "
        postsubmits:
          o/r:
          - name: dup
            spec: {containers: [{image: alpine}]}
          - name: dup
            spec: {containers: [{image: alpine}]}
          - name: always-and-changed
            always_run: true
            run_if_changed: '^src/'
            spec: {containers: [{image: alpine}]}
          - name: always-and-skip
            always_run: true
            skip_if_only_changed: '^docs/'
            spec: {containers: [{image: alpine}]}
          - name: changed-and-skip
            run_if_changed: '^src/'
            skip_if_only_changed: '^docs/'
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{JOBS}:5:5: error: job dup: duplicated postsubmit jobs (consider both inrepo and central config): [dup]\n  hint: also defined at {JOBS}:3:5 for intersecting branches"),
            format!("{JOBS}:8:5: error: job always-and-changed: job always-and-changed is set to always run but also declares run_if_changed targets, which are mutually exclusive"),
            format!("{JOBS}:12:5: error: job always-and-skip: job always-and-skip is set to always run but also declares skip_if_only_changed targets, which are mutually exclusive"),
            format!("{JOBS}:15:5: error: job changed-and-skip: job changed-and-skip declares run_if_changed and skip_if_only_changed, which are mutually exclusive"),
        ],
    );
}

/// A postsubmit's `always_run` is Prow's `*bool`: unset means "run always" unless
/// `run_if_changed`/`skip_if_only_changed` decide, so leaving it unset never
/// conflicts with them.
#[test]
fn postsubmit_always_run_defaults_to_true_without_conflict() {
    let l = check(
        "",
        "
        postsubmits:
          o/r:
          - name: unset-with-changes
            run_if_changed: '^src/'
            spec: {containers: [{image: alpine}]}
          - name: unset-with-skip
            skip_if_only_changed: '^docs/'
            spec: {containers: [{image: alpine}]}
          - name: false-with-changes
            always_run: false
            run_if_changed: '^src/'
            spec: {containers: [{image: alpine}]}
          - name: plain
            spec: {containers: [{image: alpine}]}
          - name: dup
            branches: [main]
            spec: {containers: [{image: alpine}]}
          - name: dup
            branches: [release]
            spec: {containers: [{image: alpine}]}
        ",
    );
    clean(&l);
}

// --- Defaults.

#[test]
fn defaults_are_applied_to_the_snapshot() {
    let l = check(
        "pod_namespace: test-pods",
        "
        presubmits:
          o/r:
          - name: pre
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: post
            context: ''
            spec: {containers: [{image: alpine}]}
        periodics:
        - name: per
          interval: 1h
          spec: {containers: [{image: alpine}]}
        - name: lighthouse
          interval: 1h
          source: pipeline.yaml
        ",
    );
    assert_diags(&l, &[] as &[String]);
    let s = snapshot(&l);
    let pre = &s.presubmits["o/r"][0];
    assert_eq!(pre.base.agent, "kubernetes");
    assert_eq!(pre.base.cluster, "default");
    assert!(!pre.cluster_written);
    assert_eq!(pre.base.namespace.as_deref(), Some("test-pods"));
    assert_eq!(pre.base.decorate, Some(false));
    assert_eq!(decoration(s, pre, "o/r"), None);
    assert_eq!(pre.kind.context, "pre");
    assert_eq!(pre.kind.trigger, r"(?m)^/test( | .* )pre,?($|\s.*)");
    assert_eq!(pre.kind.rerun_command, "/test pre");
    assert!(!pre.kind.always_run);
    assert_eq!(pre.source, JobSource::Central);

    let post = &s.postsubmits["o/r"][0];
    assert_eq!(post.base.agent, "kubernetes");
    assert_eq!(post.base.cluster, "default");
    assert_eq!(post.base.namespace.as_deref(), Some("test-pods"));
    assert_eq!(post.kind.context, "post");

    let per = periodic(s, "per");
    assert_eq!(per.base.agent, "kubernetes");
    assert_eq!(per.base.cluster, "default");
    assert_eq!(per.base.namespace.as_deref(), Some("test-pods"));
    assert_eq!(periodic(s, "lighthouse").base.agent, "tekton-pipeline");
}

#[test]
fn default_pod_namespace_is_default() {
    let l = check(
        "",
        "
        periodics:
        - name: per
          interval: 1h
          spec: {containers: [{image: alpine}]}
        ",
    );
    let s = clean(&l);
    assert_eq!(s.config.pod_namespace, "default");
    assert_eq!(
        periodic(s, "per").base.namespace.as_deref(),
        Some("default")
    );
}

// --- Clusters.

/// Corpus configurations name build clusters without defining them (the
/// kubeconfigs are elsewhere): with no `build_clusters`, any alias is accepted.
#[test]
fn any_cluster_alias_is_accepted_without_build_clusters() {
    let l = check(
        "",
        "
        periodics:
        - name: infra
          interval: 1h
          cluster: k8s-infra-prow-build
          spec: {containers: [{image: alpine}]}
        presubmits:
          o/r:
          - name: trusted
            cluster: test-infra-trusted
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: default
            cluster: default
            spec: {containers: [{image: alpine}]}
        ",
    );
    let s = clean(&l);
    let p = periodic(s, "infra");
    assert_eq!(p.base.cluster, "k8s-infra-prow-build");
    assert!(p.cluster_written);
}

#[test]
fn unknown_cluster_alias_with_build_clusters() {
    let l = check(
        "
        build_clusters:
          build: {}
        ",
        "
        periodics:
        - name: unknown
          interval: 1h
          cluster: nope
          spec: {containers: [{image: alpine}]}
        - name: known
          interval: 1h
          cluster: build
          spec: {containers: [{image: alpine}]}
        - name: default-alias
          interval: 1h
          cluster: default
          spec: {containers: [{image: alpine}]}
        - name: omitted
          interval: 1h
          spec: {containers: [{image: alpine}]}
        presubmits:
          o/r:
          - name: pre-unknown
            cluster: nope
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: post-unknown
            cluster: nope
            spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:4:3: error: job unknown: job configuration for "unknown" specifies unknown 'cluster' value "nope"
  hint: known clusters: default, build"#
            ),
            format!(
                r#"{JOBS}:20:5: error: job pre-unknown: job configuration for "pre-unknown" specifies unknown 'cluster' value "nope"
  hint: known clusters: default, build"#
            ),
            format!(
                r#"{JOBS}:25:5: error: job post-unknown: job configuration for "post-unknown" specifies unknown 'cluster' value "nope"
  hint: known clusters: default, build"#
            ),
        ],
    );
}

/// `default` is listed once, first, also when build_clusters defines it.
#[test]
fn unknown_cluster_hint_lists_default_once() {
    let l = check(
        "
        build_clusters:
          default: {}
          build: {}
        ",
        "
        periodics:
        - name: unknown
          interval: 1h
          cluster: nope
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            r#"{JOBS}:4:3: error: job unknown: job configuration for "unknown" specifies unknown 'cluster' value "nope"
  hint: known clusters: default, build"#
        )],
    );
}

#[test]
fn kubeconfig_contexts_are_known_clusters() {
    let opts = LoadOptions {
        kubeconfig_clusters: vec!["ctx-a".into()],
        ..options()
    };
    let l = load_files(
        &[
            (CONFIG, ""),
            (
                JOBS,
                "
                periodics:
                - name: on-context
                  interval: 1h
                  cluster: ctx-a
                  spec: {containers: [{image: alpine}]}
                - name: elsewhere
                  interval: 1h
                  cluster: ctx-b
                  spec: {containers: [{image: alpine}]}
                ",
            ),
        ],
        &opts,
    );
    assert_diags(
        &l,
        &[format!(
            r#"{JOBS}:8:3: error: job elsewhere: job configuration for "elsewhere" specifies unknown 'cluster' value "ctx-b"
  hint: known clusters: default, ctx-a"#
        )],
    );

    let l = load_files(
        &[(CONFIG, "build_clusters: {ctx-a: {}}"), (JOBS, "")],
        &opts,
    );
    assert_diags(
        &l,
        &[format!(
            "{CONFIG}:1:18: error: build_clusters.ctx-a is also defined by a kubeconfig context"
        )],
    );
}

#[test]
fn disabled_clusters_warn() {
    let l = check(
        "disabled_clusters: [old]",
        "
        periodics:
        - name: on-old
          interval: 1h
          cluster: old
          spec: {containers: [{image: alpine}]}
        - name: on-new
          interval: 1h
          cluster: new
          spec: {containers: [{image: alpine}]}
        ",
    );
    assert_diags(
        &l,
        &[format!(
            r#"{JOBS}:4:3: warning: job on-old: cluster "old" is disabled (disabled_clusters): runs of this job fail at once"#
        )],
    );
}

const TRUSTED: &str = r#"
    build_clusters:
      default: {}
      secure:
        trusted:
        - jobs: ["release-.*", exact-name]
        - repos: [o/r]
          types: [postsubmit]
        - repos: [org2]
          types: [periodic]
"#;

#[test]
fn trusted_clusters_admit_by_name_repo_and_type() {
    let l = check(
        TRUSTED,
        "
        periodics:
        - name: release-nightly
          interval: 1h
          cluster: secure
          spec: {containers: [{image: alpine}]}
        - name: exact-name
          interval: 1h
          cluster: secure
          spec: {containers: [{image: alpine}]}
        - name: org2-periodic
          interval: 1h
          cluster: secure
          extra_refs: [{org: org2, repo: tools}]
          spec: {containers: [{image: alpine}]}
        - name: untrusted-cluster
          interval: 1h
          cluster: default
          spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: deploy-with-refs
            cluster: secure
            extra_refs: [{org: o, repo: r}]
            spec: {containers: [{image: alpine}]}
        ",
    );
    clean(&l);
}

#[test]
fn trusted_clusters_refuse_what_no_rule_admits() {
    let l = check(
        TRUSTED,
        "
        periodics:
        - name: release
          interval: 1h
          cluster: secure
          spec: {containers: [{image: alpine}]}
        - name: o-r-periodic
          interval: 1h
          cluster: secure
          extra_refs: [{org: o, repo: r}]
          spec: {containers: [{image: alpine}]}
        - name: org3-periodic
          interval: 1h
          cluster: secure
          extra_refs: [{org: org3, repo: tools}]
          spec: {containers: [{image: alpine}]}
        presubmits:
          o/r:
          - name: pull
            cluster: secure
            spec: {containers: [{image: alpine}]}
        ",
    );
    let refused = |name: &str| {
        format!(
            r#"job {name} may not run on trusted cluster "secure": no allow rule admits it
  hint: add a rule to build_clusters.secure.trusted, or use another cluster"#
        )
    };
    assert_diags(
        &l,
        &[
            format!("{JOBS}:4:3: error: job release: {}", refused("release")),
            format!(
                "{JOBS}:8:3: error: job o-r-periodic: {}",
                refused("o-r-periodic")
            ),
            format!(
                "{JOBS}:13:3: error: job org3-periodic: {}",
                refused("org3-periodic")
            ),
            format!("{JOBS}:19:5: error: job pull: {}", refused("pull")),
        ],
    );
}

/// A central pre/postsubmit's repository is its repo key (no `extra_refs` needed).
#[test]
fn trusted_clusters_admit_central_postsubmits_by_repo_key() {
    let l = check(
        TRUSTED,
        "
        postsubmits:
          o/r:
          - name: deploy
            cluster: secure
            spec: {containers: [{image: alpine}]}
        ",
    );
    clean(&l);
}

#[test]
fn trusted_rules_are_checked() {
    let l = check(
        r#"
        build_clusters:
          secure:
            trusted:
            - jobs: ["("]
              repos: ["", a/b/c, org, org/repo]
        "#,
        "",
    );
    assert_diags(
        &l,
        &[
            format!(
                r#"{CONFIG}:4:7: error: build_clusters.secure.trusted[0].jobs: invalid pattern "(": unclosed group"#
            ),
            format!(
                r#"{CONFIG}:5:7: error: build_clusters.secure.trusted[0].repos: "" is not ORG or ORG/REPO"#
            ),
            format!(
                r#"{CONFIG}:5:7: error: build_clusters.secure.trusted[0].repos: "a/b/c" is not ORG or ORG/REPO"#
            ),
        ],
    );
}

#[test]
fn build_cluster_and_bosun_sections_fail() {
    let l = check(
        "
        build_clusters:
          a:
            failover_to: a
          b:
            failover_to: nowhere
            max_concurrency: -1
            capacity: -1
          c:
            kind: local
            failover_to: default
            context: ctx
          d:
            kind: kubernetes
            run_as: nobody
        scheduler:
          failover:
            mappings: {a: gone, b: c}
        dispatcher:
          relocatable_clusters: [a, nowhere2]
          demand: prometheus
          budget: -1
          hysteresis_percent: 150
        plank:
          max_concurrency: -1
          job_queue_capacities: {'': 1}
        ",
        "",
    );
    assert_diags(
        &l,
        &[
            format!("{CONFIG}:3:5: error: build_clusters.a.failover_to names the cluster itself"),
            format!(r#"{CONFIG}:5:5: error: build_clusters.b.failover_to names unknown cluster "nowhere""#),
            format!("{CONFIG}:6:5: error: build_clusters.b.max_concurrency must be a non-negative number"),
            format!("{CONFIG}:7:5: error: build_clusters.b.capacity must be a non-negative number"),
            format!("{CONFIG}:9:5: warning: build_clusters.c.kind: context and kubeconfig apply only to kind: kubernetes"),
            format!("{CONFIG}:14:5: warning: build_clusters.d.run_as applies only to kind: local"),
            format!(r#"{CONFIG}:17:5: error: scheduler.failover.mappings names unknown cluster "gone""#),
            format!(r#"{CONFIG}:19:3: error: dispatcher.relocatable_clusters names unknown cluster "nowhere2""#),
            format!("{CONFIG}:20:3: error: dispatcher.demand: prometheus needs dispatcher.prometheus_url"),
            format!("{CONFIG}:21:3: error: dispatcher.budget must be a percentage between 0 and 100 (10% or 10)"),
            format!("{CONFIG}:22:3: error: dispatcher.hysteresis_percent must be between 0 and 100"),
            format!("{CONFIG}:24:3: error: plank.max_concurrency must be a non-negative number"),
            format!(r#"{CONFIG}:25:3: error: plank.job_queue_capacities has an empty queue name """#),
        ],
    );
}

#[test]
fn build_cluster_and_bosun_sections_pass() {
    let l = check(
        "
        build_clusters:
          default:
            max_concurrency: 0
            run_as: nobody
          gpu:
            kind: kubernetes
            context: gpu-ctx
            kubeconfig: /etc/kube/gpu
            max_concurrency: 4
            capacity: 50
            capabilities: [gpu]
            failover_to: default
        scheduler:
          failover:
            mappings: {gpu: default}
        dispatcher:
          relocatable_clusters: [default, gpu]
          demand: prometheus
          prometheus_url: http://prometheus:9090
          budget: 0
          hysteresis_percent: 100
        plank:
          max_concurrency: 0
          job_queue_capacities: {heavy: -1}
        ",
        "",
    );
    clean(&l);
}

/// Prometheus' basic auth as OpenShift's flags take it: a user and a
/// password file together, and not with a bearer token.
#[test]
fn prometheus_basic_auth_is_a_pair_without_a_token() {
    for (section, want) in [
        (
            "prometheus_username: u",
            "dispatcher.prometheus_username needs dispatcher.prometheus_password_file",
        ),
        (
            "prometheus_password_file: /p",
            "dispatcher.prometheus_password_file needs dispatcher.prometheus_username",
        ),
        (
            "prometheus_username: u\n  prometheus_password_file: /p\n  bearer_token_file: /t",
            "dispatcher.prometheus_username and dispatcher.bearer_token_file exclude each other (basic auth or a bearer token)",
        ),
    ] {
        let l = check(
            &format!("dispatcher:\n  prometheus_url: https://thanos\n  {section}\n"),
            "",
        );
        assert_diags(&l, &[format!("{CONFIG}:3:3: error: {want}")]);
    }
    let l = check(
        "dispatcher:\n  prometheus_url: https://thanos\n  prometheus_username: u\n  prometheus_password_file: /p\n  prometheus_ca_file: /ca.pem\n",
        "",
    );
    clean(&l);
    let l = check(
        "dispatcher:\n  prometheus_url: http://prometheus\n  prometheus_ca_file: /ca.pem\n  prometheus_username: 'a:b'\n  prometheus_password_file: /p\n",
        "",
    );
    assert_diags(
        &l,
        &[
            format!("{CONFIG}:3:3: error: dispatcher.prometheus_ca_file is for an https:// dispatcher.prometheus_url"),
            format!("{CONFIG}:4:3: error: dispatcher.prometheus_username must not contain ':' (basic auth cannot carry it)"),
        ],
    );
}

#[test]
fn dispatcher_section_fails() {
    let l = check(
        "
        build_clusters:
          a: {}
        dispatcher:
          prometheus_url: prometheus:9090
          prometheus_query: ' '
          budget: 120%
          window: 0s
          groups:
          - cluster: nowhere
            jobs: ['(']
            paths: ['[']
          - cluster: a
          - jobs: [x]
          provider_mapping: {metal: ''}
        ",
        "",
    );
    assert_diags(
        &l,
        &[
            format!(r#"{CONFIG}:4:3: error: dispatcher.prometheus_url must be an http:// or https:// URL, found "prometheus:9090""#),
            format!("{CONFIG}:5:3: error: dispatcher.prometheus_query must not be empty"),
            format!("{CONFIG}:6:3: error: dispatcher.budget must be a percentage between 0 and 100 (10% or 10)"),
            format!("{CONFIG}:7:3: error: dispatcher.window must be a positive duration"),
            format!(r#"{CONFIG}:9:5: error: dispatcher.groups[0].cluster names unknown cluster "nowhere""#),
            format!(r#"{CONFIG}:10:5: error: dispatcher.groups[0].jobs: invalid pattern "(": unclosed group"#),
            format!(r#"{CONFIG}:11:5: error: dispatcher.groups[0].paths: invalid pattern "[": unclosed character class"#),
            format!("{CONFIG}:12:5: error: dispatcher.groups[1] matches nothing: give jobs or paths"),
            format!("{CONFIG}:13:5: error: dispatcher.groups[2].cluster must be set"),
            format!(r#"{CONFIG}:14:3: error: dispatcher.provider_mapping: "metal": "" needs a provider on both sides"#),
        ],
    );
}

#[test]
fn dispatcher_budget_is_a_percentage() {
    use bosun_config::types::Percent;
    for (written, share) in [("10%", 0.10), ("25", 0.25), ("2.5%", 0.025), ("0", 0.0)] {
        let l = check(&format!("dispatcher:\n  budget: {written}\n"), "");
        let d = clean(&l).config.dispatcher.clone().expect("dispatcher");
        assert_eq!(d.budget_share(), share, "{written}");
        assert!(d.budget.is_some_and(|p: Percent| p.0 == share * 100.0));
    }
    let l = check("dispatcher:\n  budget: ten\n", "");
    assert_diags(
        &l,
        &[format!(
            r#"{CONFIG}:2:11: error: invalid percentage "ten": write a number such as 10% or 10"#
        )],
    );
}

#[test]
fn dispatcher_defaults() {
    let l = check("dispatcher: {}\n", "");
    let d = clean(&l).config.dispatcher.clone().expect("dispatcher");
    assert_eq!(d.budget_share(), 0.10);
    assert_eq!(d.hysteresis_percent(), 3.0);
    assert_eq!(d.replan(), "0 7 * * 0");
    assert_eq!(d.window().to_string(), "168h0m0s");
    assert_eq!(
        d.prometheus_query(),
        r#"sum(increase(prowjob_state_transitions{state="pending"}[168h])) by (job_name)"#
    );
    assert_eq!(
        d.provider_labels(),
        [
            "dispatcher.bosun.dev/provider",
            "ci-operator.openshift.io/cloud"
        ]
    );
    assert_eq!(d.unit, bosun_config::types::DispatchUnit::File);
    let l = check(
        "dispatcher:\n  window: 90m\n  prometheus_query: 'sum(x[$window])'\n  unit: job\n",
        "",
    );
    let d = clean(&l).config.dispatcher.clone().expect("dispatcher");
    assert_eq!(d.prometheus_query(), "sum(x[90m])");
    assert_eq!(d.unit, bosun_config::types::DispatchUnit::Job);
}

/// `replan` is checked by the schedule engine, as a periodic's cron is.
#[test]
fn dispatcher_replan_is_checked() {
    let opts = LoadOptions {
        schedule_check: Some(Arc::new(FixedCheck)),
        ..options()
    };
    let l = load_files(
        &[(CONFIG, "dispatcher:\n  replan: nonsense\n"), (JOBS, "")],
        &opts,
    );
    assert_diags(
        &l,
        &[format!(
            "{CONFIG}:2:3: error: dispatcher.replan: bad cron nonsense\n  hint: write a cron"
        )],
    );
    let l = load_files(
        &[(CONFIG, "dispatcher:\n  replan: good\n"), (JOBS, "")],
        &opts,
    );
    clean(&l);
}

/// A schedule check that accepts exactly the cron `good`.
struct FixedCheck;

impl ScheduleCheck for FixedCheck {
    fn check(&self, p: &Periodic) -> Vec<ScheduleProblem> {
        match p.kind.cron.as_deref() {
            Some("good") | None => vec![],
            Some(c) => vec![ScheduleProblem {
                severity: Severity::Error,
                field: "cron",
                message: format!("bad cron {c}"),
                hint: Some("write a cron".into()),
            }],
        }
    }
}

/// With a dispatcher, jobs sharing a name should share a cluster.
#[test]
fn jobs_sharing_a_name_on_different_clusters_warn() {
    let jobs = "
        periodics:
        - name: same
          interval: 1h
          cluster: a
          spec: {containers: [{image: alpine}]}
        presubmits:
          o/r:
          - name: same
            cluster: b
            spec: {containers: [{image: alpine}]}
          - name: other
            spec: {containers: [{image: alpine}]}
        postsubmits:
          o/r:
          - name: same
            cluster: a
            spec: {containers: [{image: alpine}]}
          - name: other
            spec: {containers: [{image: alpine}]}
        ";
    let config = "
        build_clusters: {a: {}, b: {}}
        dispatcher: {}
        ";
    let l = check(config, jobs);
    assert_diags(
        &l,
        &[format!(
            r#"{JOBS}:9:5: warning: job same: jobs named same use different clusters ("b" here, "a" at {JOBS}:2:3): the dispatcher places all jobs of one name together
  hint: give the jobs of one name the same cluster, or rename one"#
        )],
    );
    // Without a dispatcher or an external scheduler, no warning.
    clean(&check("build_clusters: {a: {}, b: {}}\n", jobs));
}

/// Without build_clusters every alias is known, so failover targets are not checked.
#[test]
fn failover_targets_are_free_without_build_clusters() {
    let l = check(
        "
        scheduler:
          failover:
            mappings: {a: b}
        dispatcher:
          relocatable_clusters: [x]
        ",
        "",
    );
    clean(&l);
}

// --- checkconfig's warnings.

#[test]
fn long_job_names_warn() {
    let long = |c: char| c.to_string().repeat(64);
    let (a, b, c, d, e) = (long('a'), "b".repeat(63), long('c'), long('d'), long('e'));
    let l = check(
        "",
        &format!(
            "
            periodics:
            - name: {a}
              interval: 1h
              spec: {{containers: [{{image: alpine}}]}}
            - name: {b}
              interval: 1h
              spec: {{containers: [{{image: alpine}}]}}
            - name: {c}
              interval: 1h
              agent: jenkins
            presubmits:
              o/r:
              - name: {d}
                spec: {{containers: [{{image: alpine}}]}}
            postsubmits:
              o/r:
              - name: {e}
                spec: {{containers: [{{image: alpine}}]}}
            "
        ),
    );
    let hint = "\n  hint: Prow labels pods with job names; the label is truncated to 63 characters";
    assert_diags(
        &l,
        &[
            format!(
                r#"{JOBS}:2:3: warning: job {a}: name of Periodic job "{a}" too long (should be at most 63 characters){hint}"#
            ),
            format!("{JOBS}:10:3: warning: job {c}: {UNSUPPORTED_JENKINS}"),
            format!(
                r#"{JOBS}:13:5: warning: job {d}: name of Presubmit job "{d}" (for repo "o/r") too long (should be at most 63 characters){hint}"#
            ),
            format!(
                r#"{JOBS}:17:5: warning: job {e}: name of Postsubmit job "{e}" (for repo "o/r") too long (should be at most 63 characters){hint}"#
            ),
        ],
    );
}

#[test]
fn unknown_fields_warn_with_suggestions() {
    let l = check(
        "
        plank:
          max_concurency: 3
        ",
        "
        periodic: []
        periodics:
        - name: p
          intervl: 2h
          interval: 1h
          zzzzzz: 1
          spec:
            containers:
            - image: alpine
              imagee: x
        ",
    );
    assert_diags(
        &l,
        &[
            format!("{CONFIG}:2:3: warning: unknown field `max_concurency`\n  hint: did you mean `max_concurrency`?"),
            format!("{JOBS}:1:1: warning: unknown field `periodic`\n  hint: did you mean `periodics`?"),
            format!("{JOBS}:4:3: warning: job p: unknown field `intervl`\n  hint: did you mean `interval`?"),
            format!("{JOBS}:6:3: warning: job p: unknown field `zzzzzz`"),
            format!("{JOBS}:10:7: warning: job p: unknown field `imagee`\n  hint: did you mean `image`?"),
        ],
    );
    let s = snapshot(&l);
    assert_eq!(
        periodic(s, "p").kind.interval.as_deref(),
        Some("1h"),
        "the misspelt field is ignored"
    );
}

#[test]
fn keys_matching_a_field_up_to_case_are_read_as_prow_reads_them() {
    // Prow decodes through Go's encoding/json: a key that is no field's name
    // but equals one up to case is that field (with a warning here); when
    // several keys are one field, they are decoded in byte order of the keys, so
    // `name` (the greatest) wins over `NAME` and `Name` whatever the order.
    let l = check(
        "
        Plank:
          Max_Concurrency: 3
          maxconcurrency: 4
        ",
        "
        Periodics:
        - name: p
          Cron: 0 * * * *
          Decorate: false
          spec:
            Containers:
            - image: alpine
              env:
              - NAME: PROVISIONER_E2E_IMAGE
                value: x
              - name: lower1
                NAME: upper1
              - NAME: upper2
                name: lower2
              - Name: title3
                NAME: upper3
        presubmits:
          o/r:
          - NAME: pre
            always_run: true
            spec: {containers: [{image: alpine}]}
        ",
    );
    let group = |line: u32, col: u32, key: &str, other: &str, order: &str| {
        format!(
            "{JOBS}:{line}:{col}: warning: job p: field `{key}` read as `name`, as is {other}: \
             Prow decodes them in byte order ({order}), the last one's value wins and mappings merge\n  \
             hint: keep one key, `name`"
        )
    };
    assert_diags(
        &l,
        &[
            format!("{CONFIG}:1:1: warning: field `Plank` read as `plank` (Prow matches field names case-insensitively)\n  hint: write `plank`"),
            format!("{CONFIG}:2:3: warning: field `Max_Concurrency` read as `max_concurrency` (Prow matches field names case-insensitively)\n  hint: write `max_concurrency`"),
            format!("{CONFIG}:3:3: warning: unknown field `maxconcurrency`\n  hint: did you mean `max_concurrency`?"),
            format!("{JOBS}:1:1: warning: field `Periodics` read as `periodics` (Prow matches field names case-insensitively)\n  hint: write `periodics`"),
            format!("{JOBS}:3:3: warning: job p: field `Cron` read as `cron` (Prow matches field names case-insensitively)\n  hint: write `cron`"),
            format!("{JOBS}:4:3: warning: job p: field `Decorate` read as `decorate` (Prow matches field names case-insensitively)\n  hint: write `decorate`"),
            format!("{JOBS}:6:5: warning: job p: field `Containers` read as `containers` (Prow matches field names case-insensitively)\n  hint: write `containers`"),
            format!("{JOBS}:9:9: warning: job p: field `NAME` read as `name` (Prow matches field names case-insensitively)\n  hint: write `name`"),
            group(12, 9, "NAME", "`name` (line 11)", "`NAME`, `name`"),
            group(13, 9, "NAME", "`name` (line 14)", "`NAME`, `name`"),
            group(15, 9, "Name", "`NAME` (line 16)", "`NAME`, `Name`"),
            group(16, 9, "NAME", "`Name` (line 15)", "`NAME`, `Name`"),
            format!("{JOBS}:19:5: warning: job pre: field `NAME` read as `name` (Prow matches field names case-insensitively)\n  hint: write `name`"),
        ],
    );
    let s = snapshot(&l);
    let p = periodic(s, "p");
    assert_eq!(p.kind.cron.as_deref(), Some("0 * * * *"));
    assert_eq!(p.base.decorate, Some(false));
    assert_eq!(
        env_names(&pod_spec(s, p), 0),
        ["PROVISIONER_E2E_IMAGE", "lower1", "lower2", "title3"]
    );
    assert_eq!(s.presubmits["o/r"][0].name(), "pre");
    assert!(s.presubmits["o/r"][0].kind.always_run);
}

// --- In-repo configuration.

const IN_REPO: &str = "
    in_repo:
    - repo: o/r
      path: /repo
    in_repo_config:
      allowed_clusters:
        o/r: [build]
";

#[test]
fn in_repo_jobs_use_allowed_clusters_and_share_names_with_central_jobs() {
    let l = load_files(
        &[
            (CONFIG, IN_REPO),
            (
                JOBS,
                "
                presubmits:
                  o/r:
                  - name: central-dup
                    spec: {containers: [{image: alpine}]}
                ",
            ),
            (
                PROW_YAML,
                "
                presubmits:
                - name: on-default
                  spec: {containers: [{image: alpine}]}
                - name: on-build
                  cluster: build
                  spec: {containers: [{image: alpine}]}
                - name: on-other
                  cluster: other
                  spec: {containers: [{image: alpine}]}
                - name: central-dup
                  spec: {containers: [{image: alpine}]}
                postsubmits:
                - name: post-on-other
                  cluster: other
                  spec: {containers: [{image: alpine}]}
                ",
            ),
        ],
        &options(),
    );
    let not_allowed = "\n  hint: list it in in_repo_config.allowed_clusters";
    assert_diags(
        &l,
        &[
            format!(r#"{PROW_YAML}:8:3: error: job on-other: cluster "other" is not allowed for repository "o/r"{not_allowed}"#),
            format!("{PROW_YAML}:10:3: error: job central-dup: duplicated presubmit jobs (consider both inrepo and central config): [central-dup]\n  hint: also defined at {JOBS}:3:5 for intersecting branches"),
            format!(r#"{PROW_YAML}:14:3: error: job post-on-other: cluster "other" is not allowed for repository "o/r"{not_allowed}"#),
        ],
    );
}

#[test]
fn in_repo_default_cluster_can_be_disallowed() {
    let l = load_files(
        &[
            (
                CONFIG,
                "
                in_repo: [{repo: o/r, path: /repo}]
                in_repo_config:
                  allowed_clusters: {'*': []}
                ",
            ),
            (JOBS, ""),
            (
                PROW_YAML,
                "
                presubmits:
                - name: on-default
                  spec: {containers: [{image: alpine}]}
                ",
            ),
        ],
        &options(),
    );
    assert_diags(
        &l,
        &[format!(
            "{PROW_YAML}:2:3: error: job on-default: cluster \"default\" is not allowed for repository \"o/r\"\n  hint: list it in in_repo_config.allowed_clusters"
        )],
    );
}

/// Lighthouse periodics are in-repo jobs too: their cluster must be allowed, and
/// their identity (`ORG/REPO:name`) does not clash with a central periodic.
#[test]
fn lighthouse_periodics_are_in_repo_jobs() {
    let l = load_files(
        &[
            (CONFIG, IN_REPO),
            (
                JOBS,
                "
                periodics:
                - name: nightly
                  interval: 24h
                  spec: {containers: [{image: alpine}]}
                ",
            ),
            (
                "/repo/.lighthouse/jenkins-x/triggers.yaml",
                "
                apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
                kind: TriggerConfig
                spec:
                  periodics:
                  - name: nightly
                    cron: '0 4 * * *'
                    cluster: build
                    source: nightly.yaml
                  - name: elsewhere
                    cron: '0 5 * * *'
                    cluster: other
                    source: elsewhere.yaml
                ",
            ),
            // Their `source:` PipelineRuns.
            (
                "/repo/.lighthouse/jenkins-x/nightly.yaml",
                "apiVersion: tekton.dev/v1\nkind: PipelineRun\nspec: {pipelineRef: {name: nightly}}\n",
            ),
            (
                "/repo/.lighthouse/jenkins-x/elsewhere.yaml",
                "apiVersion: tekton.dev/v1\nkind: PipelineRun\nspec: {pipelineRef: {name: elsewhere}}\n",
            ),
        ],
        &options(),
    );
    let lh = "/repo/.lighthouse/jenkins-x/triggers.yaml";
    assert_diags(
        &l,
        &[
            format!("{lh}:11:5: error: job elsewhere: cluster \"other\" is not allowed for repository \"o/r\"\n  hint: list it in in_repo_config.allowed_clusters"),
        ],
    );
}

/// In-repo presets apply only to that repository's in-repo jobs, and (as in Prow)
/// are not part of the central `label:value` uniqueness check.
#[test]
fn in_repo_presets_apply_to_in_repo_jobs_only() {
    let l = load_files(
        &[
            (CONFIG, IN_REPO),
            (
                JOBS,
                "
                presets:
                - labels: {preset-a: 'true'}
                  env: [{name: CENTRAL, value: x}]
                presubmits:
                  o/r:
                  - name: central
                    labels: {preset-a: 'true'}
                    spec: {containers: [{image: alpine}]}
                ",
            ),
            (
                PROW_YAML,
                "
                presets:
                - labels: {preset-a: 'true'}
                  env: [{name: IN_REPO, value: x}]
                - labels: {preset-a: 'true'}
                  env: [{name: IN_REPO_2, value: x}]
                presubmits:
                - name: in-repo
                  labels: {preset-a: 'true'}
                  spec: {containers: [{image: alpine}]}
                ",
            ),
        ],
        &options(),
    );
    let s = clean(&l);
    let job = |name: &str| {
        s.presubmits["o/r"]
            .iter()
            .find(|j| j.name() == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(env_names(&pod_spec(s, job("central")), 0), ["CENTRAL"]);
    assert_eq!(
        env_names(&pod_spec(s, job("in-repo")), 0),
        ["CENTRAL", "IN_REPO", "IN_REPO_2"]
    );
    assert_eq!(
        job("in-repo").source,
        JobSource::InRepo {
            repo: "o/r".into(),
            branch: "main".into()
        }
    );
}

/// The diagnostics about `config.yaml` itself (the loader's own, about
/// checkouts it cannot read, are left out).
fn config_lines(l: &Loaded) -> Vec<String> {
    l.diagnostics
        .iter()
        .filter(|d| d.file.as_deref() == Some(CONFIG))
        .map(ToString::to_string)
        .collect()
}

/// An `in_repo` entry is a checkout (`path`) or a git remote (`clone_uri`),
/// not both; credentials go with a remote, one kind of them; a `branch` is
/// one git accepts; a repository is named once.
#[test]
fn in_repo_remotes_and_their_credentials() {
    let config = "
        in_repo:
        - {repo: o/a, clone_uri: 'https://github.com/o/a.git', branch: release-1.0, token_file: /t}
        - {repo: o/b, path: /b, clone_uri: 'https://github.com/o/b.git'}
        - {repo: o/c, path: /c, token_file: /t, ssh_key_file: /k}
        - {repo: o/d, clone_uri: 'git@github.com:o/d.git', token_file: /t, ssh_key_file: /k}
        - {repo: o/e, clone_uri: github.com/o/e}
        - {repo: o/f, clone_uri: 'ssh://git@github.com/o/f.git', branch: 'a..b'}
        - {repo: o/a, clone_uri: 'file:///srv/git/a.git'}
        - {repo: o/g, clone_uri: 'git@github.com:o/g.git', ssh_key_file: /k}
        ";
    let l = check(config, "");
    assert!(l.snapshot.is_none());
    assert_eq!(
        config_lines(&l),
        [
            format!("{CONFIG}:3:25: error: in_repo[1].clone_uri and in_repo[1].path exclude each other (a git remote or a local checkout): set one"),
            format!("{CONFIG}:4:25: error: in_repo[2].token_file is for a git remote, and in_repo[2] has no clone_uri"),
            format!("{CONFIG}:4:41: error: in_repo[2].ssh_key_file is for a git remote, and in_repo[2] has no clone_uri"),
            format!("{CONFIG}:5:68: error: in_repo[3].ssh_key_file and in_repo[3].token_file exclude each other (SSH or HTTPS)"),
            format!("{CONFIG}:6:15: error: in_repo[4].clone_uri: \"github.com/o/e\" is not a git remote URL\n  hint: write https://HOST/ORG/REPO.git, ssh://git@HOST/ORG/REPO.git, file:///DIR or git@HOST:ORG/REPO.git"),
            format!("{CONFIG}:7:58: error: in_repo[5].branch: \"a..b\" is not a valid branch name"),
            format!("{CONFIG}:8:4: error: in_repo[6].repo: o/a is already in_repo[0]\n  hint: name each repository once"),
        ]
    );
}

/// `repos`: durations that parse and are positive, a base URL git can clone
/// from, one kind of credentials; the accessors give the defaults.
#[test]
fn repos_section_is_checked_and_defaulted() {
    let l = check(
        "
        repos:
          clone_base: github.com
          resync: 5x
          gone_after: 0s
          token_file: /t
          ssh_key_file: /k
        ",
        "",
    );
    assert_diags(
        &l,
        &[
            format!("{CONFIG}:2:3: error: repos.clone_base: \"github.com\" is not a git remote URL\n  hint: write the URL repositories are cloned from without ORG/REPO, such as https://github.com"),
            format!("{CONFIG}:3:3: error: repos.resync: time: unknown unit \"x\" in duration \"5x\"{DURATION_HINT}"),
            format!("{CONFIG}:4:3: error: repos.gone_after: must be a positive duration, found \"0s\""),
            format!("{CONFIG}:6:3: error: repos.ssh_key_file and repos.token_file exclude each other (SSH or HTTPS)"),
        ],
    );

    let s = clean(&check("", "")).clone();
    let repos = &s.config.repos;
    assert_eq!(repos.resync_interval(), Duration::from_secs(300));
    assert_eq!(repos.gone_after(), Duration::from_secs(3600));
    assert_eq!(repos.clone_uri_for("o/r"), "https://github.com/o/r.git");

    let l = check(
        "
        repos:
          clone_base: 'https://gitea.example.com/'
          resync: 90s
          gone_after: 2h30m
        ",
        "",
    );
    let repos = &clean(&l).config.repos;
    assert_eq!(repos.resync_interval(), Duration::from_secs(90));
    assert_eq!(repos.gone_after(), Duration::from_secs(9000));
    assert_eq!(
        repos.clone_uri_for("o/r"),
        "https://gitea.example.com/o/r.git"
    );
}

/// Relative credential files, of `in_repo` entries and of `repos`, are
/// beside `config.yaml`, as a relative `path` is.
#[test]
fn relative_credential_files_are_beside_config_yaml() {
    let l = check(
        "
        in_repo:
        - {repo: o/a, clone_uri: 'https://github.com/o/a.git', token_file: secrets/a-token}
        - {repo: o/b, clone_uri: 'git@github.com:o/b.git', ssh_key_file: /abs/key}
        repos:
          ssh_key_file: ./keys/id
        ",
        "",
    );
    let config = &clean(&l).config;
    assert_eq!(
        config.in_repo[0].token_file.as_deref(),
        Some("/c/secrets/a-token")
    );
    assert_eq!(config.in_repo[1].ssh_key_file.as_deref(), Some("/abs/key"));
    assert_eq!(config.repos.ssh_key_file.as_deref(), Some("/c/keys/id"));
}

/// A `clone_uri` of `./x` or `../x` is a repository beside `config.yaml`,
/// given to git as an absolute `file://` URL; others are kept as written.
#[test]
fn relative_clone_uris_are_file_urls_beside_config_yaml() {
    let l = check(
        "
        in_repo:
        - {repo: o/a, clone_uri: ./remote/a.git}
        - {repo: o/b, clone_uri: ../up/b.git}
        - {repo: o/c, clone_uri: 'file:///srv/c.git'}
        ",
        "",
    );
    let config = &clean(&l).config;
    let uris: Vec<&str> = config
        .in_repo
        .iter()
        .map(|s| s.clone_uri.as_deref().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "file:///c/remote/a.git",
            "file:///c/../up/b.git",
            "file:///srv/c.git"
        ]
    );
}

/// The loader reads checkouts; an entry with a `clone_uri` names a remote,
/// which it leaves to the daemon: no error, no jobs, nothing read.
#[test]
fn the_loader_skips_clone_uri_entries() {
    let l = load_files(
        &[
            (
                CONFIG,
                "
                in_repo:
                - {repo: o/r, path: /repo}
                - {repo: o/remote, clone_uri: 'https://github.com/o/remote.git'}
                ",
            ),
            (JOBS, ""),
            (
                PROW_YAML,
                "
                presubmits:
                - name: unit
                  spec: {containers: [{image: alpine}]}
                ",
            ),
        ],
        &options(),
    );
    let s = clean(&l);
    assert_eq!(s.counts().presubmits, 1);
    assert_eq!(s.presubmits["o/r"][0].name(), "unit");
    assert_eq!(l.stats.files, 3, "config.yaml, jobs.yaml and .prow.yaml");
    assert_eq!(s.repo_stats.keys().collect::<Vec<_>>(), ["o/r"]);
}

/// `in_repo[i].path` (or a `clone_uri`) is required. (The loader also reports that it cannot read the
/// checkout; only the validator's diagnostic is asserted here.)
#[test]
fn in_repo_sources_need_a_path_or_a_clone_uri() {
    let l = check("in_repo: [{repo: o/r, path: ''}]", "");
    assert!(l.snapshot.is_none());
    let config: Vec<String> = l
        .diagnostics
        .iter()
        .filter(|d| d.file.as_deref() == Some(CONFIG))
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        config,
        [format!("{CONFIG}:1:23: error: in_repo[0].path or in_repo[0].clone_uri must be set\n  hint: path: a local checkout; clone_uri: a git remote bosun serve follows")]
    );
}
