//! Decide: what a pass does, as a pure function of what it observed —
//! `decide(&Observed, &Limits, now) -> Plan`. One function per run state,
//! as plank has (`pending`, `scheduling`, `triggered`), and one for aborts
//! of runs that have not started. Nothing here calls an executor, the store
//! or the clock; `act` carries the plan out.

pub use bosun_tekton::PIPELINE_AGENT;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bosun_cluster::admit::{admit, Limits, Running, Waiting};
use bosun_cluster::executor::RunStatus;
use bosun_cluster::kube::Health;
use bosun_cluster::registry::{unknown_cluster, ClusterDef};
use bosun_cluster::trust;
use bosun_config::duration::GoDuration;
use bosun_store::template::SpecSnapshot;
use bosun_store::{Run, RunState, Transition};
use jiff::Timestamp;

use super::observe::{cluster_of, Observed, PendingRun};
use crate::placement::Decision;

/// A run's process or pod to stop before its end is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// The run.
    pub run: String,
    /// Its cluster (in force, or removed and kept aside).
    pub cluster: String,
}

/// A pod to start again in place of its lost one.
#[derive(Debug, Clone)]
pub struct Revival {
    /// The run.
    pub run: Arc<Run>,
    /// Its cluster.
    pub cluster: String,
    /// Why its pod is gone.
    pub why: String,
    /// Its job queue.
    pub queue: Option<String>,
}

/// A run admitted to start.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The run.
    pub run: Arc<Run>,
    /// Its spec snapshot.
    pub spec: Arc<SpecSnapshot>,
    /// The cluster it starts on (its own, or its failover cluster).
    pub cluster: String,
}

/// What a pass does.
#[derive(Debug, Default)]
pub struct Plan {
    /// Transitions to commit, in the order decided.
    pub transitions: Vec<(String, Transition)>,
    /// Why waiting runs wait, where that changed (a note moves no run).
    pub notes: Vec<(String, Transition)>,
    /// Processes or pods to stop (aborts, timeouts, removed clusters).
    pub stops: Vec<Stop>,
    /// Pods to start again.
    pub revivals: Vec<Revival>,
    /// Runs to start, in admission order.
    pub starts: Vec<Admitted>,
    /// Runs in `scheduling` whose cluster the external dispatcher is asked
    /// for (off the pass).
    pub lookups: Vec<Arc<Run>>,
    /// Abort requests this plan carries out (or finds moot).
    pub aborts_taken: Vec<String>,
    /// Slots in use, for the log.
    pub running: Running,
    /// Runs that wait (admitted or not), for the log.
    pub waiting: usize,
    /// The earliest instant at which this plan's decisions change with no
    /// event: a pod's or a run's timeout, an override's expiry, a cluster
    /// entering or leaving the dispatcher's health overlay. The
    /// controller's next pass comes then at the latest.
    pub wake_at: Option<Timestamp>,
    /// Some pending run may change with no event to say so: the next pass
    /// comes within a second (the controller's poll).
    pub poll: bool,
}

impl Plan {
    fn end(&mut self, run: &Run, to: RunState, now: Timestamp, why: impl Into<String>) {
        self.transitions
            .push((run.id.clone(), Transition::to(to, now, why)));
    }

    /// Asks for a pass by `since + limit`, when a timeout counted from
    /// `since` runs out.
    fn wake_by(&mut self, since: Timestamp, limit: Duration) {
        let Ok(limit) = jiff::SignedDuration::try_from(limit) else {
            return;
        };
        let Ok(at) = since.checked_add(limit) else {
            return;
        };
        self.wake_no_later(at);
    }

    /// Asks for a pass by `at`.
    fn wake_no_later(&mut self, at: Timestamp) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }

    fn hold_slot(&mut self, job: &str, cluster: &str, queue: Option<&String>) {
        let r = &mut self.running;
        r.total += 1;
        *r.by_job.entry(job.to_string()).or_default() += 1;
        *r.by_cluster.entry(cluster.to_string()).or_default() += 1;
        if let Some(q) = queue {
            *r.by_queue.entry(q.clone()).or_default() += 1;
        }
    }
}

/// How long an aborted job gets between SIGTERM and SIGKILL.
pub const ABORT_GRACE: Duration = Duration::from_secs(5);

/// The limits a pass admits runs under: plank's and each cluster's slots.
pub fn limits(o: &Observed) -> Limits {
    let plank = &o.snapshot.config.plank;
    Limits {
        global: plank.max_concurrency.max(0) as u32,
        queues: plank
            .job_queue_capacities
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        cluster_slots: o
            .clusters
            .defs
            .iter()
            .map(|(a, c)| match c {
                ClusterDef::Local { slots } | ClusterDef::Kubernetes { slots, .. } => {
                    (a.clone(), *slots as u32)
                }
            })
            .collect(),
    }
}

/// The pass's plan.
pub fn decide(o: &Observed, limits: &Limits, now: Timestamp) -> Plan {
    let mut plan = Plan {
        poll: o.unreported,
        ..Plan::default()
    };
    if let Some(at) = o.placement_change_at {
        plan.wake_no_later(at);
    }
    // Runs this plan has decided something for: no second decision.
    let mut decided: HashSet<&str> = HashSet::new();
    // (Pending runs are never among the scheduling or waiting ones.)
    for p in &o.pending {
        decide_pending(o, p, now, &mut plan);
    }
    for s in &o.starting {
        plan.hold_slot(&s.job, &s.cluster, s.queue.as_ref());
    }
    for (id, run) in &o.unstarted_aborts {
        if decide_unstarted_abort(id, run.as_deref(), now, &mut plan) {
            decided.insert(id);
        }
    }
    for run in o
        .scheduling
        .iter()
        .filter(|r| !decided.contains(r.id.as_str()))
    {
        decide_scheduling(o, run, now, &mut plan);
    }
    let mut waiting = Vec::new();
    let mut candidates = Vec::new();
    for run in o
        .waiting
        .iter()
        .filter(|r| !decided.contains(r.id.as_str()))
    {
        if let Some((w, admitted)) = decide_triggered(o, run, now, &mut plan) {
            waiting.push(w);
            candidates.push(admitted);
        }
    }
    plan.waiting = waiting.len();
    let admitted: HashSet<String> = admit(&waiting, &plan.running, limits).into_iter().collect();
    plan.starts = candidates
        .into_iter()
        .filter(|a| admitted.contains(&a.run.id))
        .collect();
    plan
}

/// A pending run: its job's end, an abort, a revival, the running timeout,
/// or it goes on (holding its slot).
pub fn decide_pending(o: &Observed, p: &PendingRun, now: Timestamp, plan: &mut Plan) {
    let run = &p.run;
    let stop = || Stop {
        run: run.id.clone(),
        cluster: p.cluster.clone(),
    };
    let Some(status) = &p.status else {
        // Its process or pod is stopped first: the run's end is final.
        plan.stops.push(stop());
        plan.end(
            run,
            RunState::Error,
            now,
            format!("build cluster {} was removed", p.cluster),
        );
        return;
    };
    if o.aborts.contains(&run.id) {
        plan.aborts_taken.push(run.id.clone());
        plan.stops.push(stop());
        plan.end(run, RunState::Aborted, now, "Run aborted.");
        return;
    }
    let queue = o.spec(run).and_then(|s| job_queue(s));
    match status {
        RunStatus::Exited { code } => plan.transitions.push((run.id.clone(), exited(*code, now))),
        RunStatus::Lost if o.replicated && matches!(o.clusters.defs.get(&p.cluster), Some(ClusterDef::Local { .. })) => plan.end(
            run,
            RunState::Error,
            now,
            format!(
                "the replica that ran it on local cluster {} stopped leading (or lost its process): a local run does not move to another replica",
                p.cluster
            ),
        ),
        RunStatus::Lost => plan.end(run, RunState::Error, now, "executor lost the process"),
        RunStatus::Failed(why) => plan.end(run, RunState::Error, now, why.clone()),
        // A PipelineRun is never made again: its tasks may have run.
        RunStatus::Revivable(why) if o.spec(run).is_some_and(|s| s.job.agent == PIPELINE_AGENT) => {
            plan.end(
                run,
                RunState::Error,
                now,
                format!("The run's PipelineRun is gone: {why}."),
            );
        }
        // As plank: the pod is started again, up to `max_revivals` times.
        RunStatus::Revivable(why) => {
            let max = o.snapshot.config.plank.max_revivals.unwrap_or(3).max(0) as u32;
            if run.pod_revival_count >= max {
                plan.end(
                    run,
                    RunState::Error,
                    now,
                    format!("Job pod reached max revivals ({max}) after {why}."),
                );
                return;
            }
            // It still holds its slot (not its queue's, as before).
            plan.hold_slot(&run.job, &p.cluster, None);
            plan.revivals.push(Revival {
                run: run.clone(),
                cluster: p.cluster.clone(),
                why: why.clone(),
                queue,
            });
        }
        // As plank: a pod never scheduled, or scheduled and never running,
        // ends in error past its timeout (the job's own, else plank's), and
        // is deleted.
        RunStatus::PodPending { created, scheduled } => {
            let timeouts = PlankTimeouts::of(o, run);
            let past = |since: Timestamp, limit: Duration| {
                now.duration_since(since).unsigned_abs() >= limit
            };
            let (since, limit, why) = match scheduled {
                None => (*created, timeouts.unscheduled, "Pod scheduling timeout."),
                Some(at) => (*at, timeouts.pending, "Pod pending timeout."),
            };
            if past(since, limit) {
                plan.stops.push(stop());
                plan.end(run, RunState::Error, now, why);
                return;
            }
            plan.wake_by(since, limit);
            plan.hold_slot(&run.job, &p.cluster, queue.as_ref());
        }
        RunStatus::Running { .. } | RunStatus::Starting | RunStatus::Ending => {
            // As plank: only a running job times out so (a pod still
            // pending has the scheduling and pending timeouts).
            let running = matches!(status, RunStatus::Running { .. });
            if let Some(at) = run.pending_at.filter(|_| running) {
                let limit = PlankTimeouts::of(o, run).running;
                if now.duration_since(at).unsigned_abs() >= limit {
                    plan.stops.push(stop());
                    plan.end(run, RunState::Aborted, now, "Pod running timeout.");
                    return;
                }
                plan.wake_by(at, limit);
            }
            plan.hold_slot(&run.job, &p.cluster, queue.as_ref());
        }
    }
}

/// An abort requested for a run not being started: a waiting run ends
/// aborted; a request for a run that is complete or unknown is dropped; a
/// pending run's is left to `decide_pending`. Returns whether the run was
/// decided.
pub fn decide_unstarted_abort(
    id: &str,
    run: Option<&Run>,
    now: Timestamp,
    plan: &mut Plan,
) -> bool {
    match run {
        Some(run) if matches!(run.state, RunState::Triggered | RunState::Scheduling) => {
            plan.aborts_taken.push(id.to_string());
            plan.end(run, RunState::Aborted, now, "Run aborted.");
            true
        }
        None => {
            plan.aborts_taken.push(id.to_string());
            false
        }
        Some(_) => false,
    }
}

/// A run in `scheduling` (`scheduler.enabled`) gets its cluster, with
/// Prow's failover mapping applied (unconditionally, as Prow does, but never
/// onto a trusted cluster that does not admit the run), then waits to start
/// there.
pub fn decide_scheduling(o: &Observed, run: &Arc<Run>, now: Timestamp, plan: &mut Plan) {
    let config = &o.snapshot.config;
    let mut to = run.configured_cluster.clone();
    // Step 2: bosun's plan, else the external dispatcher.
    let mut how = Vec::new();
    match o.placements.get(&run.id).cloned() {
        Some(Decision::Ready(placed)) => {
            match placed.cluster {
                Some(c) if c != to => match trust_refusal(o, &c, run) {
                    None => to = c,
                    Some(why) => {
                        tracing::warn!(run = %run.id, to = %c, "dispatcher's cluster ignored: {why}");
                        how.push(format!("{c} refused: {why}"));
                    }
                },
                _ => {}
            }
            if !placed.why.is_empty() {
                how.push(placed.why);
            }
        }
        Some(Decision::LookUp) => {
            plan.lookups.push(run.clone());
            return;
        }
        Some(Decision::NotYet) => return,
        None => {}
    }
    // Step 3: Prow's failover mappings.
    if let Some(mapped) = config.scheduler.failover.mappings.get(&to) {
        match trust_refusal(o, mapped, run) {
            // Prow's words for a mapped run: the cluster, nothing more.
            None => to = mapped.clone(),
            Some(why) => {
                tracing::warn!(run = %run.id, to = %mapped, "failover mapping ignored: {why}")
            }
        }
    }
    let description = if how.is_empty() {
        format!("Job scheduled to cluster {to}.")
    } else {
        format!("Job scheduled to cluster {to} ({}).", how.join("; "))
    };
    let mut t = Transition::to(RunState::Triggered, now, description);
    t.cluster = Some(to);
    plan.transitions.push((run.id.clone(), t));
}

/// A run in `triggered`: aborted, ended (its cluster or job cannot run it),
/// left waiting with a note (its cluster is not Reachable and has no
/// failover), or a candidate for admission on its target cluster.
pub fn decide_triggered(
    o: &Observed,
    run: &Arc<Run>,
    now: Timestamp,
    plan: &mut Plan,
) -> Option<(Waiting, Admitted)> {
    if o.aborts.contains(&run.id) {
        plan.aborts_taken.push(run.id.clone());
        plan.end(run, RunState::Aborted, now, "Run aborted.");
        return None;
    }
    let alias = cluster_of(run);
    if o.snapshot
        .config
        .disabled_clusters
        .iter()
        .any(|c| c == alias)
    {
        plan.end(
            run,
            RunState::Error,
            now,
            format!("Terminal error: cluster {alias:?} is disabled."),
        );
        return None;
    }
    if !o.clusters.defs.contains_key(alias) {
        plan.end(
            run,
            RunState::Error,
            now,
            format!("Terminal error: {}.", unknown_cluster(alias)),
        );
        return None;
    }
    // A cluster that is not Reachable keeps its runs waiting, or hands them
    // to its `failover_to` cluster while that one is Reachable.
    let health = o.health[alias].clone();
    let target = match health {
        Health::Reachable => alias.to_string(),
        health => match overlay_target(o, alias, run).or_else(|| failover_target(o, alias, run)) {
            Some(t) => t,
            None => {
                // It waits, and says why (once, not on every pass).
                let why = format!("Waiting: build cluster {alias} is {}.", health.word());
                if run.description != why && o.held_notes.get(&run.id) != Some(&why) {
                    plan.notes
                        .push((run.id.clone(), Transition::to(run.state, now, why)));
                }
                return None;
            }
        },
    };
    if !o.clusters.executors.contains_key(&target) {
        plan.end(
            run,
            RunState::Error,
            now,
            format!("Terminal error: cluster {target:?} has no executor (see the daemon's log)."),
        );
        return None;
    }
    let Some(spec) = o.spec(run) else {
        plan.end(
            run,
            RunState::Error,
            now,
            "Terminal error: the run's job spec is missing.",
        );
        return None;
    };
    let pipeline = spec.job.agent == PIPELINE_AGENT;
    if spec.job.agent != "kubernetes" && !pipeline {
        plan.end(
            run,
            RunState::Error,
            now,
            format!("agent {} is not supported", spec.job.agent),
        );
        return None;
    }
    if spec.job.decorate == Some(true) && spec.decoration.is_none() {
        // Runs carry their resolved decoration config since bosun runs
        // decorated jobs; a run created before has none.
        plan.end(
            run,
            RunState::Error,
            now,
            "Terminal error: the run carries no decoration config (it was created by an earlier bosun); trigger the job again.",
        );
        return None;
    }
    if spec.pod_spec.is_none() && !pipeline {
        plan.end(
            run,
            RunState::Error,
            now,
            "Terminal error: the job has no pod spec.",
        );
        return None;
    }
    let waiting = Waiting {
        id: run.id.clone(),
        job: run.job.clone(),
        max_concurrency: spec.job.max_concurrency.max(0) as u32,
        queue: job_queue(spec),
        cluster: target.clone(),
    };
    let admitted = Admitted {
        run: run.clone(),
        spec: spec.clone(),
        cluster: target,
    };
    Some((waiting, admitted))
}

/// Where a run still `triggered` on `alias`, which is not Reachable, goes
/// when the dispatcher's health overlay serves its job from another cluster
/// (Reachable, and admitting it if trusted).
fn overlay_target(o: &Observed, alias: &str, run: &Run) -> Option<String> {
    let cluster = o.overlay.get(&run.job)?;
    if cluster == alias
        || o.health.get(cluster) != Some(&Health::Reachable)
        || !o.clusters.executors.contains_key(cluster)
    {
        return None;
    }
    if let Some(why) = trust_refusal(o, cluster, run) {
        tracing::warn!(run = %run.id, to = %cluster, "health overlay ignored: {why}");
        return None;
    }
    Some(cluster.clone())
}

/// Where the runs of `alias`, which is not Reachable, go instead: its
/// `failover_to` cluster while that one is Reachable, unless it is a trusted
/// cluster that does not admit the run (then the run waits).
fn failover_target(o: &Observed, alias: &str, run: &Run) -> Option<String> {
    let to = o
        .snapshot
        .config
        .build_clusters
        .get(alias)?
        .failover_to
        .clone()?;
    o.clusters.defs.get(&to)?;
    if o.health.get(&to) != Some(&Health::Reachable) {
        return None;
    }
    if let Some(why) = trust_refusal(o, &to, run) {
        tracing::warn!(run = %run.id, from = alias, to = %to, "no failover: {why}");
        return None;
    }
    Some(to)
}

/// Why the trusted cluster `to` would not take `run`, if it would not.
fn trust_refusal(o: &Observed, to: &str, run: &Run) -> Option<String> {
    // The repository a run's job is defined for, as far as the run tells:
    // its refs' (checked against the job's own when it was created on a
    // trusted cluster), else its first `extra_refs`.
    let repo = run
        .refs
        .as_deref()
        .or(run.extra_refs.first())
        .map(|r| format!("{}/{}", r.org, r.repo));
    let definition = trust::Definition {
        name: &run.job,
        job_type: run.job_type,
        repo: repo.as_deref(),
    };
    trust::refusal(&o.snapshot.config, to, definition, run.refs.as_deref())
}

/// The end of a run whose job exited with `code`.
pub fn exited(code: i32, now: Timestamp) -> Transition {
    match code {
        0 => Transition::to(RunState::Success, now, "Job succeeded."),
        code => Transition::to(
            RunState::Failure,
            now,
            format!("Job failed (exit code {code})."),
        ),
    }
}

/// Plank's three pod timeouts for a run: each is its job's own
/// (`decoration_config`, as resolved into the run's spec), when set, longer
/// or shorter than plank's global one, which applies otherwise (defaults:
/// 5m unscheduled, 10m pending, 48h running).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlankTimeouts {
    /// `pod_unscheduled_timeout`: from the pod's creation while no node has
    /// started it.
    pub unscheduled: Duration,
    /// `pod_pending_timeout`: from the pod's start while it is pending.
    pub pending: Duration,
    /// `pod_running_timeout`: from the run's start while it runs.
    pub running: Duration,
}

impl PlankTimeouts {
    /// `run`'s timeouts under the configuration `o` observed.
    pub fn of(o: &Observed, run: &Run) -> Self {
        let plank = &o.snapshot.config.plank;
        let own = o
            .spec(run)
            .and_then(|s| s.decoration.as_ref().or(s.job.decoration_config.as_ref()));
        let pick = |own: Option<GoDuration>, global: Option<GoDuration>, default: u64| {
            own.or(global)
                .map_or(Duration::from_secs(default), |d| d.to_std())
        };
        PlankTimeouts {
            unscheduled: pick(
                own.and_then(|d| d.pod_unscheduled_timeout),
                plank.pod_unscheduled_timeout,
                5 * 60,
            ),
            pending: pick(
                own.and_then(|d| d.pod_pending_timeout),
                plank.pod_pending_timeout,
                10 * 60,
            ),
            running: pick(
                own.and_then(|d| d.pod_running_timeout),
                plank.pod_running_timeout,
                48 * 3600,
            ),
        }
    }
}

/// A job's queue (`job_queue_name`), if it names one.
pub fn job_queue(spec: &SpecSnapshot) -> Option<String> {
    spec.job.job_queue_name.clone().filter(|q| !q.is_empty())
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
