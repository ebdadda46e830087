//! `bosun dispatch plan` (a plan printed, charted, or fed back as the
//! previous one) and `bosun dispatcher` (the standalone service: it plans at
//! start, on `dispatcher.replan` (weekly by default), at once when the
//! configuration or the inventory files change, and on `POST /replan`;
//! serves lookups from the plan in force; persists every plan atomically).
//!
//! A new job is placed within a reload (its unit's cluster, else the lowest
//! relative load) without moving anything else; a changed inventory re-plans
//! in full. A load or a demand source that fails keeps the last good plan
//! and demand, and says so; it never stops the service.

use bosun_base::command::{Failed, Outcome};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bosun_config::{load, OsFiles, Snapshot};
use bosun_dispatch::format;
use bosun_dispatch::openshift::{OsClusters, OsConfig};
use bosun_host::args::ConfigArgs;
use bosun_host::watch::Watch;
use clap::{Args, Subcommand, ValueEnum};
use jiff::Timestamp;

use crate::demand::{read_job_volume, CachedDemand, DemandSource};
use crate::inputs::{inputs, Inputs, OpenShift};
use crate::service::Service;

pub use crate::inputs::Sources;

/// How `bosun dispatch plan` prints the plan.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlanFormat {
    /// Per cluster, then the moves.
    #[default]
    Table,
    /// `{"clusters", "assignments", "moves", ...}`, accepted as `--previous`.
    Json,
}

/// `bosun dispatch plan` arguments.
#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    #[command(flatten)]
    pub sources: Sources,
    /// Job volumes as OpenShift's `job_volume.json` (`{"job": runs}`).
    #[arg(long, value_name = "FILE", conflicts_with = "prometheus")]
    pub demand: Option<PathBuf>,
    /// Read job volumes from this Prometheus (`dispatcher.prometheus_query`
    /// over `dispatcher.window`).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// The previous plan (this command's JSON, a plan file, or `{JOB: CLUSTER}`).
    #[arg(long, value_name = "PLAN.json")]
    pub previous: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: PlanFormat,
    /// Also write an SVG bar chart of load against target per cluster.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// `bosun dispatch` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum DispatchCommand {
    /// Plan job placement and print it.
    Plan(PlanArgs),
    /// Write the plan into the job files' `cluster:` values (relocatable
    /// jobs only; with `--openshift-config`, also its `buildFarm` lists).
    WriteBack(crate::writeback::WriteBackArgs),
    /// Overrides of a running dispatcher: create, list, cancel.
    Override(crate::override_cli::OverrideArgs),
}

/// `bosun dispatch` arguments.
#[derive(Args, Debug, Clone)]
pub struct DispatchArgs {
    #[command(subcommand)]
    pub command: DispatchCommand,
}

/// `bosun dispatcher` arguments.
#[derive(Args, Debug, Clone)]
pub struct DispatcherArgs {
    #[command(flatten)]
    pub sources: Sources,
    /// Job volumes as OpenShift's `job_volume.json` (else Prometheus when
    /// `dispatcher.prometheus_url` is set, else 1 per job).
    #[arg(long, value_name = "FILE")]
    pub demand: Option<PathBuf>,
    /// Where the plan is kept (`dispatcher.assignments_file` overrides).
    #[arg(long, default_value = "./bosun-data")]
    pub data_dir: PathBuf,
    /// Address of the service.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// A file holding the bearer token `POST /replan` needs.
    #[arg(long, value_name = "FILE")]
    pub api_token_file: Option<PathBuf>,
    /// Allow a non-loopback --listen address without a token.
    #[arg(long)]
    pub insecure_no_auth: bool,
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The configuration has errors.
    #[error("the configuration has errors:\n{0}")]
    Config(String),
    /// A file could not be read or parsed.
    #[error("{0}")]
    File(String),
    /// The demand could not be measured.
    #[error("demand: {0}")]
    Demand(String),
}

/// OpenShift's files, read.
fn openshift(sources: &Sources) -> Result<OpenShift, PlanError> {
    let read =
        |p: &Path| std::fs::read(p).map_err(|e| PlanError::File(format!("{}: {e}", p.display())));
    let config = match &sources.openshift_config {
        Some(p) => Some(
            OsConfig::parse(&p.display().to_string(), &read(p)?)
                .map_err(|e| PlanError::File(e.to_string()))?,
        ),
        None => None,
    };
    let clusters = match &sources.openshift_clusters {
        Some(p) => Some(
            OsClusters::parse(&p.display().to_string(), &read(p)?)
                .map_err(|e| PlanError::File(e.to_string()))?,
        ),
        None => None,
    };
    Ok(OpenShift { config, clusters })
}

/// The configuration, or every error in it.
fn snapshot(config: &ConfigArgs) -> Result<Snapshot, PlanError> {
    let loaded = load(&config.load_options(), &OsFiles);
    loaded.snapshot.ok_or_else(|| {
        PlanError::Config(
            loaded
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })
}

/// The planner's input of `sources` with `demand` and `previous`.
fn plan_inputs(
    sources: &Sources,
    demand: &BTreeMap<String, f64>,
    previous: &BTreeMap<String, String>,
) -> Result<Inputs, PlanError> {
    let snapshot = snapshot(&sources.config)?;
    let openshift = openshift(sources)?;
    let aliases: Vec<String> = sources
        .config
        .kube_contexts()
        .into_iter()
        .map(|c| c.name)
        .collect();
    Ok(inputs(
        &snapshot,
        &sources.config.job_config,
        &aliases,
        &openshift,
        demand,
        previous,
    ))
}

/// `bosun dispatch plan`.
pub fn plan_command(args: &DispatchArgs, out: &mut dyn Write) -> Outcome {
    let args = match &args.command {
        DispatchCommand::Plan(args) => args,
        DispatchCommand::WriteBack(args) => return crate::writeback::command(args, out),
        DispatchCommand::Override(args) => return crate::override_cli::command(args, out),
    };
    plan_once(args, out).map_err(|e| Failed::with_line(1, format!("bosun dispatch plan: {e}")))
}

fn plan_once(args: &PlanArgs, out: &mut dyn Write) -> Result<(), PlanError> {
    let demand = match (&args.demand, &args.prometheus) {
        (Some(path), _) => read_job_volume(path).map_err(|e| PlanError::Demand(e.to_string()))?,
        (None, Some(url)) => {
            let snapshot = snapshot(&args.sources.config)?;
            let dispatcher = snapshot.config.dispatcher.clone().unwrap_or_default();
            let source = DemandSource::prometheus_of(url, &dispatcher)
                .map_err(|e| PlanError::Demand(e.to_string()))?;
            source
                .measure(Timestamp::now())
                .map_err(|e| PlanError::Demand(e.to_string()))?
                .jobs
        }
        (None, None) => BTreeMap::new(),
    };
    let (previous, generation) = match &args.previous {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| PlanError::File(format!("{}: {e}", p.display())))?;
            let map = format::previous_from_json(&text)
                .map_err(|e| PlanError::File(format!("{}: {e}", p.display())))?;
            let generation = format::plan_from_json(&text).map_or(0, |p| p.generation);
            (map, generation)
        }
        None => (BTreeMap::new(), 0),
    };
    let inputs = plan_inputs(&args.sources, &demand, &previous)?;
    for w in &inputs.warnings {
        eprintln!("warning: {w}");
    }
    let plan = bosun_dispatch::plan::plan(&inputs.input, generation);
    let text = match args.format {
        PlanFormat::Table => format::to_table(&plan),
        PlanFormat::Json => format::to_json(&plan),
    };
    let _ = writeln!(out, "{}", text.trim_end());
    if let Some(path) = &args.plot {
        crate::plot::write_svg(&plan, path).map_err(|e| PlanError::File(e.to_string()))?;
    }
    Ok(())
}

/// The standalone service: its arguments and its engine (plan, overrides,
/// the service answering from the effective plan).
struct Dispatcher {
    args: DispatcherArgs,
    engine: Arc<crate::engine::Engine>,
}

impl Dispatcher {
    /// Plans again: in full (`full`), or, when the inventory did not change,
    /// placing only new jobs. Keeps the last plan on any error. Blocking.
    fn replan(&self, full: bool, reason: &str) {
        let now = Timestamp::now();
        let engine = &self.engine;
        let demand = engine.demand_now(now, full);
        let (previous, _) = engine.previous();
        let inputs = plan_inputs(&self.args.sources, &demand, &previous).map_err(|e| e.to_string());
        engine.replan(inputs, full, reason, now);
    }
}

/// What re-plans when it changes: the config file, the job-config
/// directories, OpenShift's files and the kubeconfig files (a file is
/// watched through its directory, by name; a ConfigMap's `..data` swap
/// counts).
fn watched(args: &DispatcherArgs) -> Vec<Watch> {
    let s = &args.sources;
    let mut out: Vec<Watch> = Vec::new();
    let mut files: Vec<PathBuf> = s
        .config
        .config
        .iter()
        .chain(&s.openshift_config)
        .chain(&s.openshift_clusters)
        .cloned()
        .chain(s.config.kubeconfig_files())
        .collect();
    for j in &s.config.job_config {
        if j.is_dir() {
            out.push(Watch {
                dir: j.clone(),
                recursive: true,
                names: None,
            });
        } else {
            files.push(j.clone());
        }
    }
    for f in files {
        let dir = match f.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = f.file_name().map(|n| n.to_string_lossy().to_string());
        match out.iter_mut().find(|w| w.dir == dir && w.names.is_some()) {
            Some(w) => w.names.as_mut().expect("named").extend(name),
            None => out.push(Watch {
                dir,
                recursive: false,
                names: Some(name.into_iter().collect()),
            }),
        }
    }
    out
}

/// `bosun dispatcher`: runs the service until SIGINT or SIGTERM. Why it
/// could not start or serve is logged, and it fails with exit status 1.
pub fn dispatcher_command(args: &DispatcherArgs) -> Outcome {
    bosun_host::logging::init_logging(bosun_host::logging::LogFormat::Text);
    serve_until_signal(args).map_err(|e| {
        tracing::error!("{e}");
        Failed::status(1)
    })
}

/// Starts the service and serves until a signal; why it could not.
fn serve_until_signal(args: &DispatcherArgs) -> Result<(), String> {
    let token = match &args.api_token_file {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            _ => {
                return Err(format!(
                    "cannot read a token from the API token file {}",
                    p.display()
                ))
            }
        },
        None => None,
    };
    if token.is_none() && !args.listen.ip().is_loopback() && !args.insecure_no_auth {
        return Err(format!("refusing to serve a non-loopback address without --api-token-file (or --insecure-no-auth): POST /replan would be open to anyone: --listen {}", args.listen));
    }
    let snapshot = snapshot(&args.sources.config).map_err(|e| e.to_string())?;
    let dispatcher = snapshot.config.dispatcher.clone().unwrap_or_default();
    let source = match (&args.demand, &dispatcher.prometheus_url) {
        (Some(file), _) => Some(DemandSource::File(file.clone())),
        (None, Some(url)) => Some(
            DemandSource::prometheus_of(url, &dispatcher)
                .map_err(|e| format!("dispatcher.prometheus_url: {e}"))?,
        ),
        (None, None) => None,
    };
    let plan_file = dispatcher
        .assignments_file
        .clone()
        .map(PathBuf::from)
        .unwrap_or_else(|| args.data_dir.join("dispatcher-plan.json"));
    let replan_cron = dispatcher.replan().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let engine = Arc::new(crate::engine::Engine::new(
        Service::new(token),
        CachedDemand::new(source.unwrap_or(DemandSource::Ones)),
        plan_file,
    ));
    let d = Arc::new(Dispatcher {
        args: args.clone(),
        engine: engine.clone(),
    });
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(d.args.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", d.args.listen))?;
        tracing::info!(listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "bosun dispatcher serving");
        let first = d.clone();
        let _ = tokio::task::spawn_blocking(move || first.replan(true, "start-up")).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        // Only the input's files count: the plan file, logs or anything
        // else beside a watched file are not changes of the input.
        let _watcher = bosun_host::watch::start(
            watched(&d.args),
            tx,
            "it plans again on its schedule and on POST /replan",
        );
        let schedule = bosun_schedule::Schedule::parse(
            &replan_cron,
            bosun_schedule::ParseOptions {
                timezone: None,
                identity: Some("dispatcher"),
            },
        )
        .ok();
        let loop_d = d.clone();
        tokio::spawn(async move {
            loop {
                let now = Timestamp::now();
                let until = schedule
                    .as_ref()
                    .and_then(|s| s.next_after(now))
                    .map(|t| Duration::try_from(t.duration_since(now)).unwrap_or_default())
                    .unwrap_or(Duration::from_secs(7 * 24 * 3600));
                let (full, reason) = tokio::select! {
                    _ = tokio::time::sleep(until) => (true, "schedule"),
                    _ = loop_d.engine.service.replan.notified() => (true, "request"),
                    Some(()) = rx.recv() => {
                        // Let a burst of changes settle.
                        loop {
                            tokio::select! {
                                Some(()) = rx.recv() => {}
                                _ = tokio::time::sleep(Duration::from_millis(300)) => break,
                            }
                        }
                        (false, "file change")
                    }
                };
                let d = loop_d.clone();
                let _ = tokio::task::spawn_blocking(move || d.replan(full, reason)).await;
            }
        });
        let server = axum::serve(listener, crate::engine::router(engine)).with_graceful_shutdown(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        });
        server
            .await
            .map_err(|e| format!("the service stopped: {e}"))
    })
}
