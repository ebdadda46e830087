//! Golden pods: the pod `pod_for_run` builds for a run of an undecorated job,
//! compared with `tests/golden/pod/NAME.json`. `BOSUN_BLESS=1 cargo test -p
//! bosun-cluster --test it pod_golden::` rewrites the files; read the diff
//! against Prow before committing it.
//!
//! The goldens are what Prow builds for the same ProwJob (`ProwJobToPodLocal`
//! with `LabelsAndAnnotationsForJob`, then plank's namespace), as read in
//! kubernetes-sigs/prow `pkg/pod-utils/decorate/podspec.go` at
//! d04680445b20c09bac6decd92cea72de33dcece5 and
//! `pkg/pod-utils/downwardapi/jobspec.go` at
//! 4171797bd737e14779bd1d415d31ef661a27a9de; compare the undecorated fixture
//! `pkg/pod-utils/decorate/testdata/TestProwJobToPod_0.yaml` at
//! 1ec9888010fc6f9e69b44aed1121402b7bb2e0ab. Each run stands for the
//! ProwJob Prow would have made, so pre/postsubmit and batch runs carry
//! their context as a ProwJob does (see `with_context`). What a bosun run
//! cannot say (a pull's `head_ref`, so `PULL_HEAD_REF` is empty) is in the
//! module doc of `kube/pod.rs`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bosun_cluster::kube::pod::pod_for_run;
use bosun_config::source::{DirEntry, EntryKind, FileSource};
use bosun_config::types::{DecorationConfig, JobBase, JobType, Refs};
use bosun_config::{load, LoadOptions, OsFiles, Snapshot};
use bosun_store::template::{new_run, RunTemplate, SpecSnapshot};
use bosun_store::Run;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde_json::{json, Value};

/// A run of `job` (a job definition, as JSON, after Prow's defaults) of
/// `job_type` on `refs`, made as bosun makes runs, with `id` and `build_id`.
fn run_of(
    job: Value,
    job_type: JobType,
    refs: Option<Value>,
    id: &str,
    build_id: i64,
) -> (Run, SpecSnapshot) {
    let base: JobBase = serde_json::from_value(job).expect("a job");
    let refs: Option<Refs> = refs.map(|r| serde_json::from_value(r).expect("refs"));
    let periodic = (job_type == JobType::Periodic).then(|| base.name.clone());
    let new = new_run(&base, job_type, periodic, base.spec.clone(), None, refs);
    let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).expect("a spec snapshot");
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    (new.into_run(id.into(), build_id, "hash".into(), at), spec)
}

/// `run` with its job's status context recorded as a ProwJob records it
/// (the `prow.k8s.io/context` annotation, which `pjutil.NewProwJob` puts on
/// every ProwJob; bosun's run template does not record it yet).
fn with_context((mut run, spec): (Run, SpecSnapshot), context: &str) -> (Run, SpecSnapshot) {
    std::sync::Arc::make_mut(&mut run.annotations)
        .insert("prow.k8s.io/context".into(), context.into());
    (run, spec)
}

/// Compares the pod of `run` with the golden file `name`, or rewrites it.
fn golden(name: &str, (run, spec): (Run, SpecSnapshot)) {
    let pod = pod_for_run(&run, &spec, "test-pods").expect("a pod");
    let got = serde_json::to_string_pretty(&pod).unwrap() + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/pod")
        .join(format!("{name}.json"));
    if std::env::var("BOSUN_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; BOSUN_BLESS=1 writes it, then check it by hand",
            path.display()
        )
    });
    assert_eq!(
        got,
        want,
        "the pod differs from {} (BOSUN_BLESS=1 rewrites it)",
        path.display()
    );
}

/// A central periodic whose one container has no name: it becomes `test`.
/// No refs, so no refs variables, though its `extra_refs[0]` gives the refs
/// labels and `JOB_SPEC` its `extra_refs`; the context is empty (label and
/// annotation). The init container keeps its environment and gets the
/// termination message policy.
#[test]
fn periodic_with_an_unnamed_container() {
    golden(
        "periodic_unnamed_container",
        run_of(
            json!({
                "name": "ci-test-infra-periodic-unit",
                "agent": "kubernetes",
                "cluster": "default",
                "labels": {"team": "sig-testing"},
                "annotations": {"testgrid-dashboards": "sig-testing-misc"},
                "extra_refs": [{"org": "kubernetes", "repo": "test-infra", "base_ref": "master"}],
                "spec": {
                    "initContainers": [{"name": "prepare", "image": "busybox", "command": ["true"]}],
                    "containers": [{
                        "image": "golang:1.22",
                        "command": ["make", "test"],
                        "env": [{"name": "GOFLAGS", "value": "-mod=vendor"}],
                        "resources": {"requests": {"cpu": "2"}}
                    }]
                }
            }),
            JobType::Periodic,
            None,
            "0b5a6e8e-6f3c-4d0e-9c43-2d7a3c1b9e01",
            1_790_000_000_000_000_001,
        ),
    );
}

/// A presubmit on a pull request, with the `prow.k8s.io/is-optional` label
/// Prow's trigger gives its ProwJobs (bosun's template does not yet; the pod
/// carries the run's labels, whatever they are) and a context that is not a
/// label value (`ci/prow/unit`: its label is its last element).
#[test]
fn presubmit_with_refs() {
    let (mut run, spec) = with_context(
        run_of(
            json!({
                "name": "pull-test-infra-unit",
                "agent": "kubernetes",
                "cluster": "default",
                "spec": {"containers": [{"name": "unit", "image": "golang:1.22", "command": ["make", "test"]}]}
            }),
            JobType::Presubmit,
            Some(json!({
                "org": "kubernetes",
                "repo": "test-infra",
                "repo_link": "https://github.com/kubernetes/test-infra",
                "base_ref": "master",
                "base_sha": "6d4a1e0c2b7f9a8e5d3c1b0a9f8e7d6c5b4a3f2e",
                "base_link": "https://github.com/kubernetes/test-infra/commit/6d4a1e0c2b7f9a8e5d3c1b0a9f8e7d6c5b4a3f2e",
                "pulls": [{
                    "number": 4242,
                    "author": "alice",
                    "sha": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
                    "title": "Fix <flaky> & slow tests",
                    "link": "https://github.com/kubernetes/test-infra/pull/4242",
                    "commit_link": "https://github.com/kubernetes/test-infra/pull/4242/commits/0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
                    "author_link": "https://github.com/alice"
                }]
            })),
            "1c6b7f9f-7a4d-4e1f-8d54-3e8b4d2c0f12",
            1_790_000_000_000_000_002,
        ),
        "ci/prow/unit",
    );
    std::sync::Arc::make_mut(&mut run.labels)
        .insert("prow.k8s.io/is-optional".into(), "false".into());
    golden("presubmit_with_refs", (run, spec));
}

/// A postsubmit (its context the default, its name). `path_alias` gives
/// `SRC_HOST` and `SRC_BASE`; no pull variables.
#[test]
fn postsubmit() {
    golden(
        "postsubmit",
        with_context(
            run_of(
                json!({
                    "name": "post-test-infra-push-images",
                    "agent": "kubernetes",
                    "cluster": "default",
                    "labels": {"preset-service-account": "true"},
                    "spec": {"containers": [{"image": "gcr.io/k8s-testimages/image-builder", "args": ["--push"]}]}
                }),
                JobType::Postsubmit,
                Some(json!({
                    "org": "kubernetes",
                    "repo": "test-infra",
                    "base_ref": "master",
                    "base_sha": "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b",
                    "path_alias": "k8s.io/test-infra"
                })),
                "2d7c8a0a-8b5e-4f20-9e65-4f9c5e3d1a23",
                1_790_000_000_000_000_003,
            ),
            "post-test-infra-push-images",
        ),
    );
}

/// A job naming a service account: `automountServiceAccountToken` is left
/// alone (unset: Kubernetes mounts the token).
#[test]
fn job_with_a_service_account() {
    golden(
        "service_account",
        run_of(
            json!({
                "name": "ci-deploy-prow",
                "agent": "kubernetes",
                "cluster": "trusted",
                "spec": {
                    "serviceAccountName": "deployer",
                    "containers": [{"name": "deploy", "image": "bitnami/kubectl", "command": ["kubectl", "apply", "-f", "config/"]}]
                }
            }),
            JobType::Periodic,
            None,
            "3e8d9b1b-9c6f-4031-8f76-5a0d6f4e2b34",
            1_790_000_000_000_000_004,
        ),
    );
}

/// A job asking for the token without a service account keeps `true`. A
/// batch: the refs variables with `PULL_REFS` of both pulls, no pull
/// variables, the first pull's number as the pull label.
#[test]
fn job_setting_automount_true() {
    golden(
        "automount_true",
        with_context(
            run_of(
                json!({
                    "name": "pull-test-infra-integration",
                    "agent": "kubernetes",
                    "cluster": "default",
                    "spec": {
                        "automountServiceAccountToken": true,
                        "containers": [{"image": "golang:1.22", "command": ["make", "integration"]}]
                    }
                }),
                JobType::Batch,
                Some(json!({
                    "org": "kubernetes",
                    "repo": "test-infra",
                    "base_ref": "master",
                    "base_sha": "1111111111111111111111111111111111111111",
                    "pulls": [
                        {"number": 10, "author": "alice", "sha": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
                        {"number": 11, "author": "bob", "sha": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "ref": "refs/pull/11/head"}
                    ]
                })),
                "4f9eac2c-ad70-4142-9087-6b1e7a5f3c45",
                1_790_000_000_000_000_005,
            ),
            "pull-test-infra-integration",
        ),
    );
}

/// Several containers keep their names and each gets the environment; a
/// container's own termination message policy stays; init containers get no
/// environment.
#[test]
fn multi_container_job() {
    golden(
        "multi_container",
        run_of(
            json!({
                "name": "ci-e2e-with-registry",
                "agent": "kubernetes",
                "cluster": "default",
                "spec": {
                    "initContainers": [{"name": "seed", "image": "busybox", "command": ["sh", "-c", "echo seed"], "env": [{"name": "SEED", "value": "1"}]}],
                    "containers": [
                        {"name": "e2e", "image": "e2e:latest", "command": ["run-e2e"], "env": [{"name": "REGISTRY", "value": "localhost:5000"}]},
                        {"name": "registry", "image": "registry:2", "terminationMessagePolicy": "File"}
                    ],
                    "volumes": [{"name": "cache", "emptyDir": {}}]
                }
            }),
            JobType::Periodic,
            None,
            "5a0fbd3d-be81-4253-a198-7c2f8b6a4d56",
            1_790_000_000_000_000_006,
        ),
    );
}

/// Labels whose values are not label values: replaced by their last path
/// element when that one is valid, else dropped; annotations stay whole.
#[test]
fn labels_and_annotations_that_are_not_label_values() {
    golden(
        "invalid_label_values",
        run_of(
            json!({
                "name": "ci-kubernetes-e2e-gce-cos-k8sbeta-serial",
                "agent": "kubernetes",
                "cluster": "default",
                "labels": {
                    "artifacts": "gs://kubernetes-jenkins/logs/ci-e2e",
                    "owner-dir": "sig-node/serial/",
                    "empty": "",
                    "spaced": "has spaces",
                    "url-with-space": "https://example.com/a b",
                    "too-long": "x".repeat(64),
                    "fine": "v1.2.3"
                },
                "annotations": {
                    "description": "Runs <serial> & slow e2e tests",
                    "testgrid-tab-name": "gce-cos-k8sbeta-serial"
                },
                "spec": {"containers": [{"image": "kubekins-e2e", "args": ["--timeout=600m"]}]}
            }),
            JobType::Periodic,
            None,
            "6b1ace4e-cf92-4364-b2a9-8d3a9c7b5e67",
            1_790_000_000_000_000_007,
        ),
    );
}

// ---------------------------------------------------------------------------
// Decorated pods: Prow's own `TestProwJobToPod` cases.
//
// The inputs are the cases of `TestProwJobToPod` in kubernetes-sigs/prow
// `pkg/pod-utils/decorate/podspec_test.go` (37a08f946c8f7acb8a8e22488bd6e5a46f6f5876),
// the expected pods Prow's fixtures `pkg/pod-utils/decorate/testdata/
// TestProwJobToPod_N.yaml` at 9fe46d9564150f1b080e61ae5133c7eb91d38d8a
// (`_0` at 1ec9888010fc6f9e69b44aed1121402b7bb2e0ab; the index holds no
// `_5`, the periodic without refs, which is a bosun golden below), kept as
// JSON in `tests/golden/prow/`. bosun's decoration follows
// `pkg/pod-utils/decorate/podspec.go` at 087836a449afa406f3121fbd40625dc0bfa03b27
// (the closest the index holds to a6194089, whose released utility images the
// corpus uses).
//
// The pods are compared field by field, in order (environment variables,
// volumes, mounts, containers), with one difference made to Prow's side:
// bosun's pulls have no `head_ref`, so `"head_ref":"..."` leaves the JSON
// options and `PULL_HEAD_REF` is empty. What is only serialisation is
// normalised on both sides: absent, `null`, an empty `resources: {}` and an
// empty variable value are the same to Kubernetes, Prow's pods have no
// namespace (plank sets it) and no `apiVersion`/`kind`.
// ---------------------------------------------------------------------------

/// The run and spec of a `TestProwJobToPod` case: ProwJob `pod`, build
/// `blabla`, label `needstobe: inherited`, job `job-name` with context
/// `job-context` on `org-name/repo-name` (`refs` unless `refs` is null).
fn prow_case(
    job_type: JobType,
    refs: Value,
    extra_refs: Value,
    containers: Value,
    decoration: Option<Value>,
) -> (Run, SpecSnapshot) {
    let base: JobBase = serde_json::from_value(json!({
        "name": "job-name",
        "agent": "kubernetes",
        "cluster": "default",
        "decorate": decoration.is_some(),
        "extra_refs": extra_refs,
        "spec": {"containers": containers},
    }))
    .expect("a job");
    let decoration: Option<DecorationConfig> =
        decoration.map(|d| serde_json::from_value(d).expect("a decoration config"));
    let refs: Option<Refs> = (!refs.is_null()).then(|| serde_json::from_value(refs).expect("refs"));
    let periodic = (job_type == JobType::Periodic).then(|| base.name.clone());
    let new = new_run(
        &base,
        job_type,
        periodic,
        base.spec.clone(),
        decoration,
        refs,
    );
    let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).expect("a spec snapshot");
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let mut run = new.into_run("pod".into(), 1, "hash".into(), at);
    run.build_id = "blabla".into();
    std::sync::Arc::make_mut(&mut run.labels).insert("needstobe".into(), "inherited".into());
    std::sync::Arc::make_mut(&mut run.annotations)
        .insert("prow.k8s.io/context".into(), "job-context".into());
    (run, spec)
}

/// The cases' refs: a pull request on `org-name/repo-name`.
fn prow_refs(path_alias: Option<&str>, title: Option<&str>) -> Value {
    let mut pull = json!({"number": 1, "author": "author-name", "sha": "pull-sha"});
    if let Some(t) = title {
        pull["title"] = json!(t);
    }
    let mut refs = json!({
        "org": "org-name", "repo": "repo-name",
        "base_ref": "base-ref", "base_sha": "base-sha",
        "pulls": [pull],
    });
    if let Some(a) = path_alias {
        refs["path_alias"] = json!(a);
    }
    refs
}

/// The cases' test container.
fn tester() -> Value {
    json!({
        "image": "tester",
        "command": ["/bin/thing"],
        "args": ["some", "args"],
        "env": [{"name": "MY_ENV", "value": "rocks"}],
    })
}

/// The cases' decoration config, with `more` over it.
fn prow_decoration(more: Value) -> Value {
    let mut d = json!({
        "timeout": "2h",
        "grace_period": "10s",
        "utility_images": {
            "clonerefs": "clonerefs:tag",
            "initupload": "initupload:tag",
            "entrypoint": "entrypoint:tag",
            "sidecar": "sidecar:tag",
        },
        "gcs_configuration": {
            "bucket": "my-bucket",
            "path_strategy": "legacy",
            "default_org": "kubernetes",
            "default_repo": "kubernetes",
        },
    });
    for (k, v) in more.as_object().expect("an object") {
        if k == "mediaTypes" {
            d["gcs_configuration"]["mediaTypes"] = v.clone();
        } else {
            d[k] = v.clone();
        }
    }
    d
}

/// `v` without what only serialisation tells apart (see above).
fn normalized(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, v| {
                    !(v.is_null()
                        || (k == "resources" && v.as_object().is_some_and(|o| o.is_empty())))
                });
                if map.get("value").is_some_and(|v| v == "") && map.contains_key("name") {
                    map.remove("value");
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(list) => list.iter_mut().for_each(walk),
            _ => {}
        }
    }
    if let Some(map) = v.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if map.get("status").is_some_and(|s| s == &json!({})) {
            map.remove("status");
        }
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
    }
    walk(&mut v);
    v
}

/// Prow's expected pod without what bosun's pulls cannot carry: every
/// `"head_ref":"..."` in the JSON options, and `PULL_HEAD_REF`'s value.
fn without_head_ref(mut v: Value) -> Value {
    fn strip(s: &str) -> String {
        let mut out = s.to_string();
        while let Some(at) = out.find(",\"head_ref\":\"") {
            let rest = at + ",\"head_ref\":\"".len();
            let end = rest + out[rest..].find('"').expect("a closing quote");
            out.replace_range(at..=end, "");
        }
        out
    }
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) => *s = strip(s),
            Value::Object(map) => {
                if map.get("name").is_some_and(|n| n == "PULL_HEAD_REF") {
                    map.remove("value");
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(list) => list.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// Every difference between `want` and `got`, by path, field by field and
/// element by element (order matters).
fn differences(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => differences(&p, wv, gv, out),
                    None => out.push(format!("{p}: missing (want {wv})")),
                }
            }
            for (k, gv) in g {
                if !w.contains_key(k) {
                    out.push(format!("{path}.{k}: not in Prow's pod (got {gv})"));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                differences(&format!("{path}[{i}]"), wv, gv, out);
            }
            if w.len() != g.len() {
                out.push(format!("{path}: {} elements, want {}", g.len(), w.len()));
            }
        }
        (Value::String(w), Value::String(g)) if w != g => {
            let at = w
                .char_indices()
                .zip(g.chars())
                .find(|((_, a), b)| a != b)
                .map_or(w.len().min(g.len()), |((i, _), _)| i);
            let from = at.saturating_sub(40);
            let around = |s: &str| s.get(from..(at + 60).min(s.len())).unwrap_or(s).to_string();
            out.push(format!(
                "{path}: differs at byte {at}:\n    want ...{}...\n    got  ...{}...",
                around(w),
                around(g)
            ));
        }
        (w, g) if w != g => out.push(format!("{path}: want {w}, got {g}")),
        _ => {}
    }
}

/// Compares the pod of `case` with Prow's fixture `TestProwJobToPod_N`.
fn prow_fixture(n: usize, (run, spec): (Run, SpecSnapshot)) {
    let pod = pod_for_run(&run, &spec, "test-pods").expect("a pod");
    assert_eq!(pod.metadata.namespace.as_deref(), Some("test-pods"));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/golden/prow/TestProwJobToPod_{n}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let want = normalized(without_head_ref(serde_json::from_str(&text).expect("JSON")));
    let got = normalized(serde_json::to_value(&pod).unwrap());
    let mut diffs = Vec::new();
    differences("pod", &want, &got, &mut diffs);
    assert!(
        diffs.is_empty(),
        "bosun's pod differs from Prow's TestProwJobToPod_{n}:\n  {}",
        diffs.join("\n  ")
    );
}

/// Case 0: an undecorated presubmit (the prologue and `EnvForSpec` only).
#[test]
fn prow_case_0_undecorated() {
    prow_fixture(
        0,
        prow_case(
            JobType::Presubmit,
            prow_refs(None, Some("pull-title")),
            json!([]),
            json!([{"image": "tester", "env": [{"name": "MY_ENV", "value": "rocks"}]}]),
            None,
        ),
    );
}

/// Case 1: GCS credentials, media types, a cookie file `NAME/KEY`.
#[test]
fn prow_case_1_cookiefile_with_key() {
    prow_fixture(
        1,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "mediaTypes": {"log": "text/plain"},
                "gcs_credentials_secret": "secret-name",
                "cookiefile_secret": "yummy/.gitcookies",
            }))),
        ),
    );
}

/// Case 2: a cookie file named as its secret.
#[test]
fn prow_case_2_cookiefile() {
    prow_fixture(
        2,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "gcs_credentials_secret": "secret-name",
                "cookiefile_secret": "yummy",
            }))),
        ),
    );
}

/// Case 3: SSH keys and host fingerprints; the container's own
/// termination message policy stays.
#[test]
fn prow_case_3_ssh_keys_and_fingerprints() {
    let mut container = tester();
    container["terminationMessagePolicy"] = json!("File");
    prow_fixture(
        3,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([]),
            json!([container]),
            Some(prow_decoration(json!({
                "gcs_credentials_secret": "secret-name",
                "ssh_key_secrets": ["ssh-1", "ssh-2"],
                "ssh_host_fingerprints": ["hello", "world"],
            }))),
        ),
    );
}

/// Case 4: SSH keys.
#[test]
fn prow_case_4_ssh_keys() {
    prow_fixture(
        4,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "gcs_credentials_secret": "secret-name",
                "ssh_key_secrets": ["ssh-1", "ssh-2"],
            }))),
        ),
    );
}

/// Case 6: `skip_cloning` with extra refs: no clonerefs, no code volume,
/// no working directory, initupload without the clone log.
#[test]
fn prow_case_6_skip_cloning() {
    prow_fixture(
        6,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([{"org": "extra-org", "repo": "extra-repo"}]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "gcs_credentials_secret": "secret-name",
                "ssh_key_secrets": ["ssh-1", "ssh-2"],
                "skip_cloning": true,
            }))),
        ),
    );
}

/// Case 7: two test containers, each wrapped with its own log, marker and
/// metadata file; refs then extra refs cloned.
#[test]
fn prow_case_7_two_containers() {
    prow_fixture(
        7,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([{"org": "extra-org", "repo": "extra-repo"}]),
            json!([
                {"name": "test-0", "image": "tester", "command": ["/bin/thing"], "args": ["some", "args"],
                 "env": [{"name": "MY_ENV", "value": "rocks"}]},
                {"name": "test-1", "image": "othertester", "command": ["/bin/otherthing"], "args": ["other", "args"],
                 "env": [{"name": "MY_ENV", "value": "stones"}]},
            ]),
            Some(prow_decoration(json!({
                "gcs_credentials_secret": "secret-name",
                "ssh_key_secrets": ["ssh-1", "ssh-2"],
                "cookiefile_secret": "yummy",
            }))),
        ),
    );
}

/// Case 8: a default service account and no GCS credentials secret
/// (workload identity): no credentials volume or file.
#[test]
fn prow_case_8_default_service_account() {
    prow_fixture(
        8,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "mediaTypes": {"log": "text/plain"},
                "default_service_account_name": "default-SA",
                "cookiefile_secret": "yummy/.gitcookies",
            }))),
        ),
    );
}

/// Case 9: the pod's security context from the config.
#[test]
fn prow_case_9_security_context() {
    prow_fixture(
        9,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), Some("pull-title")),
            json!([]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "mediaTypes": {"log": "text/plain"},
                "default_service_account_name": "default-SA",
                "cookiefile_secret": "yummy/.gitcookies",
                "run_as_group": 1000,
                "run_as_user": 1000,
                "fs_group": 2000,
            }))),
        ),
    );
}

/// Case 10: scheduling options (affinity and tolerations, in Go's field
/// order inside `JOB_SPEC`); a pull without a title.
#[test]
fn prow_case_10_scheduling_options() {
    prow_fixture(
        10,
        prow_case(
            JobType::Presubmit,
            prow_refs(Some("somewhere/else"), None),
            json!([]),
            json!([tester()]),
            Some(prow_decoration(json!({
                "mediaTypes": {"log": "text/plain"},
                "default_service_account_name": "default-SA",
                "cookiefile_secret": "yummy/.gitcookies",
                "run_as_group": 1000,
                "run_as_user": 1000,
                "fs_group": 2000,
                "scheduling_options": {
                    "tolerations": [{"key": "prow.k8s.io/schedulable", "effect": "NoSchedule", "operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "node-type", "values": ["prowjobs"], "operator": "In"}]},
                    }]}},
                },
            }))),
        ),
    );
}

/// Case 5 (Prow's fixture is not in the index, so this is a bosun golden):
/// a periodic without refs is decorated without clonerefs: initupload has
/// no clone log and no `/logs` mount, the test container no `code` mount
/// and no working directory; it still gets `ARTIFACTS` and `GOPATH`.
#[test]
fn prow_case_5_periodic_without_refs() {
    let run = prow_case(
        JobType::Periodic,
        Value::Null,
        json!([]),
        json!([tester()]),
        Some(prow_decoration(json!({
            "gcs_credentials_secret": "secret-name",
            "ssh_key_secrets": ["ssh-1", "ssh-2"],
        }))),
    );
    let pod = pod_for_run(&run.0, &run.1, "test-pods").expect("a pod");
    let spec = pod.spec.as_ref().unwrap();
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(init, ["initupload", "place-entrypoint"]);
    let initupload = &spec.init_containers.as_ref().unwrap()[0];
    assert!(!env_of(initupload, "INITUPLOAD_OPTIONS").contains("\"log\""));
    let test = &spec.containers[0];
    assert_eq!(test.working_dir, None);
    assert_eq!(mounts_of(test), ["/logs", "/tools"]);
    assert_eq!(env_of(test, "ARTIFACTS"), "/logs/artifacts");
    assert_eq!(env_of(test, "GOPATH"), "/home/prow/go");
    let volumes: Vec<_> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        volumes,
        ["logs", "tools", "gcs-credentials"],
        "no clone volumes"
    );
    golden("prow_case_5_periodic_without_refs", run);
}

fn container<'a>(pod: &'a Pod, name: &str) -> &'a Container {
    let spec = pod.spec.as_ref().expect("a spec");
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The value of `name` in `c`'s environment (the last one, which wins).
fn env_of(c: &Container, name: &str) -> String {
    c.env
        .iter()
        .flatten()
        .rfind(|e| e.name == name)
        .and_then(|e| e.value.clone())
        .unwrap_or_else(|| panic!("{} has no {name}", c.name))
}

fn mounts_of(c: &Container) -> Vec<&str> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect()
}

fn volume_names(pod: &Pod) -> Vec<&str> {
    pod.spec
        .as_ref()
        .unwrap()
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect()
}

// ---------------------------------------------------------------------------
// Decorated pods of the test-infra corpus (`../shared/corpus/test-infra`),
// loaded by bosun-config with the corpus's `prow/config.yaml`, whose
// `plank.default_decoration_config_entries` give every job its utility
// images, GCS configuration, credentials and utility resources. The runs are
// made as the daemon makes them (the store's run template with the resolved
// decoration config; a pull request or a push for pre/postsubmits). The
// corpus has no decorated job with `skip_cloning`, several containers or
// init containers: those come from a job file written here and loaded with
// the corpus's `config.yaml`.
// ---------------------------------------------------------------------------

fn corpus_root() -> PathBuf {
    let beside =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    let root = beside
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from("/work/shared/corpus/test-infra/config"));
    assert!(
        root.join("jobs").is_dir(),
        "no test-infra corpus at {}",
        root.display()
    );
    root
}

fn loaded(options: &LoadOptions, files: &dyn FileSource) -> Snapshot {
    let loaded = load(options, files);
    loaded.snapshot.unwrap_or_else(|| {
        panic!(
            "the configuration does not load: {:#?}",
            &loaded.diagnostics[..loaded.diagnostics.len().min(10)]
        )
    })
}

/// The whole corpus, loaded once.
fn corpus() -> &'static Snapshot {
    static CORPUS: OnceLock<Snapshot> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = corpus_root();
        loaded(
            &LoadOptions {
                config: Some(root.join("prow/config.yaml")),
                job_config: vec![root.join("jobs")],
                ..LoadOptions::default()
            },
            &OsFiles,
        )
    })
}

/// The real files plus one job file that exists only in memory.
struct WithJobFile {
    path: PathBuf,
    yaml: &'static str,
}

impl FileSource for WithJobFile {
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        if path == self.path {
            return Ok(self.yaml.as_bytes().to_vec());
        }
        OsFiles.read(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<DirEntry>> {
        OsFiles.read_dir(path)
    }
    fn stat(&self, path: &Path) -> std::io::Result<EntryKind> {
        if path == self.path {
            return Ok(EntryKind::File);
        }
        OsFiles.stat(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        if path == self.path {
            return Ok(path.to_path_buf());
        }
        OsFiles.canonicalize(path)
    }
}

/// The corpus's `config.yaml` with the jobs of `yaml` (and no others).
fn corpus_config_with(yaml: &'static str) -> Snapshot {
    let path = PathBuf::from("/nonexistent/bosun-pod-golden/jobs.yaml");
    loaded(
        &LoadOptions {
            config: Some(corpus_root().join("prow/config.yaml")),
            job_config: vec![path.clone()],
            ..LoadOptions::default()
        },
        &WithJobFile { path, yaml },
    )
}

const BASE_SHA: &str = "5d3a1f0e9c8b7a6d5e4f3a2b1c0d9e8f7a6b5c4d";
const PULL_SHA: &str = "e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4";

/// A run of the presubmit `name` of `org_repo` on pull request 4242 (or of
/// the postsubmit, on a push, when `pull` is false), made as the daemon
/// makes it, with its job's context recorded as a ProwJob records it.
fn corpus_change_run(
    snapshot: &Snapshot,
    org_repo: &str,
    name: &str,
    pull: bool,
    id: &str,
    build_id: i64,
) -> (Run, SpecSnapshot) {
    corpus_change_run_with(snapshot, org_repo, name, pull, id, build_id, |_| {})
}

/// [`corpus_change_run`] with the job's pod spec edited first.
fn corpus_change_run_with(
    snapshot: &Snapshot,
    org_repo: &str,
    name: &str,
    pull: bool,
    id: &str,
    build_id: i64,
    edit: impl FnOnce(&mut PodSpec),
) -> (Run, SpecSnapshot) {
    let (org, repo) = org_repo.split_once('/').unwrap();
    let link = format!("https://github.com/{org_repo}");
    let mut refs = json!({
        "org": org, "repo": repo, "repo_link": link,
        "base_ref": "master", "base_sha": BASE_SHA,
        "base_link": format!("{link}/commit/{BASE_SHA}"),
    });
    if pull {
        refs["pulls"] = json!([{
            "number": 4242, "author": "a-contributor", "sha": PULL_SHA,
            "title": "Make the <flaky> test & friends pass",
            "link": format!("{link}/pull/4242"),
            "commit_link": format!("{link}/pull/4242/commits/{PULL_SHA}"),
            "author_link": "https://github.com/a-contributor",
        }]);
    }
    let refs: Refs = serde_json::from_value(refs).unwrap();
    let (job_type, base, context, decoration, pod_spec) = if pull {
        let job = snapshot.presubmits[org_repo]
            .iter()
            .find(|j| j.base.name == name)
            .unwrap_or_else(|| panic!("no presubmit {name}"));
        (
            JobType::Presubmit,
            &job.base,
            job.kind.context.clone(),
            snapshot.decoration_config(job, org_repo),
            snapshot.pod_spec(job),
        )
    } else {
        let job = snapshot.postsubmits[org_repo]
            .iter()
            .find(|j| j.base.name == name)
            .unwrap_or_else(|| panic!("no postsubmit {name}"));
        (
            JobType::Postsubmit,
            &job.base,
            job.kind.context.clone(),
            snapshot.decoration_config(job, org_repo),
            snapshot.pod_spec(job),
        )
    };
    assert!(decoration.is_some(), "{name} is decorated");
    let mut pod_spec = pod_spec.expect("a pod spec");
    edit(&mut pod_spec);
    let new = RunTemplate::new(base, job_type, None, Some(pod_spec), decoration).run(Some(refs));
    let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).unwrap();
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    with_context(
        (new.into_run(id.into(), build_id, "hash".into(), at), spec),
        &context,
    )
}

/// A run of the periodic `name`, made as the daemon makes it.
fn corpus_periodic_run(
    snapshot: &Snapshot,
    name: &str,
    id: &str,
    build_id: i64,
) -> (Run, SpecSnapshot) {
    let p = snapshot
        .periodics
        .iter()
        .find(|p| p.base.name == name)
        .unwrap_or_else(|| panic!("no periodic {name}"));
    let decoration = snapshot.periodic_decoration(p);
    assert!(decoration.is_some(), "{name} is decorated");
    let new = RunTemplate::periodic(p, snapshot.pod_spec(p), decoration).run(None);
    let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).unwrap();
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    (new.into_run(id.into(), build_id, "hash".into(), at), spec)
}

fn pod_of(run: &(Run, SpecSnapshot)) -> Pod {
    pod_for_run(&run.0, &run.1, "test-pods").expect("a pod")
}

/// A presubmit with a `path_alias` (`k8s.io/publishing-bot`): it is cloned
/// there (`CLONEREFS_OPTIONS` carries the alias), that is the working
/// directory, and `SRC_HOST`/`SRC_BASE` split it. The corpus's default entry
/// gives the utility images, the `service-account` GCS credentials, 100m
/// CPU requests for each utility and `blobless_fetch: true`, which every
/// ref inherits.
#[test]
fn corpus_presubmit_with_path_alias() {
    let run = corpus_change_run(
        corpus(),
        "kubernetes/publishing-bot",
        "pull-publishing-bot-test",
        true,
        "7c2e1d4f-1a2b-4c3d-8e9f-0a1b2c3d4e51",
        1_790_000_000_000_000_101,
    );
    let pod = pod_of(&run);
    let test = container(&pod, "test");
    assert_eq!(
        test.command.as_deref(),
        Some(&["/tools/entrypoint".to_string()][..])
    );
    assert_eq!(test.args, None);
    assert_eq!(
        test.working_dir.as_deref(),
        Some("/home/prow/go/src/k8s.io/publishing-bot")
    );
    assert_eq!(env_of(test, "SRC_HOST"), "k8s.io");
    assert_eq!(env_of(test, "SRC_BASE"), "publishing-bot");
    let clonerefs = env_of(container(&pod, "clonerefs"), "CLONEREFS_OPTIONS");
    assert!(
        clonerefs.contains(r#""path_alias":"k8s.io/publishing-bot""#),
        "{clonerefs}"
    );
    assert!(
        clonerefs.contains(r#""blobless_fetch":true"#),
        "{clonerefs}"
    );
    // The pull's title is HTML-escaped as Go escapes it.
    assert!(clonerefs.contains(r#"Make the \u003cflaky\u003e test \u0026 friends pass"#));
    let entry = env_of(test, "ENTRYPOINT_OPTIONS");
    assert!(
        entry.starts_with(r#"{"timeout":7200000000000,"grace_period":900000000000,"#),
        "{entry}"
    );
    assert_eq!(
        test.env.as_ref().unwrap().last().unwrap().name,
        "ENTRYPOINT_OPTIONS"
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.termination_grace_period_seconds,
        Some(1125),
        "15m x 5/4"
    );
    assert_eq!(
        volume_names(&pod),
        ["logs", "tools", "gcs-credentials", "clonerefs-tmp", "code"]
    );
    for utility in ["clonerefs", "initupload", "place-entrypoint", "sidecar"] {
        let requests = container(&pod, utility)
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone());
        assert_eq!(requests.unwrap()["cpu"].0, "100m", "{utility}");
    }
    assert!(env_of(test, "JOB_SPEC").contains(
        r#""decoration_config":{"timeout":"2h0m0s","grace_period":"15m0s","utility_images":{"clonerefs":"us-docker.pkg.dev/k8s-infra-prow/images/clonerefs:v20260821-a61940897""#
    ));
    golden("corpus_presubmit_with_path_alias", run);
}

/// A postsubmit: cloned at `github.com/ORG/REPO` (no alias), no pull
/// variables; its resources are its own (no default memory request).
#[test]
fn corpus_postsubmit() {
    let run = corpus_change_run(
        corpus(),
        "etcd-io/protodoc",
        "post-protodoc-test",
        false,
        "8d3f2e5a-2b3c-4d4e-9fa0-1b2c3d4e5f62",
        1_790_000_000_000_000_102,
    );
    let pod = pod_of(&run);
    let test = container(&pod, "test");
    assert_eq!(
        test.working_dir.as_deref(),
        Some("/home/prow/go/src/github.com/etcd-io/protodoc")
    );
    assert!(!test.env.iter().flatten().any(|e| e.name == "PULL_NUMBER"));
    let entry = env_of(test, "ENTRYPOINT_OPTIONS");
    assert!(
        entry.contains(r#""args":["runner.sh","make","test"]"#),
        "{entry}"
    );
    golden("corpus_postsubmit", run);
}

/// A periodic with four `extra_refs` (the first with a `clone_uri` and a
/// `path_alias` outside `k8s.io`) and presets: all four are cloned, in
/// order; the working directory is the first's (none says `workdir`); its
/// own `decoration_config.timeout` (75m) wins over the default's 2h.
#[test]
fn corpus_periodic_with_extra_refs() {
    let run = corpus_periodic_run(
        corpus(),
        "ci-build-and-push-k8s-at-golang-tip",
        "9e4a3f6b-3c4d-4e5f-a0b1-2c3d4e5f6a73",
        1_790_000_000_000_000_103,
    );
    let pod = pod_of(&run);
    let test = container(&pod, "test");
    assert_eq!(
        test.working_dir.as_deref(),
        Some("/home/prow/go/src/golang")
    );
    assert!(
        !test.env.iter().flatten().any(|e| e.name == "REPO_OWNER"),
        "periodics get no refs variables"
    );
    let clonerefs = env_of(container(&pod, "clonerefs"), "CLONEREFS_OPTIONS");
    let refs: Value = serde_json::from_str(&clonerefs).unwrap();
    let cloned: Vec<&str> = refs["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path_alias"].as_str().unwrap())
        .collect();
    assert_eq!(
        cloned,
        [
            "golang",
            "k8s.io/kubernetes",
            "k8s.io/perf-tests",
            "k8s.io/release"
        ]
    );
    assert_eq!(
        refs["refs"][0]["clone_uri"],
        "https://go.googlesource.com/go"
    );
    assert!(env_of(test, "ENTRYPOINT_OPTIONS").starts_with(r#"{"timeout":4500000000000,"#));
    golden("corpus_periodic_with_extra_refs", run);
}

/// A job on `k8s-infra-aks-prow-build`, whose default entry sets
/// `gcs_credentials_secret: ""`: no credentials volume, mount or file (the
/// build cluster's workload identity uploads), and `JOB_SPEC` says so.
#[test]
fn corpus_job_on_a_cluster_without_gcs_credentials() {
    let run = corpus_periodic_run(
        corpus(),
        "ci-k8s-infra-aks-build-cluster",
        "af5b4a7c-4d5e-4f60-b1c2-3d4e5f6a7b84",
        1_790_000_000_000_000_104,
    );
    let pod = pod_of(&run);
    assert_eq!(
        volume_names(&pod),
        ["logs", "tools", "clonerefs-tmp", "code"]
    );
    let sidecar = container(&pod, "sidecar");
    assert_eq!(mounts_of(sidecar), ["/logs"]);
    assert!(!env_of(sidecar, "SIDECAR_OPTIONS").contains("gcs_credentials_file"));
    assert!(env_of(sidecar, "JOB_SPEC").contains(r#""gcs_credentials_secret":"""#));
    golden("corpus_job_without_gcs_credentials", run);
}

/// `$(ARTIFACTS)` in a container's arguments goes into `ENTRYPOINT_OPTIONS`
/// as written: Kubernetes expands it there, since `ARTIFACTS` comes before
/// `ENTRYPOINT_OPTIONS` in the container's environment.
#[test]
fn corpus_artifacts_in_args() {
    let run = corpus_change_run(
        corpus(),
        "kubernetes-sigs/structured-merge-diff",
        "pull-structured-merge-diff-benchmark",
        true,
        "b06c5b8d-5e6f-4071-c2d3-4e5f6a7b8c95",
        1_790_000_000_000_000_105,
    );
    let pod = pod_of(&run);
    let test = container(&pod, "test");
    let entry = env_of(test, "ENTRYPOINT_OPTIONS");
    assert!(
        entry.contains(r#""--log-file=$(ARTIFACTS)/benchmark-log.txt""#),
        "{entry}"
    );
    let names: Vec<&str> = test.env.iter().flatten().map(|e| e.name.as_str()).collect();
    let artifacts = names.iter().position(|n| *n == "ARTIFACTS").unwrap();
    assert!(artifacts < names.len() - 1 && names.last() == Some(&"ENTRYPOINT_OPTIONS"));
    assert_eq!(
        test.working_dir.as_deref(),
        Some("/home/prow/go/src/sigs.k8s.io/structured-merge-diff")
    );
    golden("corpus_artifacts_in_args", run);
}

/// Jobs the corpus does not have, with the corpus's decoration defaults.
const MORE_JOBS: &str = r#"
presubmits:
  kubernetes/test-infra:
  - name: pull-test-infra-no-clone
    cluster: eks-prow-build-cluster
    decorate: true
    decoration_config:
      skip_cloning: true
    spec:
      containers:
      - image: alpine:3.20
        command: [sh, -c, 'echo checking > "$(ARTIFACTS)/out.txt"']
  - name: pull-test-infra-with-services
    cluster: eks-prow-build-cluster
    decorate: true
    path_alias: k8s.io/test-infra
    decoration_config:
      censor_secrets: true
      default_memory_request: 2Gi
      set_limit_equals_memory_request: true
    spec:
      containers:
      - name: unit
        image: golang:1.26
        command: [make, test]
        volumeMounts:
        - name: token
          mountPath: /etc/github
          readOnly: true
        - name: cache
          mountPath: /cache
      - name: lint
        image: golangci/golangci-lint:v2
        args: [golangci-lint, run, ./...]
        resources:
          requests:
            memory: 1Gi
        volumeMounts:
        - name: cache
          mountPath: /cache
      volumes:
      - name: token
        secret:
          secretName: github-token
      - name: cache
        emptyDir: {}
"#;

fn more_jobs() -> &'static Snapshot {
    static MORE: OnceLock<Snapshot> = OnceLock::new();
    MORE.get_or_init(|| corpus_config_with(MORE_JOBS))
}

/// `skip_cloning`: the refs stay in `JOB_SPEC`, but nothing clones them:
/// no clonerefs, no code volume, no working directory.
#[test]
fn corpus_config_skip_cloning() {
    let run = corpus_change_run(
        more_jobs(),
        "kubernetes/test-infra",
        "pull-test-infra-no-clone",
        true,
        "c17d6c9e-6f70-4182-d3e4-5f6a7b8c9da6",
        1_790_000_000_000_000_106,
    );
    let pod = pod_of(&run);
    let spec = pod.spec.as_ref().unwrap();
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(init, ["initupload", "place-entrypoint"]);
    assert_eq!(container(&pod, "test").working_dir, None);
    assert_eq!(volume_names(&pod), ["logs", "tools", "gcs-credentials"]);
    assert!(env_of(container(&pod, "test"), "JOB_SPEC").contains(r#""skip_cloning":true"#));
    golden("corpus_config_skip_cloning", run);
}

/// Two test containers and a sidecar of the job's own (a native sidecar:
/// an init container with `restartPolicy: Always`, the only init container
/// Prow lets a job have): each test container is wrapped with its own files
/// (`/logs/lint-log.txt`, ...) and listed in the sidecar's entries;
/// clonerefs comes before the job's init container, initupload and
/// place-entrypoint after it, and the job's init container is left as it
/// is. With `censor_secrets`, the secret mounted in a test container is
/// mounted in the sidecar too and listed in its censoring options; the
/// default memory request fills the container without one and the limits
/// follow the requests.
#[test]
fn corpus_config_two_containers_and_an_init_container() {
    // bosun-config refuses every init container for now (Prow accepts
    // native sidecars): the job's is added to its loaded pod spec.
    let run = corpus_change_run_with(
        more_jobs(),
        "kubernetes/test-infra",
        "pull-test-infra-with-services",
        true,
        "d28e7daf-7081-4293-e4f5-6a7b8c9daeb7",
        1_790_000_000_000_000_107,
        |spec| {
            spec.init_containers = Some(vec![serde_json::from_value(json!({
                "name": "registry",
                "image": "registry:2",
                "restartPolicy": "Always",
                "args": ["serve", "/etc/docker/registry/config.yml"],
            }))
            .unwrap()]);
        },
    );
    let pod = pod_of(&run);
    let spec = pod.spec.as_ref().unwrap();
    let init: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        init,
        ["clonerefs", "registry", "initupload", "place-entrypoint"]
    );
    let registry = container(&pod, "registry");
    assert_eq!(registry.args.as_ref().unwrap()[0], "serve");
    assert_eq!(registry.env, None, "init containers get no environment");
    let names: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["unit", "lint", "sidecar"]);
    let lint = container(&pod, "lint");
    let entry = env_of(lint, "ENTRYPOINT_OPTIONS");
    assert!(entry.contains(r#""args":["golangci-lint","run","./..."],"container_name":"lint","process_log":"/logs/lint-log.txt","marker_file":"/logs/lint-marker.txt","metadata_file":"/logs/artifacts/lint-metadata.json"}"#), "{entry}");
    assert_eq!(
        lint.working_dir.as_deref(),
        Some("/home/prow/go/src/k8s.io/test-infra")
    );
    let sidecar = container(&pod, "sidecar");
    assert_eq!(mounts_of(sidecar), ["/logs", "/secrets/gcs", "/etc/github"]);
    let options = env_of(sidecar, "SIDECAR_OPTIONS");
    assert!(
        options.ends_with(r#""censoring_options":{"secret_directories":["/etc/github"]}}"#),
        "{options}"
    );
    let memory = |c: &Container, what: &str| {
        let r = c.resources.as_ref().unwrap();
        let m = if what == "requests" {
            &r.requests
        } else {
            &r.limits
        };
        m.as_ref().unwrap()["memory"].0.clone()
    };
    let unit = container(&pod, "unit");
    assert_eq!(
        (memory(unit, "requests"), memory(unit, "limits")),
        ("2Gi".into(), "2Gi".into())
    );
    assert_eq!(
        (memory(lint, "requests"), memory(lint, "limits")),
        ("1Gi".into(), "1Gi".into())
    );
    assert_eq!(
        sidecar.resources.as_ref().unwrap().limits,
        None,
        "the sidecar is not a test container"
    );
    golden("corpus_config_two_containers_and_an_init_container", run);
}
