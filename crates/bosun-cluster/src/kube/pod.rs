//! The pod of a run on a Kubernetes build cluster, built as Prow's plank
//! builds the pod of an undecorated ProwJob (`ProwJobToPod`): named after the
//! run, in the `pod_namespace`, with Prow's labels and annotations, the job's
//! pod spec, `restartPolicy: Never`, and the job's environment (`JOB_NAME`,
//! `BUILD_ID`, `JOB_SPEC`, ...) in every container.
//!
//! Decorated jobs are not built here: their runs end in error until bosun
//! decorates pods.
//!
//! It knows nothing of clusters or executors: it turns a run and its job's
//! spec into a pod, and that is all.

use std::collections::BTreeMap;

use bosun_store::template::{job_label, SpecSnapshot};
use bosun_store::Run;
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The label bosun and Prow put on every pod they create.
pub const CREATED_BY: &str = "created-by-prow";
/// The run id label.
pub const ID_LABEL: &str = "prow.k8s.io/id";
/// The build id label.
pub const BUILD_ID_LABEL: &str = "prow.k8s.io/build-id";

/// Why a run's pod cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// The job is decorated, which bosun does not do yet.
    #[error("decoration is not supported yet")]
    Decorated,
    /// The job has no pod spec.
    #[error("the job has no pod spec")]
    NoPodSpec,
    /// The job's pod spec has no container.
    #[error("the job's pod spec has no container")]
    NoContainer,
}

/// The pod of `run` (whose spec snapshot is `spec`) in `namespace`.
pub fn pod_for_run(run: &Run, spec: &SpecSnapshot, namespace: &str) -> Result<Pod, PodError> {
    if spec.job.decorate == Some(true) {
        return Err(PodError::Decorated);
    }
    let mut pod_spec = spec.pod_spec.clone().ok_or(PodError::NoPodSpec)?;
    if pod_spec.containers.is_empty() {
        return Err(PodError::NoContainer);
    }
    pod_spec.restart_policy = Some("Never".into());
    let env: Vec<EnvVar> = run
        .job_env()
        .into_iter()
        .map(|(name, value)| EnvVar {
            name,
            value: Some(value),
            value_from: None,
        })
        .collect();
    for c in &mut pod_spec.containers {
        // The job's environment wins over a container's own variable of the
        // same name (the validator forbids those names in job configs).
        let own = c.env.take().unwrap_or_default();
        let mut all: Vec<EnvVar> = own
            .into_iter()
            .filter(|e| !env.iter().any(|j| j.name == e.name))
            .collect();
        all.extend(env.iter().cloned());
        c.env = Some(all);
    }
    let mut labels: BTreeMap<String, String> = (*run.labels).clone();
    labels.insert(CREATED_BY.into(), "true".into());
    labels.insert("prow.k8s.io/job".into(), job_label(&run.job));
    labels.insert("prow.k8s.io/type".into(), run.job_type.as_str().into());
    labels.insert(ID_LABEL.into(), run.id.clone());
    labels.insert(BUILD_ID_LABEL.into(), run.build_id.clone());
    // As Prow: a value that is not a valid label value is replaced by its
    // last path element when that one is valid, else dropped.
    let labels = labels
        .into_iter()
        .filter_map(|(k, v)| {
            if bosun_config::validate::label_value_errors(&v).is_empty() {
                return Some((k, v));
            }
            let base = v.rsplit('/').next().unwrap_or_default().to_string();
            bosun_config::validate::label_value_errors(&base)
                .is_empty()
                .then_some((k, base))
        })
        .collect();
    let mut annotations = (*run.annotations).clone();
    annotations.insert("prow.k8s.io/job".into(), run.job.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::JobType;
    use bosun_store::{NewRun, RunState};

    fn snapshot(yaml: &str) -> SpecSnapshot {
        serde_json::from_value(serde_json::from_str::<serde_json::Value>(yaml).unwrap()).unwrap()
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

    const SPEC: &str = r#"{"job": {"name": "x"}, "pod_spec": {"containers": [
        {"image": "alpine", "command": ["true"], "env": [{"name": "A", "value": "1"}, {"name": "JOB_NAME", "value": "mine"}]},
        {"image": "sidecar"}
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
        assert_eq!(labels["team"], "infra");
        // Not a label value: replaced by its last path element.
        assert_eq!(labels["path"], "x");
        assert_eq!(meta.annotations.as_ref().unwrap()["prow.k8s.io/job"], long);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        for c in &spec.containers {
            let env = c.env.as_ref().unwrap();
            let get = |n: &str| {
                env.iter()
                    .filter(|e| e.name == n)
                    .map(|e| e.value.clone().unwrap())
                    .collect::<Vec<_>>()
            };
            assert_eq!(get("JOB_NAME"), [long], "the job's own value, once");
            assert_eq!(get("BUILD_ID"), ["1800000000000001"]);
            assert_eq!(get("PROW_JOB_ID"), std::slice::from_ref(&r.id));
            assert_eq!(get("JOB_TYPE"), ["periodic"]);
            assert!(get("JOB_SPEC")[0].contains("\"type\":\"periodic\""));
        }
        let first = spec.containers[0].env.as_ref().unwrap();
        assert!(
            first.iter().any(|e| e.name == "A"),
            "the container's own env stays"
        );
    }

    #[test]
    fn decorated_jobs_and_empty_specs_are_refused() {
        let r = run("x", &[]);
        let decorated = snapshot(
            r#"{"job": {"name": "x", "decorate": true}, "pod_spec": {"containers": [{"image": "a"}]}}"#,
        );
        assert_eq!(
            pod_for_run(&r, &decorated, "ns").unwrap_err().to_string(),
            "decoration is not supported yet"
        );
        let none = snapshot(r#"{"job": {"name": "x"}}"#);
        assert!(pod_for_run(&r, &none, "ns")
            .unwrap_err()
            .to_string()
            .contains("no pod spec"));
    }
}
