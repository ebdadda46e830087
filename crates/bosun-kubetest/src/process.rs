//! The control plane's processes, and where their binaries are.
//!
//! Children are spawned by one long-lived thread with `PR_SET_PDEATHSIG`
//! (SIGKILL): the kernel sends that signal when the *thread* that forked the
//! child ends, so spawning from short-lived test threads would kill a shared
//! server when the test that started it returns. This thread lives as long
//! as the test process, so the servers die with it, even when a test binary
//! is killed and no destructor runs.

use bosun_base::sync::Lock;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// Where the binaries come from when it is set.
pub const BIN_DIR_ENV: &str = "BOSUN_KUBE_BIN_DIR";

/// The directory holding `kube-apiserver` and `etcd`: `$BOSUN_KUBE_BIN_DIR`,
/// else what `tools/kube/build.sh --check` prints. Panics, saying how to
/// build them (`tools/test`), when neither has them.
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
            let dir = PathBuf::from(dir);
            return if dir.join("kube-apiserver").is_file() && dir.join("etcd").is_file() {
                Ok(dir)
            } else {
                Err(format!(
                    "${BIN_DIR_ENV}={} has no kube-apiserver and etcd: run tools/test --setup-only to build them and print the directory to export",
                    dir.display()
                ))
            };
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/kube/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("--check")
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "kube-apiserver and etcd are needed by this test and are not built: run the tests with tools/test, which builds them (or tools/test --setup-only, then export what it prints). {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    });
    match found {
        Ok(dir) => dir.clone(),
        Err(e) => panic!("{e}"),
    }
}

type Request = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from the long-lived spawner thread, with SIGKILL as its
/// parent-death signal.
pub fn spawn(mut cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("kubetest-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawner thread");
        Mutex::new(tx)
    });
    bosun_base::process::die_with_parent(&mut cmd);
    let (tx, rx) = mpsc::channel();
    spawner
        .locked()
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// Sends `signal` to `child`.
pub fn signal(child: &Child, signal: rustix::process::Signal) {
    let _ = rustix::process::kill_process(rustix::process::Pid::from_child(child), signal);
}

/// A free loopback port (bound, then released: the caller retries if another
/// process takes it first).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
