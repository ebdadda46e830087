//! A simulated day of the whole corpus: the 1335 periodics of
//! `../shared/corpus/test-infra` (Prow's own configuration) fired by the scheduler
//! for 24 simulated hours against a [`MemoryStore`], with every run lasting 5
//! simulated minutes, produce exactly the runs and skips that an independent
//! reference model of the documented rules predicts.
//!
//! Setup: for every periodic, the store holds one run created at
//! `T0 - r * period` (`r` from a seeded generator; the period is the interval, the
//! minimum interval, or the gap between the two cron ticks around `T0`) for the
//! latest tick at or before that instant, and a schedule state that has known the
//! periodic for a month with that tick as its last. A run created less than 5
//! minutes before `T0` is still running at `T0`. Ticks that fell between that run
//! and `T0` are what a daemon restarted at `T0` finds: the latest is caught up
//! (`catch_up: latest`), older ones are recorded as missed.
//!
//! The simulation is discrete-event: the next instant is the earlier of the
//! scheduler's `next_wake` and the next run completion. At an instant, runs whose
//! 5 minutes are up complete first (`pending`, then `success`, at that instant) and
//! poke their periodic, as the daemon does when a run ends; then `fire_due` runs
//! (so a `*/5` periodic whose run ends exactly at its next tick runs again). The
//! store is the `MemoryStore` behind a per-periodic index of its runs
//! ([`IndexedStore`]): `MemoryStore::list` walks every run for each lookup, which
//! would make the day take over a minute in a debug build.
//!
//! The reference model does not call `decide`. It walks cron ticks with
//! `Schedule::next_after` and applies the rules of `DESIGN.md` ("Runs, ticks and
//! identity", the per-periodic defaults `forbid` and `catch_up: latest`) and
//! Prow's: a cron tick runs when no run of the periodic is active, else it is
//! skipped as `overlap`; `interval` counts from the previous run's creation,
//! `minimum_interval` from its completion, and neither starts while the previous
//! run is active. Every run and every outcome (reason, tick range, count, the
//! instant it was recorded) must match exactly, and independently of the model,
//! every cron tick in `(T0, T0 + 24h]` must have exactly one outcome, no two runs
//! of a periodic may overlap, and no periodic may be evaluated twice in one
//! `fire_due` (one timer entry per periodic).
//!
//! Run it with `cargo test -p bosun-scheduler --test corpus_day -- --nocapture`
//! (the figures are printed). Skipped, with a message, when the corpus is not
//! beside the project.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use bosun_config::types::{CatchUp, ConcurrencyPolicy};
use bosun_config::{load, LoadOptions, OsFiles};
use bosun_schedule::decide::Trigger;
use bosun_schedule::{ConfigScheduleCheck, Schedule};
use bosun_scheduler::{PeriodicJob, Scheduler};
use bosun_store::memory::MemoryStore;
use bosun_store::{
    Created, Fire, NewRun, PeriodicState, PreparedFires, Run, RunFilter, RunState, Store,
    StoreError, TickOutcome, Transition,
};
use jiff::Timestamp;

/// How long every run lasts.
const RUN_SECS: i64 = 300;
const DAY: i64 = 86_400;
/// Sunday 2026-03-08 13:30:07 UTC: the day covers a Sunday evening and a Monday
/// morning (weekday and weekly schedules fire), and is not on a minute boundary.
const T0: &str = "2026-03-08T13:30:07Z";
/// The generator's seed: change it to simulate another day.
const SEED: u64 = 0x5eed_b05a_0001;

fn corpus() -> Option<PathBuf> {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    p.is_dir().then_some(p)
}

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("in range")
}

/// SplitMix64: small, deterministic, good enough to spread seeds.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The latest tick of a calendar schedule at or before `t` (looking back up to
/// ten years), from `next_after` only.
fn tick_at_or_before(s: &Schedule, t: i64) -> Option<i64> {
    for back in [3_600, DAY, 8 * DAY, 32 * DAY, 367 * DAY, 3_660 * DAY] {
        let mut cur = s.next_after(ts(t - back))?.as_second();
        if cur > t {
            continue;
        }
        loop {
            let next = s.next_after(ts(cur))?.as_second();
            if next > t {
                return Some(cur);
            }
            cur = next;
        }
    }
    None
}

/// Ticks of `s` in `(after, until]`.
fn ticks(s: &Schedule, after: i64, until: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut t = s.next_after(ts(after));
    while let Some(x) = t.map(|t| t.as_second()).filter(|&x| x <= until) {
        out.push(x);
        t = s.next_after(ts(x));
    }
    out
}

/// What the store holds for a periodic before the day starts.
#[derive(Debug, Clone, Copy)]
struct Seed {
    /// The seeded run's tick (`None`: a cron that never fires; no run is seeded).
    tick: Option<i64>,
    /// When it was created.
    created: i64,
}

/// One expected or observed outcome: (first tick, last tick, count, outcome,
/// recorded at).
type OutcomeKey = (i64, i64, u64, String, i64);

/// The model's prediction for one periodic.
#[derive(Debug, Default)]
struct Expected {
    /// (scheduled_at, created_at) of every run created during the day.
    runs: Vec<(i64, i64)>,
    outcomes: Vec<OutcomeKey>,
}

fn outcome(first: i64, last: i64, count: u64, what: &str, at: i64) -> OutcomeKey {
    (first, last, count, what.to_string(), at)
}

/// The reference model (defaults only: `forbid`, `catch_up: latest`, no
/// deadline, jitter or retry, which the test checks the corpus uses).
fn expect(job: &PeriodicJob, seed: Seed, t0: i64, end: i64) -> Expected {
    let mut e = Expected::default();
    // When the periodic's latest run completes (runs last RUN_SECS).
    let mut done = seed.created + RUN_SECS;
    match &job.policy.trigger {
        Trigger::Cron(s) => {
            let Some(last) = seed.tick else {
                return e; // never fires
            };
            // At T0 (the restart): the ticks since the seeded run's.
            let missed = ticks(s, last, t0);
            if let Some((&latest, earlier)) = missed.split_last() {
                if let (Some(&first), Some(&prev)) = (earlier.first(), earlier.last()) {
                    e.outcomes
                        .push(outcome(first, prev, earlier.len() as u64, "missed", t0));
                }
                if done > t0 {
                    e.outcomes.push(outcome(latest, latest, 1, "overlap", t0));
                } else {
                    e.runs.push((latest, t0));
                    e.outcomes.push(outcome(latest, latest, 1, "run", t0));
                    done = t0 + RUN_SECS;
                }
            }
            // The day: each tick is fired at its instant; completions at the
            // same instant come first.
            for t in ticks(s, t0, end) {
                if done > t {
                    e.outcomes.push(outcome(t, t, 1, "overlap", t));
                } else {
                    e.runs.push((t, t));
                    e.outcomes.push(outcome(t, t, 1, "run", t));
                    done = t + RUN_SECS;
                }
            }
        }
        Trigger::Interval(secs) | Trigger::MinimumInterval(secs) => {
            let minimum = matches!(job.policy.trigger, Trigger::MinimumInterval(_));
            let secs = *secs as i64;
            let (mut created, mut last_tick) =
                (seed.created, seed.tick.expect("interval seeds have a tick"));
            loop {
                let base = if minimum { done } else { created }.max(last_tick);
                let tick = base + secs;
                // Looked at again when the previous run ends, or at the tick.
                let at = tick.max(done).max(t0);
                if at > end {
                    break;
                }
                e.runs.push((tick, at));
                e.outcomes.push(outcome(tick, tick, 1, "run", at));
                created = at;
                last_tick = tick;
                done = at + RUN_SECS;
            }
        }
    }
    e
}

fn show_runs(runs: &[(i64, i64)]) -> String {
    let runs: Vec<String> = runs
        .iter()
        .map(|&(tick, created)| format!("{} {}", ts(tick), ts(created)))
        .collect();
    format!("[{}]", runs.join(", "))
}

fn show_outcomes(outcomes: &[OutcomeKey]) -> String {
    let outcomes: Vec<String> = outcomes
        .iter()
        .map(|(first, last, count, what, at)| {
            format!("{}..{} {count} {what} @{}", ts(*first), ts(*last), ts(*at))
        })
        .collect();
    format!("[{}]", outcomes.join(", "))
}

/// The store's runs and outcomes as model keys.
fn observed(runs: &[&Run], outcomes: &[TickOutcome], t0: i64) -> Expected {
    let mut runs: Vec<(i64, i64)> = runs
        .iter()
        .filter(|r| r.created_at.as_second() >= t0)
        .map(|r| {
            (
                r.scheduled_at.map_or(i64::MIN, |t| t.as_second()),
                r.created_at.as_second(),
            )
        })
        .collect();
    runs.sort();
    let outcomes = outcomes
        .iter()
        .map(|o| {
            (
                o.first_tick.as_second(),
                o.last_tick.as_second(),
                o.count,
                o.outcome.clone(),
                o.recorded_at.as_second(),
            )
        })
        .collect();
    Expected { runs, outcomes }
}

/// The [`MemoryStore`] with an index of each periodic's runs for the scheduler's
/// two queries (its latest run; whether one is active). `MemoryStore::list` walks
/// every run of every periodic per query, which makes a simulated day take
/// minutes in a debug build; everything else, and every other query, is the
/// `MemoryStore`'s own.
#[derive(Default)]
struct IndexedStore {
    inner: MemoryStore,
    /// Per periodic: (run id, active), oldest first.
    runs: Mutex<HashMap<String, Vec<(String, bool)>>>,
}

impl IndexedStore {
    fn index(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<(String, bool)>>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn created(&self, created: &[Created]) {
        let mut index = self.index();
        for c in created {
            if let Created::New(r) = c {
                if let Some(p) = &r.periodic {
                    index
                        .entry(p.clone())
                        .or_default()
                        .push((r.id.clone(), r.state.is_active()));
                }
            }
        }
    }
}

impl Store for IndexedStore {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        let created = self.inner.create_run(new, at)?;
        self.created(std::slice::from_ref(&created));
        Ok(created)
    }

    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError> {
        let run = self.inner.transition(id, t)?;
        if let Some(p) = &run.periodic {
            if let Some(e) = self
                .index()
                .get_mut(p)
                .and_then(|v| v.iter_mut().find(|(i, _)| i == id))
            {
                e.1 = run.state.is_active();
            }
        }
        Ok(run)
    }

    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        self.inner.get(id)
    }

    fn list(&self, f: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let plain = RunFilter {
            periodic: f.periodic.clone(),
            active: f.active,
            limit: f.limit,
            ..RunFilter::default()
        };
        let Some(periodic) = f.periodic.as_ref().filter(|_| *f == plain) else {
            return self.inner.list(f);
        };
        let ids: Vec<String> = self
            .index()
            .get(periodic)
            .map(|v| {
                v.iter()
                    .rev()
                    .filter(|(_, active)| *active || !f.active)
                    .take(if f.limit == 0 { 100 } else { f.limit })
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default();
        ids.iter()
            .map(|id| Ok(self.inner.get(id)?.expect("indexed runs exist")))
            .collect()
    }

    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.spec(hash)
    }

    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        self.inner.periodic_state(periodic)
    }

    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        self.inner.put_periodic_state(state)
    }

    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        self.inner.record_outcomes(outcomes)
    }

    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError> {
        self.inner.outcomes(periodic)
    }

    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        let created = self.inner.commit_fire(fire, at)?;
        self.created(&created);
        Ok(created)
    }

    fn periodic_versions(&self, periodics: &[String]) -> Option<Vec<u64>> {
        self.inner.periodic_versions(periodics)
    }

    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<PreparedFires, StoreError> {
        self.inner.prepare_fires(fires)
    }

    fn commit_prepared(
        &self,
        prepared: PreparedFires,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        let results = self.inner.commit_prepared(prepared, at);
        for created in results.iter().flatten() {
            self.created(created);
        }
        results
    }

    fn delete_completed_before(&self, _: Timestamp) -> Result<Vec<String>, StoreError> {
        unimplemented!("no retention in a simulated day")
    }
}

/// Completes a run at `at` (the controller starts it, then it succeeds).
fn complete(store: &dyn Store, id: &str, at: Timestamp) {
    store
        .transition(id, Transition::to(RunState::Pending, at, "started"))
        .expect("pending");
    store
        .transition(id, Transition::to(RunState::Success, at, "succeeded"))
        .expect("success");
}

#[test]
fn a_day_of_the_corpus_runs_and_skips_exactly_as_predicted() {
    let root = corpus().expect(
        "the test-infra corpus is not beside the project (../shared/corpus/test-infra): this test reads it",
    );
    let started = Instant::now();
    let loaded = load(
        &LoadOptions {
            config: Some(root.join("prow/config.yaml")),
            job_config: vec![root.join("jobs")],
            schedule_check: Some(std::sync::Arc::new(ConfigScheduleCheck)),
            ..LoadOptions::default()
        },
        &OsFiles,
    );
    let snapshot = loaded.snapshot.as_ref().unwrap_or_else(|| {
        panic!(
            "the corpus does not load: {:#?}",
            &loaded.diagnostics[..loaded.diagnostics.len().min(10)]
        )
    });
    let jobs = bosun_scheduler::config::jobs(snapshot);
    let loaded_in = started.elapsed();
    assert_eq!(snapshot.periodics.len(), 1335, "the corpus's periodics");
    assert_eq!(jobs.len(), 1335, "every periodic gets a scheduler entry");
    for j in &jobs {
        let p = &j.policy;
        assert!(
            p.concurrency == ConcurrencyPolicy::Forbid
                && p.catch_up == CatchUp::Latest
                && p.starting_deadline.is_none()
                && p.jitter.is_none()
                && p.retry.is_none(),
            "{}: the model covers the default policies only",
            j.identity
        );
    }

    let t0 = T0.parse::<Timestamp>().unwrap().as_second();
    let end = t0 + DAY;
    let store = IndexedStore::default();
    let mut rng = Rng(SEED);
    let mut seeds: HashMap<String, Seed> = HashMap::new();
    // Runs still running at T0: (completes at, run id, periodic).
    let mut completions: BinaryHeap<Reverse<(i64, String, String)>> = BinaryHeap::new();
    let (mut crons, mut intervals, mut minimums) = (0, 0, 0);
    for job in &jobs {
        let r = rng.unit();
        let seed = match &job.policy.trigger {
            Trigger::Cron(s) if s.as_cron().is_none() => {
                // `@every D`: ticks follow the previous one, so the seeded run's
                // creation is its tick.
                crons += 1;
                let period = s.next_after(ts(0)).unwrap().as_second();
                let created = t0 - ((r * period as f64) as i64).max(1);
                Seed {
                    tick: Some(created),
                    created,
                }
            }
            Trigger::Cron(s) => {
                crons += 1;
                match tick_at_or_before(s, t0) {
                    None => Seed {
                        tick: None,
                        created: t0 - DAY,
                    },
                    Some(p) => {
                        let period = s.next_after(ts(p)).unwrap().as_second() - p;
                        let created = t0 - ((r * period as f64) as i64).max(1);
                        let tick = tick_at_or_before(s, created).unwrap_or_else(|| {
                            panic!("{}: no tick before {created}", job.identity)
                        });
                        Seed {
                            tick: Some(tick),
                            created,
                        }
                    }
                }
            }
            Trigger::Interval(secs) | Trigger::MinimumInterval(secs) => {
                if matches!(job.policy.trigger, Trigger::Interval(_)) {
                    intervals += 1;
                } else {
                    minimums += 1;
                }
                let created = t0 - ((r * *secs as f64) as i64).max(1);
                Seed {
                    tick: Some(created),
                    created,
                }
            }
        };
        seeds.insert(job.identity.to_string(), seed);
        if let Some(tick) = seed.tick {
            let mut new = job.template.clone();
            new.scheduled_at = Some(ts(tick));
            let run = store
                .create_run(new, ts(seed.created))
                .unwrap()
                .run()
                .clone();
            let ends = seed.created + RUN_SECS;
            if ends <= t0 {
                complete(&store, &run.id, ts(ends));
            } else {
                completions.push(Reverse((ends, run.id, job.identity.to_string())));
            }
        }
        store
            .put_periodic_state(&PeriodicState {
                periodic: job.identity.to_string(),
                schedule_hash: job.schedule_hash.clone(),
                first_seen: ts(seed.created.min(t0 - 30 * DAY) - DAY),
                last_tick: seed.tick.map(ts),
                paused: false,
                queued: None,
            })
            .unwrap();
    }
    let running_at_t0 = completions.len();

    // The day.
    let sim_started = Instant::now();
    let mut scheduler = Scheduler::new();
    scheduler.set_jobs(jobs.clone(), ts(t0));
    let (mut fires, mut events, mut recorded) = (0usize, 0usize, 0usize);
    // Fires of a periodic beyond its first in one `fire_due` call.
    let mut repeated_fires = 0usize;
    // As the daemon: fires are decided a second ahead, and committed at their
    // instant unless the periodic changed (a run ended) in between.
    let lead = jiff::SignedDuration::from_secs(1);
    let (mut prepared, mut last) = (0usize, t0);
    loop {
        let wake = scheduler
            .next_wake_ahead(ts(last), lead)
            .map(|t| t.as_second());
        let done = completions.peek().map(|Reverse((t, ..))| *t);
        let Some(now) = [wake, done].into_iter().flatten().min() else {
            break;
        };
        if now > end {
            break;
        }
        assert!(now >= t0, "nothing happens before T0");
        events += 1;
        while let Some(Reverse((at, ..))) = completions.peek() {
            if *at > now {
                break;
            }
            let Reverse((_, id, periodic)) = completions.pop().unwrap();
            complete(&store, &id, ts(now));
            scheduler.poke(&periodic, ts(now));
        }
        let (report, failed) = scheduler.fire_due(&store, ts(now));
        assert!(failed.is_empty(), "store errors: {failed:?}");
        assert!(report.abort.is_empty(), "forbid never aborts");
        fires += report.fired.len();
        let mut fired = report.fired.clone();
        fired.sort();
        fired.dedup();
        repeated_fires += report.fired.len() - fired.len();
        recorded += report.outcomes.len();
        for run in report.created {
            assert_eq!(run.created_at, ts(now));
            let periodic = run.periodic.clone().expect("a periodic run");
            completions.push(Reverse((now + RUN_SECS, run.id.clone(), periodic)));
        }
        prepared += scheduler.prepare(&store, ts(now), lead);
        last = now;
    }
    assert!(prepared > 0, "fires were prepared ahead");
    let sim_took = sim_started.elapsed();

    // What the store holds, against the model.
    let all = store
        .list(&RunFilter {
            limit: usize::MAX,
            ..RunFilter::default()
        })
        .unwrap();
    let mut by_periodic: HashMap<&str, Vec<&Run>> = HashMap::new();
    for r in &all {
        by_periodic
            .entry(r.periodic.as_deref().expect("only periodic runs"))
            .or_default()
            .push(r);
    }
    let mut mismatches: Vec<String> = Vec::new();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let (mut day_runs, mut outcome_rows, mut catch_up_runs) = (0usize, 0usize, 0usize);
    for job in &jobs {
        let id = &*job.identity;
        let runs = by_periodic.remove(id).unwrap_or_default();
        let outcomes = store.outcomes(id).unwrap();
        let want = expect(job, seeds[id], t0, end);
        let got = observed(&runs, &outcomes, t0);
        let mut want_runs = want.runs.clone();
        want_runs.sort();
        if got.runs != want_runs {
            mismatches.push(format!(
                "{id}: runs (scheduled_at created_at)\n  want {}\n  got  {}",
                show_runs(&want_runs),
                show_runs(&got.runs)
            ));
        }
        if got.outcomes != want.outcomes {
            mismatches.push(format!(
                "{id}: outcomes (first..last count outcome @recorded_at)\n  want {}\n  got  {}",
                show_outcomes(&want.outcomes),
                show_outcomes(&got.outcomes)
            ));
        }
        // Each `run` outcome names the run of its tick.
        for o in outcomes.iter().filter(|o| o.outcome == "run") {
            let run = runs
                .iter()
                .find(|r| Some(&r.id) == o.run_id.as_ref())
                .unwrap_or_else(|| panic!("{id}: outcome {o:?} names no run"));
            assert_eq!(run.scheduled_at, Some(o.first_tick), "{id}");
            assert_eq!(run.attempt, 0, "{id}");
        }
        // Forbid, intervals: never two runs of a periodic at once.
        let mut spans: Vec<(Timestamp, Timestamp)> = runs
            .iter()
            .map(|r| (r.created_at, r.completed_at.unwrap_or(Timestamp::MAX)))
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{id}: runs overlap: {w:?}");
        }
        // Every cron tick of the day has exactly one outcome (independent of
        // the model).
        if let Trigger::Cron(s) = &job.policy.trigger {
            for t in ticks(s, t0, end) {
                let n = outcomes
                    .iter()
                    .filter(|o| o.first_tick.as_second() <= t && t <= o.last_tick.as_second())
                    .count();
                if n != 1 {
                    mismatches.push(format!("{id}: tick {} has {n} outcomes", ts(t)));
                }
            }
            for o in &outcomes {
                let inside = ticks(s, o.first_tick.as_second() - 1, o.last_tick.as_second());
                assert_eq!(inside.len() as u64, o.count, "{id}: {o:?} counts its ticks");
            }
        }
        day_runs += got.runs.len();
        catch_up_runs += got
            .runs
            .iter()
            .filter(|(tick, created)| created == &t0 && tick < &t0)
            .count();
        outcome_rows += outcomes.len();
        for o in &outcomes {
            *totals.entry(o.outcome.clone()).or_default() += o.count;
        }
    }
    assert!(by_periodic.is_empty(), "runs of unknown periodics");
    assert_eq!(
        outcome_rows, recorded,
        "the store holds what fires reported"
    );

    println!(
        "corpus day: {} periodics ({crons} cron, {intervals} interval, {minimums} minimum_interval); \
         {running_at_t0} running at T0",
        jobs.len()
    );
    println!(
        "  {day_runs} runs created in 24 h ({catch_up_runs} caught up at T0), {} runs in the store",
        all.len()
    );
    println!("  ticks by outcome: {totals:?} in {outcome_rows} rows");
    println!(
        "  {events} instants, {fires} periodic fires ({repeated_fires} repeated within one \
         fire_due; {prepared} decided a second ahead); load {:.2} s, simulation {:.2} s",
        loaded_in.as_secs_f64(),
        sim_took.as_secs_f64()
    );
    assert!(
        mismatches.is_empty(),
        "{} disagreements between the scheduler and the model; the first:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    // Aggregate sanity: every periodic is accounted for, and the day is busy but
    // bounded (the corpus's shortest period is 5 minutes: at most 289 runs each).
    assert_eq!(
        all.len() - day_runs,
        seeds.values().filter(|s| s.tick.is_some()).count()
    );
    assert!(day_runs >= jobs.len() / 2, "{day_runs} runs in a day");
    assert!(day_runs <= jobs.len() * 289, "{day_runs} runs in a day");
    // One timer entry per periodic (ARCHITECTURE.md): a periodic is evaluated at
    // most once per `fire_due`, however many of its runs ended before.
    assert_eq!(
        repeated_fires, 0,
        "periodics evaluated more than once at one instant: entries accumulate \
         (see `ended_runs_do_not_multiply_evaluations`)"
    );
}

/// The day's last assertion in miniature: an hourly periodic whose runs end and
/// poke it (as the daemon does) is still evaluated once per tick. (Before
/// `fire_due` merged the entries of a periodic due together, every poke added an
/// entry for good: the n-th tick evaluated the periodic n times.)
#[test]
fn ended_runs_do_not_multiply_evaluations() {
    use bosun_config::types::JobType;
    use bosun_schedule::decide::Policy;
    use bosun_schedule::ParseOptions;

    let job = PeriodicJob {
        identity: "hourly".into(),
        schedule_hash: "0 * * * *".into(),
        policy: Policy {
            identity: "hourly".into(),
            trigger: Trigger::Cron(Schedule::parse("0 * * * *", ParseOptions::default()).unwrap()),
            concurrency: ConcurrencyPolicy::Forbid,
            catch_up: CatchUp::Latest,
            starting_deadline: None,
            jitter: None,
            retry: None,
        },
        template: NewRun {
            job: "hourly".into(),
            job_type: JobType::Periodic,
            periodic: Some("hourly".into()),
            configured_cluster: "default".into(),
            state: RunState::Triggered,
            refs: None,
            extra_refs: vec![],
            labels: BTreeMap::new().into(),
            annotations: BTreeMap::new().into(),
            spec: serde_json::json!({}).into(),
            scheduled_at: None,
            attempt: 0,
            description: "Job triggered.".into(),
        },
    };
    let t0 = "2026-01-01T00:30:00Z"
        .parse::<Timestamp>()
        .unwrap()
        .as_second();
    let store = MemoryStore::new();
    let mut scheduler = Scheduler::new();
    scheduler.set_jobs(vec![job], ts(t0));
    scheduler.fire_due(&store, ts(t0));
    let mut fired = Vec::new();
    for hour in 1..=4 {
        let tick = t0 - 1_800 + hour * 3_600;
        assert_eq!(scheduler.next_wake(), Some(ts(tick)));
        let (report, _) = scheduler.fire_due(&store, ts(tick));
        assert_eq!(report.created.len(), 1);
        fired.push(report.fired.len());
        complete(&store, &report.created[0].id, ts(tick + RUN_SECS));
        scheduler.poke("hourly", ts(tick + RUN_SECS));
        scheduler.fire_due(&store, ts(tick + RUN_SECS));
    }
    assert_eq!(
        fired,
        [1, 1, 1, 1],
        "evaluations of the periodic at each tick"
    );
}
