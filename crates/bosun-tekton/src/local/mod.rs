//! A Tekton pipeline on a local cluster: `bosun_injob::pipeline::run_pipeline` runs a
//! PipelineRun's embedded `pipelineSpec` on this machine, step by step, as
//! Tekton's controller would run it on a cluster, with processes instead of
//! pods. `bosun run-pipeline` wraps it as `bosun run-decorated` wraps
//! entrypoint: its stdout is the run's log.
//!
//! # What runs
//!
//! - **Tasks** start once every task they depend on has ended: those named in
//!   `runAfter`, and those whose results they use (`$(tasks.T.results.R)`
//!   anywhere in the task: its params, `when`, or embedded spec). Tasks whose
//!   turn has come run at once, up to [`PipelineOptions::max_parallel`].
//! - A task's **steps** run in order, each a process in a process group of
//!   its own: a `script` is written to a file and run by the interpreter of
//!   its `#!` line (none: `/bin/sh` with `set -e` first, as Tekton does), with
//!   the step's `args`; otherwise `command` followed by `args` (looked up on
//!   `PATH`). The image is not used, as for every local job. The task's
//!   `stepTemplate` is merged into each step as Tekton merges it (the step's
//!   fields win, `env` merged by name; a step with a `command` and no `args`
//!   takes no `args` from the template). The environment is the runner's,
//!   then [`PipelineOptions::env`], then the step's `env`; Kubernetes'
//!   `$(VAR)` expansion applies to `command`, `args` and `env` values.
//! - **Directories.** Under [`PipelineOptions::dir`]: `workspaces/NAME/` for
//!   each pipeline workspace, shared by every task bound to it
//!   (`$(workspaces.NAME.path)`, with the bindings' `subPath`s), and
//!   `tasks/TASK/` for each task: `workspace/` (the pod's `/workspace`, the
//!   default working directory), `results/` (`$(results.NAME.path)`),
//!   `scripts/` and `steps/STEP/exitCode` (`$(steps.STEP.exitCode.path)`). A
//!   `workingDir` under a workspace's `mountPath` (default
//!   `/workspace/NAME`) or under `/workspace` is moved to the directory
//!   standing for it, and created if missing.
//! - **Variables**, as Tekton substitutes them: `$(params.X)` (also
//!   `$(params['X'])`, `[*]` expanding an array in `command`, `args`, array
//!   params and `when` values, `[N]`, `.KEY` of objects), pipeline params
//!   (defaults, the run's values; the run's undeclared params and every
//!   pipeline param propagate into embedded task specs, where the task's own
//!   params win), `$(tasks.T.results.R)`, `$(results.R.path)`,
//!   `$(workspaces.W.path|bound|claim|volume)`, `$(tasks.T.status)`,
//!   `$(tasks.T.reason)` and `$(tasks.status)` in `finally` tasks,
//!   `$(steps.S.exitCode.path)`, and `$(context.pipelineRun.name|namespace|uid)`,
//!   `$(context.pipeline.name)`, `$(context.pipelineTask.retries)`,
//!   `$(context.taskRun.name|namespace|uid)`, `$(context.task.name|retry-count)`.
//!   Other `$(...)` text (shell command substitution) is left alone. A
//!   result is its file's content as written (not trimmed), parsed as JSON
//!   for `array` and `object` results.
//! - **`when`** (`in`, `notin`; all must hold): a task whose expressions do not
//!   hold is skipped. As in Tekton, the tasks that only run after it still
//!   run; those that use its results are skipped, and so are the tasks after
//!   a task skipped for any other reason.
//! - **Failure.** A step that exits non-zero, or cannot start, fails its task
//!   and its remaining steps do not run, unless it has `onError: continue`.
//!   A failed task is tried again `retries` times. A task that fails (unless
//!   the pipeline task says `onError: continue`) fails the run: no task
//!   starts after it, those running end on their own, then `finally` runs.
//!   A task using a result its task did not write fails.
//! - **`finally`** tasks run (in parallel) once every task has ended, whatever
//!   became of them; one whose `when` does not hold, or that uses a result
//!   that is missing, is skipped. A failed `finally` task fails the run.
//! - **Timeouts** (Go durations, `0` for none): a step's `timeout`, a task's
//!   (each attempt), `timeouts.tasks` (the tasks), `timeouts.finally` (from
//!   when `finally` starts) and `timeouts.pipeline` (everything; default
//!   [`DEFAULT_PIPELINE_TIMEOUT`], as Tekton's). At a timeout the step's
//!   process group gets SIGTERM, then SIGKILL after the grace period. When
//!   `timeouts.pipeline` passes, nothing more runs, not even `finally`.
//! - **Abort**: SIGINT or SIGTERM to the runner stops the running steps
//!   (SIGTERM, then SIGKILL after the grace period), starts nothing more (no
//!   `finally`, as a cancelled PipelineRun) and returns [`ABORTED`]. Steps
//!   also get `PR_SET_PDEATHSIG` (SIGKILL), so they do not outlive the runner
//!   when the local executor kills it after its own grace.
//!
//! # What is refused
//!
//! Before anything runs, the spec is checked ([`check`]): what Tekton would
//! reject (a task in `runAfter` that does not exist, a cycle, a parameter
//! without a value, a variable naming nothing, ...) ends the run with
//! [`INVALID`]; what needs more than this machine has ends it with
//! [`REFUSED`], naming the reference: `pipelineRef`, `taskRef`, a step's
//! `ref`, Jenkins X `uses:` images, environment from Secrets, ConfigMaps or
//! the pod (`valueFrom`, `envFrom`), workspaces bound to a ConfigMap, a
//! Secret or other projected volumes, pipelines in pipelines, `matrix`, CEL
//! `when` expressions, custom tasks, and steps with neither `script` nor
//! `command` (their image's entrypoint). Sidecars are not run (the log
//! says so); volumes and volume mounts are ignored.
//!
//! # Output
//!
//! Each line a step writes (stdout and stderr) goes to the runner's stdout
//! as `[TASK/STEP] line`; the runner's own lines start with `bosun: ` (a
//! task's start, end and skip, a step's failure, the run's end in Tekton's
//! words: `Tasks Completed: 3 (Failed: 1, Cancelled 0), Skipped: 1`, and the
//! pipeline's results). [`PipelineOptions::status_file`], when set, receives
//! the outcome as JSON ([`RunStatus`]).
//!
//! # Exit codes
//!
//! [`SUCCEEDED`] (0, also when tasks were skipped: Tekton's `Completed`),
//! [`FAILED`] (1: a task failed, or a timeout passed), [`INVALID`] (2),
//! [`REFUSED`] (3), [`ABORTED`] (130), [`INTERNAL_ERROR`] (127: the runner
//! could not do its part, such as creating its directories).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bosun_config::duration::GoDuration;
use bosun_job::artifacts::ABORTED_CODE;
use serde::{Deserialize, Serialize};

use crate::model::{ParamValue, PipelineRunSpec};

pub mod plan;
pub mod variables;

pub use plan::Plan;

/// The pipeline succeeded (some tasks may have been skipped).
pub const SUCCEEDED: i32 = 0;
/// A task failed, or a timeout passed.
pub const FAILED: i32 = 1;
/// The pipeline is not valid: Tekton would refuse it.
pub const INVALID: i32 = 2;
/// The pipeline needs what a local cluster does not have (a reference to
/// resolve, a Secret, an image's entrypoint): nothing ran.
pub const REFUSED: i32 = 3;
/// The runner could not do its part (its directories, its signals).
pub const INTERNAL_ERROR: i32 = 127;
/// The runner was told to stop (SIGINT or SIGTERM).
pub const ABORTED: i32 = ABORTED_CODE;

/// `timeouts.pipeline` when the run sets none (Tekton's default).
pub const DEFAULT_PIPELINE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The time between SIGTERM and SIGKILL when none is set.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(10);

/// The environment variable `bosun run-pipeline` reads its options from
/// (removed from the steps' environment).
pub const OPTIONS_ENV: &str = "BOSUN_PIPELINE_OPTIONS";

/// What to run, and where.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PipelineOptions {
    /// The PipelineRun's spec, with its `pipelineSpec`.
    pub spec: PipelineRunSpec,
    /// The PipelineRun's name (`$(context.pipelineRun.name)`, and the
    /// pipeline's).
    pub name: String,
    /// Its namespace (`$(context.pipelineRun.namespace)`).
    pub namespace: String,
    /// Its uid (`$(context.pipelineRun.uid)`).
    pub uid: String,
    /// The run's directory: workspaces and tasks' files go under it.
    pub dir: PathBuf,
    /// Variables added to every step's environment (before the step's own).
    pub env: Vec<(String, String)>,
    /// How many tasks may run at once (0: the machine's parallelism).
    pub max_parallel: usize,
    /// SIGKILL this long after SIGTERM (`None`: [`DEFAULT_GRACE_PERIOD`]).
    pub grace_period: Option<Duration>,
    /// Where the outcome is written as JSON ([`RunStatus`]), if anywhere.
    pub status_file: Option<PathBuf>,
}

/// Why a pipeline cannot be run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Invalid, or refused.
    pub kind: ProblemKind,
    /// What is wrong, naming the task, step or reference.
    pub message: String,
}

/// The kinds of [`Problem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// Tekton would refuse the pipeline too.
    Invalid,
    /// The pipeline needs what a local cluster does not have.
    Refused,
}

/// The outcome of a run, as written to [`PipelineOptions::status_file`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    /// The exit code.
    pub code: i32,
    /// Tekton's reason: `Succeeded`, `Completed`, `Failed`,
    /// `PipelineRunTimeout`, `Cancelled`; or `Invalid`, `Refused`, `Error`.
    pub reason: String,
    /// Tekton's message (`Tasks Completed: …`), or the problems.
    pub message: String,
    /// Each task, `finally` tasks last.
    pub tasks: Vec<TaskStatus>,
    /// The pipeline's results.
    pub results: BTreeMap<String, ParamValue>,
}

/// A task's outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// The pipeline task.
    pub name: String,
    /// Whether it is a `finally` task.
    pub finally: bool,
    /// `Succeeded`, `Failed`, `Skipped`, `Cancelled`, or `NotRun`.
    pub status: String,
    /// Tekton's reason (`TaskRunTimeout`, `When Expressions evaluated to
    /// false`, ...).
    pub reason: String,
    /// What happened.
    pub message: String,
    /// How many attempts ran.
    pub attempts: u32,
    /// The results it gave.
    pub results: BTreeMap<String, ParamValue>,
}

/// Checks `spec` as `bosun_injob::pipeline::run_pipeline` does before running anything: every
/// problem found (none: it can run here).
pub fn check(spec: &PipelineRunSpec) -> Vec<Problem> {
    let opts = PipelineOptions {
        spec: spec.clone(),
        name: "check".into(),
        dir: PathBuf::from("/nonexistent"),
        ..Default::default()
    };
    match Plan::new(&opts) {
        Ok(_) => Vec::new(),
        Err(problems) => problems,
    }
}

/// A Go duration's text.
pub fn go_duration(d: Duration) -> String {
    GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).to_string()
}

/// A Go duration; `None` for zero (no timeout).
pub fn parse_timeout(s: &str) -> Result<Option<Duration>, String> {
    let d = GoDuration::parse(s)?;
    if d.as_nanos() < 0 {
        return Err(format!("negative timeout {s}"));
    }
    Ok((d.as_nanos() > 0).then(|| d.to_std()))
}
