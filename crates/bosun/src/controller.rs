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

/// How many of the oldest waiting runs one pass considers.
pub const MAX_WAITING_PER_PASS: usize = 256;

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

/// Transitions decided in one pass, committed together.
#[derive(Default)]
struct Batch(Vec<(String, Transition)>);

impl Batch {
    fn end(&mut self, run: &Run, to: RunState, why: impl Into<String>) {
        self.0
            .push((run.id.clone(), Transition::to(to, Timestamp::now(), why)));
    }

    fn commit(self, app: &App) {
        let ids: Vec<String> = self.0.iter().map(|(id, _)| id.clone()).collect();
        for (id, r) in ids.iter().zip(app.store.transitions(self.0)) {
            match r {
                Err(e) => tracing::warn!(run = %id, error = %e, "transition failed"),
                Ok(run) if run.state.is_final() => {
                    if let Some(p) = &run.periodic {
                        app.periodic_run_ended(p);
                    }
                }
                Ok(_) => {}
            }
        }
    }
}

/// A run's spec snapshot, parsed once per content hash.
fn spec_of(app: &App, run: &Run) -> Option<std::sync::Arc<SpecSnapshot>> {
    if let Some(s) = app
        .specs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&run.spec_hash)
    {
        return Some(s.clone());
    }
    let spec: SpecSnapshot = serde_json::from_value(app.store.spec(&run.spec_hash).ok()??).ok()?;
    let spec = std::sync::Arc::new(spec);
    app.specs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(run.spec_hash.clone(), spec.clone());
    Some(spec)
}

/// One pass over the active runs. Blocking (store and executors are synchronous).
pub fn reconcile(app: &App) {
    // All pending runs, and the oldest waiting ones (a pass starts at most as
    // many runs as there are free slots; the rest wait for the next pass).
    let list = |state, limit| {
        app.store.list(&RunFilter {
            state: Some(state),
            oldest_first: true,
            limit,
            ..RunFilter::default()
        })
    };
    let (Ok(pending), Ok(triggered)) = (
        list(RunState::Pending, 1_000_000),
        list(RunState::Triggered, MAX_WAITING_PER_PASS),
    ) else {
        return;
    };
    let active: Vec<Run> = pending.into_iter().chain(triggered).collect();
    let snapshot = app.snapshot();
    let config = &snapshot.config;
    let now = Timestamp::now();
    let mut running = Running::default();
    let mut batch = Batch::default();

    for run in active.iter().filter(|r| r.state == RunState::Pending) {
        let alias = run
            .cluster
            .clone()
            .unwrap_or_else(|| run.configured_cluster.clone());
        let Some(exec) = app.executors.get(&alias) else {
            batch.end(
                run,
                RunState::Error,
                format!("build cluster {alias} was removed"),
            );
            continue;
        };
        if app.take_abort(&run.id) {
            exec.abort(&run.id, ABORT_GRACE);
            batch.end(run, RunState::Aborted, "Run aborted.");
            continue;
        }
        match exec.status(&run.id) {
            ProcessState::Exited { code: 0 } => batch.end(run, RunState::Success, "Job succeeded."),
            ProcessState::Exited { code } => batch.end(
                run,
                RunState::Failure,
                format!("Job failed (exit code {code})."),
            ),
            ProcessState::Lost => batch.end(run, RunState::Error, "executor lost the process"),
            ProcessState::Running { .. } | ProcessState::Starting => {
                let timeout = running_timeout(app, run);
                if run
                    .pending_at
                    .is_some_and(|p| now.duration_since(p).unsigned_abs() > timeout)
                {
                    exec.abort(&run.id, ABORT_GRACE);
                    batch.end(run, RunState::Aborted, "Pod running timeout.");
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

    std::mem::take(&mut batch).commit(app);

    let mut waiting = Vec::new();
    let mut jobs: HashMap<String, (Run, std::sync::Arc<SpecSnapshot>, Vec<String>)> =
        HashMap::new();
    for run in active.iter().filter(|r| r.state == RunState::Triggered) {
        if app.take_abort(&run.id) {
            batch.end(run, RunState::Aborted, "Run aborted.");
            continue;
        }
        let alias = run.configured_cluster.clone();
        if config.disabled_clusters.contains(&alias) {
            batch.end(
                run,
                RunState::Error,
                format!("Terminal error: cluster {alias:?} is disabled."),
            );
            continue;
        }
        match app.clusters.get(&alias) {
            None => {
                batch.end(
                    run,
                    RunState::Error,
                    format!("Terminal error: {}.", unknown_cluster(&alias)),
                );
                continue;
            }
            Some(ClusterDef::Kubernetes { .. }) => {
                batch.end(run, RunState::Error, format!("Terminal error: cluster {alias:?} is a Kubernetes cluster, which this bosun cannot run yet."));
                continue;
            }
            Some(ClusterDef::Local { .. }) => {}
        }
        let Some(spec) = spec_of(app, run) else {
            batch.end(
                run,
                RunState::Error,
                "Terminal error: the run's job spec is missing.",
            );
            continue;
        };
        if spec.job.agent != "kubernetes" {
            batch.end(
                run,
                RunState::Error,
                format!("agent {} is not supported", spec.job.agent),
            );
            continue;
        }
        if spec.job.decorate == Some(true) {
            batch.end(run, RunState::Error, "decoration is not supported yet");
            continue;
        }
        let Some(pod) = &spec.pod_spec else {
            batch.end(
                run,
                RunState::Error,
                "Terminal error: the job has no pod spec.",
            );
            continue;
        };
        let command = match command_of(pod) {
            Ok(c) => c,
            Err(e) => {
                batch.end(run, RunState::Error, format!("Pod can not be created: {e}"));
                continue;
            }
        };
        waiting.push(Waiting {
            id: run.id.clone(),
            job: run.job.clone(),
            max_concurrency: spec.job.max_concurrency.max(0) as u32,
            queue: spec.job.job_queue_name.clone().filter(|q| !q.is_empty()),
            cluster: alias,
        });
        jobs.insert(run.id.clone(), (run.clone(), spec.clone(), command));
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
        let (run, spec, command) = &jobs[&id];
        // Built only for runs that start: the environment includes JOB_SPEC.
        let container = &spec.pod_spec.as_ref().expect("checked").containers[0];
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
        let job = JobProcess {
            command: command.clone(),
            env,
            working_dir: container.working_dir.clone(),
        };
        let exec = &app.executors[&run.configured_cluster];
        match exec.start(&run.id, &job) {
            Ok(()) => {
                let mut t = Transition::to(RunState::Pending, Timestamp::now(), "Job triggered.");
                t.cluster = Some(run.configured_cluster.clone());
                batch.0.push((run.id.clone(), t));
            }
            Err(e) => batch.end(run, RunState::Error, format!("Pod can not be created: {e}")),
        }
    }
    batch.commit(app);
}

fn running_timeout(app: &App, run: &Run) -> Duration {
    let global = app
        .snapshot()
        .config
        .plank
        .pod_running_timeout
        .map(|d| d.to_std())
        .unwrap_or(Duration::from_secs(48 * 3600));
    let own = spec_of(app, run)
        .and_then(|s| {
            s.job
                .decoration_config
                .as_ref()
                .and_then(|d| d.pod_running_timeout)
        })
        .map(|d| d.to_std());
    own.map_or(global, |o| o.min(global))
}

fn job_queue(app: &App, run: &Run) -> Option<String> {
    spec_of(app, run)
        .and_then(|s| s.job.job_queue_name.clone())
        .filter(|q| !q.is_empty())
}
