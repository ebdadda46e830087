//! The `bosun` command: the daemon and its command-line tools. A thin
//! binary: it sets the allocator, parses the command line and hands each
//! command to its crate (`bosun-daemon` serves, `bosun-dispatcher` plans and
//! dispatches, `bosun-cluster` supervises local runs, `bosun-injob` runs the
//! in-job programs); the commands that are neither (`check`, `schedule`; the
//! commands over the API: `run`, `runs`, `logs`, `abort`, `rerun`,
//! `periodics`, `clusters`, `config`; `completions` and `man`) are its own
//! modules. Every command returns a [`bosun_base::command::Outcome`]; `main`
//! turns it into the exit status.

use std::process::ExitCode;

use bosun_daemon::serve;
use bosun_dispatcher::cli as dispatch;
use clap::{CommandFactory, Parser, Subcommand};

mod check;
mod client;
mod clusters;
mod config;
mod manual;
mod periodics;
mod repos;
mod runs;
mod schedule;

/// mimalloc rather than the system allocator: the daemon allocates and frees
/// many small objects per run (requests, rows, transitions) on several
/// threads, where glibc's allocator spent about a tenth of the daemon's time
/// (measured with `examples/run_bench`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// bosun: a CI job orchestrator for Prow-style job configuration.
#[derive(Parser, Debug)]
#[command(name = "bosun", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load and validate the configuration; report every problem at once.
    Check(check::CheckArgs),
    /// Print the next fire times of periodics.
    Schedule(schedule::ScheduleArgs),
    /// Run the daemon: the controller, the JSON API and metrics.
    Serve(Box<serve::ServeArgs>),
    /// Trigger a run of a job through the daemon's API.
    Run(runs::RunArgs),
    /// List runs through the daemon's API.
    Runs(runs::RunsArgs),
    /// Print a run's log (what it holds now, or followed with --follow).
    Logs(runs::LogsArgs),
    /// Abort a run that has not ended.
    Abort(runs::AbortArgs),
    /// Run a run's job again, as a new run; print the new run's id.
    Rerun(runs::RerunArgs),
    /// List periodics, trigger one now, pause or resume one.
    Periodics(periodics::PeriodicsArgs),
    /// List the build clusters: kind, health, trusted and its allow rules.
    Clusters(clusters::ClustersArgs),
    /// List the repositories followed from their remotes, or refresh one.
    Repos(repos::ReposArgs),
    /// Show the daemon's configuration status, or reload it now.
    Config(config::ConfigArgs),
    /// Plan which build cluster each job runs on.
    Dispatch(dispatch::DispatchArgs),
    /// Run the dispatcher: Prow's external scheduling strategy, served from
    /// a balanced plan.
    Dispatcher(dispatch::DispatcherArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// powershell.
    Completions(manual::CompletionsArgs),
    /// Print the man page bosun.1, or write every page into --dir.
    Man(manual::ManArgs),
    /// Supervise a local cluster's runs (started by the daemon; not for people).
    #[command(hide = true)]
    RunShim {
        /// --root DIR
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// A decorated run on a local cluster (started by the supervisor, with
    /// its options in BOSUN_DECORATED_OPTIONS): clones its refs, runs the
    /// test under entrypoint's rules, writes Prow's files.
    #[command(hide = true)]
    RunDecorated,
    /// A pipeline run on a local cluster (started by the supervisor, with
    /// its options in BOSUN_PIPELINE_OPTIONS): runs the pipeline's tasks and
    /// steps as processes.
    #[command(hide = true)]
    RunPipeline,
}

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (its Rust bindings
/// name no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    // Memory freed is given back to the system 10 ms later, not a second
    // later (mimalloc's default): a thread that goes idle (a blocking-pool
    // thread after a burst of starts, a worker between requests) does not
    // come back to purge its delayed pages, and they stay resident. In
    // `examples/run_bench` (30,000 runs, then 10,000 triggered runs held) the
    // daemon's peak RSS went from 81-108 MiB to 66-75 MiB, with no
    // measurable change in its CPU per run.
    // SAFETY: sets an integer option, before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10)
    };
    let cli = Cli::parse();
    // Standard output is locked for the commands that report on it only:
    // the in-job programs write from several threads.
    let out = || std::io::stdout().lock();
    let outcome = match cli.command {
        Command::Check(args) => check::run(&args, &mut out()),
        Command::Schedule(args) => schedule::run(&args, &mut out()),
        Command::Serve(args) => serve::run(&args),
        Command::Run(args) => runs::run(&args, &mut out()),
        Command::Runs(args) => runs::runs(&args, &mut out()),
        Command::Logs(args) => runs::logs(&args, &mut out()),
        Command::Abort(args) => runs::abort(&args, &mut out()),
        Command::Rerun(args) => runs::rerun(&args, &mut out()),
        Command::Periodics(args) => periodics::periodics(&args, &mut out()),
        Command::Clusters(args) => clusters::clusters(&args, &mut out()),
        Command::Repos(args) => repos::repos(&args, &mut out()),
        Command::Config(args) => config::config(&args, &mut out()),
        Command::Completions(args) => manual::completions(&args, &Cli::command(), &mut out()),
        Command::Man(args) => manual::man(&args, &Cli::command(), &mut out()),
        Command::Dispatch(args) => dispatch::plan_command(&args, &mut out()),
        Command::Dispatcher(args) => dispatch::dispatcher_command(&args),
        Command::RunShim { args } => bosun_cluster::local::LocalExecutor::shim_main(&args),
        Command::RunPipeline => bosun_injob::pipeline::command::main(),
        // entrypoint's codes: 255 for a test killed by a signal (-1).
        Command::RunDecorated => bosun_injob::decorated::main(),
    };
    bosun_base::command::exit(outcome)
}
