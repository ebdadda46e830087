//! What the local-run benchmarks share: `run_bench`'s daemon configuration
//! and the median of their rounds. Each includer uses some of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Writes `run_bench`'s configuration into `dir` (`config.yaml` and
/// `jobs/`): a local cluster of 8 slots, the job `true` (`/bin/true`) and
/// the job `held`, whose queue takes no run (its runs are committed and
/// stay triggered).
pub fn write_config(dir: &Path) {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "plank: {job_queue_capacities: {held: 0}}\nbuild_clusters:\n  default: {kind: local, max_concurrency: 8}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs/true.yaml"),
        "periodics:\n- name: true\n  cron: \"0 0 31 2 *\"\n  spec: {containers: [{image: x, command: [/bin/true]}]}\n- name: held\n  cron: \"0 0 31 2 *\"\n  job_queue_name: held\n  spec: {containers: [{image: x, command: [/bin/true]}]}\n",
    )
    .unwrap();
}

/// `bosun serve` on [`write_config`]'s configuration in `dir` (its data in
/// `dir/data`), listening on `port` of loopback.
pub fn serve_command(bosun: &str, dir: &Path, port: u16) -> Command {
    let mut command = Command::new(bosun);
    command
        .args(["serve", "--config"])
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    command
}

/// The median (of an even number, the mean of the middle two).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}
