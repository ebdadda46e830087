//! A run as a Prow `ProwJob` (`prow.k8s.io/v1`), the document Prow's tools
//! read from `prowjob.json` beside a run's artifacts: its job, refs,
//! resolved decoration config and pod spec, and its status.

use crate::artifacts::{go_time, ProwJob, ProwJobMeta, ProwJobSpec, ProwJobStatus};
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;

/// `run` (whose spec snapshot is `spec`) as a ProwJob in `namespace` (the
/// config's `prowjob_namespace`), its status as it stands now.
pub fn document(run: &Run, spec: &SpecSnapshot, namespace: &str) -> ProwJob {
    let job = &spec.job;
    ProwJob {
        metadata: ProwJobMeta {
            name: run.id.clone(),
            namespace: namespace.to_string(),
            creation_timestamp: Some(go_time(run.created_at)),
            labels: (*run.labels).clone(),
            annotations: (*run.annotations).clone(),
        },
        spec: ProwJobSpec {
            job_type: run.job_type.as_str().into(),
            agent: job.agent.clone(),
            cluster: run
                .cluster
                .clone()
                .unwrap_or_else(|| run.configured_cluster.clone()),
            namespace: job.namespace.clone().unwrap_or_default(),
            job: run.job.clone(),
            refs: run.refs.as_ref().map(value),
            extra_refs: run.extra_refs.iter().map(value).collect(),
            report: false,
            context: String::new(),
            rerun_command: String::new(),
            pod_spec: spec.pod_spec.as_ref().map(value),
            decoration_config: spec
                .decoration
                .as_ref()
                .filter(|_| job.decorate == Some(true))
                .map(value),
        },
        status: ProwJobStatus {
            start_time: Some(go_time(run.created_at)),
            pending_time: run.pending_at.map(go_time),
            completion_time: run.completed_at.map(go_time),
            state: run.state.as_str().into(),
            description: run.description.clone(),
            url: run.url.clone().unwrap_or_default(),
            pod_name: String::new(),
            build_id: run.build_id.clone(),
        },
        ..ProwJob::default()
    }
}

fn value<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("serializable")
}
