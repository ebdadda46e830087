//! The Kubernetes executor: one pod per run in the pod namespace, on a tokio
//! runtime of its own per cluster (a cluster that hangs holds only its own
//! thread; callers wait at most [`API_TIMEOUT`] for any call). As in plank,
//! only a creation the API refuses (4xx) ends a run
//! ([`ExecError::Refused`]); any other failure is [`ExecError::Transient`]
//! and the controller tries again. A run's state is read from the watch's
//! cache ([`pod_state`]: pending pods with their instants; revivable states).
//!
//! A pipeline run is a Tekton PipelineRun instead of a pod
//! ([`KubeExecutor::start_pipeline`], `pipelines`): its state, abort and removal
//! are the PipelineRun's, asked first; a run it does not know is a pod's.
//!
//! It ties the cluster's parts together (client, watch, logs, sinker,
//! pipelines) and speaks the executor's vocabulary; it knows nothing of local
//! runs.

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;

use super::client::{ApiError, Connection, Refusal, API_TIMEOUT};
use super::logs::LogCopier;
use super::pace::{jitter, retry_delay, Pacer, DEFAULT_CREATIONS_IN_FLIGHT};
use super::pipelines::{self, Pipelines};
use super::sinker::sink;
use super::watch::{follow, Lookup, PodCache, Seen};
use crate::executor::{ClusterKind, ExecError, Executor, RunStatus, StartDone, Workload};

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
    conn: Arc<Connection>,
    settings: PodSettings,
    /// bosun's pods, as the watch last saw them.
    cache: Arc<PodCache>,
    /// Pod logs, copied into the runs' log files.
    logs: Arc<LogCopier>,
    on_change: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Runs whose pod is being revived: the old pod must be gone (however
    /// long its grace period) before the new one is created.
    reviving: Mutex<HashMap<String, Revival>>,
    /// The pipeline runs' PipelineRuns.
    pipelines: Arc<Pipelines>,
    /// Whether this process may act on the cluster now, once told
    /// ([`KubeExecutor::acting_only_while`]).
    may_act: std::sync::OnceLock<Gate>,
    /// The pace of creations.
    pacer: Arc<Pacer>,
    /// Runs whose pod the watch does not show, asked of the API.
    confirming: Mutex<HashMap<String, Confirm>>,
}

/// Where a question about a pod the watch does not show stands.
enum Confirm {
    /// Asked; no answer yet.
    Asking,
    /// The API does not know the pod.
    Gone,
}

/// How many times in a row a creation the API server sheds (429) is tried
/// again before its start is left to the controller's backoff (client-go's
/// number of `Retry-After` retries).
const SHED_TRIES: u32 = 10;

/// The job a workload's creation queues under: its `prow.k8s.io/job`
/// annotation (or label), else its own name.
fn job_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let key = super::pod::JOB_ANNOTATION;
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(key)))
        .or(meta.name.as_ref())
        .cloned()
        .unwrap_or_default()
}

/// Whether a process may act on clusters now (create and delete pods).
pub type Gate = Arc<dyn Fn() -> bool + Send + Sync>;

/// A revival under way.
struct Revival {
    /// The uid of the pod being replaced (none if it was gone already).
    old_uid: Option<String>,
    /// The new pod.
    pod: Pod,
    /// Why the new pod cannot be created, once the API refused it.
    refused: Option<String>,
}

impl KubeInner {
    /// Whether this process may create or delete pods now (always, when no
    /// gate was given).
    fn may_act(&self) -> bool {
        self.may_act.get().is_none_or(|gate| gate())
    }

    fn changed(&self) {
        if let Some(f) = &self.on_change {
            f();
        }
    }

    fn reviving(&self) -> std::sync::MutexGuard<'_, HashMap<String, Revival>> {
        self.reviving.locked()
    }

    /// The uid of run `name`'s pod, as the watch last saw it.
    fn uid_of(&self, name: &str) -> Option<String> {
        self.cache
            .with_pod(name, |p| p.uid.as_deref().map(str::to_string))
            .flatten()
    }

    /// Deletes pod `name` if it is still the one of `uid` (any pod of that
    /// name when `uid` is unknown); a pod already gone, or replaced, is not
    /// an error.
    async fn delete_pod(&self, name: &str, uid: Option<String>) -> Result<(), ApiError> {
        let params = kube::api::DeleteParams {
            preconditions: uid.map(|uid| kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.conn.pods().await?.delete(name, &params).await {
            Ok(_) => Ok(()),
            // 409: the precondition failed, another pod has the name.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether pod `name` exists, is not the old pod `old_uid` and is not
    /// being deleted (or is the pod bosun never saw, `old_uid` unknown).
    async fn adopt_if_alive(
        &self,
        name: &str,
        old_uid: Option<&str>,
    ) -> Result<Option<Pod>, ApiError> {
        let pod = self.conn.pods().await?.get_opt(name).await?;
        Ok(pod.filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && old_uid.is_none_or(|old| p.metadata.uid.as_deref() != Some(old))
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Failed") | Some("Unknown")
                )
        }))
    }

    /// Creates run `run_id`'s pod in its turn (see
    /// [`KubeInner::create_in_turn`] and [`Refusal::of_creation`]).
    async fn create_pod(&self, run_id: &str, pod: &Pod) -> Result<(), ExecError> {
        let job = job_of(&pod.metadata);
        self.create_in_turn(&job, run_id, "pod", || async {
            self.cache.expect(run_id);
            match self.conn.create_pod(pod).await {
                Ok(()) => Ok(Ok(())),
                Err(r) => r.of_creation(),
            }
        })
        .await
    }

    /// Makes one creation on the cluster (`create`, for run `run_id`'s
    /// `what`) in its turn. As plank: only a request the API refuses (4xx)
    /// ends the run (`create` tells the outcome); any other failure (no
    /// answer, no connection, 5xx) may pass. A 429 (the API server shedding
    /// load) is tried again after its `Retry-After`, with jitter, up to
    /// [`SHED_TRIES`] times, every creation on the cluster held back
    /// meanwhile. Whether this process may act is asked once the turn
    /// comes: the wait may outlast the term the controller started the run
    /// in.
    async fn create_in_turn<F, Fut>(
        &self,
        job: &str,
        run_id: &str,
        what: &str,
        mut create: F,
    ) -> Result<(), ExecError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Result<(), ExecError>, Refusal>>,
    {
        let mut shed = 0;
        loop {
            let turn = self.pacer.turn(job).await;
            if let Some(until) = self.pacer.held_until() {
                tokio::time::sleep_until(until).await;
            }
            if self.pacer.failing() {
                return Err(ExecError::Transient(FAILING.into()));
            }
            if !self.may_act() {
                return Err(ExecError::Transient(NOT_ACTING.into()));
            }
            let created = tokio::time::timeout(API_TIMEOUT, create()).await;
            drop(turn);
            let refusal = match created {
                Ok(Ok(outcome)) => return outcome,
                Ok(Err(r)) => r,
                Err(_) => {
                    self.pacer.mark_failing();
                    return Err(ExecError::Transient(ApiError::TimedOut.to_string()));
                }
            };
            let text = refusal.error().to_string();
            match refusal.code() {
                Some(429) if shed < SHED_TRIES => {
                    shed += 1;
                    self.pacer
                        .hold_for(refusal.retry_after.unwrap_or(Duration::from_secs(1)));
                    let delay = retry_delay(refusal.retry_after, shed, jitter());
                    tracing::info!(run = %run_id, retry_in = ?delay, "the API server shed the {what}'s creation (429); trying again");
                    tokio::time::sleep(delay).await;
                }
                Some(429) => return Err(ExecError::Transient(text)),
                _ => {
                    self.pacer.mark_failing();
                    return Err(ExecError::Transient(text));
                }
            }
        }
    }

    /// Carries run `name`'s revival through: deletes the old pod, waits
    /// until the watch sees it gone (its grace period may be long), then
    /// creates the new pod. Ends when the new pod is created or refused.
    async fn revive(self: Arc<Self>, name: String) {
        let mut deleted = false;
        let mut backoff = Duration::from_millis(200);
        loop {
            let changed = self.cache.changed();
            let Some((old_uid, pod)) = self
                .reviving()
                .get(&name)
                .map(|r| (r.old_uid.clone(), r.pod.clone()))
            else {
                return;
            };
            let seen_uid = self.uid_of(&name);
            let old_there = seen_uid.is_some() && seen_uid == old_uid;
            let step = if !self.may_act() {
                Err(NOT_ACTING.to_string())
            } else if old_there && !deleted {
                match tokio::time::timeout(API_TIMEOUT, self.delete_pod(&name, old_uid)).await {
                    Ok(Ok(())) => {
                        deleted = true;
                        Ok(())
                    }
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("the API did not answer in time".into()),
                }
            } else if old_there || !self.cache.synced() {
                Ok(())
            } else {
                let created = async {
                    self.conn
                        .pods()
                        .await?
                        .create(&PostParams::default(), &pod)
                        .await
                        .map_err(ApiError::from)
                };
                match tokio::time::timeout(API_TIMEOUT, created).await {
                    Ok(Ok(created)) => {
                        self.cache
                            .mark_started(&name, created.metadata.uid.as_deref());
                        self.reviving().remove(&name);
                        self.changed();
                        return;
                    }
                    // A pod of that name exists: the old one, whose deletion
                    // is not seen yet, or (when bosun never saw the old one)
                    // the run's own pod, missed by the watch: then it is
                    // adopted, never created twice.
                    Ok(Err(ApiError::Status { code: 409, .. })) => {
                        match self.adopt_if_alive(&name, old_uid.as_deref()).await {
                            Ok(Some(alive)) => {
                                tracing::warn!(pod = %name, "revival cancelled: the run's pod is there and alive");
                                self.cache
                                    .mark_started(&name, alive.metadata.uid.as_deref());
                                self.reviving().remove(&name);
                                self.changed();
                                return;
                            }
                            Ok(None) => Err("the old pod is still there".into()),
                            Err(e) => Err(e.to_string()),
                        }
                    }
                    Ok(Err(ApiError::Status { code, text }))
                        if (400..500).contains(&code) && code != 429 && code != 408 =>
                    {
                        if let Some(r) = self.reviving().get_mut(&name) {
                            r.refused = Some(text);
                        }
                        self.changed();
                        return;
                    }
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("the API did not answer in time".into()),
                }
            };
            match step {
                // Until the watch sees a change (the old pod gone), or a
                // second (a missed wake-up).
                Ok(()) => {
                    backoff = Duration::from_millis(200);
                    let _ = tokio::time::timeout(Duration::from_secs(1), changed).await;
                }
                // A failed call, or a pod still there: backing off, whatever
                // the watch says meanwhile.
                Err(e) => {
                    tracing::info!(pod = %name, error = %e, "cannot revive the pod yet");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }
}

/// What a Kubernetes executor needs from the configuration: where pods go
/// and how long finished ones are kept. (Plank's pod timeouts are the
/// controller's: a job may set its own.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSettings {
    /// `pod_namespace`.
    pub namespace: String,
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

/// Why a creation gave up without asking the API.
const FAILING: &str = "the cluster's API failed a moment ago; not asked again yet";

/// Why a creation or a revival's step was not made: the gate is shut (a
/// replica whose term ended while it waited its turn).
const NOT_ACTING: &str = "this process may not act on the cluster now";

/// How long a started run may be missing from the watch before it counts as
/// lost.
const START_GRACE: Duration = Duration::from_secs(30);

/// How often a replica that does not copy pods' logs (it does not lead)
/// looks whether it may now: the copies start at most this long after it
/// came to lead.
const LEAD_CHECK: Duration = Duration::from_secs(1);

impl KubeExecutor {
    /// Asks Tekton to cancel run `run_id`'s PipelineRun, on this cluster's
    /// runtime (the caller, a controller pass, never waits for it).
    fn cancel_pipeline(&self, run_id: &str) {
        let Some(rt) = &self.rt else { return };
        let (p, id) = (self.inner.pipelines.clone(), run_id.to_string());
        rt.spawn(async move {
            match tokio::time::timeout(API_TIMEOUT, p.cancel(&id)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(run = %id, error = %e, "cannot cancel the PipelineRun")
                }
                Err(_) => tracing::warn!(run = %id, "cancelling the PipelineRun timed out"),
            }
        });
    }

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
    ) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("bosun-kube-{name}"))
            .enable_all()
            .build()?;
        let conn = Arc::new(Connection::new(kubeconfig, context, &settings.namespace));
        let pipelines = Arc::new(Pipelines::new(
            name,
            conn.clone(),
            log_dir.clone(),
            rt.handle().clone(),
            on_change.clone(),
        ));
        let cache = Arc::new(PodCache::default());
        let inner = Arc::new(KubeInner {
            logs: Arc::new(LogCopier::new(conn.clone(), cache.clone(), log_dir)),
            pipelines,
            conn,
            settings: settings.clone(),
            cache,
            on_change,
            reviving: Mutex::default(),
            may_act: std::sync::OnceLock::new(),
            pacer: Pacer::new(DEFAULT_CREATIONS_IN_FLIGHT),
            confirming: Mutex::default(),
        });
        let watch = inner.clone();
        rt.spawn(async move {
            let w = &watch;
            follow(
                &w.conn,
                &w.cache,
                |pod| w.logs.copy(pod),
                |name| w.logs.forget(name),
                || w.changed(),
            )
            .await
        });
        // A replica that comes to lead copies the logs of the pods (and
        // PipelineRuns) its watches showed while it did not.
        let lead = inner.clone();
        rt.spawn(async move {
            let mut every = tokio::time::interval(LEAD_CHECK);
            loop {
                every.tick().await;
                lead.logs.copy_waiting();
                lead.pipelines.copy_waiting();
            }
        });
        if !settings.exclude_clusters.iter().any(|c| c == name) {
            let sinker = inner.clone();
            rt.spawn(async move {
                let s = &sinker;
                let ttl = s.settings.terminated_pod_ttl;
                sink(&s.conn, &s.cache, &s.logs, ttl, || s.may_act()).await
            });
        }
        Ok(KubeExecutor {
            inner,
            rt: Some(rt),
        })
    }

    /// Deletes finished pods (its sinker), carries revivals through and
    /// reads pods' logs only while `gate` says so: a replica on PostgreSQL,
    /// while it leads and its trust window lasts, as the controller starts
    /// and stops pods (the others serve logs from the store the leader
    /// ships them to). Without a gate it always may. (Set once; a later
    /// gate is ignored.)
    pub fn acting_only_while(self, gate: Gate) -> Self {
        self.inner.logs.acting.only_while(gate.clone());
        self.inner.pipelines.acting.only_while(gate.clone());
        let _ = self.inner.may_act.set(gate);
        self
    }

    /// At most `n` creations in flight at once on this cluster (0:
    /// unbounded; default [`DEFAULT_CREATIONS_IN_FLIGHT`]).
    pub fn creations_in_flight(self, n: usize) -> Self {
        self.inner.pacer.set_limit(n);
        self
    }

    /// Runs `f` on this cluster's runtime and waits for it, at most a little
    /// over the API timeout.
    fn call<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = Result<T, ApiError>> + Send + 'static,
    ) -> Result<T, ApiError> {
        let rt = self.rt.as_ref().ok_or(ApiError::Stopped)?;
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let r = match tokio::time::timeout(API_TIMEOUT, f).await {
                Ok(r) => r,
                Err(_) => Err(ApiError::TimedOut),
            };
            let _ = tx.send(r);
        });
        rx.recv_timeout(API_TIMEOUT + Duration::from_secs(2))
            .map_err(|_| ApiError::TimedOut)?
    }

    /// Deletes run `run_id`'s pod (the one the watch last saw).
    fn delete(&self, run_id: &str) -> Result<(), ApiError> {
        let inner = self.inner.clone();
        let name = run_id.to_string();
        let uid = inner.uid_of(&name);
        self.call(async move { inner.delete_pod(&name, uid).await })
    }
}

impl Drop for KubeExecutor {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Where a pod stands, as a run's state. A pod not running yet is
/// [`RunStatus::PodPending`] with its creation and start instants: plank's
/// pending timeouts are the controller's to apply.
pub fn pod_state(pod: &Pod) -> RunStatus {
    state_of(&Seen::of(pod))
}

/// [`pod_state`] of what the watch's cache keeps of a pod.
pub(crate) fn state_of(pod: &Seen) -> RunStatus {
    if pod.deleting {
        return RunStatus::Failed("Pod got deleted unexpectedly".into());
    }
    if pod.ends().any(|e| e.reason.as_deref() == Some("OOMKilled")) {
        return RunStatus::Failed(
            "a container was killed for running out of memory (OOMKilled)".into(),
        );
    }
    let code = |otherwise| {
        pod.ends()
            .map(|e| e.exit_code)
            .find(|c| *c != 0)
            .unwrap_or(otherwise)
    };
    match pod.phase() {
        Some("Succeeded") | Some("Failed") if pod.reason.as_deref() == Some("Evicted") => {
            RunStatus::Revivable("being evicted".into())
        }
        Some("Succeeded") => RunStatus::Exited { code: code(0) },
        Some("Failed") => RunStatus::Exited { code: code(1) },
        Some("Unknown") => RunStatus::Revivable("its node being lost".into()),
        // Plank's running timeout counts only for a running pod: a pending
        // one has its own two timeouts, counted from these instants.
        None | Some("Pending") => match pod.created {
            Some(created) => RunStatus::PodPending {
                created,
                scheduled: pod.started,
            },
            None => RunStatus::Starting,
        },
        _ => RunStatus::Running { pid: 0 },
    }
}

impl Executor for KubeExecutor {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kubernetes
    }

    fn start(&self, run_id: &str, workload: &Workload) -> Result<(), ExecError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.start_then(
            run_id,
            workload,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv()
            .unwrap_or_else(|_| Err(ExecError::Transient("executor stopped".into())))
    }

    /// The creation waits its turn (at most `creations_in_flight` in flight,
    /// jobs taking turns) on this cluster's runtime,
    /// holding no thread of the caller's.
    fn start_then(&self, run_id: &str, workload: &Workload, done: StartDone) {
        match workload {
            Workload::Pod(pod) => self.start_pod_then(run_id, pod, done),
            Workload::PipelineRun(pr) => self.start_pipeline_then(run_id, pr, done),
            Workload::Process(_) => done(Err(ExecError::Unsupported(
                "a Kubernetes cluster runs pods, not processes".into(),
            ))),
        }
    }

    fn revive(&self, run_id: &str, workload: &Workload) -> Result<(), ExecError> {
        match workload {
            Workload::Pod(pod) => self.revive_pod(run_id, pod),
            other => self.start(run_id, other),
        }
    }

    /// Pods and PipelineRuns are followed by watches, whose every change
    /// calls `on_change`; a run still `Starting` (its pod not seen yet, a
    /// watch not synced, a revival waiting for the old pod) may change by
    /// the clock alone.
    fn reports_change(&self, status: &RunStatus) -> bool {
        self.inner.on_change.is_some() && !matches!(status, RunStatus::Starting)
    }

    fn status(&self, run_id: &str) -> RunStatus {
        // A revival under way: the old pod (being deleted) is not the run's.
        {
            let mut reviving = self.inner.reviving();
            if let Some(r) = reviving.get(run_id) {
                return match r.refused.clone() {
                    Some(why) => {
                        reviving.remove(run_id);
                        RunStatus::Failed(format!("Pod can not be revived: {why}"))
                    }
                    None => RunStatus::Starting,
                };
            }
        }
        if let Some(state) = self.inner.pipelines.status(run_id) {
            return state;
        }
        match self.inner.cache.lookup(run_id, START_GRACE, state_of) {
            Lookup::Seen(state) => return state,
            Lookup::Starting => return RunStatus::Starting,
            Lookup::Unseen if !self.inner.cache.synced() => return RunStatus::Starting,
            Lookup::Unseen => {}
        }
        // No pod: it may be a pipeline run's PipelineRun the watch of
        // PipelineRuns (started now, if it was not) has not shown yet.
        self.inner.pipelines.watch();
        if !self.inner.pipelines.settled() {
            return RunStatus::Starting;
        }
        if let Some(state) = self.inner.pipelines.status(run_id) {
            return state;
        }
        // The watch may only be behind (a burst of thousands of pods): the
        // API says whether the pod is really gone before the run is
        // revived, which deletes and creates pods.
        match self.confirm_gone(run_id) {
            true => RunStatus::Revivable("its pod disappearing".into()),
            false => RunStatus::Starting,
        }
    }

    fn abort(&self, run_id: &str, _grace: Duration) -> RunStatus {
        // A PipelineRun is cancelled (Tekton stops its TaskRuns); it ends
        // when Tekton says so.
        if let Some(state) = self.inner.pipelines.status(run_id) {
            self.cancel_pipeline(run_id);
            return state;
        }
        // The deletion goes on on this cluster's runtime: the caller (a
        // controller pass, for every cluster) never waits for this one.
        if let Some(rt) = &self.rt {
            let (inner, name) = (self.inner.clone(), run_id.to_string());
            self.inner.reviving().remove(run_id);
            let uid = inner.uid_of(&name);
            rt.spawn(async move {
                match tokio::time::timeout(API_TIMEOUT, inner.delete_pod(&name, uid)).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(pod = %name, error = %e, "cannot delete the pod"),
                    Err(_) => tracing::warn!(pod = %name, "deleting the pod timed out"),
                }
            });
        }
        RunStatus::Exited { code: 128 + 15 }
    }

    fn abort_pipeline(&self, run_id: &str, _grace: Duration) -> RunStatus {
        // Its end is followed (and its log copied to the end) by the watch
        // of PipelineRuns, started now if it was not.
        self.inner.pipelines.watch();
        // Cancelled by its name if known, else found by its run-id label.
        self.cancel_pipeline(run_id);
        self.inner
            .pipelines
            .status(run_id)
            .unwrap_or(RunStatus::Exited { code: 128 + 15 })
    }

    fn remove(&self, run_id: &str) -> Result<(), ExecError> {
        if self.inner.pipelines.name_of(run_id).is_some() {
            let (p, id) = (self.inner.pipelines.clone(), run_id.to_string());
            self.call(async move { p.delete(&id).await })
        } else {
            self.delete(run_id)
        }
        .map_err(|e| ExecError::Refused(e.to_string()))?;
        match std::fs::remove_file(self.inner.logs.path(run_id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(ExecError::Refused(e.to_string()))
            }
            _ => Ok(()),
        }
    }

    fn log_path(&self, run_id: &str) -> Option<PathBuf> {
        Some(self.inner.logs.path(run_id))
    }

    fn log_complete(&self, run_id: &str) -> bool {
        !self.inner.logs.is_writing(run_id) && !self.inner.pipelines.is_writing(run_id)
    }
}

impl KubeExecutor {
    /// Whether run `run_id`'s pod, which the watch does not show past the
    /// start's grace, is gone as the API tells: the first call asks (on
    /// this cluster's runtime) and answers false, as do the calls while it
    /// asks; a pod the API shows is handed to the cache, and a pod it does
    /// not know makes the next call answer true. A failed question is asked
    /// again.
    fn confirm_gone(&self, run_id: &str) -> bool {
        let Some(rt) = &self.rt else { return true };
        let mut asked = self.inner.confirming.locked();
        match asked.get(run_id) {
            Some(Confirm::Gone) => {
                asked.remove(run_id);
                return true;
            }
            Some(Confirm::Asking) => return false,
            None => {}
        }
        asked.insert(run_id.to_string(), Confirm::Asking);
        let (inner, name) = (self.inner.clone(), run_id.to_string());
        rt.spawn(async move {
            let got = async { inner.conn.pods().await?.get_opt(&name).await.map_err(ApiError::from) };
            let answer = tokio::time::timeout(API_TIMEOUT, got).await;
            let mut asked = inner.confirming.locked();
            match answer {
                Ok(Ok(Some(pod))) => {
                    asked.remove(&name);
                    drop(asked);
                    tracing::info!(pod = %name, "the watch had not shown the run's pod yet; the API does");
                    inner.cache.learn(&name, &pod);
                }
                Ok(Ok(None)) => {
                    asked.insert(name, Confirm::Gone);
                    drop(asked);
                }
                _ => {
                    asked.remove(&name);
                    drop(asked);
                }
            }
            inner.changed();
        });
        false
    }

    /// Creates run `run_id`'s pod in its turn, then hands the outcome to
    /// `done`.
    fn start_pod_then(&self, run_id: &str, pod: &Pod, done: StartDone) {
        let Some(rt) = &self.rt else {
            return done(Err(ExecError::Transient("executor stopped".into())));
        };
        let (inner, id, pod) = (self.inner.clone(), run_id.to_string(), pod.clone());
        rt.spawn(async move { done(inner.create_pod(&id, &pod).await) });
    }

    /// Starts a run as a Tekton PipelineRun, as Lighthouse makes one; from
    /// then on the run's status follows it, an abort cancels it and a
    /// removal deletes it. Starting one that was started before does
    /// nothing.
    pub fn start_pipeline(
        &self,
        run_id: &str,
        pipeline_run: &serde_json::Value,
    ) -> Result<(), ExecError> {
        self.start(
            run_id,
            &Workload::PipelineRun(Box::new(pipeline_run.clone())),
        )
    }

    /// Creates run `run_id`'s PipelineRun in its turn, then hands the
    /// outcome to `done`.
    fn start_pipeline_then(&self, run_id: &str, pipeline_run: &serde_json::Value, done: StartDone) {
        let pr = match pipelines::prepare(run_id, pipeline_run, &self.inner.settings.namespace) {
            Ok(pr) => pr,
            Err(e) => return done(Err(ExecError::Refused(e))),
        };
        let Some(rt) = &self.rt else {
            return done(Err(ExecError::Transient("executor stopped".into())));
        };
        let (inner, id) = (self.inner.clone(), run_id.to_string());
        rt.spawn(async move {
            let job = job_of(&pr.metadata);
            let created = inner
                .create_in_turn(&job, &id, "PipelineRun", || {
                    inner.pipelines.clone().create(id.clone(), pr.clone())
                })
                .await;
            done(created)
        });
    }

    /// Starts a run's pod again in place of its lost one: the old pod is
    /// deleted and `pod` created in the background once the old one is
    /// really gone.
    pub fn revive_pod(&self, run_id: &str, pod: &Pod) -> Result<(), ExecError> {
        let rt = self
            .rt
            .as_ref()
            .ok_or_else(|| ExecError::Transient("executor stopped".into()))?;
        let revival = Revival {
            old_uid: self.inner.uid_of(run_id),
            pod: pod.clone(),
            refused: None,
        };
        let fresh = self
            .inner
            .reviving()
            .insert(run_id.to_string(), revival)
            .is_none();
        if fresh {
            rt.spawn(self.inner.clone().revive(run_id.to_string()));
        }
        Ok(())
    }
}
