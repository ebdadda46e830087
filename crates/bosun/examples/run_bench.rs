//! Throughput of `bosun serve` on a local cluster, side by side with a plain loop:
//! 10,000 `/bin/true` runs triggered by 8 client threads on a cluster with 8
//! slots (first POST to last `success`), and the same 10,000 `/bin/true` spawned
//! directly with 8 in flight and output redirected to files.
//!
//! Inserts are also timed on their own: N more POSTs of a job whose queue has
//! capacity 0, so its runs are committed and stay `triggered` (the controller
//! still looks at them on every wake-up, as it would in production).
//!
//! The machine's load changes from one second to the next, so the two are
//! measured in turns, `BOSUN_BENCH_ROUNDS` times (default 3): the plain loop,
//! then bosun's N runs, on the same daemon; the ratio reported is the median
//! of the rounds' ratios, each taken in the same few seconds.
//!
//! `run_bench BOSUN_BINARY [N]` (prints rates, the ratios, insert times and the
//! daemon's peak RSS); `BOSUN_BENCH_STORE=postgres` runs the daemon on a
//! PostgreSQL server it starts (see `common/store.rs`).

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/raw.rs"]
mod raw;

#[path = "common/proc.rs"]
mod proc;

#[path = "common/store.rs"]
mod store;

#[path = "common/lean.rs"]
mod lean;

#[path = "common/local.rs"]
mod local;

fn main() {
    // The daemon's store (`BOSUN_BENCH_STORE`: sqlite, or postgres on a
    // server this benchmark starts).
    let bench_store = store::BenchStore::from_env();
    println!("store: {}", bench_store.name());
    let mut args = std::env::args().skip(1);
    let bosun = args.next().expect("path of the bosun binary");
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = std::env::temp_dir().join(format!("bosun-run-bench-{}", std::process::id()));
    local::write_config(&dir);

    // BOSUN_BENCH_INSERTS_ONLY=1: only the held inserts (to profile them).
    let only_inserts = std::env::var_os("BOSUN_BENCH_INSERTS_ONLY").is_some();
    let rounds: usize = match std::env::var("BOSUN_BENCH_ROUNDS") {
        _ if only_inserts => 0,
        Ok(v) => v.parse().expect("BOSUN_BENCH_ROUNDS: a number"),
        Err(_) => 3,
    };

    // bosun.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut daemon = local::serve_command(&bosun, &dir, port)
        .args(bench_store.args())
        .stdout(Stdio::null())
        .stderr(match std::env::var_os("BOSUN_BENCH_LOG") {
            Some(f) => Stdio::from(std::fs::File::create(f).unwrap()),
            None => Stdio::null(),
        })
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    while agent.get(format!("{base}/healthz")).call().is_err() {
        std::thread::sleep(Duration::from_millis(50));
    }
    // The triggering client: 8 threads, each with its own keep-alive
    // connection, each waiting for its answer before the next POST. It shares
    // this machine's CPUs with the daemon, so it is kept lean (a request
    // written once, the answer's status and length read by hand; ureq took
    // about 40 us of CPU per request, most of it in user space).
    // BOSUN_BENCH_UREQ=1 uses ureq instead.
    let lean = std::env::var_os("BOSUN_BENCH_UREQ").is_none();
    let post_all = |job: &'static str| {
        let next = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..8)
            .map(|_| {
                let next = next.clone();
                let agent = agent.clone();
                let base = base.clone();
                std::thread::spawn(move || {
                    if lean {
                        lean::post_until(port, job, &next, n);
                        return;
                    }
                    while next.fetch_add(1, Ordering::Relaxed) < n {
                        let mut r = agent
                            .post(format!("{base}/api/v1/runs"))
                            .send_json(serde_json::json!({ "job": job }))
                            .unwrap();
                        assert_eq!(r.status().as_u16(), 201);
                        // Read to the end, so the connection is kept for the
                        // next request (8 connections in all).
                        r.body_mut().read_to_string().unwrap();
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
    };
    let cpu = proc::cpu_seconds;
    // The rounds: the plain loop (8 in flight), then bosun's runs.
    let wait_idle = || loop {
        let mut r = agent
            .get(format!("{base}/api/v1/runs?active=true&limit=1"))
            .call()
            .unwrap();
        let v: serde_json::Value = r.body_mut().read_json().unwrap();
        if v["runs"].as_array().is_some_and(|a| a.is_empty()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut measured = Vec::new();
    for round in 0..rounds {
        let raw_dir = dir.join(format!("raw-{round}"));
        // The plain loop's files stay until the end, deleted with `dir`:
        // thousands of inodes freed just before a measured part made ext4's
        // inode allocator slow for whoever created files next (it checks
        // every recently deleted inode it passes: a quarter of the machine's
        // CPU, under the supervisor, in bosun's first round).
        let raw = raw::raw_loop(&raw_dir, n);
        let run_cpu0 = cpu(daemon.id());
        // The cluster's supervisor (started with the first run) and the
        // jobs it reaped: CPU the daemon does not see, on the same cores.
        let supervisor = || proc::find_process(&["run-shim", dir.to_str().unwrap()]);
        let shim_cpu =
            |pid: Option<u32>| pid.map_or((0.0, 0.0), |p| (cpu(p), proc::children_cpu_seconds(p)));
        let shim0 = shim_cpu(supervisor());
        let t1 = Instant::now();
        post_all("true");
        let inserts = t1.elapsed();
        wait_idle();
        let total = t1.elapsed();
        let run_cpu = cpu(daemon.id()) - run_cpu0;
        let shim1 = shim_cpu(supervisor());
        let ratio = raw.as_secs_f64() / total.as_secs_f64();
        println!(
            "round {}: raw loop {:.2} s ({:.0}/s), bosun {:.2} s ({:.0}/s; its POSTs took {:.3} s), bosun / raw {ratio:.3}; daemon CPU {:.0} us per run (supervisor {:.0} us, its jobs {:.0} us)",
            round + 1,
            raw.as_secs_f64(),
            n as f64 / raw.as_secs_f64(),
            total.as_secs_f64(),
            n as f64 / total.as_secs_f64(),
            inserts.as_secs_f64(),
            run_cpu * 1e6 / n as f64,
            (shim1.0 - shim0.0) * 1e6 / n as f64,
            (shim1.1 - shim0.1) * 1e6 / n as f64,
        );
        measured.push(ratio);
    }
    let mut ok = 0;
    let mut offset = 0;
    loop {
        let mut r = agent
            .get(format!(
                "{base}/api/v1/runs?state=success&limit=1000&offset={offset}"
            ))
            .call()
            .unwrap();
        let v: serde_json::Value = r.body_mut().read_json().unwrap();
        let page = v["runs"].as_array().map_or(0, Vec::len);
        ok += page;
        offset += page;
        if page < 1000 {
            break;
        }
    }
    assert_eq!(ok, rounds * n, "every run succeeded");
    let (daemon_cpu0, own_cpu0) = (cpu(daemon.id()), cpu(std::process::id()));
    let t2 = Instant::now();
    post_all("held");
    let held_inserts = t2.elapsed();
    let (daemon_cpu, own_cpu) = (
        cpu(daemon.id()) - daemon_cpu0,
        cpu(std::process::id()) - own_cpu0,
    );
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", daemon.id())).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap_or("VmHWM: ?")
        .to_string();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if !measured.is_empty() {
        let median = local::median(measured.clone());
        let sorted = &mut measured;
        sorted.sort_by(f64::total_cmp);
        println!(
            "bosun / raw: median {median:.3} of {} rounds (min {:.3}, max {:.3}; target >= 0.5); {ok} runs succeeded",
            sorted.len(),
            sorted[0],
            sorted[sorted.len() - 1],
        );
    }
    println!(
        "inserts alone: {n} POSTs committed in {:.3} s (target < 1 s); CPU: daemon {daemon_cpu:.2} s, this client {own_cpu:.2} s",
        held_inserts.as_secs_f64()
    );
    println!(
        "daemon peak RSS: {} (target < 100 MiB)",
        rss.trim_start_matches("VmHWM:").trim()
    );
}
