//! Run inserts into the SQLite store, as the daemon makes them: 10,000 runs
//! created by 8 threads at once (each waits for its commit), timed end to end.
//!
//! `cargo run --release -p bosun-store --example insert_bench [N] [THREADS]`
//!
//! With `BOSUN_BENCH_LIFECYCLE=1`, each run is also moved to `pending` and
//! then `success` (three commits' worth of work per run, as a run costs the
//! daemon). `BOSUN_BENCH_PAGE_SIZE=N` creates the database with that page
//! size. `BOSUN_BENCH_POLICY=silent` installs a report policy that reports
//! nothing, `BOSUN_BENCH_POLICY=status` one that queues a commit status per
//! change (in the change's transaction). `BOSUN_BENCH_PRESUBMIT=1` makes
//! presubmits, each with refs naming a pull, instead of a periodic's runs.
//! Prints the process's CPU time too (the writer's, mostly).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bosun_config::types::JobType;
use bosun_store::sqlite::SqliteStore;
use bosun_store::{NewReport, NewRun, ReportKind, ReportPolicy, Run, RunState, Store, Transition};
use jiff::Timestamp;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let threads: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(8);
    let lifecycle = std::env::var_os("BOSUN_BENCH_LIFECYCLE").is_some();
    let presubmit = std::env::var_os("BOSUN_BENCH_PRESUBMIT").is_some();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bosun.db");
    if let Ok(size) = std::env::var("BOSUN_BENCH_PAGE_SIZE") {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(&format!("PRAGMA page_size = {size}; VACUUM;"))
            .unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let policy = std::env::var("BOSUN_BENCH_POLICY").ok();
    match policy.as_deref() {
        None => {}
        Some("silent") => store.set_report_policy(Arc::new(Silent)).unwrap(),
        Some("status") => store.set_report_policy(Arc::new(Statuses)).unwrap(),
        Some(other) => panic!("BOSUN_BENCH_POLICY: silent or status, not {other}"),
    }
    let cpu0 = cpu_seconds();
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let store = store.clone();
            let next = next.clone();
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let mut new = NewRun {
                        job: "true".into(),
                        job_type: JobType::Periodic,
                        periodic: Some("true".into()),
                        configured_cluster: "default".into(),
                        state: RunState::Triggered,
                        refs: None,
                        extra_refs: vec![],
                        labels: BTreeMap::from([
                            ("created-by-prow".to_string(), "true".to_string()),
                            ("prow.k8s.io/job".to_string(), "true".to_string()),
                            ("prow.k8s.io/type".to_string(), "periodic".to_string()),
                        ]).into(),
                        annotations: BTreeMap::from([(
                            "prow.k8s.io/job".to_string(),
                            "true".to_string(),
                        )]).into(),
                        spec: serde_json::json!({"job": {"name": "true"}, "pod_spec": {"containers": [{"image": "x", "command": ["/bin/true"]}]}}).into(),
                        scheduled_at: None,
                        attempt: 0,
                        description: "Job triggered.".into(),
                    };
                    if presubmit {
                        new.job = "pre".into();
                        new.job_type = JobType::Presubmit;
                        new.periodic = None;
                        new.refs = Some(
                            serde_json::from_value(serde_json::json!({
                                "org": "acme", "repo": "widgets", "base_ref": "main",
                                "base_sha": "b", "pulls": [{"number": i % 100, "author": "a", "sha": "s"}],
                            }))
                            .unwrap(),
                        );
                    }
                    let run = store.create_run(new, Timestamp::now()).unwrap();
                    if lifecycle {
                        let id = &run.run().id;
                        let mut t = Transition::to(RunState::Pending, Timestamp::now(), "Job triggered.");
                        t.cluster = Some("default".into());
                        store.transition(id, t).unwrap();
                        let t = Transition::to(RunState::Success, Timestamp::now(), "Job succeeded.");
                        store.transition(id, t).unwrap();
                    }
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let took = t0.elapsed();
    println!(
        "{n} run {} by {threads} threads{} in {:.3} s = {:.0}/s; CPU {:.0} us per run",
        if lifecycle { "lifecycles" } else { "inserts" },
        policy.map(|p| format!(" (policy {p})")).unwrap_or_default(),
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        (cpu_seconds() - cpu0) * 1e6 / n as f64,
    );
}

/// This process's CPU time (user + system), in seconds.
fn cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// A report policy that reports nothing.
struct Silent;

impl ReportPolicy for Silent {
    fn reports(&self, _: &Run, _: Option<RunState>) -> Vec<NewReport> {
        Vec::new()
    }
}

/// A report policy as a presubmit's would be: a commit status per change,
/// keyed by the run (one context of one commit), its version the change's
/// rank in the run's life.
struct Statuses;

impl ReportPolicy for Statuses {
    fn reports(&self, run: &Run, _: Option<RunState>) -> Vec<NewReport> {
        let version = match run.state {
            RunState::Scheduling | RunState::Triggered => 1,
            RunState::Pending => 2,
            _ => 3,
        };
        vec![NewReport {
            key: format!("status:github:acme/widgets:{}:ci/{}", run.id, run.job),
            kind: ReportKind::Status,
            run_id: Some(run.id.clone()),
            version,
            payload: serde_json::json!({
                "state": run.state.as_str(),
                "description": run.description,
                "target_url": format!("https://bosun.example/runs/{}", run.id),
            }),
            created_at: Timestamp::now(),
        }]
    }
}
