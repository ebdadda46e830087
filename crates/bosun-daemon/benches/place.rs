//! What placing a run by the dispatcher's plan adds to its creation: the
//! controller's [`Placer::place`] for a run in `scheduling`, against a plan
//! of 60,000 jobs (20,000 units of 3 over 11 clusters), beside the same
//! call with no `dispatcher:` section (the configured cluster is kept).
//! The target: under 20 us per run.
//!
//! `cargo bench -p bosun-daemon --bench place`

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_config::types::{DispatcherConfig, JobType, ProwConfig};
use bosun_daemon::placement::{Decision, Placer};
use bosun_dispatch::model::{ClusterSpec, Options, PlanInput, UnitSpec};
use bosun_dispatcher::demand::{CachedDemand, DemandSource};
use bosun_dispatcher::engine::Engine;
use bosun_dispatcher::inputs::Inputs;
use bosun_dispatcher::service::Service;
use bosun_store::{NewRun, RunState};
use criterion::{criterion_group, criterion_main, Criterion};

const JOBS: usize = 60_000;

fn input() -> PlanInput {
    let clusters: Vec<ClusterSpec> = (1..=11)
        .map(|i| ClusterSpec {
            name: format!("build{i:02}"),
            ..ClusterSpec::default()
        })
        .collect();
    let names: Vec<String> = clusters.iter().map(|c| c.name.clone()).collect();
    let units = (0..JOBS / 3)
        .map(|u| UnitSpec {
            id: format!("org-{}/repo-{u}.yaml", u % 97),
            jobs: (0..3).map(|j| format!("job-{:06}", u * 3 + j)).collect(),
            demand: 1.0 + (u % 13) as f64,
            eligible: names.clone(),
            pinned: None,
            keeps_blocked_pin: false,
            previous: None,
            rule: "relocatable".into(),
        })
        .collect();
    PlanInput {
        clusters,
        units,
        options: Options::default(),
    }
}

fn run(job: &str) -> bosun_store::Run {
    NewRun {
        job: job.into(),
        job_type: JobType::Periodic,
        periodic: Some(job.into()),
        configured_cluster: "build01".into(),
        state: RunState::Scheduling,
        refs: None,
        extra_refs: vec![],
        labels: Arc::new(BTreeMap::new()),
        annotations: Arc::new(BTreeMap::new()),
        spec: serde_json::json!({}).into(),
        scheduled_at: None,
        attempt: 0,
        description: String::new(),
    }
    .into_run(
        "8f8b1e4c-2f4e-4f7b-9a55-0d6c1e1f2a3b".into(),
        1_800_000_000_000_001,
        "h".into(),
        jiff::Timestamp::UNIX_EPOCH,
    )
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::new(
        Service::new(None),
        CachedDemand::new(DemandSource::Ones),
        dir.path().join("plan.json"),
    ));
    let now = jiff::Timestamp::now();
    engine.replan(
        Ok(Inputs {
            input: input(),
            repos: vec![],
            warnings: vec![],
            files: BTreeMap::new(),
        }),
        true,
        "bench",
        now,
    );
    let placer = Placer::new(engine);
    let with = ProwConfig {
        dispatcher: Some(DispatcherConfig::default()),
        ..ProwConfig::default()
    };
    let without = ProwConfig::default();
    let runs: Vec<_> = (0..1024)
        .map(|i| run(&format!("job-{:06}", i * 53 % JOBS)))
        .collect();
    assert!(matches!(
        placer.place(&runs[0], &with, now),
        Decision::Ready(p) if p.cluster.is_some()
    ));
    let mut g = c.benchmark_group("place a run in scheduling");
    let mut i = 0;
    g.bench_function("by the dispatcher's plan (60,000 jobs)", |b| {
        b.iter(|| {
            i = (i + 1) % runs.len();
            std::hint::black_box(placer.place(&runs[i], &with, now))
        })
    });
    g.bench_function("no dispatcher (configured cluster)", |b| {
        b.iter(|| {
            i = (i + 1) % runs.len();
            std::hint::black_box(placer.place(&runs[i], &without, now))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
