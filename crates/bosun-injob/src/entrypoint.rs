//! entrypoint for the local executor: runs a decorated job's test command
//! under the rules of Prow's entrypoint, inside `bosun run-decorated`.
//!
//! [`run_wrapped`] creates the artifact directory and the process log
//! (`build-log.txt`), starts `args[0]` (looked up on `PATH`, no shell) with
//! `args[1..]` in the working directory, and copies its stdout and stderr to
//! both this process's stdout (the run's log) and the process log. Its own
//! log lines are JSON, as entrypoint's logrus lines are
//! (`{"component":"entrypoint","level":"error","msg":…,"severity":"error","time":…}`),
//! with entrypoint's messages:
//!
//! - the test ends by itself: the exit code is the test's (`-1` when a
//!   signal killed it, so this process exits 255, as Go's `os.Exit(-1)`);
//! - the test cannot be started: `could not start the process: …` in the
//!   process log, code 127;
//! - `timeout` passes (unset or zero: 2h): `Process did not finish before
//!   2h0m0s timeout`, SIGINT, then up to `grace_period` (unset or zero: 15s)
//!   for the test to end (`Process gracefully exited before 15s grace
//!   period`) before SIGKILL (`Process did not exit before 15s grace
//!   period`); code 127;
//! - this process receives SIGINT or SIGTERM (an abort): `Entrypoint received
//!   interrupt: terminated`, SIGINT and then that signal to the test, the
//!   same grace and SIGKILL; code 130.
//!
//! The code is then written to the marker file (decimal, no newline,
//! atomically); if that fails the code is 127.
//!
//! Unlike Prow's entrypoint, which signals only the test's own process, the
//! test runs in a process group of its own and every signal goes to that
//! group, so processes the test started are stopped with it; when the test
//! ends, whatever is left of its group is killed, as the end of a container
//! kills what is left in it (Prow's entrypoint would wait for them as long as
//! they hold its output open). The test also gets `PR_SET_PDEATHSIG`
//! (SIGKILL), so it does not outlive this process when the local executor
//! kills it after the abort's grace. Durations in messages print as Go
//! prints them (`2h0m0s`, `1m30s`, `500ms`).

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bosun_config::duration::GoDuration;
use rustix::process::{kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use bosun_job::artifacts::{go_json, write_atomic, ABORTED_CODE};

/// The code entrypoint records when it could not run the test, or stopped
/// it at its timeout.
pub const INTERNAL_ERROR_CODE: i32 = 127;

/// The code entrypoint records when it was interrupted (the run aborted).
pub const ABORTED_ERROR_CODE: i32 = ABORTED_CODE;

pub use bosun_job::job::{DEFAULT_GRACE_PERIOD, DEFAULT_TIMEOUT};

/// How to run one test command (Prow's entrypoint options, as the local
/// executor sets them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WrapOptions {
    /// The command followed by its arguments; `args[0]` is looked up on
    /// `PATH` (no shell).
    pub args: Vec<String>,
    /// The test's working directory.
    pub dir: PathBuf,
    /// Variables added to the environment this process has.
    pub env: Vec<(String, String)>,
    /// SIGINT after this long; `None` or zero: [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
    /// SIGKILL this long after the SIGINT; `None` or zero:
    /// [`DEFAULT_GRACE_PERIOD`].
    pub grace_period: Option<Duration>,
    /// The process log (`build-log.txt`): the test's stdout and stderr and
    /// entrypoint's log lines.
    pub process_log: PathBuf,
    /// Where the exit code is written.
    pub marker_file: PathBuf,
    /// Created (with its parents, mode 0777 less the umask) before the test
    /// starts.
    pub artifact_dir: PathBuf,
}

/// Runs the test as entrypoint does (see the module's doc) and returns the
/// code entrypoint exits with: the test's exit code, `-1` when a signal
/// killed it, 127 when it could not start or timed out, 130 when this process
/// was interrupted. The code is in the marker file unless writing that
/// failed (then 127 is returned).
///
/// SIGINT and SIGTERM are taken by this function from when it starts; after
/// it returns this process keeps ignoring them, so the caller can write
/// `finished.json` undisturbed (a later SIGKILL still ends it). Linux sends
/// the test its SIGKILL when the *thread* that started it exits, so call this
/// on a thread that outlives the test (such as the main thread).
pub fn run_wrapped(opts: &WrapOptions) -> i32 {
    let stdout = Output::stdout_only();
    let (code, error) = execute(opts);
    if let Some(error) = error {
        stdout.log("Error executing test process", Some(&error));
    }
    if let Err(e) = write_atomic(&opts.marker_file, code.to_string().as_bytes()) {
        stdout.log(
            "Error writing exit code to marker file",
            Some(&format!("{}: {e}", opts.marker_file.display())),
        );
        return INTERNAL_ERROR_CODE;
    }
    code
}

/// How the wait for the test ended.
enum Ending {
    Exited,
    TimedOut,
    Interrupted(i32),
}

/// What the test's watchers report.
enum Event {
    Exited,
    Signal(i32),
}

/// Runs the test: the code and, when it is not a plain success, the error
/// entrypoint logs (to stdout only) once the test is over.
fn execute(opts: &WrapOptions) -> (i32, Option<String>) {
    let internal = |e: String| (INTERNAL_ERROR_CODE, Some(e));
    // Signals are taken first, so an abort cannot slip in before the test
    // starts, and are ignored from here on once the test has ended.
    let (tx, rx) = mpsc::channel();
    let mut signals = match Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => return internal(format!("could not handle signals: {e}")),
    };
    let signal_handle = signals.handle();
    let signal_tx = tx.clone();
    let signal_thread = thread::spawn(move || {
        for sig in signals.forever() {
            if signal_tx.send(Event::Signal(sig)).is_err() {
                break;
            }
        }
    });
    let result = prepare(opts).map(|output| supervise(opts, &output, tx, &rx));
    signal_handle.close();
    let _ = signal_thread.join();
    result.unwrap_or_else(internal)
}

/// Creates the artifact directory and the process log; the output, or the
/// error entrypoint reports.
fn prepare(opts: &WrapOptions) -> Result<Output, String> {
    if !opts.artifact_dir.as_os_str().is_empty() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o777)
            .create(&opts.artifact_dir)
            .map_err(|e| {
                format!(
                    "could not create artifact directory({}): {}",
                    opts.artifact_dir.display(),
                    go_error(&e)
                )
            })?;
    }
    let log = fs::File::create(&opts.process_log).map_err(|e| {
        format!(
            "could not create process logfile({}): {}",
            opts.process_log.display(),
            go_error(&e)
        )
    })?;
    Ok(Output::both(log))
}

/// Starts the test and sees it to its end.
fn supervise(
    opts: &WrapOptions,
    output: &Output,
    tx: mpsc::Sender<Event>,
    rx: &Receiver<Event>,
) -> (i32, Option<String>) {
    let (mut child, reader) = match start(opts) {
        Ok(started) => started,
        Err(e) => {
            let e = format!("could not start the process: {e}");
            // As entrypoint: the message alone, into the process log.
            output.write_log_only(e.as_bytes());
            return (INTERNAL_ERROR_CODE, Some(e));
        }
    };
    let copier = {
        let output = output.clone();
        thread::spawn(move || copy_output(reader, &output))
    };
    let raw_pid = child.id() as i32;
    let group = Pid::from_raw(raw_pid).expect("a child's pid is positive");
    // The waiter reports the end without collecting the test, so its pid
    // (and the group's id) stays taken until the group has been cleared.
    thread::spawn(move || {
        while let Err(rustix::io::Errno::INTR) = waitid(
            WaitId::Pid(group),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {}
        let _ = tx.send(Event::Exited);
    });

    let timeout = or_default(opts.timeout, DEFAULT_TIMEOUT);
    let grace = or_default(opts.grace_period, DEFAULT_GRACE_PERIOD);
    let deadline = Instant::now().checked_add(timeout);
    let event = match deadline {
        Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
    };
    let ending = match event {
        Ok(Event::Exited) | Err(RecvTimeoutError::Disconnected) => Ending::Exited,
        Ok(Event::Signal(sig)) => Ending::Interrupted(sig),
        Err(RecvTimeoutError::Timeout) => Ending::TimedOut,
    };
    match ending {
        Ending::Exited => {}
        Ending::TimedOut => {
            output.log(
                &format!(
                    "Process did not finish before {} timeout",
                    go_duration(timeout)
                ),
                None,
            );
            terminate(group, None, grace, output, rx);
        }
        Ending::Interrupted(sig) => {
            output.log(
                &format!(
                    "Entrypoint received interrupt: {}",
                    bosun_git::runner::signal_name(sig)
                ),
                None,
            );
            terminate(group, Some(sig), grace, output, rx);
        }
    }
    // The test has ended (not yet collected): clear what is left of its
    // group, then collect it. The copier ends once no one holds the output.
    let _ = kill_process_group(group, Signal::KILL);
    let status = child.wait();
    let _ = copier.join();
    match ending {
        Ending::TimedOut => (INTERNAL_ERROR_CODE, Some("process timed out".into())),
        Ending::Interrupted(_) => (ABORTED_ERROR_CODE, Some("process aborted".into())),
        Ending::Exited => match status {
            Ok(status) => {
                let code = status.code().unwrap_or(-1);
                let error = (code != 0).then(|| {
                    format!(
                        "wrapped process failed: {}",
                        bosun_git::runner::exit_error(status)
                    )
                });
                (code, error)
            }
            Err(e) => (1, Some(format!("wrapped process failed: {e}"))),
        },
    }
}

/// SIGINT (and `signal`, when one interrupted this process) to the test's
/// group, then up to `grace` for it to end before SIGKILL; returns once it
/// has ended. Further signals to this process change nothing.
fn terminate(
    group: Pid,
    signal: Option<i32>,
    grace: Duration,
    output: &Output,
    rx: &Receiver<Event>,
) {
    if let Err(e) = kill_process_group(group, Signal::INT) {
        output.log(
            "Could not interrupt process after timeout",
            Some(&go_error(&e.into())),
        );
    }
    if let Some(sig) = signal.and_then(Signal::from_named_raw) {
        if let Err(e) = kill_process_group(group, sig) {
            output.log(
                &format!(
                    "Could not send signal {} to process after timeout",
                    bosun_git::runner::signal_name(sig.as_raw())
                ),
                Some(&go_error(&e.into())),
            );
        }
    }
    if wait_exit(rx, Instant::now().checked_add(grace)) {
        output.log(
            &format!(
                "Process gracefully exited before {} grace period",
                go_duration(grace)
            ),
            None,
        );
        return;
    }
    output.log(
        &format!(
            "Process did not exit before {} grace period",
            go_duration(grace)
        ),
        None,
    );
    if let Err(e) = kill_process_group(group, Signal::KILL) {
        output.log(
            "Could not kill process after grace period",
            Some(&go_error(&e.into())),
        );
    }
    wait_exit(rx, None);
}

/// Waits for the test's end until `until` (`None`: for ever), passing over
/// signals; whether it ended.
fn wait_exit(rx: &Receiver<Event>, until: Option<Instant>) -> bool {
    loop {
        let event = match until {
            Some(t) => rx.recv_timeout(t.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match event {
            Ok(Event::Exited) | Err(RecvTimeoutError::Disconnected) => return true,
            Ok(Event::Signal(_)) => continue,
            Err(RecvTimeoutError::Timeout) => return false,
        }
    }
}

/// Starts the test with its output on a pipe; the child and the pipe's
/// reading end.
fn start(opts: &WrapOptions) -> Result<(std::process::Child, io::PipeReader), String> {
    let Some((program, args)) = opts.args.split_first() else {
        return Err("no command to run".into());
    };
    if !opts.dir.as_os_str().is_empty() {
        if let Err(e) = fs::metadata(&opts.dir) {
            return Err(format!("chdir {}: {}", opts.dir.display(), go_error(&e)));
        }
    }
    let (reader, writer) = io::pipe().map_err(|e| go_error(&e))?;
    let writer2 = writer.try_clone().map_err(|e| go_error(&e))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(opts.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    if !opts.dir.as_os_str().is_empty() {
        cmd.current_dir(&opts.dir);
    }
    bosun_base::process::die_with_parent(&mut cmd);
    let child = cmd.spawn().map_err(|e| spawn_error(program, &e))?;
    // `cmd` holds the writing ends; the copier sees the end of the output
    // only once they are closed.
    drop(cmd);
    Ok((child, reader))
}

/// The error Go's `exec.Cmd.Start` gives for a failed start.
fn spawn_error(program: &str, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::NotFound && !program.contains('/') {
        format!("exec: \"{program}\": executable file not found in $PATH")
    } else {
        format!("fork/exec {program}: {}", go_error(e))
    }
}

/// Copies the test's output to stdout and the process log until its end.
fn copy_output(mut reader: io::PipeReader, output: &Output) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => output.write_both(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}

/// Where output goes: this process's stdout and, while the test runs, the
/// process log. Shared by the copier and the log lines, so lines are whole.
#[derive(Clone)]
struct Output {
    log: Option<Arc<Mutex<fs::File>>>,
}

impl Output {
    fn stdout_only() -> Output {
        Output { log: None }
    }

    fn both(log: fs::File) -> Output {
        Output {
            log: Some(Arc::new(Mutex::new(log))),
        }
    }

    fn write_both(&self, bytes: &[u8]) {
        // The log's lock also orders the writes to stdout.
        let mut log = self
            .log
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
        let mut out = io::stdout().lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
        if let Some(log) = log.as_deref_mut() {
            let _ = log.write_all(bytes);
        }
    }

    fn write_log_only(&self, bytes: &[u8]) {
        if let Some(log) = &self.log {
            let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
            let _ = log.write_all(bytes);
        }
    }

    /// An error-level log line in entrypoint's JSON form.
    fn log(&self, msg: &str, error: Option<&str>) {
        let mut line = std::collections::BTreeMap::new();
        line.insert("component", "entrypoint".to_string());
        if let Some(e) = error {
            line.insert("error", e.to_string());
        }
        line.insert("level", "error".into());
        line.insert("msg", msg.into());
        line.insert("severity", "error".into());
        line.insert(
            "time",
            bosun_job::artifacts::go_time(jiff::Timestamp::now()),
        );
        let mut json = go_json(&line);
        json.push('\n');
        self.write_both(json.as_bytes());
    }
}

fn or_default(d: Option<Duration>, default: Duration) -> Duration {
    d.filter(|d| !d.is_zero()).unwrap_or(default)
}

/// `d` as Go prints a `time.Duration`.
fn go_duration(d: Duration) -> String {
    GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).to_string()
}

/// An I/O error as Go prints an errno: `no such file or directory`.
fn go_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let text = io::Error::from_raw_os_error(n).to_string();
            let text = text
                .strip_suffix(&format!(" (os error {n})"))
                .unwrap_or(&text);
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => text.to_string(),
            }
        }
        None => e.to_string(),
    }
}
