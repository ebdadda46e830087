//! The local executor's runner of a Tekton pipeline: [`run_pipeline`] runs a
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bosun_config::duration::GoDuration;
use rustix::process::{
    getpid, getppid, kill_process_group, set_parent_process_death_signal, waitid, Pid, Signal,
    WaitId, WaitIdOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::model::{
    EnvVar, ParamType, ParamValue, PipelineRunSpec, PipelineSpec, PipelineTask, Step, StepTemplate,
    TaskSpec,
};
use crate::podutils::artifacts::{write_atomic, ABORTED_CODE};

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

/// Checks `spec` as [`run_pipeline`] does before running anything: every
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

/// Runs the pipeline (see the module's doc) and returns the exit code.
///
/// SIGINT and SIGTERM are taken by this function from when the first step
/// is about to start; after it returns this process keeps ignoring them.
/// Call it on a thread that outlives the run (such as the main thread).
pub fn run_pipeline(opts: &PipelineOptions) -> i32 {
    let plan = match Plan::new(opts) {
        Ok(plan) => plan,
        Err(problems) => {
            let refused = problems.iter().all(|p| p.kind == ProblemKind::Refused);
            let (code, reason, what) = if refused {
                (
                    REFUSED,
                    "Refused",
                    "a local cluster cannot run this pipeline",
                )
            } else {
                (INVALID, "Invalid", "the pipeline is not valid")
            };
            for p in &problems {
                note(&format!("{what}: {}", p.message));
            }
            let message = problems
                .iter()
                .map(|p| p.message.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            write_status(
                opts,
                &RunStatus {
                    code,
                    reason: reason.into(),
                    message,
                    ..Default::default()
                },
            );
            return code;
        }
    };
    if let Err(e) = plan.create_dirs() {
        note(&format!("cannot lay out the run's directory: {e}"));
        write_status(
            opts,
            &RunStatus {
                code: INTERNAL_ERROR,
                reason: "Error".into(),
                message: e,
                ..Default::default()
            },
        );
        return INTERNAL_ERROR;
    }
    let (tx, rx) = mpsc::channel();
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => {
            note(&format!("cannot handle signals: {e}"));
            return INTERNAL_ERROR;
        }
    };
    let handle = signals.handle();
    let signal_tx = tx.clone();
    let signal_thread = thread::spawn(move || {
        for sig in signals.forever() {
            if signal_tx.send(Event::Signal(sig)).is_err() {
                break;
            }
        }
    });
    let plan = Arc::new(plan);
    let status = Scheduler::new(plan, tx, rx).run();
    handle.close();
    let _ = signal_thread.join();
    write_status(opts, &status);
    status.code
}

/// A line of the runner's own in the log.
fn note(msg: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "bosun: {msg}");
    let _ = out.flush();
}

fn write_status(opts: &PipelineOptions, status: &RunStatus) {
    if let Some(path) = &opts.status_file {
        let mut json = serde_json::to_string_pretty(status).unwrap_or_default();
        json.push('\n');
        if let Err(e) = write_atomic(path, json.as_bytes()) {
            note(&format!("cannot write {}: {e}", path.display()));
        }
    }
}

/// A Go duration's text.
fn go_duration(d: Duration) -> String {
    GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).to_string()
}

/// A Go duration; `None` for zero (no timeout).
fn parse_timeout(s: &str) -> Result<Option<Duration>, String> {
    let d = GoDuration::parse(s)?;
    if d.as_nanos() < 0 {
        return Err(format!("negative timeout {s}"));
    }
    Ok((d.as_nanos() > 0).then(|| d.to_std()))
}

// ---------------------------------------------------------------------------
// Variables

/// What follows a variable's name: `[*]`, `[N]`, `.KEY`.
#[derive(Debug, Clone, PartialEq)]
enum Suffix {
    None,
    Star,
    Index(usize),
    Key(String),
}

/// A Tekton variable (the text between `$(` and `)`).
#[derive(Debug, Clone, PartialEq)]
enum Var {
    Param(String, Suffix),
    TaskResult(String, String, Suffix),
    TaskStatus(String),
    TaskReason(String),
    TasksStatus,
    Result(String),
    Workspace(String, String),
    Context(String),
    StepExitCode(String),
}

/// Reads `name` followed by an optional suffix from `s`: `.NAME`, or
/// `['NAME']` / `["NAME"]`; the name and what follows.
fn name_part(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('.') {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        (end > 0).then(|| (&rest[..end], &rest[end..]))
    } else {
        for q in ['\'', '"'] {
            let open = format!("[{q}");
            if let Some(rest) = s.strip_prefix(open.as_str()) {
                let close = format!("{q}]");
                let end = rest.find(close.as_str())?;
                return (end > 0).then(|| (&rest[..end], &rest[end + 2..]));
            }
        }
        None
    }
}

fn suffix(s: &str) -> Option<Suffix> {
    if s.is_empty() {
        return Some(Suffix::None);
    }
    if s == "[*]" {
        return Some(Suffix::Star);
    }
    if let Some(n) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return n.parse().ok().map(Suffix::Index);
    }
    let (key, rest) = name_part(s)?;
    rest.is_empty().then(|| Suffix::Key(key.to_string()))
}

/// The variable `content` names, or `None` when it is not a Tekton variable
/// (the text is then left as it is).
fn parse_var(content: &str) -> Option<Var> {
    if let Some(rest) = content.strip_prefix("params") {
        let (name, rest) = name_part(rest)?;
        return Some(Var::Param(name.into(), suffix(rest)?));
    }
    if let Some(rest) = content.strip_prefix("tasks") {
        if rest == ".status" {
            return Some(Var::TasksStatus);
        }
        let (task, rest) = name_part(rest)?;
        return match rest {
            ".status" => Some(Var::TaskStatus(task.into())),
            ".reason" => Some(Var::TaskReason(task.into())),
            _ => {
                let rest = rest.strip_prefix(".results")?;
                let (result, rest) = name_part(rest)?;
                Some(Var::TaskResult(task.into(), result.into(), suffix(rest)?))
            }
        };
    }
    if let Some(rest) = content.strip_prefix("results") {
        let (name, rest) = name_part(rest)?;
        return (rest == ".path").then(|| Var::Result(name.into()));
    }
    if let Some(rest) = content.strip_prefix("workspaces") {
        let (name, rest) = name_part(rest)?;
        let (attr, rest) = name_part(rest)?;
        return rest
            .is_empty()
            .then(|| Var::Workspace(name.into(), attr.into()));
    }
    if let Some(rest) = content.strip_prefix("context.") {
        return (!rest.is_empty()).then(|| Var::Context(rest.into()));
    }
    if let Some(rest) = content.strip_prefix("steps") {
        let (step, rest) = name_part(rest)?;
        return (rest == ".exitCode.path").then(|| Var::StepExitCode(step.into()));
    }
    None
}

/// The pieces of `s`: text, and variables with their source text.
enum Piece<'a> {
    Text(&'a str),
    Var(Var, &'a str),
}

fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(off) = s[i..].find("$(") {
        let start = i + off;
        let body = start + 2;
        let found = s[body..].find(')').and_then(|len| {
            let content = &s[body..body + len];
            if content.contains(|c: char| c.is_whitespace() || c == '$' || c == '(') {
                return None;
            }
            parse_var(content).map(|v| (v, body + len + 1))
        });
        match found {
            Some((var, end)) => {
                if text_start < start {
                    out.push(Piece::Text(&s[text_start..start]));
                }
                out.push(Piece::Var(var, &s[start..end]));
                text_start = end;
                i = end;
            }
            None => i = body,
        }
    }
    if text_start < s.len() {
        out.push(Piece::Text(&s[text_start..]));
    }
    out
}

/// Every variable in `s`.
fn vars_in(s: &str) -> Vec<Var> {
    pieces(s)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Var(v, _) => Some(v),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Every string in a JSON value.
fn json_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| json_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| json_strings(i, out)),
        _ => {}
    }
}

/// What a variable resolves to.
trait Resolve {
    fn resolve(&self, var: &Var) -> Result<ParamValue, String>;

    /// Whether values are placeholders (a check before the run): an index
    /// or a key they lack is then no error.
    fn placeholders(&self) -> bool;
}

/// A variable's value with its suffix applied.
fn value_of(r: &dyn Resolve, var: &Var, text: &str) -> Result<ParamValue, String> {
    let base = r.resolve(var).map_err(|e| format!("{text}: {e}"))?;
    let sfx = match var {
        Var::Param(_, s) | Var::TaskResult(_, _, s) => s.clone(),
        _ => Suffix::None,
    };
    match (sfx, base) {
        (Suffix::None, v) => Ok(v),
        (Suffix::Star, v @ (ParamValue::Array(_) | ParamValue::Object(_))) => Ok(v),
        (Suffix::Index(_), ParamValue::Array(_)) | (Suffix::Key(_), ParamValue::Object(_))
            if r.placeholders() =>
        {
            Ok(ParamValue::String(String::new()))
        }
        (Suffix::Index(i), ParamValue::Array(a)) => {
            a.get(i).cloned().map(ParamValue::String).ok_or_else(|| {
                format!(
                    "{text}: index {i} is out of range (the array has {})",
                    a.len()
                )
            })
        }
        (Suffix::Key(k), ParamValue::Object(o)) => o
            .get(&k)
            .cloned()
            .map(ParamValue::String)
            .ok_or_else(|| format!("{text}: the object has no key {k}")),
        (_, v) => Err(format!(
            "{text}: a {} value does not take this subscript",
            v.param_type()
        )),
    }
}

/// `s` with its variables substituted; each must be a string.
fn subst_str(r: &dyn Resolve, s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    for piece in pieces(s) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(var, text) => match value_of(r, &var, text)? {
                ParamValue::String(v) => out.push_str(&v),
                v => {
                    return Err(format!(
                        "{text} is an {} and cannot be used within a string",
                        v.param_type()
                    ))
                }
            },
        }
    }
    Ok(out)
}

/// A list of strings with its variables substituted: an item that is one
/// array variable (`$(params.a[*])`) becomes its items.
fn subst_list(r: &dyn Resolve, items: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if let [Piece::Var(var, text)] = pieces(item).as_slice() {
            if let ParamValue::Array(a) = value_of(r, var, text)? {
                out.extend(a);
                continue;
            }
        }
        out.push(subst_str(r, item)?);
    }
    Ok(out)
}

/// A parameter's value with its variables substituted: a string that is one
/// array or object variable becomes that value.
fn subst_value(r: &dyn Resolve, v: &ParamValue) -> Result<ParamValue, String> {
    match v {
        ParamValue::String(s) => {
            if let [Piece::Var(var, text)] = pieces(s).as_slice() {
                return value_of(r, var, text);
            }
            subst_str(r, s).map(ParamValue::String)
        }
        ParamValue::Array(a) => subst_list(r, a).map(ParamValue::Array),
        ParamValue::Object(o) => o
            .iter()
            .map(|(k, v)| subst_str(r, v).map(|v| (k.clone(), v)))
            .collect::<Result<_, _>>()
            .map(ParamValue::Object),
    }
}

/// Kubernetes' expansion of `$(VAR)` in a container's command, args and env
/// values: a variable of `env` becomes its value, `$$` becomes `$`, anything
/// else stays.
fn k8s_expand(s: &str, env: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some((_, '$')) => {
                chars.next();
                out.push('$');
            }
            Some((_, '(')) => {
                let rest = &s[i + 2..];
                match rest.find(')') {
                    Some(end) => {
                        let name = &rest[..end];
                        match env.get(name) {
                            Some(v) => out.push_str(v),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        // Skip `(`, the name and `)`.
                        for _ in 0..name.chars().count() + 2 {
                            chars.next();
                        }
                    }
                    None => out.push('$'),
                }
            }
            _ => out.push('$'),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The plan: the spec checked, with its tasks' dependencies

/// A task of the plan.
#[derive(Debug)]
struct Node {
    pt: PipelineTask,
    spec: TaskSpec,
    finally: bool,
    /// The tasks named in `runAfter`.
    after: BTreeSet<usize>,
    /// The results used: (task, result).
    result_refs: BTreeSet<(usize, String)>,
    /// Each attempt's timeout.
    timeout: Option<Duration>,
    /// The steps, merged with the step template, and their timeouts.
    steps: Vec<(Step, Option<Duration>)>,
}

impl Node {
    /// Every task it waits for.
    fn deps(&self) -> BTreeSet<usize> {
        let mut d = self.after.clone();
        d.extend(self.result_refs.iter().map(|(t, _)| *t));
        d
    }
}

/// The run's phases' timeouts.
#[derive(Debug, Default)]
struct Timeouts {
    pipeline: Option<Duration>,
    tasks: Option<Duration>,
    finally: Option<Duration>,
}

#[derive(Debug)]
struct Plan {
    name: String,
    namespace: String,
    uid: String,
    dir: PathBuf,
    env: Vec<(String, String)>,
    max_parallel: usize,
    grace: Duration,
    pipeline: PipelineSpec,
    /// The pipeline's params (declared, then the run's undeclared ones).
    params: BTreeMap<String, ParamValue>,
    /// The pipeline's workspaces: their directories (`None`: an optional
    /// one left unbound).
    workspaces: BTreeMap<String, Option<PathBuf>>,
    nodes: Vec<Node>,
    index: HashMap<String, usize>,
    timeouts: Timeouts,
}

#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn invalid(&mut self, m: impl Into<String>) {
        self.0.push(Problem {
            kind: ProblemKind::Invalid,
            message: m.into(),
        });
    }
    fn refused(&mut self, m: impl Into<String>) {
        self.0.push(Problem {
            kind: ProblemKind::Refused,
            message: m.into(),
        });
    }
}

/// A `valueFrom` or `envFrom` entry as a person would name it:
/// `secretKeyRef my-secret/token`.
fn describe_source(v: &Value) -> String {
    let Some(map) = v.as_object() else {
        return v.to_string();
    };
    for (kind, inner) in map {
        if kind == "prefix" {
            continue;
        }
        let name = inner.get("name").and_then(Value::as_str);
        let key = inner
            .get("key")
            .or_else(|| inner.get("fieldPath"))
            .or_else(|| inner.get("resource"))
            .and_then(Value::as_str);
        return match (name, key) {
            (Some(n), Some(k)) => format!("{kind} {n}/{k}"),
            (Some(n), None) => format!("{kind} {n}"),
            (None, Some(k)) => format!("{kind} {k}"),
            (None, None) => kind.clone(),
        };
    }
    v.to_string()
}

/// A step merged with its task's `stepTemplate`, as Tekton merges them.
fn merge_step(step: &Step, tpl: Option<&StepTemplate>) -> Step {
    let mut s = step.clone();
    let Some(t) = tpl else {
        return s;
    };
    if s.image.is_empty() {
        s.image = t.image.clone();
    }
    if s.script.is_empty() && s.command.is_empty() {
        s.command = t.command.clone();
        if s.args.is_empty() {
            s.args = t.args.clone();
        }
    } else if !s.script.is_empty() && s.args.is_empty() {
        s.args = t.args.clone();
    }
    if s.working_dir.is_empty() {
        s.working_dir = t.working_dir.clone();
    }
    if s.env_from.is_empty() {
        s.env_from = t.env_from.clone();
    }
    let mut env: Vec<EnvVar> = t
        .env
        .iter()
        .map(|e| {
            step.env
                .iter()
                .find(|s| s.name == e.name)
                .unwrap_or(e)
                .clone()
        })
        .collect();
    env.extend(
        step.env
            .iter()
            .filter(|e| !t.env.iter().any(|t| t.name == e.name))
            .cloned(),
    );
    s.env = env;
    s
}

/// Whether `s` is a DNS-1123 label, as Tekton requires of task, step and
/// workspace names (they also name directories here).
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a result name as Tekton accepts it (it names a file here).
fn is_result_name(s: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric();
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && ok(bytes[0])
        && ok(bytes[bytes.len() - 1])
        && bytes
            .iter()
            .all(|&b| ok(b) || b == b'-' || b == b'_' || b == b'.')
}

/// Whether a `subPath` stays within its volume.
fn is_sub_path(s: &str) -> bool {
    let p = Path::new(s);
    p.is_relative()
        && p.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

fn step_name(step: &Step, i: usize) -> String {
    if step.name.is_empty() {
        format!("unnamed-{i}")
    } else {
        step.name.clone()
    }
}

impl Plan {
    fn new(opts: &PipelineOptions) -> Result<Plan, Vec<Problem>> {
        let mut p = Problems::default();
        let spec = &opts.spec;
        if let Some(r) = &spec.pipeline_ref {
            p.refused(format!(
                "pipelineRef {r}: a local cluster runs only a pipeline embedded in the PipelineRun \
                 (pipelineSpec), and cannot resolve references"
            ));
        }
        let Some(pipeline) = &spec.pipeline_spec else {
            if spec.pipeline_ref.is_none() {
                p.invalid("the PipelineRun has neither pipelineSpec nor pipelineRef");
            }
            return Err(p.0);
        };
        for u in spec.uses_references() {
            p.refused(u.to_string());
        }

        // Timeouts.
        let mut timeouts = Timeouts {
            pipeline: Some(DEFAULT_PIPELINE_TIMEOUT),
            ..Default::default()
        };
        if let Some(t) = &spec.timeouts {
            let mut read = |field: &str, v: &Option<String>| -> Option<Duration> {
                let v = v.as_deref()?;
                parse_timeout(v)
                    .map_err(|e| p.invalid(format!("timeouts.{field}: {e}")))
                    .ok()
                    .flatten()
            };
            if t.pipeline.is_some() {
                timeouts.pipeline = read("pipeline", &t.pipeline);
            }
            timeouts.tasks = read("tasks", &t.tasks);
            timeouts.finally = read("finally", &t.finally);
        }

        // Pipeline params: declared ones (the run's value, else the
        // default), then the run's others.
        let mut params = BTreeMap::new();
        for ps in &pipeline.params {
            let given = spec.params.iter().find(|x| x.name == ps.name);
            match given.map(|g| &g.value).or(ps.default.as_ref()) {
                Some(v) if v.param_type() != ps.param_type() => p.invalid(format!(
                    "parameter {} is declared {} but its value is {}",
                    ps.name,
                    ps.param_type(),
                    v.param_type()
                )),
                Some(v) => {
                    params.insert(ps.name.clone(), v.clone());
                }
                None => p.invalid(format!(
                    "parameter {} has no value: the PipelineRun gives none and it has no default",
                    ps.name
                )),
            }
        }
        for given in &spec.params {
            params
                .entry(given.name.clone())
                .or_insert_with(|| given.value.clone());
        }

        // Workspaces: each is a directory; its binding's subPath applies.
        let mut workspaces = BTreeMap::new();
        for ws in &pipeline.workspaces {
            if !is_dns_label(&ws.name) {
                p.invalid(format!(
                    "workspace name {:?} is not a DNS-1123 label (lowercase letters, digits and -)",
                    ws.name
                ));
                continue;
            }
            let binding = spec.workspaces.iter().find(|b| b.name == ws.name);
            match binding {
                None if ws.optional => {
                    workspaces.insert(ws.name.clone(), None);
                }
                None => p.invalid(format!(
                    "workspace {} is not bound: the PipelineRun's workspaces do not name it",
                    ws.name
                )),
                Some(b) => {
                    let unreadable = [
                        ("configMap", &b.config_map),
                        ("secret", &b.secret),
                        ("projected", &b.projected),
                        ("csi", &b.csi),
                    ];
                    if let Some((kind, v)) = unreadable.iter().find(|(_, v)| v.is_some()) {
                        let name = v
                            .as_ref()
                            .and_then(|v| v.get("name").or_else(|| v.get("secretName")))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        p.refused(format!(
                            "workspace {} is bound to {kind} {name}, which a local cluster cannot read",
                            ws.name
                        ));
                    }
                    if !is_sub_path(&b.sub_path) {
                        p.invalid(format!(
                            "workspace {}: subPath {} leaves the volume",
                            ws.name, b.sub_path
                        ));
                    }
                    let mut dir = opts.dir.join("workspaces").join(&ws.name);
                    if !b.sub_path.is_empty() {
                        dir = dir.join(&b.sub_path);
                    }
                    workspaces.insert(ws.name.clone(), Some(dir));
                }
            }
        }

        // Tasks.
        let mut index = HashMap::new();
        let all: Vec<(&PipelineTask, bool)> = pipeline
            .tasks
            .iter()
            .map(|t| (t, false))
            .chain(pipeline.finally.iter().map(|t| (t, true)))
            .collect();
        if pipeline.tasks.is_empty() {
            p.invalid("the pipeline has no tasks");
        }
        for (i, (pt, _)) in all.iter().enumerate() {
            if pt.name.is_empty() {
                p.invalid(format!("task {} has no name", i + 1));
            } else if !is_dns_label(&pt.name) {
                p.invalid(format!(
                    "task name {:?} is not a DNS-1123 label (lowercase letters, digits and -)",
                    pt.name
                ));
            } else if index.insert(pt.name.clone(), i).is_some() {
                p.invalid(format!("task name {} is used twice", pt.name));
            }
        }
        let mut nodes = Vec::new();
        for (pt, finally) in &all {
            nodes.push(Self::node(pt, *finally, &all, &index, pipeline, &mut p));
        }
        if !p.0.is_empty() {
            return Err(p.0);
        }
        if let Some(cycle) = find_cycle(&nodes) {
            p.invalid(format!(
                "the tasks depend on each other in a cycle: {cycle}"
            ));
            return Err(p.0);
        }
        let plan = Plan {
            name: opts.name.clone(),
            namespace: opts.namespace.clone(),
            uid: opts.uid.clone(),
            dir: opts.dir.clone(),
            env: opts.env.clone(),
            max_parallel: if opts.max_parallel == 0 {
                thread::available_parallelism().map_or(2, |n| n.get())
            } else {
                opts.max_parallel
            },
            grace: opts
                .grace_period
                .filter(|g| !g.is_zero())
                .unwrap_or(DEFAULT_GRACE_PERIOD),
            pipeline: pipeline.clone(),
            params,
            workspaces,
            nodes,
            index,
            timeouts,
        };
        // Every variable must name something, with the right type: each task
        // is prepared once with placeholder results.
        let facts = Facts::dry(plan.nodes.len());
        for (i, node) in plan.nodes.iter().enumerate() {
            let prepared = plan
                .pipeline_level(i, &facts)
                .and_then(|pl| plan.prepare(i, &facts, &pl.params, 0));
            if let Err(e) = prepared {
                p.invalid(format!("task {}: {e}", node.pt.name));
            }
        }
        for r in &plan.pipeline.results {
            let scope = Scope::pipeline(&plan, &facts, true);
            if let Err(e) = subst_value(&scope, &r.value) {
                p.invalid(format!("pipeline result {}: {e}", r.name));
            }
        }
        if p.0.is_empty() {
            Ok(plan)
        } else {
            Err(p.0)
        }
    }

    /// Checks one task and finds what it depends on.
    fn node(
        pt: &PipelineTask,
        finally: bool,
        all: &[(&PipelineTask, bool)],
        index: &HashMap<String, usize>,
        pipeline: &PipelineSpec,
        p: &mut Problems,
    ) -> Node {
        let name = &pt.name;
        let mut node = Node {
            pt: pt.clone(),
            spec: TaskSpec::default(),
            finally,
            after: BTreeSet::new(),
            result_refs: BTreeSet::new(),
            timeout: None,
            steps: Vec::new(),
        };
        if let Some(r) = &pt.task_ref {
            p.refused(format!(
                "task {name}: taskRef {r} cannot be resolved on a local cluster \
                 (only tasks embedded with taskSpec run locally)"
            ));
        }
        if let Some(r) = &pt.pipeline_ref {
            p.refused(format!(
                "task {name}: pipelineRef {r}: pipelines in pipelines are not run locally"
            ));
        }
        if pt.pipeline_spec.is_some() {
            p.refused(format!(
                "task {name}: an embedded pipelineSpec (pipelines in pipelines) is not run locally"
            ));
        }
        if pt.matrix.is_some() {
            p.refused(format!("task {name}: matrix is not run locally"));
        }
        if !matches!(pt.on_error.as_str(), "" | "continue" | "stopAndFail") {
            p.invalid(format!(
                "task {name}: onError {} is not continue or stopAndFail",
                pt.on_error
            ));
        }
        if let Some(t) = &pt.timeout {
            match parse_timeout(t) {
                Ok(t) => node.timeout = t,
                Err(e) => p.invalid(format!("task {name}: timeout: {e}")),
            }
        }
        for w in &pt.when {
            if !w.cel.is_empty() {
                p.refused(format!(
                    "task {name}: the CEL when expression {:?} is not evaluated locally",
                    w.cel
                ));
            } else if !matches!(w.operator.as_str(), "in" | "notin") {
                p.invalid(format!(
                    "task {name}: when operator {:?} is not in or notin",
                    w.operator
                ));
            } else if w.values.is_empty() {
                p.invalid(format!("task {name}: a when expression has no values"));
            }
        }
        if finally && !pt.run_after.is_empty() {
            p.invalid(format!("finally task {name} cannot use runAfter"));
        }
        for after in &pt.run_after {
            match index.get(after) {
                Some(&j) if !all[j].1 && after != name => {
                    node.after.insert(j);
                }
                _ => p.invalid(format!(
                    "task {name}: runAfter names {after}, which is not a task"
                )),
            }
        }
        for b in &pt.workspaces {
            let ws = if b.workspace.is_empty() {
                &b.name
            } else {
                &b.workspace
            };
            if !pipeline.workspaces.iter().any(|w| &w.name == ws) {
                p.invalid(format!(
                    "task {name}: workspace {} is bound to {ws}, which the pipeline does not declare",
                    b.name
                ));
            }
        }

        // Result references, anywhere in the task.
        let json = serde_json::to_value(pt).unwrap_or(Value::Null);
        let mut strings = Vec::new();
        json_strings(&json, &mut strings);
        for s in strings {
            for var in vars_in(s) {
                let (task, result, text) = match &var {
                    Var::TaskResult(t, r, _) => (t, Some(r), format!("$(tasks.{t}.results.{r})")),
                    Var::TaskStatus(t) => (t, None, format!("$(tasks.{t}.status)")),
                    Var::TaskReason(t) => (t, None, format!("$(tasks.{t}.reason)")),
                    _ => continue,
                };
                let Some(&j) = index.get(task) else {
                    p.invalid(format!(
                        "task {name}: {text} names task {task}, which does not exist"
                    ));
                    continue;
                };
                if all[j].1 {
                    p.invalid(format!(
                        "task {name}: {text} uses finally task {task}, whose results and status no task can use"
                    ));
                    continue;
                }
                if task == name {
                    p.invalid(format!("task {name} uses its own results"));
                    continue;
                }
                if let Some(r) = result {
                    let declared = all[j]
                        .0
                        .task_spec
                        .as_ref()
                        .is_none_or(|ts| ts.results.iter().any(|d| &d.name == r));
                    if !declared {
                        p.invalid(format!(
                            "task {name}: {text} uses result {r} of task {task}, which does not declare it"
                        ));
                    }
                    node.result_refs.insert((j, r.clone()));
                }
            }
        }

        let Some(spec) = &pt.task_spec else {
            if pt.task_ref.is_none() && pt.pipeline_ref.is_none() && pt.pipeline_spec.is_none() {
                p.invalid(format!("task {name} has neither taskSpec nor taskRef"));
            }
            return node;
        };
        if spec.extra.contains_key("apiVersion") || spec.extra.contains_key("kind") {
            p.refused(format!("task {name}: custom tasks are not run locally"));
        }
        if spec.steps.is_empty() {
            p.invalid(format!("task {name} has no steps"));
        }
        for r in &spec.results {
            if !is_result_name(&r.name) {
                p.invalid(format!(
                    "task {name}: result name {:?} is not valid",
                    r.name
                ));
            }
        }
        let tpl = spec.step_template.as_ref();
        if let Some(t) = tpl {
            for e in &t.env_from {
                p.refused(format!(
                    "task {name}: the stepTemplate's envFrom {} cannot be read on a local cluster",
                    describe_source(e)
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, raw) in spec.steps.iter().enumerate() {
            let step = merge_step(raw, tpl);
            let sname = step_name(raw, i);
            let at = format!("task {name}, step {sname}");
            if !raw.name.is_empty() && !seen.insert(raw.name.clone()) {
                p.invalid(format!("task {name}: step name {} is used twice", raw.name));
            }
            if !raw.name.is_empty() && !is_dns_label(&raw.name) {
                p.invalid(format!(
                    "task {name}: step name {:?} is not a DNS-1123 label (lowercase letters, digits and -)",
                    raw.name
                ));
            }
            if let Some(r) = &raw.ref_ {
                p.refused(format!(
                    "{at}: the StepAction ref {r} cannot be resolved on a local cluster"
                ));
                continue;
            }
            if raw.uses().is_some() || step.uses().is_some() {
                // Reported with the pipeline's uses: references.
                continue;
            }
            if !raw.script.is_empty() && !raw.command.is_empty() {
                p.invalid(format!("{at}: script cannot be used with command"));
            }
            if step.script.is_empty() && step.command.is_empty() {
                p.refused(format!(
                    "{at} has neither script nor command: a local cluster cannot run the entrypoint of its image {}",
                    if step.image.is_empty() { "(none)" } else { &step.image }
                ));
            }
            for e in &raw.env_from {
                p.refused(format!(
                    "{at}: envFrom {} cannot be read on a local cluster",
                    describe_source(e)
                ));
            }
            for e in &step.env {
                if let Some(from) = &e.value_from {
                    p.refused(format!(
                        "{at}: env {} takes its value from {}, which a local cluster cannot read",
                        e.name,
                        describe_source(from)
                    ));
                }
            }
            if !matches!(raw.on_error.as_str(), "" | "continue" | "stopAndFail") {
                p.invalid(format!(
                    "{at}: onError {} is not continue or stopAndFail",
                    raw.on_error
                ));
            }
            let timeout = match raw.timeout.as_deref().map(parse_timeout) {
                Some(Ok(t)) => t,
                Some(Err(e)) => {
                    p.invalid(format!("{at}: timeout: {e}"));
                    None
                }
                None => None,
            };
            node.steps.push((step, timeout));
        }
        node.spec = spec.clone();
        node
    }

    /// Creates the workspaces' directories.
    fn create_dirs(&self) -> Result<(), String> {
        for dir in self.workspaces.values().flatten() {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        Ok(())
    }

    fn task_dir(&self, i: usize) -> PathBuf {
        self.dir.join("tasks").join(&self.nodes[i].pt.name)
    }

    fn task_run_name(&self, i: usize) -> String {
        format!("{}-{}", self.name, self.nodes[i].pt.name)
    }

    /// The pipeline-level side of task `i`: its params' values and whether
    /// its `when` expressions hold (with the first that does not).
    fn pipeline_level(&self, i: usize, facts: &Facts) -> Result<PipelineLevel, String> {
        let node = &self.nodes[i];
        let scope = Scope {
            task: Some(i),
            ..Scope::pipeline(self, facts, facts.dry)
        };
        let mut params = BTreeMap::new();
        for p in &node.pt.params {
            let v = subst_value(&scope, &p.value).map_err(|e| format!("param {}: {e}", p.name))?;
            params.insert(p.name.clone(), v);
        }
        let mut skip = None;
        for w in &node.pt.when {
            let input = subst_str(&scope, &w.input).map_err(|e| format!("when: {e}"))?;
            let values = subst_list(&scope, &w.values).map_err(|e| format!("when: {e}"))?;
            let holds = values.contains(&input) == (w.operator == "in");
            if !holds && skip.is_none() {
                skip = Some(format!("{input:?} {} {values:?} does not hold", w.operator));
            }
        }
        Ok(PipelineLevel { params, skip })
    }

    /// Task `i` ready to run its attempt `attempt`: its steps with every
    /// variable substituted.
    fn prepare(
        &self,
        i: usize,
        facts: &Facts,
        given: &BTreeMap<String, ParamValue>,
        attempt: u32,
    ) -> Result<Prepared, String> {
        let node = &self.nodes[i];
        let task_dir = self.task_dir(i);
        let spec = &node.spec;

        // Params: the pipeline's (propagated), then what the pipeline task
        // gives, then the task's declared ones (given, else default).
        let mut params = self.params.clone();
        for (k, v) in given {
            params.insert(k.clone(), v.clone());
        }
        for ps in &spec.params {
            let v = match given.get(&ps.name) {
                Some(v) => v.clone(),
                None => match &ps.default {
                    Some(d) => d.clone(),
                    None => {
                        return Err(format!(
                            "parameter {} has no value: the pipeline task gives none and it has no default",
                            ps.name
                        ))
                    }
                },
            };
            if v.param_type() != ps.param_type() {
                return Err(format!(
                    "parameter {} is declared {} but its value is {}",
                    ps.name,
                    ps.param_type(),
                    v.param_type()
                ));
            }
            params.insert(ps.name.clone(), v);
        }

        // Workspaces: declared by the task and bound (or propagated from
        // the pipeline).
        let pscope = Scope::pipeline(self, facts, facts.dry);
        let mut workspaces = BTreeMap::new();
        let bound_dir = |pws: &str, sub: &str| -> Result<Option<PathBuf>, String> {
            let Some(base) = self.workspaces.get(pws) else {
                return Ok(None);
            };
            let sub = subst_str(&pscope, sub)?;
            if !is_sub_path(&sub) {
                return Err(format!("workspace subPath {sub} leaves the volume"));
            }
            Ok(base.as_ref().map(|b| {
                if sub.is_empty() {
                    b.clone()
                } else {
                    b.join(sub)
                }
            }))
        };
        for d in &spec.workspaces {
            let mount = if d.mount_path.is_empty() {
                format!("/workspace/{}", d.name)
            } else {
                d.mount_path.clone()
            };
            let binding = node.pt.workspaces.iter().find(|b| b.name == d.name);
            let dir = match binding {
                Some(b) => {
                    let pws = if b.workspace.is_empty() {
                        &b.name
                    } else {
                        &b.workspace
                    };
                    bound_dir(pws, &b.sub_path)?
                }
                None => bound_dir(&d.name, "")?,
            };
            if dir.is_none() && !d.optional {
                return Err(format!("workspace {} is not bound", d.name));
            }
            workspaces.insert(d.name.clone(), (dir, mount));
        }
        for b in &node.pt.workspaces {
            if !workspaces.contains_key(&b.name) {
                let pws = if b.workspace.is_empty() {
                    &b.name
                } else {
                    &b.workspace
                };
                let dir = bound_dir(pws, &b.sub_path)?;
                workspaces.insert(b.name.clone(), (dir, format!("/workspace/{}", b.name)));
            }
        }
        for (name, dir) in &self.workspaces {
            workspaces
                .entry(name.clone())
                .or_insert_with(|| (dir.clone(), format!("/workspace/{name}")));
        }

        let step_names: Vec<String> = spec
            .steps
            .iter()
            .enumerate()
            .map(|(j, s)| step_name(s, j))
            .collect();
        let scope = Scope {
            task: Some(i),
            task_params: Some(&params),
            workspaces: Some(&workspaces),
            step_names: &step_names,
            attempt,
            ..Scope::pipeline(self, facts, facts.dry)
        };
        let home = task_dir.join("workspace");
        let mut mounts: Vec<(String, PathBuf)> = workspaces
            .values()
            .filter_map(|(dir, mount)| dir.as_ref().map(|d| (mount.clone(), d.clone())))
            .collect();
        mounts.push(("/workspace".into(), home.clone()));
        mounts.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));

        let mut steps = Vec::new();
        for (j, (step, timeout)) in node.steps.iter().enumerate() {
            let name = step_names[j].clone();
            let at = |e: String| format!("step {name}: {e}");
            let mut env_map: HashMap<String, String> = self.env.iter().cloned().collect();
            let mut env = Vec::new();
            for e in &step.env {
                let v = subst_str(&scope, &e.value).map_err(&at)?;
                let v = k8s_expand(&v, &env_map);
                env_map.insert(e.name.clone(), v.clone());
                env.push((e.name.clone(), v));
            }
            let command = subst_list(&scope, &step.command).map_err(&at)?;
            let args = subst_list(&scope, &step.args).map_err(&at)?;
            let command: Vec<String> = command.iter().map(|c| k8s_expand(c, &env_map)).collect();
            let args: Vec<String> = args.iter().map(|c| k8s_expand(c, &env_map)).collect();
            let script = subst_str(&scope, &step.script).map_err(&at)?;
            let wd = subst_str(&scope, &step.working_dir).map_err(&at)?;
            let working_dir = self.local_dir(&wd, &mounts, &home);
            steps.push(PreparedStep {
                name,
                script: (!step.script.is_empty()).then_some(script),
                command,
                args,
                working_dir,
                env,
                timeout: *timeout,
                continue_on_error: step.on_error == "continue",
            });
        }
        Ok(Prepared {
            task_dir,
            home,
            steps,
            results: spec
                .results
                .iter()
                .map(|r| (r.name.clone(), r.type_.unwrap_or(ParamType::String)))
                .collect(),
        })
    }

    /// Where a step's `workingDir` is on this machine.
    fn local_dir(&self, wd: &str, mounts: &[(String, PathBuf)], home: &Path) -> PathBuf {
        if wd.is_empty() {
            return home.to_path_buf();
        }
        let p = Path::new(wd);
        if p.is_relative() {
            return home.join(p);
        }
        if p.starts_with(&self.dir) {
            return p.to_path_buf();
        }
        for (mount, dir) in mounts {
            if let Ok(rest) = p.strip_prefix(mount) {
                return dir.join(rest);
            }
        }
        p.to_path_buf()
    }
}

/// A cycle among the tasks, as `a -> b -> a`.
fn find_cycle(nodes: &[Node]) -> Option<String> {
    // 0: unvisited, 1: on the path, 2: done.
    fn visit(i: usize, nodes: &[Node], mark: &mut [u8], path: &mut Vec<usize>) -> Option<String> {
        mark[i] = 1;
        path.push(i);
        for d in nodes[i].deps() {
            if mark[d] == 1 {
                let start = path.iter().position(|&x| x == d).unwrap_or(0);
                let mut names: Vec<&str> = path[start..]
                    .iter()
                    .map(|&x| nodes[x].pt.name.as_str())
                    .collect();
                names.push(&nodes[d].pt.name);
                return Some(names.join(" -> "));
            }
            if mark[d] == 0 {
                if let Some(c) = visit(d, nodes, mark, path) {
                    return Some(c);
                }
            }
        }
        path.pop();
        mark[i] = 2;
        None
    }
    let mut mark = vec![0u8; nodes.len()];
    for i in 0..nodes.len() {
        if mark[i] == 0 {
            if let Some(c) = visit(i, nodes, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

struct PipelineLevel {
    params: BTreeMap<String, ParamValue>,
    /// Why the `when` expressions do not hold, if they do not.
    skip: Option<String>,
}

/// A task's attempt, ready to run.
struct Prepared {
    task_dir: PathBuf,
    home: PathBuf,
    steps: Vec<PreparedStep>,
    results: Vec<(String, ParamType)>,
}

struct PreparedStep {
    name: String,
    script: Option<String>,
    command: Vec<String>,
    args: Vec<String>,
    working_dir: PathBuf,
    env: Vec<(String, String)>,
    timeout: Option<Duration>,
    continue_on_error: bool,
}

/// What the tasks that ended left (or, `dry`, placeholders).
#[derive(Clone)]
struct Facts {
    dry: bool,
    ends: Vec<Option<TaskEnd>>,
}

impl Facts {
    fn dry(n: usize) -> Facts {
        Facts {
            dry: true,
            ends: vec![None; n],
        }
    }
}

/// The variables one place sees: the pipeline's, and a task's.
struct Scope<'a> {
    plan: &'a Plan,
    facts: &'a Facts,
    dry: bool,
    task: Option<usize>,
    task_params: Option<&'a BTreeMap<String, ParamValue>>,
    workspaces: Option<&'a BTreeMap<String, (Option<PathBuf>, String)>>,
    step_names: &'a [String],
    attempt: u32,
}

impl<'a> Scope<'a> {
    fn pipeline(plan: &'a Plan, facts: &'a Facts, dry: bool) -> Scope<'a> {
        Scope {
            plan,
            facts,
            dry,
            task: None,
            task_params: None,
            workspaces: None,
            step_names: &[],
            attempt: 0,
        }
    }

    fn in_finally(&self) -> bool {
        self.task.is_some_and(|i| self.plan.nodes[i].finally)
    }
}

impl Resolve for Scope<'_> {
    fn placeholders(&self) -> bool {
        self.dry
    }

    fn resolve(&self, var: &Var) -> Result<ParamValue, String> {
        let plan = self.plan;
        let s = |v: String| Ok(ParamValue::String(v));
        match var {
            Var::Param(name, _) => self
                .task_params
                .and_then(|p| p.get(name))
                .or_else(|| plan.params.get(name))
                .cloned()
                .ok_or_else(|| format!("there is no parameter {name}")),
            Var::TaskResult(task, result, _) => {
                let j = *plan
                    .index
                    .get(task)
                    .ok_or_else(|| format!("there is no task {task}"))?;
                if self.dry {
                    let ty = plan.nodes[j]
                        .spec
                        .results
                        .iter()
                        .find(|r| &r.name == result)
                        .and_then(|r| r.type_)
                        .unwrap_or(ParamType::String);
                    return Ok(match ty {
                        ParamType::String => ParamValue::String(String::new()),
                        ParamType::Array => ParamValue::Array(vec![String::new()]),
                        ParamType::Object => ParamValue::Object(BTreeMap::new()),
                    });
                }
                self.facts.ends[j]
                    .as_ref()
                    .and_then(|e| e.results.get(result))
                    .cloned()
                    .ok_or_else(|| format!("task {task} gave no result {result}"))
            }
            Var::TaskStatus(task) | Var::TaskReason(task) => {
                if !self.in_finally() {
                    return Err("only finally tasks can use a task's status".into());
                }
                let j = *plan
                    .index
                    .get(task)
                    .ok_or_else(|| format!("there is no task {task}"))?;
                let end = self.facts.ends[j].as_ref();
                if matches!(var, Var::TaskReason(_)) {
                    return s(end.map(|e| e.reason.clone()).unwrap_or_default());
                }
                s(match end.map(|e| &e.state) {
                    Some(State::Succeeded) => "Succeeded",
                    Some(State::Failed) | Some(State::Cancelled) => "Failed",
                    _ => "None",
                }
                .into())
            }
            Var::TasksStatus => {
                if !self.in_finally() {
                    return Err("only finally tasks can use the tasks' status".into());
                }
                let dag = plan.nodes.iter().enumerate().filter(|(_, n)| !n.finally);
                let states: Vec<Option<&State>> = dag
                    .map(|(j, _)| self.facts.ends[j].as_ref().map(|e| &e.state))
                    .collect();
                let status = if states
                    .iter()
                    .any(|s| matches!(s, Some(State::Failed) | Some(State::Cancelled)))
                {
                    "Failed"
                } else if states.iter().all(|s| matches!(s, Some(State::Succeeded))) {
                    "Succeeded"
                } else if states.iter().all(|s| s.is_some()) {
                    "Completed"
                } else {
                    "None"
                };
                s(status.into())
            }
            Var::Result(name) => {
                let i = self
                    .task
                    .filter(|_| self.workspaces.is_some())
                    .ok_or("results are only in a task's steps")?;
                if !plan.nodes[i].spec.results.iter().any(|r| &r.name == name) {
                    return Err(format!("the task declares no result {name}"));
                }
                s(path_string(&plan.task_dir(i).join("results").join(name)))
            }
            Var::Workspace(name, attr) => {
                let Some(ws) = self.workspaces else {
                    // In a pipeline task's params and when expressions.
                    let bound = plan
                        .workspaces
                        .get(name)
                        .ok_or_else(|| format!("the pipeline declares no workspace {name}"))?;
                    return match attr.as_str() {
                        "bound" => s(bound.is_some().to_string()),
                        _ => Err(format!(
                            "workspaces.{name}.{attr} is only in a task's steps"
                        )),
                    };
                };
                let (dir, _) = ws
                    .get(name)
                    .ok_or_else(|| format!("there is no workspace {name}"))?;
                match attr.as_str() {
                    "path" => s(dir.as_deref().map(path_string).unwrap_or_default()),
                    "bound" => s(dir.is_some().to_string()),
                    "claim" => s(String::new()),
                    "volume" => s(if dir.is_some() {
                        name.clone()
                    } else {
                        String::new()
                    }),
                    _ => Err(format!("workspaces have no {attr}")),
                }
            }
            Var::StepExitCode(step) => {
                let i = self
                    .task
                    .filter(|_| self.workspaces.is_some())
                    .ok_or("steps are only in a task")?;
                let name = step
                    .strip_prefix("step-")
                    .filter(|n| self.step_names.iter().any(|s| s == n));
                let name = match name {
                    Some(n) => n,
                    None if self.step_names.iter().any(|s| s == step) => step.as_str(),
                    None => return Err(format!("the task has no step {step}")),
                };
                s(path_string(
                    &plan.task_dir(i).join("steps").join(name).join("exitCode"),
                ))
            }
            Var::Context(what) => {
                let task = self.task.map(|i| &plan.nodes[i]);
                let run_name = self.task.map(|i| plan.task_run_name(i));
                let in_task = self.workspaces.is_some();
                let v = match (what.as_str(), task, run_name) {
                    ("pipelineRun.name", _, _) | ("pipeline.name", _, _) => plan.name.clone(),
                    ("pipelineRun.namespace", _, _) => plan.namespace.clone(),
                    ("pipelineRun.uid", _, _) => plan.uid.clone(),
                    ("pipelineTask.retries", Some(t), _) => t.pt.retries.to_string(),
                    ("taskRun.name", Some(_), Some(r)) | ("task.name", Some(_), Some(r))
                        if in_task =>
                    {
                        r
                    }
                    ("taskRun.namespace", Some(_), _) if in_task => plan.namespace.clone(),
                    ("taskRun.uid", Some(_), Some(r)) if in_task => {
                        if plan.uid.is_empty() {
                            String::new()
                        } else {
                            format!("{}-{r}", plan.uid)
                        }
                    }
                    ("task.retry-count", Some(_), _) if in_task => self.attempt.to_string(),
                    _ => return Err(format!("context.{what} is not known here")),
                };
                s(v)
            }
        }
    }
}

fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------
// Running

/// What became of a task.
#[derive(Debug, Clone, PartialEq)]
enum State {
    Succeeded,
    Failed,
    /// `when`: skipped because its `when` expressions did not hold.
    Skipped {
        when: bool,
    },
    Cancelled,
}

#[derive(Debug, Clone)]
struct TaskEnd {
    state: State,
    reason: String,
    message: String,
    results: BTreeMap<String, ParamValue>,
    attempts: u32,
    /// `onError: continue` on the pipeline task: a failure does not count.
    ignored: bool,
    /// It was stopped by `timeouts.pipeline`.
    pipeline_timeout: bool,
}

impl TaskEnd {
    fn skipped(reason: &str, message: String, when: bool) -> TaskEnd {
        TaskEnd {
            state: State::Skipped { when },
            reason: reason.into(),
            message,
            results: BTreeMap::new(),
            attempts: 0,
            ignored: false,
            pipeline_timeout: false,
        }
    }

    fn failed(reason: &str, message: String) -> TaskEnd {
        TaskEnd {
            state: State::Failed,
            reason: reason.into(),
            message,
            results: BTreeMap::new(),
            attempts: 0,
            ignored: false,
            pipeline_timeout: false,
        }
    }
}

/// What the scheduler hears.
enum Event {
    Done(usize, Box<TaskEnd>),
    Signal(i32),
}

/// What a step's waiter hears.
enum StepEvent {
    Exited,
    Abort,
}

/// The running steps, so an abort reaches them.
#[derive(Default)]
struct Registry {
    aborted: bool,
    next: u64,
    steps: HashMap<u64, Sender<StepEvent>>,
}

/// A time by which something must end.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    kind: DeadlineKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum DeadlineKind {
    Step(Duration),
    Task(Duration),
    Tasks(Duration),
    Finally(Duration),
    Pipeline(Duration),
}

impl Deadline {
    fn after(
        start: Instant,
        d: Option<Duration>,
        kind: fn(Duration) -> DeadlineKind,
    ) -> Option<Deadline> {
        let d = d?;
        Some(Deadline {
            at: start.checked_add(d)?,
            kind: kind(d),
        })
    }
}

fn earliest(deadlines: &[Deadline]) -> Option<Deadline> {
    deadlines.iter().copied().min_by_key(|d| d.at)
}

struct Scheduler {
    plan: Arc<Plan>,
    registry: Arc<Mutex<Registry>>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    ends: Vec<Option<TaskEnd>>,
    /// The tasks running.
    in_flight: BTreeSet<usize>,
    aborted: bool,
    started: Instant,
}

impl Scheduler {
    fn new(plan: Arc<Plan>, tx: Sender<Event>, rx: Receiver<Event>) -> Scheduler {
        let n = plan.nodes.len();
        Scheduler {
            plan,
            registry: Arc::default(),
            tx,
            rx,
            ends: vec![None; n],
            in_flight: BTreeSet::new(),
            aborted: false,
            started: Instant::now(),
        }
    }

    fn facts(&self) -> Facts {
        Facts {
            dry: false,
            ends: self.ends.clone(),
        }
    }

    fn end(&mut self, i: usize, end: TaskEnd) {
        let name = &self.plan.nodes[i].pt.name;
        match &end.state {
            State::Skipped { .. } => note(&format!(
                "task {name}: skipped: {} ({})",
                end.reason, end.message
            )),
            State::Succeeded => note(&format!("task {name}: succeeded")),
            State::Failed if end.ignored => note(&format!(
                "task {name}: failed (onError: continue): {}",
                end.message
            )),
            State::Failed => note(&format!("task {name}: failed: {}", end.message)),
            State::Cancelled => note(&format!("task {name}: cancelled: {}", end.message)),
        }
        self.ends[i] = Some(end);
    }

    fn run(mut self) -> RunStatus {
        let plan = self.plan.clone();
        let dag: Vec<usize> = (0..plan.nodes.len())
            .filter(|&i| !plan.nodes[i].finally)
            .collect();
        let fin: Vec<usize> = (0..plan.nodes.len())
            .filter(|&i| plan.nodes[i].finally)
            .collect();
        let pipeline_deadline =
            Deadline::after(self.started, plan.timeouts.pipeline, DeadlineKind::Pipeline);
        let tasks_deadline =
            Deadline::after(self.started, plan.timeouts.tasks, DeadlineKind::Tasks);
        let phase: Vec<Deadline> = [tasks_deadline, pipeline_deadline]
            .into_iter()
            .flatten()
            .collect();
        let mut timed_out = self.phase(&dag, &phase);
        // A signal that came as the tasks ended.
        while let Ok(event) = self.rx.try_recv() {
            self.handle(event, &mut false, &mut false);
        }
        if !self.aborted && !timed_out && !fin.is_empty() {
            note("running the finally tasks");
            let finally_deadline =
                Deadline::after(Instant::now(), plan.timeouts.finally, DeadlineKind::Finally);
            let phase: Vec<Deadline> = [finally_deadline, pipeline_deadline]
                .into_iter()
                .flatten()
                .collect();
            timed_out = self.phase(&fin, &phase);
        }
        for &i in &fin {
            if self.ends[i].is_none() {
                let (reason, message) = if self.aborted {
                    ("PipelineRunCancelled", "the run was aborted")
                } else {
                    ("PipelineRunTimeout", "timeouts.pipeline passed")
                };
                self.ends[i] = Some(TaskEnd::skipped(reason, message.into(), false));
            }
        }
        self.finish(timed_out)
    }

    /// Runs `tasks` (a phase: the tasks, or the finally tasks) to their end;
    /// whether `timeouts.pipeline` passed.
    fn phase(&mut self, tasks: &[usize], deadlines: &[Deadline]) -> bool {
        let plan = self.plan.clone();
        let mut stopping = false;
        let mut pipeline_timeout = false;
        loop {
            // What happened meanwhile (an abort before a phase starts).
            while let Ok(event) = self.rx.try_recv() {
                self.handle(event, &mut stopping, &mut pipeline_timeout);
            }
            // Start (or skip) what can start, until nothing changes.
            let mut changed = true;
            while changed {
                changed = false;
                if stopping || self.aborted {
                    break;
                }
                for &i in tasks {
                    if self.ends[i].is_some() || self.in_flight.contains(&i) {
                        continue;
                    }
                    let node = &plan.nodes[i];
                    if !node.deps().iter().all(|&d| self.ends[d].is_some()) {
                        continue;
                    }
                    if let Some(d) = deadlines.iter().find(|d| Instant::now() >= d.at) {
                        if matches!(d.kind, DeadlineKind::Pipeline(_)) {
                            pipeline_timeout = true;
                        }
                        stopping = true;
                        break;
                    }
                    match self.decide(i) {
                        Decision::End(end) => {
                            let fails = end.state == State::Failed && !end.ignored;
                            self.end(i, end);
                            changed = true;
                            if fails {
                                stopping = true;
                                break;
                            }
                        }
                        Decision::Start(params) => {
                            if self.in_flight.len() >= plan.max_parallel {
                                continue;
                            }
                            self.start(i, params, deadlines);
                            changed = true;
                        }
                    }
                }
            }
            if stopping || self.aborted {
                let (reason, message) = if self.aborted {
                    ("PipelineRunCancelled", "the run was aborted")
                } else if pipeline_timeout {
                    ("PipelineRunTimeout", "timeouts.pipeline passed")
                } else if deadlines.iter().any(|d| Instant::now() >= d.at) {
                    ("PipelineRunTimeout", "the phase's timeout passed")
                } else {
                    ("PipelineRunStopping", "a task failed")
                };
                for &i in tasks {
                    if self.ends[i].is_none() && !self.in_flight.contains(&i) {
                        self.end(i, TaskEnd::skipped(reason, message.into(), false));
                    }
                }
            }
            if self.in_flight.is_empty() {
                // Everything has ended (or, which a checked plan rules out,
                // nothing can start).
                for &i in tasks {
                    if self.ends[i].is_none() {
                        let why = "it could not be scheduled".to_string();
                        self.end(i, TaskEnd::skipped("PipelineRunStopping", why, false));
                    }
                }
                return pipeline_timeout;
            }
            match self.rx.recv() {
                Ok(event) => self.handle(event, &mut stopping, &mut pipeline_timeout),
                Err(_) => return pipeline_timeout,
            }
        }
    }

    /// Takes in a task's end or a signal.
    fn handle(&mut self, event: Event, stopping: &mut bool, pipeline_timeout: &mut bool) {
        match event {
            Event::Done(i, end) => {
                self.in_flight.remove(&i);
                let end = *end;
                if end.pipeline_timeout {
                    *pipeline_timeout = true;
                    *stopping = true;
                }
                if matches!(end.state, State::Failed) && !end.ignored {
                    *stopping = true;
                }
                self.end(i, end);
            }
            Event::Signal(sig) => {
                if !self.aborted {
                    note(&format!(
                        "received {}: stopping the running steps, starting nothing more",
                        if sig == SIGINT { "SIGINT" } else { "SIGTERM" }
                    ));
                }
                self.abort();
            }
        }
    }
}

/// What the scheduler does with a task whose turn has come.
enum Decision {
    End(TaskEnd),
    /// Start it with these params (the pipeline task's, substituted).
    Start(BTreeMap<String, ParamValue>),
}

impl Scheduler {
    fn decide(&self, i: usize) -> Decision {
        let plan = &self.plan;
        let node = &plan.nodes[i];
        let state = |j: usize| self.ends[j].as_ref().map(|e| &e.state);
        let name = |j: usize| plan.nodes[j].pt.name.as_str();
        if !node.finally {
            for d in node.deps() {
                if let Some(State::Skipped { when: false }) = state(d) {
                    return Decision::End(TaskEnd::skipped(
                        "Parent Tasks were skipped",
                        format!("task {} was skipped", name(d)),
                        false,
                    ));
                }
            }
        }
        for (j, r) in &node.result_refs {
            let end = self.ends[*j].as_ref();
            match end.map(|e| (&e.state, e.results.contains_key(r))) {
                Some((State::Succeeded, true)) => {}
                Some((State::Succeeded, false)) if !node.finally => {
                    return Decision::End(TaskEnd::failed(
                        "InvalidTaskResultReference",
                        format!("task {} gave no result {r}", name(*j)),
                    ))
                }
                _ => {
                    return Decision::End(TaskEnd::skipped(
                        "Results were missing",
                        format!("result {r} of task {} is missing", name(*j)),
                        false,
                    ))
                }
            }
        }
        match plan.pipeline_level(i, &self.facts()) {
            Err(e) => Decision::End(TaskEnd::failed("InvalidParamValue", e)),
            Ok(PipelineLevel {
                skip: Some(why), ..
            }) => Decision::End(TaskEnd::skipped(
                "When Expressions evaluated to false",
                why,
                true,
            )),
            Ok(PipelineLevel { params, .. }) => Decision::Start(params),
        }
    }

    fn start(&mut self, i: usize, params: BTreeMap<String, ParamValue>, deadlines: &[Deadline]) {
        let plan = self.plan.clone();
        let facts = self.facts();
        let registry = self.registry.clone();
        let tx = self.tx.clone();
        let deadlines = deadlines.to_vec();
        let node = &plan.nodes[i];
        note(&format!("task {}: started", node.pt.name));
        for sidecar in &node.spec.sidecars {
            note(&format!(
                "task {}: sidecar {} is not run on a local cluster",
                node.pt.name, sidecar.name
            ));
        }
        self.in_flight.insert(i);
        thread::spawn(move || {
            let end = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_task(&plan, i, &facts, &params, &registry, &deadlines)
            }))
            .unwrap_or_else(|_| {
                TaskEnd::failed("Failed", "the runner failed (a bug in bosun)".into())
            });
            let _ = tx.send(Event::Done(i, Box::new(end)));
        });
    }

    /// Stops the running steps; nothing more starts.
    fn abort(&mut self) {
        self.aborted = true;
        let mut reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        reg.aborted = true;
        for tx in reg.steps.values() {
            let _ = tx.send(StepEvent::Abort);
        }
    }

    fn finish(&mut self, mut timed_out: bool) -> RunStatus {
        let plan = self.plan.clone();
        if let Some(d) = plan.timeouts.pipeline {
            timed_out |= !self.aborted && self.started.elapsed() >= d;
        }
        let (mut completed, mut failed, mut cancelled, mut skipped) = (0, 0, 0, 0);
        let mut tasks = Vec::new();
        for (i, node) in plan.nodes.iter().enumerate() {
            let end = self.ends[i].clone();
            let status = match end.as_ref().map(|e| &e.state) {
                Some(State::Succeeded) => {
                    completed += 1;
                    "Succeeded"
                }
                Some(State::Failed) => {
                    completed += 1;
                    if !end.as_ref().is_some_and(|e| e.ignored) {
                        failed += 1;
                    }
                    "Failed"
                }
                Some(State::Cancelled) => {
                    cancelled += 1;
                    "Cancelled"
                }
                Some(State::Skipped { .. }) => {
                    skipped += 1;
                    "Skipped"
                }
                None => "NotRun",
            };
            let end = end.unwrap_or_else(|| TaskEnd::skipped("", String::new(), false));
            tasks.push(TaskStatus {
                name: node.pt.name.clone(),
                finally: node.finally,
                status: status.into(),
                reason: end.reason,
                message: end.message,
                attempts: end.attempts,
                results: end.results,
            });
        }
        let mut message =
            format!("Tasks Completed: {completed} (Failed: {failed}, Cancelled {cancelled}), Skipped: {skipped}");
        let (code, reason) = if self.aborted {
            (ABORTED, "Cancelled")
        } else if timed_out {
            let d = plan.timeouts.pipeline.map(go_duration).unwrap_or_default();
            message = format!(
                "PipelineRun {} failed to finish within {d}; {message}",
                plan.name
            );
            (FAILED, "PipelineRunTimeout")
        } else if failed > 0 {
            (FAILED, "Failed")
        } else if skipped > 0 {
            (SUCCEEDED, "Completed")
        } else {
            (SUCCEEDED, "Succeeded")
        };
        let mut results = BTreeMap::new();
        if !self.aborted {
            let facts = self.facts();
            let scope = Scope::pipeline(&plan, &facts, false);
            for r in &plan.pipeline.results {
                match subst_value(&scope, &r.value) {
                    Ok(v) => {
                        note(&format!("pipeline result {}: {v}", r.name));
                        results.insert(r.name.clone(), v);
                    }
                    Err(e) => note(&format!("pipeline result {} is not available: {e}", r.name)),
                }
            }
        }
        note(&format!("PipelineRun {reason}: {message}"));
        RunStatus {
            code,
            reason: reason.into(),
            message,
            tasks,
            results,
        }
    }
}

/// How a task's steps ended.
enum StepsEnd {
    Succeeded,
    Failed {
        reason: &'static str,
        message: String,
        retryable: bool,
        pipeline_timeout: bool,
    },
    Aborted,
}

/// How one step ended.
enum StepOutcome {
    Exited(i32),
    NotStarted(String),
    TimedOut(DeadlineKind),
    Aborted,
}

fn aborted(registry: &Mutex<Registry>) -> bool {
    registry.lock().unwrap_or_else(|p| p.into_inner()).aborted
}

/// Runs task `i` (its attempts) and says how it ended.
fn run_task(
    plan: &Plan,
    i: usize,
    facts: &Facts,
    params: &BTreeMap<String, ParamValue>,
    registry: &Mutex<Registry>,
    deadlines: &[Deadline],
) -> TaskEnd {
    let node = &plan.nodes[i];
    let name = &node.pt.name;
    let ignored = node.pt.on_error == "continue";
    let mut attempt = 0;
    loop {
        let attempts = attempt + 1;
        let ended = |state: State, reason: &str, message: String| TaskEnd {
            state,
            reason: reason.into(),
            message,
            results: BTreeMap::new(),
            attempts,
            ignored,
            pipeline_timeout: false,
        };
        let prepared = match plan.prepare(i, facts, params, attempt) {
            Ok(p) => p,
            Err(e) => return ended(State::Failed, "Failed", e),
        };
        if let Err(e) = lay_out(&prepared) {
            return ended(State::Failed, "Failed", e);
        }
        let mut dl = deadlines.to_vec();
        dl.extend(Deadline::after(
            Instant::now(),
            node.timeout,
            DeadlineKind::Task,
        ));
        match run_steps(plan, name, &prepared, registry, &dl) {
            StepsEnd::Succeeded => {
                return match read_results(&prepared) {
                    Ok(results) => TaskEnd {
                        results,
                        ..ended(
                            State::Succeeded,
                            "Succeeded",
                            "All Steps have completed executing".into(),
                        )
                    },
                    Err(e) => ended(State::Failed, "TaskRunResultsVerificationFailed", e),
                };
            }
            StepsEnd::Aborted => {
                return ended(
                    State::Cancelled,
                    "TaskRunCancelled",
                    "the run was aborted".into(),
                )
            }
            StepsEnd::Failed {
                reason,
                message,
                retryable,
                pipeline_timeout,
            } => {
                if retryable && attempt < node.pt.retries && !aborted(registry) {
                    note(&format!(
                        "task {name}: attempt {attempts} failed ({message}); trying again ({} of {})",
                        attempt + 1,
                        node.pt.retries
                    ));
                    attempt += 1;
                    continue;
                }
                return TaskEnd {
                    pipeline_timeout,
                    ..ended(State::Failed, reason, message)
                };
            }
        }
    }
}

/// Creates a task's directories for an attempt: its results start empty.
fn lay_out(p: &Prepared) -> Result<(), String> {
    let results = p.task_dir.join("results");
    match fs::remove_dir_all(&results) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot clear {}: {e}", results.display())),
    }
    let mut dirs = vec![results, p.home.clone(), p.task_dir.join("scripts")];
    dirs.extend(
        p.steps
            .iter()
            .map(|s| p.task_dir.join("steps").join(&s.name)),
    );
    for d in dirs {
        fs::create_dir_all(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    Ok(())
}

/// The results the task's steps wrote.
fn read_results(p: &Prepared) -> Result<BTreeMap<String, ParamValue>, String> {
    let mut out = BTreeMap::new();
    for (name, ty) in &p.results {
        let path = p.task_dir.join("results").join(name);
        let text = match fs::read(&path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read result {name}: {e}")),
        };
        let value = match ty {
            ParamType::String => ParamValue::String(text),
            _ => {
                let json: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("result {name} is not a JSON {ty}: {e}"))?;
                let v = ParamValue::from_json(&json).map_err(|e| format!("result {name}: {e}"))?;
                if v.param_type() != *ty {
                    return Err(format!(
                        "result {name} is declared {ty} but is {}",
                        v.param_type()
                    ));
                }
                v
            }
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

/// Runs a task's steps in order.
fn run_steps(
    plan: &Plan,
    task: &str,
    p: &Prepared,
    registry: &Mutex<Registry>,
    deadlines: &[Deadline],
) -> StepsEnd {
    let fail = |message: String| StepsEnd::Failed {
        reason: "Failed",
        message,
        retryable: true,
        pipeline_timeout: false,
    };
    for (j, step) in p.steps.iter().enumerate() {
        let label = format!("{task}/{}", step.name);
        let mut dl = deadlines.to_vec();
        dl.extend(Deadline::after(
            Instant::now(),
            step.timeout,
            DeadlineKind::Step,
        ));
        let outcome = match step_argv(p, j, step) {
            Ok(argv) => run_step(plan, &label, &argv, step, registry, &dl),
            Err(e) => StepOutcome::NotStarted(e),
        };
        let exit_file = p.task_dir.join("steps").join(&step.name).join("exitCode");
        let code = match &outcome {
            StepOutcome::Exited(c) => Some(*c),
            StepOutcome::NotStarted(_) => Some(127),
            _ => None,
        };
        if let Some(c) = code {
            let _ = fs::write(&exit_file, c.to_string());
        }
        let failure = match outcome {
            StepOutcome::Exited(0) => continue,
            StepOutcome::Exited(c) => format!("step {} exited with code {c}", step.name),
            StepOutcome::NotStarted(e) => format!("step {} could not start: {e}", step.name),
            StepOutcome::Aborted => return StepsEnd::Aborted,
            StepOutcome::TimedOut(DeadlineKind::Step(d)) => {
                format!("step {} timed out after {}", step.name, go_duration(d))
            }
            StepOutcome::TimedOut(kind) => {
                let (reason, message, retryable, pipeline_timeout) = match kind {
                    DeadlineKind::Task(d) => (
                        "TaskRunTimeout",
                        format!("task {task} failed to finish within {}", go_duration(d)),
                        true,
                        false,
                    ),
                    DeadlineKind::Tasks(d) => (
                        "TaskRunTimeout",
                        format!("timeouts.tasks ({}) passed", go_duration(d)),
                        false,
                        false,
                    ),
                    DeadlineKind::Finally(d) => (
                        "TaskRunTimeout",
                        format!("timeouts.finally ({}) passed", go_duration(d)),
                        false,
                        false,
                    ),
                    DeadlineKind::Pipeline(d) | DeadlineKind::Step(d) => (
                        "PipelineRunTimeout",
                        format!("timeouts.pipeline ({}) passed", go_duration(d)),
                        false,
                        true,
                    ),
                };
                note(&format!("step {label}: stopped: {message}"));
                return StepsEnd::Failed {
                    reason,
                    message,
                    retryable,
                    pipeline_timeout,
                };
            }
        };
        if step.continue_on_error {
            note(&format!("step {label}: {failure} (onError: continue)"));
            continue;
        }
        note(&format!("step {label}: {failure}"));
        let skipped = p.steps.len() - j - 1;
        if skipped > 0 {
            note(&format!(
                "task {task}: the {skipped} steps after {} are skipped",
                step.name
            ));
        }
        return fail(failure);
    }
    StepsEnd::Succeeded
}

/// The program and arguments of step `j`; a script is written to its file.
fn step_argv(p: &Prepared, j: usize, step: &PreparedStep) -> Result<Vec<String>, String> {
    let Some(script) = &step.script else {
        let mut argv = step.command.clone();
        argv.extend(step.args.iter().cloned());
        return Ok(argv);
    };
    let path = p
        .task_dir
        .join("scripts")
        .join(format!("{j}-{}", step.name));
    let (content, mut argv) = match script.strip_prefix("#!") {
        Some(rest) => {
            let line = rest.lines().next().unwrap_or("").trim();
            let (interp, arg) = match line.split_once([' ', '\t']) {
                Some((i, a)) => (i, a.trim()),
                None => (line, ""),
            };
            if interp.is_empty() {
                return Err("the script's #! line names no interpreter".into());
            }
            let mut argv = vec![interp.to_string()];
            if !arg.is_empty() {
                argv.push(arg.to_string());
            }
            (script.clone(), argv)
        }
        // Tekton's preamble for a script without `#!`.
        None => (
            format!("#!/bin/sh\nset -e\n{script}"),
            vec!["/bin/sh".to_string()],
        ),
    };
    fs::write(&path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    argv.push(path_string(&path));
    argv.extend(step.args.iter().cloned());
    Ok(argv)
}

/// Runs one step's process to its end, its output in the log.
fn run_step(
    plan: &Plan,
    label: &str,
    argv: &[String],
    step: &PreparedStep,
    registry: &Mutex<Registry>,
    deadlines: &[Deadline],
) -> StepOutcome {
    let Some((program, args)) = argv.split_first() else {
        return StepOutcome::NotStarted("no command to run".into());
    };
    if !step.working_dir.exists() {
        if step.working_dir.starts_with(&plan.dir) {
            if let Err(e) = fs::create_dir_all(&step.working_dir) {
                return StepOutcome::NotStarted(format!(
                    "cannot create working directory {}: {e}",
                    step.working_dir.display()
                ));
            }
        } else {
            return StepOutcome::NotStarted(format!(
                "working directory {} does not exist",
                step.working_dir.display()
            ));
        }
    }
    let (reader, writer) = match io::pipe() {
        Ok(p) => p,
        Err(e) => return StepOutcome::NotStarted(format!("cannot make a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return StepOutcome::NotStarted(format!("cannot make a pipe: {e}")),
    };
    let (tx, rx) = mpsc::channel();
    let mut reg = registry.lock().unwrap_or_else(|p| p.into_inner());
    if reg.aborted {
        return StepOutcome::Aborted;
    }
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .envs(step.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&step.working_dir)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    let parent = getpid();
    // SAFETY: the closure makes two system calls and builds an error from a
    // constant, all async-signal-safe, as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // The runner may have ended before the line above took effect.
            if getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // `cmd` holds the pipe's writing ends: the copier sees the end of the
    // output only once they are closed.
    drop(cmd);
    let mut child: Child = match spawned {
        Ok(c) => c,
        Err(e) => {
            drop(reg);
            return StepOutcome::NotStarted(spawn_error(program, &e));
        }
    };
    let id = reg.next;
    reg.next += 1;
    reg.steps.insert(id, tx.clone());
    drop(reg);

    let prefix = format!("[{label}] ");
    let (copied_tx, copied_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        copy_prefixed(reader, prefix.as_bytes());
        let _ = copied_tx.send(());
    });
    let group = Pid::from_raw(child.id() as i32).expect("a child's pid is positive");
    // The waiter reports the end without collecting the process, so its pid
    // (the group's id) stays taken until the group has been cleared.
    thread::spawn(move || {
        while let Err(rustix::io::Errno::INTR) = waitid(
            WaitId::Pid(group),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {}
        let _ = tx.send(StepEvent::Exited);
    });

    let deadline = earliest(deadlines);
    let event = match deadline {
        Some(d) => rx
            .recv_timeout(d.at.saturating_duration_since(Instant::now()))
            .map_err(|e| (e, Some(d.kind))),
        None => rx
            .recv()
            .map_err(|_| (RecvTimeoutError::Disconnected, None)),
    };
    let outcome = match event {
        Ok(StepEvent::Exited) | Err((RecvTimeoutError::Disconnected, _)) => None,
        Ok(StepEvent::Abort) => Some(StepOutcome::Aborted),
        Err((RecvTimeoutError::Timeout, kind)) => Some(StepOutcome::TimedOut(
            kind.unwrap_or(DeadlineKind::Pipeline(Duration::ZERO)),
        )),
    };
    if outcome.is_some() {
        terminate(group, plan.grace, &rx);
    }
    // The step has ended (not yet collected): clear what is left of its
    // group, as the end of a container does, then collect it.
    let _ = kill_process_group(group, Signal::KILL);
    let status = child.wait();
    registry
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .steps
        .remove(&id);
    // A process that left the group may still hold the output; the log
    // does not wait for it long.
    let _ = copied_rx.recv_timeout(Duration::from_secs(2));
    if let Some(o) = outcome {
        return o;
    }
    match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            StepOutcome::Exited(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)))
        }
        Err(e) => StepOutcome::NotStarted(format!("cannot collect the process: {e}")),
    }
}

/// SIGTERM to the step's group, then up to `grace` for it to end before
/// SIGKILL; returns once it has ended.
fn terminate(group: Pid, grace: Duration, rx: &Receiver<StepEvent>) {
    let _ = kill_process_group(group, Signal::TERM);
    let until = Instant::now() + grace;
    loop {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(StepEvent::Exited) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(StepEvent::Abort) => continue,
            Err(RecvTimeoutError::Timeout) => break,
        }
    }
    let _ = kill_process_group(group, Signal::KILL);
    loop {
        match rx.recv() {
            Ok(StepEvent::Exited) | Err(_) => return,
            Ok(StepEvent::Abort) => continue,
        }
    }
}

/// Why a program could not start, as a person would say it.
fn spawn_error(program: &str, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::NotFound && !program.contains('/') {
        format!("{program}: command not found")
    } else {
        format!("{program}: {e}")
    }
}

/// Copies a step's output to the log, each line after `prefix`.
fn copy_prefixed(mut reader: io::PipeReader, prefix: &[u8]) {
    const LONGEST: usize = 64 * 1024;
    let mut buf = vec![0u8; LONGEST];
    let mut pending: Vec<u8> = Vec::new();
    let emit = |bytes: &[u8]| {
        let mut out = io::stdout().lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
    };
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        pending.extend_from_slice(&buf[..n]);
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(off) = pending[start..].iter().position(|&b| b == b'\n') {
            lines.extend_from_slice(prefix);
            lines.extend_from_slice(&pending[start..start + off + 1]);
            start += off + 1;
        }
        pending.drain(..start);
        if pending.len() >= LONGEST {
            // A very long line is cut rather than held.
            lines.extend_from_slice(prefix);
            lines.append(&mut pending);
            lines.push(b'\n');
        }
        if !lines.is_empty() {
            emit(&lines);
        }
    }
    if !pending.is_empty() {
        let mut line = prefix.to_vec();
        line.append(&mut pending);
        line.push(b'\n');
        emit(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Resolves parameters from a map; every other variable is an error.
    struct Params(BTreeMap<String, ParamValue>);

    impl Resolve for Params {
        fn resolve(&self, var: &Var) -> Result<ParamValue, String> {
            match var {
                Var::Param(name, _) => self.0.get(name).cloned().ok_or("none".into()),
                _ => Err("not a param".into()),
            }
        }
        fn placeholders(&self) -> bool {
            false
        }
    }

    fn params() -> Params {
        let v: BTreeMap<String, ParamValue> = serde_json::from_value(json!({
            "s": "str", "a": ["x", "y"], "o": {"k": "v"}, "dotted.name": "d"
        }))
        .unwrap();
        Params(v)
    }

    #[test]
    fn variables_are_parsed_as_tekton_writes_them() {
        let cases = [
            ("params.s", Some(Var::Param("s".into(), Suffix::None))),
            (
                "params['dotted.name']",
                Some(Var::Param("dotted.name".into(), Suffix::None)),
            ),
            (
                "params[\"a\"][*]",
                Some(Var::Param("a".into(), Suffix::Star)),
            ),
            (
                "params.a[1]",
                Some(Var::Param("a".into(), Suffix::Index(1))),
            ),
            (
                "params.o.k",
                Some(Var::Param("o".into(), Suffix::Key("k".into()))),
            ),
            (
                "tasks.build.results.sha",
                Some(Var::TaskResult("build".into(), "sha".into(), Suffix::None)),
            ),
            ("tasks.build.status", Some(Var::TaskStatus("build".into()))),
            ("tasks.status", Some(Var::TasksStatus)),
            ("results.sha.path", Some(Var::Result("sha".into()))),
            (
                "workspaces.src.path",
                Some(Var::Workspace("src".into(), "path".into())),
            ),
            (
                "context.pipelineRun.name",
                Some(Var::Context("pipelineRun.name".into())),
            ),
            (
                "steps.step-a.exitCode.path",
                Some(Var::StepExitCode("step-a".into())),
            ),
            ("params", None),
            ("params.a[x]", None),
            ("results.sha", None),
            ("date", None),
            ("HOME", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_var(text), want, "{text}");
        }
    }

    #[test]
    fn substitution_leaves_shell_alone_and_expands_arrays() {
        let p = params();
        assert_eq!(
            subst_str(
                &p,
                "echo $(params.s) $(date +%s) $(echo $(params.s)) $HOME $(params['dotted.name'])"
            )
            .unwrap(),
            "echo str $(date +%s) $(echo str) $HOME d"
        );
        assert_eq!(
            subst_list(
                &p,
                &[
                    "-v".into(),
                    "$(params.a[*])".into(),
                    "$(params.a[0])$(params.o.k)".into()
                ]
            )
            .unwrap(),
            ["-v", "x", "y", "xv"]
        );
        assert!(subst_str(&p, "x $(params.a[*])")
            .unwrap_err()
            .contains("is an array and cannot be used within a string"));
        assert!(subst_str(&p, "$(params.s[0])")
            .unwrap_err()
            .contains("does not take this subscript"));
        assert!(subst_str(&p, "$(params.a[5])")
            .unwrap_err()
            .contains("index 5 is out of range"));
        assert_eq!(
            subst_value(&p, &ParamValue::String("$(params.o[*])".into())).unwrap(),
            p.0["o"]
        );
    }

    #[test]
    fn kubernetes_expansion_takes_known_variables_only() {
        let env: HashMap<String, String> = [("A".to_string(), "1".to_string())].into();
        assert_eq!(
            k8s_expand("$(A)-$(B)-$$(A)-$$-$-$(A", &env),
            "1-$(B)-$(A)-$-$-$(A"
        );
    }

    #[test]
    fn step_templates_merge_as_tekton_merges_them() {
        let tpl: StepTemplate = serde_json::from_value(json!({
            "image": "img", "command": ["sh", "-c"], "args": ["t"], "workingDir": "/w",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
        }))
        .unwrap();
        let step: Step = serde_json::from_value(json!({
            "name": "s", "env": [{"name": "B", "value": "x"}, {"name": "C", "value": "3"}]
        }))
        .unwrap();
        let m = merge_step(&step, Some(&tpl));
        assert_eq!((m.image.as_str(), m.working_dir.as_str()), ("img", "/w"));
        assert_eq!(
            (m.command.clone(), m.args.clone()),
            (vec!["sh".into(), "-c".into()], vec!["t".into()])
        );
        let env: Vec<(&str, &str)> = m
            .env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(env, [("A", "1"), ("B", "x"), ("C", "3")]);
        let own: Step = serde_json::from_value(json!({"command": ["make"]})).unwrap();
        assert!(merge_step(&own, Some(&tpl)).args.is_empty());
    }

    #[test]
    fn check_reports_every_problem() {
        let spec: PipelineRunSpec = serde_json::from_value(json!({
            "pipelineSpec": {
                "tasks": [
                    {"name": "a", "taskRef": {"name": "git-clone"}},
                    {"name": "b", "runAfter": ["zzz"], "taskSpec": {"steps": [{"script": "true"}]}},
                    {"name": "c", "when": [{"cel": "'a' == 'a'"}], "taskSpec": {"steps": [{"script": "true"}]}}
                ]
            }
        }))
        .unwrap();
        let problems = check(&spec);
        let kinds: Vec<(ProblemKind, &str)> = problems
            .iter()
            .map(|p| (p.kind, p.message.as_str()))
            .collect();
        assert_eq!(kinds.len(), 3, "{kinds:?}");
        assert!(kinds[0]
            .1
            .starts_with("task a: taskRef git-clone cannot be resolved"));
        assert_eq!(kinds[0].0, ProblemKind::Refused);
        assert_eq!(
            kinds[1],
            (
                ProblemKind::Invalid,
                "task b: runAfter names zzz, which is not a task"
            )
        );
        assert_eq!(kinds[2].0, ProblemKind::Refused);
        assert!(kinds[2].1.contains("CEL when expression"));
    }
}
