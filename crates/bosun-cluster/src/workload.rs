//! What a run is to run on a cluster: [`Workload::for_run`] turns a run and
//! its spec snapshot into a process (a plain command, a decorated job run
//! under `bosun run-decorated`, or a Lighthouse pipeline run step by step
//! under `bosun run-pipeline`), a pod, or a Tekton PipelineRun, for the
//! kind of cluster it starts on. A start and a revival both make their
//! workload here; the executors only carry it out
//! ([`Executor::start`](crate::executor::Executor::start)). Pure: it reads
//! no clock and starts nothing.

use bosun_job::job::DecoratedJob;
use bosun_store::template::SpecSnapshot;
use bosun_store::Run;
use k8s_openapi::api::core::v1::Pod;

use crate::executor::JobProcess;
use crate::local::command_of;

pub use bosun_tekton::PIPELINE_AGENT;

/// The kinds of build cluster, as far as what runs on them goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterKind {
    /// Processes on this machine.
    Local,
    /// Pods and PipelineRuns through a Kubernetes API server.
    Kubernetes,
}

/// What a workload is made with besides its run.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// `pod_namespace`: where pods and PipelineRuns go.
    pub pod_namespace: &'a str,
    /// `prowjob_namespace`: a decorated local run's `prowjob.json`.
    pub prowjob_namespace: &'a str,
    /// The `PATH` a local run's processes get.
    pub path: &'a str,
}

/// What a run runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// A process on a local cluster.
    Process(JobProcess),
    /// A pod on a Kubernetes cluster, as plank builds it.
    Pod(Box<Pod>),
    /// A `tekton.dev/v1` PipelineRun on a Kubernetes cluster, as
    /// Lighthouse makes it (`metadata.generateName`, labels, `spec`).
    PipelineRun(Box<serde_json::Value>),
}

impl Workload {
    /// `run`'s workload on a cluster of `kind`; the error (Prow's words: "Pod
    /// can not be created: ...", "PipelineRun can not be created: ...") ends
    /// the run. A pipeline job's PipelineRun goes to Kubernetes as it is,
    /// and runs locally when everything it needs is embedded; what neither
    /// can resolve (jx's `uses:` catalog references; locally also `taskRef`,
    /// `pipelineRef`, ...) is refused here, naming the reference.
    pub fn for_run(
        run: &Run,
        spec: &SpecSnapshot,
        kind: ClusterKind,
        ctx: &Context,
    ) -> Result<Workload, String> {
        if spec.job.agent == PIPELINE_AGENT {
            return pipeline(run, spec, kind, ctx)
                .map_err(|e| format!("PipelineRun can not be created: {e}"));
        }
        match kind {
            ClusterKind::Kubernetes => crate::kube::pod::pod_for_run(run, spec, ctx.pod_namespace)
                .map(|pod| Workload::Pod(Box::new(pod)))
                .map_err(|e| format!("Pod can not be created: {e}")),
            ClusterKind::Local => {
                process(run, spec, ctx).map_err(|e| format!("Pod can not be created: {e}"))
            }
        }
    }

    /// What it is, in a word, for messages.
    pub fn word(&self) -> &'static str {
        match self {
            Workload::Process(_) => "a process",
            Workload::Pod(_) => "a pod",
            Workload::PipelineRun(_) => "a PipelineRun",
        }
    }
}

/// A run of a job with a container on a local cluster: the container's
/// command, with the job's environment (a decorated run's `JOB_SPEC`
/// carries its decoration config, as a decorated pod's).
fn process(run: &Run, spec: &SpecSnapshot, ctx: &Context) -> Result<Workload, String> {
    let pod_spec = spec.pod_spec.as_ref().ok_or("the job has no pod spec")?;
    let command = command_of(pod_spec).map_err(|e| e.to_string())?;
    let container = &pod_spec.containers[0];
    let mut env: Vec<(String, String)> = container
        .env
        .iter()
        .flatten()
        .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
        .collect();
    env.extend(bosun_job::env::job_env(run));
    env.push(("PATH".into(), ctx.path.to_string()));
    let decoration = decorated(run, spec, ctx.prowjob_namespace);
    if let Some(d) = spec.decoration.as_ref().filter(|_| decoration.is_some()) {
        let d = crate::kube::decorate::Decoration::from_config(d).ok();
        let job_spec = bosun_job::env::job_spec_json(run, d.as_ref());
        for (k, v) in env.iter_mut() {
            if k == "JOB_SPEC" {
                v.clone_from(&job_spec);
            }
        }
    }
    Ok(Workload::Process(JobProcess {
        command,
        env,
        working_dir: container.working_dir.clone(),
        decoration: decoration.map(Box::new),
        pipeline: None,
    }))
}

/// What a decorated run on a local cluster is given (none: undecorated):
/// its refs to clone, the decoration config's timeout and grace period, and
/// the run as a ProwJob for `prowjob.json`.
fn decorated(run: &Run, spec: &SpecSnapshot, namespace: &str) -> Option<DecoratedJob> {
    let d = spec
        .decoration
        .as_ref()
        .filter(|_| spec.job.decorate == Some(true))?;
    Some(DecoratedJob {
        args: Vec::new(), // the executor moves the command here
        refs: run
            .refs
            .as_deref()
            .into_iter()
            .chain(&run.extra_refs)
            .cloned()
            .collect(),
        primary: run.refs.is_some(),
        working_dir: None, // the executor moves the container's here
        skip_cloning: d.skip_cloning == Some(true),
        timeout_ns: d.timeout.map_or(0, |t| t.as_nanos()),
        grace_period_ns: d.grace_period.map_or(0, |g| g.as_nanos()),
        mirror_root: None,
        prowjob: Some(bosun_job::prowjob::document(run, spec, namespace)),
    })
}

/// A pipeline run: its PipelineRun on Kubernetes, its embedded pipeline
/// step by step on a local cluster.
fn pipeline(
    run: &Run,
    spec: &SpecSnapshot,
    kind: ClusterKind,
    ctx: &Context,
) -> Result<Workload, String> {
    use bosun_tekton::{local, model, pipelinerun};
    let pr = pipelinerun::pipeline_run(run, spec, ctx.pod_namespace).map_err(|e| e.to_string())?;
    let typed: model::PipelineRunSpec = serde_json::from_value(pr["spec"].clone())
        .map_err(|e| format!("the pipeline spec is not valid: {e}"))?;
    let uses: Vec<String> = typed
        .uses_references()
        .iter()
        .map(|u| format!("{u}"))
        .collect();
    if !uses.is_empty() {
        return Err(format!(
            "bosun cannot resolve Jenkins X catalog references: {}",
            uses.join("; ")
        ));
    }
    if kind == ClusterKind::Kubernetes {
        return Ok(Workload::PipelineRun(Box::new(pr)));
    }
    let problems = local::check(&typed);
    if !problems.is_empty() {
        let what: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        return Err(format!(
            "a local cluster cannot run this pipeline: {}",
            what.join("; ")
        ));
    }
    let generate_name = pr["metadata"]["generateName"].as_str().unwrap_or_default();
    let mut env = bosun_job::env::job_env(run);
    env.push(("PATH".into(), ctx.path.to_string()));
    Ok(Workload::Process(JobProcess {
        command: Vec::new(),
        env,
        working_dir: None,
        decoration: None,
        pipeline: Some(Box::new(local::PipelineOptions {
            spec: typed,
            name: crate::kube::pipelines::pipeline_run_name(&run.id, generate_name),
            namespace: ctx.pod_namespace.to_string(),
            uid: run.id.clone(),
            ..Default::default()
        })),
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bosun_config::types::JobType;
    use bosun_store::{NewRun, RunState};

    use super::*;

    fn run(job: &str) -> Run {
        NewRun {
            job: job.into(),
            job_type: JobType::Periodic,
            periodic: Some(job.into()),
            configured_cluster: "default".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: BTreeMap::new().into(),
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

    const CTX: Context = Context {
        pod_namespace: "pods",
        prowjob_namespace: "prow",
        path: "/usr/bin:/bin",
    };

    const CONTAINER: &str = r#"{"containers": [{"name": "test", "image": "alpine", "command": ["make"], "args": ["test"], "env": [{"name": "A", "value": "1"}]}]}"#;

    fn plain() -> String {
        format!(r#"{{"job": {{"name": "unit", "agent": "kubernetes"}}, "pod_spec": {CONTAINER}}}"#)
    }

    fn decorated() -> String {
        format!(
            r#"{{"job": {{"name": "unit", "agent": "kubernetes", "decorate": true}}, "pod_spec": {CONTAINER},
                "decoration": {{"timeout": "1h", "grace_period": "10s", "utility_images": {{"clonerefs": "a", "initupload": "b", "entrypoint": "c", "sidecar": "d"}}, "gcs_configuration": {{"bucket": "b", "path_strategy": "explicit"}}}}}}"#
        )
    }

    fn pipeline(task: &str) -> String {
        format!(
            r#"{{"job": {{"name": "release", "agent": "tekton-pipeline",
                "tekton_pipeline_run_spec": {{"v1": {{"pipelineSpec": {{"tasks": [{task}]}}}}}}}}}}"#
        )
    }

    const EMBEDDED: &str = r#"{"name": "say", "taskSpec": {"steps": [{"name": "hi", "image": "alpine", "script": "echo hi"}]}}"#;
    const BY_REF: &str = r#"{"name": "clone", "taskRef": {"name": "git-clone"}}"#;
    const USES: &str = r#"{"name": "lint", "taskSpec": {"steps": [{"name": "lint", "image": "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/lint.yaml@versionStream"}]}}"#;

    /// What a workload is, in a few words a row can expect.
    fn shape(w: &Result<Workload, String>) -> String {
        match w {
            Err(e) => format!("error: {e}"),
            Ok(Workload::Pod(pod)) => format!(
                "pod {} in {}",
                pod.metadata.name.as_deref().unwrap_or(""),
                pod.metadata.namespace.as_deref().unwrap_or("")
            ),
            Ok(Workload::PipelineRun(pr)) => format!(
                "PipelineRun {} in {}",
                pr["metadata"]["generateName"].as_str().unwrap_or(""),
                pr["metadata"]["namespace"].as_str().unwrap_or("")
            ),
            Ok(Workload::Process(p)) => match (&p.decoration, &p.pipeline) {
                (_, Some(o)) => format!("local pipeline {} of {} task(s)", o.name, {
                    o.spec.pipeline_spec.as_ref().map_or(0, |s| s.tasks.len())
                }),
                (Some(d), None) => format!(
                    "decorated process {:?}, timeout {} ns, prowjob {}",
                    p.command,
                    d.timeout_ns,
                    d.prowjob
                        .as_ref()
                        .map_or("", |j| j.metadata.namespace.as_str())
                ),
                (None, None) => format!("process {:?}", p.command),
            },
        }
    }

    #[test]
    fn each_job_becomes_what_its_cluster_runs() {
        use ClusterKind::{Kubernetes, Local};
        let rows: &[(&str, String, ClusterKind, &str)] = &[
            ("a container, locally", plain(), Local, r#"process ["make", "test"]"#),
            ("a container, on Kubernetes", plain(), Kubernetes, "pod 8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b in pods"),
            (
                "a decorated container, locally",
                decorated(),
                Local,
                r#"decorated process ["make", "test"], timeout 3600000000000 ns, prowjob prow"#,
            ),
            (
                "a decorated container, on Kubernetes",
                decorated(),
                Kubernetes,
                "pod 8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b in pods",
            ),
            ("an embedded pipeline, locally", pipeline(EMBEDDED), Local, "local pipeline unit-8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b of 1 task(s)"),
            ("an embedded pipeline, on Kubernetes", pipeline(EMBEDDED), Kubernetes, "PipelineRun unit- in pods"),
            (
                "a pipeline by reference, locally",
                pipeline(BY_REF),
                Local,
                "error: PipelineRun can not be created: a local cluster cannot run this pipeline: task clone: taskRef git-clone cannot be resolved on a local cluster (only tasks embedded with taskSpec run locally)",
            ),
            ("a pipeline by reference, on Kubernetes", pipeline(BY_REF), Kubernetes, "PipelineRun unit- in pods"),
            (
                "a jx catalog reference, anywhere",
                pipeline(USES),
                Kubernetes,
                "error: PipelineRun can not be created: bosun cannot resolve Jenkins X catalog references: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/lint.yaml@versionStream (task lint, step lint): Jenkins X catalog references are resolved by Lighthouse when it loads the pipeline, and bosun does not resolve them",
            ),
            (
                "no command, locally",
                r#"{"job": {"name": "unit", "agent": "kubernetes"}, "pod_spec": {"containers": [{"name": "test", "image": "alpine"}]}}"#.into(),
                Local,
                "error: Pod can not be created: a local cluster needs the container's command (the image is not used)",
            ),
        ];
        for (name, spec, kind, want) in rows {
            let spec: SpecSnapshot = serde_json::from_str(spec).unwrap();
            let got = shape(&Workload::for_run(&run("unit"), &spec, *kind, &CTX));
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn a_local_process_has_the_container_env_then_prows_then_path() {
        let spec: SpecSnapshot = serde_json::from_str(&plain()).unwrap();
        let Ok(Workload::Process(p)) =
            Workload::for_run(&run("unit"), &spec, ClusterKind::Local, &CTX)
        else {
            panic!("not a process")
        };
        let names: Vec<&str> = p.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names.first(), Some(&"A"));
        assert!(names.contains(&"JOB_SPEC") && names.contains(&"BUILD_ID"));
        assert_eq!(p.env.last(), Some(&("PATH".into(), "/usr/bin:/bin".into())));
    }
}
