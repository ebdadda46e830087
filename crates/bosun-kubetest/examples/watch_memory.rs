//! Memory per watched run: N runs of one Kubernetes job held running at
//! once on one real kube-apiserver, through a release-built `bosun serve`:
//! the daemon's RSS growth per watched run, beside the size of one of its
//! pods' JSON as the API server returns it (`GET .../pods/NAME`).
//!
//! `watch_memory BOSUN_BINARY [N]` (default 10,000). The harness (8 threads)
//! binds each new pod, marks it running and writes one line of its log, and
//! leaves it running: bosun watches every pod and follows every log at once.
//! `BOSUN_BENCH_STORE=postgres`: the daemon on a PostgreSQL server the
//! benchmark starts (its own memory only is measured, not the server's);
//! `KUBE_BENCH_APISERVER_ARGS`: more kube-apiserver flags;
//! `KUBE_BENCH_HOLD_SECS`: keep everything running that long after the
//! figures (to look at the daemon).
//!
//! Measured: the daemon's `VmRSS` and `RssAnon` once its cluster is
//! reachable and its watch open (before the first trigger), then once a
//! tenth of the runs, then all, are `running` with every pod's log line in
//! its run's log file and the memory at rest (15 s, then three samples 5 s
//! apart within 1%); the growth between the two stages over the runs added. The store's share
//! (the runs' rows in SQLite's page cache) is in the growth: it is what a
//! watched run costs the daemon.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_kubetest::{ControlPlane, Options};

mod common;
use common::{Bosun, Harness, CONTEXT, NS};

/// `VmRSS` and `RssAnon` (its private, anonymous part: the heap, not the
/// binary's pages) of `pid`, in bytes.
fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// The daemon's memory at rest: after 15 s (the threads a burst started
/// have ended: tokio's blocking threads idle 10 s), once three samples 5 s
/// apart are within 1% of each other (RSS).
fn settled_rss(pid: u32) -> (u64, u64) {
    std::thread::sleep(Duration::from_secs(15));
    let mut samples = vec![rss(pid)];
    for _ in 0..24 {
        std::thread::sleep(Duration::from_secs(5));
        samples.push(rss(pid));
        let last = &samples[samples.len().saturating_sub(3)..];
        let (lo, hi) = (
            last.iter().map(|s| s.0).min().unwrap(),
            last.iter().map(|s| s.0).max().unwrap(),
        );
        if last.len() == 3 && (hi - lo) as f64 <= 0.01 * hi as f64 {
            break;
        }
    }
    *samples.last().unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let bosun = args.next().expect("path of the bosun binary");
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let extra = common::apiserver_args();
    let started = Instant::now();
    let plane = Arc::new(ControlPlane::audited_with_args(Options::default(), &extra));
    let tenant = plane.tenant(NS, CONTEXT);
    eprintln!(
        "control plane {} ready in {:.1} s",
        plane.url(),
        started.elapsed().as_secs_f64()
    );

    // The harness: each new pod bound, running, one line of log.
    // A call the API refuses (a pod bosun revived, bound already) is
    // counted, and that pod left.
    let harness = Harness::start(&plane, 8, |kubelet, pod, name| {
        kubelet.run_pod(pod);
        kubelet.append_log(NS, name, &format!("hello from {name}\n"));
    });
    let (running, refused) = (harness.done.clone(), harness.refused.clone());

    let mut bosun = Bosun::start(
        &bosun,
        "bosun-watch-memory-",
        &format!("pod_namespace: {NS}\n"),
        "[\"sleep\", \"infinity\"]",
        &tenant.kubeconfig,
    );
    bosun.wait_reachable();
    let pid = bosun.child.id();
    let before = settled_rss(pid);

    // Two stages: a tenth of the runs, then all; the growth between them
    // over the runs added is what one more watched run costs (the code
    // paged in and the allocator's first arenas come with the first).
    let logs_dir = bosun.data.join("runs").join(CONTEXT);
    let copied = || {
        std::fs::read_dir(&logs_dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.metadata().is_ok_and(|m| m.len() > 0))
                    .count()
            })
            .unwrap_or(0)
    };
    let clock0 = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut stages = Vec::new();
    for target in [n / 10, n] {
        bosun.trigger(&next, target);
        // Until every run runs and every log line is copied.
        let deadline = Instant::now() + Duration::from_secs(1800);
        loop {
            let (r, c) = (running.load(Ordering::Relaxed), copied());
            if r + refused.load(Ordering::Relaxed) >= target && c >= r {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "after 1800 s: {r} pods running, {c} logs copied of {target}, {} refused to the harness",
                refused.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        let at = clock0.elapsed();
        stages.push((target, at, settled_rss(pid)));
    }

    // One pod as the API server returns it.
    let name = plane.kubelet().list(NS)[0].metadata.name.clone().unwrap();
    let pod_json = plane
        .get_text(&format!("/api/v1/namespaces/{NS}/pods/{name}"))
        .expect("the pod");
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "the harness ran {} pods; the API refused it {} (pods bosun revived)",
        running.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
    println!(
        "bosun before the first run: RSS {:.1} MiB, of it anonymous {:.1} MiB",
        mib(before.0),
        mib(before.1)
    );
    for (target, at, (rss, anon)) in &stages {
        println!(
            "{target} runs watched at once (all running, logs copied at {:.1} s): RSS {:.1} MiB, anonymous {:.1} MiB; growth per run from the start: RSS {:.0} B, anonymous {:.0} B",
            at.as_secs_f64(),
            mib(*rss),
            mib(*anon),
            rss.saturating_sub(before.0) as f64 / *target as f64,
            anon.saturating_sub(before.1) as f64 / *target as f64,
        );
    }
    let ((n1, _, (r1, a1)), (n2, _, (r2, a2))) = (stages[0], stages[1]);
    let added = (n2 - n1) as f64;
    let (per_rss, per_anon) = (
        (r2 as f64 - r1 as f64) / added,
        (a2 as f64 - a1 as f64) / added,
    );
    let json = pod_json.len() as f64;
    println!(
        "per watched run from {n1} to {n2}: RSS {per_rss:.0} B, anonymous {per_anon:.0} B; a pod's JSON as the API server returns it: {} B; ratios {:.2} (RSS) and {:.2} (anonymous)",
        pod_json.len(),
        per_rss / json,
        per_anon / json
    );
    if let Some(secs) = std::env::var("KUBE_BENCH_HOLD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        eprintln!("holding for {secs} s: bosun is pid {pid}");
        std::thread::sleep(Duration::from_secs(secs));
    }
    drop(bosun);
    harness.stop();
}
