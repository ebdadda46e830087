//! The local executor: a run is a process on this machine, supervised by
//! `bosun run-shim` (see [`crate::shim`]), with its files in `ROOT/RUN_ID/`:
//! `build-log.txt`, `pid`, `exit_code`, `shim.pid` and the working directory
//! `work/`. Everything needed to find a run again after a daemon restart is in
//! those files.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodSpec;
use rustix::process::{kill_process_group, Pid, Signal};

use crate::shim::{self, start_time, write_atomic, EXIT_CODE, LOG, PID};

/// Errors starting or controlling a local run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LocalError {
    /// The job cannot run on a local cluster (no command, several containers).
    #[error("{0}")]
    Unsupported(String),
    /// The run directory or the process could not be created.
    #[error("local executor: {0}")]
    Io(String),
}

fn io(e: impl std::fmt::Display) -> LocalError {
    LocalError::Io(e.to_string())
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobProcess {
    /// The container's `command` followed by its `args`.
    pub command: Vec<String>,
    /// The complete environment (the process gets nothing else).
    pub env: Vec<(String, String)>,
    /// The container's `workingDir`, taken inside the run's own directory.
    pub working_dir: Option<String>,
}

/// Where a local run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// The supervisor is starting the job, or recording its end.
    Starting,
    /// The job runs as `pid`.
    Running {
        /// The job's pid (also its process group).
        pid: u32,
    },
    /// The job ended with this exit code (128 + signal when killed).
    Exited {
        /// The code.
        code: i32,
    },
    /// Neither the job nor its exit code can be found: "executor lost the process".
    Lost,
}

/// The local executor of one cluster.
pub struct LocalExecutor {
    root: PathBuf,
    shim: Vec<String>,
    /// Supervisors this process started, reaped when they end.
    children: Mutex<HashMap<String, Child>>,
    /// Called (from a waiting thread) when a supervisor this process started ends.
    on_exit: Option<std::sync::Arc<dyn Fn() + Send + Sync>>,
}

/// The command line of a job's single container, as Kubernetes would run it:
/// `command` then `args` (an image's entrypoint cannot be used locally).
pub fn command_of(spec: &PodSpec) -> Result<Vec<String>, LocalError> {
    let [c] = spec.containers.as_slice() else {
        return Err(LocalError::Unsupported(format!(
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
        return Err(LocalError::Unsupported(
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
            children: Mutex::default(),
            on_exit: None,
        }
    }

    /// Calls `f` whenever a run this executor started ends, so its owner can
    /// react at once instead of polling.
    pub fn on_exit(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_exit = Some(std::sync::Arc::new(f));
        self
    }

    /// The directory of a run.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.root.join(run_id)
    }

    /// The log of a run.
    pub fn log_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join(LOG)
    }

    /// Starts a run. Starting a run that already has a directory with a pid or
    /// an exit code does nothing (a restarted controller may try again).
    pub fn start(&self, run_id: &str, job: &JobProcess) -> Result<(), LocalError> {
        if job.command.first().is_none_or(String::is_empty) {
            return Err(LocalError::Unsupported("no command".into()));
        }
        let dir = self.run_dir(run_id);
        if dir.join(PID).exists() || dir.join(EXIT_CODE).exists() || dir.join("shim.pid").exists() {
            return Ok(());
        }
        let work = dir.join("work");
        let workdir = match &job.working_dir {
            Some(w) => work.join(w.trim_start_matches('/')),
            None => work.clone(),
        };
        fs::create_dir_all(&workdir).map_err(io)?;
        let (program, lead) = self
            .shim
            .split_first()
            .ok_or_else(|| io("no shim configured"))?;
        let child = Command::new(program)
            .args(lead)
            .arg("--dir")
            .arg(&dir)
            .arg("--workdir")
            .arg(&workdir)
            .arg("--")
            .args(&job.command)
            .env_clear()
            .envs(job.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io)?;
        let pid = child.id();
        write_atomic(
            &dir,
            "shim.pid",
            &format!("{pid} {}\n", start_time(pid).unwrap_or(0)),
        )
        .map_err(io)?;
        match &self.on_exit {
            // A thread waits for the supervisor and reaps it; the run's end is
            // then an event, not something to poll for.
            Some(notify) => {
                let notify = notify.clone();
                let mut child = child;
                std::thread::Builder::new()
                    .name("bosun-run-wait".into())
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        let _ = child.wait();
                        notify();
                    })
                    .map_err(io)?;
            }
            None => {
                self.children
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(run_id.to_string(), child);
            }
        }
        Ok(())
    }

    fn reap(&self, run_id: &str) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = children.get_mut(run_id) {
            if matches!(c.try_wait(), Ok(Some(_)) | Err(_)) {
                children.remove(run_id);
            }
        }
    }

    /// Where a run stands, from its files (works for runs started by an earlier
    /// daemon: the pid is checked against its recorded start time, so a reused
    /// pid is not mistaken for the job).
    pub fn status(&self, run_id: &str) -> ProcessState {
        self.reap(run_id);
        let dir = self.run_dir(run_id);
        let exit_code = || -> Option<i32> {
            fs::read_to_string(dir.join(EXIT_CODE))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        if let Some(code) = exit_code() {
            return ProcessState::Exited { code };
        }
        let alive = |file: &str| {
            read_pid(&dir.join(file))
                .filter(|(pid, started)| start_time(*pid) == Some(*started) && !is_zombie(*pid))
        };
        if let Some((pid, _)) = alive(PID) {
            return ProcessState::Running { pid };
        }
        // The job has not started yet, or has just ended and the supervisor is
        // writing its exit code: while the supervisor lives, the run is not lost.
        if alive("shim.pid").is_some() {
            return match read_pid(&dir.join(PID)) {
                Some(_) => {
                    exit_code().map_or(ProcessState::Starting, |code| ProcessState::Exited { code })
                }
                None => ProcessState::Starting,
            };
        }
        exit_code().map_or(ProcessState::Lost, |code| ProcessState::Exited { code })
    }

    /// Aborts a run: SIGTERM to the job's process group, SIGKILL after `grace`.
    /// Returns once the job has ended (or could not be found).
    pub fn abort(&self, run_id: &str, grace: Duration) -> ProcessState {
        let ProcessState::Running { pid } = self.status(run_id) else {
            return self.status(run_id);
        };
        let Some(group) = Pid::from_raw(pid as i32) else {
            return ProcessState::Lost;
        };
        let _ = kill_process_group(group, Signal::TERM);
        let deadline = Instant::now() + grace;
        loop {
            match self.status(run_id) {
                ProcessState::Running { .. } | ProcessState::Starting
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                ProcessState::Running { .. } | ProcessState::Starting => {
                    let _ = kill_process_group(group, Signal::KILL);
                    std::thread::sleep(Duration::from_millis(20));
                }
                done => return done,
            }
        }
    }

    /// Deletes a finished run's directory (its log included).
    pub fn remove(&self, run_id: &str) -> Result<(), LocalError> {
        match fs::remove_dir_all(self.run_dir(run_id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        }
    }

    /// The shim's entry point, re-exported for the `bosun run-shim` command.
    pub fn shim_main(args: &[String]) -> i32 {
        match shim::parse_args(args) {
            Ok(a) => shim::run(&a),
            Err(e) => {
                eprintln!("bosun run-shim: {e}");
                2
            }
        }
    }
}

fn read_pid(path: &Path) -> Option<(u32, u64)> {
    let text = fs::read_to_string(path).ok()?;
    let mut parts = text.split_whitespace();
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A zombie has ended; only its parent has not collected it yet.
fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(false)
}
