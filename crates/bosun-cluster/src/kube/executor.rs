//! The Kubernetes executor: one pod per run in the pod namespace, on a tokio
//! runtime of its own per cluster (a cluster that hangs holds only its own
//! thread; callers wait at most [`API_TIMEOUT`] for any call). As in plank,
//! only a creation the API refuses (4xx) ends a run
//! ([`ExecError::Refused`]); any other failure is [`ExecError::Transient`]
//! and the controller tries again. A run's state is read from the watch's
//! cache ([`pod_state`]: plank's pod timeouts; revivable states).
//!
//! It ties the cluster's parts together (client, watch, logs, sinker) and
//! speaks the executor's vocabulary; it knows nothing of local runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;

use super::client::{ApiError, Connection, API_TIMEOUT};
use super::logs::LogCopier;
use super::sinker::sink;
use super::watch::{follow, PodCache};
use crate::executor::{ExecError, Executor, JobProcess, RunStatus};

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
    cache: PodCache,
    /// Pod logs, copied into the runs' log files.
    logs: Arc<LogCopier>,
    on_change: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl KubeInner {
    fn changed(&self) {
        if let Some(f) = &self.on_change {
            f();
        }
    }
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
    ) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("bosun-kube-{name}"))
            .enable_all()
            .build()?;
        let conn = Arc::new(Connection::new(kubeconfig, context, &settings.namespace));
        let inner = Arc::new(KubeInner {
            logs: Arc::new(LogCopier::new(conn.clone(), log_dir)),
            conn,
            settings: settings.clone(),
            cache: PodCache::default(),
            on_change,
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
        if !settings.exclude_clusters.iter().any(|c| c == name) {
            let sinker = inner.clone();
            rt.spawn(async move {
                let s = &sinker;
                sink(&s.conn, &s.cache, &s.logs, s.settings.terminated_pod_ttl).await
            });
        }
        Ok(KubeExecutor {
            inner,
            rt: Some(rt),
        })
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

    fn delete(&self, run_id: &str) -> Result<(), ApiError> {
        let inner = self.inner.clone();
        let name = run_id.to_string();
        self.call(async move {
            match inner
                .conn
                .pods()
                .await?
                .delete(&name, &kube::api::DeleteParams::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.into()),
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
        self.inner.cache.mark_started(run_id);
        // As plank: only a request the API refuses (4xx) ends the run; any
        // other failure (no answer, no connection, 5xx) may pass.
        self.call(async move {
            Ok(
                match inner
                    .conn
                    .pods()
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
        .map_err(|e| ExecError::Transient(e.to_string()))?
    }

    fn revive_pod(&self, run_id: &str, pod: &Pod) -> Result<(), ExecError> {
        self.delete(run_id)
            .map_err(|e| ExecError::Refused(e.to_string()))?;
        // A deleted pod may take a while to go (its grace period): its name is
        // free once a create no longer conflicts.
        let deadline = std::time::Instant::now() + API_TIMEOUT;
        loop {
            let inner = self.inner.clone();
            let pod = pod.clone();
            let created = self.call(async move {
                match inner
                    .conn
                    .pods()
                    .await?
                    .create(&PostParams::default(), &pod)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e.into()),
                }
            });
            match created {
                Ok(true) => break,
                Ok(false) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Ok(false) => return Err(ExecError::Refused("the old pod is still there".into())),
                Err(e) => return Err(ExecError::Refused(e.to_string())),
            }
        }
        self.inner.cache.mark_started(run_id);
        Ok(())
    }

    fn status(&self, run_id: &str) -> RunStatus {
        let seen = self.inner.cache.with_pod(run_id, |pod| {
            pod_state(pod, &self.inner.settings, jiff::Timestamp::now())
        });
        if let Some(state) = seen {
            if matches!(&state, RunStatus::Failed(why) if why.contains("timeout")) {
                // As plank: a pod past its timeout is deleted (without
                // holding up the caller).
                if let Some(rt) = &self.rt {
                    let (inner, name) = (self.inner.clone(), run_id.to_string());
                    rt.spawn(async move {
                        if let Ok(api) = inner.conn.pods().await {
                            let _ = api.delete(&name, &kube::api::DeleteParams::default()).await;
                        }
                    });
                }
            }
            return state;
        }
        let recently = self.inner.cache.started_within(run_id, START_GRACE);
        if recently || !self.inner.cache.synced() {
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
                        .conn
                        .pods()
                        .await?
                        .delete(&name, &kube::api::DeleteParams::default())
                        .await
                        .map_err(ApiError::from)
                };
                match tokio::time::timeout(API_TIMEOUT, deleted).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(ApiError::Status { code: 404, .. })) => {}
                    Ok(Err(e)) => tracing::warn!(pod = %name, error = %e, "cannot delete the pod"),
                    Err(_) => tracing::warn!(pod = %name, "deleting the pod timed out"),
                }
            });
        }
        RunStatus::Exited { code: 128 + 15 }
    }

    fn remove(&self, run_id: &str) -> Result<(), ExecError> {
        self.delete(run_id)
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
}

/// Whether the API refused the request itself (a 4xx): trying it again would
/// get the same answer.
fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code))
}
