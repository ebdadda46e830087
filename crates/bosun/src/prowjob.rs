//! A run as a Prow `ProwJob` document (`prow.k8s.io/v1`), the shape Prow's
//! tools read from `prowjob.json` beside a run's artifacts (Spyglass, the
//! `mkpj`/`phaino` family): its job, refs, resolved decoration config and pod
//! spec, and its status.

use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use serde_json::{json, Map, Value};

/// `run` (whose spec snapshot is `spec`) as a ProwJob, with its status as it
/// stands now.
pub fn document(run: &Run, spec: &SpecSnapshot) -> Value {
    let job = &spec.job;
    let mut s = Map::new();
    s.insert("type".into(), run.job_type.as_str().into());
    s.insert("agent".into(), job.agent.clone().into());
    s.insert(
        "cluster".into(),
        run.cluster
            .clone()
            .unwrap_or_else(|| run.configured_cluster.clone())
            .into(),
    );
    if let Some(ns) = job.namespace.as_deref().filter(|n| !n.is_empty()) {
        s.insert("namespace".into(), ns.into());
    }
    s.insert("job".into(), run.job.clone().into());
    if let Some(r) = &run.refs {
        s.insert("refs".into(), to_value(r));
    }
    if !run.extra_refs.is_empty() {
        s.insert("extra_refs".into(), to_value(&run.extra_refs));
    }
    if let Some(d) = spec
        .decoration
        .as_ref()
        .filter(|_| job.decorate == Some(true))
    {
        s.insert("decoration_config".into(), to_value(d));
    }
    if let Some(p) = &spec.pod_spec {
        s.insert("pod_spec".into(), to_value(p));
    }
    let mut status = Map::new();
    status.insert("startTime".into(), run.created_at.to_string().into());
    if let Some(t) = run.pending_at {
        status.insert("pendingTime".into(), t.to_string().into());
    }
    if let Some(t) = run.completed_at {
        status.insert("completionTime".into(), t.to_string().into());
    }
    status.insert("state".into(), run.state.as_str().into());
    if !run.description.is_empty() {
        status.insert("description".into(), run.description.clone().into());
    }
    if let Some(u) = &run.url {
        status.insert("url".into(), u.clone().into());
    }
    status.insert("build_id".into(), run.build_id.clone().into());
    json!({
        "kind": "ProwJob",
        "apiVersion": "prow.k8s.io/v1",
        "metadata": {
            "name": run.id,
            "labels": &*run.labels,
            "annotations": &*run.annotations,
            "creationTimestamp": run.created_at.to_string(),
        },
        "spec": s,
        "status": status,
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("serializable")
}
