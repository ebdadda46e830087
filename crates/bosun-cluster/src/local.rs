//! The local executor: a run is a process on this machine, started and reaped
//! by the cluster's supervisor (`bosun run-shim`, see [`crate::shim`]), with
//! its working directory `ROOT/RUN_ID/`, its log `ROOT/RUN_ID.log` and its
//! state (pids, then the exit code) in the log's attribute `user.bosun.state`,
//! or `ROOT/RUN_ID.state` on a filesystem without user attributes. Everything
//! needed to find a run again after a daemon restart is in those files.
//!
//! It speaks the executor's vocabulary ([`crate::executor`]) and knows
//! nothing of Kubernetes (`kube`): a local cluster runs one container's
//! command ([`command_of`]), never a pod.

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodSpec;
use rustix::process::{kill_process_group, Pid, Signal};

use crate::executor::{ExecError, Executor, JobProcess, RunStatus, StartDone, Workload};
use crate::shim::{
    self, start_time, Event, Reply, Request, RunAs, StartRequest, LOG_SUFFIX, SOCKET, STATE_SUFFIX,
    STATE_XATTR,
};
use bosun_job::job::{DecoratedJob, OPTIONS_ENV};
use bosun_tekton::local::PipelineOptions;
use bosun_tekton::local::OPTIONS_ENV as PIPELINE_OPTIONS_ENV;

fn io(e: impl std::fmt::Display) -> ExecError {
    ExecError::Refused(format!("local executor: {e}"))
}

/// The local executor of one cluster.
pub struct LocalExecutor {
    root: PathBuf,
    shim: Vec<String>,
    /// Idle connections to the supervisor (requests and replies); several
    /// starts may be in flight at once, each on its own connection.
    conns: Mutex<Vec<BufReader<UnixStream>>>,
    /// The subscribed connection, shut down with the executor.
    events: Mutex<Option<UnixStream>>,
    /// The events thread is reading (cleared when its connection ends).
    subscribed: Arc<std::sync::atomic::AtomicBool>,
    /// Called (from the events thread) when a job ends.
    on_exit: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The user jobs run as (the cluster's `run_as`).
    run_as: Option<RunAs>,
    /// What the supervisor reported of this executor's runs.
    known: Arc<Mutex<Known>>,
}

/// What the supervisor reported of the runs: the pid of each run this
/// executor started, then its exit code. `status` answers from it without
/// reading any file (the controller asks for every pending run on every pass,
/// and a pass follows every job's end); runs it does not hold are read from
/// their files.
///
/// An entry is never wrong: `Running` is recorded only for a start made while
/// an acknowledged subscription was up (and it still is, unchanged: same
/// `generation`), so the job's end is reported on it; when the subscription
/// ends everything is forgotten. Forgetting is always safe (the files
/// answer), except for one race, which `generation` closes: a job that ended
/// (and whose report was already dropped) before its start recorded it
/// `Running`. Every drop of entries bumps `generation`, and a start records
/// nothing if it changed since the start was sent.
#[derive(Default)]
struct Known {
    /// Bumped whenever entries are dropped.
    generation: u64,
    /// The current subscription was acknowledged: every job that ends is
    /// reported.
    trusted: bool,
    runs: HashMap<String, Cached>,
    /// How many entries trigger the next sweep of old exits.
    sweep_at: usize,
    /// Runs whose start is out and whose outcome has not been handed back:
    /// the end of such a run's job is recorded without calling `on_exit`,
    /// since its start's caller reads its status after the outcome (see
    /// [`LocalExecutor::on_exit`]).
    starting: std::collections::HashSet<String>,
}

#[derive(Debug, Clone, Copy)]
enum Cached {
    Running(u32),
    Exited { code: i32, at: Instant },
}

/// Below this many entries, exits are not swept.
const SWEEP_MIN: usize = 4096;
/// How long a reported exit is kept once the map is large (the controller
/// reads it within a pass; later readers use the files).
const EXIT_KEPT: Duration = Duration::from_secs(60);

impl Known {
    fn ended(&mut self, id: String, code: i32) {
        self.runs.insert(
            id,
            Cached::Exited {
                code,
                at: Instant::now(),
            },
        );
        if self.runs.len() >= self.sweep_at.max(SWEEP_MIN) {
            let now = Instant::now();
            self.runs.retain(|_, c| match c {
                Cached::Running(_) => true,
                Cached::Exited { at, .. } => now.duration_since(*at) < EXIT_KEPT,
            });
            self.generation += 1;
            self.sweep_at = self.runs.len() * 2;
        }
    }

    /// The subscription ended: reports may be missing from now on.
    fn forget(&mut self) {
        self.trusted = false;
        self.generation += 1;
        self.runs.clear();
    }
}

impl Drop for LocalExecutor {
    fn drop(&mut self) {
        // The events thread holds a clone of its stream: shut it down so the
        // supervisor sees this daemon leave.
        for s in [self.events.get_mut().ok().and_then(Option::take)]
            .into_iter()
            .flatten()
            .chain(
                self.conns
                    .get_mut()
                    .map(|c| c.drain(..).map(BufReader::into_inner).collect())
                    .unwrap_or_else(|_| Vec::new()),
            )
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The command line of a job's single container, as Kubernetes would run it:
/// `command` then `args` (an image's entrypoint cannot be used locally).
pub fn command_of(spec: &PodSpec) -> Result<Vec<String>, ExecError> {
    let [c] = spec.containers.as_slice() else {
        return Err(ExecError::Unsupported(format!(
            "a local cluster runs exactly one container, this job has {}",
            spec.containers.len()
        )));
    };
    let argv: Vec<String> = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect();
    if argv.first().is_none_or(String::is_empty) {
        return Err(ExecError::Unsupported(
            "a local cluster needs the container's command (the image is not used)".into(),
        ));
    }
    Ok(argv)
}

impl LocalExecutor {
    /// An executor keeping run directories under `root`, supervising runs with
    /// `shim` (the program and its leading arguments, e.g. `["/usr/bin/bosun",
    /// "run-shim"]`).
    pub fn new(root: impl Into<PathBuf>, shim: Vec<String>) -> Self {
        LocalExecutor {
            root: root.into(),
            shim,
            conns: Mutex::default(),
            events: Mutex::default(),
            subscribed: Arc::default(),
            on_exit: None,
            run_as: None,
            known: Arc::default(),
        }
    }

    /// Runs every job as `user` instead of the supervisor's user.
    pub fn run_as(mut self, user: Option<RunAs>) -> Self {
        self.run_as = user;
        self
    }

    /// Calls `f` whenever a run this executor started ends, so its owner can
    /// react at once instead of polling; except for a job that ends while
    /// its start is still under way (its end is in [`status`] by the time
    /// the start returns, for the start's caller to see: a short job often
    /// ends before the supervisor's reply to a batch of starts is read, and
    /// a wake-up then would find the start not done yet).
    ///
    /// [`status`]: LocalExecutor::status
    pub fn on_exit(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_exit = Some(Arc::new(f));
        self
    }

    /// The working directory of a run.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.root.join(run_id)
    }

    /// The log of a run.
    pub fn log_path(&self, run_id: &str) -> PathBuf {
        self.root.join(format!("{run_id}{LOG_SUFFIX}"))
    }

    fn state_path(&self, run_id: &str) -> PathBuf {
        self.root.join(format!("{run_id}{STATE_SUFFIX}"))
    }

    /// Connects to the cluster's supervisor, starting one if none answers.
    fn connect(&self) -> Result<UnixStream, ExecError> {
        let socket = self.root.join(SOCKET);
        if let Ok(s) = UnixStream::connect(&socket) {
            return Ok(s);
        }
        fs::create_dir_all(&self.root).map_err(io)?;
        let (program, lead) = self
            .shim
            .split_first()
            .ok_or_else(|| io("no supervisor command configured"))?;
        let mut command = Command::new(program);
        // The daemon raised its own limit of open files: the supervisor
        // lowers its own back, so that jobs get the usual one.
        if let Some(n) = bosun_base::process::original_open_files_limit() {
            command.env(bosun_base::process::OPEN_FILES_ENV, n.to_string());
        }
        let mut child = command
            .args(lead)
            .arg("--root")
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io)?;
        // It lives on its own; a thread reaps it when it ends.
        std::thread::Builder::new()
            .name("bosun-supervisor-wait".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = child.wait();
            })
            .map_err(io)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match UnixStream::connect(&socket) {
                Ok(s) => return Ok(s),
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    return Err(io(format!(
                        "the supervisor did not answer on {}: {e}",
                        socket.display()
                    )))
                }
            }
        }
    }

    /// Opens the subscribed connection, whose thread records the ends of jobs
    /// in `known` and calls `on_exit`.
    fn subscribe(&self) -> Result<(), ExecError> {
        let notify = self.on_exit.clone();
        let known = self.known.clone();
        let mut events = self.events.locked();
        if self.subscribed.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(()); // another thread subscribed meanwhile
        }
        let mut stream = self.connect()?;
        let mut line = serde_json::to_string(&Request::Subscribe).map_err(io)?;
        line.push('\n');
        stream.write_all(line.as_bytes()).map_err(io)?;
        let reader = stream.try_clone().map_err(io)?;
        let subscribed = self.subscribed.clone();
        subscribed.store(true, std::sync::atomic::Ordering::Release);
        std::thread::Builder::new()
            .name("bosun-run-events".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let lock = || known.locked();
                for line in BufReader::new(reader).lines() {
                    let Ok(line) = line else { break };
                    match serde_json::from_str::<Event>(&line) {
                        Ok(Event::Subscribed) => lock().trusted = true,
                        Ok(Event::Ended { id, code }) => {
                            let mut known = lock();
                            if known.trusted {
                                // A start under way: its caller will see it.
                                let quiet = known.starting.contains(&id);
                                known.ended(id, code);
                                if quiet {
                                    continue;
                                }
                            }
                        }
                        // A supervisor of an earlier version: no details.
                        Ok(Event::Exit(_)) | Err(_) => {}
                    }
                    if let Some(notify) = &notify {
                        notify();
                    }
                }
                // Forgotten before a new subscription can start.
                lock().forget();
                subscribed.store(false, std::sync::atomic::Ordering::Release);
            })
            .map_err(|e| {
                self.subscribed
                    .store(false, std::sync::atomic::Ordering::Release);
                io(e)
            })?;
        if let Some(old) = events.replace(stream) {
            let _ = old.shutdown(std::net::Shutdown::Both);
        }
        Ok(())
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.locked()
    }

    /// Sends requests on one connection, all at once, and reads their
    /// replies in order (the supervisor answers a connection's requests in
    /// turn, and holds its replies while more requests are waiting: a pass's
    /// starts cost one wake-up, not one each). Reconnects once if the
    /// connection broke (a start is idempotent, so repeating one is safe).
    /// Also returns the generation of `known` just before the requests were
    /// sent, if the subscription was acknowledged then.
    fn request_all(&self, reqs: &[Request]) -> Result<(Vec<Reply>, Option<u64>), ExecError> {
        let mut lines = String::new();
        for req in reqs {
            lines.push_str(&serde_json::to_string(req).map_err(io)?);
            lines.push('\n');
        }
        let mut last = None;
        for _ in 0..2 {
            let idle = self.conns.locked().pop();
            let mut c = match idle {
                Some(c) => c,
                None => BufReader::new(self.connect()?),
            };
            if !self.subscribed.load(std::sync::atomic::Ordering::Acquire) {
                self.subscribe()?;
            }
            let generation = {
                let known = self.known();
                known.trusted.then_some(known.generation)
            };
            let mut replies = Vec::with_capacity(reqs.len());
            let mut reply = String::new();
            let mut sent = c.get_mut().write_all(lines.as_bytes());
            while sent.is_ok() && replies.len() < reqs.len() {
                reply.clear();
                match c.read_line(&mut reply) {
                    Ok(0) => sent = Err(std::io::ErrorKind::UnexpectedEof.into()),
                    Ok(_) => replies.push(serde_json::from_str(&reply).map_err(io)?),
                    Err(e) => sent = Err(e),
                }
            }
            match sent {
                Ok(()) => {
                    self.conns.locked().push(c);
                    return Ok((replies, generation));
                }
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    last = Some("the supervisor closed the connection".to_string())
                }
                Err(e) => last = Some(e.to_string()),
            }
            // A broken connection (the supervisor went away): drop every idle
            // one too, they are as dead.
            self.conns.locked().clear();
        }
        Err(io(last.unwrap_or_default()))
    }

    /// Starts a run. Starting a run that was started before does nothing (a
    /// restarted controller may try again).
    pub fn start(&self, run_id: &str, job: &JobProcess) -> Result<(), ExecError> {
        let mut out = self.start_all(&[(run_id, job)]);
        out.pop().unwrap_or_else(|| Err(io("no reply")))
    }

    /// Starts runs, their requests sent to the supervisor together; returns
    /// each one's outcome, in order.
    pub fn start_all(&self, starts: &[(&str, &JobProcess)]) -> Vec<Result<(), ExecError>> {
        let mut out: Vec<Option<Result<(), ExecError>>> = Vec::with_capacity(starts.len());
        let mut reqs = Vec::with_capacity(starts.len());
        let mut sent = Vec::with_capacity(starts.len());
        for (i, (run_id, job)) in starts.iter().enumerate() {
            match self.start_request(run_id, job) {
                Ok(req) => {
                    reqs.push(req);
                    sent.push(i);
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        if !reqs.is_empty() {
            let ids = || sent.iter().map(|&i| starts[i].0);
            self.known().starting.extend(ids().map(str::to_string));
            let replies = self.request_all(&reqs);
            // Before the outcomes are handed back: an end reported from now
            // on calls `on_exit`.
            let mut known = self.known();
            for id in ids() {
                known.starting.remove(id);
            }
            drop(known);
            match replies {
                Ok((replies, generation)) => {
                    for (i, reply) in sent.into_iter().zip(replies) {
                        out[i] = Some(self.started(starts[i].0, reply, generation));
                    }
                }
                Err(e) => {
                    for i in sent {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(io("no reply"))))
            .collect()
    }

    /// The supervisor's request that starts `job` as run `run_id`.
    fn start_request(&self, run_id: &str, job: &JobProcess) -> Result<Request, ExecError> {
        // A pipeline or decorated run starts as one of the supervisor's
        // program's subcommands, given its options (see `subcommand`).
        let wrapped;
        let job = match (&job.pipeline, &job.decoration) {
            (Some(p), _) => {
                let options = PipelineOptions {
                    dir: self.run_dir(run_id),
                    ..(**p).clone()
                };
                wrapped = self.subcommand(job, "run-pipeline", PIPELINE_OPTIONS_ENV, &options)?;
                &wrapped
            }
            (None, _) if job.command.first().is_none_or(String::is_empty) => {
                return Err(ExecError::Unsupported("no command".into()));
            }
            (None, Some(d)) => {
                let options = DecoratedJob {
                    args: job.command.clone(),
                    mirror_root: Some(self.mirrors()?),
                    working_dir: job.working_dir.clone(),
                    ..(**d).clone()
                };
                wrapped = self.subcommand(job, "run-decorated", OPTIONS_ENV, &options)?;
                &wrapped
            }
            (None, None) => job,
        };
        Ok(Request::Start(StartRequest {
            id: run_id.to_string(),
            command: job.command.clone(),
            env: job.env.clone(),
            working_dir: job.working_dir.clone(),
            run_as: self.run_as,
            want_pid: true,
        }))
    }

    /// What the supervisor's `reply` to the start of `run_id` comes to.
    fn started(
        &self,
        run_id: &str,
        reply: Reply,
        generation: Option<u64>,
    ) -> Result<(), ExecError> {
        match (reply, generation) {
            (Reply::Spawned { pid }, Some(generation)) => {
                let mut known = self.known();
                if known.trusted && known.generation == generation {
                    // Its end may have been reported already.
                    known
                        .runs
                        .entry(run_id.to_string())
                        .or_insert(Cached::Running(pid));
                }
                Ok(())
            }
            (Reply::Started | Reply::Exists | Reply::Spawned { .. }, _) => Ok(()),
            (Reply::Error(e), _) => Err(ExecError::Refused(format!("local executor: {e}"))),
        }
    }

    /// How a decorated or pipeline run starts: `bosun SUBCOMMAND` (the
    /// supervisor's program) in the run's directory, with the job's
    /// environment and its `options` as JSON in `options_env`.
    /// `run-decorated` (`bosun_injob::decorated`) clones the refs into
    /// `go/`, runs the test command in the working ref's clone and lays out
    /// Prow's files in `logs/`; `run-pipeline` (`bosun_injob::pipeline::command`)
    /// runs the pipeline's tasks and steps.
    fn subcommand(
        &self,
        job: &JobProcess,
        subcommand: &str,
        options_env: &str,
        options: &impl serde::Serialize,
    ) -> Result<JobProcess, ExecError> {
        let program = self
            .shim
            .first()
            .ok_or_else(|| io("no supervisor command configured"))?;
        let mut env = job.env.clone();
        env.push((
            options_env.to_string(),
            serde_json::to_string(options).map_err(io)?,
        ));
        Ok(JobProcess {
            command: vec![program.clone(), subcommand.into()],
            env,
            working_dir: None,
            decoration: None,
            pipeline: None,
        })
    }

    /// The cluster's clone cache, owned by the user its jobs run as: git
    /// refuses to fetch from a repository another user owns, so with
    /// `run_as` the cache is `.mirrors/uid-UID/`, made for that user (a
    /// changed `run_as` starts a cache of its own).
    fn mirrors(&self) -> Result<PathBuf, ExecError> {
        let base = self.root.join(MIRRORS);
        let Some(user) = self.run_as else {
            return Ok(base);
        };
        let dir = base.join(format!("uid-{}", user.uid));
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(io)?;
            rustix::fs::chown(
                &dir,
                Some(rustix::fs::Uid::from_raw(user.uid)),
                Some(rustix::fs::Gid::from_raw(user.gid)),
            )
            .map_err(io)?;
        }
        Ok(dir)
    }

    /// Where a run stands, from its files (works for runs started under an
    /// earlier daemon: pids are checked against their recorded start times, so
    /// a reused pid is never mistaken for the job or its supervisor).
    pub fn status(&self, run_id: &str) -> RunStatus {
        match self.known().runs.get(run_id) {
            Some(Cached::Running(pid)) => return RunStatus::Running { pid: *pid },
            Some(Cached::Exited { code, .. }) => return RunStatus::Exited { code: *code },
            None => {}
        }
        self.status_from_files(run_id)
    }

    /// Where a run stands, from its files alone.
    fn status_from_files(&self, run_id: &str) -> RunStatus {
        let read = || self.read_state(run_id);
        let Some(state) = read() else {
            // No state yet: a start in progress (the directory was just made),
            // or one that never completed.
            let fresh = fs::metadata(self.run_dir(run_id))
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() < STARTING_GRACE);
            return if fresh {
                RunStatus::Starting
            } else {
                RunStatus::Lost
            };
        };
        if let Some(code) = state.exit {
            return RunStatus::Exited { code };
        }
        let alive =
            |(pid, started): (u32, u64)| start_time(pid) == Some(started) && !is_zombie(pid);
        if alive(state.job) {
            return RunStatus::Running { pid: state.job.0 };
        }
        // The job has ended; while its supervisor lives, the exit code is on
        // its way.
        match read().and_then(|s| s.exit) {
            Some(code) => RunStatus::Exited { code },
            None if alive(state.supervisor) => RunStatus::Ending,
            None => RunStatus::Lost,
        }
    }

    /// A run's state: the log's attribute, or the state file where the
    /// attribute has no exit (a filesystem without user attributes, or an
    /// exit the attribute could not take).
    fn read_state(&self, run_id: &str) -> Option<RunState> {
        let mut buf = [0u8; 256];
        let attribute = rustix::fs::getxattr(self.log_path(run_id), STATE_XATTR, &mut buf[..])
            .ok()
            .and_then(|n| RunState::parse(std::str::from_utf8(&buf[..n]).ok()?));
        match attribute {
            Some(s) if s.exit.is_some() => Some(s),
            attribute => fs::read_to_string(self.state_path(run_id))
                .ok()
                .and_then(|t| RunState::parse(&t))
                .or(attribute),
        }
    }

    /// Aborts a run: SIGTERM to the job's process group, SIGKILL after `grace`.
    /// Returns once the job has ended (or could not be found).
    pub fn abort(&self, run_id: &str, grace: Duration) -> RunStatus {
        let RunStatus::Running { pid } = self.status(run_id) else {
            return self.status(run_id);
        };
        let Some(group) = Pid::from_raw(pid as i32) else {
            return RunStatus::Lost;
        };
        let _ = kill_process_group(group, Signal::TERM);
        let deadline = Instant::now() + grace;
        loop {
            match self.status(run_id) {
                RunStatus::Running { .. } | RunStatus::Starting | RunStatus::Ending
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                RunStatus::Running { .. } | RunStatus::Starting | RunStatus::Ending => {
                    let _ = kill_process_group(group, Signal::KILL);
                    std::thread::sleep(Duration::from_millis(20));
                }
                done => return done,
            }
        }
    }

    /// Deletes a finished run's files: its state, its log, its directory.
    pub fn remove(&self, run_id: &str) -> Result<(), ExecError> {
        {
            // Every drop bumps the generation (see `Known`).
            let mut known = self.known();
            if known.runs.remove(run_id).is_some() {
                known.generation += 1;
            }
        }
        let gone = |r: std::io::Result<()>| match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        };
        gone(fs::remove_dir_all(self.run_dir(run_id)))?;
        gone(fs::remove_file(self.log_path(run_id)))?;
        gone(fs::remove_file(self.state_path(run_id)))
    }

    /// The shim's entry point, re-exported for the `bosun run-shim` command.
    pub fn shim_main(args: &[String]) -> bosun_base::command::Outcome {
        use bosun_base::command::Failed;
        let args = shim::parse_args(args)
            .map_err(|e| Failed::with_line(2, format!("bosun run-shim: {e}")))?;
        Failed::from_code(shim::run(&args))
    }
}

impl Executor for LocalExecutor {
    fn start(&self, run_id: &str, workload: &Workload) -> Result<(), ExecError> {
        match workload {
            Workload::Process(job) => LocalExecutor::start(self, run_id, job),
            other => Err(ExecError::Unsupported(format!(
                "a local cluster runs processes, not {}",
                other.word()
            ))),
        }
    }

    /// The processes go to the supervisor together ([`LocalExecutor::start_all`]).
    fn start_all_then(&self, starts: Vec<(&str, &Workload, StartDone)>) {
        let mut processes = Vec::with_capacity(starts.len());
        let mut dones = Vec::with_capacity(starts.len());
        for (run_id, workload, done) in starts {
            match workload {
                Workload::Process(job) => {
                    processes.push((run_id, job));
                    dones.push(done);
                }
                other => done(Executor::start(self, run_id, other)),
            }
        }
        for (done, started) in dones.into_iter().zip(self.start_all(&processes)) {
            done(started);
        }
    }

    fn status(&self, run_id: &str) -> RunStatus {
        LocalExecutor::status(self, run_id)
    }

    /// Ends are reported while the supervisor's subscription is
    /// acknowledged (its thread calls `on_exit` for every job that ends).
    /// A run with no state yet becomes `Lost` by the clock alone, and a
    /// daemon that has started nothing since it came up is not subscribed:
    /// those are looked at again.
    fn reports_change(&self, status: &RunStatus) -> bool {
        !matches!(status, RunStatus::Starting)
            && self.on_exit.is_some()
            && self.subscribed.load(std::sync::atomic::Ordering::Acquire)
            && self.known().trusted
    }

    fn abort(&self, run_id: &str, grace: Duration) -> RunStatus {
        LocalExecutor::abort(self, run_id, grace)
    }

    fn remove(&self, run_id: &str) -> Result<(), ExecError> {
        LocalExecutor::remove(self, run_id)
    }

    fn log_path(&self, run_id: &str) -> Option<PathBuf> {
        Some(LocalExecutor::log_path(self, run_id))
    }

    /// `ROOT/RUN_ID/logs`, inside the run's own directory.
    fn artifacts_dir(&self, run_id: &str) -> Option<PathBuf> {
        Some(self.run_dir(run_id).join("logs"))
    }

    /// The clone mirrors (`ROOT/.mirrors`, and each `run_as` user's
    /// `ROOT/.mirrors/uid-UID`) no clone has used since `unused_since`.
    fn prune_caches(&self, unused_since: jiff::Timestamp) -> Result<Vec<PathBuf>, ExecError> {
        let base = self.root.join(MIRRORS);
        let mut roots = vec![base.clone()];
        if let Ok(entries) = fs::read_dir(&base) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                if name.to_string_lossy().starts_with("uid-") && entry.path().is_dir() {
                    roots.push(entry.path());
                }
            }
        }
        let cutoff = std::time::SystemTime::from(unused_since);
        // Each root on its own: one that cannot be read does not keep the
        // others' unused mirrors.
        let mut removed = Vec::new();
        let mut errors = Vec::new();
        for root in roots {
            match bosun_git::mirror::prune(&root, cutoff) {
                Ok(pruned) => {
                    removed.extend(pruned.removed);
                    errors.extend(pruned.errors);
                }
                Err(e) => errors.push(format!("{}: {e}", root.display())),
            }
        }
        for e in &errors {
            tracing::warn!(error = %e, "a clone mirror could not be pruned");
        }
        Ok(removed)
    }
}

/// The directory of a cluster's clone cache, under its root (a name no run
/// id takes: ids never start with a dot).
pub const MIRRORS: &str = ".mirrors";

/// How long a run's directory may exist without its state file before the
/// start is taken as failed (the supervisor writes the state right after
/// starting the job, so only a supervisor that died in between leaves it out).
const STARTING_GRACE: Duration = Duration::from_secs(10);

/// A run's state file: pids (and start times), then the exit code.
struct RunState {
    job: (u32, u64),
    supervisor: (u32, u64),
    exit: Option<i32>,
}

impl RunState {
    fn parse(text: &str) -> Option<RunState> {
        // Only whole lines count (a line is written with its newline in one
        // write, so a partial one is not expected; it would be ignored).
        let mut lines = text
            .split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'));
        let mut ids = lines.next()?.split_whitespace().map(str::parse::<u64>);
        let mut next = || ids.next()?.ok();
        let job = (u32::try_from(next()?).ok()?, next()?);
        let supervisor = (u32::try_from(next()?).ok()?, next()?);
        let exit = lines.find_map(|l| l.strip_prefix("exit ")?.trim().parse().ok());
        Some(RunState {
            job,
            supervisor,
            exit,
        })
    }
}

/// A zombie has ended; only its parent has not collected it yet.
fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(false)
}
