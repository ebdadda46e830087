//! The controller (plank's job): drives every active run through its states.
//! Triggered runs are checked (cluster, agent, decoration, command), admitted
//! under the limits (global, per job, per queue FIFO, per cluster slots) and
//! started; pending runs are followed to their end, aborted on request or at the
//! running timeout. It keeps no state of its own: after a restart it reads the
//! active runs from the store and re-attaches to their processes.

use std::collections::HashMap;
use std::time::Duration;

use bosun_cluster::admit::{admit, Limits, Running, Waiting};
use bosun_cluster::local::{command_of, JobProcess, ProcessState};
use bosun_cluster::registry::{unknown_cluster, ClusterDef};
use bosun_config::types::JobBase;
use bosun_store::{Run, RunFilter, RunState, Transition};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::PodSpec;

use crate::serve::App;

/// How long an aborted job gets between SIGTERM and SIGKILL.
pub const ABORT_GRACE: Duration = Duration::from_secs(5);

/// What a run's spec snapshot holds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SpecSnapshot {
    /// The job's definition when the run was created.
    pub job: JobBase,
    /// Its pod spec with presets merged.
    pub pod_spec: Option<PodSpec>,
}

fn end(app: &App, run: &Run, to: RunState, why: impl Into<String>) {
    let t = Transition::to(to, Timestamp::now(), why);
    if let Err(e) = app.store.transition(&run.id, t) {
        tracing::warn!(run = %run.id, error = %e, "transition failed");
    }
}

/// One pass over the active runs. Blocking (store and executors are synchronous).
pub fn reconcile(app: &App) {
    let Ok(mut active) = app.store.list(&RunFilter {
        active: true,
        limit: 1_000_000,
        ..RunFilter::default()
    }) else {
        return;
    };
    active.reverse(); // oldest first
    let snapshot = app.snapshot();
    let config = &snapshot.config;
    let now = Timestamp::now();
    let mut running = Running::default();

    for run in active.iter().filter(|r| r.state == RunState::Pending) {
        let alias = run
            .cluster
            .clone()
            .unwrap_or_else(|| run.configured_cluster.clone());
        let Some(exec) = app.executors.get(&alias) else {
            end(
                app,
                run,
                RunState::Error,
                format!("build cluster {alias} was removed"),
            );
            continue;
        };
        if app.take_abort(&run.id) {
            exec.abort(&run.id, ABORT_GRACE);
            end(app, run, RunState::Aborted, "Run aborted.");
            continue;
        }
        match exec.status(&run.id) {
            ProcessState::Exited { code: 0 } => end(app, run, RunState::Success, "Job succeeded."),
            ProcessState::Exited { code } => end(
                app,
                run,
                RunState::Failure,
                format!("Job failed (exit code {code})."),
            ),
            ProcessState::Lost => end(app, run, RunState::Error, "executor lost the process"),
            ProcessState::Running { .. } | ProcessState::Starting => {
                let timeout = running_timeout(app, run);
                if run
                    .pending_at
                    .is_some_and(|p| now.duration_since(p).unsigned_abs() > timeout)
                {
                    exec.abort(&run.id, ABORT_GRACE);
                    end(app, run, RunState::Aborted, "Pod running timeout.");
                    continue;
                }
                running.total += 1;
                *running.by_job.entry(run.job.clone()).or_default() += 1;
                *running.by_cluster.entry(alias.clone()).or_default() += 1;
                if let Some(q) = job_queue(app, run) {
                    *running.by_queue.entry(q).or_default() += 1;
                }
            }
        }
    }

    let mut waiting = Vec::new();
    let mut jobs: HashMap<String, (Run, JobProcess)> = HashMap::new();
    for run in active.iter().filter(|r| r.state == RunState::Triggered) {
        if app.take_abort(&run.id) {
            end(app, run, RunState::Aborted, "Run aborted.");
            continue;
        }
        let alias = run.configured_cluster.clone();
        if config.disabled_clusters.contains(&alias) {
            end(
                app,
                run,
                RunState::Error,
                format!("Terminal error: cluster {alias:?} is disabled."),
            );
            continue;
        }
        match app.clusters.get(&alias) {
            None => {
                end(
                    app,
                    run,
                    RunState::Error,
                    format!("Terminal error: {}.", unknown_cluster(&alias)),
                );
                continue;
            }
            Some(ClusterDef::Kubernetes { .. }) => {
                end(app, run, RunState::Error, format!("Terminal error: cluster {alias:?} is a Kubernetes cluster, which this bosun cannot run yet."));
                continue;
            }
            Some(ClusterDef::Local { .. }) => {}
        }
        let spec: Option<SpecSnapshot> = app
            .store
            .spec(&run.spec_hash)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok());
        let Some(spec) = spec else {
            end(
                app,
                run,
                RunState::Error,
                "Terminal error: the run's job spec is missing.",
            );
            continue;
        };
        if spec.job.agent != "kubernetes" {
            end(
                app,
                run,
                RunState::Error,
                format!("agent {} is not supported", spec.job.agent),
            );
            continue;
        }
        if spec.job.decorate == Some(true) {
            end(app, run, RunState::Error, "decoration is not supported yet");
            continue;
        }
        let Some(pod) = &spec.pod_spec else {
            end(
                app,
                run,
                RunState::Error,
                "Terminal error: the job has no pod spec.",
            );
            continue;
        };
        let command = match command_of(pod) {
            Ok(c) => c,
            Err(e) => {
                end(
                    app,
                    run,
                    RunState::Error,
                    format!("Pod can not be created: {e}"),
                );
                continue;
            }
        };
        let container = &pod.containers[0];
        let mut env: Vec<(String, String)> = container
            .env
            .iter()
            .flatten()
            .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
            .collect();
        env.extend(run.job_env());
        env.push((
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        ));
        waiting.push(Waiting {
            id: run.id.clone(),
            job: run.job.clone(),
            max_concurrency: spec.job.max_concurrency.max(0) as u32,
            queue: spec.job.job_queue_name.clone().filter(|q| !q.is_empty()),
            cluster: alias,
        });
        jobs.insert(
            run.id.clone(),
            (
                run.clone(),
                JobProcess {
                    command,
                    env,
                    working_dir: container.working_dir.clone(),
                },
            ),
        );
    }

    let limits = Limits {
        global: config.plank.max_concurrency.max(0) as u32,
        queues: config
            .plank
            .job_queue_capacities
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        cluster_slots: app
            .clusters
            .iter()
            .filter_map(|(a, c)| match c {
                ClusterDef::Local { slots } => Some((a.clone(), *slots as u32)),
                ClusterDef::Kubernetes { .. } => None,
            })
            .collect(),
    };
    for id in admit(&waiting, &running, &limits) {
        let (run, job) = &jobs[&id];
        let exec = &app.executors[&run.configured_cluster];
        match exec.start(&run.id, job) {
            Ok(()) => {
                let mut t = Transition::to(RunState::Pending, Timestamp::now(), "Job triggered.");
                t.cluster = Some(run.configured_cluster.clone());
                if let Err(e) = app.store.transition(&run.id, t) {
                    tracing::warn!(run = %run.id, error = %e, "could not record the start");
                }
            }
            Err(e) => end(
                app,
                run,
                RunState::Error,
                format!("Pod can not be created: {e}"),
            ),
        }
    }
}

fn running_timeout(app: &App, run: &Run) -> Duration {
    let snapshot = app.snapshot();
    snapshot
        .config
        .plank
        .pod_running_timeout
        .map(|d| d.to_std())
        .unwrap_or(Duration::from_secs(48 * 3600))
        .min(
            app.store
                .spec(&run.spec_hash)
                .ok()
                .flatten()
                .and_then(|v| serde_json::from_value::<SpecSnapshot>(v).ok())
                .and_then(|s| s.job.decoration_config.and_then(|d| d.pod_running_timeout))
                .map(|d| d.to_std())
                .unwrap_or(Duration::MAX),
        )
}

fn job_queue(app: &App, run: &Run) -> Option<String> {
    app.store
        .spec(&run.spec_hash)
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_value::<SpecSnapshot>(v).ok())
        .and_then(|s| s.job.job_queue_name)
        .filter(|q| !q.is_empty())
}
