//! Golden pods: the pod `pod_for_run` builds for a run of an undecorated job,
//! compared with `tests/golden/pod/NAME.json`. `BOSUN_BLESS=1 cargo test -p
//! bosun-cluster --test pod_golden` rewrites the files; read the diff
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

use std::path::PathBuf;

use bosun_cluster::kube::pod::pod_for_run;
use bosun_config::types::{JobBase, JobType, Refs};
use bosun_store::template::{new_run, SpecSnapshot};
use bosun_store::Run;
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
