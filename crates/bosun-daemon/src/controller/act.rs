//! Act: carries a plan out. Processes and pods are stopped first, then
//! revivals and starts are handed to blocking tasks (a pass never waits for
//! a process or a pod to start; outside a runtime, a simulation, they run in
//! the pass): a revival a task, a pass's starts a few tasks, a local
//! cluster's starts in a task given to its executor together. A completed
//! start leaves its `pending` transition for the next pass, which commits it
//! with its own (one commit per pass rather than one more per start); if its
//! local job has already exited, its end is committed with it.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::executor::{ExecError, Executor, RunStatus, StartDone};
use bosun_cluster::workload::{ClusterKind, Context, Workload};
use bosun_store::template::SpecSnapshot;
use bosun_store::{Run, RunState, Transition};
use jiff::Timestamp;

use super::decide::{exited, job_queue, Plan, ABORT_GRACE, PIPELINE_AGENT};
use super::handle::{Controller, Starting};
use super::observe::Observed;
use super::NEW_RUN_DELAY;
use crate::clusters::Clusters;

/// How long a start that failed for a reason that may pass (see
/// `ExecError::Transient`) keeps its run's slot before a pass tries again.
const START_RETRY: Duration = Duration::from_secs(1);

/// The longest wait between two tries of a start.
const START_RETRY_MAX: Duration = Duration::from_secs(60);

/// The most blocking tasks a pass's starts go on (each takes its share of
/// them in turn): a local cluster's starts spawn processes side by side, a
/// Kubernetes cluster's are handed to its pacing at once.
pub(crate) const START_TASKS: usize = 4;

/// The fewest starts a blocking task takes: a pass that starts a few runs
/// starts them on one task (a local cluster's go to its supervisor
/// together), not on a task each.
const MIN_SHARE: usize = 16;

/// A run to start: its workload, its cluster and that cluster's executor.
type ToStart = (Arc<Run>, Workload, String, Arc<dyn Executor>);

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
            let mut failures = self.start_failures();
            for id in &plan.aborts_taken {
                aborts.remove(id);
                // A run aborted while its start waited to be tried again.
                failures.remove(id);
            }
        }
        // Pods and processes are started and stopped only inside the
        // leader's trust window (its writes are fenced by the store).
        let trusted = self.shared.leadership.trusted();
        for stop in plan.stops.iter().filter(|_| trusted) {
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
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
        for r in plan.revivals {
            let Some(exec) = clusters.executors.get(&r.cluster).cloned() else {
                continue;
            };
            let c = self.clone();
            let namespace = namespace.clone();
            let prowjob_namespace = observed.snapshot.config.prowjob_namespace.clone();
            let path = path.clone();
            off_the_pass(move || {
                let at = c.shared.clock.now();
                let (run, why) = (r.run, r.why);
                let revived = c
                    .spec_of(&run)
                    .ok_or_else(|| "the run's job spec is missing".to_string())
                    .and_then(|spec| {
                        let ctx = Context {
                            pod_namespace: &namespace,
                            prowjob_namespace: &prowjob_namespace,
                            path: &path,
                        };
                        Workload::for_run(&run, &spec, exec.kind(), &ctx)
                    })
                    .and_then(|w| exec.revive(&run.id, &w).map_err(|e| e.to_string()));
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
        let mut to_start = Vec::with_capacity(plan.starts.len());
        {
            let mut in_flight = self.starting.locked();
            for a in plan.starts {
                let (run, spec) = (&a.run, &a.spec);
                let Some(exec) = clusters.executors.get(&a.cluster).cloned() else {
                    continue;
                };
                // How the run starts, made only for the runs that start now
                // (as plank makes a pod). A run that cannot start so ends
                // here.
                let ctx = Context {
                    pod_namespace: namespace,
                    prowjob_namespace: &observed.snapshot.config.prowjob_namespace,
                    path: &path,
                };
                let job = Workload::for_run(run, spec, exec.kind(), &ctx);
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
        // The pass's starts go on at most START_TASKS blocking tasks, each
        // taking its share in turn: a task each would have the runtime start
        // a thread for nearly every one of a burst's starts (256 a pass).
        let share = to_start.len().div_ceil(START_TASKS).max(MIN_SHARE);
        let mut to_start = to_start.into_iter().peekable();
        while to_start.peek().is_some() {
            let starts: Vec<_> = to_start.by_ref().take(share).collect();
            let c = self.clone();
            off_the_pass(move || c.start_share(starts));
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

    /// Starts a share of a pass's runs, cluster by cluster, each cluster's
    /// in the pass's order. Blocking. A local cluster's go together
    /// ([`Executor::start_all_then`]: to its supervisor at once). A start
    /// that panics fails its own run, not the rest of its share.
    fn start_share(self: &Arc<Self>, mut starts: Vec<ToStart>) {
        starts.sort_by(|a, b| a.2.cmp(&b.2));
        let mut starts = starts.into_iter().peekable();
        while let Some(first) = starts.next() {
            let mut group = vec![first];
            while let Some(next) = starts.next_if(|n| n.2 == group[0].2) {
                group.push(next);
            }
            self.start_group(group);
        }
    }

    /// Starts runs on one local cluster together (a local start's outcome
    /// comes before its call returns; a Kubernetes cluster's starts are
    /// each handed to its pacing, whose outcome comes later). If that
    /// panics, the first run whose outcome did not come fails, and the
    /// others without one are started one by one.
    fn start_group(self: &Arc<Self>, group: Vec<ToStart>) {
        if group.len() == 1
            || group[0].3.kind() != ClusterKind::Local
            || !self.shared.leadership.trusted()
        {
            return self.start_each(group);
        }
        let here = tokio::runtime::Handle::try_current().ok();
        let answered: Vec<Arc<AtomicBool>> = group.iter().map(|_| Arc::default()).collect();
        let exec = group[0].3.clone();
        let starts = group
            .iter()
            .zip(&answered)
            .map(|((run, job, target, _), answered)| {
                let answered = answered.clone();
                let outcome = self.start_done(here.clone(), run.id.clone(), target.clone());
                let done: StartDone = Box::new(move |started| {
                    answered.store(true, Ordering::Release);
                    outcome(started)
                });
                (run.id.as_str(), job, done)
            })
            .collect();
        let all = || exec.start_all_then(starts);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(all)).is_ok() {
            return;
        }
        let mut left = group
            .into_iter()
            .zip(answered)
            .filter(|(_, answered)| !answered.load(Ordering::Acquire))
            .map(|(start, _)| start);
        // Outcomes come in order: the first without one is taken for the
        // start that panicked.
        if let Some((run, _, target, _)) = left.next() {
            self.start_panicked(&run.id, &target);
        }
        self.start_each(left.collect())
    }

    /// A start that panicked fails its run.
    fn start_panicked(self: &Arc<Self>, id: &str, target: &str) {
        let why = "the start failed unexpectedly (see the daemon's log)";
        self.started(id, target, Err(ExecError::Refused(why.into())));
    }

    /// Starts runs one by one; a start that panics fails its own run.
    fn start_each(self: &Arc<Self>, starts: Vec<ToStart>) {
        for (run, job, target, exec) in starts {
            let (id, on) = (run.id.clone(), target.clone());
            let start = || self.start(run, &job, target, exec.as_ref());
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(start)).is_err() {
                self.start_panicked(&id, &on);
            }
        }
    }

    /// Starts `run` on cluster `target` (`exec`). Blocking.
    fn start(self: &Arc<Self>, run: Arc<Run>, job: &Workload, target: String, exec: &dyn Executor) {
        if !self.shared.leadership.trusted() {
            let why = "this replica's leadership is not confirmed".to_string();
            return self.started(&run.id, &target, Err(ExecError::Transient(why)));
        }
        // An executor whose starts wait their turn (a Kubernetes cluster's
        // paced creations) hands the outcome back later, holding no thread
        // meanwhile. Its outcome is taken in this runtime's context (a
        // retry's timer runs here, not on the cluster's runtime).
        let here = tokio::runtime::Handle::try_current().ok();
        exec.start_then(&run.id, job, self.start_done(here, run.id.clone(), target));
    }

    /// Where the outcome of run `id`'s start on cluster `target` goes:
    /// [`Controller::started`], in the context of runtime `here` if any.
    fn start_done(
        self: &Arc<Self>,
        here: Option<tokio::runtime::Handle>,
        id: String,
        target: String,
    ) -> StartDone {
        let c = self.clone();
        Box::new(move |started| {
            let _here = here.as_ref().map(|h| h.enter());
            c.started(&id, &target, started)
        })
    }

    /// What a start of run `id` on cluster `target` came to: its
    /// transition, handed to the next pass, or a try again later.
    fn started(self: &Arc<Self>, id: &str, target: &str, started: Result<(), ExecError>) {
        let at = self.shared.clock.now();
        let t = match started {
            Ok(()) => {
                let mut t = Transition::to(RunState::Pending, at, "Job triggered.");
                t.cluster = Some(target.to_string());
                t
            }
            Err(ExecError::Transient(e)) => {
                // As plank requeues it: the run stays `triggered` and keeps
                // its slot for a while, then a pass starts it again.
                let delay = self.retry_later(id.to_string());
                tracing::warn!(run = %id, cluster = %target, error = %e, retry_in = ?delay, "cannot create the pod yet; trying again");
                return;
            }
            Err(e) => Transition::to(RunState::Error, at, format!("Pod can not be created: {e}")),
        };
        self.start_failures().remove(id);
        if t.to == RunState::Pending && self.runs_locally(target, id) {
            return self.finish_start_later(vec![(id.to_string(), t)]);
        }
        self.finish_start(vec![(id.to_string(), t)]);
    }

    /// Whether run `id`'s job runs on local cluster `target` and has not
    /// ended: its end will wake a pass (the supervisor reports it).
    fn runs_locally(&self, target: &str, id: &str) -> bool {
        let clusters = self.shared.in_force().clusters.clone();
        clusters.executors.get(target).is_some_and(|e| {
            e.kind() == ClusterKind::Local && matches!(e.status(id), RunStatus::Running { .. })
        })
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

    /// Hands a completed start whose local job still runs to a later pass:
    /// the one its job's end wakes (a short job's start and end are then
    /// settled by one pass and committed together), or, at the latest,
    /// the one a timer wakes [`NEW_RUN_DELAY`] after, as `finish_start`'s
    /// would come. One timer serves every start completed meanwhile; it
    /// wakes a pass only if some start is still unsettled. Outside a
    /// runtime (a simulation), as `finish_start`.
    fn finish_start_later(self: &Arc<Self>, batch: Vec<(String, Transition)>) {
        self.started.locked().extend(batch);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return self.new_runs.notify_one();
        };
        // Set after the start is handed over, and cleared by the timer
        // before it looks: a start either finds the timer armed and is
        // seen by it, or arms a new one.
        if self.settle_timer.swap(true, Ordering::SeqCst) {
            return;
        }
        let c = self.clone();
        rt.spawn(async move {
            tokio::time::sleep(NEW_RUN_DELAY).await;
            c.settle_timer.store(false, Ordering::SeqCst);
            if !c.started.locked().is_empty() {
                c.wake.notify_one();
            }
        });
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
    let exec = clusters
        .executors
        .get(cluster)
        .filter(|e| e.kind() == ClusterKind::Local)?;
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
