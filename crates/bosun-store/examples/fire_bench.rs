//! The store's side of many periodics due at once: `commit_fires` of N fires
//! (one run, one `run` outcome and the schedule state each), against a SQLite
//! store already holding one completed run per periodic, as the scheduler
//! commits them when N periodics share a due second. Prints the time from the
//! call to each fire's commit (the observer sees the run) and the call's total.
//!
//! With `FIRE_BENCH_AHEAD=1`, the fires after the seeding round are prepared
//! a second ahead (`prepare_fires`) and the commit is `commit_prepared`.
//!
//! `cargo run --release -p bosun-store --example fire_bench [N] [ROUNDS]`

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bosun_config::types::JobType;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{
    Fire, NewRun, PeriodicState, Run, RunState, Spec, Store, TickOutcome, Transition,
    TransitionObserver,
};
use jiff::{SignedDuration, Timestamp};

/// Records when each run's commit was observed.
#[derive(Default)]
struct Seen(Mutex<Vec<Instant>>);

impl TransitionObserver for Seen {
    fn on_transition(&self, _run: &Run, from: Option<RunState>) {
        if from.is_none() {
            self.0.lock().unwrap().push(Instant::now());
        }
    }
}

/// Names in no particular order (as due periodics reach the store): the
/// number is a mix of the index.
fn template(i: usize, spec: &Spec) -> NewRun {
    let mut x = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let job = format!("ci-kubernetes-e2e-gce-periodic-{:016x}", x ^ (x >> 31));
    NewRun {
        job: job.clone(),
        job_type: JobType::Periodic,
        periodic: Some(job.clone()),
        configured_cluster: "default".into(),
        state: RunState::Triggered,
        refs: None,
        extra_refs: vec![],
        labels: BTreeMap::from([
            ("created-by-prow".to_string(), "true".to_string()),
            ("prow.k8s.io/job".to_string(), job.clone()),
            ("prow.k8s.io/type".to_string(), "periodic".to_string()),
            ("preset-service-account".to_string(), "true".to_string()),
            ("preset-k8s-ssh".to_string(), "true".to_string()),
        ])
        .into(),
        annotations: BTreeMap::from([
            ("prow.k8s.io/job".to_string(), job),
            (
                "testgrid-dashboards".to_string(),
                "sig-release-master".to_string(),
            ),
        ])
        .into(),
        spec: spec.clone(),
        scheduled_at: None,
        attempt: 0,
        description: "Job triggered.".into(),
    }
}

fn fires(n: usize, spec: &Spec, tick: Timestamp) -> Vec<Fire> {
    (0..n)
        .map(|i| {
            let mut run = template(i, spec);
            run.scheduled_at = Some(tick);
            let periodic = run.periodic.clone().unwrap();
            Fire {
                runs: vec![run],
                outcomes: vec![TickOutcome {
                    periodic: periodic.clone(),
                    first_tick: tick,
                    last_tick: tick,
                    count: 1,
                    outcome: "run".into(),
                    run_id: None,
                    recorded_at: tick,
                }],
                state: PeriodicState {
                    periodic,
                    schedule_hash: "h".into(),
                    first_seen: Timestamp::UNIX_EPOCH,
                    last_tick: Some(tick),
                    paused: false,
                    queued: None,
                },
            }
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let rounds: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let store = SqliteStore::open_with(
        dir.path().join("bosun.db"),
        SqliteOptions {
            max_batch: std::env::var("FIRE_BENCH_MAX_BATCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(SqliteOptions::default().max_batch),
            ..SqliteOptions::default()
        },
        Some(seen.clone()),
    )
    .unwrap();
    if let Ok(sql) = std::env::var("FIRE_BENCH_SQL") {
        store.execute_raw(&sql).unwrap();
    }
    let spec: Spec = serde_json::json!({"job": {"name": "x"}, "pod_spec": {"containers": [{"image": "gcr.io/k8s-staging-test-infra/kubekins-e2e:v20261120-master", "command": ["runner.sh"], "args": ["./test-infra/jenkins/bootstrap.py", "--timeout=340"]}]}}).into();
    let mut tick = Timestamp::now() - SignedDuration::from_hours(24);
    // Fires decided ahead (`prepare_fires` a second before `commit_prepared`),
    // as the daemon commits periodics due together.
    let ahead = std::env::var_os("FIRE_BENCH_AHEAD").is_some();
    for round in 0..=rounds {
        let batch = fires(n, &spec, tick);
        let prepared = (round > 0 && ahead).then(|| {
            let names: Vec<String> = batch.iter().map(|f| f.state.periodic.clone()).collect();
            let versions = store.periodic_versions(&names).unwrap();
            let t0 = Instant::now();
            let p = store
                .prepare_fires(batch.clone().into_iter().zip(versions).collect())
                .unwrap();
            println!(
                "  prepared ahead in {:.1} ms",
                t0.elapsed().as_secs_f64() * 1e3
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
            p
        });
        seen.0.lock().unwrap().clear();
        let t0 = Instant::now();
        let created = match prepared {
            Some(p) => store.commit_prepared(p, tick),
            None => store.commit_fires(batch, tick),
        };
        let took = t0.elapsed();
        let mut at: Vec<f64> = seen
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|t| t.duration_since(t0).as_secs_f64() * 1e3)
            .collect();
        at.sort_by(f64::total_cmp);
        let pct = |p: f64| at[((at.len() as f64 * p) as usize).min(at.len() - 1)];
        println!(
            "{} {n} fires: call {:.1} ms ({:.1} us/fire); committed after p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            if round == 0 { "seed " } else { "round" },
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / n as f64,
            pct(0.5),
            pct(0.99),
            pct(1.0),
        );
        // Every run ends, so the next round fires against completed runs.
        let ids: Vec<String> = created
            .into_iter()
            .flat_map(|c| c.unwrap())
            .map(|c| c.run().id.clone())
            .collect();
        for to in [RunState::Pending, RunState::Success] {
            let batch = ids
                .iter()
                .map(|id| (id.clone(), Transition::to(to, tick, "")))
                .collect();
            for r in store.transitions(batch) {
                r.unwrap();
            }
        }
        tick += SignedDuration::from_hours(1);
    }
}
