//! Table tests of `decide`: every run state and policy.
//!
//! Each test builds an [`Observed`] by hand (a [`World`]): a snapshot loaded
//! from YAML held in memory, its clusters with simulated executors (never
//! called: deciding is pure), every cluster Reachable unless a test says
//! otherwise, and runs made from the snapshot's jobs as the store makes them.
//! The plan is then compared whole, as an [`Outcome`].

use std::collections::HashMap;

use bosun_cluster::executor::{Executor, SimulatedExecutor};
use bosun_cluster::kube::PodSettings;
use bosun_cluster::registry;
use bosun_config::source::MemFiles;
use bosun_config::LoadOptions;
use bosun_store::clock::ManualClock;
use bosun_store::template::RunTemplate;
use jiff::SignedDuration;

use super::*;
use crate::clusters::Clusters;
use crate::controller::Starting;

/// The configuration most tests decide in. Clusters: `default` (local,
/// unlimited), `small` (local, one slot), `kube` (fails over to `backup`),
/// `lonely` (no failover), `backup`, `vault` (trusted: `sync` only), `off`
/// (disabled); `mapped` and `guarded` are remapped by the scheduler.
const CONFIG: &str = r#"
plank:
  max_revivals: 2
  pod_running_timeout: 1h
  job_queue_capacities: {q: 1, zero: 0, free: -1}
scheduler:
  failover:
    mappings: {mapped: backup, guarded: vault}
disabled_clusters: [off]
build_clusters:
  default: {max_concurrency: 0}
  small: {max_concurrency: 1}
  mapped: {}
  guarded: {}
  kube: {kind: kubernetes, failover_to: backup}
  lonely: {kind: kubernetes, failover_to: vault}
  backup: {kind: kubernetes, max_concurrency: 3}
  vault:
    kind: kubernetes
    trusted: [{jobs: [sync]}]
  off: {}
periodics:
- name: a
  interval: 1h
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: b
  interval: 1h
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: limited
  interval: 1h
  max_concurrency: 1
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: queued
  interval: 1h
  job_queue_name: q
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: blocked
  interval: 1h
  job_queue_name: zero
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: unbounded
  interval: 1h
  job_queue_name: free
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: on-small
  cluster: small
  interval: 1h
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: on-mapped
  cluster: mapped
  interval: 1h
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: on-guarded
  cluster: guarded
  interval: 1h
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: sync
  cluster: guarded
  interval: 1h
  spec: {containers: [{image: busybox, command: ["true"]}]}
- name: on-kube
  cluster: kube
  interval: 1h
  spec: {containers: [{image: busybox}]}
- name: on-lonely
  cluster: lonely
  interval: 1h
  spec: {containers: [{image: busybox}]}
- name: on-backup
  cluster: backup
  interval: 1h
  spec: {containers: [{image: busybox}]}
"#;

/// The time of every pass.
/// A pod created `created` seconds ago, started by a node `scheduled`
/// seconds ago.
fn pod_pending(created: i64, scheduled: Option<i64>) -> RunStatus {
    RunStatus::PodPending {
        created: now() - secs(created),
        scheduled: scheduled.map(|s| now() - secs(s)),
    }
}

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

/// What a pass observed, built by hand.
struct World {
    o: Observed,
    /// The last build id given (runs are created in order).
    build: i64,
}

impl World {
    /// The world of [`CONFIG`].
    fn new() -> World {
        World::of(CONFIG)
    }

    /// The world of a configuration: its clusters, all Reachable but the
    /// disabled ones, each with an executor; no runs.
    fn of(yaml: &str) -> World {
        let mut fs = MemFiles::new();
        fs.file("/cfg/config.yaml", yaml);
        let opts = LoadOptions {
            config: Some("/cfg/config.yaml".into()),
            ..LoadOptions::default()
        };
        let loaded = bosun_config::load(&opts, &fs);
        let snapshot = loaded
            .snapshot
            .unwrap_or_else(|| panic!("the configuration loads: {:#?}", loaded.diagnostics));
        let defs = registry::clusters(&snapshot.config, &[], 4);
        let clock = Arc::new(ManualClock::new(now()));
        let executors = defs
            .keys()
            .map(|alias| {
                let e: Arc<dyn Executor> = Arc::new(SimulatedExecutor::new(clock.clone(), secs(5)));
                (alias.clone(), e)
            })
            .collect();
        let health = defs
            .keys()
            .map(|alias| {
                let disabled = snapshot.config.disabled_clusters.contains(alias);
                let h = if disabled {
                    Health::Disabled
                } else {
                    Health::Reachable
                };
                (alias.clone(), h)
            })
            .collect();
        let clusters = Clusters {
            defs,
            users: HashMap::new(),
            pods: PodSettings::of(&snapshot.config),
            executors,
        };
        World {
            o: Observed {
                now: now(),
                snapshot: Arc::new(snapshot),
                clusters: Arc::new(clusters),
                health,
                pending: Vec::new(),
                starting: Vec::new(),
                scheduling: Vec::new(),
                waiting: Vec::new(),
                aborts: HashSet::new(),
                unstarted_aborts: Vec::new(),
                specs: HashMap::new(),
                held_notes: HashMap::new(),
                placements: HashMap::new(),
                overlay: HashMap::new(),
                placement_change_at: None,
                unreported: false,
                replicated: false,
            },
            build: 0,
        }
    }

    /// A new run `id` of the periodic `job` in `state`, as the store makes
    /// it (its spec snapshot observed); a pending one runs on its configured
    /// cluster since 10 minutes ago.
    fn run(&mut self, id: &str, job: &str, state: RunState) -> Run {
        let snapshot = &self.o.snapshot;
        let p = snapshot
            .periodics
            .iter()
            .find(|p| p.base.name == job)
            .unwrap_or_else(|| panic!("no periodic {job}"));
        let new = RunTemplate::periodic(p, snapshot.pod_spec(p), snapshot.periodic_decoration(p))
            .run(None);
        let hash = new.spec.hash().to_string();
        let spec: SpecSnapshot = serde_json::from_str(new.spec.json()).unwrap();
        self.o.specs.entry(hash.clone()).or_insert(Arc::new(spec));
        self.build += 1;
        let created = now() - secs(3600) + secs(self.build);
        let mut run = new.into_run(id.to_string(), self.build, hash, created);
        run.state = state;
        if state == RunState::Pending {
            run.cluster = Some(run.configured_cluster.clone());
            run.pending_at = Some(now() - secs(600));
            run.description = "Job pending.".into();
        }
        run
    }

    /// Observes `run` pending on its cluster, its executor answering `status`.
    fn pending(&mut self, run: Run, status: Option<RunStatus>) -> Arc<Run> {
        let run = Arc::new(run);
        self.o.pending.push(PendingRun {
            cluster: cluster_of(&run).to_string(),
            run: run.clone(),
            status,
        });
        run
    }

    /// Observes `run` waiting to start (after those observed before).
    fn waiting(&mut self, run: Run) -> Arc<Run> {
        let run = Arc::new(run);
        self.o.waiting.push(run.clone());
        run
    }

    /// Observes `run` waiting for a cluster.
    fn scheduling(&mut self, run: Run) -> Arc<Run> {
        let run = Arc::new(run);
        self.o.scheduling.push(run.clone());
        run
    }

    /// Observes a start in flight.
    fn starting(&mut self, job: &str, cluster: &str, queue: Option<&str>) {
        self.o.starting.push(Starting {
            job: job.into(),
            cluster: cluster.into(),
            queue: queue.map(str::to_string),
        });
    }

    /// Requests the abort of `id`, a run not being started (`run`: its
    /// active run, if any).
    fn abort(&mut self, id: &str, run: Option<&Arc<Run>>) {
        self.o.aborts.insert(id.into());
        self.o.unstarted_aborts.push((id.into(), run.cloned()));
    }

    /// The spec snapshot of `run`, to change (before deciding).
    fn spec_mut(&mut self, run: &Run) -> &mut SpecSnapshot {
        Arc::get_mut(self.o.specs.get_mut(&run.spec_hash).expect("observed spec"))
            .expect("a spec only the world holds")
    }

    /// The plan of a pass now, under the configuration's limits.
    fn decide(&self) -> Plan {
        decide(&self.o, &limits(&self.o), now())
    }

    /// The plan's outcome, checking what every plan must hold.
    fn outcome(&self, plan: &Plan) -> Outcome {
        for (id, t) in plan.transitions.iter().chain(&plan.notes) {
            assert_eq!(t.at, now(), "{id}: decided now");
            assert_eq!(t.url, None, "{id}: no URL is decided");
        }
        for s in &plan.starts {
            let spec = self.o.spec(&s.run).expect("a started run's spec");
            assert!(Arc::ptr_eq(&s.spec, spec), "{}: its own spec", s.run.id);
        }
        Outcome {
            transitions: plan
                .transitions
                .iter()
                .map(|(id, t)| Moved {
                    id: id.clone(),
                    to: t.to,
                    why: t.description.clone(),
                    cluster: t.cluster.clone(),
                })
                .collect(),
            notes: plan
                .notes
                .iter()
                .inspect(|(_, t)| assert_eq!(t.cluster, None))
                .map(|(id, t)| (id.clone(), t.to, t.description.clone()))
                .collect(),
            stops: plan
                .stops
                .iter()
                .map(|s| (s.run.clone(), s.cluster.clone()))
                .collect(),
            revivals: plan
                .revivals
                .iter()
                .map(|r| {
                    (
                        r.run.id.clone(),
                        r.cluster.clone(),
                        r.why.clone(),
                        r.queue.clone(),
                    )
                })
                .collect(),
            starts: plan
                .starts
                .iter()
                .map(|s| (s.run.id.clone(), s.cluster.clone()))
                .collect(),
            aborts_taken: plan.aborts_taken.clone(),
        }
    }

    /// Decides, and the outcome.
    fn decided(&self) -> (Plan, Outcome) {
        let plan = self.decide();
        let outcome = self.outcome(&plan);
        (plan, outcome)
    }
}

/// A transition, as compared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Moved {
    id: String,
    to: RunState,
    why: String,
    cluster: Option<String>,
}

/// A plan, as compared: everything but the slot counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Outcome {
    transitions: Vec<Moved>,
    /// (run, state, description)
    notes: Vec<(String, RunState, String)>,
    /// (run, cluster)
    stops: Vec<(String, String)>,
    /// (run, cluster, why, queue)
    revivals: Vec<(String, String, String, Option<String>)>,
    /// (run, cluster)
    starts: Vec<(String, String)>,
    aborts_taken: Vec<String>,
}

/// Nothing decided.
fn nothing() -> Outcome {
    Outcome::default()
}

impl Outcome {
    fn to(mut self, id: &str, to: RunState, why: &str) -> Self {
        self.transitions.push(Moved {
            id: id.into(),
            to,
            why: why.into(),
            cluster: None,
        });
        self
    }

    fn scheduled(mut self, id: &str, cluster: &str) -> Self {
        self.transitions.push(Moved {
            id: id.into(),
            to: RunState::Triggered,
            why: format!("Job scheduled to cluster {cluster}."),
            cluster: Some(cluster.into()),
        });
        self
    }

    fn note(mut self, id: &str, why: &str) -> Self {
        self.notes
            .push((id.into(), RunState::Triggered, why.into()));
        self
    }

    fn stop(mut self, id: &str, cluster: &str) -> Self {
        self.stops.push((id.into(), cluster.into()));
        self
    }

    fn revival(mut self, id: &str, cluster: &str, why: &str, queue: Option<&str>) -> Self {
        self.revivals.push((
            id.into(),
            cluster.into(),
            why.into(),
            queue.map(str::to_string),
        ));
        self
    }

    fn start(mut self, id: &str, cluster: &str) -> Self {
        self.starts.push((id.into(), cluster.into()));
        self
    }

    fn taken(mut self, id: &str) -> Self {
        self.aborts_taken.push(id.into());
        self
    }
}

/// Counts by name, sorted (zero counts left out).
type Counts<K> = Vec<(K, u32)>;

/// Slots held, as `(total, by job, by cluster, by queue)`.
type Slots<K> = (u32, Counts<K>, Counts<K>, Counts<K>);

/// Slots held, as a test writes them.
type Held = Slots<&'static str>;

fn held(running: &Running) -> Slots<String> {
    let sorted = |m: &HashMap<String, u32>| {
        let mut v: Counts<String> = m
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect();
        v.sort();
        v
    };
    (
        running.total,
        sorted(&running.by_job),
        sorted(&running.by_cluster),
        sorted(&running.by_queue),
    )
}

fn assert_held(running: &Running, want: Held, row: &str) {
    let owned = |v: Counts<&str>| -> Counts<String> {
        v.into_iter().map(|(k, n)| (k.to_string(), n)).collect()
    };
    assert_eq!(
        held(running),
        (want.0, owned(want.1), owned(want.2), owned(want.3)),
        "{row}: slots held"
    );
}

// --- limits

#[test]
fn limits_are_plank_s_and_each_cluster_s() {
    let w = World::of(
        r#"
plank:
  max_concurrency: 5
  job_queue_capacities: {q: 2, free: -1}
build_clusters:
  default: {}
  small: {max_concurrency: 1}
  kube: {kind: kubernetes, max_concurrency: 3}
  open: {kind: kubernetes}
"#,
    );
    let want = Limits {
        global: 5,
        queues: HashMap::from([("q".into(), 2), ("free".into(), -1)]),
        cluster_slots: HashMap::from([
            // A local cluster without max_concurrency: the CPU count given.
            ("default".into(), 4),
            ("small".into(), 1),
            ("kube".into(), 3),
            ("open".into(), 0),
        ]),
    };
    assert_eq!(limits(&w.o), want);
    // No plank.max_concurrency: unlimited; a negative one (which validation
    // refuses) too. The implicit default cluster: the CPU count given.
    for max in [0, -1] {
        let mut w = World::of("{}");
        Arc::get_mut(&mut w.o.snapshot)
            .unwrap()
            .config
            .plank
            .max_concurrency = max;
        let want = Limits {
            global: 0,
            queues: HashMap::new(),
            cluster_slots: HashMap::from([("default".into(), 4)]),
        };
        assert_eq!(limits(&w.o), want, "max_concurrency {max}");
    }
}

// --- pending

/// A pending run of job `a` on `default`, pending for 10 minutes unless
/// `running_for` says otherwise.
struct PendingRow {
    name: &'static str,
    /// The job's own `decoration_config` timeouts, by field.
    own: &'static [(&'static str, &'static str)],
    status: Option<RunStatus>,
    pod_revival_count: u32,
    running_for: Option<i64>,
    abort: bool,
    want: Outcome,
    /// Slots it holds (its job's, `default`'s).
    holds: u32,
}

impl Default for PendingRow {
    fn default() -> Self {
        PendingRow {
            name: "",
            own: &[],
            status: Some(RunStatus::Running { pid: 7 }),
            pod_revival_count: 0,
            running_for: None,
            abort: false,
            want: nothing(),
            holds: 0,
        }
    }
}

/// On replicas, a local run the leader's executor does not know ran on a
/// replica that stopped leading: it ends `error`, saying so; a Kubernetes
/// run is not lost that way (the new leader finds its pod).
#[test]
fn a_local_run_of_a_replica_that_stopped_leading_ends_saying_so() {
    for (replicated, cluster, want) in [
        (false, "default", "executor lost the process"),
        (
            true,
            "default",
            "the replica that ran it on local cluster default stopped leading (or lost its process): a local run does not move to another replica",
        ),
        (true, "kube", "executor lost the process"),
    ] {
        let mut w = World::new();
        w.o.replicated = replicated;
        let mut run = w.run("p", "a", RunState::Pending);
        run.cluster = Some(cluster.into());
        w.pending(run, Some(RunStatus::Lost));
        let (_, outcome) = w.decided();
        assert_eq!(
            outcome,
            nothing().to("p", RunState::Error, want),
            "replicated {replicated}, cluster {cluster}"
        );
    }
}

#[test]
fn pending_runs() {
    use RunState::*;
    let rows = [
        PendingRow {
            name: "exited 0",
            status: Some(RunStatus::Exited { code: 0 }),
            want: nothing().to("p", Success, "Job succeeded."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "exited 3",
            status: Some(RunStatus::Exited { code: 3 }),
            want: nothing().to("p", Failure, "Job failed (exit code 3)."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "killed by a signal",
            status: Some(RunStatus::Exited { code: 137 }),
            want: nothing().to("p", Failure, "Job failed (exit code 137)."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "lost",
            status: Some(RunStatus::Lost),
            want: nothing().to("p", Error, "executor lost the process"),
            ..PendingRow::default()
        },
        PendingRow {
            name: "failed",
            status: Some(RunStatus::Failed("pod OOMKilled".into())),
            want: nothing().to("p", Error, "pod OOMKilled"),
            ..PendingRow::default()
        },
        PendingRow {
            name: "revivable, never revived",
            status: Some(RunStatus::Revivable("pod evicted".into())),
            want: nothing().revival("p", "default", "pod evicted", None),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "revivable, under max_revivals",
            status: Some(RunStatus::Revivable("node lost".into())),
            pod_revival_count: 1,
            want: nothing().revival("p", "default", "node lost", None),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "revivable, at max_revivals",
            status: Some(RunStatus::Revivable("node lost".into())),
            pod_revival_count: 2,
            want: nothing().to(
                "p",
                Error,
                "Job pod reached max revivals (2) after node lost.",
            ),
            ..PendingRow::default()
        },
        PendingRow {
            name: "revivable, past max_revivals",
            status: Some(RunStatus::Revivable("node lost".into())),
            pod_revival_count: 5,
            want: nothing().to(
                "p",
                Error,
                "Job pod reached max revivals (2) after node lost.",
            ),
            ..PendingRow::default()
        },
        PendingRow {
            name: "running",
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "running, just within the running timeout",
            running_for: Some(3599),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "running past the running timeout",
            running_for: Some(3601),
            want: nothing()
                .stop("p", "default")
                .to("p", Aborted, "Pod running timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "running past its job's own, shorter, running timeout",
            own: &[("pod_running_timeout", "10m")],
            running_for: Some(601),
            want: nothing()
                .stop("p", "default")
                .to("p", Aborted, "Pod running timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "running within its job's own running timeout",
            own: &[("pod_running_timeout", "10m")],
            running_for: Some(599),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "running past plank's timeout, within its job's own, longer, one",
            own: &[("pod_running_timeout", "2h")],
            running_for: Some(3601),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "running past its job's own, longer, running timeout",
            own: &[("pod_running_timeout", "2h")],
            running_for: Some(7200),
            want: nothing()
                .stop("p", "default")
                .to("p", Aborted, "Pod running timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod unscheduled within plank's default timeout (5m)",
            status: Some(pod_pending(299, None)),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod unscheduled for plank's default timeout (5m)",
            status: Some(pod_pending(300, None)),
            want: nothing()
                .stop("p", "default")
                .to("p", Error, "Pod scheduling timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod unscheduled past its job's own, shorter, timeout",
            own: &[("pod_unscheduled_timeout", "1m")],
            status: Some(pod_pending(60, None)),
            want: nothing()
                .stop("p", "default")
                .to("p", Error, "Pod scheduling timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod unscheduled past plank's timeout, within its job's own, longer, one",
            own: &[("pod_unscheduled_timeout", "20m")],
            status: Some(pod_pending(1000, None)),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod scheduled, pending within plank's default timeout (10m)",
            status: Some(pod_pending(3000, Some(599))),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod scheduled, pending for plank's default timeout (10m)",
            status: Some(pod_pending(3000, Some(600))),
            want: nothing()
                .stop("p", "default")
                .to("p", Error, "Pod pending timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod pending past its job's own, shorter, timeout",
            own: &[("pod_pending_timeout", "30s")],
            status: Some(pod_pending(31, Some(31))),
            want: nothing()
                .stop("p", "default")
                .to("p", Error, "Pod pending timeout."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod pending past plank's timeout, within its job's own, longer, one",
            own: &[("pod_pending_timeout", "1h")],
            status: Some(pod_pending(3000, Some(3000))),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "a pod pending is not timed out by the running timeout",
            status: Some(pod_pending(30, Some(30))),
            running_for: Some(7200),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "starting past the running timeout",
            status: Some(RunStatus::Starting),
            running_for: Some(7200),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "ending past the running timeout",
            status: Some(RunStatus::Ending),
            running_for: Some(7200),
            holds: 1,
            ..PendingRow::default()
        },
        PendingRow {
            name: "its cluster was removed",
            status: None,
            want: nothing().stop("p", "default").to(
                "p",
                Error,
                "build cluster default was removed",
            ),
            ..PendingRow::default()
        },
        PendingRow {
            name: "abort requested, running",
            abort: true,
            want: nothing()
                .taken("p")
                .stop("p", "default")
                .to("p", Aborted, "Run aborted."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "abort requested, its job just exited",
            status: Some(RunStatus::Exited { code: 0 }),
            abort: true,
            want: nothing()
                .taken("p")
                .stop("p", "default")
                .to("p", Aborted, "Run aborted."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "abort requested, past the running timeout",
            running_for: Some(7200),
            abort: true,
            want: nothing()
                .taken("p")
                .stop("p", "default")
                .to("p", Aborted, "Run aborted."),
            ..PendingRow::default()
        },
        PendingRow {
            name: "abort requested, revivable",
            status: Some(RunStatus::Revivable("pod evicted".into())),
            abort: true,
            want: nothing()
                .taken("p")
                .stop("p", "default")
                .to("p", Aborted, "Run aborted."),
            ..PendingRow::default()
        },
        // The removed cluster comes first; the request is left for a
        // later pass (which finds the run complete and drops it).
        PendingRow {
            name: "abort requested, its cluster removed",
            status: None,
            abort: true,
            want: nothing().stop("p", "default").to(
                "p",
                Error,
                "build cluster default was removed",
            ),
            ..PendingRow::default()
        },
    ];
    for row in rows {
        let mut w = World::new();
        let mut run = w.run("p", "a", Pending);
        if !row.own.is_empty() {
            let d: serde_json::Map<_, _> = row
                .own
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                .collect();
            w.spec_mut(&run).job.decoration_config =
                Some(serde_json::from_value(d.into()).unwrap());
        }
        run.pod_revival_count = row.pod_revival_count;
        if let Some(s) = row.running_for {
            run.pending_at = Some(now() - secs(s));
        }
        let run = w.pending(run, row.status.clone());
        if row.abort {
            w.abort("p", Some(&run));
        }
        let (plan, outcome) = w.decided();
        assert_eq!(outcome, row.want, "{}", row.name);
        let (job, cluster) = ("a", "default");
        let want: Held = match row.holds {
            0 => (0, vec![], vec![], vec![]),
            n => (n, vec![(job, n)], vec![(cluster, n)], vec![]),
        };
        assert_held(&plan.running, want, row.name);
        assert_eq!(plan.waiting, 0, "{}", row.name);
    }
}

#[test]
fn a_removed_cluster_s_run_is_stopped_on_it() {
    let mut w = World::new();
    let mut run = w.run("p", "a", RunState::Pending);
    run.cluster = Some("gone".into());
    w.pending(run, None);
    let (plan, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing()
            .stop("p", "gone")
            .to("p", RunState::Error, "build cluster gone was removed")
    );
    assert_held(&plan.running, (0, vec![], vec![], vec![]), "removed");
}

#[test]
fn decide_pending_alone() {
    let mut w = World::new();
    let run = w.run("p", "a", RunState::Pending);
    let p = PendingRun {
        run: Arc::new(run),
        cluster: "default".into(),
        status: Some(RunStatus::Exited { code: 0 }),
    };
    let mut plan = Plan::default();
    decide_pending(&w.o, &p, now(), &mut plan);
    assert_eq!(
        w.outcome(&plan),
        nothing().to("p", RunState::Success, "Job succeeded.")
    );
}

#[test]
fn max_revivals_defaults_to_3() {
    for (count, revived) in [(2, true), (3, false)] {
        let mut w = World::of("periodics: [{name: a, interval: 1h, spec: {containers: [{image: busybox, command: [\"true\"]}]}}]");
        let mut run = w.run("p", "a", RunState::Pending);
        run.pod_revival_count = count;
        w.pending(run, Some(RunStatus::Revivable("pod evicted".into())));
        let (_, outcome) = w.decided();
        let want = if revived {
            nothing().revival("p", "default", "pod evicted", None)
        } else {
            nothing().to(
                "p",
                RunState::Error,
                "Job pod reached max revivals (3) after pod evicted.",
            )
        };
        assert_eq!(outcome, want, "revived {count} times");
    }
}

#[test]
fn pending_runs_hold_their_queue_and_cluster_slots() {
    let mut w = World::new();
    let q = w.run("q1", "queued", RunState::Pending);
    w.pending(q, Some(RunStatus::Running { pid: 1 }));
    let mut s = w.run("s1", "on-small", RunState::Pending);
    s.cluster = Some("small".into());
    w.pending(s, Some(RunStatus::Starting));
    let done = w.run("d1", "a", RunState::Pending);
    w.pending(done, Some(RunStatus::Exited { code: 1 }));
    let (plan, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing().to("d1", RunState::Failure, "Job failed (exit code 1).")
    );
    assert_held(
        &plan.running,
        (
            2,
            vec![("on-small", 1), ("queued", 1)],
            vec![("default", 1), ("small", 1)],
            vec![("q", 1)],
        ),
        "pending",
    );
}

#[test]
fn a_revival_holds_its_slot_and_carries_its_queue() {
    let mut w = World::new();
    let q = w.run("q1", "queued", RunState::Pending);
    w.pending(q, Some(RunStatus::Revivable("pod evicted".into())));
    let (plan, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing().revival("q1", "default", "pod evicted", Some("q"))
    );
    // Its queue's slot is not held by the pass that decides the revival
    // (see `a_revival_holds_its_queue_slot_in_the_pass_that_decides_it`).
    assert_held(
        &plan.running,
        (1, vec![("queued", 1)], vec![("default", 1)], vec![]),
        "revival",
    );
}

/// The pass that decides a revival does not count it against its job
/// queue, so a waiting run of the same queue is admitted over the queue's
/// capacity: `act` then puts the revival in `starting` with its queue, and
/// the next pass counts both (2 runs of queue `q`, capacity 1). A pending
/// run that keeps running holds its queue's slot; so does the revival once
/// it is in flight.
#[test]
#[ignore = "decide.rs: a revival holds its cluster and job slots but not its queue's, so its queue is overfilled in the pass that decides it"]
fn a_revival_holds_its_queue_slot_in_the_pass_that_decides_it() {
    let mut w = World::new();
    let q = w.run("q1", "queued", RunState::Pending);
    w.pending(q, Some(RunStatus::Revivable("pod evicted".into())));
    let r = w.run("q2", "queued", RunState::Triggered);
    w.waiting(r);
    let (plan, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing().revival("q1", "default", "pod evicted", Some("q"))
    );
    assert_eq!(plan.running.by_queue.get("q"), Some(&1));
}

// --- aborts of runs not started

#[test]
fn unstarted_aborts() {
    use RunState::*;
    // (state of the active run (none: complete or unknown), decided,
    // outcome)
    let rows = [
        (
            Some(Triggered),
            true,
            nothing().taken("r").to("r", Aborted, "Run aborted."),
        ),
        (
            Some(Scheduling),
            true,
            nothing().taken("r").to("r", Aborted, "Run aborted."),
        ),
        (None, false, nothing().taken("r")),
        // Left to decide_pending.
        (Some(Pending), false, nothing()),
    ];
    for (state, decided, want) in rows {
        let mut w = World::new();
        let run = state.map(|s| w.run("r", "a", s));
        let mut plan = Plan::default();
        assert_eq!(
            decide_unstarted_abort("r", run.as_ref(), now(), &mut plan),
            decided,
            "{state:?}"
        );
        assert_eq!(w.outcome(&plan), want, "{state:?}");
        // And through decide: the same.
        let mut w = World::new();
        if let Some(run) = run {
            let run = Arc::new(run);
            w.abort("r", Some(&run));
        } else {
            w.abort("r", None);
        }
        let (_, outcome) = w.decided();
        assert_eq!(outcome, want, "{state:?} through decide");
    }
}

#[test]
fn an_aborted_waiting_run_is_decided_once() {
    use RunState::*;
    // Triggered: also observed waiting (it would start), with room to start.
    let mut w = World::new();
    let run = w.run("t", "a", Triggered);
    let run = w.waiting(run);
    w.abort("t", Some(&run));
    let (plan, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing().taken("t").to("t", Aborted, "Run aborted.")
    );
    assert_eq!(plan.waiting, 0);
    // Scheduling: also observed waiting for a cluster.
    let mut w = World::new();
    let run = w.run("s", "a", Scheduling);
    let run = w.scheduling(run);
    w.abort("s", Some(&run));
    let (_, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing().taken("s").to("s", Aborted, "Run aborted.")
    );
    // Pending: also in unstarted_aborts (observe lists every idle request).
    let mut w = World::new();
    let run = w.run("p", "a", Pending);
    let run = w.pending(run, Some(RunStatus::Running { pid: 1 }));
    w.abort("p", Some(&run));
    let (_, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing()
            .taken("p")
            .stop("p", "default")
            .to("p", Aborted, "Run aborted.")
    );
}

#[test]
fn a_waiting_run_whose_abort_is_requested_only_is_aborted() {
    // Requested but not among the unstarted aborts: decide_triggered ends it.
    let mut w = World::new();
    let run = w.run("t", "a", RunState::Triggered);
    w.waiting(run);
    w.o.aborts.insert("t".into());
    let (_, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing()
            .taken("t")
            .to("t", RunState::Aborted, "Run aborted.")
    );
}

// --- scheduling

#[test]
fn scheduling() {
    // (job, the cluster it is scheduled to)
    let rows = [
        // No mapping: its own cluster.
        ("a", "default"),
        ("on-small", "small"),
        // A failover mapping.
        ("on-mapped", "backup"),
        // A mapping onto a trusted cluster that does not admit the job.
        ("on-guarded", "guarded"),
        // One that admits it.
        ("sync", "vault"),
    ];
    for (job, to) in rows {
        let mut w = World::new();
        let run = w.run("s", job, RunState::Scheduling);
        w.scheduling(run);
        let (plan, outcome) = w.decided();
        assert_eq!(outcome, nothing().scheduled("s", to), "{job}");
        assert_eq!(plan.waiting, 0, "{job}: it waits to start next pass");
        assert_held(&plan.running, (0, vec![], vec![], vec![]), job);
    }
}

#[test]
fn scheduling_follows_the_configured_cluster_not_an_earlier_choice() {
    // Prow maps the configured cluster unconditionally.
    let mut w = World::new();
    let mut run = w.run("s", "on-mapped", RunState::Scheduling);
    run.cluster = Some("small".into());
    let run = w.scheduling(run);
    let mut plan = Plan::default();
    decide_scheduling(&w.o, &run, now(), &mut plan);
    assert_eq!(w.outcome(&plan), nothing().scheduled("s", "backup"));
}

// --- triggered

/// A triggered run `t` of `job`, with the world changed by `setup`.
struct TriggeredRow {
    name: &'static str,
    job: &'static str,
    setup: fn(&mut World, &mut Run),
    want: Outcome,
}

fn unreachable() -> Health {
    Health::Unreachable("connection refused".into())
}

#[test]
fn triggered_runs() {
    use RunState::*;
    let rows = [
        TriggeredRow {
            name: "reachable: starts on its cluster",
            job: "a",
            setup: |_, _| {},
            want: nothing().start("t", "default"),
        },
        TriggeredRow {
            name: "a kubernetes cluster",
            job: "on-kube",
            setup: |_, _| {},
            want: nothing().start("t", "kube"),
        },
        TriggeredRow {
            name: "its scheduled cluster, not its configured one",
            job: "on-mapped",
            setup: |_, r| r.cluster = Some("backup".into()),
            want: nothing().start("t", "backup"),
        },
        TriggeredRow {
            name: "abort requested",
            job: "a",
            setup: |w, _| {
                w.o.aborts.insert("t".into());
            },
            want: nothing().taken("t").to("t", Aborted, "Run aborted."),
        },
        TriggeredRow {
            name: "disabled cluster",
            job: "a",
            setup: |_, r| r.configured_cluster = "off".into(),
            want: nothing().to("t", Error, "Terminal error: cluster \"off\" is disabled."),
        },
        TriggeredRow {
            name: "scheduled to a disabled cluster",
            job: "a",
            setup: |_, r| r.cluster = Some("off".into()),
            want: nothing().to("t", Error, "Terminal error: cluster \"off\" is disabled."),
        },
        TriggeredRow {
            name: "unknown cluster",
            job: "a",
            setup: |_, r| r.configured_cluster = "nowhere".into(),
            want: nothing().to(
                "t",
                Error,
                "Terminal error: no build client found for cluster \"nowhere\".",
            ),
        },
        TriggeredRow {
            name: "unreachable, no failover",
            job: "on-backup",
            setup: |w, _| {
                w.o.health.insert("backup".into(), unreachable());
            },
            want: nothing().note("t", "Waiting: build cluster backup is Unreachable."),
        },
        TriggeredRow {
            name: "missing permissions, no failover",
            job: "on-backup",
            setup: |w, _| {
                w.o.health.insert(
                    "backup".into(),
                    Health::MissingPermissions(vec!["create pods".into()]),
                );
            },
            want: nothing().note("t", "Waiting: build cluster backup is MissingPermissions."),
        },
        TriggeredRow {
            name: "unreachable, its description already says so",
            job: "on-backup",
            setup: |w, r| {
                w.o.health.insert("backup".into(), unreachable());
                r.description = "Waiting: build cluster backup is Unreachable.".into();
            },
            want: nothing(),
        },
        TriggeredRow {
            name: "unreachable, the same note held",
            job: "on-backup",
            setup: |w, _| {
                w.o.health.insert("backup".into(), unreachable());
                w.o.held_notes.insert(
                    "t".into(),
                    "Waiting: build cluster backup is Unreachable.".into(),
                );
            },
            want: nothing(),
        },
        TriggeredRow {
            name: "unreachable, another note held",
            job: "on-backup",
            setup: |w, r| {
                w.o.health.insert("backup".into(), unreachable());
                r.description = "Job triggered.".into();
                w.o.held_notes.insert(
                    "t".into(),
                    "Waiting: build cluster backup is MissingPermissions.".into(),
                );
            },
            want: nothing().note("t", "Waiting: build cluster backup is Unreachable."),
        },
        TriggeredRow {
            name: "unreachable, a reachable failover_to",
            job: "on-kube",
            setup: |w, _| {
                w.o.health.insert("kube".into(), unreachable());
            },
            want: nothing().start("t", "backup"),
        },
        TriggeredRow {
            name: "missing permissions, a reachable failover_to",
            job: "on-kube",
            setup: |w, _| {
                w.o.health
                    .insert("kube".into(), Health::MissingPermissions(vec![]));
            },
            want: nothing().start("t", "backup"),
        },
        TriggeredRow {
            name: "unreachable, its failover_to unreachable too",
            job: "on-kube",
            setup: |w, _| {
                w.o.health.insert("kube".into(), unreachable());
                w.o.health.insert("backup".into(), unreachable());
            },
            want: nothing().note("t", "Waiting: build cluster kube is Unreachable."),
        },
        TriggeredRow {
            name: "unreachable, its failover_to a trusted cluster that does not admit it",
            job: "on-lonely",
            setup: |w, _| {
                w.o.health.insert("lonely".into(), unreachable());
            },
            want: nothing().note("t", "Waiting: build cluster lonely is Unreachable."),
        },
        TriggeredRow {
            name: "no executor",
            job: "a",
            setup: |w, _| {
                Arc::get_mut(&mut w.o.clusters)
                    .unwrap()
                    .executors
                    .remove("default");
            },
            want: nothing().to(
                "t",
                Error,
                "Terminal error: cluster \"default\" has no executor (see the daemon's log).",
            ),
        },
        TriggeredRow {
            name: "no executor on its failover cluster",
            job: "on-kube",
            setup: |w, _| {
                w.o.health.insert("kube".into(), unreachable());
                Arc::get_mut(&mut w.o.clusters)
                    .unwrap()
                    .executors
                    .remove("backup");
            },
            want: nothing().to(
                "t",
                Error,
                "Terminal error: cluster \"backup\" has no executor (see the daemon's log).",
            ),
        },
        TriggeredRow {
            name: "missing spec",
            job: "a",
            setup: |w, _| w.o.specs.clear(),
            want: nothing().to("t", Error, "Terminal error: the run's job spec is missing."),
        },
        TriggeredRow {
            name: "another agent",
            job: "a",
            setup: |w, r| w.spec_mut(r).job.agent = "jenkins".into(),
            want: nothing().to("t", Error, "agent jenkins is not supported"),
        },
        TriggeredRow {
            name: "decorated",
            job: "a",
            setup: |w, r| {
                let spec = w.spec_mut(r);
                spec.job.decorate = Some(true);
                spec.decoration = Some(Default::default());
            },
            want: nothing().start("t", "default"),
        },
        TriggeredRow {
            name: "decorated, created without its decoration config",
            job: "a",
            setup: |w, r| w.spec_mut(r).job.decorate = Some(true),
            want: nothing().to(
                "t",
                Error,
                "Terminal error: the run carries no decoration config (it was created by an earlier bosun); trigger the job again.",
            ),
        },
        TriggeredRow {
            name: "a pipeline job (no pod spec)",
            job: "a",
            setup: |w, r| {
                let spec = w.spec_mut(r);
                spec.job.agent = "tekton-pipeline".into();
                spec.pod_spec = None;
            },
            want: nothing().start("t", "default"),
        },
        TriggeredRow {
            name: "decorate: false",
            job: "a",
            setup: |w, r| w.spec_mut(r).job.decorate = Some(false),
            want: nothing().start("t", "default"),
        },
        TriggeredRow {
            name: "no pod spec",
            job: "a",
            setup: |w, r| w.spec_mut(r).pod_spec = None,
            want: nothing().to("t", Error, "Terminal error: the job has no pod spec."),
        },
    ];
    for row in rows {
        let mut w = World::new();
        let mut run = w.run("t", row.job, Triggered);
        (row.setup)(&mut w, &mut run);
        w.waiting(run);
        let (plan, outcome) = w.decided();
        assert_eq!(outcome, row.want, "{}", row.name);
        assert_eq!(
            plan.waiting,
            row.want.starts.len(),
            "{}: candidates",
            row.name
        );
        assert_held(&plan.running, (0, vec![], vec![], vec![]), row.name);
    }
}

#[test]
fn decide_triggered_alone() {
    let mut w = World::new();
    let run = Arc::new(w.run("t", "queued", RunState::Triggered));
    let mut plan = Plan::default();
    let (waiting, admitted) = decide_triggered(&w.o, &run, now(), &mut plan).expect("a candidate");
    assert_eq!(
        waiting,
        Waiting {
            id: "t".into(),
            job: "queued".into(),
            max_concurrency: 0,
            queue: Some("q".into()),
            cluster: "default".into(),
        }
    );
    assert!(Arc::ptr_eq(&admitted.run, &run));
    assert_eq!(admitted.cluster, "default");
    assert_eq!(w.outcome(&plan), nothing());
    // A failover: the candidate waits for its failover cluster's slots.
    let mut w = World::new();
    w.o.health.insert("kube".into(), unreachable());
    let run = Arc::new(w.run("k", "on-kube", RunState::Triggered));
    let (waiting, admitted) = decide_triggered(&w.o, &run, now(), &mut plan).expect("a candidate");
    assert_eq!(waiting.cluster, "backup");
    assert_eq!(admitted.cluster, "backup");
}

// --- admission

/// Waiting runs `(id, job)` in order, with the world changed by `setup`.
struct AdmitRow {
    name: &'static str,
    config: Option<&'static str>,
    setup: fn(&mut World),
    waiting: &'static [(&'static str, &'static str)],
    /// The runs started, with their clusters.
    starts: &'static [(&'static str, &'static str)],
    /// The runs that end (nothing else moves).
    ended: &'static [&'static str],
}

impl Default for AdmitRow {
    fn default() -> Self {
        AdmitRow {
            name: "",
            config: None,
            setup: |_| {},
            waiting: &[],
            starts: &[],
            ended: &[],
        }
    }
}

/// [`CONFIG`] with `plank.max_concurrency: 2`.
fn with_global_2() -> String {
    CONFIG.replace("plank:\n", "plank:\n  max_concurrency: 2\n")
}

/// A pending run `id` of `job` on its configured cluster, its executor
/// answering `status`.
fn pend(w: &mut World, id: &str, job: &str, status: RunStatus) {
    let run = w.run(id, job, RunState::Pending);
    w.pending(run, Some(status));
}

#[test]
fn admission() {
    let rows = [
        AdmitRow {
            name: "no limits",
            waiting: &[("1", "a"), ("2", "a"), ("3", "b")],
            starts: &[("1", "default"), ("2", "default"), ("3", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "plank.max_concurrency, oldest first",
            config: Some("global 2"),
            waiting: &[("1", "a"), ("2", "b"), ("3", "a")],
            starts: &[("1", "default"), ("2", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "plank.max_concurrency, a pending run running",
            config: Some("global 2"),
            setup: |w| pend(w, "p", "b", RunStatus::Running { pid: 1 }),
            waiting: &[("1", "a"), ("2", "a")],
            starts: &[("1", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "plank.max_concurrency, a pending run starting and one ending",
            config: Some("global 2"),
            setup: |w| {
                pend(w, "p", "b", RunStatus::Starting);
                pend(w, "e", "b", RunStatus::Ending);
            },
            waiting: &[("1", "a")],
            starts: &[],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "plank.max_concurrency, a pending run being revived",
            config: Some("global 2"),
            setup: |w| pend(w, "p", "b", RunStatus::Revivable("pod evicted".into())),
            waiting: &[("1", "a"), ("2", "a")],
            starts: &[("1", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "plank.max_concurrency, pending runs that ended free their slots",
            config: Some("global 2"),
            setup: |w| {
                pend(w, "p", "b", RunStatus::Exited { code: 0 });
                pend(w, "l", "b", RunStatus::Lost);
            },
            waiting: &[("1", "a"), ("2", "a")],
            starts: &[("1", "default"), ("2", "default")],
            ended: &["p", "l"],
        },
        AdmitRow {
            name: "plank.max_concurrency, a start in flight",
            config: Some("global 2"),
            setup: |w| w.starting("b", "default", None),
            waiting: &[("1", "a"), ("2", "a")],
            starts: &[("1", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a job's max_concurrency, first in first out",
            waiting: &[("1", "limited"), ("2", "limited"), ("3", "a")],
            starts: &[("1", "default"), ("3", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a job's max_concurrency, a pending run of the job",
            setup: |w| pend(w, "p", "limited", RunStatus::Running { pid: 1 }),
            waiting: &[("1", "limited"), ("2", "a")],
            starts: &[("2", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a job's max_concurrency, a start of the job in flight",
            setup: |w| w.starting("limited", "default", None),
            waiting: &[("1", "limited"), ("2", "a")],
            starts: &[("2", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a job's max_concurrency, a start of another job in flight",
            setup: |w| w.starting("a", "default", None),
            waiting: &[("1", "limited")],
            starts: &[("1", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a queue's capacity",
            waiting: &[("1", "queued"), ("2", "queued"), ("3", "a")],
            starts: &[("1", "default"), ("3", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a queue's capacity, a pending run of the queue",
            setup: |w| pend(w, "p", "queued", RunStatus::Running { pid: 1 }),
            waiting: &[("1", "queued"), ("2", "a")],
            starts: &[("2", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a queue's capacity, a start in the queue in flight",
            setup: |w| w.starting("other", "default", Some("q")),
            waiting: &[("1", "queued")],
            starts: &[],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a queue of capacity 0 and an unlimited one",
            waiting: &[
                ("1", "blocked"),
                ("2", "unbounded"),
                ("3", "unbounded"),
                ("4", "unbounded"),
            ],
            starts: &[("2", "default"), ("3", "default"), ("4", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a local cluster's slots",
            waiting: &[("1", "on-small"), ("2", "on-small"), ("3", "a")],
            starts: &[("1", "small"), ("3", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a local cluster's slots, a pending run on it",
            setup: |w| {
                let mut run = w.run("p", "a", RunState::Pending);
                run.cluster = Some("small".into());
                w.pending(run, Some(RunStatus::Running { pid: 1 }));
            },
            waiting: &[("1", "on-small"), ("2", "a")],
            starts: &[("2", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a local cluster's slots, a start on it in flight",
            setup: |w| w.starting("a", "small", None),
            waiting: &[("1", "on-small")],
            starts: &[],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "a kubernetes cluster's max_concurrency",
            waiting: &[
                ("1", "on-backup"),
                ("2", "on-backup"),
                ("3", "on-backup"),
                ("4", "on-backup"),
            ],
            starts: &[("1", "backup"), ("2", "backup"), ("3", "backup")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "failover runs take their failover cluster's slots",
            setup: |w| {
                w.o.health.insert("kube".into(), unreachable());
                w.starting("b", "backup", None);
            },
            waiting: &[("1", "on-kube"), ("2", "on-backup"), ("3", "on-kube")],
            starts: &[("1", "backup"), ("2", "backup")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "first in first out across clusters",
            config: Some("global 2"),
            waiting: &[("1", "on-small"), ("2", "on-small"), ("3", "a"), ("4", "a")],
            starts: &[("1", "small"), ("3", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "first in first out across clusters, a full cluster skipped",
            config: Some("global 2"),
            setup: |w| w.starting("b", "small", None),
            waiting: &[("1", "on-small"), ("2", "a"), ("3", "on-kube"), ("4", "a")],
            starts: &[("2", "default")],
            ..AdmitRow::default()
        },
        AdmitRow {
            name: "runs that end this pass take no slot",
            config: Some("global 2"),
            setup: |w| {
                let mut run = w.run("x", "a", RunState::Triggered);
                run.configured_cluster = "nowhere".into();
                w.waiting(run);
            },
            waiting: &[("1", "a"), ("2", "a"), ("3", "a")],
            starts: &[("1", "default"), ("2", "default")],
            ended: &["x"],
        },
    ];
    for row in rows {
        let mut w = match row.config {
            Some("global 2") => World::of(&with_global_2()),
            Some(other) => panic!("unknown config {other}"),
            None => World::new(),
        };
        (row.setup)(&mut w);
        for (id, job) in row.waiting {
            let run = w.run(id, job, RunState::Triggered);
            w.waiting(run);
        }
        let plan = w.decide();
        let outcome = w.outcome(&plan);
        let starts: Vec<(String, String)> = row
            .starts
            .iter()
            .map(|(id, c)| (id.to_string(), c.to_string()))
            .collect();
        assert_eq!(outcome.starts, starts, "{}", row.name);
        let ended: Vec<&str> = outcome.transitions.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ended, row.ended, "{}", row.name);
        assert_eq!(outcome.notes, vec![], "{}", row.name);
        assert_eq!(outcome.stops, vec![], "{}", row.name);
        assert_eq!(outcome.aborts_taken, Vec::<String>::new(), "{}", row.name);
        assert_eq!(
            outcome.revivals.len(),
            w.o.pending
                .iter()
                .filter(|p| matches!(p.status, Some(RunStatus::Revivable(_))))
                .count(),
            "{}",
            row.name
        );
        assert_eq!(plan.waiting, row.waiting.len(), "{}: candidates", row.name);
    }
}

#[test]
fn admission_counts_slots_for_the_log() {
    let mut w = World::of(&with_global_2());
    pend(&mut w, "p", "queued", RunStatus::Running { pid: 1 });
    w.starting("limited", "small", None);
    for (id, job) in [("1", "a"), ("2", "a")] {
        let run = w.run(id, job, RunState::Triggered);
        w.waiting(run);
    }
    let plan = w.decide();
    // Runs admitted now are not counted: they hold their slots once started.
    assert_held(
        &plan.running,
        (
            2,
            vec![("limited", 1), ("queued", 1)],
            vec![("default", 1), ("small", 1)],
            vec![("q", 1)],
        ),
        "slots",
    );
    assert_eq!(plan.waiting, 2);
    assert!(plan.starts.is_empty());
}

#[test]
fn a_whole_pass() {
    use RunState::*;
    let mut w = World::of(&with_global_2());
    pend(&mut w, "p1", "a", RunStatus::Exited { code: 0 });
    pend(&mut w, "p2", "limited", RunStatus::Running { pid: 2 });
    let aborted = w.run("t0", "a", Triggered);
    let aborted = w.waiting(aborted);
    w.abort("t0", Some(&aborted));
    w.abort("gone", None);
    let s = w.run("s1", "on-mapped", Scheduling);
    w.scheduling(s);
    for (id, job) in [("t1", "limited"), ("t2", "b"), ("t3", "a")] {
        let run = w.run(id, job, Triggered);
        w.waiting(run);
    }
    let (plan, outcome) = w.decided();
    assert_eq!(
        outcome,
        nothing()
            .to("p1", Success, "Job succeeded.")
            .taken("t0")
            .to("t0", Aborted, "Run aborted.")
            .taken("gone")
            .scheduled("s1", "backup")
            // t1's job is at its max_concurrency; t2 takes the last slot.
            .start("t2", "default")
    );
    assert_eq!(plan.waiting, 3);
}

#[test]
fn a_plan_asks_for_a_pass_when_its_earliest_timeout_runs_out() {
    use RunState::*;
    let mut w = World::new();
    // Unscheduled for 100 s: plank's 5 m runs out in 200 s.
    let a = w.run("a", "a", Pending);
    w.pending(a, Some(pod_pending(100, None)));
    // Running for 30 min under plank's 1 h here: 30 min to go.
    let mut b = w.run("b", "a", Pending);
    b.pending_at = Some(now() - secs(1800));
    w.pending(b, Some(RunStatus::Running { pid: 7 }));
    let (plan, _) = w.decided();
    assert_eq!(plan.wake_at, Some(now() + secs(200)));
    // Nothing timed: no instant asked for.
    let mut w = World::new();
    let c = w.run("c", "a", Pending);
    w.pending(c, Some(RunStatus::Starting));
    let (plan, _) = w.decided();
    assert_eq!(plan.wake_at, None);
}

#[test]
fn a_plan_asks_for_a_pass_when_the_dispatchers_plan_changes_by_the_clock() {
    use RunState::*;
    let mut w = World::new();
    let a = w.run("a", "a", Pending);
    w.pending(a, Some(pod_pending(100, None)));
    // An override expires in 60 s, before plank's timeout in 200 s.
    w.o.placement_change_at = Some(now() + secs(60));
    let (plan, _) = w.decided();
    assert_eq!(plan.wake_at, Some(now() + secs(60)));
    // Later than the timeout: the timeout comes first.
    w.o.placement_change_at = Some(now() + secs(600));
    let (plan, _) = w.decided();
    assert_eq!(plan.wake_at, Some(now() + secs(200)));
}

#[test]
fn a_plan_polls_only_while_a_pending_run_may_change_unreported() {
    use RunState::*;
    let mut w = World::new();
    let a = w.run("a", "a", Pending);
    w.pending(a, Some(RunStatus::Running { pid: 7 }));
    let (plan, _) = w.decided();
    assert!(!plan.poll, "every change is reported: no poll");
    w.o.unreported = true;
    let (plan, _) = w.decided();
    assert!(plan.poll);
}
