//! Pipeline runs on Kubernetes build clusters: a run is a Tekton
//! `tekton.dev/v1` PipelineRun, on a real kube-apiserver and etcd
//! (`bosun-kubetest`) reached as bosun's service account. The harness
//! registers Tekton's PipelineRun and TaskRun resources and plays Tekton's
//! controller (TaskRuns, step pods whose containers' logs flow through
//! `pods/log`, the `Succeeded` condition); every PipelineRun created goes
//! through Tekton's own defaulting and validation
//! (`github.com/tektoncd/pipeline`, built by `tools/tekton/build.sh`) as an
//! admission webhook, so one Tekton would refuse is refused here too.
//!
//! The executor is driven directly (as the controller drives it); the
//! health probe also through `bosun serve`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use bosun_cluster::executor::{ExecError, Executor, RunStatus};
use bosun_cluster::kube::pipelines::{pipeline_run_name, RUN_ID_LABEL};
use bosun_cluster::kube::{KubeExecutor, PodSettings, Probe};
use bosun_kubetest::tekton::{self, Step, StepCall};
use bosun_kubetest::{ControlPlane, Options, Tenant};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{json, Value};

/// A namespace of the shared control plane with Tekton, bosun's Role
/// there granting the pipeline verbs, the played Tekton controller, and
/// bosun's executor for it.
struct Cluster {
    plane: &'static ControlPlane,
    tenant: Tenant,
    exec: KubeExecutor,
    logs: tempfile::TempDir,
    player: tekton::Player,
}

fn settings(namespace: &str) -> PodSettings {
    PodSettings {
        namespace: namespace.to_string(),
        unscheduled_timeout: Duration::from_secs(300),
        pending_timeout: Duration::from_secs(600),
        terminated_pod_ttl: Duration::from_secs(24 * 3600),
        exclude_clusters: Vec::new(),
    }
}

fn executor(tenant: &Tenant, logs: PathBuf) -> KubeExecutor {
    KubeExecutor::new(
        "build-a",
        Some(tenant.kubeconfig.clone()),
        &tenant.context,
        &settings(&tenant.namespace),
        logs,
        None,
    )
    .unwrap()
}

impl Cluster {
    fn new(namespace: &str, script: impl Fn(&StepCall) -> Step + Send + Sync + 'static) -> Self {
        let plane = ControlPlane::shared();
        tekton::install(plane);
        let tenant = plane.tenant(namespace, "build-a");
        tekton::grant(plane, &tenant, &tekton::PIPELINE_VERBS);
        let logs = tempfile::tempdir().unwrap();
        let exec = executor(&tenant, logs.path().to_path_buf());
        let player = tekton::play(plane, namespace, Arc::new(script));
        Cluster {
            plane,
            tenant,
            exec,
            logs,
            player,
        }
    }

    fn pipeline_runs(&self) -> Vec<DynamicObject> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.plane.admin(),
            &self.tenant.namespace,
            &tekton::pipeline_runs(),
        );
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(api.list(&ListParams::default())).unwrap().items
    }

    fn pipeline_run(&self, name: &str) -> Option<DynamicObject> {
        self.pipeline_runs()
            .into_iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    /// Waits until run `id`'s status is `want`.
    fn wait_status(&self, id: &str, want: &RunStatus, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let now = self.exec.status(id);
            if &now == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} is {now:?}, not {want:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The run's log once `done` holds.
    fn wait_log(&self, id: &str, done: impl Fn(&str) -> bool) -> String {
        let path = self.exec.log_path(id).unwrap();
        assert!(path.starts_with(self.logs.path()));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(&path).unwrap_or_default();
            if done(&log) {
                return log;
            }
            assert!(Instant::now() < deadline, "log of {id}: {log:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A PipelineRun as Lighthouse makes one for job `build` of a pull request
/// of acme/widget: `generateName`, Lighthouse's labels and annotations (and
/// Prow's, which bosun's runs carry: Tekton copies them to the step pods,
/// which bosun must not take for a run's pod), the job's parameters, an
/// embedded pipeline (`tasks`, `finally`) and the 24 h timeout.
fn lighthouse_pipeline_run(tasks: Value, finally: Value) -> Value {
    json!({
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "generateName": "acme-widget-pr-7-build-",
            "labels": {
                "created-by-lighthouse": "true",
                "lighthouse.jenkins-x.io/job": "build",
                "lighthouse.jenkins-x.io/type": "presubmit",
                "lighthouse.jenkins-x.io/refs.org": "acme",
                "lighthouse.jenkins-x.io/refs.repo": "widget",
                "lighthouse.jenkins-x.io/refs.pull": "7",
                "lighthouse.jenkins-x.io/context": "build",
                "created-by-prow": "true",
                "prow.k8s.io/job": "build",
            },
            "annotations": {
                "lighthouse.jenkins-x.io/job": "build",
                "lighthouse.jenkins-x.io/cloneURI": "https://github.com/acme/widget.git",
            },
        },
        "spec": {
            "params": [
                {"name": "BUILD_ID", "value": "1"},
                {"name": "JOB_NAME", "value": "build"},
                {"name": "JOB_TYPE", "value": "presubmit"},
                {"name": "PULL_NUMBER", "value": "7"},
                {"name": "REPO_OWNER", "value": "acme"},
                {"name": "REPO_NAME", "value": "widget"},
                {"name": "REPO_URL", "value": "https://github.com/acme/widget.git"},
            ],
            "pipelineSpec": {
                "params": [
                    {"name": "REPO_URL", "type": "string"},
                    {"name": "PULL_NUMBER", "type": "string"},
                ],
                "tasks": tasks,
                "finally": finally,
            },
            "taskRunTemplate": {"serviceAccountName": "default"},
            "timeouts": {"pipeline": "24h0m0s"},
        },
    })
}

/// build (compile, test) then deploy (push); finally report (notify).
fn build_and_deploy() -> Value {
    lighthouse_pipeline_run(
        json!([
            {
                "name": "build",
                "params": [{"name": "url", "value": "$(params.REPO_URL)"}],
                "taskSpec": {
                    "params": [{"name": "url", "type": "string"}],
                    "steps": [
                        {"name": "compile", "image": "golang:1.22", "script": "#!/bin/sh\ngit clone $(params.url) src && make -C src build"},
                        {"name": "test", "image": "golang:1.22", "script": "make -C src test"},
                    ],
                },
            },
            {
                "name": "deploy",
                "runAfter": ["build"],
                "taskSpec": {"steps": [{"name": "push", "image": "alpine", "command": ["echo"], "args": ["pushed"]}]},
            },
        ]),
        json!([{
            "name": "report",
            "taskSpec": {"steps": [{"name": "notify", "image": "alpine", "script": "echo done"}]},
        }]),
    )
}

/// Every step writes `TASK/STEP ran` and succeeds, but `fail` (TASK/STEP),
/// which exits 2, and `hold`, which runs until cancelled.
fn script(fail: Option<&'static str>, hold: Option<&'static str>) -> impl Fn(&StepCall) -> Step {
    move |call: &StepCall| {
        let who = format!("{}/{}", call.task, call.step);
        let log = format!("{who} ran\nits second line\n");
        if fail == Some(who.as_str()) {
            Step::Exit {
                log: format!("{who} failed\n"),
                code: 2,
            }
        } else if hold == Some(who.as_str()) {
            Step::Hold {
                log: format!("{who} is waiting\n"),
            }
        } else {
            Step::Exit { log, code: 0 }
        }
    }
}

/// Whether the webhook saw `name` created and Tekton accepted it.
fn accepted_by_tekton(namespace: &str, name: &str) -> bool {
    tekton::reviews().iter().any(|r| {
        r.namespace == namespace && r.name == name && r.operation == "CREATE" && r.refused.is_none()
    })
}

#[test]
fn a_pipeline_run_succeeds_and_its_steps_logs_are_the_run_log() {
    let c = Cluster::new("tk-ok", script(None, None));
    let id = bosun_store::new_run_id();
    let pr = build_and_deploy();
    c.exec.start_pipeline(&id, &pr).unwrap();
    let name = pipeline_run_name(&id, "acme-widget-pr-7-build-");
    assert!(name.starts_with("acme-widget-pr-7-build-") && name.ends_with(&id));
    c.wait_status(&id, &RunStatus::Exited { code: 0 }, Duration::from_secs(60));
    // Created in the pod namespace under its fixed name, labelled with the
    // run, Lighthouse's labels and spec kept; Tekton's validation took it.
    let created = c.pipeline_run(&name).expect("the PipelineRun");
    let labels = created.metadata.labels.clone().unwrap();
    assert_eq!(labels[RUN_ID_LABEL], id);
    assert_eq!(labels["created-by-lighthouse"], "true");
    assert_eq!(created.data["spec"]["params"], pr["spec"]["params"]);
    assert_eq!(created.metadata.generate_name, None);
    assert!(
        accepted_by_tekton("tk-ok", &name),
        "{:?}",
        tekton::reviews()
    );
    assert_eq!(c.player.seen(), vec![name.clone()]);
    // The steps' logs in task order, each under its headers, then the end.
    let log = c.wait_log(&id, |l| l.contains("==> PipelineRun"));
    let pod = |task: &str| {
        let pods = c.plane.kubelet().list("tk-ok");
        pods.into_iter()
            .find(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .get("tekton.dev/pipelineTask")
                    == Some(&task.to_string())
            })
            .and_then(|p| p.metadata.name)
            .unwrap_or_else(|| panic!("no pod for task {task}"))
    };
    let expected = format!(
        "==> task build (pod {}) <==\n\
         --> step compile\nbuild/compile ran\nits second line\n\
         --> step test\nbuild/test ran\nits second line\n\
         ==> task deploy (pod {}) <==\n\
         --> step push\ndeploy/push ran\nits second line\n\
         ==> task report (pod {}) <==\n\
         --> step notify\nreport/notify ran\nits second line\n\
         ==> PipelineRun {name} succeeded: Succeeded: Tasks Completed: 3 (Failed: 0, Cancelled 0), Skipped: 0 <==\n",
        pod("build"),
        pod("deploy"),
        pod("report"),
    );
    assert_eq!(log, expected);
    // The step pods (labelled created-by-prow, as the PipelineRun) were
    // not taken for runs' pods: no log of their own.
    let files: Vec<_> = std::fs::read_dir(c.logs.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, vec![format!("{id}.log")]);
    // Started again (a restart between the create and its record): nothing
    // new, no error.
    c.exec.start_pipeline(&id, &pr).unwrap();
    assert_eq!(c.pipeline_runs().len(), 1);
    assert_eq!(c.exec.status(&id), RunStatus::Exited { code: 0 });
    // A restarted daemon (a second executor, same log directory) finds the
    // run by its label, and keeps its complete log even when the step pods
    // are gone (a copy would now lose the lines).
    for p in c.plane.kubelet().list("tk-ok") {
        c.plane
            .kubelet()
            .delete_now("tk-ok", p.metadata.name.as_deref().unwrap());
    }
    let again = executor(&c.tenant, c.logs.path().to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(30);
    while again.status(&id) != (RunStatus::Exited { code: 0 }) {
        assert!(Instant::now() < deadline, "{:?}", again.status(&id));
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let log = std::fs::read_to_string(again.log_path(&id).unwrap()).unwrap();
    assert_eq!(log, expected);
    drop(again);
    // Removed: the PipelineRun is deleted (its TaskRuns and pods with it).
    c.exec.remove(&id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.pipeline_runs().is_empty() || !c.plane.kubelet().list("tk-ok").is_empty() {
        assert!(Instant::now() < deadline, "still there");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!c.exec.log_path(&id).unwrap().exists());
}

#[test]
fn a_failing_step_fails_the_pipeline_run() {
    let c = Cluster::new("tk-fail", script(Some("build/compile"), None));
    let id = bosun_store::new_run_id();
    c.exec.start_pipeline(&id, &build_and_deploy()).unwrap();
    c.wait_status(&id, &RunStatus::Exited { code: 1 }, Duration::from_secs(60));
    let log = c.wait_log(&id, |l| l.contains("==> PipelineRun"));
    // The failed step's output; the steps after it did not run (their
    // headers, no lines), deploy was skipped, finally ran; the last line
    // says why.
    assert!(
        log.contains("--> step compile\nbuild/compile failed\n--> step test\n==> task report"),
        "{log}"
    );
    assert!(!log.contains("deploy"), "{log}");
    assert!(log.contains("report/notify ran\n"), "{log}");
    assert!(
        log.ends_with(
            "ended: Failed: Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 1 <==\n"
        ),
        "{log}"
    );
}

#[test]
fn an_aborted_pipeline_run_is_cancelled_and_ends_when_tekton_says() {
    let c = Cluster::new("tk-abort", script(None, Some("build/test")));
    let id = bosun_store::new_run_id();
    c.exec.start_pipeline(&id, &build_and_deploy()).unwrap();
    c.wait_status(&id, &RunStatus::Running { pid: 0 }, Duration::from_secs(60));
    c.wait_log(&id, |l| l.contains("build/test is waiting\n"));
    let name = pipeline_run_name(&id, "acme-widget-pr-7-build-");
    // Abort asks Tekton to cancel (spec.status); the run stays running
    // until Tekton reports the PipelineRun cancelled.
    c.exec.abort(&id, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pr = c.pipeline_run(&name).unwrap();
        if pr.data["spec"]["status"] == "Cancelled" {
            break;
        }
        assert!(Instant::now() < deadline, "not cancelled: {:?}", pr.data);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        tekton::reviews()
            .iter()
            .any(|r| r.name == name && r.operation == "UPDATE" && r.refused.is_none()),
        "Tekton's validation took the cancellation"
    );
    c.wait_status(
        &id,
        &RunStatus::Exited { code: 143 },
        Duration::from_secs(30),
    );
    let pr = c.pipeline_run(&name).unwrap();
    let cond = &pr.data["status"]["conditions"][0];
    assert_eq!(
        (cond["status"].as_str(), cond["reason"].as_str()),
        (Some("False"), Some("Cancelled"))
    );
    let log = c.wait_log(&id, |l| l.contains("==> PipelineRun"));
    assert!(
        log.contains("build/compile ran\nits second line\n--> step test\nbuild/test is waiting\n"),
        "{log}"
    );
    assert!(
        log.ends_with(&format!(
            "ended: Cancelled: PipelineRun \"{name}\" was cancelled <==\n"
        )),
        "{log}"
    );
    // Aborting an ended run asks nothing more.
    c.exec.abort(&id, Duration::from_secs(5));
}

#[test]
fn a_pipeline_run_tekton_refuses_is_refused() {
    let c = Cluster::new("tk-invalid", script(None, None));
    let id = bosun_store::new_run_id();
    // A step with both a script and a command: Tekton's validation refuses
    // it (the CRD's schema would not).
    let mut pr = build_and_deploy();
    pr["spec"]["pipelineSpec"]["tasks"][1]["taskSpec"]["steps"][0]["script"] = json!("echo x");
    match c.exec.start_pipeline(&id, &pr) {
        Err(ExecError::Refused(why)) => {
            assert!(
                why.contains("validation.webhook.pipeline.tekton.dev"),
                "{why}"
            );
            assert!(why.contains("script cannot be used with command"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(c.pipeline_runs().is_empty());
    // Not a tekton.dev/v1 PipelineRun: refused before the API is asked.
    let mut beta = build_and_deploy();
    beta["apiVersion"] = json!("tekton.dev/v1beta1");
    assert!(matches!(
        c.exec.start_pipeline(&id, &beta),
        Err(ExecError::Refused(why)) if why.contains("not a tekton.dev/v1 PipelineRun")
    ));
}

#[test]
fn a_cluster_without_tekton_refuses_pipeline_runs_clearly() {
    let plane = ControlPlane::dedicated(Options::default());
    let tenant = plane.tenant("no-tekton", "build-a");
    // bosun may use PipelineRuns (RBAC names resources that need not
    // exist); without that, the API answers 403 before it looks.
    tekton::grant(&plane, &tenant, &tekton::PIPELINE_VERBS);
    let logs = tempfile::tempdir().unwrap();
    let exec = executor(&tenant, logs.path().to_path_buf());
    let id = bosun_store::new_run_id();
    assert_eq!(
        exec.start_pipeline(&id, &build_and_deploy()),
        Err(ExecError::Refused(
            "tekton.dev/v1 PipelineRuns are not served by cluster build-a: is Tekton installed?"
                .into()
        ))
    );
    // Pod runs are not held up: a run whose pod is missing is still
    // revivable once its START_GRACE has passed (here: never started).
    let other = bosun_store::new_run_id();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match exec.status(&other) {
            RunStatus::Revivable(why) => {
                assert_eq!(why, "its pod disappearing");
                break;
            }
            s => assert!(Instant::now() < deadline, "{s:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn probe(tenant: &Tenant, pipelines: bool) -> Probe {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = bosun_cluster::kube::client(Some(&tenant.kubeconfig), &tenant.context)
            .await
            .unwrap();
        bosun_cluster::kube::probe_with_pipelines(&client, &tenant.namespace, pipelines).await
    })
}

#[test]
fn the_health_probe_asks_for_the_pipeline_verbs_of_a_cluster_with_pipeline_jobs() {
    let plane = ControlPlane::shared();
    tekton::install(plane);
    let tenant = plane.tenant("tk-probe", "build-a");
    // The tenant's Role has the pod verbs only: enough for pods, not for
    // pipelines; a start is refused by RBAC.
    assert_eq!(probe(&tenant, false), Probe::Allowed);
    let denied = vec![
        "create pipelineruns.tekton.dev".to_string(),
        "delete pipelineruns.tekton.dev".into(),
        "list pipelineruns.tekton.dev".into(),
        "watch pipelineruns.tekton.dev".into(),
        "patch pipelineruns.tekton.dev".into(),
    ];
    assert_eq!(probe(&tenant, true), Probe::Denied(denied));
    let exec = executor(&tenant, tempfile::tempdir().unwrap().keep());
    match exec.start_pipeline(&bosun_store::new_run_id(), &build_and_deploy()) {
        Err(ExecError::Refused(why)) => assert!(why.contains("forbidden"), "{why}"),
        other => panic!("{other:?}"),
    }
    tekton::grant(plane, &tenant, &["create", "list", "watch", "get"]);
    assert_eq!(
        probe(&tenant, true),
        Probe::Denied(vec![
            "delete pipelineruns.tekton.dev".into(),
            "patch pipelineruns.tekton.dev".into()
        ])
    );
    tekton::grant(plane, &tenant, &tekton::PIPELINE_VERBS);
    assert_eq!(probe(&tenant, true), Probe::Allowed);

    // Through bosun serve: a cluster with a pipeline job is probed for
    // them, and MissingPermissions names what is missing.
    let missing = plane.tenant("tk-probe-serve", "build-a");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("jobs")).unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "pod_namespace: tk-probe-serve\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("jobs/jobs.yaml"),
        "periodics:\n- name: pipeline\n  cron: \"0 0 31 2 *\"\n  cluster: build-a\n  agent: tekton-pipeline\n  pipeline_run_spec:\n    pipelineSpec: {tasks: [{name: t, taskSpec: {steps: [{name: s, image: alpine, script: \"true\"}]}}]}\n",
    )
    .unwrap();
    let daemon = common::serve(
        dir.path(),
        &["--kubeconfig".as_ref(), missing.kubeconfig.as_os_str()],
        &[("BOSUN_HEALTH_INTERVAL_MS", "200")],
    );
    let cluster = |want: &str| -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, body) = common::request(daemon.port, "GET", "/api/v1/clusters", None, None);
            let v: Value = serde_json::from_str(&body).unwrap();
            let c = v["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["alias"] == "build-a")
                .cloned()
                .unwrap();
            if c["status"] == want {
                return c;
            }
            assert!(Instant::now() < deadline, "never {want}: {c}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let c = cluster("MissingPermissions");
    let reason = c["reason"].as_str().unwrap();
    assert!(reason.contains("create pipelineruns.tekton.dev"), "{c}");
    assert!(!reason.contains("pods"), "{c}");
    tekton::grant(plane, &missing, &tekton::PIPELINE_VERBS);
    cluster("Reachable");
}
