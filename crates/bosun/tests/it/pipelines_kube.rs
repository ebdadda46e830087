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
//! health probe also through `bosun serve`. End to end, `bosun serve` runs
//! an in-repo Lighthouse repository's pipeline jobs (`.lighthouse/jobs`,
//! `source:` PipelineRuns) on the cluster: success with the steps' logs,
//! failure, an abort (after a restart), a PipelineRun deleted behind
//! bosun's back, a jx `uses:` step, and Lighthouse's parameters as the API
//! server has them; and on two replicas on PostgreSQL, a PipelineRun in
//! flight when its leader dies.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_cluster::executor::{ExecError, Executor, RunStatus};
use bosun_cluster::kube::pipelines::{pipeline_run_name, RUN_ID_LABEL};
use bosun_cluster::kube::{KubeExecutor, PodSettings, Probe};
use bosun_kubetest::tekton::{self, Step, StepCall};
use bosun_kubetest::{ControlPlane, Options, Tenant};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{json, Value};

use crate::common;

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

/// The name of the pod of `task` in `namespace`.
fn task_pod(c: &Cluster, namespace: &str, task: &str) -> String {
    c.plane
        .kubelet()
        .list(namespace)
        .into_iter()
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
}

/// The whole log of [`build_and_deploy`]'s PipelineRun `name`
/// when every step wrote its two lines and succeeded (`pod` names each
/// task's pod): the steps' logs in task order, each under its headers,
/// then the end.
fn succeeded_log(name: &str, pod: impl Fn(&str) -> String) -> String {
    format!(
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
    )
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
    let expected = succeeded_log(&name, |task| task_pod(&c, "tk-ok", task));
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

/// A step quiet for longer than any call to the API may take (10 s) keeps
/// its one follow: a running step's log is followed on a stream
/// connection, which has no read timeout.
#[test]
fn a_quiet_steps_log_keeps_its_one_follow() {
    let c = Cluster::new("tk-quiet", script(None, Some("build/compile")));
    let id = bosun_store::new_run_id();
    c.exec.start_pipeline(&id, &build_and_deploy()).unwrap();
    c.wait_log(&id, |l| l.contains("build/compile is waiting\n"));
    let kubelet = c.plane.kubelet();
    let pod = task_pod(&c, "tk-quiet", "build");
    std::thread::sleep(Duration::from_secs(12));
    kubelet.append_container_log("tk-quiet", &pod, "step-compile", "after the quiet\n");
    c.wait_log(&id, |l| {
        l.contains("build/compile is waiting\nafter the quiet\n")
    });
    assert_eq!(kubelet.log_requests("tk-quiet", &pod), 1);
    c.exec.abort(&id, Duration::from_secs(5));
    c.wait_status(
        &id,
        &RunStatus::Exited { code: 143 },
        Duration::from_secs(30),
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

/// A replica that stops leading stops copying a PipelineRun's logs at
/// its next request (the leader copies them), and its copy counts as
/// unfinished; once it leads again it copies the log whole from the start.
#[test]
fn a_pipeline_runs_log_is_copied_only_while_the_executor_may_act() {
    // Step build/test writes nothing until released; then every step exits 0.
    let release = Arc::new(AtomicBool::new(false));
    let held = release.clone();
    let mut c = Cluster::new("tk-lead", move |call: &StepCall| {
        let who = format!("{}/{}", call.task, call.step);
        while who == "build/test" && !held.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Step::ok(&format!("{who} ran\nits second line\n"))
    });
    let open = Arc::new(AtomicBool::new(true));
    let gate = open.clone();
    c.exec = executor(&c.tenant, c.logs.path().to_path_buf())
        .acting_only_while(Arc::new(move || gate.load(Ordering::SeqCst)));
    let id = bosun_store::new_run_id();
    c.exec.start_pipeline(&id, &build_and_deploy()).unwrap();
    // The copy follows build/test's log when the term ends.
    c.wait_log(&id, |l| l.contains("--> step test\n"));
    open.store(false, Ordering::SeqCst);
    release.store(true, Ordering::SeqCst);
    c.wait_status(&id, &RunStatus::Exited { code: 0 }, Duration::from_secs(60));
    let path = c.exec.log_path(&id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while path.exists() {
        assert!(
            Instant::now() < deadline,
            "the copy went on without the gate: {:?}",
            std::fs::read_to_string(&path)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pod = |task: &str| task_pod(&c, "tk-lead", task);
    let reads = c.plane.kubelet().log_requests("tk-lead", &pod("build"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(!path.exists());
    assert!(!c.exec.log_complete(&id), "a waiting copy is unfinished");
    assert_eq!(
        c.plane.kubelet().log_requests("tk-lead", &pod("build")),
        reads
    );
    assert_eq!(c.plane.kubelet().log_requests("tk-lead", &pod("deploy")), 0);
    // Leading again: the whole log, from the start.
    open.store(true, Ordering::SeqCst);
    let log = c.wait_log(&id, |l| l.contains("==> PipelineRun"));
    let name = pipeline_run_name(&id, "acme-widget-pr-7-build-");
    assert_eq!(log, succeeded_log(&name, pod));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !c.exec.log_complete(&id) {
        assert!(Instant::now() < deadline, "the copy never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// A replica's executor creates no PipelineRun while its gate is shut (a
/// term that ended while the creation waited its turn): the start fails
/// back as one to try again, and goes through once the gate opens.
#[test]
fn a_pipeline_run_is_created_only_while_the_executor_may_act() {
    let mut c = Cluster::new("tk-gate", script(None, None));
    let open = Arc::new(AtomicBool::new(false));
    let gate = open.clone();
    c.exec = executor(&c.tenant, c.logs.path().to_path_buf())
        .acting_only_while(Arc::new(move || gate.load(Ordering::SeqCst)));
    let id = bosun_store::new_run_id();
    let pr = build_and_deploy();
    match c.exec.start_pipeline(&id, &pr) {
        Err(ExecError::Transient(why)) => assert!(why.contains("may not act"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(c.pipeline_runs().is_empty());
    open.store(true, Ordering::SeqCst);
    c.exec.start_pipeline(&id, &pr).unwrap();
    c.wait_status(&id, &RunStatus::Exited { code: 0 }, Duration::from_secs(60));
    assert_eq!(c.pipeline_runs().len(), 1);
}

/// A burst of PipelineRuns on a cluster whose API server sheds bosun's
/// creations of them over three at once (each also waits for Tekton's
/// validation): the shed ones wait their `Retry-After` and are tried again
/// by the executor, as pods are, and every start succeeds; none fails
/// back to the controller.
#[test]
fn a_shed_pipeline_run_creation_waits_its_retry_after() {
    let c = Cluster::new("tk-shed", script(None, None));
    let level = c
        .tenant
        .shed_creations_over_three(("tekton.dev", "pipelineruns"));
    let rejected = || {
        let text = c.plane.get_text("/metrics").unwrap();
        bosun_kubetest::metrics::sum(
            &text,
            "apiserver_flowcontrol_rejected_requests_total",
            |l| l.get("priority_level") == level,
        )
    };
    let mut started = 0;
    // Until a round meets the API server's shedding (how many creations
    // are in flight at once depends on how the machine schedules them).
    for _ in 0..3 {
        let outcomes: Vec<Result<(), ExecError>> = std::thread::scope(|s| {
            let starts: Vec<_> = (0..24)
                .map(|_| {
                    s.spawn(|| {
                        let id = bosun_store::new_run_id();
                        c.exec.start_pipeline(&id, &build_and_deploy())
                    })
                })
                .collect();
            starts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for outcome in &outcomes {
            assert!(outcome.is_ok(), "a start failed back: {outcome:?}");
        }
        started += outcomes.len();
        if rejected() > 0.0 {
            break;
        }
    }
    assert!(
        rejected() > 0.0,
        "no creation was shed: the test proves nothing"
    );
    assert_eq!(c.pipeline_runs().len(), started);
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
        &[
            "--kubeconfig".as_ref(),
            missing.kubeconfig.as_os_str(),
            "--health-interval".as_ref(),
            "200ms".as_ref(),
        ],
        &[],
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

// --- Through `bosun serve`: a Lighthouse repository's pipeline jobs ------

/// `.lighthouse/jobs/triggers.yaml` of acme/widget: periodics (which fire
/// only when triggered) on cluster build-a, each naming its `source:`.
const TRIGGERS: &str = r#"
apiVersion: config.lighthouse.jenkins-x.io/v1alpha1
kind: TriggerConfig
spec:
  periodics:
  - name: nightly
    cron: "0 0 31 2 *"
    cluster: build-a
    source: nightly.yaml
  - name: broken
    cron: "0 0 31 2 *"
    cluster: build-a
    source: broken.yaml
  - name: slow
    cron: "0 0 31 2 *"
    cluster: build-a
    source: slow.yaml
  - name: catalog
    cron: "0 0 31 2 *"
    cluster: build-a
    source: catalog.yaml
"#;

/// A `v1beta1` source, as most Lighthouse repositories still write them
/// (bosun converts it to `v1`): build (compile, test), then deploy (push);
/// finally report (notify).
const NIGHTLY: &str = r#"
apiVersion: tekton.dev/v1beta1
kind: PipelineRun
metadata:
  name: nightly
spec:
  serviceAccountName: tekton-bot
  pipelineSpec:
    params:
    - name: REPO_URL
      type: string
    tasks:
    - name: build
      params:
      - name: url
        value: $(params.REPO_URL)
      taskSpec:
        params:
        - name: url
          type: string
        steps:
        - name: compile
          image: golang:1.22
          script: |
            #!/bin/sh
            git clone $(params.url) src && make -C src build
        - name: test
          image: golang:1.22
          resources:
            requests:
              cpu: "1"
          script: make -C src test
    - name: deploy
      runAfter: [build]
      taskSpec:
        steps:
        - name: push
          image: alpine
          command: [echo]
          args: [pushed]
    finally:
    - name: report
      taskSpec:
        steps:
        - name: notify
          image: alpine
          script: echo done
"#;

/// check (lint fails, vet never runs); finally cleanup.
const BROKEN: &str = r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
spec:
  pipelineSpec:
    tasks:
    - name: check
      taskSpec:
        steps:
        - name: lint
          image: golangci/golangci-lint
          script: golangci-lint run
        - name: vet
          image: golang:1.22
          script: go vet ./...
    finally:
    - name: cleanup
      taskSpec:
        steps:
        - name: tidy
          image: alpine
          script: echo tidy
"#;

/// wait (sleep runs until cancelled).
const SLOW: &str = r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
spec:
  pipelineSpec:
    tasks:
    - name: wait
      taskSpec:
        steps:
        - name: sleep
          image: alpine
          script: sleep 3600
"#;

/// A Jenkins X build pack pipeline: its steps come from jx's catalog
/// (`uses:`), which Lighthouse resolves and bosun does not.
const CATALOG: &str = r#"
apiVersion: tekton.dev/v1beta1
kind: PipelineRun
metadata:
  name: release
spec:
  pipelineSpec:
    tasks:
    - name: from-build-pack
      taskSpec:
        stepTemplate:
          image: uses:jenkins-x/jx3-pipeline-catalog/tasks/go/release.yaml@versionStream
          name: ""
          workingDir: /workspace/source
        steps:
        - image: uses:jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone.yaml@versionStream
          name: ""
        - name: next-version
        - name: build-make-build
"#;

/// The steps of the served repository's pipelines: `check/lint` fails,
/// `wait/sleep` runs until cancelled, every other step succeeds.
fn served_script() -> impl Fn(&StepCall) -> Step {
    script(Some("check/lint"), Some("wait/sleep"))
}

/// acme/widget's checkout under `dir` (its `.lighthouse/jobs`), and the
/// configuration of a `bosun serve` that follows it and runs its jobs on
/// cluster build-a, in `namespace`.
fn widget(dir: &std::path::Path, namespace: &str) -> String {
    let checkout = dir.join("widget");
    let lh = checkout.join(".lighthouse/jobs");
    std::fs::create_dir_all(&lh).unwrap();
    for (file, text) in [
        ("triggers.yaml", TRIGGERS),
        ("nightly.yaml", NIGHTLY),
        ("broken.yaml", BROKEN),
        ("slow.yaml", SLOW),
        ("catalog.yaml", CATALOG),
    ] {
        std::fs::write(lh.join(file), text).unwrap();
    }
    format!(
        "pod_namespace: {namespace}\nin_repo:\n- {{repo: acme/widget, path: {}, branch: main}}\nin_repo_config:\n  allowed_clusters:\n    acme/widget: [build-a]\n",
        checkout.display()
    )
}

/// acme/widget's Lighthouse jobs, run by `bosun serve` on cluster build-a
/// (a namespace of the shared control plane with Tekton, bosun's Roles for
/// pods and pipelines, the played Tekton controller).
struct Served {
    plane: &'static ControlPlane,
    tenant: Tenant,
    player: tekton::Player,
    daemon: common::Serve,
    dir: tempfile::TempDir,
}

impl Served {
    fn new(namespace: &str) -> Self {
        let plane = ControlPlane::shared();
        tekton::install(plane);
        let tenant = plane.tenant(namespace, "build-a");
        tekton::grant(plane, &tenant, &tekton::PIPELINE_VERBS);
        let player = tekton::play(plane, namespace, Arc::new(served_script()));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("jobs")).unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            widget(dir.path(), namespace),
        )
        .unwrap();
        let daemon = common::serve(
            dir.path(),
            &[
                "--kubeconfig".as_ref(),
                tenant.kubeconfig.as_os_str(),
                "--health-interval".as_ref(),
                "200ms".as_ref(),
            ],
            &[],
        );
        Served {
            plane,
            tenant,
            player,
            daemon,
            dir,
        }
    }

    fn ns(&self) -> &str {
        &self.tenant.namespace
    }

    /// Stops the daemon and starts it again on the same data.
    fn restart(&mut self) {
        let _ = self.daemon.child.kill();
        let _ = self.daemon.child.wait();
        self.daemon = common::serve(
            self.dir.path(),
            &[
                "--kubeconfig".as_ref(),
                self.tenant.kubeconfig.as_os_str(),
                "--health-interval".as_ref(),
                "200ms".as_ref(),
            ],
            &[],
        );
    }

    fn trigger(&self, job: &str) -> String {
        let body = format!(r#"{{"job": "{job}"}}"#);
        let (status, body) =
            common::request(self.daemon.port, "POST", "/api/v1/runs", Some(&body), None);
        assert_eq!(status, 201, "{body}");
        let run: Value = serde_json::from_str(&body).unwrap();
        run["id"].as_str().unwrap().to_string()
    }

    fn run(&self, id: &str) -> Value {
        let path = format!("/api/v1/runs/{id}");
        let (status, body) = common::request(self.daemon.port, "GET", &path, None, None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits until run `id` is in `state`; a final state other than it
    /// fails at once.
    fn wait_run(&self, id: &str, state: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let run = self.run(id);
            if run["state"] == state {
                return run;
            }
            let ended = matches!(
                run["state"].as_str(),
                Some("success" | "failure" | "aborted" | "error")
            );
            assert!(
                !ended && Instant::now() < deadline,
                "run {id} never became {state}: {run}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Run `id`'s log file under the daemon's data directory, as written
    /// so far.
    fn log_file(&self, id: &str) -> String {
        fn find(dir: &std::path::Path, name: &str) -> Option<PathBuf> {
            for entry in std::fs::read_dir(dir).ok()?.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    if let Some(found) = find(&path, name) {
                        return Some(found);
                    }
                } else if path.file_name().is_some_and(|n| n == name) {
                    return Some(path);
                }
            }
            None
        }
        find(&self.dir.path().join("data"), &format!("{id}.log"))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Run `id`'s log once `done` holds.
    fn wait_log(&self, id: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let log = self.log_file(id);
            if done(&log) {
                return log;
            }
            assert!(Instant::now() < deadline, "log of {id}: {log:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The PipelineRuns of the namespace, as the API server has them.
    fn pipeline_runs(&self) -> Vec<DynamicObject> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.plane.admin(), self.ns(), &tekton::pipeline_runs());
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(api.list(&ListParams::default())).unwrap().items
    }

    /// Run `id`'s PipelineRun (found by bosun's run-id label), once it
    /// exists.
    fn wait_pipeline_run(&self, id: &str) -> DynamicObject {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let found = self.pipeline_runs().into_iter().find(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(RUN_ID_LABEL))
                    .is_some_and(|r| r == id)
            });
            if let Some(pr) = found {
                return pr;
            }
            assert!(Instant::now() < deadline, "no PipelineRun of run {id}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The name of the pod of pipeline task `task` of PipelineRun `pr`.
    fn task_pod(&self, pr: &str, task: &str) -> String {
        task_pod_of(self.plane, self.ns(), pr, task)
    }
}

fn param<'a>(pr: &'a DynamicObject, name: &str) -> &'a str {
    pr.data["spec"]["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["value"].as_str())
        .unwrap_or_else(|| panic!("no parameter {name}: {}", pr.data["spec"]["params"]))
}

/// A Lighthouse job of an in-repo `.lighthouse` directory, on a Kubernetes
/// cluster, through `bosun serve`: the run becomes its PipelineRun on the
/// API server (Tekton's validation took it) with the parameters Lighthouse
/// adds, the played Tekton runs it, the run succeeds and its log is the
/// steps' logs. A failing step fails its run.
#[test]
fn lighthouse_pipeline_jobs_run_on_kubernetes_through_serve() {
    let s = Served::new("tk-serve-run");
    let id = s.trigger("nightly");
    let run = s.wait_run(&id, "success", Duration::from_secs(90));
    assert_eq!(run["cluster"], "build-a", "{run}");
    let pr = s.wait_pipeline_run(&id);
    let name = pr.metadata.name.clone().unwrap();
    assert_eq!(name, pipeline_run_name(&id, "acme-widget-main-nightly-"));
    assert!(accepted_by_tekton(s.ns(), &name), "{:?}", tekton::reviews());
    assert_eq!(s.player.seen(), vec![name.clone()]);
    // The parameters Lighthouse adds, as the API server has them.
    assert_eq!(param(&pr, "REPO_OWNER"), "acme");
    assert_eq!(param(&pr, "REPO_NAME"), "widget");
    assert_eq!(param(&pr, "BUILD_ID"), run["build_id"].as_str().unwrap());
    assert_eq!(param(&pr, "REPO_URL"), "https://github.com/acme/widget.git");
    assert_eq!(param(&pr, "JOB_NAME"), "nightly");
    assert_eq!(param(&pr, "JOB_TYPE"), "periodic");
    assert_eq!(param(&pr, "PULL_BASE_REF"), "main");
    let job_spec: Value = serde_json::from_str(param(&pr, "JOB_SPEC")).unwrap();
    assert_eq!(job_spec["type"], "periodic", "{job_spec}");
    assert_eq!(job_spec["job"], "nightly", "{job_spec}");
    assert_eq!(job_spec["buildid"], run["build_id"], "{job_spec}");
    assert_eq!(job_spec["prowjobid"], id.as_str(), "{job_spec}");
    assert_eq!(
        (
            &job_spec["refs"]["org"],
            &job_spec["refs"]["repo"],
            &job_spec["refs"]["base_ref"]
        ),
        (&json!("acme"), &json!("widget"), &json!("main")),
        "{job_spec}"
    );
    // Lighthouse's labels, bosun's run label; the v1beta1 source converted
    // (computeResources, taskRunTemplate) and Lighthouse's 24 h timeout.
    let labels = pr.metadata.labels.clone().unwrap();
    assert_eq!(labels[RUN_ID_LABEL], id);
    assert_eq!(labels["created-by-lighthouse"], "true");
    assert_eq!(labels["lighthouse.jenkins-x.io/job"], "nightly");
    assert_eq!(labels["lighthouse.jenkins-x.io/type"], "periodic");
    assert_eq!(labels["lighthouse.jenkins-x.io/id"], id);
    // (As Lighthouse: a periodic's PipelineRun has no refs labels.)
    assert!(!labels.contains_key("lighthouse.jenkins-x.io/refs.org"));
    let annotations = pr.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations["lighthouse.jenkins-x.io/cloneURI"],
        "https://github.com/acme/widget.git"
    );
    let spec = &pr.data["spec"];
    assert_eq!(
        spec["taskRunTemplate"]["serviceAccountName"], "tekton-bot",
        "{spec}"
    );
    assert_eq!(spec["timeouts"]["pipeline"], "24h0m0s", "{spec}");
    assert_eq!(
        spec["pipelineSpec"]["tasks"][0]["taskSpec"]["steps"][1]["computeResources"],
        json!({"requests": {"cpu": "1"}}),
        "{spec}"
    );
    // The run's log, from the API: each task's steps under their headers,
    // then the end.
    let expected = succeeded_log(&name, |task| s.task_pod(&name, task));
    s.wait_log(&id, |l| l.contains("==> PipelineRun"));
    let (status, log) = common::request(
        s.daemon.port,
        "GET",
        &format!("/api/v1/runs/{id}/log"),
        None,
        None,
    );
    assert_eq!(status, 200, "{log}");
    assert_eq!(log, expected);

    // A failing step: the run fails; the step's output, the next step not
    // run, finally run.
    let failed = s.trigger("broken");
    let run = s.wait_run(&failed, "failure", Duration::from_secs(90));
    assert_eq!(run["cluster"], "build-a", "{run}");
    let log = s.wait_log(&failed, |l| l.contains("==> PipelineRun"));
    assert!(
        log.contains("--> step lint\ncheck/lint failed\n--> step vet\n==> task cleanup"),
        "{log}"
    );
    assert!(log.contains("cleanup/tidy ran\n"), "{log}");
    assert!(
        log.ends_with(
            "ended: Failed: Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 0 <==\n"
        ),
        "{log}"
    );
    assert!(accepted_by_tekton(
        s.ns(),
        s.wait_pipeline_run(&failed)
            .metadata
            .name
            .as_deref()
            .unwrap()
    ));
}

/// Aborted through the API (of a daemon restarted meanwhile), a pipeline
/// job's run is `aborted` and its PipelineRun cancelled (`spec.status:
/// Cancelled`, which Tekton's validation takes); a PipelineRun deleted
/// behind bosun's back while its run is pending ends the run in error, and
/// is not made again.
#[test]
fn lighthouse_pipeline_jobs_on_kubernetes_abort_and_lose_their_pipeline_runs() {
    let mut s = Served::new("tk-serve-abort");
    let id = s.trigger("slow");
    s.wait_run(&id, "pending", Duration::from_secs(60));
    s.wait_log(&id, |l| l.contains("wait/sleep is waiting\n"));
    let name = s.wait_pipeline_run(&id).metadata.name.unwrap();
    // (Tekton deletes a cancelled TaskRun's pod.)
    let pod = s.task_pod(&name, "wait");
    // A restarted daemon takes the abort as soon as it serves, before it
    // has listed its cluster's pods or PipelineRuns.
    s.restart();
    let (status, body) = common::request(
        s.daemon.port,
        "POST",
        &format!("/api/v1/runs/{id}/abort"),
        None,
        None,
    );
    assert_eq!(status, 202, "{body}");
    let run = s.wait_run(&id, "aborted", Duration::from_secs(30));
    assert_eq!(run["description"], "Run aborted.", "{run}");
    // Cancelled, as Tekton is asked to: Tekton's validation took the
    // update, and its controller ends the PipelineRun cancelled.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pr = s.wait_pipeline_run(&id);
        let cond = &pr.data["status"]["conditions"][0];
        if pr.data["spec"]["status"] == "Cancelled" && cond["reason"] == "Cancelled" {
            break;
        }
        assert!(Instant::now() < deadline, "not cancelled: {:?}", pr.data);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        tekton::reviews()
            .iter()
            .any(|r| r.name == name && r.operation == "UPDATE" && r.refused.is_none()),
        "{:?}",
        tekton::reviews()
    );
    let log = s.wait_log(&id, |l| l.contains("==> PipelineRun"));
    assert!(
        log.starts_with(&format!(
            "==> task wait (pod {pod}) <==\n--> step sleep\nwait/sleep is waiting\n"
        )),
        "{log}"
    );
    assert!(
        log.ends_with(&format!(
            "ended: Cancelled: PipelineRun \"{name}\" was cancelled <==\n"
        )),
        "{log}"
    );

    // Deleted while its run is pending: the run ends in error.
    let lost = s.trigger("slow");
    s.wait_run(&lost, "pending", Duration::from_secs(60));
    s.wait_log(&lost, |l| l.contains("wait/sleep is waiting\n"));
    let pr = s.wait_pipeline_run(&lost);
    let name = pr.metadata.name.clone().unwrap();
    let uid = pr.metadata.uid.clone();
    {
        let api: Api<DynamicObject> =
            Api::namespaced_with(s.plane.admin(), s.ns(), &tekton::pipeline_runs());
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(api.delete(&name, &Default::default())).unwrap();
    }
    let run = s.wait_run(&lost, "error", Duration::from_secs(30));
    assert_eq!(
        run["description"],
        format!("PipelineRun {name} got deleted unexpectedly"),
        "{run}"
    );
    let log = s.wait_log(&lost, |l| l.contains("was deleted before its logs"));
    assert!(log.contains("wait/sleep is waiting\n"), "{log}");
    // Never made again (its tasks may have run).
    std::thread::sleep(Duration::from_secs(3));
    let again: Vec<_> = s
        .pipeline_runs()
        .into_iter()
        .filter(|p| p.metadata.name.as_deref() == Some(name.as_str()))
        .collect();
    assert!(
        again.is_empty(),
        "made again: {:?} (was {uid:?})",
        again[0].metadata.uid
    );
}

/// A job whose steps come from jx's catalog (`uses:`) ends in error naming
/// the references, as on a local cluster; no PipelineRun is created.
#[test]
fn a_jx_catalog_step_ends_the_run_in_error_and_creates_no_pipeline_run() {
    let s = Served::new("tk-serve-uses");
    let id = s.trigger("catalog");
    let run = s.wait_run(&id, "error", Duration::from_secs(60));
    let why = run["description"].as_str().unwrap();
    assert!(why.starts_with("PipelineRun can not be created: "), "{why}");
    for reference in [
        "uses:jenkins-x/jx3-pipeline-catalog/tasks/git-clone/git-clone.yaml@versionStream",
        "uses:jenkins-x/jx3-pipeline-catalog/tasks/go/release.yaml@versionStream",
    ] {
        assert!(why.contains(reference), "{why}");
    }
    // Nothing reached the cluster; the cluster itself is fine: a job
    // after it runs.
    assert!(s.pipeline_runs().is_empty());
    assert!(!tekton::reviews().iter().any(|r| r.namespace == s.ns()));
    let ok = s.trigger("nightly");
    s.wait_run(&ok, "success", Duration::from_secs(90));
    assert_eq!(s.pipeline_runs().len(), 1);
    assert_eq!(s.player.seen().len(), 1);
}

/// A run's pod the watch does not show past the start's grace is asked of
/// the API before the run counts as lost: the watch may only be behind (a
/// burst of thousands of pods). A pod the API shows is the run's; a run
/// with no pod is revivable once the API says so. (The pod here lacks
/// bosun's label, so the watch never shows it, as a watch far behind.)
#[test]
fn a_pod_the_watch_does_not_show_is_asked_of_the_api_before_a_revival() {
    let plane = ControlPlane::dedicated(Options::default());
    let tenant = plane.tenant("behind", "build-a");
    tekton::grant(&plane, &tenant, &tekton::PIPELINE_VERBS);
    let logs = tempfile::tempdir().unwrap();
    let exec = executor(&tenant, logs.path().to_path_buf());
    let there = bosun_store::new_run_id();
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": there},
        "spec": {"containers": [{"name": "test", "image": "alpine"}]}
    }))
    .unwrap();
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(plane.admin(), "behind");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(api.create(&kube::api::PostParams::default(), &pod))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match exec.status(&there) {
            RunStatus::PodPending { .. } => break,
            RunStatus::Starting => {}
            s => panic!("a pod the API shows taken for {s:?}"),
        }
        assert!(Instant::now() < deadline, "never asked the API");
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone = bosun_store::new_run_id();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match exec.status(&gone) {
            RunStatus::Revivable(why) => {
                assert_eq!(why, "its pod disappearing");
                break;
            }
            s => assert!(Instant::now() < deadline, "{s:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// --- Replicas on PostgreSQL: a failover with a PipelineRun in flight ------

/// A leader killed while its pipeline job's PipelineRun runs: the next
/// leader adopts the PipelineRun (made once, by the first), follows it to
/// its end, and the run's log, the steps' output under their headers, is
/// the same as one copied without a failover, served by the replica
/// leading now.
#[test]
fn a_pipeline_run_in_flight_at_a_leaders_death_is_adopted_and_made_once() {
    let plane = ControlPlane::shared();
    tekton::install(plane);
    let namespace = "tk-replicas";
    let tenant = plane.tenant(namespace, "build-a");
    tekton::grant(plane, &tenant, &tekton::PIPELINE_VERBS);
    // The first step holds until the test lets it go.
    let (held, entered) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    );
    let player = {
        let (held, entered) = (held.clone(), entered.clone());
        let steps = script(None, None);
        tekton::play(
            plane,
            namespace,
            Arc::new(move |call: &StepCall| {
                if call.step == "compile" {
                    entered.store(true, Ordering::SeqCst);
                    while held.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                steps(call)
            }),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let config = widget(dir.path(), namespace);
    let pg = bosun_kubetest::postgres::Postgres::shared();
    let kubeconfig = tenant.kubeconfig.to_str().unwrap();
    let mut r = crate::replicas::Replicas::with(
        &pg.database(),
        2,
        &crate::replicas::LEASE,
        &config,
        "periodics: []\n",
        &["--kubeconfig", kubeconfig, "--health-interval", "200ms"],
    );
    r.up(0);
    assert_eq!(r.leader(Duration::from_secs(20)), 0);
    r.up(1);
    let (status, body) = common::request(
        r.port(0),
        "POST",
        "/api/v1/runs",
        Some(r#"{"job": "nightly"}"#),
        None,
    );
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !entered.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the PipelineRun never ran: {}",
            r.log(0)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The leader dies with its PipelineRun running; the other takes over.
    r.kill(0);
    assert_eq!(r.leader(Duration::from_secs(20)), 1);
    held.store(false, Ordering::SeqCst);
    let port = r.port(1);
    let run = |id: &str| -> Value {
        let (status, body) =
            common::request(port, "GET", &format!("/api/v1/runs/{id}"), None, None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now = run(&id);
        if now["state"] == "success" {
            break;
        }
        assert!(
            !matches!(now["state"].as_str(), Some("failure" | "aborted" | "error"))
                && Instant::now() < deadline,
            "run {id}: {now} (new leader's log: {})",
            r.log(1)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Made once, by the leader that started the run.
    let api: Api<DynamicObject> =
        Api::namespaced_with(plane.admin(), namespace, &tekton::pipeline_runs());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let made: Vec<String> = rt
        .block_on(api.list(&ListParams::default()))
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(RUN_ID_LABEL))
                .is_some_and(|r| *r == id)
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(player.seen(), made);
    // The whole log, copied from each step's start by the new leader.
    let name = &made[0];
    let expected = succeeded_log(name, |task| task_pod_of(plane, namespace, name, task));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, log) =
            common::request(port, "GET", &format!("/api/v1/runs/{id}/log"), None, None);
        assert_eq!(status, 200, "{log}");
        if log == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run's log:\n{log}\nexpected:\n{expected}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The name of the pod of pipeline task `task` of PipelineRun `pr` in
/// `namespace`.
fn task_pod_of(plane: &ControlPlane, namespace: &str, pr: &str, task: &str) -> String {
    plane
        .kubelet()
        .list(namespace)
        .into_iter()
        .find(|p| {
            let labels = p.metadata.labels.as_ref().unwrap();
            labels.get("tekton.dev/pipelineRun") == Some(&pr.to_string())
                && labels.get("tekton.dev/pipelineTask") == Some(&task.to_string())
        })
        .and_then(|p| p.metadata.name)
        .unwrap_or_else(|| panic!("no pod for task {task} of {pr}"))
}
