//! `bosun serve`: the daemon. It loads the configuration, opens the store, runs
//! the controller and serves the JSON API and metrics.

// Handlers fail with a ready `Response` (axum's idiom); boxing it would only add noise.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bosun_cluster::executor::Executor;
use bosun_cluster::local::LocalExecutor;
use bosun_cluster::registry::{clusters, ClusterDef};
use bosun_config::types::{JobType, Refs};
use bosun_config::{load, OsFiles, Snapshot};
use bosun_store::active::{ActiveRuns, Observers};
use bosun_store::clock::{Clock, SystemClock};
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::{Created, NewRun, Run, RunFilter, RunState, Store, StoreError};
use clap::{Args, ValueEnum};
use jiff::Timestamp;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::check::ConfigArgs;
use crate::controller;
use crate::metrics::Metrics;
use bosun_cluster::kube::{KubeExecutor, PodSettings};
use bosun_cluster::shim::RunAs;
use bosun_cluster::trust;
use bosun_store::template::{RunTemplate, SpecSnapshot};

/// Log format.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `bosun serve` arguments.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Where the store and run directories live.
    #[arg(long, default_value = "./bosun-data")]
    pub data_dir: PathBuf,
    /// Address of the API.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// A file holding the bearer token that mutating requests must present.
    #[arg(long, value_name = "FILE")]
    pub api_token_file: Option<PathBuf>,
    /// Allow a non-loopback --listen address without a token.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t)]
    pub log_format: LogFormat,
}

/// Everything the daemon's tasks share.
pub struct App {
    /// The run store.
    pub store: Arc<dyn Store>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The build clusters in force (swapped whole by a reload).
    clusters: RwLock<Arc<Clusters>>,
    /// Makes a local cluster's executor.
    make_executor: ExecutorFactory,
    /// The executors of removed clusters, kept until the controller has
    /// stopped their runs' processes or pods.
    retired: Mutex<HashMap<String, Arc<dyn Executor>>>,
    /// The build clusters' health (Kubernetes clients and probe results).
    pub health: crate::clusters::SharedHealth,
    /// Told when the build clusters change (the health task probes at once).
    pub clusters_changed: tokio::sync::Notify,
    /// Where the time comes from (a manual clock in simulations).
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Wakes the controller at once (a job ended, an abort).
    pub wake: Arc<tokio::sync::Notify>,
    /// Wakes the controller for new runs (a burst of them shares one pass).
    pub new_runs: tokio::sync::Notify,
    /// The periodic scheduler.
    pub scheduler: Mutex<bosun_scheduler::Scheduler>,
    /// Wakes the scheduler task.
    pub scheduler_wake: tokio::sync::Notify,
    /// Parsed spec snapshots by content hash (immutable, so never stale).
    pub specs: Mutex<HashMap<String, Arc<SpecSnapshot>>>,
    /// The store's active runs, in memory (the controller's view).
    pub active: Arc<ActiveRuns>,
    /// Run templates of the jobs triggered through the API, for the
    /// snapshot in force.
    templates: Mutex<Templates>,
    /// Runs whose start is in flight (the controller counts them as running).
    pub starting: Mutex<HashMap<String, controller::Starting>>,
    /// What completed starts and revivals decided, for the controller's next
    /// pass to commit (their runs stay in `starting` until then).
    pub started: Mutex<Vec<(String, bosun_store::Transition)>>,
    /// Starts that failed for a reason that may pass: the next pass releases
    /// their runs, which stay `triggered`, to be started again.
    pub retry: Mutex<Vec<String>>,
    /// Transitions the controller holds for its next commit.
    pub held: Mutex<controller::Held>,
    /// Runs whose abort was requested.
    pub aborts: Mutex<HashSet<String>>,
    /// Where the configuration comes from (reloads read it again).
    pub config_args: ConfigArgs,
    config_status: Mutex<crate::reload::ConfigStatus>,
    cpus: usize,
    token: Option<String>,
}

/// The user each local cluster runs its jobs as (`build_clusters.<alias>.run_as`).
/// Local jobs could read the daemon's kubeconfigs, so when trusted clusters are
/// configured and bosun runs as root, every local cluster must set one.
pub fn local_users(
    config: &bosun_config::types::ProwConfig,
    clusters: &BTreeMap<String, ClusterDef>,
) -> Result<HashMap<String, RunAs>, String> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut users = HashMap::new();
    for (alias, c) in &config.build_clusters {
        if let Some(spec) = &c.run_as {
            let user =
                RunAs::resolve(spec, &passwd).map_err(|e| format!("build_clusters.{alias}.{e}"))?;
            users.insert(alias.clone(), user);
        }
    }
    let trusted = config.build_clusters.values().any(|c| c.trusted.is_some());
    if trusted && rustix::process::geteuid().is_root() {
        let missing: Vec<&str> = clusters
            .iter()
            .filter(|(a, c)| matches!(c, ClusterDef::Local { .. }) && !users.contains_key(*a))
            .map(|(a, _)| a.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "trusted clusters are configured and bosun runs as root, so local jobs could read its credentials: set build_clusters.<alias>.run_as to an unprivileged user for the local cluster(s) {} (an implicit default cluster must be defined to set it)",
                missing.join(", ")
            ));
        }
    }
    Ok(users)
}

/// The repository a periodic is defined for: its in-repo source, else its
/// first `extra_refs`.
fn definition_repo(p: &bosun_config::Periodic) -> Option<String> {
    match &p.source {
        bosun_config::types::JobSource::InRepo { repo, .. } => Some(repo.clone()),
        bosun_config::types::JobSource::Central => p
            .base
            .extra_refs
            .first()
            .map(|r| format!("{}/{}", r.org, r.repo)),
    }
}

/// The configured job a run re-runs, found by its type and name (and, for a
/// pre- or postsubmit, the repository of its refs): `Some(repo it is defined
/// for)`, or `None` when no such job is configured any more.
fn rerun_definition_repo(snapshot: &Snapshot, run: &Run) -> Option<Option<String>> {
    let run_repo = run.refs.as_ref().map(|r| format!("{}/{}", r.org, r.repo));
    fn in_repos<K>(
        jobs: &BTreeMap<String, Vec<bosun_config::Job<K>>>,
        repo: Option<&str>,
        name: &str,
    ) -> Option<Option<String>> {
        let repo = repo?;
        jobs.get(repo)?
            .iter()
            .any(|j| j.base.name == name)
            .then(|| Some(repo.to_string()))
    }
    match run.job_type {
        JobType::Periodic => snapshot
            .periodics
            .iter()
            .find(|p| Some(p.identity()) == run.periodic || p.base.name == run.job)
            .map(definition_repo),
        JobType::Presubmit => in_repos(&snapshot.presubmits, run_repo.as_deref(), &run.job),
        JobType::Postsubmit => in_repos(&snapshot.postsubmits, run_repo.as_deref(), &run.job),
        _ => None,
    }
}

/// A job in the API's template cache: its kind, its repo (pre- and
/// postsubmits) and its place in the snapshot's list.
type TemplateKey = (JobType, Option<String>, usize);

/// The API's run templates for one snapshot.
#[derive(Default)]
struct Templates {
    snapshot: Option<Arc<Snapshot>>,
    by_job: HashMap<TemplateKey, Arc<ApiTemplate>>,
}

/// A run template, the repository its job is defined for, and why its runs
/// cannot run, if they cannot.
struct ApiTemplate {
    template: RunTemplate,
    repo: Option<String>,
    unrunnable: Option<String>,
}

/// Makes the executor of a cluster, given its alias, definition, user (local
/// clusters) and pod namespace (Kubernetes clusters); none when it cannot.
pub type ExecutorFactory = Box<
    dyn Fn(&str, &ClusterDef, Option<RunAs>, &PodSettings) -> Option<Arc<dyn Executor>>
        + Send
        + Sync,
>;

/// The build clusters in force and their executors.
pub struct Clusters {
    /// Clusters by alias.
    pub defs: BTreeMap<String, ClusterDef>,
    /// The users local clusters run jobs as.
    pub users: HashMap<String, RunAs>,
    /// Where Kubernetes clusters create pods, and their timeouts.
    pub pods: PodSettings,
    /// Executors by alias.
    pub executors: HashMap<String, Arc<dyn Executor>>,
}

impl Clusters {
    /// The clusters `defs`, each with its executor: the one of `previous`
    /// when the cluster is unchanged (its runs go on), else a new one.
    pub fn build(
        defs: BTreeMap<String, ClusterDef>,
        users: HashMap<String, RunAs>,
        pods: PodSettings,
        make: &ExecutorFactory,
        previous: Option<&Clusters>,
    ) -> Clusters {
        let executors = defs
            .iter()
            .filter_map(|(alias, def)| {
                let user = users.get(alias).copied();
                let kept = previous
                    .filter(|p| match def {
                        ClusterDef::Local { .. } => p.users.get(alias).copied() == user,
                        ClusterDef::Kubernetes { .. } => {
                            p.defs.get(alias) == Some(def) && p.pods == pods
                        }
                    })
                    .and_then(|p| p.executors.get(alias).cloned());
                let exec = kept.or_else(|| make(alias, def, user, &pods))?;
                Some((alias.clone(), exec))
            })
            .collect();
        Clusters {
            defs,
            users,
            pods,
            executors,
        }
    }
}

/// What an [`App`] is made of.
pub struct AppParts {
    /// The run store.
    pub store: Arc<dyn Store>,
    /// Its active runs, loaded, and told of the store's commits.
    pub active: Arc<ActiveRuns>,
    /// The configuration in force.
    pub snapshot: Snapshot,
    /// Its load's warnings.
    pub warnings: usize,
    /// Build clusters by alias.
    pub clusters: BTreeMap<String, ClusterDef>,
    /// The users local clusters run jobs as.
    pub users: HashMap<String, RunAs>,
    /// Makes a local cluster's executor.
    pub make_executor: ExecutorFactory,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Wakes the controller (executors call it when a job ends).
    pub wake: Arc<tokio::sync::Notify>,
    /// Where the configuration comes from.
    pub config_args: ConfigArgs,
    /// The API token.
    pub token: Option<String>,
    /// CPUs (the default slots of a local cluster).
    pub cpus: usize,
}

impl App {
    /// An app with its scheduler loaded from the snapshot.
    pub fn new(p: AppParts) -> Arc<App> {
        let status = crate::reload::ConfigStatus::initial(&p.snapshot, p.warnings);
        p.metrics.reload_ok.set(1);
        p.metrics
            .reload_success_time
            .set(crate::metrics::seconds(status.loaded_at));
        let mut scheduler = bosun_scheduler::Scheduler::new();
        scheduler.set_jobs(bosun_scheduler::config::jobs(&p.snapshot), p.clock.now());
        let pods = PodSettings::of(&p.snapshot.config);
        Arc::new(App {
            store: p.store,
            scheduler: Mutex::new(scheduler),
            scheduler_wake: tokio::sync::Notify::new(),
            snapshot: RwLock::new(Arc::new(p.snapshot)),
            clusters: RwLock::new(Arc::new(Clusters::build(
                p.clusters,
                p.users,
                pods,
                &p.make_executor,
                None,
            ))),
            make_executor: p.make_executor,
            retired: Mutex::default(),
            health: Mutex::default(),
            clusters_changed: tokio::sync::Notify::new(),
            clock: p.clock,
            metrics: p.metrics,
            wake: p.wake,
            new_runs: tokio::sync::Notify::new(),
            specs: Mutex::default(),
            starting: Mutex::default(),
            started: Mutex::default(),
            retry: Mutex::default(),
            held: Mutex::default(),
            active: p.active,
            templates: Mutex::default(),
            aborts: Mutex::default(),
            config_args: p.config_args,
            config_status: Mutex::new(status),
            cpus: p.cpus,
            token: p.token,
        })
    }

    /// The configuration in force.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts a new configuration in force.
    pub fn set_snapshot(&self, snapshot: Snapshot) {
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(snapshot);
    }

    /// The build clusters a configuration defines.
    pub fn clusters_of(&self, snapshot: &Snapshot) -> BTreeMap<String, ClusterDef> {
        clusters(
            &snapshot.config,
            &self.config_args.kube_contexts(),
            self.cpus,
        )
    }

    /// The build clusters in force.
    pub fn clusters(&self) -> Arc<Clusters> {
        self.clusters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts `defs` in force (local executors of unchanged clusters are kept).
    /// Returns the aliases added and removed.
    pub fn set_clusters(
        &self,
        defs: BTreeMap<String, ClusterDef>,
        users: HashMap<String, RunAs>,
        pods: PodSettings,
    ) -> (Vec<String>, Vec<String>) {
        let mut slot = self.clusters.write().unwrap_or_else(|e| e.into_inner());
        let added = defs
            .keys()
            .filter(|a| !slot.defs.contains_key(*a))
            .cloned()
            .collect();
        let removed: Vec<String> = slot
            .defs
            .keys()
            .filter(|a| !defs.contains_key(*a))
            .cloned()
            .collect();
        let changed = slot.defs != defs;
        {
            let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            for alias in &removed {
                if let Some(exec) = slot.executors.get(alias) {
                    retired.insert(alias.clone(), exec.clone());
                }
            }
            retired.retain(|alias, _| !defs.contains_key(alias));
        }
        let next = Clusters::build(defs, users, pods, &self.make_executor, Some(&slot));
        *slot = Arc::new(next);
        if changed {
            self.clusters_changed.notify_one();
        }
        (added, removed)
    }

    /// The executor of the removed cluster `alias`, if it is still kept.
    pub fn retired_executor(&self, alias: &str) -> Option<Arc<dyn Executor>> {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(alias)
            .cloned()
    }

    /// Drops the executors of removed clusters that no run is pending on.
    pub fn prune_retired(&self, in_use: impl Fn(&str) -> bool) {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|alias, _| in_use(alias));
    }

    /// The configuration's status.
    pub fn config_status(&self) -> crate::reload::ConfigStatus {
        self.config_status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the configuration's status.
    pub fn set_config_status(&self, status: crate::reload::ConfigStatus) {
        *self.config_status.lock().unwrap_or_else(|e| e.into_inner()) = status;
    }

    /// Requests the abort of every active run of a periodic but `keep` (the
    /// runs that replace them: `replace`).
    pub fn abort_active_of(&self, periodic: &str, keep: &[String]) {
        let filter = RunFilter {
            periodic: Some(periodic.to_string()),
            active: true,
            limit: 1000,
            ..RunFilter::default()
        };
        let runs = self.store.list(&filter).unwrap_or_default();
        let mut aborts = self.aborts.lock().unwrap_or_else(|e| e.into_inner());
        aborts.extend(
            runs.into_iter()
                .map(|r| r.id)
                .filter(|id| !keep.contains(id)),
        );
        self.wake.notify_one();
    }

    /// A run of `periodic` ended: its scheduler entry looks again.
    pub fn periodic_run_ended(&self, periodic: &str) {
        let evaluate = self
            .scheduler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .run_ended(periodic, self.clock.now());
        if evaluate {
            self.scheduler_wake.notify_one();
        }
    }

    /// The run template of a job of `snapshot` (made by `make` the first time
    /// it is asked for while `snapshot` is in force).
    fn template(
        &self,
        snapshot: &Arc<Snapshot>,
        key: TemplateKey,
        make: impl FnOnce() -> (RunTemplate, Option<String>),
    ) -> Arc<ApiTemplate> {
        let mut cache = self.templates.lock().unwrap_or_else(|e| e.into_inner());
        if !cache
            .snapshot
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, snapshot))
        {
            *cache = Templates {
                snapshot: Some(snapshot.clone()),
                by_job: HashMap::new(),
            };
        }
        cache
            .by_job
            .entry(key)
            .or_insert_with(|| {
                let (template, repo) = make();
                let unrunnable = self.unrunnable(&template);
                Arc::new(ApiTemplate {
                    template,
                    repo,
                    unrunnable,
                })
            })
            .clone()
    }

    /// Why runs of `template` cannot run on its (local) cluster, if they
    /// cannot.
    fn unrunnable(&self, template: &RunTemplate) -> Option<String> {
        let new = template.run(None);
        let Some(ClusterDef::Local { .. }) =
            self.clusters().defs.get(&new.configured_cluster).cloned()
        else {
            return None;
        };
        let spec = serde_json::from_str::<SpecSnapshot>(template.spec().json()).ok()?;
        let e = bosun_cluster::local::command_of(spec.pod_spec.as_ref()?).err()?;
        Some(format!(
            "job {} cannot run on local cluster {}: {e}",
            new.job, new.configured_cluster
        ))
    }

    /// True (once) when an abort of `id` was requested.
    pub fn take_abort(&self, id: &str) -> bool {
        self.aborts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }
}

/// Runs the daemon until SIGINT or SIGTERM.
pub fn run(args: &ServeArgs) -> ExitCode {
    init_logging(args.log_format);
    let token = match &args.api_token_file {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            Ok(_) => {
                tracing::error!(file = %p.display(), "the API token file is empty");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                tracing::error!(file = %p.display(), error = %e, "cannot read the API token file");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    if token.is_none() && !args.listen.ip().is_loopback() && !args.insecure_no_auth {
        tracing::error!(listen = %args.listen, "refusing to serve a non-loopback address without --api-token-file (or --insecure-no-auth)");
        return ExitCode::FAILURE;
    }
    let loaded = load(&args.config.load_options(), &OsFiles);
    let warnings = loaded.diagnostics.iter().filter(|d| !d.is_error()).count();
    for d in &loaded.diagnostics {
        if d.is_error() {
            tracing::error!("{d}");
        } else {
            tracing::warn!("{d}");
        }
    }
    let Some(snapshot) = loaded.snapshot else {
        tracing::error!("the configuration has errors; run `bosun check`");
        return ExitCode::FAILURE;
    };
    if let Err(e) = std::fs::create_dir_all(&args.data_dir) {
        tracing::error!(dir = %args.data_dir.display(), error = %e, "cannot create the data directory");
        return ExitCode::FAILURE;
    }
    let metrics = Metrics::new(&snapshot.config.prowjob_namespace);
    let active = Arc::new(ActiveRuns::default());
    // `BOSUN_FIRE_LOG_MIN` (tests) sets how many fires of a batch take the
    // store's fire log (1: every fire, as in a burst).
    let store_options = SqliteOptions {
        fire_log_min: std::env::var("BOSUN_FIRE_LOG_MIN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(SqliteOptions::default().fire_log_min),
        ..SqliteOptions::default()
    };
    let store = match SqliteStore::open_with(
        args.data_dir.join("bosun.db"),
        store_options,
        Some(Arc::new(Observers(vec![metrics.clone(), active.clone()]))),
    ) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tracing::error!(error = %e, "cannot open the store");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = active.load(&*store) {
        tracing::error!(error = %e, "cannot read the active runs");
        return ExitCode::FAILURE;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let clusters = clusters(&snapshot.config, &args.config.kube_contexts(), cpus);
    let shim = vec![
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "bosun".into()),
        "run-shim".to_string(),
    ];
    let run_as = match local_users(&snapshot.config, &clusters) {
        Ok(u) => u,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let wake = Arc::new(tokio::sync::Notify::new());
    let make_executor: ExecutorFactory = {
        let (wake, runs) = (wake.clone(), args.data_dir.join("runs"));
        Box::new(move |alias, def, user, pods| match def {
            ClusterDef::Local { .. } => {
                let wake = wake.clone();
                let exec = LocalExecutor::new(runs.join(alias), shim.clone())
                    .run_as(user)
                    .on_exit(move || wake.notify_one());
                Some(Arc::new(exec) as Arc<dyn Executor>)
            }
            ClusterDef::Kubernetes {
                context,
                kubeconfig,
                ..
            } => {
                let wake = wake.clone();
                let on_change: Arc<dyn Fn() + Send + Sync> = Arc::new(move || wake.notify_one());
                match KubeExecutor::new(
                    alias,
                    kubeconfig.clone(),
                    context,
                    pods,
                    runs.join(alias),
                    Some(on_change),
                ) {
                    Ok(exec) => Some(Arc::new(exec) as Arc<dyn Executor>),
                    Err(e) => {
                        tracing::error!(cluster = alias, error = %e, "cannot start the cluster's executor");
                        None
                    }
                }
            }
        })
    };
    let app = App::new(AppParts {
        store,
        active,
        snapshot,
        warnings,
        clusters,
        users: run_as,
        make_executor,
        clock: Arc::new(SystemClock),
        metrics,
        wake,
        config_args: args.config.clone(),
        token,
        cpus,
    });
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(serve(app, args.listen))
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

async fn serve(app: Arc<App>, listen: SocketAddr) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(%listen, error = %e, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "bosun serving");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let controller = tokio::spawn(controller_loop(app.clone(), stop_rx.clone()));
    let sinker = tokio::spawn(sinker_loop(app.clone(), stop_rx.clone()));
    let periodics = tokio::spawn(crate::periodics::scheduler_loop(
        app.clone(),
        stop_rx.clone(),
    ));
    let reloads = tokio::spawn(crate::reload::reload_loop(app.clone(), stop_rx.clone()));
    let health = tokio::spawn(crate::clusters::health_loop(app.clone(), stop_rx.clone()));
    let router = routes(app.clone());
    let mut stop_http = stop_rx.clone();
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = stop_http.changed().await;
    });
    let server = tokio::spawn(async move { server.await });
    shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    let _ = server.await;
    let _ = controller.await;
    let _ = sinker.await;
    let _ = periodics.await;
    let _ = reloads.await;
    let _ = health.await;
    ExitCode::SUCCESS
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

/// Runs the controller when woken (a job ended, an abort, new runs) and at
/// least every second: runs started by an earlier daemon have no process this
/// one can wait on, so their state is read from their files. New runs wait for
/// a pass up to [`NEW_RUN_DELAY`]: a burst of them shares one pass instead of
/// each paying for its own.
async fn controller_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let a = app.clone();
        let _ = tokio::task::spawn_blocking(move || controller::reconcile(&a)).await;
        tokio::select! {
            _ = app.wake.notified() => {}
            _ = app.new_runs.notified() => {
                tokio::select! {
                    _ = app.wake.notified() => {}
                    _ = tokio::time::sleep(NEW_RUN_DELAY) => {}
                }
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => {
                // What the passes hold is committed before the daemon exits.
                let a = app.clone();
                let _ = tokio::task::spawn_blocking(move || controller::flush(&a)).await;
                return;
            }
        }
    }
}

/// How long a new run may wait for the controller's next pass.
const NEW_RUN_DELAY: Duration = Duration::from_millis(5);

/// Prow's sinker for runs: every `sinker.resync_period` (default 1h), runs that
/// completed more than `sinker.max_prowjob_age` ago (default 7 days) are deleted
/// with their logs, except the latest run of each periodic.
async fn sinker_loop(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let a = app.clone();
        let _ = tokio::task::spawn_blocking(move || sink(&a, a.clock.now())).await;
        let period = app
            .snapshot()
            .config
            .sinker
            .resync_period
            .map(|d| d.to_std())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(period.max(Duration::from_secs(1))) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One retention pass; returns the deleted runs.
pub fn sink(app: &App, now: Timestamp) -> Vec<String> {
    let age = app
        .snapshot()
        .config
        .sinker
        .max_prowjob_age
        .map(|d| d.to_std())
        .unwrap_or(Duration::from_secs(7 * 24 * 3600));
    let Ok(cutoff) =
        now.checked_sub(jiff::SignedDuration::try_from(age).unwrap_or(jiff::SignedDuration::MAX))
    else {
        return Vec::new();
    };
    match app.store.delete_completed_before(cutoff) {
        Ok(ids) => {
            for id in &ids {
                for exec in app.clusters().executors.values() {
                    let _ = exec.remove(id);
                }
            }
            if !ids.is_empty() {
                tracing::info!(deleted = ids.len(), "sinker removed old runs");
            }
            ids
        }
        Err(e) => {
            tracing::warn!(error = %e, "sinker could not delete old runs");
            Vec::new()
        }
    }
}

fn routes(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .route("/api/v1/runs", post(create_run).get(list_runs))
        .route("/api/v1/runs/{id}", get(get_run))
        .route("/api/v1/runs/{id}/log", get(run_log))
        .route("/api/v1/runs/{id}/abort", post(abort_run))
        .route("/api/v1/runs/{id}/rerun", post(rerun))
        .route("/api/v1/config/status", get(config_status))
        .route("/api/v1/clusters", get(crate::clusters::list))
        .route("/api/v1/config/reload", post(config_reload))
        .route("/api/v1/periodics", get(crate::periodics::list))
        .route(
            "/api/v1/periodics/{identity}/ticks",
            get(crate::periodics::ticks),
        )
        .route(
            "/api/v1/periodics/{identity}/trigger",
            post(crate::periodics::trigger),
        )
        .route(
            "/api/v1/periodics/{identity}/pause",
            post(crate::periodics::pause),
        )
        .route(
            "/api/v1/periodics/{identity}/resume",
            post(crate::periodics::resume),
        )
        .with_state(app)
}

/// `GET /api/v1/config/status`.
async fn config_status(State(app): State<Arc<App>>) -> Response {
    Json(app.config_status()).into_response()
}

/// `POST /api/v1/config/reload`: reloads now; answers with the status (200
/// when the configuration was valid, 422 when the last good one stays).
async fn config_reload(State(app): State<Arc<App>>, headers: HeaderMap) -> ApiResult {
    authorize(&app, &headers)?;
    let a = app.clone();
    let ok = blocking(move || crate::reload::reload(&a, "API")).await;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    Ok((status, Json(app.config_status())).into_response())
}

/// The answer to a request that failed.
pub type ApiResult = Result<Response, Response>;

/// An error answer.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({"error": message.into()}))).into_response()
}

pub fn store_error(e: StoreError) -> Response {
    match e {
        StoreError::NotFound(m) => error(StatusCode::NOT_FOUND, format!("run {m} not found")),
        StoreError::InvalidTransition { .. } => error(StatusCode::CONFLICT, e.to_string()),
        StoreError::Unavailable(m) => {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the store cannot commit: {m}"),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, "5".parse().expect("valid header"));
            r
        }
        StoreError::Invalid(m) => error(StatusCode::INTERNAL_SERVER_ERROR, m),
        // Only prepared fires are refused as stale; no request makes one.
        StoreError::Stale(_) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

pub fn authorize(app: &App, headers: &HeaderMap) -> Result<(), Response> {
    let Some(token) = &app.token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(error(
            StatusCode::UNAUTHORIZED,
            "a valid bearer token is required",
        ))
    }
}

pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let text = blocking(move || app.metrics.render(app.store.as_ref())).await;
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `POST /api/v1/runs` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerRequest {
    job: String,
    repo: Option<String>,
    #[serde(rename = "type")]
    job_type: Option<String>,
    refs: Option<Refs>,
}

async fn create_run(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult {
    authorize(&app, &headers)?;
    let req: TriggerRequest = serde_json::from_slice(&body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("bad request body: {e}")))?;
    let snapshot = app.snapshot();
    let type_filter = req.job_type.as_deref();
    // Candidates by name, narrowed by repo and type.
    let mut found: Vec<(JobType, Option<String>, Arc<ApiTemplate>)> = Vec::new();
    for (i, p) in snapshot
        .periodics
        .iter()
        .enumerate()
        .filter(|(_, p)| p.base.name == req.job || p.has_identity(&req.job))
    {
        if type_filter.is_none_or(|t| t == "periodic") && req.repo.is_none() {
            let key = (JobType::Periodic, None, i);
            let t = app.template(&snapshot, key, || {
                let template = RunTemplate::periodic(p, snapshot.pod_spec(p));
                (template, definition_repo(p))
            });
            found.push((JobType::Periodic, None, t));
        }
    }
    /// The jobs of one kind named `req.job`, narrowed by repo and type.
    fn by_repo<K>(
        app: &App,
        snapshot: &Arc<Snapshot>,
        jobs: &BTreeMap<String, Vec<bosun_config::Job<K>>>,
        job_type: JobType,
        req: &TriggerRequest,
        found: &mut Vec<(JobType, Option<String>, Arc<ApiTemplate>)>,
    ) {
        if req
            .job_type
            .as_deref()
            .is_some_and(|t| t != job_type.as_str())
        {
            return;
        }
        for (repo, jobs) in jobs {
            if req.repo.as_deref().is_some_and(|r| r != repo) {
                continue;
            }
            for (i, j) in jobs
                .iter()
                .enumerate()
                .filter(|(_, j)| j.base.name == req.job)
            {
                let t = app.template(snapshot, (job_type, Some(repo.clone()), i), || {
                    let template = RunTemplate::new(&j.base, job_type, None, snapshot.pod_spec(j));
                    (template, Some(repo.clone()))
                });
                found.push((job_type, Some(repo.clone()), t));
            }
        }
    }
    by_repo(
        &app,
        &snapshot,
        &snapshot.presubmits,
        JobType::Presubmit,
        &req,
        &mut found,
    );
    by_repo(
        &app,
        &snapshot,
        &snapshot.postsubmits,
        JobType::Postsubmit,
        &req,
        &mut found,
    );
    let (job_type, _, template) = match found.len() {
        0 => {
            return Err(error(
                StatusCode::NOT_FOUND,
                format!("no job named {:?}", req.job),
            ))
        }
        1 => found.remove(0),
        _ => {
            let candidates: Vec<serde_json::Value> = found
                .iter()
                .map(|(t, repo, _)| serde_json::json!({"type": t.as_str(), "repo": repo}))
                .collect();
            return Err((
                StatusCode::CONFLICT,
                Json(serde_json::json!({"error": format!("{} jobs are named {:?}: say which with \"repo\" and \"type\"", candidates.len(), req.job), "candidates": candidates})),
            )
                .into_response());
        }
    };
    if let Some(e) = &template.unrunnable {
        return Err(error(StatusCode::UNPROCESSABLE_ENTITY, e.clone()));
    }
    let mut new = template.template.run(req.refs);
    new.state = bosun_store::template::initial_state(&snapshot.config);
    let definition = trust::Definition {
        name: &new.job,
        job_type,
        repo: template.repo.as_deref(),
    };
    if let Some(why) = trust::refusal(
        &snapshot.config,
        &new.configured_cluster,
        definition,
        new.refs.as_ref(),
    ) {
        return Err(error(StatusCode::FORBIDDEN, why));
    }
    if job_type == JobType::Presubmit && new.refs.as_ref().is_none_or(|r| r.pulls.is_empty()) {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "a presubmit needs refs with at least one pull request (refs.pulls)",
        ));
    }
    // The store's writer answers through a channel: no thread waits for the
    // commit.
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.store.create_run_then(
        new,
        app.clock.now(),
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    let created = rx
        .await
        .unwrap_or_else(|_| Err(StoreError::Unavailable("store stopped".into())))
        .map_err(store_error)?;
    app.new_runs.notify_one();
    Ok((StatusCode::CREATED, Json(created.run())).into_response())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    job: Option<String>,
    state: Option<String>,
    cluster: Option<String>,
    #[serde(rename = "type")]
    job_type: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
    active: Option<bool>,
}

async fn list_runs(State(app): State<Arc<App>>, Query(q): Query<ListQuery>) -> ApiResult {
    let state = q
        .state
        .as_deref()
        .map(str::parse::<RunState>)
        .transpose()
        .map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let filter = RunFilter {
        job: q.job,
        state,
        cluster: q.cluster,
        job_type: q.job_type,
        limit: q.limit.unwrap_or(100).min(1000),
        offset: q.offset.unwrap_or(0),
        active: q.active.unwrap_or(false),
        ..RunFilter::default()
    };
    let store = app.store.clone();
    let runs = blocking(move || store.list(&filter))
        .await
        .map_err(store_error)?;
    Ok(Json(serde_json::json!({"runs": runs})).into_response())
}

async fn find(app: &Arc<App>, id: String) -> Result<Run, Response> {
    let store = app.store.clone();
    let missing = id.clone();
    blocking(move || store.get(&id))
        .await
        .map_err(store_error)?
        .ok_or_else(|| error(StatusCode::NOT_FOUND, format!("run {missing} not found")))
}

async fn get_run(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(find(&app, id).await?).into_response())
}

/// The log, followed until the run ends.
async fn run_log(State(app): State<Arc<App>>, Path(id): Path<String>) -> ApiResult {
    let run = find(&app, id).await?;
    let alias = run
        .cluster
        .clone()
        .unwrap_or_else(|| run.configured_cluster.clone());
    let Some(exec) = app.clusters().executors.get(&alias).cloned() else {
        return Err(error(StatusCode::NOT_FOUND, "this run has no local log"));
    };
    let Some(path) = exec.log_path(&run.id) else {
        return Err(error(StatusCode::NOT_FOUND, "this run has no local log"));
    };
    /// The bytes of `path` from `offset` on (none if it does not exist yet).
    async fn read_from(path: &std::path::Path, offset: u64) -> Vec<u8> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let mut out = Vec::new();
        if let Ok(mut f) = tokio::fs::File::open(path).await {
            if f.seek(std::io::SeekFrom::Start(offset)).await.is_ok() {
                let _ = f.read_to_end(&mut out).await;
            }
        }
        out
    }
    let state = (app.clone(), run.id.clone(), path, 0u64, false);
    let stream = futures_util::stream::unfold(state, |(app, id, path, offset, done)| async move {
        if done {
            return None;
        }
        loop {
            let chunk = read_from(&path, offset).await;
            if !chunk.is_empty() {
                let next = offset + chunk.len() as u64;
                return Some((Ok::<_, std::io::Error>(chunk), (app, id, path, next, false)));
            }
            let store = app.store.clone();
            let key = id.clone();
            let finished = blocking(move || store.get(&key))
                .await
                .ok()
                .flatten()
                .is_none_or(|r| r.state.is_final());
            if finished {
                // One last read after the end, then stop.
                let chunk = read_from(&path, offset).await;
                let next = offset + chunk.len() as u64;
                return Some((Ok(chunk), (app, id, path, next, true)));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(stream),
    )
        .into_response())
}

async fn abort_run(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult {
    authorize(&app, &headers)?;
    let run = find(&app, id).await?;
    if run.state.is_final() {
        return Err(error(
            StatusCode::CONFLICT,
            format!("run {} already ended: {}", run.id, run.state),
        ));
    }
    app.aborts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(run.id.clone());
    app.wake.notify_one();
    Ok((StatusCode::ACCEPTED, Json(run)).into_response())
}

async fn rerun(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult {
    authorize(&app, &headers)?;
    let old = find(&app, id).await?;
    // On a trusted cluster, the job must still be configured and admitted,
    // and the run's refs must be its own.
    let snapshot = app.snapshot();
    if let Some(cluster) = snapshot
        .config
        .build_clusters
        .get(&old.configured_cluster)
        .filter(|c| c.trusted.is_some())
        .map(|_| old.configured_cluster.as_str())
    {
        let Some(repo) = rerun_definition_repo(&snapshot, &old) else {
            return Err(error(
                StatusCode::FORBIDDEN,
                format!(
                    "job {} runs on trusted cluster {cluster:?} and is no longer configured",
                    old.job
                ),
            ));
        };
        let definition = trust::Definition {
            name: &old.job,
            job_type: old.job_type,
            repo: repo.as_deref(),
        };
        if let Some(why) = trust::refusal(&snapshot.config, cluster, definition, old.refs.as_ref())
        {
            return Err(error(StatusCode::FORBIDDEN, why));
        }
    }
    let store = app.store.clone();
    let spec = {
        let hash = old.spec_hash.clone();
        blocking(move || store.spec(&hash))
            .await
            .map_err(store_error)?
    };
    let new = NewRun {
        job: old.job.clone(),
        job_type: old.job_type,
        periodic: old.periodic.clone(),
        configured_cluster: old.configured_cluster.clone(),
        state: bosun_store::template::initial_state(&snapshot.config),
        refs: old.refs.clone(),
        extra_refs: old.extra_refs.clone(),
        labels: old.labels.clone(),
        annotations: old.annotations.clone(),
        spec: spec.unwrap_or_default().into(),
        scheduled_at: None,
        attempt: 0,
        description: format!("Rerun of {}.", old.id),
    };
    let store = app.store.clone();
    let now = app.clock.now();
    let created = blocking(move || store.create_run(new, now))
        .await
        .map_err(store_error)?;
    app.new_runs.notify_one();
    let Created::New(run) = created else {
        return Err(error(StatusCode::CONFLICT, "the rerun already exists"));
    };
    Ok((StatusCode::CREATED, Json(run)).into_response())
}
