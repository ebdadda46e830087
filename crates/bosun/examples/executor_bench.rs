//! The local executor on its own, side by side with a plain loop: N
//! `/bin/true` runs started through a local cluster's supervisor by 8 threads
//! (each starts a run and waits for its exit code), against N `/bin/true`
//! spawned directly by 8 threads with output redirected to files. No store, no
//! controller, no HTTP: the ceiling a local cluster puts on `run_bench`.
//!
//! `executor_bench BOSUN_BINARY [N]`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bosun_cluster::executor::{JobProcess, RunStatus};
use bosun_cluster::local::LocalExecutor;

#[path = "common/raw.rs"]
mod raw;

fn main() {
    let mut args = std::env::args().skip(1);
    let bosun = args.next().expect("path of the bosun binary");
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = std::env::temp_dir().join(format!("bosun-executor-bench-{}", std::process::id()));
    let raw_dir = dir.join("raw");

    let raw = raw::raw_loop(&raw_dir, n);

    // Exits wake the waiting threads, as they wake the controller.
    let ended = Arc::new((Mutex::new(0u64), Condvar::new()));
    let exec = {
        let ended = ended.clone();
        Arc::new(
            LocalExecutor::new(dir.join("cluster"), vec![bosun, "run-shim".into()]).on_exit(
                move || {
                    *ended.0.lock().unwrap() += 1;
                    ended.1.notify_all();
                },
            ),
        )
    };
    let job = JobProcess {
        command: vec!["/bin/true".into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        working_dir: None,
        decoration: None,
        pipeline: None,
    };
    // Start the supervisor before timing (a daemon has one running).
    exec.start("warm-up", &job).unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (next, exec, job, ended) = (next.clone(), exec.clone(), job.clone(), ended.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let id = format!("run-{i}");
                exec.start(&id, &job).unwrap();
                let mut seen = *ended.0.lock().unwrap();
                loop {
                    match exec.status(&id) {
                        RunStatus::Exited { code: 0 } => break,
                        RunStatus::Running { .. } | RunStatus::Starting | RunStatus::Ending => {}
                        other => panic!("run {id}: {other:?}"),
                    }
                    let guard = ended.0.lock().unwrap();
                    let (guard, _) = ended
                        .1
                        .wait_timeout_while(guard, Duration::from_millis(50), |e| *e == seen)
                        .unwrap();
                    seen = *guard;
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let local = t0.elapsed();
    drop(exec);
    let _ = std::fs::remove_dir_all(&dir);
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "raw loop:       {n} runs in {:.2} s = {:.0}/s",
        raw.as_secs_f64(),
        rate(raw)
    );
    println!(
        "local executor: {n} runs in {:.2} s = {:.0}/s",
        local.as_secs_f64(),
        rate(local)
    );
    println!("executor / raw: {:.3}", rate(local) / rate(raw));
}
