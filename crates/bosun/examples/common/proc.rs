//! What the benchmarks read of a daemon they started: the port it logged,
//! and its memory and CPU from `/proc`. Each includer uses some of it.
#![allow(dead_code)]

/// The port of a daemon's `bosun serving listen=ADDR` (or `bosun dispatcher
/// serving`) log line, once `log` has it.
pub fn serving_port(log: &str) -> Option<u16> {
    log.lines()
        .find(|l| l.contains("serving") && l.contains("listen="))
        .and_then(|l| l.split("listen=").nth(1))
        .and_then(|a| a.split_whitespace().next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
}

/// A field of `/proc/PID/status` (`VmRSS`, `VmHWM`, `RssAnon`), in KiB; 0
/// when it cannot be read.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The CPU `pid` has used (user and system), in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    cpu_fields(pid, 11)
}

/// The CPU used by the children `pid` has reaped (user and system), in
/// seconds: a supervisor's jobs.
pub fn children_cpu_seconds(pid: u32) -> f64 {
    cpu_fields(pid, 13)
}

/// A process whose command line contains every one of `needles` (the first
/// found), e.g. a daemon's local supervisor.
pub fn find_process(needles: &[&str]) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        needles.iter().all(|n| cmdline.contains(n)).then_some(pid)
    })
}

/// Fields `first` and `first + 1` after the command of `/proc/PID/stat`,
/// in seconds (clock ticks of 1/100 s).
fn cpu_fields(pid: u32, first: usize) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    // utime and stime, in clock ticks (100 per second).
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(first) + ticks(first + 1)) / 100.0
}
