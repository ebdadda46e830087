//! The local pipeline runner: runs a checked plan's tasks and steps as
//! processes (see `bosun_tekton::local` for what runs and what is refused).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions};
use serde_json::Value;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use bosun_job::artifacts::write_atomic;
use bosun_tekton::local::plan::*;
use bosun_tekton::local::variables::*;
use bosun_tekton::local::*;
use bosun_tekton::model::{ParamType, ParamValue};

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
    if let Err(e) = create_dirs(&plan) {
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

/// Creates the plan's workspaces' directories.
fn create_dirs(plan: &Plan) -> Result<(), String> {
    for dir in plan.workspaces.values().flatten() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Running

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
    bosun_base::process::die_with_parent(&mut cmd);
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
    use bosun_tekton::model::{PipelineRunSpec, Step, StepTemplate};
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
