//! [`ControlPlane`]: a real etcd and kube-apiserver on loopback, the admin's
//! client, and the hand-played [`Kubelet`] registered as its one node.

use bosun_base::sync::Lock;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

use crate::audit::{AuditLog, Counts};
use crate::kubeconfig::kubeconfig;
use crate::kubelet::Kubelet;
use crate::pki::{self, Pki};
use crate::process;
use crate::runtime;
use crate::tenant::Tenant;

/// How a control plane is started.
#[derive(Clone, Debug)]
pub struct Options {
    /// kube-apiserver's watch cache for pods. Off
    /// (`--watch-cache-sizes=pods#0`), a watch from a compacted
    /// `resourceVersion` is answered by etcd itself: `410 Gone`.
    pub pods_watch_cache: bool,
    /// kube-apiserver's own etcd compaction (every 5 minutes). Off, only
    /// [`ControlPlane::compact`] compacts.
    pub compaction: bool,
    /// `--min-request-timeout` (seconds): watches last between it and twice
    /// it; `None` keeps kube-apiserver's 1800.
    pub min_request_timeout: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pods_watch_cache: true,
            compaction: true,
            min_request_timeout: None,
        }
    }
}

/// A running control plane. Dropping it stops both processes (the shared one
/// lives as long as the test process).
pub struct ControlPlane {
    dir: tempfile::TempDir,
    pki: Pki,
    etcd: Mutex<Option<Child>>,
    etcd_port: u16,
    apiserver: Mutex<Option<Child>>,
    apiserver_args: Vec<String>,
    port: u16,
    /// The harness's own admin client: its pooled connections live on the
    /// harness runtime, so it is never handed to a test (see [`Self::admin`]).
    admin: Client,
    admin_config: kube::Config,
    kubelet: Kubelet,
    audit: Option<AuditLog>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("url", &self.url())
            .field("dir", &self.dir.path())
            .finish()
    }
}

/// How long a process may take to become ready (2 cores, a test binary's
/// other tests running beside it).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

impl ControlPlane {
    /// The control plane shared by every test of this test binary, started on
    /// first use. Tests share it through their own namespaces
    /// ([`ControlPlane::tenant`]).
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<ControlPlane> = OnceLock::new();
        SHARED.get_or_init(|| ControlPlane::start(Options::default(), false, &[]))
    }

    /// A control plane of its own, for tests that stop, hang or compact it.
    pub fn dedicated(options: Options) -> ControlPlane {
        ControlPlane::start(options, false, &[])
    }

    /// A control plane of its own whose kube-apiserver writes an audit log
    /// of every request (level `Metadata`), counted by
    /// [`ControlPlane::audit_counts`]: see [`crate::audit`]. Writing the log
    /// costs kube-apiserver some time per request.
    pub fn audited(options: Options) -> ControlPlane {
        ControlPlane::start(options, true, &[])
    }

    /// As [`ControlPlane::audited`], with more kube-apiserver flags after
    /// the harness's own (a later flag wins), e.g.
    /// `--max-requests-inflight=3000`.
    pub fn audited_with_args(options: Options, apiserver_args: &[String]) -> ControlPlane {
        ControlPlane::start(options, true, apiserver_args)
    }

    fn start(options: Options, audit: bool, extra_args: &[String]) -> ControlPlane {
        let bins = process::bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("bosun-kubetest-")
            .tempdir()
            .expect("a temporary directory");
        let pki = pki::generate(&dir.path().join("pki")).unwrap_or_else(|e| panic!("{e}"));
        let (etcd, etcd_port) = start_etcd(&bins, dir.path());
        let kubelet = Kubelet::start(&pki);
        let audit = audit.then(|| {
            let policy = dir.path().join("audit-policy.yaml");
            std::fs::write(&policy, crate::audit::POLICY).expect("audit policy");
            (policy, AuditLog::new(dir.path().join("audit.log")))
        });
        let mut tries = 0;
        loop {
            tries += 1;
            let port = process::free_port();
            let mut args =
                apiserver_args(dir.path(), &pki, port, etcd_port, kubelet.port(), &options);
            if let Some((policy, log)) = &audit {
                args.extend([
                    format!("--audit-policy-file={}", policy.display()),
                    format!("--audit-log-path={}", log.path().display()),
                    "--audit-log-format=json".into(),
                    // One file: rotation would split the count.
                    "--audit-log-maxsize=0".into(),
                ]);
            }
            args.extend(extra_args.iter().cloned());
            match start_apiserver(&bins, dir.path(), &args, port) {
                Ok(child) => {
                    let admin_config = admin_config(dir.path(), &pki, port);
                    let admin = {
                        let _runtime = runtime().enter();
                        Client::try_from(admin_config.clone()).expect("admin client")
                    };
                    let plane = ControlPlane {
                        pki,
                        etcd: Mutex::new(Some(etcd)),
                        etcd_port,
                        apiserver: Mutex::new(Some(child)),
                        apiserver_args: args,
                        port,
                        admin,
                        admin_config,
                        kubelet,
                        audit: audit.map(|(_, log)| log),
                        dir,
                    };
                    plane.wait_ready();
                    plane.kubelet.register(plane.admin.clone());
                    return plane;
                }
                Err(e) if e.contains("address already in use") && tries < 5 => continue,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// The API server's URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The CA every certificate of this control plane chains to (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// A client acting as the admin (`system:masters`), with a connection
    /// pool of its own. hyper spawns a connection's task on the runtime that
    /// first polls it; a shared pool would let the harness reuse a
    /// connection whose task sits on a test's stopped runtime and hang.
    pub fn admin(&self) -> Client {
        let _runtime = runtime().enter();
        Client::try_from(self.admin_config.clone()).expect("admin client")
    }

    /// The hand-played kubelet: the node pods are bound to, and their logs.
    pub fn kubelet(&self) -> &Kubelet {
        &self.kubelet
    }

    /// A fresh namespace `namespace` with its `default` service account (as
    /// the service-account controller would make it), and a service account
    /// `bosun` bound to a Role with exactly the pod verbs bosun needs; its
    /// kubeconfig (context `context`) is written under this plane's
    /// directory.
    pub fn tenant(&self, namespace: &str, context: &str) -> Tenant {
        Tenant::create(
            self.admin.clone(),
            &self.url(),
            self.ca_pem(),
            self.dir.path(),
            namespace,
            context,
        )
    }

    /// The plane's working directory: certificates, etcd's data,
    /// `apiserver.log`, `etcd.log`, the audit log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits for `/readyz` (its post-start hooks, RBAC's bootstrap roles
    /// among them).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let last = match self.get_text("/readyz") {
                Ok(_) => return,
                Err(e) => e,
            };
            if let Some(child) = self.apiserver.lock().unwrap().as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "kube-apiserver exited ({status}):\n{}",
                        tail(&self.dir.path().join("apiserver.log"))
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready after {READY_TIMEOUT:?} ({last}):\n{}",
                tail(&self.dir.path().join("apiserver.log"))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `GET path` as the admin, as text.
    pub fn get_text(&self, path: &str) -> Result<String, String> {
        let client = self.admin.clone();
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        runtime().block_on(async move {
            tokio::time::timeout(Duration::from_secs(10), client.request_text(request))
                .await
                .map_err(|_| "timed out".to_string())?
                .map_err(|e| e.to_string())
        })
    }

    /// Stops kube-apiserver (SIGTERM, then SIGKILL after 10 s); etcd keeps
    /// the data.
    pub fn stop_apiserver(&self) {
        if let Some(mut child) = self.apiserver.lock().unwrap().take() {
            process::signal(&child, rustix::process::Signal::CONT);
            process::signal(&child, rustix::process::Signal::TERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Starts kube-apiserver again, on the same port with the same flags, and
    /// waits until it is ready.
    pub fn start_apiserver(&self) {
        let bins = process::bin_dir();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match start_apiserver(&bins, self.dir.path(), &self.apiserver_args, self.port) {
                Ok(child) => {
                    *self.apiserver.lock().unwrap() = Some(child);
                    break;
                }
                // The old socket may linger a moment.
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("{e}"),
            }
        }
        self.wait_ready();
    }

    /// Freezes kube-apiserver (SIGSTOP): connections stay open and nothing
    /// answers.
    pub fn pause(&self) {
        if let Some(child) = self.apiserver.lock().unwrap().as_ref() {
            process::signal(child, rustix::process::Signal::STOP);
        }
    }

    /// Lets a paused kube-apiserver go on (SIGCONT).
    pub fn resume(&self) {
        if let Some(child) = self.apiserver.lock().unwrap().as_ref() {
            process::signal(child, rustix::process::Signal::CONT);
        }
    }

    /// Kills kube-apiserver (SIGKILL), as a crash would; etcd keeps the data.
    pub fn kill_apiserver(&self) {
        if let Some(mut child) = self.apiserver.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Writes `n` keys of the harness's own into etcd (outside kube-apiserver's
    /// prefix): etcd's revision moves on, as it does when other objects
    /// change, even while kube-apiserver is stopped.
    pub fn advance_etcd(&self, n: usize) {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let base = format!("http://127.0.0.1:{}", self.etcd_port);
        for i in 0..n {
            ureq::post(format!("{base}/v3/kv/put"))
                .send_json(
                    serde_json::json!({"key": b64(&format!("/kubetest/{i}")), "value": b64("x")}),
                )
                .expect("etcd put");
        }
    }

    /// Compacts etcd at its current revision (through etcd's JSON gateway):
    /// a watch from any older `resourceVersion` that reaches etcd gets
    /// `410 Gone`.
    pub fn compact(&self) {
        let base = format!("http://127.0.0.1:{}", self.etcd_port);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let range: serde_json::Value = agent
            .post(format!("{base}/v3/kv/range"))
            .send_json(serde_json::json!({"key": "AA==", "limit": "1"}))
            .expect("etcd range")
            .body_mut()
            .read_json()
            .expect("etcd range answer");
        let revision = range["header"]["revision"]
            .as_str()
            .expect("a revision")
            .to_string();
        agent
            .post(format!("{base}/v3/kv/compaction"))
            .send_json(serde_json::json!({"revision": revision, "physical": true}))
            .expect("etcd compaction");
    }

    /// The sum of `apiserver_request_total` over the series whose labels
    /// satisfy `keep` (label name -> value).
    pub fn request_total(&self, keep: impl Fn(&crate::metrics::Labels) -> bool) -> f64 {
        let text = self.get_text("/metrics").expect("/metrics");
        crate::metrics::sum(&text, "apiserver_request_total", keep)
    }

    /// The sum of `apiserver_request_total` by the labels `group` picks
    /// (e.g. `(verb, resource, subresource)`), over the series whose labels
    /// satisfy `keep`.
    pub fn request_totals<G: Ord>(
        &self,
        keep: impl Fn(&crate::metrics::Labels) -> bool,
        group: impl Fn(&crate::metrics::Labels) -> G,
    ) -> std::collections::BTreeMap<G, f64> {
        let text = self.get_text("/metrics").expect("/metrics");
        let mut out = std::collections::BTreeMap::new();
        for (labels, value) in crate::metrics::series(&text, "apiserver_request_total") {
            if keep(&labels) {
                *out.entry(group(&labels)).or_insert(0.0) += value;
            }
        }
        out
    }

    /// kube-apiserver's and etcd's process ids (`None` while stopped).
    pub fn pids(&self) -> (Option<u32>, Option<u32>) {
        let pid = |slot: &Mutex<Option<Child>>| slot.locked().as_ref().map(Child::id);
        (pid(&self.apiserver), pid(&self.etcd))
    }

    /// The audit log, when this plane was started by
    /// [`ControlPlane::audited`].
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// Every request the audit log has counted so far (see
    /// [`crate::audit`]). Panics unless this plane was started by
    /// [`ControlPlane::audited`].
    pub fn audit_counts(&self) -> Counts {
        self.audit
            .as_ref()
            .expect("a control plane started by ControlPlane::audited")
            .counts()
    }

    /// The last lines of kube-apiserver's log.
    pub fn apiserver_log(&self) -> String {
        tail(&self.dir.path().join("apiserver.log"))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for slot in [&self.apiserver, &self.etcd] {
            if let Some(mut child) = slot.locked().take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

fn start_etcd(bins: &Path, dir: &Path) -> (Child, u16) {
    let data = dir.join("etcd");
    for attempt in 1..=5 {
        let (client, peer) = (process::free_port(), process::free_port());
        let log = dir.join("etcd.log");
        let mut cmd = Command::new(bins.join("etcd"));
        cmd.arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=default=http://127.0.0.1:{peer}"))
            .arg("--name=default")
            .arg("--unsafe-no-fsync=true")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("etcd log"));
        let mut child = process::spawn(cmd).expect("etcd starts");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let health = ureq::get(format!("http://127.0.0.1:{client}/health"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok());
            if health.is_some_and(|h| h.contains("\"health\":\"true\"")) {
                return (child, client);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.contains("address already in use") && attempt < 5 {
                    let _ = std::fs::remove_dir_all(&data);
                    break;
                }
                panic!("etcd exited ({status}):\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "etcd not healthy after {READY_TIMEOUT:?}:\n{}",
                tail(&log)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    unreachable!("the last attempt panics")
}

fn apiserver_args(
    dir: &Path,
    pki: &Pki,
    port: u16,
    etcd_port: u16,
    kubelet_port: u16,
    options: &Options,
) -> Vec<String> {
    let p = |name: &str| pki.dir.join(name).display().to_string();
    let mut args = vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        // A loopback address the endpoint reconciler would refuse: it is off
        // (no Service traffic goes through this server anyway).
        "--advertise-address=127.0.0.1".into(),
        "--endpoint-reconciler-type=none".into(),
        format!("--cert-dir={}", dir.join("certs").display()),
        format!("--tls-cert-file={}", p("apiserver.crt")),
        format!("--tls-private-key-file={}", p("apiserver.key")),
        format!("--client-ca-file={}", p("ca.crt")),
        format!("--service-account-issuer=https://127.0.0.1:{port}"),
        format!("--service-account-key-file={}", p("sa.pub")),
        format!("--service-account-signing-key-file={}", p("sa.key")),
        "--authorization-mode=RBAC".into(),
        "--allow-privileged=true".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!("--kubelet-certificate-authority={}", p("ca.crt")),
        "--profiling=false".into(),
    ];
    // The kubelet's port is on its Node; this is only the fallback.
    args.push(format!("--kubelet-port={kubelet_port}"));
    if !options.pods_watch_cache {
        args.push("--watch-cache-sizes=pods#0".into());
    }
    if !options.compaction {
        args.push("--etcd-compaction-interval=0".into());
    }
    if let Some(t) = options.min_request_timeout {
        args.push(format!("--min-request-timeout={t}"));
    }
    args
}

fn start_apiserver(bins: &Path, dir: &Path, args: &[String], port: u16) -> Result<Child, String> {
    let log = dir.join("apiserver.log");
    let mut cmd = Command::new(bins.join("kube-apiserver"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("apiserver log"),
        );
    let mut child = process::spawn(cmd).map_err(|e| format!("kube-apiserver: {e}"))?;
    // Until it listens: an early exit (a taken port) is seen here.
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("kube-apiserver exited ({status}):\n{}", tail(&log)));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!(
                "kube-apiserver does not listen after {READY_TIMEOUT:?}:\n{}",
                tail(&log)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn admin_config(dir: &Path, pki: &Pki, port: u16) -> kube::Config {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let path: PathBuf = dir.join("admin.kubeconfig");
    let text = kubeconfig(
        "admin",
        &format!("https://127.0.0.1:{port}"),
        &pki.ca_pem,
        serde_json::json!({
            "client-certificate-data": b64(&pki.admin.cert_pem),
            "client-key-data": b64(&pki.admin.key_pem),
        }),
        "default",
    );
    std::fs::write(&path, &text).expect("admin kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).expect("admin kubeconfig reads");
    runtime().block_on(async move {
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("admin config")
    })
}
