//! The scheduler's costs at scale, by hand (prints figures; asserts nothing):
//!
//! (a) 100,000 periodics made from the corpus's mix of schedules (the 1335
//!     periodics of `../shared/corpus/test-infra`, cycled, each copy renamed):
//!     - memory: live heap bytes (a counting global allocator) and resident
//!       memory (`/proc/self/statm`) just before and just after `set_jobs` moves
//!       the built entries into the scheduler. The entries themselves (the config:
//!       policy, parsed schedule, run template with its spec) are counted
//!       separately, so the difference is what the scheduler adds per periodic
//!       (target: at most 300 B);
//!     - the first evaluation of every entry against a SQLite store (a first
//!       start: crons learn their first tick, intervals that never ran start);
//!       those runs then end and poke their periodics, so that every entry waits
//!       for its next tick, as in a steady state;
//!     - idle CPU: with nothing due for the next 10 s, the daemon's loop (sleep
//!       until `next_wake`, capped at an hour; fire what is due) for 10 s of real
//!       time, as process CPU time (all threads, `/proc/self/task/*/schedstat`)
//!       in % of one core (target: below 1%).
//!
//! (b) 10,000 periodics due in the same second against a SQLite store in a
//!     temporary directory, with real time: entries evaluated at start-up, the
//!     loop sleeps until the due second and fires them all. For every run created,
//!     lateness = when its commit was reported by the store's observer (after the
//!     transaction committed) minus its scheduled instant: p50, p99, max (target:
//!     p99 at most 50 ms), and where the time goes (time and calls per store
//!     method, and what a run's template costs to copy, serialize and drop).
//!     (b') the same with every run template's spec left empty, to show what
//!     the rest of the path costs.
//!
//! `cargo run --release -p bosun-scheduler --example scheduler_bench [PERIODICS] [DUE] [IDLE_SECS]`
//! (defaults 100000 10000 10). Needs the corpus beside the project.

use bosun_base::sync::Lock;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bosun_config::{load, LoadOptions, OsFiles, Snapshot};
use bosun_schedule::decide::Trigger;
use bosun_schedule::{ConfigScheduleCheck, ParseOptions, Schedule};
use bosun_scheduler::{PeriodicJob, Scheduler};
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{
    Created, Fire, NewRun, PeriodicRuns, PeriodicState, PreparedFires, Run, RunFilter, RunState,
    Store, StoreError, TickOutcome, Transition, TransitionObserver,
};
use jiff::{SignedDuration, Timestamp};

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter is only arithmetic.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Resident bytes (`/proc/self/statm`, 4 KiB pages).
fn resident() -> isize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<isize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// CPU time of every thread of the process (nanoseconds on a CPU, from
/// `/proc/self/task/*/schedstat`).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// utime + stime of the process in clock ticks (`/proc/self/stat`), a cross-check.
fn cpu_ticks() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config")
}

fn load_corpus() -> Snapshot {
    let root = corpus();
    let loaded = load(
        &LoadOptions {
            config: Some(root.join("prow/config.yaml")),
            job_config: vec![root.join("jobs")],
            schedule_check: Some(Arc::new(ConfigScheduleCheck)),
            ..LoadOptions::default()
        },
        &OsFiles,
    );
    let mut snapshot = loaded
        .snapshot
        .unwrap_or_else(|| panic!("the corpus at {} does not load", root.display()));
    // Only the periodics (and the presets their pod specs need) matter here.
    snapshot.presubmits.clear();
    snapshot.postsubmits.clear();
    snapshot
}

/// `n` scheduler entries made from the corpus's periodics, cycled, each copy
/// renamed `NAME-COPY` (so templates, specs and identities are all distinct).
fn entries(corpus: &mut Snapshot, n: usize) -> Vec<PeriodicJob> {
    let base = std::mem::take(&mut corpus.periodics);
    let mut out = Vec::with_capacity(n);
    let mut copy = 0;
    while out.len() < n {
        corpus.periodics = base
            .iter()
            .take(n - out.len())
            .map(|p| {
                let mut p = p.clone();
                p.base.name = format!("{}-{copy}", p.base.name);
                p
            })
            .collect();
        out.extend(bosun_scheduler::config::jobs(corpus));
        copy += 1;
    }
    corpus.periodics = base;
    out
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Per store method: calls and time spent.
#[derive(Default)]
struct Timed<S> {
    inner: S,
    calls: Mutex<BTreeMap<&'static str, (u64, Duration)>>,
}

impl<S> Timed<S> {
    fn time<T>(&self, what: &'static str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let took = start.elapsed();
        let mut calls = self.calls.locked();
        let e = calls.entry(what).or_default();
        e.0 += 1;
        e.1 += took;
        out
    }

    fn take(&self) -> BTreeMap<&'static str, (u64, Duration)> {
        std::mem::take(&mut *self.calls.locked())
    }
}

impl<S: Store> Store for Timed<S> {
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError> {
        self.time("create_run", || self.inner.create_run(new, at))
    }
    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError> {
        self.time("transition", || self.inner.transition(id, t))
    }
    fn transitions(&self, batch: Vec<(String, Transition)>) -> Vec<Result<Run, StoreError>> {
        self.time("transitions", || self.inner.transitions(batch))
    }
    fn get(&self, id: &str) -> Result<Option<Run>, StoreError> {
        self.time("get", || self.inner.get(id))
    }
    fn list(&self, filter: &RunFilter) -> Result<Vec<Run>, StoreError> {
        self.time("list", || self.inner.list(filter))
    }
    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.time("spec", || self.inner.spec(hash))
    }
    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError> {
        self.time("periodic_state", || self.inner.periodic_state(periodic))
    }
    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError> {
        self.time("put_periodic_state", || {
            self.inner.put_periodic_state(state)
        })
    }
    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError> {
        self.time("record_outcomes", || self.inner.record_outcomes(outcomes))
    }
    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError> {
        self.time("outcomes", || self.inner.outcomes(periodic))
    }
    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError> {
        self.time("commit_fire", || self.inner.commit_fire(fire, at))
    }
    fn commit_fires(
        &self,
        fires: Vec<Fire>,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        self.time("commit_fires", || self.inner.commit_fires(fires, at))
    }
    fn periodic_states(
        &self,
        periodics: &[String],
    ) -> Result<HashMap<String, PeriodicState>, StoreError> {
        self.time("periodic_states", || self.inner.periodic_states(periodics))
    }
    fn periodic_runs(
        &self,
        periodics: &[String],
    ) -> Result<HashMap<String, PeriodicRuns>, StoreError> {
        self.time("periodic_runs", || self.inner.periodic_runs(periodics))
    }
    fn periodic_versions(&self, periodics: &[String]) -> Option<Vec<u64>> {
        self.time("periodic_versions", || {
            self.inner.periodic_versions(periodics)
        })
    }
    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<PreparedFires, StoreError> {
        self.time("prepare_fires", || self.inner.prepare_fires(fires))
    }
    fn commit_prepared(
        &self,
        prepared: PreparedFires,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        self.time("commit_prepared", || {
            self.inner.commit_prepared(prepared, at)
        })
    }
    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError> {
        self.time("delete_completed_before", || {
            self.inner.delete_completed_before(cutoff)
        })
    }
}

fn print_calls(calls: &BTreeMap<&'static str, (u64, Duration)>, periodics: usize) {
    for (what, (n, took)) in calls {
        println!(
            "    {what:<16} {n:>6} call(s) {:>9.1} ms = {:>6.1} us per periodic",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / periodics as f64
        );
    }
}

/// Records when the store reports each new run committed.
#[derive(Default)]
struct Commits {
    on: AtomicBool,
    seen: Mutex<Vec<(Option<Timestamp>, Timestamp)>>,
}

impl TransitionObserver for Commits {
    fn on_transition(&self, run: &Run, from: Option<RunState>) {
        if from.is_none() && self.on.load(Ordering::Relaxed) {
            let at = Timestamp::now();
            self.seen.locked().push((run.scheduled_at, at));
        }
    }
}

/// How long to sleep until `wake` (never negative), at most `cap`.
fn until(wake: Option<Timestamp>, cap: Duration) -> Duration {
    wake.map_or(cap, |w| {
        Duration::try_from(w.duration_since(Timestamp::now()))
            .unwrap_or(Duration::ZERO)
            .min(cap)
    })
}

fn open_store(dir: &tempfile::TempDir, observer: Option<Arc<Commits>>) -> Timed<SqliteStore> {
    let observer = observer.map(|o| o as Arc<dyn TransitionObserver>);
    Timed {
        inner: SqliteStore::open_with(
            dir.path().join("bosun.db"),
            SqliteOptions::default(),
            observer,
        )
        .expect("store opens"),
        calls: Mutex::default(),
    }
}

fn part_a(corpus: &mut Snapshot, n: usize, idle: Duration) {
    println!(
        "(a) {n} periodics from the corpus's {} schedules",
        corpus.periodics.len()
    );
    let (live0, rss0) = (live(), resident());
    let started = Instant::now();
    let jobs = entries(corpus, n);
    let built = started.elapsed();
    let (live1, rss1) = (live(), resident());
    let mix = jobs.iter().fold([0usize; 3], |mut m, j| {
        m[match j.policy.trigger {
            Trigger::Cron(_) => 0,
            Trigger::Interval(_) => 1,
            Trigger::MinimumInterval(_) => 2,
        }] += 1;
        m
    });
    let identity_bytes: usize = jobs.iter().map(|j| j.identity.len()).sum();
    let spec_json: usize = jobs
        .iter()
        .take(corpus.periodics.len())
        .map(|j| j.template.spec.json().len())
        .sum::<usize>()
        / corpus.periodics.len().min(n).max(1);
    println!(
        "  entries built in {:.2} s: {} cron, {} interval, {} minimum_interval\n  \
         the entries (the config: policy, schedule, run template) hold {:.1} MiB = {:.0} \
         B/periodic of heap ({} B inline; the run template holds its spec as shared JSON text of a \
         {spec_json} B document on average); resident {:+.1} MiB",
        built.as_secs_f64(),
        mix[0],
        mix[1],
        mix[2],
        mib(live1 - live0),
        (live1 - live0) as f64 / n as f64,
        std::mem::size_of::<PeriodicJob>(),
        mib(rss1 - rss0)
    );

    let mut scheduler = Scheduler::new();
    let now = Timestamp::now();
    let started = Instant::now();
    scheduler.set_jobs(jobs, now);
    let took = started.elapsed();
    let (live2, rss2) = (live(), resident());
    let per = (live2 - live1) as f64 / n as f64;
    println!(
        "  set_jobs in {:.0} ms; the scheduler adds {:.1} MiB ({} B) of heap = {per:.0} B/periodic \
         beyond the entries (target <= 300); resident {:+.1} MiB = {:.0} B/periodic",
        took.as_secs_f64() * 1e3,
        mib(live2 - live1),
        live2 - live1,
        mib(rss2 - rss1),
        (rss2 - rss1) as f64 / n as f64
    );
    // What that is, from the layout of `Scheduler` (a HashMap of identity ->
    // (entry, generation) and a BinaryHeap of (due, generation, identity)),
    // both grown by doubling: entries are moved into the map, whose slack
    // buckets are as large as an entry.
    let buckets = (n * 8 / 7).next_power_of_two();
    let slot = std::mem::size_of::<(String, (PeriodicJob, u64))>();
    let heap_slot = std::mem::size_of::<std::cmp::Reverse<(Timestamp, u64, String)>>();
    let map = buckets * (slot + 1) + 16;
    let moved = n * std::mem::size_of::<PeriodicJob>();
    let heap = n.next_power_of_two() * heap_slot;
    println!(
        "    expected from the layout: map {buckets} buckets x ({slot} + 1) B = {:.1} MiB, \
         minus the {:.1} MiB of entries moved out of their Vec, + 2 identity copies \
         {:.1} MiB, + heap {} x {heap_slot} B = {:.1} MiB => {:.0} B/periodic",
        mib(map as isize),
        mib(moved as isize),
        mib(2 * identity_bytes as isize),
        n.next_power_of_two(),
        mib(heap as isize),
        (map - moved + 2 * identity_bytes + heap) as f64 / n as f64
    );

    // First evaluation of every entry (a first start with an empty store).
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_store(&dir, None);
    let started = Instant::now();
    let (report, failed) = scheduler.fire_due(&store, Timestamp::now());
    let took = started.elapsed();
    println!(
        "  first evaluation of {} entries: {:.2} s ({:.0} us/periodic); {} runs created \
         (intervals that never ran start at once), {} failed",
        report.fired.len(),
        took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / n as f64,
        report.created.len(),
        failed.len()
    );
    print_calls(&store.take(), n);

    // Those runs end (as the controller would report them) and poke their
    // periodics: intervals then wait for their next tick, as in a steady state.
    let started = Instant::now();
    let ended = Timestamp::now();
    for state in [RunState::Pending, RunState::Success] {
        for chunk in report.created.chunks(5_000) {
            let batch = chunk
                .iter()
                .map(|r| (r.id.clone(), Transition::to(state, ended, "bench")))
                .collect();
            for r in store.transitions(batch) {
                r.expect("transition");
            }
        }
    }
    let transitions = started.elapsed();
    for r in &report.created {
        scheduler.poke(r.periodic.as_deref().expect("periodic"), ended);
    }
    let started = Instant::now();
    let (again, failed) = scheduler.fire_due(&store, Timestamp::now());
    println!(
        "  {} runs ended ({:.2} s of batched transitions); their periodics re-evaluated in \
         {:.2} s ({} fired, {} runs created, {} failed)",
        report.created.len(),
        transitions.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        again.fired.len(),
        again.created.len(),
        failed.len()
    );
    // The store's work after those commits (folding the fire log they went
    // through, a checkpoint) is not idle time: a read waits for the fold, and
    // the checkpoint runs within a second.
    let started = Instant::now();
    store.get("none").expect("read");
    let folded = started.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    println!(
        "  the store folded its fire log {:.2} s after the re-evaluation returned",
        folded.as_secs_f64()
    );
    store.take();
    drop((report, again));

    // Idle: wait (firing as the daemon would) until nothing is due for `idle`.
    let cap = Duration::from_secs(3600);
    let quiet = SignedDuration::try_from(idle).expect("short") + SignedDuration::from_secs(1);
    let waited = Instant::now();
    loop {
        let next = scheduler.next_wake();
        if next.is_none_or(|w| w.duration_since(Timestamp::now()) > quiet) {
            break;
        }
        std::thread::sleep(until(next, cap));
        let (report, _) = scheduler.fire_due(&store, Timestamp::now());
        println!(
            "  (before the idle window: {} fired, {} runs created)",
            report.fired.len(),
            report.created.len()
        );
    }
    let next = scheduler.next_wake();
    println!(
        "  idle from {} (waited {:.1} s); next entry due {}",
        Timestamp::now().round(jiff::Unit::Second).unwrap(),
        waited.elapsed().as_secs_f64(),
        next.map_or("never".to_string(), |w| w.to_string())
    );
    let (cpu0, ticks0) = (cpu_ns(), cpu_ticks());
    let started = Instant::now();
    let deadline = started + idle;
    let (mut wakeups, mut fired) = (0u64, 0usize);
    loop {
        let (report, _) = scheduler.fire_due(&store, Timestamp::now());
        fired += report.fired.len();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(until(scheduler.next_wake(), cap).min(left));
        wakeups += 1;
    }
    let wall = started.elapsed();
    let (cpu1, ticks1) = (cpu_ns(), cpu_ticks());
    println!(
        "  idle loop {:.1} s: {wakeups} wake-ups, {fired} fired; process CPU {:.3} ms = {:.4}% \
         of one core (target < 1%); /proc/self/stat: {} clock ticks",
        wall.as_secs_f64(),
        (cpu1 - cpu0) as f64 / 1e6,
        (cpu1 - cpu0) as f64 / wall.as_nanos() as f64 * 100.0,
        ticks1 - ticks0
    );
    // The cost of one wake-up with nothing due.
    let started = Instant::now();
    for _ in 0..10_000 {
        let _ = scheduler.fire_due(&store, Timestamp::now());
        let _ = scheduler.next_wake();
    }
    println!(
        "  a wake-up with nothing due (fire_due + next_wake): {:.2} us",
        started.elapsed().as_secs_f64() * 1e6 / 10_000.0
    );

    // Steady state (every entry evaluated, each periodic's next fire time kept
    // for listings and metrics): what dropping the scheduler frees, minus the
    // entries.
    let before = live();
    drop(scheduler);
    let freed = before - live();
    println!(
        "  in steady state (next fire times recorded too) the scheduler holds {:.1} MiB ({} B) \
         = {:.0} B/periodic beyond the entries (target <= 300; dropping it frees {:.1} MiB)",
        mib(freed - (live1 - live0)),
        freed - (live1 - live0),
        (freed - (live1 - live0)) as f64 / n as f64,
        mib(freed)
    );
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// `lean`: every run template's spec replaced by `{}`, to see what the rest of
/// the path costs (what storing a job's spec once per configuration, rather than
/// with every run, would leave).
fn part_b(corpus: &mut Snapshot, n: usize, lean: bool, ahead: bool) {
    println!(
        "(b{}) {n} periodics due in the same second, SQLite store{}; fires {}",
        if lean { "'" } else { "" },
        if lean {
            ", run templates without their spec"
        } else {
            ""
        },
        if ahead {
            "decided ahead, as the daemon does"
        } else {
            "decided at the instant"
        }
    );
    let lead = SignedDuration::from_secs(2);
    let jobs_n = n;
    let mut jobs = entries(corpus, n);
    for j in &mut jobs {
        if lean {
            j.template.spec = serde_json::json!({}).into();
        }
        j.identity = format!("due-{}", j.identity).into();
        j.policy.identity = j.identity.clone();
        j.template.periodic = Some(j.identity.to_string());
    }
    per_run_costs(&jobs);
    let dir = tempfile::tempdir().expect("temp dir");
    let commits = Arc::new(Commits::default());
    let store = open_store(&dir, Some(commits.clone()));

    // History: one completed run per periodic, a day ago (created by a few
    // threads at once, so the writer batches them).
    let started = Instant::now();
    let day_ago = Timestamp::now() - SignedDuration::from_hours(24);
    let tick = day_ago.round(jiff::Unit::Second).expect("in range");
    let ids: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = jobs
            .chunks(jobs.len().div_ceil(8))
            .map(|chunk| {
                let store = &store;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|j| {
                            let mut new = j.template.clone();
                            new.scheduled_at = Some(tick);
                            let created = store.create_run(new, day_ago).expect("seeded");
                            created.run().id.clone()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("seeding thread"))
            .collect()
    });
    let ended = day_ago + SignedDuration::from_mins(5);
    for state in [RunState::Pending, RunState::Success] {
        let batch = ids
            .iter()
            .map(|id| (id.clone(), Transition::to(state, ended, "bench")))
            .collect();
        for r in store.transitions(batch) {
            r.expect("transition");
        }
    }
    let seeding = started.elapsed();
    println!(
        "  seeded one completed run per periodic in {:.2} s",
        seeding.as_secs_f64()
    );
    store.take();

    // Every periodic fires daily at the same second: long enough from now for
    // the start-up evaluation (generously 200 us per periodic), then ~1 s.
    let start_lead =
        lead + SignedDuration::from_secs(1) + SignedDuration::from_micros(200 * n as i64);
    let due = (Timestamp::now() + start_lead)
        .round(
            jiff::TimestampRound::new()
                .smallest(jiff::Unit::Second)
                .mode(jiff::RoundMode::Ceil),
        )
        .expect("in range");
    let z = due.to_zoned(jiff::tz::TimeZone::UTC);
    let cron = format!("{} {} {} * * *", z.second(), z.minute(), z.hour());
    for j in &mut jobs {
        j.schedule_hash = format!("bench {cron}");
        j.policy.trigger = Trigger::Cron(
            Schedule::parse(
                &cron,
                ParseOptions {
                    timezone: None,
                    identity: Some(&j.identity),
                },
            )
            .expect("cron parses"),
        );
    }
    let mut scheduler = Scheduler::new();
    scheduler.set_jobs(jobs, Timestamp::now());
    let started = Instant::now();
    let (report, failed) = scheduler.fire_due(&store, Timestamp::now());
    let startup = started.elapsed();
    assert!(report.created.is_empty() && failed.is_empty());
    println!(
        "  start-up evaluation of {} entries: {:.2} s ({:.0} us/periodic)",
        report.fired.len(),
        startup.as_secs_f64(),
        startup.as_secs_f64() * 1e6 / n as f64
    );
    print_calls(&store.take(), n);
    assert_eq!(scheduler.next_wake(), Some(due), "all due at {due}");
    let left = due.duration_since(Timestamp::now());
    assert!(
        left > lead + SignedDuration::from_millis(200),
        "the start-up evaluation overran the lead; run again"
    );
    println!(
        "  all due at {due} ({:.2} s ahead); sleeping",
        left.as_secs_f64()
    );

    // The daemon's loop: sleep until `lead` before the instant, decide the
    // fires ahead (unless `ahead` is off), sleep until the instant, fire.
    let cap = Duration::from_secs(3600);
    let mut prepare_took = None;
    if ahead {
        std::thread::sleep(until(
            scheduler.next_wake_ahead(Timestamp::now(), lead),
            cap,
        ));
        let started = Instant::now();
        let n = scheduler.prepare(&store, Timestamp::now(), lead);
        prepare_took = Some((n, started.elapsed()));
        assert_eq!(n, jobs_n, "all prepared");
        assert!(Timestamp::now() < due, "prepared before the instant");
    }
    let prepare_calls = store.take();
    std::thread::sleep(until(scheduler.next_wake(), cap));
    commits.on.store(true, Ordering::Relaxed);
    let woke = Timestamp::now();
    let started = Instant::now();
    let (report, failed) = scheduler.fire_due(&store, woke);
    let took = started.elapsed();
    commits.on.store(false, Ordering::Relaxed);
    if let Some((n, took)) = prepare_took {
        println!(
            "  {n} fires decided {:.1} s ahead in {:.0} ms ({:.0} us/periodic):",
            lead.as_secs_f64(),
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / n as f64
        );
        print_calls(&prepare_calls, n);
    }
    let mut lateness: Vec<f64> = commits
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(tick, at)| at.duration_since(tick.expect("scheduled")).as_secs_f64() * 1e3)
        .collect();
    lateness.sort_by(f64::total_cmp);
    println!(
        "  woke {:.2} ms after the due second; fire_due took {:.1} ms for {} periodics \
         ({:.0} us/periodic), {} runs created, {} failed",
        woke.duration_since(due).as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3,
        report.fired.len(),
        took.as_secs_f64() * 1e6 / n as f64,
        report.created.len(),
        failed.len()
    );
    println!(
        "  lateness (commit - scheduled) of {} runs: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
         (target p99 <= 50 ms)",
        lateness.len(),
        percentile(&lateness, 0.50),
        percentile(&lateness, 0.99),
        lateness.last().copied().unwrap_or(f64::NAN)
    );
    print_calls(&store.take(), n);
}

/// What a fire costs per run outside the store's writer: the template's deep
/// clone (`fire_due` copies it into the new run), the spec's serialization and
/// hash (the store does it before handing the run to its writer), and dropping
/// the copy.
fn per_run_costs(jobs: &[PeriodicJob]) {
    let started = Instant::now();
    let copies: Vec<NewRun> = jobs.iter().map(|j| j.template.clone()).collect();
    let clone = started.elapsed();
    let started = Instant::now();
    let hashes: usize = copies.iter().map(|c| c.spec.hash().len()).sum();
    let hash = started.elapsed();
    let started = Instant::now();
    drop(copies);
    let dropped = started.elapsed();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / jobs.len() as f64;
    println!(
        "  per run: template clone {:.1} us, spec to JSON + SHA-256 {:.1} us, drop of the \
         copy {:.1} us ({} hashes)",
        per(clone),
        per(hash),
        per(dropped),
        hashes / 64
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let due: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let idle: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(10);
    let started = Instant::now();
    let mut corpus = load_corpus();
    println!(
        "corpus: {} periodics loaded in {:.2} s",
        corpus.periodics.len(),
        started.elapsed().as_secs_f64()
    );
    if n > 0 {
        part_a(&mut corpus, n, Duration::from_secs(idle));
    }
    if due > 0 {
        part_b(&mut corpus, due, false, true);
        part_b(&mut corpus, due, false, false);
        part_b(&mut corpus, due, true, true);
    }
}
