//! Several `bosun serve` replicas on one PostgreSQL database (a real server
//! the tests start), an every-second periodic, and faults: the leader
//! killed, paused past its lease, stopped gracefully. Each test ends with
//! the checker: every scheduled second has exactly one outcome (a run or a
//! skip with its reason), no tick has two runs, every run outcome has its
//! run, and the ticks go on.
//!
//! The lease's timings are shortened (TTL 3 s, renewals every second,
//! followers trying every 500 ms) so that a failover fits a test; the
//! figures with the default timings are measured by `examples/failover.rs`
//! (docs/ha.md).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bosun_kubetest::postgres::Postgres;
use jiff::{SignedDuration, Timestamp};

use crate::common::{json, request, serve, Serve};

const CONFIG: &str = "build_clusters:\n  default: {kind: local, max_concurrency: 8}\n";
const JOBS: &str = "periodics:\n- name: sec\n  cron: \"* * * * * *\"\n  spec: {containers: [{image: x, command: [\"true\"]}]}\n";

/// The shortened lease timings every replica of these tests runs with.
const LEASE: [&str; 8] = [
    "--lease-ttl",
    "3s",
    "--lease-renew",
    "1s",
    "--lease-retry",
    "500ms",
    "--lease-margin",
    "1s",
];

/// A set of replicas on one database, each with a directory of its own
/// (configuration, data, logs).
struct Replicas {
    _dir: tempfile::TempDir,
    dirs: Vec<PathBuf>,
    url: String,
    up: Vec<Option<Serve>>,
}

impl Replicas {
    fn start(n: usize) -> Replicas {
        let dir = tempfile::tempdir().unwrap();
        let url = Postgres::shared().database();
        let dirs: Vec<PathBuf> = (0..n)
            .map(|i| {
                let d = dir.path().join(format!("r{i}"));
                std::fs::create_dir_all(d.join("jobs")).unwrap();
                std::fs::write(d.join("config.yaml"), CONFIG).unwrap();
                std::fs::write(d.join("jobs/jobs.yaml"), JOBS).unwrap();
                d
            })
            .collect();
        let mut r = Replicas {
            _dir: dir,
            dirs,
            url,
            up: Vec::new(),
        };
        for i in 0..n {
            let s = r.spawn(i);
            r.up.push(Some(s));
        }
        r
    }

    fn spawn(&self, i: usize) -> Serve {
        let mut args: Vec<&std::ffi::OsStr> = vec!["--store".as_ref(), self.url.as_ref()];
        args.extend(LEASE.iter().map(|a| -> &std::ffi::OsStr { a.as_ref() }));
        serve(&self.dirs[i], &args, &[("RUST_LOG", "info")])
    }

    fn port(&self, i: usize) -> u16 {
        self.up[i].as_ref().expect("replica up").port
    }

    /// Any replica that is up.
    fn any(&self) -> u16 {
        self.up.iter().flatten().next().expect("a replica up").port
    }

    /// What replica `i` says of the leadership.
    fn leader_view(&self, i: usize) -> serde_json::Value {
        let (status, body) = request(self.port(i), "GET", "/api/v1/leader", None, None);
        assert_eq!(status, 200, "{body}");
        json(&body)
    }

    /// The replica that leads, once exactly one says so (waits up to
    /// `within`).
    fn leader(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let leading: Vec<usize> = (0..self.up.len())
                .filter(|i| self.up[*i].is_some())
                .filter(|i| self.leader_view(*i)["leader"] == true)
                .collect();
            if leading.len() == 1 {
                return leading[0];
            }
            assert!(leading.len() <= 1, "two replicas lead at once: {leading:?}");
            assert!(Instant::now() < deadline, "no replica leads");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self, i: usize) {
        drop(self.up[i].take());
    }

    fn pid(&self, i: usize) -> rustix::process::Pid {
        rustix::process::Pid::from_child(&self.up[i].as_ref().unwrap().child)
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.up[i].as_ref().unwrap().log).unwrap_or_default()
    }
}

fn ts(v: &serde_json::Value) -> Timestamp {
    v.as_str().unwrap().parse().unwrap()
}

/// The checker: every second from the periodic's first tick to its last
/// has exactly one outcome, no tick has two runs, each run outcome names
/// its run, the last tick is recent. Returns the runs' creation times by
/// tick.
fn check_ticks(port: u16) -> Vec<(Timestamp, Timestamp)> {
    let (_, body) = request(port, "GET", "/api/v1/periodics/sec/ticks", None, None);
    let ticks = json(&body)["ticks"].as_array().unwrap().clone();
    let (_, body) = request(port, "GET", "/api/v1/runs?job=sec&limit=10000", None, None);
    let runs = json(&body)["runs"].as_array().unwrap().clone();
    let mut seen: Vec<(Timestamp, String)> = Vec::new();
    for o in &ticks {
        let (first, last) = (ts(&o["first_tick"]), ts(&o["last_tick"]));
        let count = o["count"].as_u64().unwrap();
        assert_eq!(
            count,
            last.duration_since(first).as_secs() as u64 + 1,
            "a per-second range counts every second: {o}"
        );
        for i in 0..count {
            seen.push((
                first + SignedDuration::from_secs(i as i64),
                o["outcome"].as_str().unwrap().to_string(),
            ));
        }
        if o["outcome"] == "run" {
            let id = o["run_id"].as_str().expect("a run outcome names its run");
            let run = runs
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("the run of {o} exists"));
            assert_eq!(ts(&run["scheduled_at"]), first);
        }
    }
    seen.sort();
    let n = seen.len();
    assert!(n > 0, "no tick recorded");
    let mut distinct: Vec<Timestamp> = seen.iter().map(|(t, _)| *t).collect();
    distinct.dedup();
    assert_eq!(distinct.len(), n, "a tick with two outcomes: {ticks:?}");
    assert_eq!(
        distinct[n - 1].duration_since(distinct[0]).as_secs() as usize + 1,
        n,
        "every second from the first tick to the last has an outcome: {ticks:?}"
    );
    assert!(
        Timestamp::now().duration_since(distinct[n - 1]).as_secs() <= 3,
        "ticks are still being recorded"
    );
    let mut scheduled: Vec<(Timestamp, Timestamp)> = runs
        .iter()
        .filter(|r| !r["scheduled_at"].is_null())
        .map(|r| (ts(&r["scheduled_at"]), ts(&r["created_at"])))
        .collect();
    let m = scheduled.len();
    scheduled.sort();
    scheduled.dedup_by_key(|(t, _)| *t);
    assert_eq!(scheduled.len(), m, "no tick has two runs");
    assert_eq!(
        m,
        seen.iter().filter(|(_, o)| o == "run").count(),
        "runs and run outcomes match"
    );
    scheduled
}

/// The first run created after `at`: how long after `at`.
fn first_run_after(port: u16, at: Timestamp, within: Duration) -> Duration {
    let deadline = Instant::now() + within;
    loop {
        let (_, body) = request(port, "GET", "/api/v1/runs?job=sec&limit=50", None, None);
        let first = json(&body)["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| ts(&r["created_at"]))
            .filter(|c| *c > at)
            .min();
        if let Some(c) = first {
            return c.duration_since(at).unsigned_abs();
        }
        assert!(Instant::now() < deadline, "no run after {at}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pause(pid: rustix::process::Pid, stop: bool) {
    let signal = if stop {
        rustix::process::Signal::STOP
    } else {
        rustix::process::Signal::CONT
    };
    rustix::process::kill_process(pid, signal).unwrap();
}

#[test]
fn killing_the_leader_hands_the_ticks_to_another_replica_and_loses_none() {
    let mut r = Replicas::start(3);
    let first = r.leader(Duration::from_secs(20));
    // The followers serve the API; only the leader fires.
    for i in (0..3).filter(|i| *i != first) {
        let v = r.leader_view(i);
        assert_eq!(v["leader"], false);
        assert_eq!(v["holder"], r.leader_view(first)["replica"]);
    }
    std::thread::sleep(Duration::from_secs(3));
    let mut latencies = Vec::new();
    for _ in 0..2 {
        let old = r.leader(Duration::from_secs(20));
        let at = Timestamp::now();
        r.kill(old);
        let next = r.leader(Duration::from_secs(20));
        assert_ne!(next, old);
        latencies.push(first_run_after(r.port(next), at, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_secs(2));
        // The killed replica comes back as a follower.
        let s = r.spawn(old);
        r.up[old] = Some(s);
        std::thread::sleep(Duration::from_secs(1));
    }
    check_ticks(r.any());
    // TTL 3 s + a try every 500 ms + the next second.
    for l in &latencies {
        assert!(*l <= Duration::from_secs(6), "failover took {l:?}");
    }
    eprintln!("kill -9 → first run of the new leader: {latencies:?}");
}

#[test]
fn a_leader_paused_past_its_lease_commits_nothing_when_it_wakes() {
    let r = Replicas::start(2);
    let old = r.leader(Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(2));
    let pid = r.pid(old);
    pause(pid, true);
    let stopped = Instant::now();
    // The other replica takes over once the lease expires.
    let other = 1 - old;
    let deadline = Instant::now() + Duration::from_secs(20);
    while r.leader_view(other)["leader"] != true {
        assert!(Instant::now() < deadline, "no takeover");
        std::thread::sleep(Duration::from_millis(50));
    }
    let term_new = r.leader_view(other)["term"].as_i64().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    pause(pid, false);
    eprintln!("paused for {:?}", stopped.elapsed());
    // The old leader wakes up believing it leads: it finds its lease gone
    // and follows; nothing it wrote under its old term is committed.
    let deadline = Instant::now() + Duration::from_secs(20);
    while r.leader_view(old)["leader"] != false {
        assert!(
            Instant::now() < deadline,
            "the old leader never stepped down"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(r.leader(Duration::from_secs(5)), other);
    assert_eq!(r.leader_view(old)["term"].as_i64().unwrap(), term_new);
    check_ticks(r.any());
    let log = r.log(old);
    assert!(log.contains("no longer leads"), "{log}");
}

#[test]
fn a_graceful_stop_hands_over_within_a_second_or_two() {
    let mut r = Replicas::start(2);
    let old = r.leader(Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(2));
    let at = Timestamp::now();
    let pid = r.pid(old);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let other = 1 - old;
    let took = first_run_after(r.port(other), at, Duration::from_secs(20));
    let _ = r.up[old].as_mut().unwrap().child.wait();
    r.kill(old);
    assert!(
        took <= Duration::from_secs(2),
        "handover took {took:?} (the lease is resigned, not waited out)"
    );
    std::thread::sleep(Duration::from_secs(2));
    check_ticks(r.port(other));
    eprintln!("graceful stop → first run of the new leader: {took:?}");
}
