//! Loads and validates a configuration tree repeatedly and prints the best time, in
//! the same format as the peers in `bench/peers/` (used by `bench/config-load.sh`).
//!
//! `load_bench [--repeat K] [--print-files] --config FILE --job-config DIR...`

use std::path::PathBuf;
use std::time::Instant;

use bosun_config::{load, LoadOptions, OsFiles};

fn main() {
    let mut opts = LoadOptions::default();
    let mut repeat = 1usize;
    let mut print_files = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--repeat" => {
                repeat = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--repeat K")
            }
            "--print-files" => print_files = true,
            "--config" => opts.config = Some(PathBuf::from(args.next().expect("--config FILE"))),
            "--job-config" => opts
                .job_config
                .push(PathBuf::from(args.next().expect("--job-config DIR"))),
            other => panic!("unknown argument {other}"),
        }
    }
    if print_files {
        // The exact files the loader parses (config first, then job files; .prowignore applied).
        if let Some(c) = &opts.config {
            println!("{}", c.display());
        }
        for root in &opts.job_config {
            for f in bosun_config::source::walk(&OsFiles, root).files {
                println!("{}", f.display());
            }
        }
        return;
    }
    let mut best = u128::MAX;
    let mut last = None;
    for _ in 0..repeat {
        let start = Instant::now();
        let loaded = load(&opts, &OsFiles);
        best = best.min(start.elapsed().as_nanos());
        last = Some(loaded);
    }
    let loaded = last.expect("repeat >= 1");
    let jobs = loaded.snapshot.as_ref().map(|s| {
        let c = s.counts();
        c.periodics + c.presubmits + c.postsubmits
    });
    println!(
        "files={} jobs={} errors={} ns={best}",
        loaded.stats.files,
        jobs.unwrap_or(0),
        loaded.errors()
    );
}
