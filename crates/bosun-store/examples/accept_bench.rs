//! Webhook deliveries accepted by the SQLite store, as `POST /hook` keeps
//! them: 16 threads (HTTP handlers) each accepting deliveries of a 7 KiB body
//! and waiting for its commit, timed end to end; one in ten is a redelivery
//! of an id already kept.
//!
//! `cargo run --release -p bosun-store --example accept_bench [N] [THREADS] [BODY_BYTES]`
//!
//! Prints deliveries per second and the process's CPU time per delivery (the
//! writer's, mostly). The database lives under `$TMPDIR`: the filesystem's
//! fsync is most of the cost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bosun_store::sqlite::SqliteStore;
use bosun_store::{Accepted, NewDelivery, Store};
use jiff::Timestamp;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let threads: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(16);
    let size: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(7 * 1024);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("bosun.db")).unwrap());
    let body: Vec<u8> = (0..size).map(|i| b"{\"ref\": \"x\"}"[i % 12]).collect();
    let cpu0 = cpu_seconds();
    let next = Arc::new(AtomicUsize::new(0));
    let duplicates = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (store, next, duplicates, body) = (
                store.clone(),
                next.clone(),
                duplicates.clone(),
                body.clone(),
            );
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                // Every tenth a redelivery of the one before.
                let id = if i % 10 == 9 { i - 1 } else { i };
                let d = NewDelivery {
                    forge: "github".into(),
                    event: "push".into(),
                    delivery_id: format!("{id:08x}-0000-4000-8000-000000000000"),
                    repo: Some("acme/widgets".into()),
                    body: body.clone(),
                    received_at: Timestamp::now(),
                };
                if let Accepted::Duplicate { .. } = store.accept_delivery(d).unwrap() {
                    duplicates.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let took = t0.elapsed();
    println!(
        "{n} deliveries of {size} bytes ({} redelivered) by {threads} threads in {:.3} s = {:.0}/s; CPU {:.0} us per delivery",
        duplicates.load(Ordering::Relaxed),
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
