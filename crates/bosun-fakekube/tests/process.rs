//! The process side: ready line, files, kubeconfig contents, binary lookup, and the
//! exit rules (stdin EOF, SIGTERM).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bosun_fakekube::{FakeCluster, Options, Ready};
use kube::config::{KubeConfigOptions, Kubeconfig};

const BIN: &str = env!("CARGO_BIN_EXE_bosun-fakekube");

fn spawn(dir: &Path) -> (Child, Ready) {
    let mut child = Command::new(BIN)
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Ready = serde_json::from_str(&line).unwrap();
    (child, ready)
}

fn wait_for_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ready_line_matches_ready_json_and_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, ready) = spawn(dir.path());
    let on_disk: Ready =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("ready.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk, ready);
    assert!(ready.api.starts_with("https://127.0.0.1:"));
    assert!(ready.control.starts_with("http://127.0.0.1:"));
    assert_eq!(Path::new(&ready.kubeconfig), dir.path().join("kubeconfig"));
    let kubeconfig = Kubeconfig::read_from(&ready.kubeconfig).unwrap();
    assert_eq!(kubeconfig.current_context.as_deref(), Some("fake"));
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some(ready.api.as_str()));
    assert!(cluster.certificate_authority_data.is_some());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn context_and_namespace_options_reach_the_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCluster::start_with(&Options {
        binary: Some(BIN.into()),
        namespace: "jobs".to_string(),
        ..Options::new(dir.path(), "ci")
    })
    .unwrap();
    let kubeconfig = Kubeconfig::read_from(fake.kubeconfig_path()).unwrap();
    assert_eq!(kubeconfig.current_context.as_deref(), Some("ci"));
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "jobs");
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        fake.api_url()
    );
}

#[test]
fn exits_when_stdin_closes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = spawn(dir.path());
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "runs while stdin is open"
    );
    drop(child.stdin.take());
    assert!(wait_for_exit(&mut child).success());
}

#[test]
fn exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = spawn(dir.path());
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(wait_for_exit(&mut child).success());
}

#[test]
fn drop_kills_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCluster::start_with_binary(Path::new(BIN), dir.path(), "fake");
    let proc_dir = format!("/proc/{}", fake.pid());
    assert!(Path::new(&proc_dir).exists());
    drop(fake);
    // Drop waits for the child, so it is gone (reaped) afterwards.
    assert!(!Path::new(&proc_dir).exists());
}

#[test]
fn binary_is_found_next_to_the_test_executable() {
    if std::env::var_os(bosun_fakekube::cluster::BINARY_ENV).is_some() {
        return;
    }
    let found = FakeCluster::binary().unwrap();
    assert_eq!(
        found.canonicalize().unwrap(),
        Path::new(BIN).canonicalize().unwrap()
    );
}

#[test]
fn bad_arguments_exit_2() {
    let status = Command::new(BIN)
        .arg("--context")
        .arg("x")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}
