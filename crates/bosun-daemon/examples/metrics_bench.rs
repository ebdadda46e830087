//! The cost of `GET /metrics` with JOBS jobs x 7 states of retained runs:
//! `Metrics::render`, the call the daemon's handler makes
//! (`http::api::probes::metrics`; the dispatcher's and external client's
//! text is appended only when configured). The SQLite store holds one run
//! of every job in every state (`scheduling` .. `error`), so `prowjobs` has
//! JOBS x 7 series; the rest of the registry (the periodic scheduler's
//! histogram, the reload gauges) renders as it always does.
//!
//! The store is filled with a `Metrics` observing it (its `prowjobs`, kept
//! from the commits alone, must equal a fresh `count_runs`), then reopened
//! with new `Metrics`, seeded from `count_runs` as `bosun serve` does at
//! start: a daemon restarted over a full store, `prowjob_state_transitions`
//! empty. That one is rendered.
//!
//! Label values are those of the Go peer (`bench/peers/metrics-go`), made by
//! the same formula ([`job`]). Compared by `bench/metrics.sh`.
//!
//! `metrics_bench [JOBS] [ITERS]` (defaults 10000 and 20): one render to
//! warm up, then ITERS renders, each timed alone; prints the median render's
//! ns per series (sample lines of the exposition), its bytes and the fastest
//! render. Beside it: the seed at start (`Store::count_runs`, the grouped SQL
//! scan a render used to make, and the counts filled in), the cost of the
//! observer's bookkeeping per committed creation and per transition (on
//! `Metrics` directly, the `prowjob_state_transitions` counter included;
//! and `prowjobs`' share of it alone),
//! and, for comparison, prometheus-client's text encoding of the same series
//! as a gauge family (the same label struct, defined here, filled once),
//! what a scrape cost before the hand-written encoder.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Instant;

use bosun_config::types::{JobType, Refs};
use bosun_daemon::metrics::prowjobs::ProwJobs;
use bosun_daemon::metrics::Metrics;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{Before, NewRun, RunFilter, RunState, Store, Transition, TransitionObserver};
use jiff::Timestamp;

/// As `bosun serve`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Job `j`'s labels but its state.
struct Job {
    name: String,
    job_type: JobType,
    org: String,
    repo: String,
    base_ref: String,
    cluster: String,
    retest: bool,
}

/// The same formula as the Go peer's `job`.
fn job(j: usize) -> Job {
    let org = format!("org-{}", j % 50);
    let repo = format!("repo-{}", j % 500);
    let cluster = format!("build{:02}", j % 3 + 1);
    let base_ref = if j.is_multiple_of(10) {
        "release-4.16"
    } else {
        "main"
    }
    .to_string();
    let (job_type, name, retest) = match j % 3 {
        0 => (
            JobType::Presubmit,
            format!("pull-ci-{org}-{repo}-{base_ref}-e2e-aws-{j:05}"),
            j.is_multiple_of(7),
        ),
        1 => (
            JobType::Postsubmit,
            format!("branch-ci-{org}-{repo}-{base_ref}-images-{j:05}"),
            false,
        ),
        _ => (
            JobType::Periodic,
            format!("periodic-ci-{org}-{repo}-{base_ref}-nightly-{j:05}"),
            false,
        ),
    };
    Job {
        name,
        job_type,
        org,
        repo,
        base_ref,
        cluster,
        retest,
    }
}

/// Job `j`'s run, created in `scheduling` or `triggered`.
fn new_run(j: usize, state: RunState) -> NewRun {
    let job = job(j);
    let refs = Refs {
        org: job.org,
        repo: job.repo,
        base_ref: Some(job.base_ref),
        base_sha: Some("0123456789abcdef0123456789abcdef01234567".into()),
        ..Refs::default()
    };
    // Periodics carry their code as extra refs, as Prow's do.
    let (refs, extra_refs, periodic) = match job.job_type {
        JobType::Periodic => (None, vec![refs], Some(job.name.clone())),
        _ => (Some(refs), vec![], None),
    };
    let mut labels = BTreeMap::from([
        ("created-by-prow".to_string(), "true".to_string()),
        ("prow.k8s.io/job".to_string(), job.name.clone()),
        (
            "prow.k8s.io/type".to_string(),
            job.job_type.as_str().to_string(),
        ),
    ]);
    if job.retest {
        labels.insert("prow.k8s.io/retest".into(), "true".into());
    }
    NewRun {
        job: job.name.clone(),
        job_type: job.job_type,
        periodic,
        configured_cluster: job.cluster,
        state: if state == RunState::Scheduling {
            RunState::Scheduling
        } else {
            RunState::Triggered
        },
        refs,
        extra_refs,
        labels: labels.into(),
        annotations: BTreeMap::from([("prow.k8s.io/job".to_string(), job.name)]).into(),
        spec: serde_json::json!({"pod_spec": {"containers": [{"image": "x", "command": ["/bin/true"]}]}}).into(),
        scheduled_at: None,
        attempt: 0,
        description: "Job triggered.".into(),
    }
}

/// Fills `store` with one run of every job in every state.
fn fill(store: &SqliteStore, jobs: usize) {
    let at = Timestamp::now();
    let (tx, rx) = mpsc::channel();
    for j in 0..jobs {
        for state in RunState::ALL {
            let tx = tx.clone();
            store.create_run_then(
                new_run(j, state),
                at,
                Box::new(move |r| tx.send((state, r.unwrap().run().id.clone())).unwrap()),
            );
        }
    }
    drop(tx);
    let runs: Vec<(RunState, String)> = rx.iter().collect();
    assert_eq!(runs.len(), jobs * 7);
    let step = |to: RunState, which: &dyn Fn(RunState) -> bool| {
        let batch: Vec<(String, Transition)> = runs
            .iter()
            .filter(|(s, _)| which(*s))
            .map(|(_, id)| (id.clone(), Transition::to(to, at, "bench")))
            .collect();
        for chunk in batch.chunks(5000) {
            for r in store.transitions(chunk.to_vec()) {
                r.unwrap();
            }
        }
    };
    use RunState::*;
    step(Pending, &|s| matches!(s, Pending | Success | Failure));
    for end in [Success, Failure] {
        step(end, &|s| s == end);
    }
    for end in [Aborted, Error] {
        step(end, &|s| s == end);
    }
}

/// `f` timed `iters` times: (median, min) in ns.
fn time(iters: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut ns: Vec<f64> = (0..iters)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_nanos() as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    (ns[ns.len() / 2], ns[0])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let jobs: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let iters: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bosun.db");
    let t0 = Instant::now();
    {
        let observed = Metrics::new("default");
        let store = SqliteStore::open_with(&path, SqliteOptions::default(), Some(observed.clone()))
            .unwrap();
        fill(&store, jobs);
        let counts = store.count_runs().unwrap();
        assert_eq!(counts.len(), jobs * 7, "one series per job and state");
        assert_eq!(
            observed.prowjobs_series(),
            ProwJobs::series_of(&counts),
            "prowjobs kept from the commits alone equals a fresh count"
        );
    }
    eprintln!(
        "filled {} runs in {:.1} s",
        jobs * 7,
        t0.elapsed().as_secs_f64()
    );

    // A daemon restarted over the full store.
    let metrics = Metrics::new("default");
    let store =
        SqliteStore::open_with(&path, SqliteOptions::default(), Some(metrics.clone())).unwrap();
    let seeds = iters.clamp(1, 5);
    let (seed, _) = time(seeds, || {
        metrics.seed(&store).unwrap();
    });
    let (sql, _) = time(seeds, || drop(std::hint::black_box(store.count_runs())));
    let text = metrics.render();
    let series = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    let bytes = text.len();
    drop(text);
    let (median, min) = time(iters, || drop(std::hint::black_box(metrics.render())));

    // The observer's bookkeeping, on metrics of their own.
    let runs = store
        .list(&RunFilter {
            limit: usize::MAX >> 1,
            ..RunFilter::default()
        })
        .unwrap();
    let observer = Metrics::new("default");
    let t0 = Instant::now();
    for r in &runs {
        observer.on_change(r, None, None);
    }
    let create = t0.elapsed().as_nanos() as f64 / runs.len() as f64;
    let ended: Vec<_> = runs.iter().filter(|r| r.state.is_final()).collect();
    let t0 = Instant::now();
    for r in &ended {
        let before = Before {
            state: RunState::Pending,
            cluster: r.cluster.as_deref(),
        };
        observer.on_change(r, None, Some(before));
    }
    let transition = t0.elapsed().as_nanos() as f64 / ended.len().max(1) as f64;
    // Of which `prowjobs`' own bookkeeping.
    let gauge = ProwJobs::new("default");
    let t0 = Instant::now();
    for r in &runs {
        gauge.change(r, None);
    }
    let gauge_create = t0.elapsed().as_nanos() as f64 / runs.len() as f64;
    let t0 = Instant::now();
    for r in &ended {
        let before = Before {
            state: RunState::Pending,
            cluster: r.cluster.as_deref(),
        };
        gauge.change(r, Some(before));
    }
    let gauge_transition = t0.elapsed().as_nanos() as f64 / ended.len().max(1) as f64;

    let counts = store.count_runs().unwrap();
    let registry = bosun_daemon::metrics::reference_prowjobs("default", &counts);
    let (encode_only, _) = time(iters, || {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        drop(std::hint::black_box(out));
    });
    println!(
        "bosun: series={series} bytes={bytes} iters={iters} median_ms={:.2} min_ms={:.2} ns_per_series={:.1} seed_ms={:.2} count_runs_ms={:.2} observe_create_ns={create:.0} observe_transition_ns={transition:.0} prowjobs_create_ns={gauge_create:.0} prowjobs_transition_ns={gauge_transition:.0} pc_encode_ms={:.2} pc_encode_ns_per_series={:.1}",
        median / 1e6,
        min / 1e6,
        median / series as f64,
        seed / 1e6,
        sql / 1e6,
        encode_only / 1e6,
        encode_only / series as f64,
    );
}
