//! What the Kubernetes benchmarks share: a release-built `bosun serve` with
//! one periodic job on one cluster, and an HTTP agent for its API. The
//! daemon's store is SQLite in its data directory, or with
//! `BOSUN_BENCH_STORE=postgres` a database of a PostgreSQL server the
//! benchmark starts (as `run_bench`'s daemons).

// Each benchmark uses a part.
#![allow(dead_code)]

use bosun_base::sync::Lock;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bosun_kubetest::kubelet::Kubelet;
use bosun_kubetest::ControlPlane;
use k8s_openapi::api::core::v1::Pod;

#[path = "../../../bosun/examples/common/store.rs"]
mod store;

/// More kube-apiserver flags for a benchmark's control plane
/// (`KUBE_BENCH_APISERVER_ARGS`, split on white space).
pub fn apiserver_args() -> Vec<String> {
    std::env::var("KUBE_BENCH_APISERVER_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The benchmarks' pod namespace.
pub const NS: &str = "bench";
/// The cluster's kubeconfig context (and alias).
pub const CONTEXT: &str = "build-a";
/// The job.
pub const JOB: &str = "k-job";

/// The daemon, killed when dropped (a panic included), its directory with it.
pub struct Bosun {
    /// The process.
    pub child: std::process::Child,
    /// Its API's base URL.
    pub base: String,
    /// Its log (stderr).
    pub log: std::path::PathBuf,
    /// Its data directory.
    pub data: std::path::PathBuf,
    /// An agent for its API.
    pub agent: ureq::Agent,
    _dir: tempfile::TempDir,
    /// Its store's server, if not SQLite (stopped after the daemon).
    _store: store::BenchStore,
}

impl Drop for Bosun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bosun {
    /// `bosun serve` (the binary `bosun`) with `config` and one periodic
    /// [`JOB`] on [`CONTEXT`] running `command` (flow YAML), reaching the
    /// cluster through `kubeconfig`; its files under a temporary directory
    /// named after `prefix`.
    pub fn start(
        bosun: &str,
        prefix: &str,
        config: &str,
        command: &str,
        kubeconfig: &Path,
    ) -> Bosun {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("jobs")).unwrap();
        std::fs::write(dir.path().join("config.yaml"), config).unwrap();
        std::fs::write(
            dir.path().join("jobs/jobs.yaml"),
            format!("periodics:\n- name: {JOB}\n  cron: \"0 0 31 2 *\"\n  cluster: {CONTEXT}\n  spec: {{containers: [{{image: alpine, command: {command}}}]}}\n"),
        )
        .unwrap();
        let port = bosun_kubetest::process::free_port();
        let bench_store = store::BenchStore::from_env();
        eprintln!("store: {}", bench_store.name());
        let log = dir.path().join("bosun.log");
        let data = dir.path().join("data");
        let child = Command::new(bosun)
            .args(["serve", "--config"])
            .arg(dir.path().join("config.yaml"))
            .arg("--job-config")
            .arg(dir.path().join("jobs"))
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(bench_store.args())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("bosun starts");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Bosun {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            data,
            agent,
            _dir: dir,
            _store: bench_store,
        }
    }

    /// `GET path` of its API, as JSON, if it answers so.
    pub fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        self.agent
            .get(format!("{}{path}", self.base))
            .call()
            .ok()?
            .body_mut()
            .read_json()
            .ok()
    }

    /// The last 40 lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits until [`CONTEXT`] is `Reachable` (at most 60 s), then 2 s more:
    /// the watch of its pods is listed and open.
    pub fn wait_reachable(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reachable = self.get_json("/api/v1/clusters").is_some_and(|v| {
                v["clusters"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["alias"] == CONTEXT && c["status"] == "Reachable")
                })
            });
            if reachable {
                break;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("bosun exited ({status}):\n{}", self.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "{CONTEXT} never Reachable:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(2));
    }

    /// `n` runs of [`JOB`] triggered from 8 threads (`next`: how many were
    /// triggered so far, shared across calls).
    pub fn trigger(&self, next: &std::sync::Arc<std::sync::atomic::AtomicUsize>, n: usize) {
        use std::sync::atomic::Ordering;
        let clients: Vec<_> = (0..8)
            .map(|_| {
                let (next, agent, base) = (next.clone(), self.agent.clone(), self.base.clone());
                std::thread::spawn(move || loop {
                    if next.fetch_add(1, Ordering::Relaxed) >= n {
                        next.fetch_min(n, Ordering::Relaxed);
                        return;
                    }
                    let mut r = agent
                        .post(format!("{base}/api/v1/runs"))
                        .send_json(serde_json::json!({ "job": JOB }))
                        .expect("POST /api/v1/runs");
                    let status = r.status().as_u16();
                    let body = r.body_mut().read_to_string().unwrap_or_default();
                    assert_eq!(status, 201, "{body}");
                })
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
    }
}

/// The harness playing the kubelet: `workers` threads take each new pod of
/// [`NS`] once and `play` it. A call the API refuses panics in the kubelet:
/// that pod is left as it is and counted in `refused`, the others in `done`.
/// The threads hold the plane weakly and end when `stop` is set (or the
/// plane is gone).
pub struct Harness {
    /// Pods played.
    pub done: Arc<AtomicUsize>,
    /// Pods the API refused the harness.
    pub refused: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Harness {
    /// Starts `workers` threads playing `play(kubelet, pod, name)` on each
    /// new pod of `plane`.
    pub fn start(
        plane: &Arc<ControlPlane>,
        workers: usize,
        play: impl Fn(&Kubelet, &Pod, &str) + Send + Sync + 'static,
    ) -> Harness {
        let (done, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let pods = Arc::new(Mutex::new(plane.kubelet().new_pods(NS)));
        let play = Arc::new(play);
        let threads = (0..workers)
            .map(|_| {
                let (pods, plane, play) = (pods.clone(), Arc::downgrade(plane), play.clone());
                let (done, refused, stop) = (done.clone(), refused.clone(), stop.clone());
                std::thread::spawn(move || loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let next = pods.locked().recv_timeout(Duration::from_millis(200));
                    let pod = match next {
                        Ok(p) => p,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                        Err(_) => return,
                    };
                    let Some(plane) = plane.upgrade() else { return };
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let played = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        play(plane.kubelet(), &pod, &name)
                    }));
                    match played {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => refused.fetch_add(1, Ordering::Relaxed),
                    };
                })
            })
            .collect();
        Harness {
            done,
            refused,
            stop,
            threads,
        }
    }

    /// Stops the threads and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}
