//! Tekton PipelineRuns on a Kubernetes cluster: a pipeline run
//! ([`KubeExecutor::start_pipeline`](super::KubeExecutor::start_pipeline))
//! is one `tekton.dev/v1` PipelineRun in the pod namespace, which Tekton's
//! controller runs; bosun follows it, cancels it and copies its logs.
//!
//! - **Its name.** Lighthouse creates a PipelineRun with `generateName`, so
//!   every create makes a new one. bosun must be able to create a run's
//!   PipelineRun again (a restart between the create and its record) without
//!   making a second, so the name is fixed by the run: Lighthouse's
//!   `generateName` prefix, cut to leave room, then the run id
//!   ([`pipeline_run_name`]: `PREFIX-RUN_ID`, at most 63 characters, Tekton's
//!   limit). A second create of the same run is answered `409
//!   AlreadyExists`, which is the run already started. The run id is also
//!   the label [`RUN_ID_LABEL`], which the watch selects and which Tekton
//!   copies to the PipelineRun's TaskRuns and pods.
//! - **Its state** is the `Succeeded` condition ([`pipeline_state`]): `True`
//!   is exit 0; `False` is a failure (exit 1) when a task failed or the
//!   pipeline timed out, exit 143 (as an aborted pod) when it was
//!   cancelled, and an error (the run cannot go on) for any other reason
//!   (a pipeline Tekton cannot resolve or run, with Tekton's reason and
//!   message); `Unknown` or none yet is running (starting before Tekton
//!   gave it a start time or while it is `PipelineRunPending`). A
//!   PipelineRun deleted under bosun ends its run in error. The states come
//!   from a watch of bosun's PipelineRuns (label [`RUN_ID_LABEL`]), started
//!   when the executor first meets a pipeline run (a start, or a run whose
//!   pod it cannot find after a restart), so a cluster that runs only pods
//!   never asks for PipelineRuns.
//! - **Abort** sets `spec.status: Cancelled` (Tekton's cancellation: it
//!   stops the running TaskRuns and their pods); the PipelineRun ends when
//!   Tekton reports it cancelled. **Remove** deletes it (its TaskRuns and
//!   pods go with it, by their owner references).
//! - **Its log.** The run's log file gets the logs of the PipelineRun's
//!   TaskRun pods (label `tekton.dev/pipelineRun=NAME`), one pod after the
//!   other in the order Tekton started their TaskRuns (its
//!   `childReferences`, then the pods' creation), each pod's `step-*`
//!   containers in their order, under a header per task and per step, then
//!   a last line with the PipelineRun's end. A step is followed as it runs
//!   (resumed after a dropped stream, as a pod's log is); one that never
//!   ran has no lines.
//! - **A cluster without Tekton** (the resource not served: 404) refuses the
//!   start with a clear text ([`not_served`]).
//!
//! It knows nothing of pods' meaning for plain runs: the executor asks it
//! first about a run, and falls back to its pods.

use bosun_base::sync::Lock;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, Preconditions,
};
use serde_json::Value;

use super::client::{ApiError, Connection, Refusal};
use super::logs::{follow_log, read_log, Acting, Resume};
use crate::executor::{ExecError, RunStatus};

/// The label holding the run id on bosun's PipelineRuns (Tekton copies it
/// to their TaskRuns and pods).
pub const RUN_ID_LABEL: &str = "bosun.dev/run-id";

/// Tekton's label naming a TaskRun's (and its pod's) PipelineRun.
pub const PIPELINE_RUN_LABEL: &str = "tekton.dev/pipelineRun";

/// Tekton's label naming a TaskRun's (and its pod's) pipeline task.
const PIPELINE_TASK_LABEL: &str = "tekton.dev/pipelineTask";

/// Tekton's label naming a pod's TaskRun.
const TASK_RUN_LABEL: &str = "tekton.dev/taskRun";

/// The verbs bosun uses on `pipelineruns.tekton.dev` (its health probe asks
/// for each when a cluster has pipeline jobs): create (start), list and
/// watch (the watch), patch (cancel), delete (remove).
pub const PIPELINE_RUN_VERBS: [&str; 5] = ["create", "delete", "list", "watch", "patch"];

/// The longest name Tekton takes (a DNS label: its name is a label value on
/// the TaskRuns and pods).
const MAX_NAME: usize = 63;

/// How long a started pipeline run may be missing from the watch before it
/// counts as gone.
const START_GRACE: Duration = Duration::from_secs(30);

/// `tekton.dev/v1` `pipelineruns`.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tekton.dev", "v1", "PipelineRun"),
        "pipelineruns",
    )
}

/// The name of run `run_id`'s PipelineRun: `generate_name`'s letters
/// (lowercased), digits and dashes (trimmed of dashes, cut to leave room), a
/// dash and the run id; the run id alone when no prefix is left.
pub fn pipeline_run_name(run_id: &str, generate_name: &str) -> String {
    let room = MAX_NAME.saturating_sub(run_id.len() + 1);
    let prefix: String = generate_name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
        .take(room)
        .collect();
    let prefix = prefix.trim_matches('-');
    if prefix.is_empty() {
        run_id.to_string()
    } else {
        format!("{prefix}-{run_id}")
    }
}

/// The PipelineRun bosun creates for run `run_id` from `pipeline_run` (as
/// Lighthouse makes it): named by [`pipeline_run_name`] from its
/// `generateName` (or name), `generateName` dropped, in `namespace`,
/// labelled [`RUN_ID_LABEL`]; what the API server sets (`uid`,
/// `resourceVersion`, `creationTimestamp`, `status`) left out. Refused
/// unless it is a `tekton.dev/v1` PipelineRun.
pub fn prepare(
    run_id: &str,
    pipeline_run: &Value,
    namespace: &str,
) -> Result<DynamicObject, String> {
    let (api_version, kind) = (
        pipeline_run["apiVersion"].as_str().unwrap_or_default(),
        pipeline_run["kind"].as_str().unwrap_or_default(),
    );
    if api_version != "tekton.dev/v1" || kind != "PipelineRun" {
        return Err(format!(
            "not a tekton.dev/v1 PipelineRun (apiVersion {api_version:?}, kind {kind:?})"
        ));
    }
    let mut pr = pipeline_run.clone();
    let meta = pr
        .as_object_mut()
        .ok_or("a PipelineRun is an object")?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let meta = meta
        .as_object_mut()
        .ok_or("a PipelineRun's metadata is an object")?;
    let prefix = meta
        .get("generateName")
        .or(meta.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    for set_by_the_server in [
        "generateName",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "selfLink",
    ] {
        meta.remove(set_by_the_server);
    }
    meta.insert("name".into(), pipeline_run_name(run_id, &prefix).into());
    meta.insert("namespace".into(), namespace.into());
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if !labels.is_object() {
        *labels = Value::Object(Default::default());
    }
    labels[RUN_ID_LABEL] = run_id.into();
    if let Some(o) = pr.as_object_mut() {
        o.remove("status");
    }
    serde_json::from_value(pr).map_err(|e| format!("not a PipelineRun: {e}"))
}

/// The refusal of a start on a cluster that does not serve PipelineRuns.
pub fn not_served(cluster: &str) -> String {
    format!("tekton.dev/v1 PipelineRuns are not served by cluster {cluster}: is Tekton installed?")
}

/// The PipelineRun's `Succeeded` condition: status, reason, message.
fn succeeded(pr: &DynamicObject) -> Option<(&str, &str, &str)> {
    let c = pr.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Succeeded")?;
    Some((
        c["status"].as_str().unwrap_or_default(),
        c["reason"].as_str().unwrap_or_default(),
        c["message"].as_str().unwrap_or_default(),
    ))
}

/// Whether Tekton has ended the PipelineRun.
fn finished(pr: &DynamicObject) -> bool {
    succeeded(pr).is_some_and(|(s, _, _)| s == "True" || s == "False")
}

/// Where a PipelineRun stands, as a run's state (see the module's doc).
pub fn pipeline_state(pr: &DynamicObject) -> RunStatus {
    let name = pr.metadata.name.as_deref().unwrap_or_default();
    let (status, reason, message) = succeeded(pr).unwrap_or_default();
    match status {
        "True" => RunStatus::Exited { code: 0 },
        "False" => match reason {
            // Tekton's word since v1, and v1beta1's.
            "Cancelled" | "PipelineRunCancelled" => RunStatus::Exited { code: 128 + 15 },
            "Failed" | "PipelineRunTimeout" => RunStatus::Exited { code: 1 },
            _ => RunStatus::Failed(format!("PipelineRun {name} failed: {reason}: {message}")),
        },
        _ if pr.metadata.deletion_timestamp.is_some() => {
            RunStatus::Failed(format!("PipelineRun {name} got deleted unexpectedly"))
        }
        _ if reason == "PipelineRunPending" || pr.data["status"]["startTime"].is_null() => {
            RunStatus::Starting
        }
        _ => RunStatus::Running { pid: 0 },
    }
}

/// The run id of one of bosun's PipelineRuns.
fn run_id_of(pr: &DynamicObject) -> Option<String> {
    pr.metadata.labels.as_ref()?.get(RUN_ID_LABEL).cloned()
}

/// The `pipelineruns` of the pod namespace.
async fn pipeline_api(conn: &Connection) -> Result<Api<DynamicObject>, ApiError> {
    let pods = conn.pods().await?;
    let namespace = pods.namespace().unwrap_or("default").to_string();
    Ok(Api::namespaced_with(
        pods.into_client(),
        &namespace,
        &api_resource(),
    ))
}

/// What the watch knows.
#[derive(Default)]
struct State {
    /// bosun's PipelineRuns by run id, as the watch last saw them.
    runs: HashMap<String, DynamicObject>,
    /// The runs known to be PipelineRuns (started here, or seen), and their
    /// PipelineRuns' names.
    names: HashMap<String, String>,
    /// Runs started here that the watch has not shown yet.
    started: HashMap<String, Instant>,
    /// The watch has listed the PipelineRuns at least once.
    synced: bool,
    /// Why PipelineRuns cannot be listed (a 403 or 404 answer), until they
    /// can.
    unavailable: Option<(u16, String)>,
    /// The logs being copied: run id and PipelineRun uid.
    copying: HashSet<(String, String)>,
    /// The runs whose log is to be copied once this process may act on the
    /// cluster (a replica that stopped leading copies none).
    waiting: HashSet<String>,
}

/// A cluster's PipelineRuns: their watch, their states and their logs.
pub(crate) struct Pipelines {
    /// The cluster's name, for texts.
    cluster: String,
    conn: Arc<Connection>,
    /// Where run logs go (`DIR/RUN_ID.log`).
    log_dir: PathBuf,
    rt: tokio::runtime::Handle,
    on_change: Option<Arc<dyn Fn() + Send + Sync>>,
    state: Mutex<State>,
    /// The watch was started.
    watching: AtomicBool,
    /// Woken on every change the watch sees.
    changed: tokio::sync::Notify,
    /// The runs whose log a task is writing.
    writing: super::logs::Writing,
    /// Whether this process may read logs now.
    pub(crate) acting: Acting,
}

/// How a step's copy ended.
enum StepCopy {
    Done,
    PodGone,
    /// This process may no longer act: the copy is handed back.
    Stopped,
}

impl Pipelines {
    /// The PipelineRuns of `cluster`, reached through `conn`; run logs go to
    /// `log_dir`; tasks run on `rt`; `on_change` is called whenever one of
    /// bosun's PipelineRuns changes.
    pub(crate) fn new(
        cluster: &str,
        conn: Arc<Connection>,
        log_dir: PathBuf,
        rt: tokio::runtime::Handle,
        on_change: Option<Arc<dyn Fn() + Send + Sync>>,
    ) -> Self {
        Pipelines {
            cluster: cluster.to_string(),
            conn,
            log_dir,
            rt,
            on_change,
            state: Mutex::default(),
            watching: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
            writing: Default::default(),
            acting: Acting::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    fn notify(&self) {
        self.changed.notify_waiters();
        if let Some(f) = &self.on_change {
            f();
        }
    }

    /// The run's log file.
    fn log_path(&self, run_id: &str) -> PathBuf {
        self.log_dir.join(format!("{run_id}.log"))
    }

    /// Starts the watch of bosun's PipelineRuns, once.
    pub(crate) fn watch(self: &Arc<Self>) {
        if !self.watching.swap(true, Ordering::SeqCst) {
            self.rt.spawn(self.clone().follow());
        }
    }

    /// Whether the watch has answered: listed the PipelineRuns, or been
    /// refused them (403, 404).
    pub(crate) fn settled(&self) -> bool {
        let s = self.state();
        s.synced || s.unavailable.is_some()
    }

    /// The name of run `run_id`'s PipelineRun, if it is a pipeline run.
    pub(crate) fn name_of(&self, run_id: &str) -> Option<String> {
        let s = self.state();
        s.runs
            .get(run_id)
            .and_then(|pr| pr.metadata.name.clone())
            .or_else(|| s.names.get(run_id).cloned())
    }

    /// Where run `run_id` stands, if it is a pipeline run this executor
    /// knows (started here, or seen by the watch).
    pub(crate) fn status(&self, run_id: &str) -> Option<RunStatus> {
        let s = self.state();
        if let Some(pr) = s.runs.get(run_id) {
            return Some(pipeline_state(pr));
        }
        let name = s.names.get(run_id)?;
        let recently = s
            .started
            .get(run_id)
            .is_some_and(|t| t.elapsed() < START_GRACE);
        Some(match &s.unavailable {
            _ if recently => RunStatus::Starting,
            Some((404, _)) => RunStatus::Failed(not_served(&self.cluster)),
            _ if !s.synced => RunStatus::Starting,
            _ => RunStatus::Failed(format!("PipelineRun {name} got deleted unexpectedly")),
        })
    }

    /// Creates run `run_id`'s PipelineRun `pr` (see [`prepare`]): `Ok` once
    /// it exists (made now or before); the API's refusal (4xx) as
    /// [`ExecError::Refused`], with a clear text when the cluster does not
    /// serve PipelineRuns; a failure that may pass (no answer, a 5xx, a 429
    /// with its `Retry-After`) as the outer error.
    pub(crate) async fn create(
        self: Arc<Self>,
        run_id: String,
        pr: DynamicObject,
    ) -> Result<Result<(), ExecError>, Refusal> {
        {
            let mut s = self.state();
            s.names
                .insert(run_id.clone(), pr.metadata.name.clone().unwrap_or_default());
            if !s.runs.contains_key(&run_id) {
                s.started.insert(run_id.clone(), Instant::now());
            }
        }
        self.watch();
        let body =
            serde_json::to_vec(&pr).map_err(|e| Refusal::from(kube::Error::SerdeError(e)))?;
        let created = match self
            .conn
            .create_in("/apis/tekton.dev/v1", "pipelineruns", body)
            .await
        {
            Ok(()) => Ok(()),
            // A 404 of the resource, not of the namespace: no Tekton there.
            Err(Refusal { answer: Ok(s), .. })
                if s.code == 404 && s.details.as_ref().is_none_or(|d| d.kind != "namespaces") =>
            {
                Err(ExecError::Refused(not_served(&self.cluster)))
            }
            Err(refusal) => refusal.of_creation()?,
        };
        if let Err(ExecError::Refused(_)) = &created {
            // Never made: not a pipeline run to follow.
            let mut s = self.state();
            s.names.remove(&run_id);
            s.started.remove(&run_id);
        }
        Ok(created)
    }

    /// Asks Tekton to cancel run `run_id`'s PipelineRun (`spec.status:
    /// Cancelled`), unless it has ended.
    pub(crate) async fn cancel(&self, run_id: &str) -> Result<(), ApiError> {
        let (name, ended) = {
            let s = self.state();
            let pr = s.runs.get(run_id);
            (
                pr.and_then(|p| p.metadata.name.clone())
                    .or_else(|| s.names.get(run_id).cloned()),
                pr.is_some_and(finished),
            )
        };
        if ended {
            return Ok(());
        }
        let api = pipeline_api(&self.conn).await?;
        let names = match name {
            Some(name) => vec![name],
            // Not seen yet (the watch has not listed them since a
            // restart): its PipelineRuns by the run's label.
            None => {
                let lp = ListParams::default().labels(&format!("{RUN_ID_LABEL}={run_id}"));
                match api.list(&lp).await {
                    Ok(list) => list
                        .items
                        .iter()
                        .filter(|pr| !finished(pr))
                        .filter_map(|pr| pr.metadata.name.clone())
                        .collect(),
                    Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let patch = serde_json::json!({"spec": {"status": "Cancelled"}});
        for name in names {
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch.clone()))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Deletes run `run_id`'s PipelineRun (the one the watch last saw, by
    /// its uid); one already gone is not an error. Its log is no longer
    /// copied.
    pub(crate) async fn delete(&self, run_id: &str) -> Result<(), ApiError> {
        let (name, uid) = {
            let s = self.state();
            let pr = s.runs.get(run_id);
            (
                pr.and_then(|p| p.metadata.name.clone())
                    .or_else(|| s.names.get(run_id).cloned()),
                pr.and_then(|p| p.metadata.uid.clone()),
            )
        };
        let Some(name) = name else { return Ok(()) };
        let params = DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match pipeline_api(&self.conn).await?.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let mut s = self.state();
        s.names.remove(run_id);
        s.started.remove(run_id);
        s.copying.retain(|(r, _)| r != run_id);
        s.waiting.remove(run_id);
        Ok(())
    }

    /// Follows bosun's PipelineRuns until the runtime ends. A refusal
    /// (403: no permission; 404: no Tekton) is recorded and asked again
    /// with a growing pause (up to 30 s).
    async fn follow(self: Arc<Self>) {
        use futures_util::StreamExt;
        use kube::runtime::watcher::{self, Event};
        let mut pause = Duration::from_secs(1);
        loop {
            let api = match pipeline_api(&self.conn).await {
                Ok(a) => a,
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let config = watcher::Config::default().labels(RUN_ID_LABEL);
            let mut events = watcher::watcher(api, config).boxed();
            let mut listing: HashMap<String, DynamicObject> = HashMap::new();
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(pr)) => {
                        if let Some(id) = run_id_of(&pr) {
                            listing.insert(id, pr);
                        }
                    }
                    Ok(Event::InitDone) => {
                        pause = Duration::from_secs(1);
                        let seen: Vec<(String, DynamicObject)> = {
                            let mut guard = self.state();
                            let s = &mut *guard;
                            // A run the last listing had and this one lacks
                            // may be gone, or made just after this list
                            // was taken: it counts as starting for a while.
                            let missing: Vec<String> = s
                                .runs
                                .keys()
                                .filter(|id| !listing.contains_key(*id))
                                .cloned()
                                .collect();
                            for id in missing {
                                s.started.insert(id, Instant::now());
                            }
                            s.runs = std::mem::take(&mut listing);
                            for (id, pr) in &s.runs {
                                let name = pr.metadata.name.clone().unwrap_or_default();
                                s.names.insert(id.clone(), name);
                            }
                            s.synced = true;
                            s.unavailable = None;
                            s.runs
                                .iter()
                                .map(|(id, pr)| (id.clone(), pr.clone()))
                                .collect()
                        };
                        for (id, pr) in seen {
                            self.copy_log(&id, &pr);
                        }
                        self.notify();
                    }
                    Ok(Event::Apply(pr)) => {
                        let Some(id) = run_id_of(&pr) else { continue };
                        {
                            let mut s = self.state();
                            s.started.remove(&id);
                            let name = pr.metadata.name.clone().unwrap_or_default();
                            s.names.insert(id.clone(), name);
                            s.runs.insert(id.clone(), pr.clone());
                        }
                        self.copy_log(&id, &pr);
                        self.notify();
                    }
                    Ok(Event::Delete(pr)) => {
                        let Some(id) = run_id_of(&pr) else { continue };
                        {
                            let mut s = self.state();
                            if s.runs
                                .get(&id)
                                .is_some_and(|q| q.metadata.uid == pr.metadata.uid)
                            {
                                s.runs.remove(&id);
                                s.waiting.remove(&id);
                            }
                        }
                        self.notify();
                    }
                    Err(e) => {
                        let refused = match &e {
                            watcher::Error::InitialListFailed(kube::Error::Api(s))
                            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
                                if s.code == 403 || s.code == 404 =>
                            {
                                Some((s.code, e.to_string()))
                            }
                            _ => None,
                        };
                        match refused {
                            Some(why) => {
                                let first = self.state().unavailable.replace(why).is_none();
                                if first {
                                    self.notify();
                                }
                                tokio::time::sleep(pause).await;
                                pause = (pause * 2).min(Duration::from_secs(30));
                            }
                            // The watcher lists again by itself (410 Gone
                            // included); wait a little before it tries.
                            None => tokio::time::sleep(Duration::from_secs(1)).await,
                        }
                    }
                }
            }
        }
    }

    /// Starts copying the logs of run `run_id`'s PipelineRun `pr` into the
    /// run's log file, once per PipelineRun. While this process may not act
    /// (a replica that stopped leading), the copy waits for
    /// [`Pipelines::copy_waiting`], as a pod's does.
    fn copy_log(self: &Arc<Self>, run_id: &str, pr: &DynamicObject) {
        let (Some(name), Some(uid)) = (pr.metadata.name.clone(), pr.metadata.uid.clone()) else {
            return;
        };
        if !self.acting.open() {
            self.state().waiting.insert(run_id.to_string());
            return;
        }
        if !self
            .state()
            .copying
            .insert((run_id.to_string(), uid.clone()))
        {
            return;
        }
        let writing = super::logs::WritingGuard::enter(&self.writing, &Arc::from(run_id));
        let this = self.clone();
        let run_id = run_id.to_string();
        self.rt.spawn(async move {
            let _writing = writing;
            this.assemble(run_id, name, uid).await
        });
    }

    /// Starts the copies that waited while this process could not act,
    /// of the PipelineRuns still there, if it may now.
    pub(crate) fn copy_waiting(self: &Arc<Self>) {
        if !self.acting.open() {
            return;
        }
        let waiting: Vec<(String, DynamicObject)> = {
            let mut s = self.state();
            let ids = std::mem::take(&mut s.waiting);
            ids.into_iter()
                .filter_map(|id| Some((id.clone(), s.runs.get(&id)?.clone())))
                .collect()
        };
        for (id, pr) in waiting {
            self.copy_log(&id, &pr);
        }
    }

    /// Stops copying run `run_id`'s log (of PipelineRun `uid`) while this
    /// process may not act: its partial file goes (the store's, shipped by
    /// the leader, is served), and the copy starts again from the start if
    /// this process comes to lead while the PipelineRun is there.
    fn hand_back(&self, run_id: &str, uid: &str) {
        let mut s = self.state();
        s.copying.remove(&(run_id.to_string(), uid.to_string()));
        s.waiting.insert(run_id.to_string());
        drop(s);
        let _ = std::fs::remove_file(self.log_path(run_id));
    }

    /// Whether a task is still writing run `run_id`'s log file, or waits to
    /// (this process does not lead now).
    pub(crate) fn is_writing(&self, run_id: &str) -> bool {
        self.writing.locked().contains_key(run_id) || self.state().waiting.contains(run_id)
    }

    fn still_copying(&self, run_id: &str, uid: &str) -> bool {
        self.state()
            .copying
            .contains(&(run_id.to_string(), uid.to_string()))
    }

    /// Writes the run's log: its PipelineRun's pods one after the other,
    /// until the PipelineRun has ended and every pod is copied.
    async fn assemble(self: Arc<Self>, run_id: String, name: String, uid: String) {
        let path = self.log_path(&run_id);
        // Copied to its end before (by this daemon before a restart): the
        // pods may be gone since, the copy stays.
        if std::fs::read_to_string(&path).is_ok_and(|log| is_complete(&log)) {
            return;
        }
        let file = std::fs::create_dir_all(&self.log_dir).and_then(|_| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
        });
        let mut out = match file {
            Ok(f) => Out(f),
            Err(e) => {
                tracing::warn!(pipeline_run = %name, error = %e, "cannot write the run's log file");
                return;
            }
        };
        let mut done: HashSet<String> = HashSet::new();
        let selector = format!("{PIPELINE_RUN_LABEL}={name}");
        loop {
            if !self.still_copying(&run_id, &uid) {
                return;
            }
            if !self.acting.open() {
                drop(out);
                return self.hand_back(&run_id, &uid);
            }
            let changed = self.changed.notified();
            let pr = self
                .state()
                .runs
                .get(&run_id)
                .filter(|pr| pr.metadata.uid.as_deref() == Some(uid.as_str()))
                .cloned();
            let Some(pr) = pr else {
                if self.settled() {
                    out.line(&format!(
                        "bosun: PipelineRun {name} was deleted before its logs were copied to their end"
                    ));
                    return;
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), changed).await;
                continue;
            };
            // Read before the pods are listed: once it has ended, the list
            // has every pod it made.
            let ended = finished(&pr);
            let pods = async {
                let api = self.conn.pods().await?;
                let list = api
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .map_err(ApiError::from)?;
                Ok::<_, ApiError>((api, list.items))
            };
            match pods.await {
                Ok((api, mut pods)) => {
                    order(&mut pods, &pr);
                    let next = pods
                        .into_iter()
                        .find(|p| p.metadata.uid.as_ref().is_some_and(|u| !done.contains(u)));
                    if let Some(pod) = next {
                        if !self.copy_pod(&api, &pod, &run_id, &uid, &mut out).await {
                            drop(out);
                            return self.hand_back(&run_id, &uid);
                        }
                        done.insert(pod.metadata.uid.clone().unwrap_or_default());
                        continue;
                    }
                    if ended {
                        let (status, reason, message) = succeeded(&pr).unwrap_or_default();
                        let word = if status == "True" {
                            "succeeded"
                        } else {
                            "ended"
                        };
                        out.line(&format!(
                            "==> PipelineRun {name} {word}: {reason}: {message} <=="
                        ));
                        return;
                    }
                }
                Err(e) => {
                    tracing::info!(pipeline_run = %name, error = %e, "cannot list the PipelineRun's pods")
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), changed).await;
        }
    }

    /// Copies one TaskRun pod's steps, in order, each under a header; false
    /// when it stopped because this process may no longer act.
    async fn copy_pod(
        &self,
        api: &Api<Pod>,
        pod: &Pod,
        run_id: &str,
        uid: &str,
        out: &mut Out,
    ) -> bool {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let task = labels.get(PIPELINE_TASK_LABEL).map_or("?", String::as_str);
        out.line(&format!("==> task {task} (pod {name}) <=="));
        let steps: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| c.name.clone())
            .filter(|n| n.starts_with("step-"))
            .collect();
        for container in steps {
            out.line(&format!("--> step {}", &container["step-".len()..]));
            let copied = self
                .copy_step(api, &name, &pod_uid, &container, run_id, uid, out)
                .await;
            match copied {
                StepCopy::Done => {}
                StepCopy::PodGone => {
                    out.line("bosun: the pod was deleted before its log was copied to its end");
                    return true;
                }
                StepCopy::Stopped => return false,
            }
        }
        true
    }

    /// Copies one step's log to its end (following it while it runs).
    #[allow(clippy::too_many_arguments)]
    async fn copy_step(
        &self,
        api: &Api<Pod>,
        name: &str,
        pod_uid: &str,
        container: &str,
        run_id: &str,
        uid: &str,
        out: &mut Out,
    ) -> StepCopy {
        let mut resume = Resume::default();
        let mut backoff = Duration::from_millis(200);
        let mut failures = 0;
        loop {
            if !self.still_copying(run_id, uid) {
                return StepCopy::Done;
            }
            if !self.acting.open() {
                return StepCopy::Stopped;
            }
            let pod = match api.get_opt(name).await {
                Ok(Some(p)) if p.metadata.uid.as_deref() == Some(pod_uid) => p,
                Ok(_) => return StepCopy::PodGone,
                Err(e) => {
                    tracing::info!(pod = %name, error = %e, "cannot read the pod");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
            };
            let (started, ended) = progress(&pod, container);
            if !started {
                // A step that never ran has no log.
                if ended {
                    return StepCopy::Done;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
            // A running step's log is followed on a stream connection (no
            // read timeout: a quiet step keeps its one follow); an ended
            // one's is read to its end.
            let read = if ended {
                read_log(api, name, container, &mut resume, &mut out.0).await
            } else {
                follow_log(&self.conn, name, container, &mut resume, &mut out.0).await
            };
            match read {
                Ok(()) if ended => return StepCopy::Done,
                // The stream ended: the step ended, or the stream broke;
                // where the step stands is asked again in a moment.
                Ok(()) => {
                    backoff = Duration::from_millis(200);
                    tokio::time::sleep(backoff).await;
                }
                Err(e) => {
                    failures += 1;
                    if ended && failures >= 5 {
                        out.line(&format!(
                            "bosun: the log of {container} could not be read to its end: {e}"
                        ));
                        return StepCopy::Done;
                    }
                    tracing::info!(pod = %name, container, error = %e, "cannot read the step's log yet");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }
}

/// Whether `container` of `pod` has started (running or terminated) and
/// whether it has ended (terminated, or the pod ended).
fn progress(pod: &Pod, container: &str) -> (bool, bool) {
    let status = pod.status.clone().unwrap_or_default();
    let pod_ended = matches!(status.phase.as_deref(), Some("Succeeded") | Some("Failed"));
    let state = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container)
        .and_then(|c| c.state.clone())
        .unwrap_or_default();
    let terminated = state.terminated.is_some();
    (
        state.running.is_some() || terminated,
        terminated || pod_ended,
    )
}

/// Orders a PipelineRun's pods as Tekton started their TaskRuns (its
/// `childReferences`), then by creation, then by name.
fn order(pods: &mut [Pod], pr: &DynamicObject) {
    let children: Vec<&str> = pr.data["status"]["childReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    pods.sort_by_cached_key(|p| {
        let task_run = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(TASK_RUN_LABEL))
            .cloned()
            .unwrap_or_default();
        (
            children
                .iter()
                .position(|c| *c == task_run)
                .unwrap_or(usize::MAX),
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.name.clone(),
        )
    });
}

/// Whether a run's log was copied to its end: its last line is the
/// PipelineRun's end.
fn is_complete(log: &str) -> bool {
    log.lines()
        .last()
        .is_some_and(|l| l.starts_with("==> PipelineRun ") && l.ends_with(" <=="))
}

/// The run's log file.
struct Out(std::fs::File);

impl Out {
    /// Writes `text` as a line of its own (after a newline, if the log so
    /// far does not end with one).
    fn line(&mut self, text: &str) {
        use std::io::Write;
        use std::os::unix::fs::FileExt;
        let len = self.0.metadata().map(|m| m.len()).unwrap_or(0);
        let mut last = [b'\n'];
        if len > 0 {
            let _ = self.0.read_at(&mut last, len - 1);
        }
        let sep = if last[0] == b'\n' { "" } else { "\n" };
        let _ = writeln!(self.0, "{sep}{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pr(status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1",
            "kind": "PipelineRun",
            "metadata": {"name": "p"},
            "spec": {},
            "status": status,
        }))
        .unwrap()
    }

    fn cond(status: &str, reason: &str) -> Value {
        json!({"startTime": "2026-12-01T10:00:00Z", "conditions": [{"type": "Succeeded", "status": status, "reason": reason, "message": "m"}]})
    }

    #[test]
    fn the_succeeded_condition_is_the_run_state() {
        assert_eq!(pipeline_state(&pr(json!({}))), RunStatus::Starting);
        assert_eq!(
            pipeline_state(&pr(
                json!({"conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "PipelineRunPending"}]})
            )),
            RunStatus::Starting
        );
        assert_eq!(
            pipeline_state(&pr(cond("Unknown", "Running"))),
            RunStatus::Running { pid: 0 }
        );
        assert_eq!(
            pipeline_state(&pr(cond("True", "Succeeded"))),
            RunStatus::Exited { code: 0 }
        );
        assert_eq!(
            pipeline_state(&pr(cond("True", "Completed"))),
            RunStatus::Exited { code: 0 }
        );
        assert_eq!(
            pipeline_state(&pr(cond("False", "Failed"))),
            RunStatus::Exited { code: 1 }
        );
        assert_eq!(
            pipeline_state(&pr(cond("False", "PipelineRunTimeout"))),
            RunStatus::Exited { code: 1 }
        );
        for cancelled in ["Cancelled", "PipelineRunCancelled"] {
            assert_eq!(
                pipeline_state(&pr(cond("False", cancelled))),
                RunStatus::Exited { code: 143 }
            );
        }
        assert_eq!(
            pipeline_state(&pr(cond("False", "CouldntGetPipeline"))),
            RunStatus::Failed("PipelineRun p failed: CouldntGetPipeline: m".into())
        );
    }

    #[test]
    fn a_run_names_its_pipeline_run() {
        let id = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(
            pipeline_run_name(id, "nkins-x-lighthouse-pr-813-github-"),
            format!("nkins-x-lighthouse-pr-813-{id}")
        );
        assert_eq!(pipeline_run_name(id, ""), id);
        assert_eq!(pipeline_run_name(id, "-Ab_"), format!("ab-{id}"));
        assert_eq!(pipeline_run_name(id, "_.-"), id);
        assert_eq!(pipeline_run_name(id, "a-b"), format!("a-b-{id}"));
        assert!(pipeline_run_name(id, &"x".repeat(100)).len() <= 63);
    }

    #[test]
    fn prepare_names_and_labels_a_pipeline_run() {
        let id = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let lighthouse = json!({
            "apiVersion": "tekton.dev/v1",
            "kind": "PipelineRun",
            "metadata": {"generateName": "org-repo-", "labels": {"created-by-lighthouse": "true"}, "creationTimestamp": null},
            "spec": {"pipelineRef": {"name": "p"}},
            "status": {},
        });
        let pr = prepare(id, &lighthouse, "jx").unwrap();
        assert_eq!(
            pr.metadata.name.as_deref(),
            Some(format!("org-repo-{id}").as_str())
        );
        assert_eq!(pr.metadata.generate_name, None);
        assert_eq!(pr.metadata.namespace.as_deref(), Some("jx"));
        let labels = pr.metadata.labels.clone().unwrap();
        assert_eq!(labels[RUN_ID_LABEL], id);
        assert_eq!(labels["created-by-lighthouse"], "true");
        assert_eq!(pr.data["spec"]["pipelineRef"]["name"], "p");
        assert!(pr.data.get("status").is_none());
        let v1beta1 = json!({"apiVersion": "tekton.dev/v1beta1", "kind": "PipelineRun"});
        assert!(prepare(id, &v1beta1, "jx").unwrap_err().contains("v1beta1"));
    }
}
