//! Kubernetes build clusters through kube-rs: a client per kubeconfig context
//! (every API call times out after [`API_TIMEOUT`]) and the health probe.
//!
//! The probe asks `/version`, then, with one SelfSubjectAccessReview per verb,
//! whether bosun may `create, delete, list, watch, get, patch` pods and `get`
//! `pods/log` in the pod namespace. A cluster is `Reachable` when all is
//! allowed, `MissingPermissions` when the API answers but denies a verb, and
//! `Unreachable` after two failed probes in a row (one failure may be a blip).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::executor::{ExecError, Executor, JobProcess, RunStatus};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// How long any call to a cluster's API may take.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);

/// The pod verbs bosun needs (Prow's list).
pub const POD_VERBS: [&str; 6] = ["create", "delete", "list", "watch", "get", "patch"];

/// A client for `context` of `kubeconfig` (the default kubeconfig when none).
pub async fn client(kubeconfig: Option<&Path>, context: &str) -> Result<Client, String> {
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(file, &options).await
        }
        None => Config::from_kubeconfig(&options).await,
    }
    .map_err(|e| format!("context {context:?}: {e}"))?;
    config.connect_timeout = Some(API_TIMEOUT);
    config.read_timeout = Some(API_TIMEOUT);
    config.write_timeout = Some(API_TIMEOUT);
    // kube retries 429, 503 and 504 answers for minutes by default; bosun's
    // own loops come back to a cluster soon enough, and a call must not hold
    // a task past the API timeout.
    config.default_retry = false;
    Client::try_from(config).map_err(|e| format!("context {context:?}: {e}"))
}

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The API answered and allows every verb bosun needs.
    Allowed,
    /// The API answered but denies these (`verb resource[/subresource]`).
    Denied(Vec<String>),
    /// The API did not answer (or answered an error).
    Failed(String),
}

/// Probes a cluster: `/version`, then the access reviews. Each call is bounded
/// by [`API_TIMEOUT`], so a hanging cluster costs at most that per call.
pub async fn probe(client: &Client, namespace: &str) -> Probe {
    match tokio::time::timeout(API_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Probe::Failed(format!("version: {e}")),
        Err(_) => return Probe::Failed("version: timed out".into()),
    }
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = POD_VERBS
        .iter()
        .map(|v| (*v, None))
        .chain(std::iter::once(("get", Some("log"))));
    let mut denied = Vec::new();
    for (verb, subresource) in asks {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(namespace.to_string()),
                    verb: Some(verb.to_string()),
                    resource: Some("pods".into()),
                    subresource: subresource.map(str::to_string),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let what = match subresource {
            Some(s) => format!("{verb} pods/{s}"),
            None => format!("{verb} pods"),
        };
        match tokio::time::timeout(API_TIMEOUT, reviews.create(&PostParams::default(), &review))
            .await
        {
            Ok(Ok(r)) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(Ok(_)) => denied.push(what),
            Ok(Err(e)) => return Probe::Failed(format!("access review ({what}): {e}")),
            Err(_) => return Probe::Failed(format!("access review ({what}): timed out")),
        }
    }
    if denied.is_empty() {
        Probe::Allowed
    } else {
        Probe::Denied(denied)
    }
}

/// A build cluster's health, as `GET /api/v1/clusters` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Runs can start there.
    Reachable,
    /// Two probes in a row failed.
    Unreachable(String),
    /// The API answers, but bosun may not do everything it needs.
    MissingPermissions(Vec<String>),
    /// Listed in `disabled_clusters`.
    Disabled,
}

impl Health {
    /// bosun's word.
    pub fn word(&self) -> &'static str {
        match self {
            Health::Reachable => "Reachable",
            Health::Unreachable(_) => "Unreachable",
            Health::MissingPermissions(_) => "MissingPermissions",
            Health::Disabled => "Disabled",
        }
    }

    /// Prow's word for the same (`Reachable | No-Manager | Error |
    /// MissingPermissions`): a disabled cluster has no manager.
    pub fn prow_word(&self) -> &'static str {
        match self {
            Health::Reachable => "Reachable",
            Health::Unreachable(_) => "Error",
            Health::MissingPermissions(_) => "MissingPermissions",
            Health::Disabled => "No-Manager",
        }
    }
}

/// A cluster's health over successive probes: one failure keeps the last
/// answer, the second in a row makes it `Unreachable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    health: Health,
    failures: u32,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            health: Health::Unreachable("not probed yet".into()),
            failures: 0,
        }
    }
}

impl Tracker {
    /// Takes a probe's result; returns the health now.
    pub fn record(&mut self, probe: Probe) -> &Health {
        match probe {
            Probe::Allowed => {
                self.failures = 0;
                self.health = Health::Reachable;
            }
            Probe::Denied(verbs) => {
                self.failures = 0;
                self.health = Health::MissingPermissions(verbs);
            }
            Probe::Failed(why) => {
                self.failures += 1;
                if self.failures >= 2 || matches!(self.health, Health::Unreachable(_)) {
                    self.health = Health::Unreachable(why);
                }
            }
        }
        &self.health
    }

    /// The health now.
    pub fn health(&self) -> &Health {
        &self.health
    }
}

/// A Kubernetes build cluster's executor: one pod per run in the pod
/// namespace, followed through a watch of bosun's pods (label
/// `created-by-prow=true`, re-listed after `410 Gone`). It runs on a tokio
/// runtime of its own, so a cluster that hangs holds only its own thread;
/// callers wait at most [`API_TIMEOUT`] for any call.
///
/// Each pod's log is copied, as it is written, into the run's log file (the
/// run log endpoint streams it).
///
/// Finished pods are deleted `sinker.terminated_pod_ttl` after they ended,
/// once their log is copied, except in `sinker.exclude_clusters`.
pub struct KubeExecutor {
    inner: Arc<KubeInner>,
    rt: Option<tokio::runtime::Runtime>,
}

struct KubeInner {
    kubeconfig: Option<PathBuf>,
    context: String,
    namespace: String,
    settings: PodSettings,
    client: tokio::sync::Mutex<Option<Client>>,
    /// bosun's pods by name, as the watch last saw them.
    pods: Mutex<HashMap<String, Pod>>,
    /// Runs started by this executor that the watch has not shown yet.
    started: Mutex<HashMap<String, std::time::Instant>>,
    /// The watch has listed the pods at least once.
    synced: AtomicBool,
    /// Where pod logs are copied (`ID.log`).
    log_dir: PathBuf,
    /// Pods whose log is being copied.
    copying: Mutex<std::collections::HashSet<String>>,
    /// Pods whose log has been copied to its end.
    copied: Mutex<std::collections::HashSet<String>>,
    /// The cluster's alias.
    alias: String,
    on_change: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// What a Kubernetes executor needs from the configuration: where pods go
/// and plank's pod timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSettings {
    /// `pod_namespace`.
    pub namespace: String,
    /// `plank.pod_unscheduled_timeout` (default 5m): longest a pod may wait
    /// to be scheduled (no start time).
    pub unscheduled_timeout: Duration,
    /// `plank.pod_pending_timeout` (default 10m): longest a started pod may
    /// stay Pending.
    pub pending_timeout: Duration,
    /// `sinker.terminated_pod_ttl` (default `sinker.max_pod_age`, 24h): how
    /// long a finished pod is kept (its log is copied first).
    pub terminated_pod_ttl: Duration,
    /// `sinker.exclude_clusters`: clusters whose pods are never deleted.
    pub exclude_clusters: Vec<String>,
}

impl PodSettings {
    /// From the configuration, with Prow's defaults.
    pub fn of(config: &bosun_config::types::ProwConfig) -> Self {
        let or = |d: Option<bosun_config::duration::GoDuration>, default: u64| {
            d.map_or(Duration::from_secs(default), |d| d.to_std())
        };
        PodSettings {
            namespace: config.pod_namespace.clone(),
            unscheduled_timeout: or(config.plank.pod_unscheduled_timeout, 5 * 60),
            pending_timeout: or(config.plank.pod_pending_timeout, 10 * 60),
            terminated_pod_ttl: or(
                config
                    .sinker
                    .terminated_pod_ttl
                    .or(config.sinker.max_pod_age),
                24 * 3600,
            ),
            exclude_clusters: config.sinker.exclude_clusters.clone(),
        }
    }
}

/// How long a started run may be missing from the watch before it counts as
/// lost.
const START_GRACE: Duration = Duration::from_secs(30);

impl KubeInner {
    async fn client(&self) -> Result<Client, String> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = client(self.kubeconfig.as_deref(), &self.context).await?;
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn pods_api(&self) -> Result<Api<Pod>, String> {
        Ok(Api::namespaced(self.client().await?, &self.namespace))
    }

    /// Until the watch shows the run's new pod, the run is starting (a
    /// revived run's old pod no longer counts).
    fn mark_started(&self, run_id: &str) {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(run_id);
        self.started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(run_id.to_string(), std::time::Instant::now());
    }

    fn changed(&self) {
        if let Some(f) = &self.on_change {
            f();
        }
    }

    /// Starts copying `pod`'s log into `log_dir/NAME.log` once its containers
    /// have started (the copy follows the log until the pod ends), once per
    /// pod.
    fn copy_log(self: &Arc<Self>, pod: &Pod) {
        let started = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p != "Pending");
        let Some(name) = pod.metadata.name.clone().filter(|_| started) else {
            return;
        };
        if !self
            .copying
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone())
        {
            return;
        }
        let inner = self.clone();
        tokio::spawn(async move {
            use futures_util::AsyncReadExt;
            use std::io::Write;
            let path = inner.log_dir.join(format!("{name}.log"));
            let copied = async {
                let api = inner.pods_api().await?;
                let params = kube::api::LogParams {
                    follow: true,
                    ..Default::default()
                };
                let mut stream = api
                    .log_stream(&name, &params)
                    .await
                    .map_err(|e| e.to_string())?;
                std::fs::create_dir_all(&inner.log_dir).map_err(|e| e.to_string())?;
                let mut file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = stream.read(&mut buf).await.map_err(|e| e.to_string())?;
                    if n == 0 {
                        return Ok::<(), String>(());
                    }
                    file.write_all(&buf[..n]).map_err(|e| e.to_string())?;
                }
            }
            .await;
            inner
                .copied
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone());
            if let Err(e) = copied {
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| writeln!(f, "bosun: the pod's log could not be copied: {e}"));
            }
        });
    }

    /// Sinker for pods: deletes bosun's finished pods `terminated_pod_ttl`
    /// after they ended, once their log is copied (never in an excluded
    /// cluster).
    async fn sink(self: Arc<Self>) {
        if self.settings.exclude_clusters.contains(&self.alias) {
            return;
        }
        let ttl = self.settings.terminated_pod_ttl;
        let every = (ttl / 2).clamp(Duration::from_millis(200), Duration::from_secs(60));
        loop {
            tokio::time::sleep(every).await;
            let now = jiff::Timestamp::now();
            let done: Vec<String> = {
                let pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
                let copied = self.copied.lock().unwrap_or_else(|e| e.into_inner());
                pods.iter()
                    .filter(|(name, pod)| {
                        let ended = finished_at(pod);
                        ended.is_some_and(|t| now.duration_since(t).unsigned_abs() > ttl)
                            && copied.contains(*name)
                    })
                    .map(|(name, _)| name.clone())
                    .collect()
            };
            let Ok(api) = self.pods_api().await else {
                continue;
            };
            for name in done {
                let _ = api.delete(&name, &kube::api::DeleteParams::default()).await;
            }
        }
    }

    /// Follows bosun's pods until the runtime ends.
    async fn watch(self: Arc<Self>) {
        use futures_util::StreamExt;
        use kube::runtime::watcher::{self, Event};
        loop {
            let api = match self.pods_api().await {
                Ok(a) => a,
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let config = watcher::Config::default().labels("created-by-prow=true");
            let mut events = watcher::watcher(api, config).boxed();
            let mut listing: HashMap<String, Pod> = HashMap::new();
            while let Some(event) = events.next().await {
                let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
                match event {
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(p)) => {
                        self.copy_log(&p);
                        listing.insert(name(&p), p);
                    }
                    Ok(Event::InitDone) => {
                        *self.pods.lock().unwrap_or_else(|e| e.into_inner()) =
                            std::mem::take(&mut listing);
                        self.synced.store(true, Ordering::SeqCst);
                        self.changed();
                    }
                    Ok(Event::Apply(p)) => {
                        self.copy_log(&p);
                        let n = name(&p);
                        self.started
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&n);
                        self.pods
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(n, p);
                        self.changed();
                    }
                    Ok(Event::Delete(p)) => {
                        let n = name(&p);
                        self.copying
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&n);
                        let mut pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
                        // Only the pod that was deleted: a revived run's new
                        // pod (same name, new uid) stays.
                        if pods
                            .get(&n)
                            .is_some_and(|q| q.metadata.uid == p.metadata.uid)
                        {
                            pods.remove(&n);
                        }
                        drop(pods);
                        self.changed();
                    }
                    // The watcher re-lists by itself (410 Gone included); wait
                    // a little before it tries again.
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        }
    }
}

impl KubeExecutor {
    /// The executor of `context` (in `kubeconfig`, or the default one),
    /// creating pods in `namespace`; `on_change` is called whenever one of
    /// bosun's pods changes (the controller looks again).
    pub fn new(
        name: &str,
        kubeconfig: Option<PathBuf>,
        context: &str,
        settings: &PodSettings,
        log_dir: PathBuf,
        on_change: Option<Arc<dyn Fn() + Send + Sync>>,
    ) -> Result<Self, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("bosun-kube-{name}"))
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let inner = Arc::new(KubeInner {
            kubeconfig,
            context: context.to_string(),
            namespace: settings.namespace.clone(),
            settings: settings.clone(),
            client: tokio::sync::Mutex::new(None),
            pods: Mutex::default(),
            started: Mutex::default(),
            synced: AtomicBool::new(false),
            log_dir,
            copying: Mutex::default(),
            copied: Mutex::default(),
            alias: name.to_string(),
            on_change,
        });
        rt.spawn(inner.clone().watch());
        rt.spawn(inner.clone().sink());
        Ok(KubeExecutor {
            inner,
            rt: Some(rt),
        })
    }

    /// Runs `f` on this cluster's runtime and waits for it, at most a little
    /// over the API timeout.
    fn call<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = Result<T, String>> + Send + 'static,
    ) -> Result<T, String> {
        let rt = self.rt.as_ref().ok_or("executor stopped")?;
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let r = match tokio::time::timeout(API_TIMEOUT, f).await {
                Ok(r) => r,
                Err(_) => Err("the cluster's API did not answer in time".to_string()),
            };
            let _ = tx.send(r);
        });
        rx.recv_timeout(API_TIMEOUT + Duration::from_secs(2))
            .map_err(|_| "the cluster's API did not answer in time".to_string())?
    }

    fn delete(&self, run_id: &str) -> Result<(), String> {
        let inner = self.inner.clone();
        let name = run_id.to_string();
        self.call(async move {
            match inner
                .pods_api()
                .await?
                .delete(&name, &kube::api::DeleteParams::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

impl Drop for KubeExecutor {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// When a finished pod's last container ended (none while it runs).
fn finished_at(pod: &Pod) -> Option<jiff::Timestamp> {
    let status = pod.status.as_ref()?;
    if !matches!(status.phase.as_deref(), Some("Succeeded") | Some("Failed")) {
        return None;
    }
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| {
            Some(
                c.state
                    .as_ref()?
                    .terminated
                    .as_ref()?
                    .finished_at
                    .as_ref()?
                    .0,
            )
        })
        .max()
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Where a pod stands, as a run's state, at `now` (plank's scheduling and
/// pending timeouts apply).
pub fn pod_state(pod: &Pod, settings: &PodSettings, now: jiff::Timestamp) -> RunStatus {
    let status = pod.status.clone().unwrap_or_default();
    let older = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
                 limit: Duration| {
        t.is_some_and(|t| now.duration_since(t.0).unsigned_abs() > limit)
    };
    if status.phase.as_deref().is_none_or(|p| p == "Pending") {
        match &status.start_time {
            None if older(
                pod.metadata.creation_timestamp.as_ref(),
                settings.unscheduled_timeout,
            ) =>
            {
                return RunStatus::Failed("Pod scheduling timeout.".into());
            }
            Some(t) if older(Some(t), settings.pending_timeout) => {
                return RunStatus::Failed("Pod pending timeout.".into());
            }
            _ => {}
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return RunStatus::Failed("Pod got deleted unexpectedly".into());
    }
    let terminated: Vec<_> = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.clone())
        .collect();
    if terminated
        .iter()
        .any(|t| t.reason.as_deref() == Some("OOMKilled"))
    {
        return RunStatus::Failed(
            "a container was killed for running out of memory (OOMKilled)".into(),
        );
    }
    match status.phase.as_deref() {
        Some("Succeeded") | Some("Failed") if status.reason.as_deref() == Some("Evicted") => {
            RunStatus::Revivable("being evicted".into())
        }
        Some("Succeeded") => RunStatus::Exited {
            code: terminated
                .iter()
                .map(|t| t.exit_code)
                .find(|c| *c != 0)
                .unwrap_or(0),
        },
        Some("Failed") => RunStatus::Exited {
            code: terminated
                .iter()
                .map(|t| t.exit_code)
                .find(|c| *c != 0)
                .unwrap_or(1),
        },
        Some("Unknown") => RunStatus::Revivable("its node being lost".into()),
        // Plank's running timeout counts only for a running pod: a pending
        // one has its own two timeouts, checked above.
        None | Some("Pending") => RunStatus::Starting,
        _ => RunStatus::Running { pid: 0 },
    }
}

impl Executor for KubeExecutor {
    fn start(&self, _run_id: &str, _job: &JobProcess) -> Result<(), ExecError> {
        Err(ExecError::Unsupported(
            "a Kubernetes cluster runs pods".into(),
        ))
    }

    fn runs_pods(&self) -> bool {
        true
    }

    fn start_pod(&self, run_id: &str, pod: &Pod) -> Result<(), ExecError> {
        let inner = self.inner.clone();
        let pod = pod.clone();
        self.inner.mark_started(run_id);
        // As plank: only a request the API refuses (4xx) ends the run; any
        // other failure (no answer, no connection, 5xx) may pass.
        self.call(async move {
            Ok(
                match inner
                    .pods_api()
                    .await?
                    .create(&PostParams::default(), &pod)
                    .await
                {
                    Ok(_) => Ok(()),
                    // Started before (a restart between create and commit).
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e @ kube::Error::Api(_)) if is_refusal(&e) => {
                        Err(ExecError::Refused(e.to_string()))
                    }
                    Err(e) => Err(ExecError::Transient(e.to_string())),
                },
            )
        })
        .map_err(ExecError::Transient)?
    }

    fn revive_pod(&self, run_id: &str, pod: &Pod) -> Result<(), ExecError> {
        self.delete(run_id).map_err(ExecError::Refused)?;
        // A deleted pod may take a while to go (its grace period): its name is
        // free once a create no longer conflicts.
        let deadline = std::time::Instant::now() + API_TIMEOUT;
        loop {
            let inner = self.inner.clone();
            let pod = pod.clone();
            let created = self.call(async move {
                match inner
                    .pods_api()
                    .await?
                    .create(&PostParams::default(), &pod)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e.to_string()),
                }
            });
            match created {
                Ok(true) => break,
                Ok(false) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Ok(false) => return Err(ExecError::Refused("the old pod is still there".into())),
                Err(e) => return Err(ExecError::Refused(e)),
            }
        }
        self.inner.mark_started(run_id);
        Ok(())
    }

    fn status(&self, run_id: &str) -> RunStatus {
        let seen = self
            .inner
            .pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(run_id)
            .map(|pod| pod_state(pod, &self.inner.settings, jiff::Timestamp::now()));
        if let Some(state) = seen {
            if matches!(&state, RunStatus::Failed(why) if why.contains("timeout")) {
                // As plank: a pod past its timeout is deleted (without
                // holding up the caller).
                if let Some(rt) = &self.rt {
                    let (inner, name) = (self.inner.clone(), run_id.to_string());
                    rt.spawn(async move {
                        if let Ok(api) = inner.pods_api().await {
                            let _ = api.delete(&name, &kube::api::DeleteParams::default()).await;
                        }
                    });
                }
            }
            return state;
        }
        let recently = self
            .inner
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(run_id)
            .is_some_and(|t| t.elapsed() < START_GRACE);
        if recently || !self.inner.synced.load(Ordering::SeqCst) {
            RunStatus::Starting
        } else {
            RunStatus::Revivable("its pod disappearing".into())
        }
    }

    fn abort(&self, run_id: &str, _grace: Duration) -> RunStatus {
        // The deletion goes on on this cluster's runtime: the caller (a
        // controller pass, for every cluster) never waits for this one.
        if let Some(rt) = &self.rt {
            let (inner, name) = (self.inner.clone(), run_id.to_string());
            rt.spawn(async move {
                let deleted = async {
                    inner
                        .pods_api()
                        .await?
                        .delete(&name, &kube::api::DeleteParams::default())
                        .await
                        .map_err(|e| e.to_string())
                };
                match tokio::time::timeout(API_TIMEOUT, deleted).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) if e.contains("404") || e.contains("NotFound") => {}
                    Ok(Err(e)) => tracing::warn!(pod = %name, error = %e, "cannot delete the pod"),
                    Err(_) => tracing::warn!(pod = %name, "deleting the pod timed out"),
                }
            });
        }
        RunStatus::Exited { code: 128 + 15 }
    }

    fn remove(&self, run_id: &str) -> Result<(), ExecError> {
        self.delete(run_id).map_err(ExecError::Refused)?;
        match std::fs::remove_file(self.inner.log_dir.join(format!("{run_id}.log"))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(ExecError::Refused(e.to_string()))
            }
            _ => Ok(()),
        }
    }

    fn log_path(&self, run_id: &str) -> Option<PathBuf> {
        Some(self.inner.log_dir.join(format!("{run_id}.log")))
    }
}

/// Whether the API refused the request itself (a 4xx): trying it again would
/// get the same answer.
fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_failures_in_a_row_make_a_cluster_unreachable() {
        let mut t = Tracker::default();
        assert_eq!(t.health().word(), "Unreachable", "until the first probe");
        assert_eq!(t.record(Probe::Allowed), &Health::Reachable);
        assert_eq!(t.record(Probe::Failed("blip".into())), &Health::Reachable);
        assert_eq!(
            t.record(Probe::Failed("down".into())),
            &Health::Unreachable("down".into())
        );
        assert_eq!(t.record(Probe::Allowed), &Health::Reachable);
        let denied = Probe::Denied(vec!["create pods".into()]);
        assert_eq!(t.record(denied).prow_word(), "MissingPermissions");
        assert_eq!(Health::Disabled.prow_word(), "No-Manager");
        assert_eq!(Health::Unreachable(String::new()).prow_word(), "Error");
    }
}
