//! bosun against Kubernetes build clusters. No Kubernetes API server can be
//! installed on these machines, so the clusters are `bosun-fakekube`
//! processes: fake API servers speaking TLS with a generated CA, reached
//! through kube-rs exactly as a real cluster would be. (Build the fake first
//! when running this file alone: `cargo build -p bosun-fakekube`;
//! `cargo test --workspace` builds it.)

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bosun_fakekube::FakeCluster;

struct Daemon {
    child: Child,
    port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &std::path::Path, kubeconfigs: &[std::path::PathBuf]) -> Daemon {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), "{}\n").unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), "periodics: []\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bosun"));
    cmd.arg("serve")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--job-config")
        .arg(dir.join("jobs"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env("BOSUN_HEALTH_INTERVAL_MS", "200")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for k in kubeconfigs {
        cmd.arg("--kubeconfig").arg(k);
    }
    let daemon = Daemon {
        child: cmd.spawn().unwrap(),
        port,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(port, "/healthz").is_none() {
        assert!(Instant::now() < deadline, "daemon did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon
}

fn get(port: u16, path: &str) -> Option<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .get(format!("http://127.0.0.1:{port}{path}"))
        .call()
        .ok()?;
    r.body_mut().read_to_string().ok()
}

/// Waits until cluster `alias` has `status`; returns its entry.
fn wait_status(port: u16, alias: &str, status: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let body = get(port, "/api/v1/clusters").unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let c = v["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["alias"] == alias)
            .cloned()
            .unwrap_or_else(|| panic!("no cluster {alias}: {v}"));
        if c["status"] == status {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "{alias} never became {status}: {c}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn cluster_health_follows_each_api_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeCluster::start(&dir.path().join("a"), "build-a");
    let b = FakeCluster::start(&dir.path().join("b"), "build-b");
    let daemon = start(
        &dir.path().join("bosun"),
        &[a.kubeconfig_path(), b.kubeconfig_path()],
    );
    let port = daemon.port;
    let quick = Duration::from_secs(10);
    for alias in ["build-a", "build-b"] {
        let c = wait_status(port, alias, "Reachable", quick);
        assert_eq!(c["kind"], "kubernetes");
        assert_eq!(c["context"], alias);
    }
    // Missing permissions are named.
    b.deny(&["create"], "pods", None);
    let c = wait_status(port, "build-b", "MissingPermissions", quick);
    assert_eq!(c["prow_status"], "MissingPermissions");
    assert!(c["reason"].as_str().unwrap().contains("create pods"), "{c}");
    assert_eq!(
        wait_status(port, "build-a", "Reachable", quick)["status"],
        "Reachable"
    );
    // A cluster whose API is down is Unreachable after two failed probes.
    a.set_down(true);
    let c = wait_status(port, "build-a", "Unreachable", quick);
    assert_eq!(c["prow_status"], "Error");
    a.set_down(false);
    wait_status(port, "build-a", "Reachable", quick);
    // A cluster that hangs does not hold back another's probes: b's fix is
    // seen long before a's calls time out (10 s).
    a.set_hang(true);
    std::thread::sleep(Duration::from_millis(300));
    b.clear_denies();
    let started = Instant::now();
    wait_status(port, "build-b", "Reachable", quick);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "b waited for a: {:?}",
        started.elapsed()
    );
    // The hung cluster is Unreachable once its calls have timed out twice.
    wait_status(port, "build-a", "Unreachable", Duration::from_secs(40));
    a.set_hang(false);
}
