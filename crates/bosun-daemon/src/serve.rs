//! `bosun serve`: wires the daemon together. It loads the configuration,
//! opens the store, makes the shared state and the controller, starts the
//! tasks (controller, scheduler, config watcher, cluster health, sinker) and
//! serves the API until SIGINT or SIGTERM. No behaviour lives here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bosun_base::command::{Failed, Outcome};
use bosun_base::sync::Lock;
use bosun_cluster::executor::Executor;
use bosun_cluster::kube::KubeExecutor;
use bosun_cluster::local::LocalExecutor;
use bosun_cluster::registry::{clusters, ClusterDef};
use bosun_host::args::ConfigArgs;
use bosun_host::logging::{init_logging, LogFormat};
use bosun_store::active::{ActiveRuns, Observers};
use bosun_store::clock::SystemClock;
use bosun_store::sqlite::{SqliteOptions, SqliteStore};
use bosun_store::Store;
use clap::Args;

use crate::clusters::{check_run_dirs, local_users, ExecutorFactory};
use crate::daemon::Daemon;
use crate::metrics::Metrics;
use crate::state::{Shared, SharedParts};

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
    /// A file holding the token reads need (the dashboard's pages and the
    /// API's GETs; `/healthz`, `/readyz`, `/metrics` and the dispatcher's
    /// lookups never need one). Without it, reads are public.
    #[arg(long, value_name = "FILE")]
    pub read_token_file: Option<PathBuf>,
    /// Prow's HMAC secret file: forges' webhooks (`POST /hook`) must be
    /// signed (GitHub, Gitea) or carry a token (GitLab) of it. A single
    /// token, or `{"*"|org|org/repo: [{value, created_at}]}` (the most
    /// specific level applies; any token listed is accepted, for rotation).
    /// Read again when it changes. Without it, `/hook` accepts nothing.
    #[arg(long, value_name = "FILE")]
    pub hmac_secret_file: Option<PathBuf>,
    /// The largest webhook body taken, in bytes (larger: 413). GitHub's
    /// largest payload is 25 MB.
    #[arg(long, value_name = "BYTES", default_value_t = bosun_forge::hook::intake::DEFAULT_MAX_BODY)]
    pub hook_max_body: u64,
    /// Prow's `plugins.yaml`: the `trigger` plugin's enablement per org and
    /// repository (`plugins:`) and its settings (`triggers:`); other
    /// plugins' sections are ignored. Without it, the trigger applies to
    /// every repository with Prow's default settings. Read again when it
    /// changes.
    #[arg(long, value_name = "FILE")]
    pub plugin_config: Option<PathBuf>,
    /// The forge's API (Prow's flag): `https://api.github.com`, a GitHub
    /// Enterprise `https://HOST/api/v3`, or a Gitea `https://HOST/api/v1`
    /// (with `--forge-api gitea`).
    #[arg(long, value_name = "URL", default_value = "https://api.github.com")]
    pub github_endpoint: String,
    /// Which API `--github-endpoint` is: `github` or `gitea`.
    #[arg(long, value_name = "KIND", default_value = "github", value_parser = ["github", "gitea"])]
    pub forge_api: String,
    /// A file holding the forge's token (Prow's flag); read again when it
    /// changes. With it (or a GitHub App), pull requests and comments start
    /// jobs and runs are reported to the forge.
    #[arg(long, value_name = "FILE")]
    pub github_token_path: Option<PathBuf>,
    /// A GitHub App's id (Prow's flag), with `--github-app-private-key-path`.
    #[arg(
        long,
        value_name = "ID",
        requires = "github_app_private_key_path",
        conflicts_with = "github_token_path"
    )]
    pub github_app_id: Option<String>,
    /// The GitHub App's private key, PEM (Prow's flag).
    #[arg(long, value_name = "FILE", requires = "github_app_id")]
    pub github_app_private_key_path: Option<PathBuf>,
    /// Where bosun is reached from outside (`https://bosun.example.com`):
    /// commit statuses link to `URL/runs/ID`, unless `plank.job_url_template`
    /// gives the link.
    #[arg(long, value_name = "URL")]
    pub external_url: Option<String>,
    /// Store accepted webhook deliveries but process none (hidden: tests
    /// kill the daemon between a delivery's 200 and its processing).
    #[arg(long, hide = true)]
    pub webhook_hold: bool,
    /// Allow a non-loopback --listen address without a token.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t)]
    pub log_format: LogFormat,
    /// How often each Kubernetes cluster's health is probed (hidden: tests
    /// shorten it).
    #[arg(long, hide = true, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub health_interval: std::time::Duration,
    /// The run store: SQLite in the data directory (the default), or a
    /// PostgreSQL database (`postgres://USER@HOST:PORT/DB`, libpq's
    /// parameters allowed) that several replicas share. Never put the
    /// password here: `--store-password-file`.
    #[arg(long, value_name = "URL", env = "BOSUN_STORE")]
    pub store: Option<String>,
    /// This replica's name among those sharing a PostgreSQL store (unique
    /// among them; default: the host name and the data directory). A
    /// replica that starts again under its name takes back at once the
    /// leadership its previous process held, instead of waiting for the
    /// lease to expire.
    #[arg(long, value_name = "NAME", env = "BOSUN_REPLICA_NAME")]
    pub replica_name: Option<String>,
    /// A file holding the PostgreSQL password (a Kubernetes Secret's key,
    /// say); read at start.
    #[arg(long, value_name = "FILE", env = "BOSUN_STORE_PASSWORD_FILE")]
    pub store_password_file: Option<PathBuf>,
    /// The CA certificates (PEM) the PostgreSQL server's certificate is
    /// checked against when the connection is encrypted (the URL's
    /// `sslmode=require`, or `prefer`, the default, with a server that
    /// offers TLS); default: the system's trusted roots. An encrypted
    /// connection is never used unverified.
    #[arg(long, value_name = "FILE", env = "BOSUN_STORE_CA_FILE")]
    pub store_ca_file: Option<PathBuf>,
    /// The leader lease's time to live on a shared store (hidden: tests
    /// shorten the timings; 15 s).
    #[arg(long, hide = true, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_ttl: std::time::Duration,
    /// How often the leader renews its lease (hidden; 5 s).
    #[arg(long, hide = true, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub lease_renew: std::time::Duration,
    /// How often a follower tries to take the lease (hidden; 2 s).
    #[arg(long, hide = true, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub lease_retry: std::time::Duration,
    /// How much sooner than its lease a leader stops acting (hidden; 2 s).
    #[arg(long, hide = true, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub lease_margin: std::time::Duration,
    /// How many fires of a batch take the store's fire log (hidden: tests
    /// set 1, every fire, as in a burst).
    #[arg(long, hide = true, value_name = "N")]
    pub fire_log_min: Option<usize>,
}

/// A Go duration (`200ms`, `30s`) as a command-line value.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    bosun_config::duration::GoDuration::parse(s).map(|d| d.to_std())
}

/// Runs the daemon until SIGINT or SIGTERM. Why it could not start or
/// serve is logged (in `--log-format`), and it fails with exit status 1.
pub fn run(args: &ServeArgs) -> Outcome {
    init_logging(args.log_format);
    raise_open_files_limit();
    serve_until_signal(args).map_err(|e| {
        tracing::error!("{e}");
        Failed::status(1)
    })
}

/// Raises the soft limit of open files to the hard one, as Go programs do
/// at start: a cluster with thousands of runs at once holds a log stream
/// and a log file open for each. Local jobs get the usual limit back (their
/// supervisor lowers its own). A limit that cannot be raised is only logged.
fn raise_open_files_limit() {
    match bosun_base::process::raise_open_files_limit() {
        Ok(Some(from)) => tracing::debug!(from, "raised the limit of open files"),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "cannot raise the limit of open files"),
    }
}

/// Starts the daemon and serves until a signal; why it could not.
fn serve_until_signal(args: &ServeArgs) -> Result<(), String> {
    // Runs' paths (their directories, a pipeline's step scripts) are handed
    // to processes that run elsewhere: the data directory is absolute from
    // here on.
    let mut args = args.clone();
    args.data_dir = std::path::absolute(&args.data_dir).map_err(|e| {
        format!(
            "cannot find the data directory {}: {e}",
            args.data_dir.display()
        )
    })?;
    let args = &args;
    let token = read_token(args.api_token_file.as_deref(), "API")?;
    let read_token = read_token(args.read_token_file.as_deref(), "read")?;
    if token.is_none() && !args.listen.ip().is_loopback() && !args.insecure_no_auth {
        return Err(format!(
            "refusing to serve a non-loopback address without --api-token-file (or --insecure-no-auth): --listen {}",
            args.listen
        ));
    }
    let loaded = bosun_host::load::load_checked(&args.config);
    let warnings: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| !d.is_error())
        .map(ToString::to_string)
        .collect();
    for d in &loaded.diagnostics {
        if d.is_error() {
            tracing::error!("{d}");
        } else {
            tracing::warn!("{d}");
        }
    }
    let Some(snapshot) = loaded.snapshot else {
        return Err("the configuration has errors; run `bosun check`".into());
    };
    std::fs::create_dir_all(&args.data_dir).map_err(|e| {
        format!(
            "cannot create the data directory {}: {e}",
            args.data_dir.display()
        )
    })?;
    let metrics = Metrics::new(&snapshot.config.prowjob_namespace);
    let reports = Arc::new(crate::reports::Reports::new(args.external_url.clone()));
    let pulls =
        crate::pulls::settings::Pulls::new(forge_client(args)?, args.plugin_config.clone())?;
    let active = Arc::new(ActiveRuns::default());
    let shipper = Arc::new(crate::shipper::Shipper::default());
    let observers: Arc<dyn bosun_store::TransitionObserver> = Arc::new(Observers(vec![
        metrics.clone(),
        active.clone(),
        reports.clone(),
        shipper.clone(),
    ]));
    let (store, shared_store) = open_store(args, observers)?;
    // Replicas keep runs' logs and artifacts in the store they share.
    let shipper = shared_store.as_ref().map(|_| {
        shipper.enable();
        shipper
    });
    let leadership = match &shared_store {
        Some(pg) => crate::leader::Leadership::replicated(
            pg.clone(),
            crate::leader::Timings {
                ttl: args.lease_ttl,
                renew: args.lease_renew,
                retry: args.lease_retry,
                margin: args.lease_margin,
            },
            crate::leader::replica_id(args.replica_name.as_deref(), &args.data_dir),
        ),
        None => crate::leader::Leadership::single(),
    };
    // Replicas share the clusters' credentials: each names itself in its
    // requests' User-Agent, which the clusters' audit logs record.
    if leadership.is_replicated() {
        bosun_cluster::kube::client::set_user_agent(bosun_cluster::kube::client::user_agent_of(
            Some(leadership.id()),
        ));
    }
    store
        .set_report_policy(Arc::new(crate::reports::Policy(reports.clone())))
        .map_err(|e| format!("cannot set the store's report policy: {e}"))?;
    active
        .load(&*store)
        .map_err(|e| format!("cannot read the active runs: {e}"))?;
    // Before anything writes: from here on the store's commits keep the
    // `prowjobs` gauge up to date.
    metrics
        .seed(&*store)
        .map_err(|e| format!("cannot count the retained runs: {e}"))?;
    // The followed repositories' stored snapshots, composed at once with the
    // central configuration: nothing waits on git.
    let repos = Arc::new(crate::repos::Repos::new(args.data_dir.join("repos")));
    repos.load_records(
        store
            .repos()
            .map_err(|e| format!("cannot read the followed repositories: {e}"))?,
    );
    let kube = args.config.kube_context_names();
    let snapshot = repos.compose(
        &*store,
        &metrics,
        snapshot,
        None,
        &kube,
        jiff::Timestamp::now(),
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let clusters = clusters(&snapshot.config, &args.config.kube_contexts(), cpus);
    let workers = runtime_workers(
        &clusters,
        shared_store.is_some(),
        std::env::var_os("TOKIO_WORKER_THREADS").is_some(),
    );
    let shim = vec![
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "bosun".into()),
        "run-shim".to_string(),
    ];
    let run_as = local_users(&snapshot.config, &clusters).map_err(|e| e.to_string())?;
    let wake = Arc::new(tokio::sync::Notify::new());
    // A burst's runs reach the controller's view just after the scheduler
    // has the store's answer, and the controller is woken again then.
    active.wake_after_prepared({
        let wake = wake.clone();
        move || wake.notify_one()
    });
    let make_executor: ExecutorFactory = {
        let (wake, runs) = (wake.clone(), args.data_dir.join("runs"));
        let leadership = leadership.clone();
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
                creations,
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
                    // Its sinker and revivals act only inside the leader's
                    // trust window, as the controller does.
                    Ok(exec) => {
                        let leadership = leadership.clone();
                        let exec = exec
                            .acting_only_while(Arc::new(move || leadership.trusted()))
                            .creations_in_flight(*creations);
                        Some(Arc::new(exec) as Arc<dyn Executor>)
                    }
                    Err(e) => {
                        tracing::error!(cluster = alias, error = %e, "cannot start the cluster's executor");
                        None
                    }
                }
            }
        })
    };
    let runs_dir = args.data_dir.join("runs");
    check_run_dirs(&runs_dir, &snapshot.config, &run_as).map_err(|e| e.to_string())?;
    if let Ok(exe) = std::env::current_exe() {
        for why in crate::clusters::unreachable_program(&run_as, &exe) {
            tracing::warn!("{why}");
        }
    }
    // Replicas keep the dispatcher's plan and overrides in the store they
    // share; a process of its own keeps them in files.
    let home = match &shared_store {
        Some(_) => crate::plans::PlanHome::Store(store.clone()),
        None => crate::plans::PlanHome::Files,
    };
    let engine = crate::plans::engine_in(
        &snapshot.config,
        &args.data_dir,
        crate::plans::demand_source(&snapshot.config, store.clone()),
        token.clone(),
        home,
    );
    let shared = Arc::new(Shared::new(SharedParts {
        placer: Arc::new(crate::placement::Placer::new(engine)),
        store,
        leadership,
        active,
        snapshot,
        warnings,
        clusters,
        users: run_as,
        make_executor,
        clock: Arc::new(SystemClock),
        metrics,
        config_args: args.config.clone(),
        cpus,
        repo_commits: repos.commits(),
    }));
    reports.attach(&shared);
    let daemon = Daemon::new(shared, wake, token, runs_dir, repos, pulls, reports.clone());
    if let Some(pg) = &shared_store {
        listen(pg, &daemon, reports)?;
    }
    if let Some(file) = &args.hmac_secret_file {
        daemon
            .webhooks
            .configure(file.clone(), args.hook_max_body)?;
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        tracing::info!(
            workers = n,
            "every build cluster is local: the runtime has one worker (TOKIO_WORKER_THREADS sets it)"
        );
        rt.worker_threads(n);
    }
    let rt = rt
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(serve(daemon, args, read_token, shipper))
}

/// The async runtime's workers, when not tokio's default (a worker per
/// CPU): one when every build cluster is local and the store is the
/// daemon's own, unless `TOKIO_WORKER_THREADS` is set. Local jobs share the
/// daemon's CPUs, and a second worker's wake-ups mostly find nothing to
/// do: with one worker the API's POSTs took a fifth less of the daemon's
/// CPU and less time, in turns on a 2-CPU machine (docs/performance.md).
/// Kubernetes clusters keep a worker per CPU: one worker carried a
/// 1,000-run burst of pods more slowly. Replicas on PostgreSQL keep it too
/// (their lease renewals should not wait behind other work).
fn runtime_workers(
    clusters: &BTreeMap<String, ClusterDef>,
    replicas: bool,
    workers_set: bool,
) -> Option<usize> {
    let local = clusters
        .values()
        .all(|c| matches!(c, ClusterDef::Local { .. }));
    (local && !replicas && !workers_set).then_some(1)
}

/// An open store, and the PostgreSQL store again when replicas share it.
type OpenStore = (Arc<dyn Store>, Option<Arc<bosun_postgres::PgStore>>);

/// The store `--store` names (SQLite in the data directory without it),
/// telling `observers` of its commits; the PostgreSQL store again when the
/// store is one replicas share.
fn open_store(
    args: &ServeArgs,
    observers: Arc<dyn bosun_store::TransitionObserver>,
) -> Result<OpenStore, String> {
    match args.store.as_deref() {
        None | Some("sqlite") => {
            let options = SqliteOptions {
                fire_log_min: args
                    .fire_log_min
                    .unwrap_or(SqliteOptions::default().fire_log_min),
                ..SqliteOptions::default()
            };
            SqliteStore::open_with(args.data_dir.join("bosun.db"), options, Some(observers))
                .map(|s| (Arc::new(s) as Arc<dyn Store>, None))
                .map_err(|e| format!("cannot open the store: {e}"))
        }
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") || url.contains("host=") => {
            let password = match &args.store_password_file {
                Some(f) => Some(std::fs::read_to_string(f).map_err(|e| {
                    format!("cannot read the store's password file {}: {e}", f.display())
                })?),
                None => None,
            };
            let config = bosun_postgres::config(url, password.as_deref())
                .map_err(|e| format!("--store: {e}"))?;
            let options = bosun_postgres::PgOptions {
                ca_file: args.store_ca_file.clone(),
                ..bosun_postgres::PgOptions::default()
            };
            bosun_postgres::PgStore::open(config, options, Some(observers))
                .map(|s| {
                    let s = Arc::new(s);
                    (s.clone() as Arc<dyn Store>, Some(s))
                })
                .map_err(|e| format!("cannot open the store: {e}"))
        }
        Some(other) => Err(format!(
            "--store {other:?}: neither `sqlite` nor a PostgreSQL URL (postgres://USER@HOST:PORT/DB)"
        )),
    }
}

/// Hears what the other replicas commit: their runs go to this replica's
/// active runs and wake its controller and outbox; a resigned lease wakes
/// its campaign; a lost listener connection reloads the active runs.
fn listen(
    pg: &bosun_postgres::PgStore,
    daemon: &Arc<Daemon>,
    reports: Arc<crate::reports::Reports>,
) -> Result<(), String> {
    /// Wakes the controller after a run another replica changed.
    struct WakeController(Arc<Daemon>);
    impl bosun_store::TransitionObserver for WakeController {
        fn on_transition(&self, run: &bosun_store::Run, from: Option<bosun_store::RunState>) {
            let _ = run;
            match from {
                None => self.0.controller.runs_added(),
                Some(_) => self.0.controller.wake(),
            }
        }
    }
    let remote = Arc::new(Observers(vec![
        daemon.shared.active.clone(),
        reports,
        Arc::new(WakeController(daemon.clone())),
    ]));
    let (free, resync, aborts) = (daemon.clone(), daemon.clone(), daemon.clone());
    pg.listen(bosun_postgres::Hooks {
        remote,
        lease_free: Box::new(move || free.shared.leadership.lease_free.notify_one()),
        aborts: Box::new(move || aborts.controller.wake()),
        resync: Box::new(move || {
            if let Err(e) = resync.shared.active.reload(&*resync.shared.store) {
                tracing::warn!(error = %e, "cannot read the active runs again");
            }
            resync.controller.wake();
        }),
    })
    .map_err(|e| format!("cannot listen to the store: {e}"))
}

/// The forge's client the flags ask for, if any.
fn forge_client(args: &ServeArgs) -> Result<Option<Arc<bosun_forge::client::Client>>, String> {
    use bosun_forge::client::{Auth, Client, ClientConfig, Flavour};
    let auth = match (
        &args.github_token_path,
        &args.github_app_id,
        &args.github_app_private_key_path,
    ) {
        (Some(path), _, _) => Auth::Token { path: path.clone() },
        (None, Some(app_id), Some(key)) => Auth::App {
            app_id: app_id.clone(),
            private_key_path: key.clone(),
        },
        _ => return Ok(None),
    };
    let config = ClientConfig {
        endpoint: args.github_endpoint.clone(),
        flavour: if args.forge_api == "gitea" {
            Flavour::Gitea
        } else {
            Flavour::GitHub
        },
        auth,
        user_agent: format!("bosun/{}", env!("CARGO_PKG_VERSION")),
    };
    Client::new(config)
        .map(|c| Some(Arc::new(c)))
        .map_err(|e| format!("cannot make the forge's client: {e}"))
}

/// The token in `file` (trimmed), if a file is given; why not when it
/// cannot be read or is empty.
fn read_token(file: Option<&std::path::Path>, what: &str) -> Result<Option<String>, String> {
    let Some(p) = file else {
        return Ok(None);
    };
    match std::fs::read_to_string(p) {
        Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_string())),
        Ok(_) => Err(format!("the {what} token file {} is empty", p.display())),
        Err(e) => Err(format!(
            "cannot read the {what} token file {}: {e}",
            p.display()
        )),
    }
}

/// Starts the daemon's tasks and serves the API and the dashboard until a
/// signal; then stops the tasks (the controller commits what it holds) and
/// returns.
async fn serve(
    daemon: Arc<Daemon>,
    args: &ServeArgs,
    read_token: Option<String>,
    shipper: Option<Arc<crate::shipper::Shipper>>,
) -> Result<(), String> {
    let listen = args.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    tracing::info!(listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "bosun serving");
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    // What must run once runs on the leader only (on a store of this
    // process's own: here, for as long as it runs).
    let start: crate::leader::StartTasks = {
        let (daemon, webhook_hold) = (daemon.clone(), args.webhook_hold);
        Box::new(move |stop: tokio::sync::watch::Receiver<bool>| {
            let shared = daemon.shared.clone();
            let mut tasks = vec![
                daemon.controller.clone().run_on_own_thread(stop.clone()),
                tokio::spawn(crate::sinker::sinker_loop(shared.clone(), stop.clone())),
                tokio::spawn(crate::periodics::scheduler_loop(
                    shared.clone(),
                    daemon.controller.clone(),
                    stop.clone(),
                )),
                tokio::spawn(crate::repos::resync::resync_loop(
                    shared.clone(),
                    daemon.repos.clone(),
                    stop.clone(),
                )),
                tokio::spawn(crate::plans::plan_loop(
                    shared,
                    daemon.controller.clone(),
                    stop.clone(),
                )),
            ];
            if !webhook_hold {
                tasks.push(tokio::spawn(crate::repos::hook::delivery_loop(
                    daemon.shared.clone(),
                    daemon.repos.clone(),
                    Arc::new(crate::pulls::Events(daemon.clone())),
                    stop.clone(),
                )));
            }
            if let Some(shipper) = &shipper {
                tasks.push(tokio::spawn(
                    shipper.clone().run(daemon.shared.clone(), stop.clone()),
                ));
            }
            tasks.push(tokio::spawn(crate::reports::outbox::outbox_loop(
                daemon.clone(),
                stop,
            )));
            tasks
        })
    };
    // A replica that becomes the leader reads anew what it kept while
    // another led: the active runs, the controller's memory, the
    // periodics' timers (each evaluated from its stored state, as at a
    // start: ticks missed meanwhile are caught up or recorded as skipped).
    let on_lead: crate::leader::OnLead = {
        let daemon = daemon.clone();
        Box::new(move || {
            let shared = &daemon.shared;
            if !shared.leadership.is_replicated() {
                return;
            }
            if let Err(e) = shared.active.reload(&*shared.store) {
                tracing::warn!(error = %e, "cannot read the active runs again");
            }
            daemon.controller.reset();
            shared.scheduler.locked().reevaluate_all(shared.clock.now());
        })
    };
    let mut tasks = vec![
        tokio::spawn(crate::leader::campaign(
            daemon.shared.leadership.clone(),
            daemon.shared.metrics.clone(),
            start,
            on_lead,
            stop.clone(),
        )),
        tokio::spawn(crate::reload::reload_loop(daemon.clone(), stop.clone())),
        tokio::spawn(crate::plans::follow_plan_loop(
            daemon.shared.clone(),
            std::time::Duration::from_secs(2),
            stop.clone(),
        )),
        tokio::spawn(crate::health::health_loop(
            daemon.shared.clone(),
            args.health_interval,
            stop.clone(),
        )),
    ];
    if daemon.shared.leadership.is_replicated() {
        tasks.push(tokio::spawn(crate::metrics::recount_loop(
            daemon.shared.metrics.clone(),
            daemon.shared.store.clone(),
            crate::metrics::RECOUNT_PERIOD,
            stop.clone(),
        )));
    }
    let mut stop_http = stop.clone();
    let options = crate::http::Options {
        read_token,
        stop: Some(stop.clone()),
    };
    let server = axum::serve(listener, crate::http::router_with(daemon, options))
        .with_graceful_shutdown(async move {
            let _ = stop_http.changed().await;
        });
    let server = tokio::spawn(async move { server.await });
    shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    let _ = server.await;
    for task in tasks {
        let _ = task.await;
    }
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_when_every_cluster_is_local_and_the_store_is_the_daemons_own() {
        let local = |slots| ClusterDef::Local { slots };
        let kube = ClusterDef::Kubernetes {
            context: "k".into(),
            kubeconfig: None,
            slots: 0,
            creations: 2,
        };
        let all_local: BTreeMap<String, ClusterDef> =
            [("default".into(), local(8)), ("other".into(), local(2))].into();
        assert_eq!(runtime_workers(&all_local, false, false), Some(1));
        assert_eq!(runtime_workers(&BTreeMap::new(), false, false), Some(1));
        // A Kubernetes cluster, replicas, or the variable: tokio's default.
        let mixed: BTreeMap<String, ClusterDef> =
            [("default".into(), local(8)), ("k".into(), kube)].into();
        assert_eq!(runtime_workers(&mixed, false, false), None);
        assert_eq!(runtime_workers(&all_local, true, false), None);
        assert_eq!(runtime_workers(&all_local, false, true), None);
    }
}
