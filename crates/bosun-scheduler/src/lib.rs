//! The periodic scheduler's core: one timer entry per periodic in a queue
//! ordered by the next due instant, and the schedule engine's decisions applied
//! to the store. The daemon runs it (`bosun-daemon/src/periodics.rs`: the scheduler
//! task); time is an argument, so tests run simulated time.
//!
//! Every fire inserts its run under the store's unique key (periodic,
//! scheduled_at, attempt): a retry, a restart or a duplicate fire finds the
//! existing run and creates nothing. Skips are recorded with their reason, and
//! the schedule state (last tick, first seen, paused, queued) is written beside
//! the runs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use bosun_schedule::decide::{decide, Outcome, Policy, RunView, Runs, ScheduleState};
use bosun_store::{
    Created, Fire, NewRun, PeriodicRuns, PeriodicState, PreparedFires, Run, RunState, Store,
    StoreError, TickOutcome,
};
use jiff::{SignedDuration, Timestamp};

/// A periodic as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct PeriodicJob {
    /// Its identity (name, or `ORG/REPO:name`), shared with its policy and
    /// the scheduler's index.
    pub identity: Arc<str>,
    /// Hash of its schedule definition: a change resets `first_seen`.
    pub schedule_hash: String,
    /// Its policies and trigger.
    pub policy: Policy,
    /// The run to create for a tick (the scheduler sets `scheduled_at` and
    /// `attempt`); its spec is shared JSON text.
    pub template: NewRun,
}

/// A `replace` decision: the periodic's active runs are aborted, but for the
/// runs its fire created, which replace them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replace {
    /// The periodic's identity.
    pub periodic: String,
    /// The runs of the fire that decided it (new, or found under their tick's key).
    pub keep: Vec<String>,
}

/// What one fire did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FireReport {
    /// Runs created (new ones only).
    pub created: Vec<std::sync::Arc<Run>>,
    /// Outcomes recorded.
    pub outcomes: Vec<TickOutcome>,
    /// Periodics whose older active runs must be aborted (`replace`).
    pub abort: Vec<Replace>,
    /// Periodics fired without a store error.
    pub fired: Vec<String>,
    /// Fires decided ahead and committed.
    pub prepared: usize,
    /// Fires decided ahead that the store refused as stale (decided again).
    pub stale: usize,
}

/// A periodic's place in the scheduler.
struct Slot {
    job: Box<PeriodicJob>,
    /// Entries of the queue with another generation are stale.
    generation: u64,
    /// When it next fires (its last decision's wake-up), for listings and metrics.
    next_fire: Option<Timestamp>,
    /// The end of one of its runs may change its decision (see
    /// [`Scheduler::run_ended`]); true until its first decision.
    waits_on_end: bool,
}

/// Whether a periodic's policy makes a run's end matter: an interval counts
/// from the previous run's end (or waits for it), `queue_one` holds a tick
/// until it, a retry follows a failed run.
fn policy_waits_on_end(policy: &Policy) -> bool {
    !matches!(policy.trigger, bosun_schedule::decide::Trigger::Cron(_))
        || policy.concurrency == bosun_config::types::ConcurrencyPolicy::QueueOne
        || policy.retry.is_some()
}

/// A periodic's fire decided ahead of its instant.
struct ArmedEntry {
    generation: u64,
    slot: u32,
    wake: Option<Timestamp>,
    outcomes: Vec<TickOutcome>,
    abort: bool,
    /// Its decision depends on the second it is applied in (a starting
    /// deadline, or `catch_up: skip`).
    exact: bool,
    /// The decision leaves a tick queued (`queue_one`).
    queued: bool,
}

/// Fires decided ahead of their common instant, ready in the store.
struct Armed {
    at: Timestamp,
    entries: Vec<ArmedEntry>,
    fires: PreparedFires,
}

/// The scheduler. Memory per periodic, beyond its entry: one slot, one index
/// bucket (the identity is shared, not copied) and its queue entries (a slot
/// number, not a name).
#[derive(Default)]
pub struct Scheduler {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    index: HashMap<Arc<str>, u32>,
    queue: BinaryHeap<Reverse<(Timestamp, u64, u32)>>,
    generation: u64,
    armed: Option<Armed>,
}

impl Scheduler {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, identity: &str) -> Option<&Slot> {
        let i = *self.index.get(identity)?;
        self.slots[i as usize].as_ref()
    }

    /// Evaluates every periodic again at `now` from its stored state, as
    /// at start-up (fires prepared ahead are dropped): for a replica that
    /// becomes the leader after another led, whose timers are stale.
    pub fn reevaluate_all(&mut self, now: Timestamp) {
        self.armed = None;
        self.queue.clear();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(slot) = slot {
                self.generation += 1;
                slot.generation = self.generation;
                slot.next_fire = None;
                slot.waits_on_end = true;
                self.queue.push(Reverse((now, self.generation, i as u32)));
            }
        }
    }

    /// Replaces the set of periodics: new and changed ones are evaluated at
    /// `now`, unchanged ones keep their timers, removed ones leave (their queue
    /// entries are dropped lazily).
    pub fn set_jobs(&mut self, jobs: Vec<PeriodicJob>, now: Timestamp) {
        self.set_jobs_where(jobs, now, |_| true);
    }

    /// [`Scheduler::set_jobs`] for the periodics `owned` says are this set's
    /// (a followed repository's, by identity): `jobs` replaces them, and only
    /// they are removed when `jobs` has them no more; the others are left as
    /// they are. Every job of `jobs` must be owned.
    pub fn set_jobs_where(
        &mut self,
        jobs: Vec<PeriodicJob>,
        now: Timestamp,
        owned: impl Fn(&str) -> bool,
    ) {
        debug_assert!(jobs.iter().all(|j| owned(&j.identity)));
        let mut keep = std::collections::HashSet::with_capacity(jobs.len());
        for job in jobs {
            keep.insert(job.identity.clone());
            match self.index.get(&*job.identity).copied() {
                Some(i) => {
                    let slot = self.slots[i as usize].as_mut().expect("indexed slot");
                    let unchanged = slot.job.schedule_hash == job.schedule_hash
                        && slot.job.template == job.template;
                    *slot.job = job;
                    if !unchanged {
                        self.generation += 1;
                        slot.generation = self.generation;
                        slot.next_fire = None;
                        slot.waits_on_end = true;
                        self.queue.push(Reverse((now, self.generation, i)));
                    }
                }
                None => {
                    self.generation += 1;
                    let slot = Slot {
                        job: Box::new(job),
                        generation: self.generation,
                        next_fire: None,
                        waits_on_end: true,
                    };
                    let identity = slot.job.identity.clone();
                    let i = match self.free.pop() {
                        Some(i) => {
                            self.slots[i as usize] = Some(slot);
                            i
                        }
                        None => {
                            self.slots.push(Some(slot));
                            (self.slots.len() - 1) as u32
                        }
                    };
                    self.index.insert(identity, i);
                    self.queue.push(Reverse((now, self.generation, i)));
                }
            }
        }
        let gone: Vec<Arc<str>> = self
            .index
            .keys()
            .filter(|id| owned(id) && !keep.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            if let Some(i) = self.index.remove(&id) {
                self.slots[i as usize] = None;
                self.free.push(i);
            }
        }
    }

    /// The periodics.
    pub fn jobs(&self) -> impl Iterator<Item = &PeriodicJob> {
        self.slots.iter().flatten().map(|s| &*s.job)
    }

    /// The periodic `identity`, if scheduled.
    pub fn job(&self, identity: &str) -> Option<&PeriodicJob> {
        self.slot(identity).map(|s| &*s.job)
    }

    /// When `identity` next fires, as its last evaluation decided (none: it
    /// has not been evaluated yet, or never fires again).
    pub fn next_fire(&self, identity: &str) -> Option<Timestamp> {
        self.slot(identity)?.next_fire
    }

    /// A run of `identity` ended at `now`: evaluates it if that may change its
    /// decision (its policy waits on ends, or a tick is queued), and says
    /// whether it will. A cron periodic under `forbid`, `allow` or `replace`
    /// decides each tick at the tick, so the end of its run changes nothing
    /// (and a burst of ended runs costs the scheduler nothing).
    pub fn run_ended(&mut self, identity: &str, now: Timestamp) -> bool {
        let waits = self.slot(identity).is_some_and(|s| s.waits_on_end);
        if waits {
            self.poke(identity, now);
        }
        waits
    }

    /// Evaluates `identity` at `now` (it was paused, triggered, ...).
    pub fn poke(&mut self, identity: &str, now: Timestamp) {
        if let Some(&i) = self.index.get(identity) {
            if let Some(slot) = &self.slots[i as usize] {
                self.queue.push(Reverse((now, slot.generation, i)));
            }
        }
    }

    fn current(&self, generation: u64, i: u32) -> bool {
        self.slots
            .get(i as usize)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.generation == generation)
    }

    /// When the earliest entry of the queue is due (superseded entries are
    /// dropped first).
    fn next_queued(&mut self) -> Option<Timestamp> {
        while let Some(&Reverse((t, generation, i))) = self.queue.peek() {
            if self.current(generation, i) {
                return Some(t);
            }
            self.queue.pop();
        }
        None
    }

    /// When the earliest entry is due (prepared ones included).
    pub fn next_wake(&mut self) -> Option<Timestamp> {
        let queued = self.next_queued();
        match (self.armed.as_ref().map(|a| a.at), queued) {
            (Some(a), Some(q)) => Some(a.min(q)),
            (a, q) => a.or(q),
        }
    }

    /// When a loop that prepares fires `lead` ahead ([`Scheduler::prepare`])
    /// should wake next: `lead` before the earliest entry's instant when
    /// nothing is prepared and that is still ahead of `now`, else at the
    /// earliest instant.
    pub fn next_wake_ahead(&mut self, now: Timestamp, lead: SignedDuration) -> Option<Timestamp> {
        let queued = self.next_queued();
        match (&self.armed, queued) {
            (Some(a), q) => Some(q.map_or(a.at, |q| q.min(a.at))),
            (None, Some(q)) if q - lead > now => Some(q - lead),
            (None, q) => q,
        }
    }

    /// The instant of the fires prepared, if any.
    pub fn prepared_at(&self) -> Option<Timestamp> {
        self.armed.as_ref().map(|a| a.at)
    }

    /// Decides ahead the fires of every entry due at the earliest instant, if
    /// that instant is after `now` and at most `lead` away and nothing is
    /// prepared yet: their schedule states and runs are read now, decided as
    /// at that instant, and readied in the store, so that at the instant only
    /// the commit is left ([`Scheduler::fire_due`] does it). The store refuses
    /// a prepared fire whose periodic changed in between (a run ended, a
    /// pause, ...), and that periodic is decided again then. Returns how many
    /// fires were prepared (0: nothing due in the window, a store that cannot
    /// prepare, or a failed read; those entries fire the usual way).
    pub fn prepare(&mut self, store: &dyn Store, now: Timestamp, lead: SignedDuration) -> usize {
        if self.armed.is_some() || store.periodic_versions(&[]).is_none() {
            return 0;
        }
        let Some(at) = self.next_queued().filter(|&t| t > now && t - lead <= now) else {
            return 0;
        };
        let due = self.pop_due(at);
        let ids: Vec<String> = due.iter().map(|(id, ..)| id.clone()).collect();
        // Versions first, then the reads: a change after the versions were
        // taken makes the commit refuse the fire, never the other way round.
        let read = store
            .periodic_versions(&ids)
            .ok_or_else(|| StoreError::Unavailable("no versions".into()))
            .and_then(|v| Ok((v, store.periodic_states(&ids)?)))
            .and_then(|(v, states)| Ok((v, states, store.periodic_runs(&ids)?)));
        let (versions, mut states, mut runs) = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "cannot prepare fires; they fire when due");
                self.requeue(at, &due);
                return 0;
            }
        };
        let mut entries = Vec::with_capacity(due.len());
        let mut fires = Vec::with_capacity(due.len());
        for ((identity, generation, i), version) in due.iter().zip(versions) {
            let job = &self.slots[*i as usize].as_ref().expect("current").job;
            let (fire, wake, abort) = plan(
                job,
                states.remove(identity),
                runs.remove(identity).unwrap_or_default(),
                at,
            );
            entries.push(ArmedEntry {
                generation: *generation,
                slot: *i,
                wake,
                outcomes: fire.outcomes.clone(),
                abort,
                exact: job.policy.starting_deadline.is_some()
                    || job.policy.catch_up != bosun_config::types::CatchUp::Latest,
                queued: fire.state.queued.is_some(),
            });
            fires.push((fire, version));
        }
        match store.prepare_fires(fires) {
            Ok(fires) => {
                let n = entries.len();
                self.armed = Some(Armed { at, entries, fires });
                n
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot prepare fires; they fire when due");
                self.requeue(at, &due);
                0
            }
        }
    }

    /// Takes the current entries due at or before `now` off the queue, one
    /// per periodic (a poke and its timer make one decision).
    fn pop_due(&mut self, now: Timestamp) -> Vec<(String, u64, u32)> {
        let mut due = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while let Some(&Reverse((t, generation, i))) = self.queue.peek() {
            if t > now {
                break;
            }
            self.queue.pop();
            if !self.current(generation, i) {
                continue; // superseded by a newer entry, or removed
            }
            if seen.insert(i) {
                let slot = self.slots[i as usize].as_ref().expect("current");
                due.push((slot.job.identity.to_string(), generation, i));
            }
        }
        due
    }

    fn requeue(&mut self, at: Timestamp, due: &[(String, u64, u32)]) {
        for &(_, generation, i) in due {
            self.queue.push(Reverse((at, generation, i)));
        }
    }

    /// Commits the prepared fires if their instant has come: those of
    /// periodics changed or removed since are dropped (their new entries
    /// fire), stale ones go back on the queue to be decided at `now`. After a
    /// wake in a later second than the instant, those whose decision depends
    /// on lateness are decided again.
    fn fire_armed(
        &mut self,
        store: &dyn Store,
        now: Timestamp,
        report: &mut FireReport,
        failed: &mut Vec<(String, StoreError)>,
    ) {
        let Some(armed) = self.armed.take_if(|a| a.at <= now) else {
            return;
        };
        let Armed {
            at,
            entries,
            mut fires,
        } = armed;
        // A decision counts lateness in whole seconds, and only against a
        // starting deadline or `catch_up: skip`'s grace: after a wake in a
        // later second, only periodics with one are decided again.
        let late = now.as_second() != at.as_second();
        let mut keep: Vec<bool> = Vec::with_capacity(entries.len());
        for e in &entries {
            let current = self.current(e.generation, e.slot);
            if current && late && e.exact {
                self.queue.push(Reverse((now, e.generation, e.slot)));
            }
            keep.push(current && !(late && e.exact));
        }
        fires.retain(|k, _| keep[k]);
        let entries = entries
            .into_iter()
            .zip(keep)
            .filter_map(|(e, k)| k.then_some(e));
        let results = store.commit_prepared(fires, now);
        // A burst's runs are moved into the report once, not regrown.
        report
            .created
            .reserve(results.iter().flatten().map(Vec::len).sum());
        for (e, result) in entries.zip(results) {
            let identity = match self.slots[e.slot as usize].as_ref() {
                Some(slot) => slot.job.identity.to_string(),
                None => continue,
            };
            match result {
                Ok(created) => {
                    report.prepared += 1;
                    self.record(
                        report,
                        identity,
                        e.slot,
                        e.generation,
                        e.wake,
                        e.outcomes,
                        e.abort,
                        e.queued,
                        created,
                    )
                }
                Err(StoreError::Stale(_)) => {
                    report.stale += 1;
                    self.queue.push(Reverse((now, e.generation, e.slot)))
                }
                Err(err) => failed.push((identity, err)),
            }
        }
    }

    /// Records a committed fire in the report and sets the periodic's timer.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        report: &mut FireReport,
        identity: String,
        i: u32,
        generation: u64,
        wake: Option<Timestamp>,
        mut outcomes: Vec<TickOutcome>,
        abort: bool,
        queued: bool,
        created: Vec<Created>,
    ) {
        for o in &mut outcomes {
            o.fill_run_id(&created);
        }
        if abort {
            report.abort.push(Replace {
                periodic: identity.clone(),
                keep: created.iter().map(|c| c.run().id.clone()).collect(),
            });
        }
        report
            .created
            .extend(created.into_iter().filter_map(|c| match c {
                Created::New(run) => Some(run),
                Created::Existing(_) => None,
            }));
        report.outcomes.extend(outcomes);
        report.fired.push(identity);
        if let Some(slot) = self.slots[i as usize].as_mut() {
            slot.next_fire = wake;
            slot.waits_on_end = queued || policy_waits_on_end(&slot.job.policy);
        }
        if let Some(wake) = wake {
            self.queue.push(Reverse((wake, generation, i)));
        }
    }

    /// Fires every entry due at `now`: prepared fires whose instant has come
    /// are committed first, then the due periodics' states and runs are read
    /// in a batch, each is decided, and their commits are handed to the store
    /// together (each on its own: a periodic whose store calls fail is retried
    /// later by the caller, the others are unaffected).
    pub fn fire_due(
        &mut self,
        store: &dyn Store,
        now: Timestamp,
    ) -> (FireReport, Vec<(String, StoreError)>) {
        let mut report = FireReport::default();
        let mut failed = Vec::new();
        self.fire_armed(store, now, &mut report, &mut failed);
        let due = self.pop_due(now);
        if due.is_empty() {
            return (report, failed);
        }
        let ids: Vec<String> = due.iter().map(|(id, ..)| id.clone()).collect();
        let read = store
            .periodic_states(&ids)
            .and_then(|states| Ok((states, store.periodic_runs(&ids)?)));
        let (mut states, mut runs) = match read {
            Ok(r) => r,
            Err(e) => {
                let msg = e.to_string();
                failed.extend(
                    ids.into_iter()
                        .map(|id| (id, StoreError::Unavailable(msg.clone()))),
                );
                return (report, failed);
            }
        };
        let mut plans = Vec::with_capacity(due.len());
        let mut fires = Vec::with_capacity(due.len());
        for (identity, generation, i) in due {
            let job = &self.slots[i as usize].as_ref().expect("current").job;
            let (fire, wake, abort) = plan(
                job,
                states.remove(&identity),
                runs.remove(&identity).unwrap_or_default(),
                now,
            );
            let queued = fire.state.queued.is_some();
            plans.push((
                identity,
                generation,
                i,
                wake,
                fire.outcomes.clone(),
                abort,
                queued,
            ));
            fires.push(fire);
        }
        let results = store.commit_fires(fires, now);
        report
            .created
            .reserve(results.iter().flatten().map(Vec::len).sum());
        for ((identity, generation, i, wake, outcomes, abort, queued), result) in
            plans.into_iter().zip(results)
        {
            match result {
                Ok(created) => self.record(
                    &mut report,
                    identity,
                    i,
                    generation,
                    wake,
                    outcomes,
                    abort,
                    queued,
                    created,
                ),
                Err(e) => failed.push((identity, e)),
            }
        }
        (report, failed)
    }
}

/// One periodic at `now`: what to commit, when to look again, and whether
/// to abort its active runs (`replace`). Pure.
fn plan(
    job: &PeriodicJob,
    state: Option<PeriodicState>,
    runs: PeriodicRuns,
    now: Timestamp,
) -> (Fire, Option<Timestamp>, bool) {
    let mut state = match state {
        Some(s) if s.schedule_hash == job.schedule_hash => s,
        Some(s) => PeriodicState {
            schedule_hash: job.schedule_hash.clone(),
            first_seen: now,
            ..s
        },
        None => PeriodicState {
            periodic: job.identity.to_string(),
            schedule_hash: job.schedule_hash.clone(),
            first_seen: now,
            last_tick: None,
            paused: false,
            queued: None,
        },
    };
    let last = runs.last.as_ref().map(|r| RunView {
        created_at: r.created_at,
        completed_at: r.completed_at,
        scheduled_at: r.scheduled_at,
        attempt: r.attempt,
        succeeded: r.state == RunState::Success,
    });
    let decision = decide(
        &job.policy,
        &ScheduleState {
            last_tick: state.last_tick,
            first_seen: state.first_seen,
            paused: state.paused,
            queued: state.queued,
        },
        &Runs {
            last,
            active: runs.active,
        },
        now,
    );
    let mut outcomes = Vec::new();
    let mut new_runs = Vec::new();
    let advance = |state: &mut PeriodicState, t: Timestamp| {
        if state.last_tick.is_none_or(|l| t > l) {
            state.last_tick = Some(t);
        }
    };
    for o in &decision.outcomes {
        match *o {
            Outcome::Run { tick, attempt } => {
                let mut new = job.template.clone();
                new.scheduled_at = Some(tick);
                new.attempt = attempt;
                new_runs.push(new);
                if attempt == 0 {
                    // The store fills in the run's id.
                    outcomes.push(TickOutcome {
                        periodic: job.identity.to_string(),
                        first_tick: tick,
                        last_tick: tick,
                        count: 1,
                        outcome: "run".into(),
                        run_id: None,
                        recorded_at: now,
                    });
                }
                if state.queued == Some(tick) {
                    state.queued = None;
                }
                advance(&mut state, tick);
            }
            Outcome::Skip {
                first,
                last,
                count,
                reason,
            } => {
                outcomes.push(TickOutcome {
                    periodic: job.identity.to_string(),
                    first_tick: first,
                    last_tick: last,
                    count,
                    outcome: reason.as_str().into(),
                    run_id: None,
                    recorded_at: now,
                });
                if state.queued == Some(first) {
                    state.queued = None;
                }
                advance(&mut state, last);
            }
            Outcome::Queue { tick } => {
                state.queued = Some(tick);
                advance(&mut state, tick);
            }
        }
    }
    // Runs, outcomes and state in one commit: a crash in between can neither
    // record a tick twice nor lose one.
    (
        Fire {
            runs: new_runs,
            outcomes,
            state,
        },
        decision.wake_at,
        decision.abort_active,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::{CatchUp, ConcurrencyPolicy, JobType};
    use bosun_schedule::decide::Trigger;
    use bosun_schedule::{ParseOptions, Schedule};
    use bosun_store::memory::MemoryStore;
    use bosun_store::{RunFilter, Transition};

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn hourly(name: &str) -> PeriodicJob {
        PeriodicJob {
            identity: name.into(),
            schedule_hash: "0 * * * *".into(),
            policy: Policy {
                identity: name.into(),
                trigger: Trigger::Cron(
                    Schedule::parse("0 * * * *", ParseOptions::default()).unwrap(),
                ),
                concurrency: ConcurrencyPolicy::Forbid,
                catch_up: CatchUp::Latest,
                starting_deadline: None,
                jitter: None,
                retry: None,
            },
            template: NewRun {
                job: name.into(),
                job_type: JobType::Periodic,
                periodic: Some(name.into()),
                configured_cluster: "default".into(),
                state: RunState::Triggered,
                refs: None,
                extra_refs: vec![],
                labels: Default::default(),
                annotations: Default::default(),
                spec: serde_json::json!({}).into(),
                scheduled_at: None,
                attempt: 0,
                description: "Job triggered.".into(),
            },
        }
    }

    fn finish_all(store: &MemoryStore, at: &str) {
        for r in store
            .list(&RunFilter {
                active: true,
                limit: 1000,
                ..RunFilter::default()
            })
            .unwrap()
        {
            store
                .transition(&r.id, Transition::to(RunState::Pending, t(at), ""))
                .unwrap();
            store
                .transition(&r.id, Transition::to(RunState::Success, t(at), ""))
                .unwrap();
        }
    }

    #[test]
    fn every_tick_gets_one_outcome_across_a_restart() {
        let store = MemoryStore::new();
        let mut s = Scheduler::new();
        s.set_jobs(vec![hourly("a")], t("2026-01-01T00:30:00Z"));
        // First seen at 00:30: nothing for past ticks; next wake at 01:00.
        let (r, failed) = s.fire_due(&store, t("2026-01-01T00:30:00Z"));
        assert!(r.created.is_empty() && failed.is_empty());
        assert_eq!(s.next_wake(), Some(t("2026-01-01T01:00:00Z")));
        let (r, _) = s.fire_due(&store, t("2026-01-01T01:00:00.1Z"));
        assert_eq!(r.created.len(), 1);
        assert_eq!(r.created[0].scheduled_at, Some(t("2026-01-01T01:00:00Z")));
        finish_all(&store, "2026-01-01T01:05:00Z");
        // The daemon is down from 01:30 to 04:20; a new scheduler (a restart)
        // catches up the latest tick and records the others as missed.
        let mut s = Scheduler::new();
        s.set_jobs(vec![hourly("a")], t("2026-01-01T04:20:00Z"));
        let (r, _) = s.fire_due(&store, t("2026-01-01T04:20:00Z"));
        assert_eq!(r.created.len(), 1);
        assert_eq!(r.created[0].scheduled_at, Some(t("2026-01-01T04:00:00Z")));
        let outcomes = store.outcomes("a").unwrap();
        let summary: Vec<(String, u64)> = outcomes
            .iter()
            .map(|o| (o.outcome.clone(), o.count))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("run".to_string(), 1),
                ("missed".to_string(), 2),
                ("run".to_string(), 1)
            ]
        );
        // A duplicate fire (another replica, a retried fire) creates nothing.
        let mut again = Scheduler::new();
        again.set_jobs(vec![hourly("a")], t("2026-01-01T04:20:00Z"));
        let state = store.periodic_state("a").unwrap().unwrap();
        store
            .put_periodic_state(&PeriodicState {
                last_tick: Some(t("2026-01-01T03:00:00Z")),
                ..state
            })
            .unwrap();
        let (r, _) = again.fire_due(&store, t("2026-01-01T04:20:00Z"));
        assert!(r.created.is_empty(), "the 04:00 run exists already");
        assert_eq!(
            store
                .list(&RunFilter {
                    limit: 100,
                    ..RunFilter::default()
                })
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn only_periodics_whose_decision_waits_on_an_end_look_again_when_a_run_ends() {
        let store = MemoryStore::new();
        let mut s = Scheduler::new();
        let queue_one = PeriodicJob {
            policy: Policy {
                concurrency: ConcurrencyPolicy::QueueOne,
                ..hourly("q").policy
            },
            ..hourly("q")
        };
        let minimum = PeriodicJob {
            policy: Policy {
                trigger: Trigger::MinimumInterval(3600),
                ..hourly("m").policy
            },
            ..hourly("m")
        };
        let retried = PeriodicJob {
            policy: Policy {
                retry: Some(bosun_schedule::decide::RetryPolicy {
                    attempts: 2,
                    interval: 60,
                    run_all: false,
                }),
                ..hourly("r").policy
            },
            ..hourly("r")
        };
        s.set_jobs(
            vec![hourly("a"), queue_one, minimum, retried],
            t("2026-01-01T00:30:00Z"),
        );
        // Before its first decision, any end counts.
        assert!(s.run_ended("a", t("2026-01-01T00:30:00Z")));
        s.fire_due(&store, t("2026-01-01T00:30:00Z"));
        // A cron periodic under `forbid`: the end of its run changes nothing.
        assert!(!s.run_ended("a", t("2026-01-01T00:31:00Z")));
        assert!(s.run_ended("m", t("2026-01-01T00:31:00Z")));
        assert!(s.run_ended("r", t("2026-01-01T00:31:00Z")));
        assert!(!s.run_ended("unknown", t("2026-01-01T00:31:00Z")));
        // `queue_one`: the 02:00 tick is held while the 01:00 run is active,
        // and runs as soon as that run ends (at its end, not at 03:00).
        s.fire_due(&store, t("2026-01-01T01:00:00Z"));
        s.fire_due(&store, t("2026-01-01T02:00:00Z"));
        assert_eq!(
            store.periodic_state("q").unwrap().unwrap().queued,
            Some(t("2026-01-01T02:00:00Z"))
        );
        let q_runs = || {
            all_runs(&store)
                .into_iter()
                .filter(|r| r.job == "q")
                .count()
        };
        assert_eq!(q_runs(), 1);
        finish_all(&store, "2026-01-01T02:10:00Z");
        assert!(s.run_ended("q", t("2026-01-01T02:10:00Z")));
        s.fire_due(&store, t("2026-01-01T02:10:00Z"));
        assert_eq!(q_runs(), 2, "the queued tick ran when the run ended");
    }

    fn stores() -> Vec<(Box<dyn Store>, Option<tempfile::TempDir>)> {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = bosun_store::sqlite::SqliteStore::open(dir.path().join("b.db")).unwrap();
        vec![
            (Box::new(MemoryStore::new()), None),
            (Box::new(sqlite), Some(dir)),
        ]
    }

    /// Hourly periodics `a` and `b`, first seen at 00:30.
    fn two_hourlies(store: &dyn Store) -> Scheduler {
        let mut s = Scheduler::new();
        s.set_jobs(vec![hourly("a"), hourly("b")], t("2026-01-01T00:30:00Z"));
        s.fire_due(store, t("2026-01-01T00:30:00Z"));
        s
    }

    fn all_runs(store: &dyn Store) -> Vec<Run> {
        store
            .list(&RunFilter {
                limit: 1000,
                ..RunFilter::default()
            })
            .unwrap()
    }

    /// Fires prepared ahead are committed at their instant, not before, with
    /// the outcome naming the run; a periodic whose run ended after its fire
    /// was decided (an overlap skip then) is decided again and runs.
    #[test]
    fn prepared_fires_commit_at_their_instant_and_changes_decide_again() {
        let lead = SignedDuration::from_secs(1);
        for (store, _dir) in stores() {
            let store = &*store;
            let mut s = two_hourlies(store);
            // Too early: nothing is prepared; the loop wakes `lead` ahead.
            assert_eq!(s.prepare(store, t("2026-01-01T00:59:58Z"), lead), 0);
            assert_eq!(
                s.next_wake_ahead(t("2026-01-01T00:59:58Z"), lead),
                Some(t("2026-01-01T00:59:59Z"))
            );
            assert_eq!(s.prepare(store, t("2026-01-01T00:59:59.2Z"), lead), 2);
            assert_eq!(s.prepared_at(), Some(t("2026-01-01T01:00:00Z")));
            assert_eq!(s.next_wake(), Some(t("2026-01-01T01:00:00Z")));
            let (r, _) = s.fire_due(store, t("2026-01-01T00:59:59.5Z"));
            assert!(
                r.fired.is_empty() && all_runs(store).is_empty(),
                "not before"
            );
            let (r, failed) = s.fire_due(store, t("2026-01-01T01:00:00.01Z"));
            assert!(failed.is_empty());
            assert_eq!(r.created.len(), 2);
            for run in &r.created {
                assert_eq!(run.scheduled_at, Some(t("2026-01-01T01:00:00Z")));
                assert_eq!(run.created_at, t("2026-01-01T01:00:00.01Z"));
                let o = store.outcomes(run.periodic.as_deref().unwrap()).unwrap();
                assert_eq!(o.last().unwrap().run_id.as_deref(), Some(run.id.as_str()));
            }
            assert_eq!(s.next_wake(), Some(t("2026-01-01T02:00:00Z")));
            // Both still run at 01:59:59, when 02:00 is decided: overlap. a's
            // run then ends before 02:00, so a is decided again and runs.
            assert_eq!(s.prepare(store, t("2026-01-01T01:59:59Z"), lead), 2);
            let a_run = r.created.iter().find(|r| r.job == "a").unwrap();
            for state in [RunState::Pending, RunState::Success] {
                store
                    .transition(
                        &a_run.id,
                        Transition::to(state, t("2026-01-01T01:59:59.5Z"), ""),
                    )
                    .unwrap();
            }
            let (r, failed) = s.fire_due(store, t("2026-01-01T02:00:00Z"));
            assert!(failed.is_empty());
            assert_eq!(r.created.len(), 1);
            assert_eq!(r.created[0].job, "a");
            let outcomes: Vec<&str> = r.outcomes.iter().map(|o| o.outcome.as_str()).collect();
            assert_eq!(outcomes.len(), 2);
            assert!(outcomes.contains(&"run") && outcomes.contains(&"overlap"));
            for p in ["a", "b"] {
                assert_eq!(
                    store.outcomes(p).unwrap().len(),
                    2,
                    "one outcome a tick: {p}"
                );
            }
        }
    }

    /// A periodic removed or changed after its fire was prepared does not
    /// fire it; after a wake in a later second than the instant, a periodic
    /// with a starting deadline is decided again.
    #[test]
    fn prepared_fires_of_removed_periodics_and_late_wakes() {
        let lead = SignedDuration::from_secs(1);
        for (store, _dir) in stores() {
            let store = &*store;
            let mut s = two_hourlies(store);
            assert_eq!(s.prepare(store, t("2026-01-01T00:59:59.5Z"), lead), 2);
            s.set_jobs(vec![hourly("b")], t("2026-01-01T00:59:59.6Z"));
            let (r, _) = s.fire_due(store, t("2026-01-01T01:00:00Z"));
            assert_eq!(r.fired, vec!["b".to_string()]);
            assert!(store.outcomes("a").unwrap().is_empty());
            // Late: prepared for 02:00, woken at 02:00:03. b's decision holds
            // (no deadline: lateness does not matter); d, whose ticks may
            // start at most 2 s late, is decided again: missed.
            let mut d = hourly("d");
            d.policy.starting_deadline = Some(2);
            s.set_jobs(vec![hourly("b"), d], t("2026-01-01T01:00:10Z"));
            s.fire_due(store, t("2026-01-01T01:00:10Z"));
            for run in all_runs(store) {
                for state in [RunState::Pending, RunState::Success] {
                    store
                        .transition(
                            &run.id,
                            Transition::to(state, t("2026-01-01T01:30:00Z"), ""),
                        )
                        .unwrap();
                }
            }
            assert_eq!(s.prepare(store, t("2026-01-01T01:59:59.5Z"), lead), 2);
            let (r, failed) = s.fire_due(store, t("2026-01-01T02:00:03Z"));
            assert!(failed.is_empty());
            assert_eq!(r.prepared, 1);
            assert_eq!(r.created.len(), 1);
            assert_eq!(r.created[0].job, "b");
            assert_eq!(r.created[0].created_at, t("2026-01-01T02:00:03Z"));
            let o = store.outcomes("b").unwrap();
            assert_eq!(o.len(), 2);
            assert_eq!(o[1].recorded_at, t("2026-01-01T02:00:00Z"));
            let o = store.outcomes("d").unwrap();
            assert_eq!(o.len(), 1);
            assert_eq!(
                (o[0].outcome.as_str(), o[0].recorded_at),
                ("missed", t("2026-01-01T02:00:03Z"))
            );
        }
    }

    #[test]
    fn overlap_is_skipped_and_changed_schedules_restart_from_now() {
        let store = MemoryStore::new();
        let mut s = Scheduler::new();
        s.set_jobs(vec![hourly("b")], t("2026-01-01T00:00:00Z"));
        s.fire_due(&store, t("2026-01-01T00:00:00Z"));
        let (r, _) = s.fire_due(&store, t("2026-01-01T01:00:00Z"));
        assert_eq!(r.created.len(), 1);
        // Still running at 02:00: forbid records an overlap.
        let (r, _) = s.fire_due(&store, t("2026-01-01T02:00:00Z"));
        assert!(r.created.is_empty());
        assert_eq!(r.outcomes[0].outcome, "overlap");
        // A changed schedule: first_seen moves to now, so 02:30's past ticks never run.
        let mut changed = hourly("b");
        changed.schedule_hash = "30 * * * *".into();
        changed.policy.trigger =
            Trigger::Cron(Schedule::parse("30 * * * *", ParseOptions::default()).unwrap());
        finish_all(&store, "2026-01-01T02:10:00Z");
        s.set_jobs(vec![changed], t("2026-01-01T02:40:00Z"));
        let (r, _) = s.fire_due(&store, t("2026-01-01T02:40:00Z"));
        assert!(r.created.is_empty());
        assert_eq!(s.next_wake(), Some(t("2026-01-01T03:30:00Z")));
        // Removing the periodic drops its entry.
        s.set_jobs(vec![], t("2026-01-01T02:41:00Z"));
        let (r, _) = s.fire_due(&store, t("2026-01-01T05:00:00Z"));
        assert!(r.created.is_empty() && r.outcomes.is_empty());
    }
}
