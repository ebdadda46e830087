//! Run inserts into the SQLite store, as the daemon makes them: 10,000 runs
//! created by 8 threads at once (each waits for its commit), timed end to end.
//!
//! `cargo run --release -p bosun-store --example insert_bench [N] [THREADS]`

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bosun_config::types::JobType;
use bosun_store::sqlite::SqliteStore;
use bosun_store::{NewRun, RunState, Store};
use jiff::Timestamp;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let threads: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(8);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("bosun.db")).unwrap());
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let store = store.clone();
            let next = next.clone();
            std::thread::spawn(move || {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let new = NewRun {
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
                    store.create_run(new, Timestamp::now()).unwrap();
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let took = t0.elapsed();
    println!(
        "{n} run inserts by {threads} threads in {:.3} s = {:.0}/s",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
}
