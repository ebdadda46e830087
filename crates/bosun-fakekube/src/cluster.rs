//! [`FakeCluster`]: a handle on a running `bosun-fakekube` process, for tests.
//!
//! The process is spawned with a piped stdin (it exits when that closes), its ready
//! line is read from stdout, and it is killed when the handle is dropped. Control
//! calls are blocking (`ureq`) and **panic** on failure: they are test helpers, and
//! a failed control call is a broken test.
//!
//! Other crates cannot use `env!("CARGO_BIN_EXE_bosun-fakekube")` (cargo only sets it
//! for this crate's own tests), so [`FakeCluster::binary`] looks for the binary in
//! `$BOSUN_FAKEKUBE_BIN`, then next to the running test executable
//! (`target/<profile>/bosun-fakekube`). Build it first with
//! `cargo build -p bosun-fakekube` (same profile as the tests).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::wire::{Deletion, DenyRule, Down, DownMode, Hang, PhaseUpdate, Ready, RequestRecord};

/// The environment variable that overrides where the binary is looked for.
pub const BINARY_ENV: &str = "BOSUN_FAKEKUBE_BIN";
const BINARY_NAME: &str = "bosun-fakekube";
/// How long [`FakeCluster::start_with`] waits for the ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How to start a fake cluster.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `bosun-fakekube` binary; `None`: [`FakeCluster::binary`].
    pub binary: Option<PathBuf>,
    /// Where the kubeconfig and `ready.json` go (created if missing).
    pub dir: PathBuf,
    /// Kubeconfig context (and cluster and user) name.
    pub context: String,
    /// Namespace of the context.
    pub namespace: String,
}

impl Options {
    pub fn new(dir: &Path, context: &str) -> Self {
        Options {
            binary: None,
            dir: dir.to_path_buf(),
            context: context.to_string(),
            namespace: "default".to_string(),
        }
    }
}

/// A running fake API server; dropping it kills the process.
pub struct FakeCluster {
    child: Child,
    ready: Ready,
    token: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for FakeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCluster")
            .field("pid", &self.child.id())
            .field("ready", &self.ready)
            .finish()
    }
}

impl FakeCluster {
    /// Locates the `bosun-fakekube` binary: `$BOSUN_FAKEKUBE_BIN`, else
    /// `target/<profile>/bosun-fakekube` next to the running (test) executable.
    pub fn binary() -> Result<PathBuf, String> {
        if let Some(path) = std::env::var_os(BINARY_ENV) {
            let path = PathBuf::from(path);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(format!("{BINARY_ENV}={} is not a file", path.display()))
            };
        }
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        // Test executables live in target/<profile>/deps/; binaries in target/<profile>/.
        let candidates: Vec<PathBuf> = exe
            .ancestors()
            .skip(1)
            .take(3)
            .map(|dir| dir.join(BINARY_NAME))
            .collect();
        candidates
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .ok_or_else(|| {
                format!(
                    "the {BINARY_NAME} binary was not found (looked at {candidates:?}); build it \
                 first with `cargo build -p bosun-fakekube` (with the same profile as the \
                 tests), or set {BINARY_ENV}"
                )
            })
    }

    /// Starts a fake cluster with the binary found by [`FakeCluster::binary`];
    /// panics if that fails.
    pub fn start(dir: &Path, context: &str) -> FakeCluster {
        Self::start_with(&Options::new(dir, context)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a fake cluster with the given binary; panics if that fails.
    pub fn start_with_binary(binary: &Path, dir: &Path, context: &str) -> FakeCluster {
        let options = Options {
            binary: Some(binary.to_path_buf()),
            ..Options::new(dir, context)
        };
        Self::start_with(&options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a fake cluster and waits for its ready line.
    pub fn start_with(options: &Options) -> Result<FakeCluster, String> {
        let binary = match &options.binary {
            Some(b) => b.clone(),
            None => Self::binary()?,
        };
        let mut child = Command::new(&binary)
            .arg("--dir")
            .arg(&options.dir)
            .arg("--context")
            .arg(&options.context)
            .arg("--namespace")
            .arg(&options.namespace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let result = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(result);
        });
        let line = match rx.recv_timeout(READY_TIMEOUT) {
            Ok(Ok(line)) if !line.trim().is_empty() => line,
            other => {
                let _ = child.kill();
                let status = child.wait().ok();
                return Err(format!(
                    "{} did not become ready ({other:?}, exit status {status:?})",
                    binary.display()
                ));
            }
        };
        let ready: Ready = serde_json::from_str(line.trim())
            .map_err(|e| format!("bad ready line {line:?}: {e}"))?;
        let kubeconfig = std::fs::read_to_string(&ready.kubeconfig)
            .map_err(|e| format!("cannot read {}: {e}", ready.kubeconfig))?;
        let kubeconfig: serde_json::Value = serde_json::from_str(&kubeconfig)
            .map_err(|e| format!("bad kubeconfig {}: {e}", ready.kubeconfig))?;
        let token = kubeconfig["users"][0]["user"]["token"]
            .as_str()
            .ok_or("the kubeconfig has no token")?
            .to_string();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Ok(FakeCluster {
            child,
            ready,
            token,
            agent,
        })
    }

    /// Path of the generated kubeconfig.
    pub fn kubeconfig_path(&self) -> PathBuf {
        PathBuf::from(&self.ready.kubeconfig)
    }

    /// `https://127.0.0.1:PORT`.
    pub fn api_url(&self) -> &str {
        &self.ready.api
    }

    /// `http://127.0.0.1:PORT` of the control API.
    pub fn control_url(&self) -> &str {
        &self.ready.control
    }

    /// The bearer token the API accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn url(&self, path: &str) -> String {
        format!("{}/control/{path}", self.ready.control)
    }

    fn check(what: &str, mut response: ureq::http::Response<ureq::Body>) -> ureq::Body {
        let status = response.status();
        if !status.is_success() {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            panic!("bosun-fakekube control {what} failed: {status} {body}");
        }
        response.into_body()
    }

    fn post_json<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> T {
        let response = self
            .agent
            .post(self.url(path))
            .send_json(body)
            .unwrap_or_else(|e| panic!("bosun-fakekube control POST {path}: {e}"));
        Self::check(path, response)
            .read_json()
            .unwrap_or_else(|e| panic!("bosun-fakekube control POST {path}: bad answer: {e}"))
    }

    fn post_no_answer(&self, path: &str, body: &impl Serialize) {
        let response = self
            .agent
            .post(self.url(path))
            .send_json(body)
            .unwrap_or_else(|e| panic!("bosun-fakekube control POST {path}: {e}"));
        Self::check(path, response);
    }

    fn get_json<T: DeserializeOwned>(&self, path: &str) -> T {
        let response = self
            .agent
            .get(self.url(path))
            .call()
            .unwrap_or_else(|e| panic!("bosun-fakekube control GET {path}: {e}"));
        Self::check(path, response)
            .read_json()
            .unwrap_or_else(|e| panic!("bosun-fakekube control GET {path}: bad answer: {e}"))
    }

    fn delete_path(&self, path: &str) {
        let response = self
            .agent
            .delete(self.url(path))
            .call()
            .unwrap_or_else(|e| panic!("bosun-fakekube control DELETE {path}: {e}"));
        Self::check(path, response);
    }

    /// Sets a pod's phase, container states, reason, message and node; the pod is
    /// MODIFIED. Returns the updated pod.
    pub fn set_phase(&self, ns: &str, name: &str, update: &PhaseUpdate) -> Pod {
        self.post_json(&format!("pods/{ns}/{name}/phase"), update)
    }

    /// Shorthand: every container running.
    pub fn run_pod(&self, ns: &str, name: &str) -> Pod {
        self.set_phase(ns, name, &PhaseUpdate::new("Running"))
    }

    /// Shorthand: every container terminated with exit code 0 (`Completed`).
    pub fn succeed_pod(&self, ns: &str, name: &str) -> Pod {
        self.set_phase(ns, name, &PhaseUpdate::new("Succeeded"))
    }

    /// Shorthand: every container terminated with exit code 1 (`Error`).
    pub fn fail_pod(&self, ns: &str, name: &str) -> Pod {
        self.set_phase(ns, name, &PhaseUpdate::new("Failed"))
    }

    /// Sets the PodScheduled condition to False, reason `Unschedulable`.
    pub fn unschedulable(&self, ns: &str, name: &str, message: Option<&str>) -> Pod {
        let body = match message {
            Some(m) => serde_json::json!({"message": m}),
            None => serde_json::json!({}),
        };
        self.post_json(&format!("pods/{ns}/{name}/unschedulable"), &body)
    }

    /// Appends raw text to a pod's log.
    pub fn append_log(&self, ns: &str, name: &str, text: &str) {
        let path = format!("pods/{ns}/{name}/log");
        let response = self
            .agent
            .post(self.url(&path))
            .content_type("text/plain")
            .send(text)
            .unwrap_or_else(|e| panic!("bosun-fakekube control POST {path}: {e}"));
        Self::check(&path, response);
    }

    /// Removes a pod as if its node was lost (DELETED event, recorded as `control`).
    pub fn delete_pod(&self, ns: &str, name: &str) -> Pod {
        self.post_json(&format!("pods/{ns}/{name}/delete"), &serde_json::json!({}))
    }

    /// Ends every open watch with a 410 ERROR and forgets the history, so watches
    /// from earlier resourceVersions get 410 until the client re-lists.
    pub fn gone(&self) {
        let _: serde_json::Value = self.post_json("gone", &serde_json::json!({}));
    }

    /// While `true`, every Kubernetes request hangs without an answer.
    pub fn set_hang(&self, hang: bool) {
        self.post_no_answer("hang", &Hang { hang });
    }

    /// While `true`, the Kubernetes API closes every connection
    /// ([`DownMode::Refuse`]).
    pub fn set_down(&self, down: bool) {
        self.set_down_mode(down, DownMode::Refuse);
    }

    /// While `down`, the Kubernetes API behaves as `mode` says.
    pub fn set_down_mode(&self, down: bool, mode: DownMode) {
        self.post_no_answer("down", &Down { down, mode });
    }

    /// Makes SelfSubjectAccessReviews for these verbs on `resource`/`subresource`
    /// answer `allowed: false` (`"*"` denies every verb).
    pub fn deny(&self, verbs: &[&str], resource: &str, subresource: Option<&str>) {
        let rule = DenyRule {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            resource: resource.to_string(),
            subresource: subresource.map(str::to_string),
        };
        self.post_no_answer("deny", &rule);
    }

    /// Allows everything again.
    pub fn clear_denies(&self) {
        self.delete_path("deny");
    }

    /// Every pod, in namespace/name order.
    pub fn pods(&self) -> Vec<Pod> {
        self.get_json("pods")
    }

    /// One pod, if it exists.
    pub fn pod(&self, ns: &str, name: &str) -> Option<Pod> {
        self.pods().into_iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name)
        })
    }

    /// The Kubernetes requests received, oldest first (including refused ones).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.get_json("requests")
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.delete_path("requests");
    }

    /// The pods deleted so far, oldest first.
    pub fn deleted(&self) -> Vec<Deletion> {
        self.get_json("deleted")
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
