//! The pod of a run on a Kubernetes build cluster, built as Prow's plank
//! builds the pod of an undecorated ProwJob: `decorate.ProwJobToPodLocal`
//! (with the labels of `LabelsAndAnnotationsForJob` /
//! `LabelsAndAnnotationsForSpec` and the environment of
//! `downwardapi.EnvForSpec`), then plank's `startPod`, which puts the pod in
//! `pod_namespace`.
//!
//! What was read, in kubernetes-sigs/prow (it moved there from
//! kubernetes/test-infra `prow/`):
//! - `pkg/pod-utils/decorate/podspec.go` at
//!   d04680445b20c09bac6decd92cea72de33dcece5 (`ProwJobToPodLocal`,
//!   `LabelsAndAnnotationsForSpec`, `LabelsAndAnnotationsForJob`, `KubeEnv`;
//!   the same in 087836a449afa406f3121fbd40625dc0bfa03b27);
//! - `pkg/pod-utils/downwardapi/jobspec.go` at
//!   4171797bd737e14779bd1d415d31ef661a27a9de (`JobSpec`, `EnvForSpec`,
//!   with `SRC_HOST`/`SRC_BASE`; 80627dabebadd556715292cef5c04292cff52024 is
//!   the older one without them);
//! - `pkg/kube/prowjob.go` at 150651d3dabc90beca7125d9cff6ed20cfdb146b (the
//!   label names);
//! - `pkg/pjutil/pjutil.go` at db89760fea406dd2813e331c3d52b53b5bcbd140 (a
//!   periodic's ProwJob has no context; a presubmit's labels get
//!   `prow.k8s.io/is-optional` when the ProwJob is made, not here);
//! - `pkg/apis/prowjobs/v1/types.go` (the JSON of `Refs` and `Pull` in
//!   `JOB_SPEC`: field order and `omitempty`);
//! - `pkg/plank/reconciler.go` `startPod` (namespace; its
//!   `prow.k8s.io/plank-version` label is Prow's version, which bosun does
//!   not claim).
//!
//! So, for a job (decorated or not):
//! - the pod is named after the run (the ProwJob's name), in `namespace`;
//! - its spec is the job's pod spec with `restartPolicy: Never`; a job with
//!   exactly one container has it named `test`, whatever it was called;
//!   `automountServiceAccountToken` becomes `false` when the job sets neither
//!   it nor `serviceAccountName`; every container and init container without a
//!   `terminationMessagePolicy` gets `FallbackToLogsOnError`;
//! - every container (not the init containers) gets the job's environment
//!   appended to its own, sorted by name (a variable the container already has
//!   stays, and the job's, later, wins in Kubernetes);
//! - labels: `created-by-prow`, `prow.k8s.io/type`, `prow.k8s.io/job` and
//!   `prow.k8s.io/context` (cut to 63 characters), the refs labels (of `refs`,
//!   else of `extra_refs[0]`), then the run's own labels over them, then
//!   `prow.k8s.io/id` and `prow.k8s.io/build-id`; a value that is not a valid
//!   label value is replaced by its last path element when that one is valid,
//!   else dropped;
//! - annotations: `prow.k8s.io/job` and `prow.k8s.io/context` (whole), then
//!   the run's own over them.
//!
//! Where bosun's run knows less than a ProwJob: a run does not record its
//! job's `context` yet. The pod takes it from the run's
//! `prow.k8s.io/context` annotation when there is one; a periodic's is empty,
//! as Prow's; a pre/postsubmit run without that annotation gets no context
//! label or annotation (its context may not be its name). A pull has no
//! `head_ref` in bosun, so `PULL_HEAD_REF` is empty; runs have no trigger
//! comment, so there is no `TRIGGER_COMMENT_*`. An in-repo periodic's run has
//! refs (its repository, as Lighthouse gives it) and gets the refs variables,
//! which Prow's periodics, never having refs, do not.
//!
//! A decorated run (its spec snapshot carries the resolved decoration
//! config, as a ProwJob does) gets the same pod, then Prow's pod utilities
//! around its containers ([`super::decorate`]); its `JOB_SPEC` carries the
//! decoration config. A decoration config Prow would refuse, or a decorated
//! run without one (made by an earlier bosun), is a [`PodError`].
//!
//! It knows nothing of clusters or executors: it turns a run and its job's
//! spec into a pod, and that is all.

use std::collections::BTreeMap;

use bosun_config::types::JobType;
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::decorate::{self, Decoration, DecorationError};
use bosun_job::env::prow_env;

/// The label bosun and Prow put on every pod they create.
pub const CREATED_BY: &str = "created-by-prow";
/// The run id label.
pub const ID_LABEL: &str = "prow.k8s.io/id";
/// The build id label.
pub const BUILD_ID_LABEL: &str = "prow.k8s.io/build-id";
/// The job type label.
pub const TYPE_LABEL: &str = "prow.k8s.io/type";
/// The job name: a label (cut to 63 characters) and an annotation (whole).
pub const JOB_ANNOTATION: &str = "prow.k8s.io/job";
/// The job's status context: a label (cut) and an annotation (whole).
pub const CONTEXT_ANNOTATION: &str = "prow.k8s.io/context";
/// The name of a job's only container.
pub const TEST_CONTAINER_NAME: &str = "test";

const ORG_LABEL: &str = "prow.k8s.io/refs.org";
const REPO_LABEL: &str = "prow.k8s.io/refs.repo";
const BASE_REF_LABEL: &str = "prow.k8s.io/refs.base_ref";
const PULL_LABEL: &str = "prow.k8s.io/refs.pull";
const LABEL_VALUE_MAX: usize = 63;

/// Why a run's pod cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// The job is decorated but the run carries no decoration config (it
    /// was made by a bosun that did not record it).
    #[error("the run carries no decoration config")]
    NoDecorationConfig,
    /// The run's decoration config is one Prow would refuse (Prow's text),
    /// or a decorated container does not say what to run.
    #[error("{0}")]
    Decoration(String),
    /// The job has no pod spec.
    #[error("the job has no pod spec")]
    NoPodSpec,
    /// The job's pod spec has no container.
    #[error("the job's pod spec has no container")]
    NoContainer,
}

impl From<DecorationError> for PodError {
    fn from(e: DecorationError) -> Self {
        PodError::Decoration(e.0)
    }
}

/// The pod of `run` (whose spec snapshot is `spec`) in `namespace`.
pub fn pod_for_run(run: &Run, spec: &SpecSnapshot, namespace: &str) -> Result<Pod, PodError> {
    let decoration = match (&spec.decoration, spec.job.decorate) {
        (Some(config), _) => Some(Decoration::from_config(config)?),
        (None, Some(true)) => return Err(PodError::NoDecorationConfig),
        (None, _) => None,
    };
    let mut pod_spec = spec.pod_spec.clone().ok_or(PodError::NoPodSpec)?;
    if pod_spec.containers.is_empty() {
        return Err(PodError::NoContainer);
    }
    if let Some(config) = &spec.decoration {
        decorate::check(config, &pod_spec)?;
    }
    pod_spec.restart_policy = Some("Never".into());
    if let [only] = pod_spec.containers.as_mut_slice() {
        only.name = TEST_CONTAINER_NAME.into();
    }
    // Kubernetes mounts the token when this is unset; Prow does not, unless
    // the job names a service account.
    if pod_spec.automount_service_account_token.is_none()
        && pod_spec
            .service_account_name
            .as_deref()
            .unwrap_or("")
            .is_empty()
    {
        pod_spec.automount_service_account_token = Some(false);
    }
    let env = prow_env(run, spec, decoration.as_ref());
    match &decoration {
        Some(d) => decorate::decorate(&mut pod_spec, run, d, env),
        None => {
            let env: Vec<EnvVar> = env
                .into_iter()
                .map(|(name, value)| EnvVar {
                    name,
                    value: Some(value),
                    value_from: None,
                })
                .collect();
            for c in &mut pod_spec.containers {
                c.env
                    .get_or_insert_with(Vec::new)
                    .extend(env.iter().cloned());
            }
        }
    }
    for c in pod_spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(pod_spec.containers.iter_mut())
    {
        if c.termination_message_policy
            .as_deref()
            .unwrap_or("")
            .is_empty()
        {
            c.termination_message_policy = Some("FallbackToLogsOnError".into());
        }
    }
    let (labels, annotations) = labels_and_annotations(run);
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(run.id.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    })
}

type Map = BTreeMap<String, String>;

/// The pod's labels and annotations (`LabelsAndAnnotationsForJob`).
fn labels_and_annotations(run: &Run) -> (Map, Map) {
    // The context: the run's when it records one, a periodic's (empty),
    // else unknown.
    let context = run
        .annotations
        .get(CONTEXT_ANNOTATION)
        .map(String::as_str)
        .or((run.job_type == JobType::Periodic).then_some(""));
    // Values are bytes, as Go's: a cut may split a character, and such a
    // value is then no label value.
    let mut labels: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut annotations = Map::new();
    labels.insert(CREATED_BY.into(), b"true".to_vec());
    labels.insert(TYPE_LABEL.into(), run.job_type.as_str().into());
    let mut whole = vec![(JOB_ANNOTATION, run.job.as_str())];
    whole.extend(context.map(|c| (CONTEXT_ANNOTATION, c)));
    for (key, value) in whole {
        labels.insert(key.into(), cut_label_value(value));
        annotations.insert(key.into(), value.into());
    }
    if let Some(r) = run.refs.as_deref().or(run.extra_refs.first()) {
        labels.insert(ORG_LABEL.into(), r.org.clone().into());
        labels.insert(REPO_LABEL.into(), r.repo.clone().into());
        labels.insert(
            BASE_REF_LABEL.into(),
            r.base_ref.as_deref().unwrap_or("").into(),
        );
        if let Some(p) = r.pulls.first() {
            labels.insert(PULL_LABEL.into(), p.number.to_string().into());
        }
    }
    for (k, v) in run.labels.iter() {
        labels.insert(k.clone(), v.clone().into());
    }
    labels.insert(ID_LABEL.into(), run.id.clone().into());
    labels.insert(BUILD_ID_LABEL.into(), run.build_id.clone().into());
    let labels = labels
        .into_iter()
        .filter_map(|(key, value)| {
            let safe = label_safe(&value);
            if safe.is_none() {
                tracing::warn!(
                    run = %run.id,
                    key,
                    value = %String::from_utf8_lossy(&value),
                    "removing a label whose value is not a label value"
                );
            }
            safe.map(|v| (key, v))
        })
        .collect();
    for (k, v) in run.annotations.iter() {
        annotations.insert(k.clone(), v.clone());
    }
    (labels, annotations)
}

/// A value cut to a label value's 63 bytes, without trailing `._-`.
fn cut_label_value(value: &str) -> Vec<u8> {
    let bytes = value.as_bytes();
    if bytes.len() <= LABEL_VALUE_MAX {
        return bytes.to_vec();
    }
    let mut cut = &bytes[..LABEL_VALUE_MAX];
    while let [rest @ .., b'.' | b'_' | b'-'] = cut {
        cut = rest;
    }
    cut.to_vec()
}

/// `value` if it is a label value, else its last path element if that one
/// is, else nothing.
fn label_safe(value: &[u8]) -> Option<String> {
    [value, go_base(value)].into_iter().find_map(|v| {
        std::str::from_utf8(v)
            .ok()
            .filter(|s| bosun_config::validate::label_value_errors(s).is_empty())
            .map(str::to_string)
    })
}

/// Go's `filepath.Base` on Unix: the last element of a path, trailing
/// slashes removed; `.` for an empty path and `/` for slashes only.
fn go_base(path: &[u8]) -> &[u8] {
    if path.is_empty() {
        return b".";
    }
    let trimmed = match path.iter().rposition(|&b| b != b'/') {
        Some(last) => &path[..=last],
        None => return b"/",
    };
    match trimmed.iter().rposition(|&b| b == b'/') {
        Some(slash) => &trimmed[slash + 1..],
        None => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_store::{NewRun, RunState};

    fn snapshot(json: &str) -> SpecSnapshot {
        serde_json::from_str(json).unwrap()
    }

    fn run(job: &str, labels: &[(&str, &str)]) -> Run {
        NewRun {
            job: job.into(),
            job_type: JobType::Periodic,
            periodic: Some(job.into()),
            configured_cluster: "build01".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
                .into(),
            annotations: BTreeMap::from([("prow.k8s.io/job".into(), job.into())]).into(),
            spec: serde_json::json!({}).into(),
            scheduled_at: None,
            attempt: 0,
            description: String::new(),
        }
        .into_run(
            "8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b".into(),
            1_800_000_000_000_001,
            "h".into(),
            jiff::Timestamp::UNIX_EPOCH,
        )
    }

    const SPEC: &str = r#"{"job": {"name": "x", "agent": "kubernetes"}, "pod_spec": {"containers": [
        {"name": "main", "image": "alpine", "command": ["true"], "env": [{"name": "A", "value": "1"}, {"name": "JOB_NAME", "value": "mine"}]},
        {"name": "side", "image": "sidecar"}
    ]}}"#;

    #[test]
    fn the_pod_is_named_labelled_and_given_the_job_environment() {
        let long = "a-very-long-periodic-job-name-that-goes-on-and-on-past-sixty-three-characters";
        let r = run(long, &[("team", "infra"), ("path", "gs://bucket/logs/x")]);
        let pod = pod_for_run(&r, &snapshot(SPEC), "test-pods").unwrap();
        let meta = &pod.metadata;
        assert_eq!(meta.name.as_deref(), Some(r.id.as_str()));
        assert_eq!(meta.namespace.as_deref(), Some("test-pods"));
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["created-by-prow"], "true");
        assert_eq!(labels["prow.k8s.io/type"], "periodic");
        assert_eq!(labels["prow.k8s.io/id"], r.id);
        assert_eq!(labels["prow.k8s.io/build-id"], "1800000000000001");
        assert_eq!(labels["prow.k8s.io/job"].len(), 63);
        assert!(long.starts_with(&labels["prow.k8s.io/job"]));
        assert_eq!(labels["prow.k8s.io/context"], "");
        assert_eq!(labels["team"], "infra");
        // Not a label value: replaced by its last path element.
        assert_eq!(labels["path"], "x");
        let annotations = meta.annotations.as_ref().unwrap();
        assert_eq!(annotations["prow.k8s.io/job"], long);
        assert_eq!(annotations["prow.k8s.io/context"], "");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.automount_service_account_token, Some(false));
        let names: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["main", "side"],
            "several containers keep their names"
        );
        for c in &spec.containers {
            let env = c.env.as_ref().unwrap();
            let get = |n: &str| {
                env.iter()
                    .filter(|e| e.name == n)
                    .map(|e| e.value.clone().unwrap())
                    .collect::<Vec<_>>()
            };
            assert_eq!(get("BUILD_ID"), ["1800000000000001"]);
            assert_eq!(get("BUILD_NUMBER"), ["1800000000000001"]);
            assert_eq!(get("PROW_JOB_ID"), std::slice::from_ref(&r.id));
            assert_eq!(get("JOB_TYPE"), ["periodic"]);
            assert!(get("JOB_SPEC")[0].starts_with("{\"type\":\"periodic\","));
            assert_eq!(get("REPO_OWNER"), Vec::<String>::new());
            assert_eq!(
                c.termination_message_policy.as_deref(),
                Some("FallbackToLogsOnError")
            );
        }
        // As Prow appends: the container's own variables first, then the
        // job's, sorted; the job's JOB_NAME, later, is the one in force.
        let first: Vec<_> = spec.containers[0]
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap()))
            .collect();
        assert_eq!(&first[..2], [("A", "1"), ("JOB_NAME", "mine")]);
        let names: Vec<_> = first[2..].iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "BUILD_ID",
                "BUILD_NUMBER",
                "CI",
                "JOB_NAME",
                "JOB_SPEC",
                "JOB_TYPE",
                "PROW_JOB_ID"
            ]
        );
        assert_eq!(first[5], ("JOB_NAME", long));
    }

    #[test]
    fn a_single_container_is_named_test() {
        let r = run("x", &[]);
        let one = snapshot(
            r#"{"job": {"name": "x"}, "pod_spec": {"containers": [{"name": "mine", "image": "a"}]}}"#,
        );
        let pod = pod_for_run(&r, &one, "ns").unwrap();
        assert_eq!(pod.spec.unwrap().containers[0].name, "test");
    }

    #[test]
    fn decorated_jobs_prow_would_refuse_and_empty_specs_are_refused() {
        let r = run("x", &[]);
        let refused = |json: &str| pod_for_run(&r, &snapshot(json), "ns").unwrap_err();
        // A decorated job's run made before runs carried their config.
        assert_eq!(
            refused(
                r#"{"job": {"name": "x", "decorate": true}, "pod_spec": {"containers": [{"image": "a", "command": ["t"]}]}}"#
            ),
            PodError::NoDecorationConfig
        );
        // Configs Prow's validation refuses, with its texts: a local-only
        // job relocated to Kubernetes may have no images or GCS config.
        let decorated = |decoration: &str, container: &str| {
            format!(
                r#"{{"job": {{"name": "x", "decorate": true}}, "decoration": {decoration},
                    "pod_spec": {{"containers": [{container}]}}}}"#
            )
        };
        let command = r#"{"image": "a", "command": ["make"]}"#;
        let images = r#""utility_images": {"clonerefs": "c", "initupload": "i", "entrypoint": "e", "sidecar": "s"}"#;
        let gcs = r#""gcs_configuration": {"bucket": "b", "path_strategy": "explicit"}"#;
        for (decoration, container, text) in [
            (
                r#"{"timeout": "5m"}"#.to_string(),
                command,
                "invalid decoration config: utility image config is not specified",
            ),
            (
                r#"{"utility_images": {"clonerefs": "c", "entrypoint": "e"}}"#.to_string(),
                command,
                r#"invalid decoration config: the following utility images are not specified: ["initupload" "sidecar"]"#,
            ),
            (
                format!("{{{images}}}"),
                command,
                "invalid decoration config: GCS upload configuration is not specified",
            ),
            (
                format!(r#"{{{images}, "gcs_configuration": {{"bucket": "b", "path_strategy": "legacy"}}}}"#),
                command,
                r#"invalid decoration config: GCS configuration is invalid: default org and repo must be provided for GCS strategy "legacy""#,
            ),
            (
                format!(r#"{{{images}, {gcs}, "ssh_key_secrets": ["k"], "oauth_token_secret": {{"name": "n", "key": "k"}}}}"#),
                command,
                "invalid decoration config: both OAuth token and SSH key secrets are specified",
            ),
            (
                format!(
                    r#"{{{images}, "gcs_configuration": {{"bucket": "b", "path_strategy": "explicit", "mediaTypes": {{"log": "text/plain; a"}}}}}}"#
                ),
                command,
                r#"invalid decoration config: GCS configuration is invalid: invalid extension media type "text/plain; a": mime: invalid media parameter"#,
            ),
            (
                format!(r#"{{{images}, "gcs_configuration": "gs://b"}}"#),
                command,
                "invalid decoration config: invalid type: string \"gs://b\", expected struct GcsConfiguration",
            ),
            (
                format!("{{{images}, {gcs}}}"),
                r#"{"image": "a", "args": [""]}"#,
                "decorated job containers must specify command and/or args",
            ),
        ] {
            let e = refused(&decorated(&decoration, container));
            assert!(matches!(e, PodError::Decoration(_)), "{e:?}");
            assert_eq!(e.to_string(), text);
        }
        let none = snapshot(r#"{"job": {"name": "x"}}"#);
        assert!(pod_for_run(&r, &none, "ns")
            .unwrap_err()
            .to_string()
            .contains("no pod spec"));
        let empty = snapshot(r#"{"job": {"name": "x"}, "pod_spec": {"containers": []}}"#);
        assert_eq!(
            pod_for_run(&r, &empty, "ns").unwrap_err(),
            PodError::NoContainer
        );
    }

    #[test]
    fn the_context_is_the_runs_or_a_periodics_or_none() {
        let spec =
            snapshot(r#"{"job": {"name": "x"}, "pod_spec": {"containers": [{"image": "a"}]}}"#);
        let context = |r: &Run| {
            let pod = pod_for_run(r, &spec, "ns").unwrap();
            (
                pod.metadata
                    .labels
                    .unwrap()
                    .get(CONTEXT_ANNOTATION)
                    .cloned(),
                pod.metadata
                    .annotations
                    .unwrap()
                    .get(CONTEXT_ANNOTATION)
                    .cloned(),
            )
        };
        let mut r = run("x", &[]);
        assert_eq!(context(&r), (Some(String::new()), Some(String::new())));
        r.job_type = JobType::Postsubmit;
        assert_eq!(context(&r), (None, None), "not recorded: left out");
        std::sync::Arc::make_mut(&mut r.annotations)
            .insert(CONTEXT_ANNOTATION.into(), "ci/prow/images".into());
        assert_eq!(
            context(&r),
            (Some("images".into()), Some("ci/prow/images".into()))
        );
    }

    #[test]
    fn go_base_is_filepath_base() {
        for (path, base) in [
            ("", "."),
            ("/", "/"),
            ("///", "/"),
            ("a", "a"),
            ("a/b", "b"),
            ("a/b/", "b"),
            ("gs://bucket/x//", "x"),
            ("/a", "a"),
        ] {
            assert_eq!(go_base(path.as_bytes()), base.as_bytes(), "{path:?}");
        }
    }

    #[test]
    fn label_values_are_cut_and_made_safe() {
        assert_eq!(cut_label_value(&"a".repeat(70)), "a".repeat(63).as_bytes());
        let trailing = format!("{}-._x", "a".repeat(60));
        assert_eq!(cut_label_value(&trailing), "a".repeat(60).as_bytes());
        assert_eq!(label_safe(b"ok.value"), Some("ok.value".into()));
        assert_eq!(label_safe(b""), Some(String::new()));
        assert_eq!(label_safe(b"ci/prow/unit"), Some("unit".into()));
        assert_eq!(label_safe(b"has space"), None);
        assert_eq!(label_safe(b"a/b/"), Some("b".into()));
        assert_eq!(label_safe(b"trailing/"), Some("trailing".into()));
        assert_eq!(label_safe(b"x/-bad"), None);
        // A cut inside a character: not a label value, nor its base.
        let cut = cut_label_value(&format!("{}é", "a".repeat(62)));
        assert_eq!(cut.len(), 63);
        assert_eq!(label_safe(&cut), None);
    }
}
