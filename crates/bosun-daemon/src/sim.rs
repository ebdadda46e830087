//! The daemon's logic in simulated time: the real scheduler (`periodics::fire`),
//! the real controller (`Controller::pass`) and a store, driven by a
//! [`ManualClock`] with a [`SimulatedExecutor`] whose runs last 5 simulated
//! minutes. A simulated day takes a second or two.

use std::collections::HashMap;
use std::sync::Arc;

use bosun_cluster::executor::{Executor, SimulatedExecutor};
use bosun_cluster::registry::clusters;
use bosun_config::{load, OsFiles};
use bosun_host::args::ConfigArgs;
use bosun_store::active::{ActiveRuns, Observers};
use bosun_store::clock::{Clock, ManualClock};
use bosun_store::memory::MemoryStore;
use bosun_store::{RunFilter, RunState, Store};
use jiff::{SignedDuration, Timestamp};

use crate::daemon::Daemon;
use crate::metrics::Metrics;
use crate::state::{Shared, SharedParts};

const JOBS: &str = r#"
periodics:
- name: hourly
  cron: "0 * * * *"
  spec: {containers: [{image: x, command: ["true"]}]}
- name: every-2-min
  cron: "*/2 * * * *"
  spec: {containers: [{image: x, command: ["true"]}]}
- name: interval-10m
  interval: 10m
  spec: {containers: [{image: x, command: ["true"]}]}
- name: min-interval-10m
  minimum_interval: 10m
  spec: {containers: [{image: x, command: ["true"]}]}
"#;

pub(crate) struct Sim {
    pub(crate) daemon: Arc<Daemon>,
    clock: Arc<ManualClock>,
    exec: Arc<SimulatedExecutor>,
    store: Arc<MemoryStore>,
    _dir: tempfile::TempDir,
}

pub(crate) fn sim(start: Timestamp) -> Sim {
    sim_with(start, "{}\n", JOBS)
}

/// A simulation of the central config `config` and the jobs `jobs`. Every
/// cluster, whatever its kind, runs on the simulated executor.
fn sim_with(start: Timestamp, config: &str, jobs: &str) -> Sim {
    sim_on(start, config, jobs, |exec| exec)
}

/// As [`sim_with`], every cluster running on what `on` makes of the
/// simulated executor.
fn sim_on(
    start: Timestamp,
    config: &str,
    jobs: &str,
    on: impl Fn(Arc<SimulatedExecutor>) -> Arc<dyn Executor>,
) -> Sim {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    std::fs::write(dir.path().join("jobs.yaml"), jobs).unwrap();
    let config_args = ConfigArgs {
        config: Some(dir.path().join("config.yaml")),
        job_config: vec![dir.path().join("jobs.yaml")],
        ..ConfigArgs::default()
    };
    let loaded = load(&config_args.load_options(), &OsFiles);
    let snapshot = loaded.snapshot.expect("valid config");
    let clock = Arc::new(ManualClock::new(start));
    let metrics = Metrics::new("default");
    let active = Arc::new(ActiveRuns::default());
    let store = Arc::new(MemoryStore::with_observer(Arc::new(Observers(vec![
        metrics.clone(),
        active.clone(),
    ]))));
    active.load(&*store).unwrap();
    metrics.seed(&*store).unwrap();
    let exec = Arc::new(SimulatedExecutor::new(
        clock.clone(),
        SignedDuration::from_mins(5),
    ));
    let shared = Arc::new(Shared::new(SharedParts {
        leadership: crate::leader::Leadership::single(),
        store: store.clone(),
        active,
        clusters: clusters(&snapshot.config, &[], 8),
        snapshot,
        warnings: Vec::new(),
        users: HashMap::new(),
        make_executor: {
            let exec = on(exec.clone());
            Box::new(move |_, _, _, _| Some(exec.clone()))
        },
        clock: clock.clone(),
        metrics,
        config_args,
        cpus: 8,
        placer: Arc::new(crate::placement::Placer::new(crate::plans::engine(
            &bosun_config::types::ProwConfig::default(),
            dir.path(),
            bosun_dispatcher::demand::DemandSource::Ones,
            None,
        ))),
        repo_commits: Default::default(),
    }));
    let daemon = Daemon::new(
        shared,
        Arc::default(),
        None,
        dir.path().join("runs"),
        Arc::new(crate::repos::Repos::new(dir.path().join("repos"))),
        crate::pulls::settings::Pulls::new(None, None).expect("no plugin file"),
        Arc::default(),
    );
    Sim {
        daemon,
        clock,
        exec,
        store,
        _dir: dir,
    }
}

impl Sim {
    /// Runs every event before `end`: at each instant, ended runs complete
    /// (poking their periodics), due periodics fire, new runs start.
    fn run_until(&self, end: Timestamp) {
        loop {
            self.daemon.controller.pass();
            let (_, failed) = crate::periodics::fire(&self.daemon.shared, &self.daemon.controller);
            assert!(failed.is_empty(), "{failed:?}");
            self.daemon.controller.pass();
            let now = self.clock.now();
            // As the daemon's loop: fires due soon are decided ahead.
            let lead = crate::periodics::PREPARE_LEAD;
            let mut scheduler = self.daemon.shared.scheduler.lock().unwrap();
            scheduler.prepare(&*self.store, now, lead);
            let next_wake = scheduler
                .next_wake_ahead(now, lead)
                .map(|t| t.max(now + SignedDuration::from_millis(1)));
            drop(scheduler);
            let next = [next_wake, self.exec.next_end()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t < end => self.clock.set(t),
                _ => break,
            }
        }
    }

    /// How many of the runs a pass started came back to the controller
    /// (to be taken by the next pass, or held by this one).
    fn starts_back(&self) -> usize {
        self.daemon.controller.started.lock().unwrap().len() + self.daemon.controller.held_runs()
    }

    /// Waits (at most `limit`) until `n` starts came back; how many did.
    fn wait_for_starts(&self, n: usize, limit: std::time::Duration) -> usize {
        let until = std::time::Instant::now() + limit;
        while self.starts_back() < n && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.starts_back()
    }

    /// How many runs are in `state`.
    fn runs_in(&self, state: RunState) -> usize {
        self.store
            .list(&RunFilter {
                state: Some(state),
                limit: 100_000,
                ..RunFilter::default()
            })
            .unwrap()
            .len()
    }

    fn runs(&self, job: &str) -> Vec<bosun_store::Run> {
        self.store
            .list(&RunFilter {
                job: Some(job.into()),
                limit: 100_000,
                oldest_first: true,
                ..RunFilter::default()
            })
            .unwrap()
    }
}

#[test]
fn a_simulated_day_of_scheduler_controller_and_store() {
    let t0: Timestamp = "2026-03-02T00:00:30Z".parse().unwrap();
    let end: Timestamp = "2026-03-03T00:00:00Z".parse().unwrap();
    let s = sim(t0);
    s.run_until(end);
    let count = |job: &str| s.runs(job).len();
    // Cron ticks after the periodic was first seen (00:00:30), before the end.
    assert_eq!(count("hourly"), 23, "01:00 to 23:00");
    // Every 2 minutes, runs of 5: a run every 6 minutes, the rest overlap.
    assert_eq!(count("every-2-min"), 240, "00:02 + 6k up to 23:56");
    let outcomes = s.store.outcomes("every-2-min").unwrap();
    let ticks: u64 = outcomes.iter().map(|o| o.count).sum();
    assert_eq!(ticks, 719, "every tick from 00:02 to 23:58 has one outcome");
    let overlaps: u64 = outcomes
        .iter()
        .filter(|o| o.outcome == "overlap")
        .map(|o| o.count)
        .sum();
    assert_eq!(overlaps, 479);
    // An interval counts from the previous run's creation (the first runs at
    // once); a minimum interval from its completion.
    assert_eq!(count("interval-10m"), 144, "00:00:30 + 10k minutes");
    assert_eq!(count("min-interval-10m"), 96, "every 15 minutes");
    let starts: Vec<Timestamp> = s
        .runs("min-interval-10m")
        .iter()
        .map(|r| r.created_at)
        .collect();
    assert!(starts
        .windows(2)
        .all(|w| w[1].duration_since(w[0]) == SignedDuration::from_mins(15)));
    // Every run went through the controller to success, 5 minutes after it
    // started (or is still running at the end).
    for job in ["hourly", "every-2-min", "interval-10m", "min-interval-10m"] {
        for r in s.runs(job) {
            match r.state {
                RunState::Success => {
                    let took = r
                        .completed_at
                        .unwrap()
                        .duration_since(r.pending_at.unwrap());
                    assert_eq!(took, SignedDuration::from_mins(5), "{r:?}");
                }
                RunState::Pending => {
                    assert!(r.pending_at.unwrap() + SignedDuration::from_mins(5) >= end)
                }
                other => panic!("{job}: {other} {r:?}"),
            }
        }
    }
}

/// In the daemon (inside a runtime) a pass holds what it decided instead of
/// committing it: the commit comes with the pass the timer wakes
/// `COMMIT_EVERY` later, or from `flush`, which the daemon calls when it
/// stops. (Outside a runtime, as in the simulation above, a pass commits at
/// once.) Time is paused: it moves only when every task waits.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn held_transitions_are_committed_after_the_timers_wake_up_or_by_a_flush() {
    use std::time::Duration;
    let t0: Timestamp = "2026-03-02T00:00:30Z".parse().unwrap();
    let s = sim(t0);
    s.clock.set("2026-03-02T00:02:00Z".parse().unwrap());
    let (created, failed) = crate::periodics::fire(&s.daemon.shared, &s.daemon.controller);
    assert!(failed.is_empty(), "{failed:?}");
    assert!(!created.is_empty());
    let states = || -> Vec<RunState> {
        s.store
            .list(&RunFilter {
                limit: 100,
                ..RunFilter::default()
            })
            .unwrap()
            .iter()
            .map(|r| r.state)
            .collect()
    };
    let all = |want: RunState| states().iter().all(|&st| st == want);
    assert!(all(RunState::Triggered), "{:?}", states());
    let n = states().len();
    // A pass admits the runs; their starts go to the blocking pool and come
    // back to the controller: to the next pass, or to this one if they
    // completed before it ended (it then holds them already).
    s.daemon.controller.pass();
    assert_eq!(
        s.wait_for_starts(n, Duration::from_secs(30)),
        n,
        "every start came back: {:?}",
        states()
    );
    // The next pass takes the completed starts and holds them.
    s.daemon.controller.pass();
    assert!(s.daemon.controller.started.lock().unwrap().is_empty());
    assert!(
        all(RunState::Triggered),
        "held, not committed: {:?}",
        states()
    );
    // A wake-up left by the fire is taken first: the next one must be the
    // timer's.
    let _ = tokio::time::timeout(Duration::ZERO, s.daemon.controller.wake.notified()).await;
    let before = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(1), s.daemon.controller.wake.notified())
        .await
        .expect("a timer wakes the controller for the held commit");
    assert!(before.elapsed() >= crate::controller::COMMIT_EVERY);
    s.daemon.controller.pass();
    assert!(all(RunState::Pending), "committed: {:?}", states());
    // The runs end (5 simulated minutes); the pass holds their ends, and a
    // flush commits them.
    s.clock.set("2026-03-02T00:07:00Z".parse().unwrap());
    s.daemon.controller.pass();
    assert!(
        all(RunState::Pending),
        "held, not committed: {:?}",
        states()
    );
    s.daemon.controller.flush();
    assert!(all(RunState::Success), "flushed: {:?}", states());
}

/// The controller's loop sleeps until an event or its plan's deadline:
/// idle, it passes only when woken (here by a cluster's health changing);
/// while a pending run's executor does not report the run's changes (the
/// simulated one: its runs end by the clock alone), it looks again every
/// second. Time is paused: it moves only when every task waits.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_controller_polls_only_while_a_pending_run_may_change_unreported() {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;
    let s = sim("2026-03-02T00:00:30Z".parse().unwrap());
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(s.daemon.controller.clone().run(stop));
    let passes = || s.daemon.controller.passes.load(Relaxed);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(passes() <= 2, "idle for 30 s: {} passes", passes());
    let before = passes();
    s.daemon.shared.health_changed.notify_one();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(passes(), before + 1, "a change of health brings a pass");
    // Runs are created; they start and are pending on the simulated
    // executor, which reports nothing.
    s.clock.set("2026-03-02T00:02:00Z".parse().unwrap());
    let (created, failed) = crate::periodics::fire(&s.daemon.shared, &s.daemon.controller);
    assert!(failed.is_empty() && !created.is_empty(), "{failed:?}");
    let pending = || {
        s.store
            .list(&RunFilter {
                active: true,
                limit: 100,
                ..RunFilter::default()
            })
            .unwrap()
            .iter()
            .all(|r| r.state == RunState::Pending)
    };
    for _ in 0..100 {
        if pending() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pending(), "the runs started");
    let before = passes();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let polled = passes() - before;
    assert!(
        (8..=12).contains(&polled),
        "10 s with unreported runs: {polled} passes"
    );
    let _ = stop_tx.send(true);
    task.await.unwrap();
}

/// A run that waits for its cluster's first probe says why, and that note is
/// held for a later commit like any transition; the run still keeps its place
/// in the queue. Once the cluster is Reachable, the oldest run takes its one
/// slot, not a newer run created while the note was held.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_run_whose_waiting_note_is_held_keeps_its_place_in_the_queue() {
    let config = "build_clusters:\n  build-a: {kind: kubernetes, kubeconfig: /nonexistent, context: build-a, max_concurrency: 1}\n";
    let jobs = r#"
periodics:
- name: first
  cron: "1 0 * * *"
  cluster: build-a
  spec: {containers: [{image: x, command: ["true"]}]}
- name: second
  cron: "2 0 * * *"
  cluster: build-a
  spec: {containers: [{image: x, command: ["true"]}]}
"#;
    let s = sim_with("2026-03-02T00:00:30Z".parse().unwrap(), config, jobs);
    // The periodics fired at `at`.
    let fire_at = |at: &str| {
        s.clock.set(at.parse().unwrap());
        let (created, failed) = crate::periodics::fire(&s.daemon.shared, &s.daemon.controller);
        assert!(failed.is_empty(), "{failed:?}");
        created
    };
    // The periodics are first seen.
    fire_at("2026-03-02T00:00:30Z");
    assert_eq!(fire_at("2026-03-02T00:01:00Z"), vec!["first".to_string()]);
    let first = s.runs("first").pop().expect("a run of first");
    // The cluster has not been probed: the run waits, and its note is held.
    s.daemon.controller.pass();
    assert!(s.daemon.controller.starting.lock().unwrap().is_empty());
    assert!(
        !s.runs("first")[0].description.starts_with("Waiting"),
        "the note is held, not committed: {:?}",
        s.runs("first")[0]
    );
    crate::health::record(
        &s.daemon.shared,
        "build-a",
        bosun_cluster::kube::Probe::Allowed,
    );
    assert_eq!(fire_at("2026-03-02T00:02:00Z"), vec!["second".to_string()]);
    let second = s.runs("second").pop().expect("a run of second");
    // The next pass comes before the note's commit: the older run starts.
    s.daemon.controller.pass();
    let starting: Vec<String> = s
        .daemon
        .controller
        .starting
        .lock()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(starting, vec![first.id.clone()], "second is {}", second.id);
    s.daemon.controller.flush();
}

/// `concurrency_policy: replace`: a tick's run replaces the periodic's older
/// active run, which is aborted; the new run itself is never aborted.
#[test]
fn replace_aborts_the_older_run_and_keeps_the_new_one() {
    let jobs = r#"
periodics:
- name: replaced
  cron: "* * * * *"
  concurrency_policy: replace
  spec: {containers: [{image: x, command: ["true"]}]}
"#;
    let s = sim_with("2026-03-02T00:00:30Z".parse().unwrap(), "{}\n", jobs);
    let fire_at = |at: &str| {
        s.clock.set(at.parse().unwrap());
        let (_, failed) = crate::periodics::fire(&s.daemon.shared, &s.daemon.controller);
        assert!(failed.is_empty(), "{failed:?}");
        // Two passes: the aborts requested by the fire, then the starts.
        s.daemon.controller.pass();
        s.daemon.controller.pass();
    };
    fire_at("2026-03-02T00:00:30Z");
    fire_at("2026-03-02T00:01:00Z");
    let runs = s.runs("replaced");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, RunState::Pending, "{runs:?}");
    // Runs last 5 minutes: each tick replaces the one before.
    for at in ["2026-03-02T00:02:00Z", "2026-03-02T00:03:00Z"] {
        fire_at(at);
        let runs = s.runs("replaced");
        let (newest, older) = runs.split_last().unwrap();
        assert_eq!(
            newest.state,
            RunState::Pending,
            "the new run runs: {runs:?}"
        );
        assert!(
            older.iter().all(|r| r.state == RunState::Aborted),
            "the older runs were replaced: {runs:?}"
        );
    }
}

/// The dispatcher's health overlay on a simulated clock: a cluster not
/// Reachable for `unhealthy_after` has its relocatable runs still
/// `triggered` sent elsewhere within a pass, and its units come back once it
/// has been Reachable for `recover_after`; a pinned run waits; a pending run
/// never moves. Overrides expire back to the plan.
#[test]
fn the_health_overlay_moves_relocatable_runs_and_gives_them_back() {
    let config = "scheduler: {enabled: true}
dispatcher: {relocatable_clusters: [build-a], unit: job}
build_clusters:
  build-a: {kind: local}
  build-k: {kind: kubernetes, kubeconfig: /nonexistent, context: build-k}
";
    let jobs = r#"
periodics:
- name: reloc
  cron: "* * * * *"
  concurrency_policy: allow
  cluster: build-a
  spec: {containers: [{image: x, command: ["true"]}]}
- name: pinned
  cron: "* * * * *"
  concurrency_policy: allow
  cluster: build-k
  spec: {containers: [{image: x, command: ["true"]}]}
"#;
    let s = sim_with("2026-03-02T00:00:30Z".parse().unwrap(), config, jobs);
    let shared = &s.daemon.shared;
    let at = |t: &str| -> Timestamp { t.parse().unwrap() };
    let fire_at = |t: &str| {
        s.clock.set(at(t));
        let (created, failed) = crate::periodics::fire(shared, &s.daemon.controller);
        assert!(failed.is_empty(), "{failed:?}");
        created
    };
    let probe = |ok: bool| {
        let p = if ok {
            bosun_cluster::kube::Probe::Allowed
        } else {
            bosun_cluster::kube::Probe::Failed(bosun_cluster::kube::ApiError::TimedOut)
        };
        crate::health::record(shared, "build-k", p);
    };
    let pass = || {
        s.daemon.controller.pass();
        s.daemon.controller.flush();
    };
    let engine = &shared.placer.engine;
    let planned = |job: &str| engine.service.assignment(job).map(|(a, _)| a.cluster);
    let last = |job: &str| s.runs(job).pop().unwrap();
    fire_at("2026-03-02T00:00:30Z");
    probe(true);
    crate::plans::plan_now(shared, true, "test");
    // Whatever the plan says, an override puts `reloc` on build-k (and
    // expires in an hour).
    let o = engine
        .add_override(
            bosun_dispatcher::engine::OverrideRequest {
                job: Some("reloc".into()),
                file: None,
                drain: None,
                cluster: Some("build-k".into()),
                ttl: "1h".into(),
                reason: "test".into(),
                actor: "sim".into(),
            },
            s.clock.now(),
        )
        .unwrap();
    assert_eq!(planned("reloc").as_deref(), Some("build-k"));
    assert_eq!(planned("pinned").as_deref(), Some("build-k"));
    fire_at("2026-03-02T00:01:00Z");
    pass();
    pass();
    let early = last("reloc");
    assert_eq!(early.cluster.as_deref(), Some("build-k"));
    assert_eq!(early.state, RunState::Pending, "{early:?}");
    // build-k goes down at 00:02.
    s.clock.set(at("2026-03-02T00:02:00Z"));
    probe(false);
    probe(false);
    pass();
    fire_at("2026-03-02T00:03:00Z");
    pass();
    pass();
    let waiting = last("reloc");
    assert_eq!(
        (waiting.state, waiting.cluster.as_deref()),
        (RunState::Triggered, Some("build-k")),
        "not yet unhealthy_after: {waiting:?}"
    );
    // 5 minutes after it went down: the next pass sends the triggered run
    // of `reloc` elsewhere; the pinned one waits; the pending one stays.
    s.clock.set(at("2026-03-02T00:07:00Z"));
    pass();
    pass();
    assert_eq!(planned("reloc").as_deref(), Some("build-a"));
    let moved = s
        .runs("reloc")
        .into_iter()
        .find(|r| r.id == waiting.id)
        .unwrap();
    assert_eq!(moved.cluster.as_deref(), Some("build-a"), "{moved:?}");
    assert_ne!(moved.state, RunState::Triggered, "{moved:?}");
    let pinned = last("pinned");
    assert_eq!(
        (pinned.state, pinned.cluster.as_deref()),
        (RunState::Triggered, Some("build-k"))
    );
    let kept = s
        .runs("reloc")
        .into_iter()
        .find(|r| r.id == early.id)
        .unwrap();
    assert_eq!(
        kept.cluster.as_deref(),
        Some("build-k"),
        "a pending run never moves"
    );
    // New runs of `reloc` go to build-a at once.
    fire_at("2026-03-02T00:08:00Z");
    pass();
    assert_eq!(last("reloc").cluster.as_deref(), Some("build-a"));
    // build-k is back at 00:09; its units come back 10 minutes later.
    s.clock.set(at("2026-03-02T00:09:00Z"));
    probe(true);
    pass();
    s.clock.set(at("2026-03-02T00:18:59Z"));
    pass();
    assert_eq!(planned("reloc").as_deref(), Some("build-a"), "not yet");
    s.clock.set(at("2026-03-02T00:19:00Z"));
    pass();
    assert_eq!(planned("reloc").as_deref(), Some("build-k"));
    // The override expires at 00:00:30 + 1h: back to the plan.
    assert_eq!(engine.overrides(s.clock.now()).len(), 1);
    s.clock.set(o.expires_at);
    pass();
    assert!(engine.overrides(s.clock.now()).is_empty());
    let base = engine.base_plan().unwrap();
    assert_eq!(
        planned("reloc"),
        Some(base.assignments["reloc"].cluster.clone())
    );
}

/// An executor that notes which thread each start ran on, each start
/// taking a while (a local cluster's spawn of a process).
struct ThreadsOfStarts {
    inner: Arc<SimulatedExecutor>,
    threads: std::sync::Mutex<Vec<std::thread::ThreadId>>,
    /// Whether the next start panics (once).
    panic_once: std::sync::atomic::AtomicBool,
    /// How many runs each call of `start_all_then` was given.
    together: std::sync::Mutex<Vec<usize>>,
}

impl Executor for ThreadsOfStarts {
    fn start(
        &self,
        run_id: &str,
        workload: &bosun_cluster::workload::Workload,
    ) -> Result<(), bosun_cluster::executor::ExecError> {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if self
            .panic_once
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            panic!("a start that panics");
        }
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.inner.start(run_id, workload)
    }
    fn start_all_then(
        &self,
        starts: Vec<(
            &str,
            &bosun_cluster::workload::Workload,
            bosun_cluster::executor::StartDone,
        )>,
    ) {
        self.together.lock().unwrap().push(starts.len());
        for (run_id, workload, done) in starts {
            done(self.start(run_id, workload));
        }
    }
    fn status(&self, run_id: &str) -> bosun_cluster::executor::RunStatus {
        self.inner.status(run_id)
    }
    fn abort(
        &self,
        run_id: &str,
        grace: std::time::Duration,
    ) -> bosun_cluster::executor::RunStatus {
        self.inner.abort(run_id, grace)
    }
    fn remove(&self, run_id: &str) -> Result<(), bosun_cluster::executor::ExecError> {
        self.inner.remove(run_id)
    }
    fn log_path(&self, run_id: &str) -> Option<std::path::PathBuf> {
        self.inner.log_path(run_id)
    }
}

/// A pass's starts on one cluster go to its executor together, a share of
/// them at a time (a local cluster sends them to its supervisor at once).
#[test]
fn a_passs_starts_on_one_cluster_go_to_its_executor_together() {
    let (_sim, starts) = start_n(40, false);
    let mut together = starts.together.lock().unwrap().clone();
    together.sort_unstable();
    assert_eq!(together.iter().sum::<usize>(), 40, "{together:?}");
    assert!(
        together.len() <= crate::controller::START_TASKS,
        "40 starts in {} calls: {together:?}",
        together.len()
    );
    // A pass with a few starts sends them in one call, not a call each.
    let (_sim, starts) = start_n(5, false);
    assert_eq!(*starts.together.lock().unwrap(), [5]);
}

/// The starts a pass admits go on a few blocking tasks, each taking its
/// share in turn: not a task (and soon a thread) each, which a burst of
/// starts made into hundreds of threads.
#[test]
fn a_passs_starts_share_a_few_blocking_threads() {
    let (_sim, starts) = start_n(40, false);
    let threads = starts.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 40, "every run was started");
    let distinct: std::collections::HashSet<_> = threads.into_iter().collect();
    assert!(
        distinct.len() <= crate::controller::START_TASKS,
        "40 starts on {} threads",
        distinct.len()
    );
}

/// A start that panics fails its run; the other starts of its share go on.
#[test]
fn a_start_that_panics_leaves_the_others_of_its_share_to_start() {
    let (s, starts) = start_n(40, true);
    assert_eq!(
        starts.threads.lock().unwrap().len(),
        39,
        "the others started"
    );
    // Every start came back to the controller, the panicked one's too.
    assert_eq!(s.starts_back(), 40);
    s.daemon.controller.pass();
    s.daemon.controller.flush();
    assert_eq!(s.runs_in(RunState::Error), 1);
    assert_eq!(s.runs_in(RunState::Pending), 39);
}

/// `n` periodics fired at once and a pass inside a runtime, on an executor
/// whose starts take 20 ms (the first panicking if `panic`); returns once
/// every start came back to the controller.
fn start_n(n: usize, panic: bool) -> (Sim, Arc<ThreadsOfStarts>) {
    use std::time::Duration;
    let jobs: String = (0..n)
        .map(|i| {
            format!("- name: j{i}\n  cron: \"*/2 * * * *\"\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n")
        })
        .collect();
    let starts = Arc::new(std::sync::Mutex::new(None::<Arc<ThreadsOfStarts>>));
    let t0: Timestamp = "2026-03-02T00:00:30Z".parse().unwrap();
    let s = sim_on(
        t0,
        "build_clusters:\n  default: {kind: local, max_concurrency: 100}\n",
        &format!("periodics:\n{jobs}"),
        |inner| {
            let e = Arc::new(ThreadsOfStarts {
                inner,
                threads: Default::default(),
                panic_once: panic.into(),
                together: Default::default(),
            });
            *starts.lock().unwrap() = Some(e.clone());
            e
        },
    );
    let starts = starts.lock().unwrap().clone().expect("the executor");
    // First seen at t0, each fires at its next tick.
    crate::periodics::fire(&s.daemon.shared, &s.daemon.controller);
    s.clock.set("2026-03-02T00:02:00Z".parse().unwrap());
    let (_, failed) = crate::periodics::fire(&s.daemon.shared, &s.daemon.controller);
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(s.runs_in(RunState::Triggered), n);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _in_runtime = rt.enter();
    s.daemon.controller.pass();
    assert_eq!(
        s.wait_for_starts(n, Duration::from_secs(10)),
        n,
        "every start came back"
    );
    // Outside the runtime again, a pass commits at once.
    drop(_in_runtime);
    drop(rt);
    (s, starts)
}
