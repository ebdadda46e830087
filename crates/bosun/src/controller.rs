//! The controller (plank's job): drives every active run through its states.
//! Triggered runs are checked (cluster, agent, decoration, command), admitted
//! under the limits (global, per job, per queue FIFO, per cluster slots) and
//! started; pending runs are followed to their end, aborted on request or at the
//! running timeout. It keeps no state of its own: it reads the active runs from
//! [`App::active`], the store's committed active runs held in memory (loaded
//! at start-up, then kept by the store's commits), and after a restart
//! re-attaches to their processes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::admit::{admit, Limits, Running, Waiting};
use bosun_cluster::executor::{ExecError, JobProcess, RunStatus};
use bosun_cluster::local::command_of;
use bosun_cluster::registry::{unknown_cluster, ClusterDef};
use bosun_store::template::SpecSnapshot;
use bosun_store::{Run, RunState, Transition};
use jiff::Timestamp;

use crate::serve::{App, Clusters};
use bosun_cluster::kube::Health;

/// How many of the oldest waiting runs one pass considers.
pub const MAX_WAITING_PER_PASS: usize = 256;

/// A run whose start is in flight.
#[derive(Debug, Clone)]
pub struct Starting {
    /// Its job.
    pub job: String,
    /// Its cluster.
    pub cluster: String,
    /// Its job queue.
    pub queue: Option<String>,
}

/// How an admitted run starts: its command (local clusters) or its pod
/// (Kubernetes clusters).
enum Launch {
    Process(Vec<String>),
    Pod(Box<k8s_openapi::api::core::v1::Pod>),
}

/// What a start hands its executor.
enum Start {
    Process(JobProcess),
    Pod(Box<k8s_openapi::api::core::v1::Pod>),
}

/// How long an aborted job gets between SIGTERM and SIGKILL.
pub const ABORT_GRACE: Duration = Duration::from_secs(5);

/// Transitions decided in one pass, committed together.
#[derive(Default)]
struct Batch(Vec<(String, Transition)>);

impl Batch {
    fn end(&mut self, run: &Run, to: RunState, at: Timestamp, why: impl Into<String>) {
        self.0.push((run.id.clone(), Transition::to(to, at, why)));
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

/// Runs `f` (a start or a revival, which waits on its cluster) on a blocking
/// task of its own, so the pass goes on; outside a runtime (a simulation), at
/// once.
fn off_the_pass(f: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(f)),
        Err(_) => f(),
    }
}

/// How long a start that failed for a reason that may pass (see
/// `ExecError::Transient`) keeps its run's slot before a pass tries again.
const START_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Hands what a start or revival decided to the controller's next pass,
/// which commits it with its own transitions and then releases the run (one
/// commit per pass rather than one more per start); wakes the controller for
/// it, coalesced like new runs. The run stays in `starting` until then, so
/// no pass starts it again or counts its slot free.
fn finish_start(app: &App, batch: Batch) {
    app.started
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(batch.0);
    app.new_runs.notify_one();
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
pub fn reconcile(app: &Arc<App>) {
    let t0 = std::time::Instant::now();
    // Runs being started right now (still `triggered` in the store, or just
    // committed `pending`): read before the store, so none is missed.
    let starting = app
        .starting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let pending = app.active.pending();
    let clusters = app.clusters();
    let now = app.clock.now();
    // Starts completed since the last pass (committed at the end of this one).
    let early = settle_starts(app, &clusters, now);
    // Held starts whose jobs have ended since.
    let (rechecked, ended_since) = recheck_held_starts(app, &clusters, now);
    // Runs with a transition held for a later commit: left alone until then.
    // (A waiting run's held note leaves it in the queue, in its place.)
    let (held, held_ended, held_notes) = {
        let h = app.held.lock().unwrap_or_else(|e| e.into_inner());
        (h.runs.clone(), h.ended.clone(), h.notes.clone())
    };
    let snapshot = app.snapshot();
    let config = &snapshot.config;
    let mut running = Running::default();
    let mut batch = Batch::default();
    // Why runs wait, where that changed: held like the rest, but their runs
    // stay in the queue.
    let mut notes = Batch::default();
    // Pods to start again, each on a task of its own (like starts).
    let mut revivals: Vec<(Arc<Run>, Arc<dyn bosun_cluster::executor::Executor>, String)> =
        Vec::new();

    // A removed cluster's executor is kept while a run was pending on it when
    // this pass began (a pass still holding the clusters before the removal
    // leaves those runs to the next one).
    app.prune_retired(|alias| {
        pending
            .iter()
            .any(|r| r.cluster.as_deref().unwrap_or(&r.configured_cluster) == alias)
    });
    // Runs being revived are in `starting` (counted below).
    for run in pending
        .iter()
        .filter(|r| !starting.contains_key(&r.id) && !held.contains(&r.id))
    {
        let alias = run
            .cluster
            .clone()
            .unwrap_or_else(|| run.configured_cluster.clone());
        let Some(exec) = clusters.executors.get(&alias) else {
            // Its process or pod is stopped first: the run's end is final.
            if let Some(exec) = app.retired_executor(&alias) {
                exec.abort(&run.id, ABORT_GRACE);
            }
            batch.end(
                run,
                RunState::Error,
                now,
                format!("build cluster {alias} was removed"),
            );
            continue;
        };
        if app.take_abort(&run.id) {
            exec.abort(&run.id, ABORT_GRACE);
            batch.end(run, RunState::Aborted, now, "Run aborted.");
            continue;
        }
        let state = exec.status(&run.id);
        let job_running = matches!(state, RunStatus::Running { .. });
        match state {
            RunStatus::Exited { code } => batch.0.push((run.id.clone(), exited(code, now))),
            RunStatus::Lost => batch.end(run, RunState::Error, now, "executor lost the process"),
            RunStatus::Failed(why) => batch.end(run, RunState::Error, now, why),
            // As plank: the pod is started again, up to `max_revivals` times.
            RunStatus::Revivable(why) => {
                let max = config.plank.max_revivals.unwrap_or(3).max(0) as u32;
                if run.pod_revival_count >= max {
                    batch.end(
                        run,
                        RunState::Error,
                        now,
                        format!("Job pod reached max revivals ({max}) after {why}."),
                    );
                    continue;
                }
                app.starting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(
                        run.id.clone(),
                        Starting {
                            job: run.job.clone(),
                            cluster: alias.clone(),
                            queue: job_queue(app, run),
                        },
                    );
                revivals.push((run.clone(), exec.clone(), why));
                // Counted as running: it still holds its slot.
                running.total += 1;
                *running.by_job.entry(run.job.clone()).or_default() += 1;
                *running.by_cluster.entry(alias.clone()).or_default() += 1;
            }
            RunStatus::Running { .. } | RunStatus::Starting | RunStatus::Ending => {
                let timeout = running_timeout(app, run);
                // As plank: only a running job times out so (a pod still
                // pending has the scheduling and pending timeouts).
                if job_running
                    && run
                        .pending_at
                        .is_some_and(|p| now.duration_since(p).unsigned_abs() > timeout)
                {
                    exec.abort(&run.id, ABORT_GRACE);
                    batch.end(run, RunState::Aborted, now, "Pod running timeout.");
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

    // The ends are committed at the end of the pass, with its other
    // transitions (one commit, not two), and after the starts it decides are
    // on their way: a slot freed by an end is taken again without waiting for
    // the end's commit. (A crash in between loses nothing: the ended runs are
    // still pending in the store and end again from their files, the started
    // ones are started again, which finds them started.)
    let ended = std::mem::take(&mut batch);
    for (run, exec, why) in revivals {
        let app = app.clone();
        let namespace = config.pod_namespace.clone();
        let revive = move || {
            let at = app.clock.now();
            let mut batch = Batch::default();
            let revived = spec_of(&app, &run)
                .ok_or_else(|| "the run's job spec is missing".to_string())
                .and_then(|spec| bosun_cluster::kube_pod::pod_for_run(&run, &spec, &namespace))
                .and_then(|pod| exec.revive_pod(&run.id, &pod).map_err(|e| e.to_string()));
            match revived {
                Ok(()) => {
                    tracing::info!(run = %run.id, "pod revived after {why}");
                    batch.0.push((
                        run.id.clone(),
                        Transition::to(RunState::Pending, at, format!("Pod revived after {why}.")),
                    ));
                }
                Err(e) => batch.end(
                    &run,
                    RunState::Error,
                    at,
                    format!("Pod can not be revived after {why}: {e}"),
                ),
            }
            finish_start(&app, batch);
        };
        off_the_pass(revive);
    }
    // Runs being started or revived (skipped by the loop above), but for the
    // ones whose jobs have ended already: their slots are free.
    for (_, s) in starting.iter().filter(|(id, _)| {
        !early.ended.contains(*id) && !held_ended.contains(*id) && !ended_since.contains(*id)
    }) {
        running.total += 1;
        *running.by_job.entry(s.job.clone()).or_default() += 1;
        *running.by_cluster.entry(s.cluster.clone()).or_default() += 1;
        if let Some(q) = &s.queue {
            *running.by_queue.entry(q.clone()).or_default() += 1;
        }
    }

    // Aborts of runs that have not started: handled here, whatever their
    // cluster's queue looks like.
    let requested: Vec<String> = app
        .aborts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|id| !starting.contains_key(*id) && !held.contains(*id))
        .cloned()
        .collect();
    for id in requested {
        match app.active.get(&id) {
            Some(run) if matches!(run.state, RunState::Triggered | RunState::Scheduling) => {
                app.take_abort(&id);
                batch.end(&run, RunState::Aborted, now, "Run aborted.");
            }
            // Complete, or no such run.
            None => {
                app.take_abort(&id);
            }
            _ => {}
        }
    }

    // Scheduling (`scheduler.enabled`): each run gets its cluster, with
    // Prow's failover mapping applied (unconditionally, as Prow does, but
    // never onto a trusted cluster that does not admit the run), then waits
    // to start there.
    for run in app
        .active
        .scheduling()
        .into_iter()
        .filter(|r| !held.contains(&r.id))
    {
        if app.take_abort(&run.id) {
            batch.end(&run, RunState::Aborted, now, "Run aborted.");
            continue;
        }
        let mut to = run.configured_cluster.clone();
        if let Some(mapped) = config.scheduler.failover.mappings.get(&to) {
            let repo = definition_repo(&run);
            let definition = bosun_cluster::trust::Definition {
                name: &run.job,
                job_type: run.job_type,
                repo: repo.as_deref(),
            };
            match bosun_cluster::trust::refusal(config, mapped, definition, run.refs.as_ref()) {
                None => to = mapped.clone(),
                Some(why) => {
                    tracing::warn!(run = %run.id, to = %mapped, "failover mapping ignored: {why}")
                }
            }
        }
        let mut t = Transition::to(
            RunState::Triggered,
            now,
            format!("Job scheduled to cluster {to}."),
        );
        t.cluster = Some(to);
        batch.0.push((run.id.clone(), t));
    }

    // Each cluster's oldest waiting runs, so that a long queue on one cluster
    // never holds back another: for a local cluster, a few times as many as it
    // has free slots (a pass starts at most that many; the rest wait for the
    // next pass, which comes as soon as a run ends), none when it is full.
    // Runs being started, or with a transition held, are not waiting any
    // more (the store says `triggered` until their commit).
    let waiting_now = |r: &Run| !starting.contains_key(&r.id) && !held.contains(&r.id);
    let mut triggered = Vec::new();
    for (alias, def) in &clusters.defs {
        let limit = match def {
            ClusterDef::Local { slots } => {
                let used = running.by_cluster.get(alias).copied().unwrap_or(0);
                match (*slots as u32).saturating_sub(used) {
                    0 => continue,
                    free => (free as usize * 4).clamp(32, MAX_WAITING_PER_PASS),
                }
            }
            ClusterDef::Kubernetes { .. } => MAX_WAITING_PER_PASS,
        };
        triggered.extend(app.active.waiting_where(alias, limit, waiting_now));
    }
    // Runs naming a cluster that does not exist (they end in error).
    triggered.extend(
        app.active
            .waiting_elsewhere(|c| clusters.defs.contains_key(c), MAX_WAITING_PER_PASS)
            .into_iter()
            .filter(|r| waiting_now(r)),
    );
    // Admission is first-in first-out across clusters (build ids grow with
    // creation).
    triggered.sort_by_key(|r| (r.build_id.parse::<u64>().unwrap_or(u64::MAX), r.created_at));
    let mut waiting = Vec::new();
    // What a run to start needs: the run, its spec, its cluster's executor,
    // its cluster.
    type ToStart = (
        Arc<Run>,
        Arc<SpecSnapshot>,
        Arc<dyn bosun_cluster::executor::Executor>,
        String,
    );
    let mut jobs: HashMap<String, ToStart> = HashMap::new();
    for run in &triggered {
        if app.take_abort(&run.id) {
            batch.end(run, RunState::Aborted, now, "Run aborted.");
            continue;
        }
        // The cluster decided for the run when it was scheduled, else its own.
        let alias = run
            .cluster
            .clone()
            .unwrap_or_else(|| run.configured_cluster.clone());
        if config.disabled_clusters.contains(&alias) {
            batch.end(
                run,
                RunState::Error,
                now,
                format!("Terminal error: cluster {alias:?} is disabled."),
            );
            continue;
        }
        let Some(def) = clusters.defs.get(&alias) else {
            batch.end(
                run,
                RunState::Error,
                now,
                format!("Terminal error: {}.", unknown_cluster(&alias)),
            );
            continue;
        };
        // A cluster that is not Reachable keeps its runs waiting, or hands
        // them to its `failover_to` cluster while that one is Reachable.
        let target = match crate::clusters::health_of(app, &alias, def) {
            Health::Reachable => alias.clone(),
            health => match failover_target(app, &clusters, &alias, run) {
                Some(t) => t,
                None => {
                    // It waits, and says why (once, not on every pass).
                    let why = format!("Waiting: build cluster {alias} is {}.", health.word());
                    if run.description != why && held_notes.get(&run.id) != Some(&why) {
                        notes.0.push((
                            run.id.clone(),
                            bosun_store::Transition::to(run.state, now, why),
                        ));
                    }
                    continue;
                }
            },
        };
        let Some(exec) = clusters.executors.get(&target).cloned() else {
            batch.end(
                run,
                RunState::Error,
                now,
                format!(
                    "Terminal error: cluster {target:?} has no executor (see the daemon's log)."
                ),
            );
            continue;
        };
        let Some(spec) = spec_of(app, run) else {
            batch.end(
                run,
                RunState::Error,
                now,
                "Terminal error: the run's job spec is missing.",
            );
            continue;
        };
        if spec.job.agent != "kubernetes" {
            batch.end(
                run,
                RunState::Error,
                now,
                format!("agent {} is not supported", spec.job.agent),
            );
            continue;
        }
        if spec.job.decorate == Some(true) {
            batch.end(run, RunState::Error, now, "decoration is not supported yet");
            continue;
        }
        if spec.pod_spec.is_none() {
            batch.end(
                run,
                RunState::Error,
                now,
                "Terminal error: the job has no pod spec.",
            );
            continue;
        };
        waiting.push(Waiting {
            id: run.id.clone(),
            job: run.job.clone(),
            max_concurrency: spec.job.max_concurrency.max(0) as u32,
            queue: spec.job.job_queue_name.clone().filter(|q| !q.is_empty()),
            cluster: target.clone(),
        });
        jobs.insert(run.id.clone(), (run.clone(), spec.clone(), exec, target));
    }

    let limits = Limits {
        global: config.plank.max_concurrency.max(0) as u32,
        queues: config
            .plank
            .job_queue_capacities
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        cluster_slots: clusters
            .defs
            .iter()
            .map(|(a, c)| match c {
                ClusterDef::Local { slots } | ClusterDef::Kubernetes { slots, .. } => {
                    (a.clone(), *slots as u32)
                }
            })
            .collect(),
    };
    let t1 = t0.elapsed();
    let admitted = admit(&waiting, &running, &limits);
    let n_admitted = admitted.len();
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let mut in_flight = app.starting.lock().unwrap_or_else(|e| e.into_inner());
    let mut to_start = Vec::with_capacity(admitted.len());
    for id in &admitted {
        let (run, spec, exec, target) = &jobs[id];
        // How the run starts, made only for the runs that start now (as
        // plank makes a pod): a local cluster runs the container's command, a
        // Kubernetes one the pod. A run that cannot start so ends here.
        let launch = if exec.runs_pods() {
            bosun_cluster::kube_pod::pod_for_run(run, spec, &config.pod_namespace)
                .map(|pod| Launch::Pod(Box::new(pod)))
                .map_err(|e| e.to_string())
        } else {
            command_of(spec.pod_spec.as_ref().expect("checked"))
                .map(Launch::Process)
                .map_err(|e| e.to_string())
        };
        let job = match launch {
            Err(e) => {
                batch.end(
                    run,
                    RunState::Error,
                    now,
                    format!("Pod can not be created: {e}"),
                );
                continue;
            }
            Ok(Launch::Pod(pod)) => Start::Pod(pod),
            Ok(Launch::Process(command)) => {
                // The environment includes JOB_SPEC.
                let container = &spec.pod_spec.as_ref().expect("checked").containers[0];
                let mut env: Vec<(String, String)> = container
                    .env
                    .iter()
                    .flatten()
                    .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
                    .collect();
                env.extend(run.job_env());
                env.push(("PATH".into(), path.clone()));
                Start::Process(JobProcess {
                    command,
                    env,
                    working_dir: container.working_dir.clone(),
                })
            }
        };
        in_flight.insert(
            run.id.clone(),
            Starting {
                job: run.job.clone(),
                cluster: target.clone(),
                queue: spec.job.job_queue_name.clone().filter(|q| !q.is_empty()),
            },
        );
        to_start.push((run.clone(), job, target.clone()));
    }
    drop(in_flight);
    for (run, job, target) in to_start {
        // Each start runs on its own blocking thread and commits its own
        // transition: a pass never waits for a process to start, so the next
        // pass (the next run's end) follows at once. The store's writer batches
        // the commits of concurrent starts. Outside a runtime (a simulation),
        // starts run in the pass.
        let app = app.clone();
        // Its cluster is local (checked above), so it has an executor.
        let exec = clusters.executors.get(&target).cloned();
        let start = move || {
            let mut batch = Batch::default();
            let at = app.clock.now();
            let started = exec
                .ok_or_else(|| ExecError::Refused("its build cluster was removed".to_string()))
                .and_then(|exec| match &job {
                    Start::Process(p) => exec.start(&run.id, p),
                    Start::Pod(pod) => exec.start_pod(&run.id, pod),
                });
            match started {
                Ok(()) => {
                    let mut t = Transition::to(RunState::Pending, at, "Job triggered.");
                    t.cluster = Some(target.clone());
                    batch.0.push((run.id.clone(), t));
                }
                Err(ExecError::Transient(e)) => {
                    // As plank requeues it: the run stays `triggered` and
                    // keeps its slot for a while, then a pass starts it again.
                    tracing::warn!(run = %run.id, cluster = %target, error = %e, "cannot create the pod yet; trying again");
                    let id = run.id.clone();
                    let release = move || {
                        app.retry.lock().unwrap_or_else(|e| e.into_inner()).push(id);
                        app.new_runs.notify_one();
                    };
                    // A timer, not this thread, waits (outside a runtime, a
                    // simulation, the next pass tries again).
                    match tokio::runtime::Handle::try_current() {
                        Ok(rt) => drop(rt.spawn(async move {
                            tokio::time::sleep(START_RETRY).await;
                            release();
                        })),
                        Err(_) => release(),
                    }
                    return;
                }
                Err(e) => batch.end(
                    &run,
                    RunState::Error,
                    at,
                    format!("Pod can not be created: {e}"),
                ),
            }
            finish_start(&app, batch);
        };
        off_the_pass(start);
    }
    batch.0.extend(ended.0);
    // Starts that completed since the pass began (its own, when they ran in
    // it), and the ones it began with: committed with the rest, then their
    // runs are released.
    let late = settle_starts(app, &clusters, now);
    let released: Vec<String> = early.released.into_iter().chain(late.released).collect();
    batch.0.extend(rechecked.0);
    batch.0.extend(early.batch.0);
    batch.0.extend(late.batch.0);
    hold_or_commit(app, batch, notes, released);
    // Slots freed after this pass admitted runs are filled by the next one,
    // at once. (A job that ends after it was looked at here wakes the
    // controller itself, and the next pass finds its run released.)
    if !late.ended.is_empty() {
        app.wake.notify_one();
    }
    tracing::debug!(
        running = running.total,
        waiting = waiting.len(),
        started = n_admitted,
        decide_us = t1.as_micros() as u64,
        total_us = t0.elapsed().as_micros() as u64,
        "controller pass"
    );
}

/// How long the controller may hold what its passes decided before it
/// commits it: on a busy cluster, where a job ends every few hundred
/// microseconds, the passes of a few milliseconds share one commit (and its
/// fsync) instead of each making its own. A held transition loses nothing in
/// a crash: an ended run is still `pending` in the store and ends again from
/// its files; a started one is `triggered` and is started again, which finds
/// it started.
pub const COMMIT_EVERY: Duration = Duration::from_millis(5);

/// Held transitions are committed at once when there are this many.
const COMMIT_MAX_HELD: usize = 256;

/// Transitions decided by passes and not committed yet.
#[derive(Default)]
pub struct Held {
    batch: Vec<(String, Transition)>,
    /// The runs they move: passes leave these alone until the commit.
    runs: std::collections::HashSet<String>,
    /// Why waiting runs wait, where that changed: a note moves no run, so
    /// its run stays in the queue. Were it left alone until the commit like
    /// the others, a newer run could take the slot it waits for.
    notes: HashMap<String, String>,
    /// Of those, the runs that end (their slots are free).
    ended: std::collections::HashSet<String>,
    /// Runs to release from `starting` once committed.
    release: Vec<String>,
    /// Runs whose start on a local cluster is held and whose job had not
    /// ended then, with their cluster: each pass looks again (they are
    /// neither `pending` in the store nor released, so nothing else would).
    unended: HashMap<String, String>,
    /// When the oldest of them was held (on the runtime's clock, which the
    /// timer sleeps on).
    since: Option<tokio::time::Instant>,
    /// A wake-up is on its way for their commit.
    timer: bool,
}

/// Holds a pass's transitions and notes (which leave their runs where they
/// are), or commits them with those held before once the oldest has waited
/// [`COMMIT_EVERY`] (at once outside a runtime: a simulation); a wake-up
/// comes for a commit that no pass makes first. The commit applies them in
/// the order they were decided.
fn hold_or_commit(app: &Arc<App>, batch: Batch, notes: Batch, release: Vec<String>) {
    let mut h = app.held.lock().unwrap_or_else(|e| e.into_inner());
    for (id, t) in &notes.0 {
        h.notes.insert(id.clone(), t.description.clone());
    }
    for (id, t) in &batch.0 {
        h.runs.insert(id.clone());
        if t.to.is_final() {
            h.ended.insert(id.clone());
            h.unended.remove(id);
        } else if let (RunState::Pending, Some(cluster)) = (t.to, &t.cluster) {
            h.unended.insert(id.clone(), cluster.clone());
        }
    }
    h.batch.extend(batch.0);
    h.batch.extend(notes.0);
    h.release.extend(release);
    if h.batch.is_empty() && h.release.is_empty() {
        return;
    }
    let now = tokio::time::Instant::now();
    let due_at = *h.since.get_or_insert(now) + COMMIT_EVERY;
    let runtime = tokio::runtime::Handle::try_current().ok();
    match runtime {
        Some(rt) if now < due_at && h.batch.len() < COMMIT_MAX_HELD => {
            if !h.timer {
                h.timer = true;
                let app = app.clone();
                rt.spawn(async move {
                    tokio::time::sleep_until(due_at).await;
                    app.held.lock().unwrap_or_else(|e| e.into_inner()).timer = false;
                    app.wake.notify_one();
                });
            }
        }
        _ => {
            drop(h);
            flush(app);
        }
    }
}

/// Commits the held transitions, then releases their runs.
pub fn flush(app: &App) {
    let (batch, release, notes) = {
        let mut h = app.held.lock().unwrap_or_else(|e| e.into_inner());
        h.since = None;
        let batch = std::mem::take(&mut h.batch);
        // The notes this commit makes.
        let notes: Vec<(String, String)> = batch
            .iter()
            .filter(|(id, t)| h.notes.get(id) == Some(&t.description))
            .map(|(id, t)| (id.clone(), t.description.clone()))
            .collect();
        (batch, std::mem::take(&mut h.release), notes)
    };
    let ids: Vec<String> = batch.iter().map(|(id, _)| id.clone()).collect();
    Batch(batch).commit(app);
    if !release.is_empty() {
        let mut starting = app.starting.lock().unwrap_or_else(|e| e.into_inner());
        for id in &release {
            starting.remove(id);
        }
    }
    let mut h = app.held.lock().unwrap_or_else(|e| e.into_inner());
    for id in &ids {
        h.runs.remove(id);
        h.ended.remove(id);
        h.unended.remove(id);
    }
    for (id, description) in &notes {
        // A note held since, saying something else, stays.
        if h.notes.get(id) == Some(description) {
            h.notes.remove(id);
        }
    }
}

/// The ends of held starts whose local jobs have exited since, and their
/// runs (their slots are free).
fn recheck_held_starts(
    app: &App,
    clusters: &Clusters,
    now: Timestamp,
) -> (Batch, std::collections::HashSet<String>) {
    let unended: Vec<(String, String)> = app
        .held
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unended
        .iter()
        .map(|(id, c)| (id.clone(), c.clone()))
        .collect();
    let mut batch = Batch::default();
    let mut ended = std::collections::HashSet::new();
    for (id, cluster) in unended {
        if let Some(end) = local_end(clusters, &cluster, &id, now) {
            batch.0.push((id.clone(), end));
            ended.insert(id);
        }
    }
    (batch, ended)
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

/// Completed starts (and revivals), taken from [`App::started`].
struct Settled {
    /// Their transitions, each start followed by its job's end if the job
    /// has exited already.
    batch: Batch,
    /// Their runs, to release from `starting` once committed.
    released: Vec<String>,
    /// The runs whose jobs have ended (their slots are free).
    ended: std::collections::HashSet<String>,
}

/// Takes the completed starts, adding the end of each local job that has
/// exited already: a short job has often ended by the time its start is
/// committed, and is then committed with it (one commit and one pass, not
/// two of each).
fn settle_starts(app: &App, clusters: &Clusters, now: Timestamp) -> Settled {
    let done = std::mem::take(&mut *app.started.lock().unwrap_or_else(|e| e.into_inner()));
    // Starts to try again: released with nothing to commit.
    let retry = std::mem::take(&mut *app.retry.lock().unwrap_or_else(|e| e.into_inner()));
    let mut settled = Settled {
        batch: Batch::default(),
        released: done.iter().map(|(id, _)| id.clone()).chain(retry).collect(),
        ended: Default::default(),
    };
    for (id, t) in done {
        let end = match (t.to, &t.cluster) {
            (RunState::Pending, Some(c)) => local_end(clusters, c, &id, now),
            (RunState::Pending, None) => None,
            // A start that failed: its end is in `t`.
            _ => {
                settled.ended.insert(id.clone());
                settled.batch.0.push((id, t));
                continue;
            }
        };
        settled.batch.0.push((id.clone(), t));
        if let Some(end) = end {
            settled.ended.insert(id.clone());
            settled.batch.0.push((id, end));
        }
    }
    settled
}

/// The end of a run whose job exited with `code`.
fn exited(code: i32, now: Timestamp) -> Transition {
    match code {
        0 => Transition::to(RunState::Success, now, "Job succeeded."),
        code => Transition::to(
            RunState::Failure,
            now,
            format!("Job failed (exit code {code})."),
        ),
    }
}

/// The repository a run's job is defined for, as far as the run tells: its
/// refs' (validated against the job's own when it was created on a trusted
/// cluster), else its first `extra_refs`.
fn definition_repo(run: &Run) -> Option<String> {
    run.refs
        .as_ref()
        .or(run.extra_refs.first())
        .map(|r| format!("{}/{}", r.org, r.repo))
}

/// Where the runs of `alias`, which is not Reachable, go instead: its
/// `failover_to` cluster while that one is Reachable, unless it is a trusted
/// cluster that does not admit the run (then the run waits).
fn failover_target(app: &App, clusters: &Clusters, alias: &str, run: &Run) -> Option<String> {
    let snapshot = app.snapshot();
    let to = snapshot
        .config
        .build_clusters
        .get(alias)?
        .failover_to
        .clone()?;
    let def = clusters.defs.get(&to)?;
    if crate::clusters::health_of(app, &to, def) != Health::Reachable {
        return None;
    }
    let repo = definition_repo(run);
    let definition = bosun_cluster::trust::Definition {
        name: &run.job,
        job_type: run.job_type,
        repo: repo.as_deref(),
    };
    if let Some(why) =
        bosun_cluster::trust::refusal(&snapshot.config, &to, definition, run.refs.as_ref())
    {
        tracing::warn!(run = %run.id, from = alias, to = %to, "no failover: {why}");
        return None;
    }
    Some(to)
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
