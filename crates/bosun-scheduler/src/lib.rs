//! The periodic scheduler's core (issue 5, first part; not wired into the daemon
//! yet): one timer entry per periodic in a queue ordered by the next due instant,
//! and the schedule engine's decisions applied to the store. Time is an argument,
//! so tests run simulated time.
//!
//! Every fire inserts its run under the store's unique key (periodic,
//! scheduled_at, attempt): a retry, a restart or a duplicate fire finds the
//! existing run and creates nothing. Skips are recorded with their reason, and
//! the schedule state (last tick, first seen, paused, queued) is written beside
//! the runs.

#![warn(missing_docs)]

pub mod config;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use bosun_schedule::decide::{decide, Outcome, Policy, RunView, Runs, ScheduleState};
use bosun_store::{
    Created, Fire, NewRun, PeriodicRuns, PeriodicState, Run, RunState, Store, StoreError,
    TickOutcome,
};
use jiff::Timestamp;

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

/// What one fire did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FireReport {
    /// Runs created (new ones only).
    pub created: Vec<Run>,
    /// Outcomes recorded.
    pub outcomes: Vec<TickOutcome>,
    /// Periodics whose active runs must be aborted (`replace`).
    pub abort: Vec<String>,
    /// Periodics fired without a store error.
    pub fired: Vec<String>,
}

/// A periodic's place in the scheduler.
struct Slot {
    job: Box<PeriodicJob>,
    /// Entries of the queue with another generation are stale.
    generation: u64,
    /// When it next fires (its last decision's wake-up), for listings and metrics.
    next_fire: Option<Timestamp>,
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

    /// Replaces the set of periodics: new and changed ones are evaluated at
    /// `now`, unchanged ones keep their timers, removed ones leave (their queue
    /// entries are dropped lazily).
    pub fn set_jobs(&mut self, jobs: Vec<PeriodicJob>, now: Timestamp) {
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
                        self.queue.push(Reverse((now, self.generation, i)));
                    }
                }
                None => {
                    self.generation += 1;
                    let slot = Slot {
                        job: Box::new(job),
                        generation: self.generation,
                        next_fire: None,
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
            .filter(|id| !keep.contains(*id))
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

    /// Evaluates `identity` at `now` (a run of it ended, it was paused, ...).
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

    /// When the earliest entry is due (superseded entries are dropped first).
    pub fn next_wake(&mut self) -> Option<Timestamp> {
        while let Some(&Reverse((t, generation, i))) = self.queue.peek() {
            if self.current(generation, i) {
                return Some(t);
            }
            self.queue.pop();
        }
        None
    }

    /// Fires every entry due at `now`: the due periodics' states and runs are
    /// read in a batch, each is decided, and their commits are handed to the
    /// store together (each on its own: a periodic whose store calls fail is
    /// retried later by the caller, the others are unaffected).
    pub fn fire_due(
        &mut self,
        store: &dyn Store,
        now: Timestamp,
    ) -> (FireReport, Vec<(String, StoreError)>) {
        let mut report = FireReport::default();
        let mut failed = Vec::new();
        let mut due: Vec<(String, u64, u32)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while let Some(&Reverse((t, generation, i))) = self.queue.peek() {
            if t > now {
                break;
            }
            self.queue.pop();
            if !self.current(generation, i) {
                continue; // superseded by a newer entry, or removed
            }
            // Several entries of one periodic (a poke and its timer): one decision.
            if seen.insert(i) {
                let slot = self.slots[i as usize].as_ref().expect("current");
                due.push((slot.job.identity.to_string(), generation, i));
            }
        }
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
            if abort {
                report.abort.push(identity.clone());
            }
            plans.push((identity, generation, i, wake, fire.outcomes.clone()));
            fires.push(fire);
        }
        for ((identity, generation, i, wake, mut outcomes), result) in
            plans.into_iter().zip(store.commit_fires(fires, now))
        {
            let created = match result {
                Ok(c) => c,
                Err(e) => {
                    failed.push((identity, e));
                    continue;
                }
            };
            for o in &mut outcomes {
                o.fill_run_id(&created);
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
            }
            if let Some(wake) = wake {
                self.queue.push(Reverse((wake, generation, i)));
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
