//! N runs of one Kubernetes job through a release-built `bosun serve` on one
//! real kube-apiserver, the harness completing pods as they start: runs per
//! second, and the API requests per run, bosun's own (from the audit log,
//! user `system:serviceaccount:bench:bosun`) beside everyone's
//! (`apiserver_request_total`), against plank's calls per ProwJob.
//!
//! `runs_bench BOSUN_BINARY [N]` (default 1,000); `bench/kube-runs.sh` builds
//! bosun and runs it. `KUBE_BENCH_WORKERS` (default 8): the harness's
//! threads playing the kubelet; `KUBE_BENCH_APISERVER_ARGS`: more
//! kube-apiserver flags (space-separated), e.g. larger priority-and-fairness
//! limits (`--max-requests-inflight=3000 --max-mutating-requests-inflight=3000`);
//! `BOSUN_BENCH_STORE=postgres`: the daemon on a PostgreSQL server the
//! benchmark starts.
//!
//! The setup: a dedicated control plane with its audit log on
//! ([`ControlPlane::audited`]), a tenant `bench` (bosun's service account
//! bound to its Role), one periodic job on that cluster (no
//! `max_concurrency`), `sinker.terminated_pod_ttl: 1s` so finished pods are
//! deleted within seconds. The harness watches the namespace as the admin;
//! for each new pod a worker binds it, marks it running, writes a line of
//! its log, ends the log and marks it succeeded: three requests as the admin
//! (binding, two status patches), no GET.
//!
//! Measured: from the first `POST /api/v1/runs` to the last run's
//! `completed_at` (the daemon's clock, on this machine); the runs list is
//! polled every 250 ms to see the end. Requests are counted over two
//! windows starting at the first trigger: to the moment no run was seen
//! active any more, and to the moment the last pod was gone (the sinker's
//! deletions; 1 s after the pod ended at the earliest).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_kubetest::audit::{self, Counts};
use bosun_kubetest::{ControlPlane, Options, Outcome};

mod common;
use common::{Bosun, Harness, CONTEXT, JOB, NS};

/// plank's requests to a build cluster per ProwJob: one pod create (plank's
/// controller-runtime client) and one pod delete (sinker, once the job is
/// done and `terminated_pod_ttl` has passed). Both read pods from informer
/// caches (one LIST and one WATCH per build cluster each, not per job), and
/// an undecorated job's log is read from its pod only when someone looks
/// (deck): see docs/performance.md.
const PLANK_PER_PROWJOB: f64 = 2.0;

fn main() {
    let mut args = std::env::args().skip(1);
    let bosun = args.next().expect("path of the bosun binary");
    let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let workers: usize = std::env::var("KUBE_BENCH_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);

    let extra = common::apiserver_args();

    let started = Instant::now();
    let plane = ControlPlane::audited_with_args(Options::default(), &extra);
    let tenant = plane.tenant(NS, CONTEXT);
    let bosun_user = audit::service_account(NS, "bosun");
    eprintln!(
        "control plane {} ready in {:.1} s; audit log {}",
        plane.url(),
        started.elapsed().as_secs_f64(),
        plane.audit().unwrap().path().display()
    );

    // A refused call in the harness (a pod bound already: bosun revived it
    // and the harness is behind) is counted and told in one line.
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        let line = what.lines().next().unwrap_or("");
        eprintln!("panicked: {}", line.chars().take(240).collect::<String>());
    }));

    // The harness: a watch of the namespace, and workers that complete each
    // new pod.
    // The workers hold the plane weakly and stop when told: the plane (its
    // processes and its directory) goes when `main` ends, even by a panic.
    let plane = Arc::new(plane);
    let harness = Harness::start(&plane, workers, |kubelet, pod, name| {
        kubelet.run_pod(pod);
        kubelet.append_log(NS, name, &format!("hello from {name}\n"));
        kubelet.finish_pod(pod, Outcome::success());
    });

    // The daemon.
    let mut bosun = Bosun::start(
        &bosun,
        "bosun-kube-runs-",
        &format!("pod_namespace: {NS}\nsinker: {{terminated_pod_ttl: 1s}}\n"),
        "[\"true\"]",
        &tenant.kubeconfig,
    );
    bosun.wait_reachable();

    let by_op = |l: &bosun_kubetest::metrics::Labels| {
        (
            l.get("verb").to_string(),
            l.get("resource").to_string(),
            l.get("subresource").to_string(),
        )
    };
    let audit0 = plane.audit_counts();
    let totals0 = plane.request_totals(|_| true, by_op);
    let (apiserver_pid, etcd_pid) = plane.pids();
    let (apiserver_pid, etcd_pid) = (apiserver_pid.unwrap(), etcd_pid.unwrap());
    let daemon_pid = bosun.child.id();
    let all_cpu = || {
        [
            cpu_seconds(daemon_pid),
            cpu_seconds(apiserver_pid),
            cpu_seconds(etcd_pid),
            cpu_seconds(std::process::id()),
        ]
    };
    let cpu0 = all_cpu();

    // N triggers, from 8 threads.
    let t0 = jiff::Timestamp::now();
    let clock0 = Instant::now();
    bosun.trigger(&Arc::new(AtomicUsize::new(0)), n);
    let triggered = clock0.elapsed();

    // Until no run is active.
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let idle = bosun
            .get_json("/api/v1/runs?active=true&limit=1")
            .is_some_and(|v| v["runs"].as_array().is_some_and(|a| a.is_empty()));
        if idle {
            break;
        }
        if let Ok(Some(status)) = bosun.child.try_wait() {
            panic!("bosun exited ({status}):\n{}", bosun.log_tail());
        }
        assert!(
            Instant::now() < deadline,
            "runs still active after 900 s ({} pods completed):\n{}",
            harness.done.load(Ordering::Relaxed),
            bosun.log_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let seen_done = clock0.elapsed();
    let audit_done = plane.audit_counts().since(&audit0);
    let totals_done = diff(&plane.request_totals(|_| true, by_op), &totals0);
    let cpu_done: Vec<f64> = all_cpu().iter().zip(cpu0).map(|(a, b)| a - b).collect();

    // Every run, and when the last one ended.
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    let mut why: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<jiff::Timestamp> = None;
    let mut offset = 0;
    loop {
        let page = bosun
            .get_json(&format!(
                "/api/v1/runs?job={JOB}&limit=1000&offset={offset}"
            ))
            .expect("the runs list");
        let runs = page["runs"].as_array().cloned().unwrap_or_default();
        if runs.is_empty() {
            break;
        }
        offset += runs.len();
        for run in &runs {
            if run["state"] != "success" {
                why.entry(run["state"].as_str().unwrap_or("?").to_string())
                    .or_insert_with(|| run["description"].as_str().unwrap_or("").to_string());
            }
            *states
                .entry(run["state"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
            if let Some(t) = run["completed_at"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            {
                last = Some(last.map_or(t, |l: jiff::Timestamp| l.max(t)));
            }
        }
    }
    let wall = last
        .map(|l| l.duration_since(t0).as_secs_f64())
        .expect("runs that ended");

    // Until the sinker has deleted every pod.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !plane.kubelet().list(NS).is_empty() {
        assert!(
            Instant::now() < deadline,
            "pods left 120 s after the runs ended:\n{}",
            bosun.log_tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let seen_gone = clock0.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let audit_gone = plane.audit_counts().since(&audit0);
    let totals_gone = diff(&plane.request_totals(|_| true, by_op), &totals0);
    let cpu_gone: Vec<f64> = all_cpu().iter().zip(cpu0).map(|(a, b)| a - b).collect();
    let _ = bosun.child.kill();
    let _ = bosun.child.wait();
    let (completed, failed) = (
        harness.done.load(Ordering::Relaxed),
        harness.refused.load(Ordering::Relaxed),
    );
    harness.stop();
    if let Some(keep) = std::env::var_os("KUBE_BENCH_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&bosun.log, keep.join("bosun.log")).unwrap();
        std::fs::copy(plane.audit().unwrap().path(), keep.join("audit.log")).unwrap();
        std::fs::copy(
            plane.dir().join("apiserver.log"),
            keep.join("apiserver.log"),
        )
        .unwrap();
        eprintln!(
            "bosun.log, audit.log and apiserver.log kept in {}",
            keep.display()
        );
    }

    // The report.
    let per = |x: f64| x / n as f64;
    println!(
        "{n} runs of one Kubernetes job, one kube-apiserver (audit log on{}), {workers} harness workers completing pods as they start",
        if extra.is_empty() { String::new() } else { format!(", {}", extra.join(" ")) }
    );
    println!(
        "triggered in {:.2} s; first trigger to last run ended (completed_at): {wall:.2} s = {:.1} runs/s; states {states:?}",
        triggered.as_secs_f64(),
        n as f64 / wall
    );
    for (state, description) in &why {
        println!("  a run in {state}: {description}");
    }
    println!(
        "the harness completed {} pods ({} of its calls refused)",
        completed, failed
    );
    println!(
        "seen all ended at {:.2} s, all pods deleted at {:.2} s",
        seen_done.as_secs_f64(),
        seen_gone.as_secs_f64(),
    );
    for (i, who) in ["bosun", "kube-apiserver", "etcd", "the harness"]
        .iter()
        .enumerate()
    {
        println!(
            "  CPU of {who}: {:.2} s to the end ({:.2} ms per run), {:.2} s to the deletions ({:.2} ms per run)",
            cpu_done[i],
            cpu_done[i] * 1000.0 / n as f64,
            cpu_gone[i],
            cpu_gone[i] * 1000.0 / n as f64
        );
    }
    println!();
    println!("bosun's requests ({bosun_user}, audit log; per run in brackets):");
    let ours_done = audit_done.of_user(&bosun_user);
    let ours_gone = audit_gone.of_user(&bosun_user);
    table(&ours_done, &ours_gone, n);
    println!();
    println!("the harness's requests (admin, {}):", audit::ADMIN_USER);
    table(
        &audit_done.of_user(audit::ADMIN_USER),
        &audit_gone.of_user(audit::ADMIN_USER),
        n,
    );
    let others = |c: &Counts| c.filter(|k| k.user != bosun_user && k.user != audit::ADMIN_USER);
    println!();
    println!("everyone else's (kube-apiserver's own):");
    table(&others(&audit_done), &others(&audit_gone), n);
    println!();
    println!("apiserver_request_total, all users (a request counts when it ends):");
    let keys: std::collections::BTreeSet<_> = totals_gone.keys().collect();
    for k in keys {
        let (d, g) = (
            totals_done.get(k).copied().unwrap_or(0.0),
            totals_gone.get(k).copied().unwrap_or(0.0),
        );
        println!(
            "  {:<8} {:<36} {:>7} ({:.3})  {:>7} ({:.3})",
            k.0,
            op(&k.1, &k.2),
            d,
            per(d),
            g,
            per(g)
        );
    }
    let (td, tg) = (
        totals_done.values().sum::<f64>(),
        totals_gone.values().sum::<f64>(),
    );
    println!(
        "  {:<45} {td:>7} ({:.3})  {tg:>7} ({:.3})",
        "total",
        per(td),
        per(tg)
    );
    println!();
    let (bd, bg) = (ours_done.total() as f64, ours_gone.total() as f64);
    println!(
        "plank per ProwJob on the build cluster: {PLANK_PER_PROWJOB} (create pods, delete pods)"
    );
    println!(
        "bosun per run: {:.3} to the end, {:.3} with the deletions; bosun / plank: {:.2}",
        per(bd),
        per(bg),
        per(bg) / PLANK_PER_PROWJOB
    );
}

/// `resource/subresource`.
fn op(resource: &str, subresource: &str) -> String {
    if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    }
}

/// Requests by verb, resource and code, in both windows, with their count per
/// run.
fn table(done: &Counts, gone: &Counts, n: usize) {
    let key = |k: &audit::Key| (k.verb.clone(), op(&k.resource, &k.subresource), k.code);
    let (d, g) = (done.group(key), gone.group(key));
    let per = |x: u64| x as f64 / n as f64;
    println!(
        "  {:<8} {:<36} {:>4}  {:>17}  {:>17}",
        "verb", "resource", "code", "to the end", "to the deletions"
    );
    for (k, gn) in &g {
        let dn = d.get(k).copied().unwrap_or(0);
        println!(
            "  {:<8} {:<36} {:>4}  {:>7} ({:>7.3})  {:>7} ({:>7.3})",
            k.0,
            k.1,
            k.2,
            dn,
            per(dn),
            gn,
            per(*gn)
        );
    }
    println!(
        "  {:<50}  {:>7} ({:>7.3})  {:>7} ({:>7.3})",
        "total",
        done.total(),
        per(done.total()),
        gone.total(),
        per(gone.total())
    );
}

fn diff<K: Ord + Clone>(now: &BTreeMap<K, f64>, before: &BTreeMap<K, f64>) -> BTreeMap<K, f64> {
    now.iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (k.clone(), d))
        })
        .collect()
}

/// A process's user and system CPU time, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime + stime, in clock ticks (100 per second).
    (ticks(11) + ticks(12)) / 100.0
}
