//! The plain loop the run benchmarks compare bosun with.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Spawns `/bin/true` `n` times, 8 in flight (one thread each), each with its
/// output redirected to its own file in `dir`; returns the time taken.
pub fn raw_loop(dir: &Path, n: usize) -> Duration {
    std::fs::create_dir_all(dir).unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (next, dir) = (next.clone(), dir.to_path_buf());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                run_true(&dir, i);
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    t0.elapsed()
}

/// Runs `/bin/true` once, its output to `dir/I.log`, as the plain loop does.
pub fn run_true(dir: &Path, i: impl std::fmt::Display) {
    let out = std::fs::File::create(dir.join(format!("{i}.log"))).unwrap();
    let status = Command::new("/bin/true")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap();
    assert!(status.success());
}
