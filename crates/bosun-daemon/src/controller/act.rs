//! Act: carries a plan out. Processes and pods are stopped first, then
//! revivals and starts are handed to blocking tasks of their own (a pass
//! never waits for a process or a pod to start; outside a runtime, a
//! simulation, they run in the pass). A completed start leaves its `pending`
//! transition for the next pass, which commits it with its own (one commit
//! per pass rather than one more per start); if its local job has already
//! exited, its end is committed with it.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::executor::{ExecError, JobProcess, RunStatus};
use bosun_cluster::local::command_of;
use bosun_job::job::DecoratedJob;
use bosun_store::template::SpecSnapshot;
use bosun_store::{Run, RunState, Transition};
use jiff::Timestamp;

use super::decide::{exited, job_queue, Plan, ABORT_GRACE, PIPELINE_AGENT};
use super::handle::{Controller, Starting};
use super::observe::Observed;
use crate::clusters::Clusters;

/// How long a start that failed for a reason that may pass (see
/// `ExecError::Transient`) keeps its run's slot before a pass tries again.
const START_RETRY: Duration = Duration::from_secs(1);

/// The longest wait between two tries of a start.
const START_RETRY_MAX: Duration = Duration::from_secs(60);

/// How long a start that failed for a reason that may pass waits before it
/// is tried again, after `failures` such failures in a row: [`START_RETRY`]
/// after the first, twice as long after each next one, at most
/// [`START_RETRY_MAX`] (a cluster that is down is not asked once a second).
pub fn start_retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    START_RETRY
        .saturating_mul(1 << doublings)
        .min(START_RETRY_MAX)
}

/// What a start hands its executor.
enum Start {
    Process(JobProcess),
    Pod(Box<k8s_openapi::api::core::v1::Pod>),
    /// A Kubernetes cluster's PipelineRun.
    Pipeline(Box<serde_json::Value>),
}

/// How a run of a job with a container starts on a local cluster: the
/// container's command, with the job's environment (a decorated run's
/// `JOB_SPEC` carries its decoration config, as a decorated pod's).
fn process_start(
    run: &Run,
    spec: &SpecSnapshot,
    path: &str,
    prowjob_namespace: &str,
) -> Result<Start, String> {
    let pod_spec = spec.pod_spec.as_ref().expect("decide checked the pod spec");
    let command = command_of(pod_spec).map_err(|e| e.to_string())?;
    let container = &pod_spec.containers[0];
    let mut env: Vec<(String, String)> = container
        .env
        .iter()
        .flatten()
        .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
        .collect();
    env.extend(run.job_env());
    env.push(("PATH".into(), path.to_string()));
    let decoration = decorated(run, spec, prowjob_namespace);
    if let Some(d) = spec.decoration.as_ref().filter(|_| decoration.is_some()) {
        let d = bosun_cluster::kube::decorate::Decoration::from_config(d).ok();
        let job_spec = bosun_job::env::job_spec_json(run, d.as_ref());
        for (k, v) in env.iter_mut() {
            if k == "JOB_SPEC" {
                v.clone_from(&job_spec);
            }
        }
    }
    Ok(Start::Process(JobProcess {
        command,
        env,
        working_dir: container.working_dir.clone(),
        decoration: decoration.map(Box::new),
        pipeline: None,
    }))
}

/// How a pipeline run starts: its PipelineRun, as Lighthouse makes it, on a
/// Kubernetes cluster; on a local cluster, its embedded pipeline run step by
/// step by `bosun run-pipeline`. What neither can resolve (jx's `uses:`
/// catalog references; locally also `taskRef`, `pipelineRef`, ...) ends the
/// run here, naming the reference.
fn pipeline_start(
    run: &Run,
    spec: &SpecSnapshot,
    namespace: &str,
    pods: bool,
    path: &str,
) -> Result<Start, String> {
    use bosun_tekton::{local, model, pipelinerun};
    let pr = pipelinerun::pipeline_run(run, spec, namespace).map_err(|e| e.to_string())?;
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
    if pods {
        return Ok(Start::Pipeline(Box::new(pr)));
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
    let mut env = run.job_env();
    env.push(("PATH".into(), path.to_string()));
    Ok(Start::Process(JobProcess {
        command: Vec::new(),
        env,
        working_dir: None,
        decoration: None,
        pipeline: Some(Box::new(local::PipelineOptions {
            spec: typed,
            name: bosun_cluster::kube::pipelines::pipeline_run_name(&run.id, generate_name),
            namespace: namespace.to_string(),
            uid: run.id.clone(),
            ..Default::default()
        })),
    }))
}

/// Completed starts (and revivals), taken from the controller.
pub(super) struct Settled {
    /// Their transitions, each start followed by its job's end if the job
    /// has exited already.
    pub batch: Vec<(String, Transition)>,
    /// Their runs, to release from `starting` once committed.
    pub released: Vec<String>,
    /// The runs whose jobs have ended (their slots are free).
    pub ended: HashSet<String>,
}

/// Runs `f` (a start or a revival, which waits on its cluster) on a blocking
/// task of its own, so the pass goes on; outside a runtime (a simulation),
/// at once.
fn off_the_pass(f: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(f)),
        Err(_) => f(),
    }
}

impl Controller {
    /// Carries out `plan`, decided on `observed`; `early` and `rechecked`
    /// are what the pass found settled before it observed. Returns the
    /// runs started, for the log.
    pub(super) fn act(
        self: &Arc<Self>,
        observed: &Observed,
        plan: Plan,
        early: Settled,
        rechecked: Vec<(String, Transition)>,
    ) -> usize {
        let now = observed.now;
        let clusters = &observed.clusters;
        if !plan.aborts_taken.is_empty() {
            let mut aborts = self.aborts.locked();
            for id in &plan.aborts_taken {
                aborts.remove(id);
            }
        }
        for stop in &plan.stops {
            let exec = clusters
                .executors
                .get(&stop.cluster)
                .cloned()
                .or_else(|| self.shared.retired_executor(&stop.cluster));
            let Some(exec) = exec else { continue };
            let pending = observed.pending.iter().find(|p| p.run.id == stop.run);
            let spec = pending.and_then(|p| observed.spec(&p.run));
            let grace = spec.map_or(ABORT_GRACE, |spec| abort_grace(spec));
            if spec.is_some_and(|s| s.job.agent == PIPELINE_AGENT) {
                exec.abort_pipeline(&stop.run, grace);
            } else if grace <= ABORT_GRACE {
                exec.abort(&stop.run, grace);
            } else {
                // A decorated job's wrapper gets its grace period to stop
                // the test and write `finished.json`, off the pass.
                let run = stop.run.clone();
                off_the_pass(move || drop(exec.abort(&run, grace)));
            }
        }
        let mut batch = plan.transitions;
        let namespace = &observed.snapshot.config.pod_namespace;
        {
            let mut starting = self.starting.locked();
            for r in &plan.revivals {
                starting.insert(
                    r.run.id.clone(),
                    Starting {
                        job: r.run.job.clone(),
                        cluster: r.cluster.clone(),
                        queue: r.queue.clone(),
                    },
                );
            }
        }
        // The external dispatcher is asked off the pass; the answer waits
        // for the next one.
        for run in plan.lookups {
            let c = self.clone();
            let snapshot = observed.snapshot.clone();
            off_the_pass(move || {
                let now = c.shared.clock.now();
                if c.shared.placer.look_up(&run, &snapshot.config, now) {
                    c.wake();
                }
            });
        }
        for r in plan.revivals {
            let Some(exec) = clusters.executors.get(&r.cluster).cloned() else {
                continue;
            };
            let c = self.clone();
            let namespace = namespace.clone();
            off_the_pass(move || {
                let at = c.shared.clock.now();
                let (run, why) = (r.run, r.why);
                let revived = c
                    .spec_of(&run)
                    .ok_or_else(|| "the run's job spec is missing".to_string())
                    .and_then(|spec| {
                        bosun_cluster::kube::pod::pod_for_run(&run, &spec, &namespace)
                            .map_err(|e| e.to_string())
                    })
                    .and_then(|pod| exec.revive_pod(&run.id, &pod).map_err(|e| e.to_string()));
                let t = match revived {
                    Ok(()) => {
                        tracing::info!(run = %run.id, "pod revived after {why}");
                        Transition::to(RunState::Pending, at, format!("Pod revived after {why}."))
                    }
                    Err(e) => Transition::to(
                        RunState::Error,
                        at,
                        format!("Pod can not be revived after {why}: {e}"),
                    ),
                };
                c.start_failures().remove(&run.id);
                c.finish_start(vec![(run.id.clone(), t)]);
            });
        }
        let n_started = plan.starts.len();
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
        let mut to_start = Vec::with_capacity(plan.starts.len());
        {
            let mut in_flight = self.starting.locked();
            for a in plan.starts {
                let (run, spec) = (&a.run, &a.spec);
                let Some(exec) = clusters.executors.get(&a.cluster).cloned() else {
                    continue;
                };
                // How the run starts, made only for the runs that start now
                // (as plank makes a pod): a local cluster runs the
                // container's command, a Kubernetes one the pod. A run that
                // cannot start so ends here.
                let job = if spec.job.agent == PIPELINE_AGENT {
                    pipeline_start(run, spec, namespace, exec.runs_pods(), &path)
                        .map_err(|e| format!("PipelineRun can not be created: {e}"))
                } else if exec.runs_pods() {
                    bosun_cluster::kube::pod::pod_for_run(run, spec, namespace)
                        .map(|pod| Start::Pod(Box::new(pod)))
                        .map_err(|e| format!("Pod can not be created: {e}"))
                } else {
                    process_start(
                        run,
                        spec,
                        &path,
                        &observed.snapshot.config.prowjob_namespace,
                    )
                    .map_err(|e| format!("Pod can not be created: {e}"))
                };
                let job = match job {
                    Ok(job) => job,
                    Err(e) => {
                        batch.push((run.id.clone(), Transition::to(RunState::Error, now, e)));
                        continue;
                    }
                };
                in_flight.insert(
                    run.id.clone(),
                    Starting {
                        job: run.job.clone(),
                        cluster: a.cluster.clone(),
                        queue: job_queue(spec),
                    },
                );
                to_start.push((a.run, job, a.cluster, exec));
            }
        }
        for (run, job, target, exec) in to_start {
            let c = self.clone();
            off_the_pass(move || {
                let at = c.shared.clock.now();
                let started = match &job {
                    Start::Process(p) => exec.start(&run.id, p),
                    Start::Pod(pod) => exec.start_pod(&run.id, pod),
                    Start::Pipeline(pr) => exec.start_pipeline(&run.id, pr),
                };
                let t = match started {
                    Ok(()) => {
                        let mut t = Transition::to(RunState::Pending, at, "Job triggered.");
                        t.cluster = Some(target.clone());
                        t
                    }
                    Err(ExecError::Transient(e)) => {
                        // As plank requeues it: the run stays `triggered`
                        // and keeps its slot for a while, then a pass
                        // starts it again.
                        let delay = c.retry_later(run.id.clone());
                        tracing::warn!(run = %run.id, cluster = %target, error = %e, retry_in = ?delay, "cannot create the pod yet; trying again");
                        return;
                    }
                    Err(e) => {
                        Transition::to(RunState::Error, at, format!("Pod can not be created: {e}"))
                    }
                };
                c.start_failures().remove(&run.id);
                c.finish_start(vec![(run.id.clone(), t)]);
            });
        }
        // Starts that completed since the pass began (its own, when they
        // ran in it), and the ones it began with: committed with the rest,
        // then their runs are released.
        let late = self.settle_starts(clusters, now);
        let released: Vec<String> = early.released.into_iter().chain(late.released).collect();
        batch.extend(rechecked);
        batch.extend(early.batch);
        batch.extend(late.batch);
        self.hold_or_commit(batch, plan.notes, released);
        // Slots freed after this pass admitted runs are filled by the next
        // one, at once. (A job that ends after it was looked at here wakes
        // the controller itself, and the next pass finds its run released.)
        if !late.ended.is_empty() {
            self.wake.notify_one();
        }
        n_started
    }

    /// A start to try again: after [`start_retry_delay`] of its failures in
    /// a row the run is released, to be started again by the next pass;
    /// returns the delay. A timer, not a thread, waits (outside a runtime,
    /// a simulation, the next pass tries again).
    fn retry_later(self: &Arc<Self>, id: String) -> Duration {
        let delay = {
            let mut failures = self.start_failures();
            let n = failures.entry(id.clone()).or_default();
            *n = n.saturating_add(1);
            start_retry_delay(*n)
        };
        let c = self.clone();
        let release = move || {
            c.retry.locked().push(id);
            c.new_runs.notify_one();
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(async move {
                tokio::time::sleep(delay).await;
                release();
            })),
            Err(_) => release(),
        }
        delay
    }

    /// Runs whose starts failed for reasons that may pass, with how many
    /// times in a row (a start that succeeds or fails for good forgets).
    fn start_failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.start_failures.locked()
    }

    /// Hands what a start or revival decided to the controller's next pass,
    /// which commits it with its own transitions and then releases the run;
    /// wakes the controller for it, coalesced like new runs. The run stays
    /// in `starting` until then, so no pass starts it again or counts its
    /// slot free.
    fn finish_start(&self, batch: Vec<(String, Transition)>) {
        self.started.locked().extend(batch);
        self.new_runs.notify_one();
    }

    /// Takes the completed starts, adding the end of each local job that
    /// has exited already: a short job has often ended by the time its
    /// start is committed, and is then committed with it (one commit and
    /// one pass, not two of each).
    pub(super) fn settle_starts(&self, clusters: &Clusters, now: Timestamp) -> Settled {
        let done = std::mem::take(&mut *self.started.locked());
        // Starts to try again: released with nothing to commit.
        let retry = std::mem::take(&mut *self.retry.locked());
        let mut settled = Settled {
            batch: Vec::new(),
            released: done.iter().map(|(id, _)| id.clone()).chain(retry).collect(),
            ended: HashSet::new(),
        };
        for (id, t) in done {
            let end = match (t.to, &t.cluster) {
                (RunState::Pending, Some(c)) => local_end(clusters, c, &id, now),
                (RunState::Pending, None) => None,
                // A start that failed: its end is in `t`.
                _ => {
                    settled.ended.insert(id.clone());
                    settled.batch.push((id, t));
                    continue;
                }
            };
            settled.batch.push((id.clone(), t));
            if let Some(end) = end {
                settled.ended.insert(id.clone());
                settled.batch.push((id, end));
            }
        }
        settled
    }

    /// The ends of held starts whose local jobs have exited since, and
    /// their runs (their slots are free).
    pub(super) fn recheck_held_starts(
        &self,
        clusters: &Clusters,
        now: Timestamp,
    ) -> (Vec<(String, Transition)>, HashSet<String>) {
        let unended: Vec<(String, String)> = self
            .held
            .locked()
            .unended
            .iter()
            .map(|(id, c)| (id.clone(), c.clone()))
            .collect();
        let mut batch = Vec::new();
        let mut ended = HashSet::new();
        for (id, cluster) in unended {
            if let Some(end) = local_end(clusters, &cluster, &id, now) {
                batch.push((id.clone(), end));
                ended.insert(id);
            }
        }
        (batch, ended)
    }
}

/// The end of run `id`, started on `cluster`, if that is a local cluster and
/// the job has exited. (A local job's state is in memory; a pod's would be a
/// request to its cluster, and a pod just created has not ended.)
fn local_end(clusters: &Clusters, cluster: &str, id: &str, now: Timestamp) -> Option<Transition> {
    let exec = clusters.executors.get(cluster).filter(|e| !e.runs_pods())?;
    match exec.status(id) {
        RunStatus::Exited { code } => Some(exited(code, now)),
        _ => None,
    }
}

/// How long an aborted run's job gets between SIGTERM and SIGKILL: a
/// decorated job's wrapper gets its grace period and a quarter more (as
/// Prow's pod gets `terminationGracePeriodSeconds`), so it can stop the test
/// with entrypoint's SIGINT, then SIGKILL, and write `finished.json`.
fn abort_grace(spec: &SpecSnapshot) -> Duration {
    match spec
        .decoration
        .as_ref()
        .filter(|_| spec.job.decorate == Some(true))
    {
        None => ABORT_GRACE,
        Some(d) => {
            let grace = d
                .grace_period
                .map(|g| g.to_std())
                .filter(|g| !g.is_zero())
                .unwrap_or(bosun_job::job::DEFAULT_GRACE_PERIOD);
            (grace * 5 / 4).max(ABORT_GRACE)
        }
    }
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
        refs: run.refs.iter().chain(&run.extra_refs).cloned().collect(),
        primary: run.refs.is_some(),
        working_dir: None, // the executor moves the container's here
        skip_cloning: d.skip_cloning == Some(true),
        timeout_ns: d.timeout.map_or(0, |t| t.as_nanos()),
        grace_period_ns: d.grace_period.map_or(0, |g| g.as_nanos()),
        mirror_root: None,
        prowjob: Some(bosun_job::prowjob::document(run, spec, namespace)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_that_keeps_failing_waits_twice_as_long_each_time_up_to_a_minute() {
        let secs: Vec<u64> = (1..=9).map(|n| start_retry_delay(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(start_retry_delay(u32::MAX), START_RETRY_MAX);
    }
}
