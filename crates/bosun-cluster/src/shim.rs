//! The supervisor of a local cluster (`bosun run-shim --root ROOT`).
//!
//! One long-lived supervisor per local cluster starts and reaps that cluster's
//! jobs. The daemon talks to it over a Unix socket (`ROOT/.supervisor.sock`,
//! mode 0600): one JSON line per request, one JSON line per reply (the
//! replies to requests written together come back in one write), and, on a
//! subscribed connection, one line per job that ended. It runs in its own
//! session, so it and its jobs outlive a daemon that crashes or restarts; a
//! restarted daemon connects to the same supervisor again.
//!
//! Why one supervisor per cluster rather than one per run: starting a run then
//! costs one process start (the job's), from a small single-purpose process,
//! instead of two starts of the large daemon binary; the run rate of a local
//! cluster comes close to that of a plain loop spawning the same commands.
//!
//! For each run it creates, in the cluster's root, the run's working directory
//! `RUN_ID/` (exclusively: a second start of the same run finds it and does
//! nothing; the container's `workingDir` is taken inside it) and the log
//! `RUN_ID.log` (the job's stdout and stderr, mode 0644). The run's state is
//! the log's extended attribute `user.bosun.state`: first the line "PID
//! STARTTIME SUPERVISOR_PID SUPERVISOR_STARTTIME" (start times in clock ticks
//! since boot, so a reused pid is never mistaken for the job or its
//! supervisor), then, once the job ends, that line and "exit CODE" (the exit
//! status, or 128 + the signal number). An attribute is replaced atomically,
//! so a reader sees the old state or the new one. Creating files is most of a
//! local run's cost: two per run, where a state file would be a third.
//!
//! On a filesystem without user attributes the state goes to the file
//! `RUN_ID.state` instead, with the same lines, each written in one write
//! (readers take only whole lines, so a line is seen complete or not at all).
//! Readers take the attribute, and the file when the attribute has no exit.
//! The hidden `--state-files` flag (`bosun run-shim --state-files --root
//! ROOT`) keeps states in files everywhere.
//!
//! A supervisor exits when no daemon is connected and none of its jobs runs
//! (checked when either ends, and every 10 s). `ROOT/.supervisor.lock` (flock)
//! makes sure only one serves a cluster.
//!
//! It knows nothing of the executor's vocabulary or of Kubernetes: the local
//! executor ([`crate::local`]) is its only client, over the socket.

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::fs::XattrFlags;
use serde::{Deserialize, Serialize};

/// The suffix of a run's log, beside its directory.
pub const LOG_SUFFIX: &str = ".log";
/// The suffix of a run's state file, beside its directory (where the log's
/// attribute cannot be used).
pub const STATE_SUFFIX: &str = ".state";
/// The extended attribute of a run's log that holds its state.
pub const STATE_XATTR: &str = "user.bosun.state";
/// The supervisor's socket, in the cluster's root.
pub const SOCKET: &str = ".supervisor.sock";
/// The supervisor's lock file, in the cluster's root.
pub const LOCK: &str = ".supervisor.lock";

/// A request to the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Start a run (nothing happens if its directory exists).
    Start(StartRequest),
    /// Subscribe this connection to the ends of jobs: the supervisor answers
    /// [`Event::Subscribed`] once registered, then sends [`Event::Ended`]
    /// whenever a job ends.
    Subscribe,
}

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRequest {
    /// The run's id: the name of its directory.
    pub id: String,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The complete environment (the job gets nothing else).
    pub env: Vec<(String, String)>,
    /// The container's `workingDir`, taken inside the run's `work/`.
    pub working_dir: Option<String>,
    /// The user the job runs as (the cluster's `run_as`); its working
    /// directory is given to that user.
    #[serde(default)]
    pub run_as: Option<RunAs>,
    /// Answer a successful start with [`Reply::Spawned`] (the job's pid)
    /// rather than [`Reply::Started`]. A flag, so a daemon that does not know
    /// `Spawned` never gets it from a newer supervisor.
    #[serde(default)]
    pub want_pid: bool,
}

/// A user and group to run a job as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAs {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// Why a cluster's `run_as` names no user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunAsError {
    /// `UID:GID` with something other than numbers.
    #[error("run_as {0:?}: want UID:GID as numbers")]
    NotNumbers(String),
    /// A name that `/etc/passwd` does not have.
    #[error("run_as {0:?}: no such user in /etc/passwd (give UID:GID)")]
    NoSuchUser(String),
}

impl RunAs {
    /// Resolves a cluster's `run_as`: `UID`, `UID:GID`, or a user name looked
    /// up in `passwd` (the text of `/etc/passwd`; users known only to a
    /// directory service must be given by number).
    pub fn resolve(spec: &str, passwd: &str) -> Result<RunAs, RunAsError> {
        let number = |s: &str| s.parse::<u32>().ok();
        if let Some((u, g)) = spec.split_once(':') {
            return match (number(u), number(g)) {
                (Some(uid), Some(gid)) => Ok(RunAs { uid, gid }),
                _ => Err(RunAsError::NotNumbers(spec.to_string())),
            };
        }
        if let Some(uid) = number(spec) {
            return Ok(RunAs { uid, gid: uid });
        }
        passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&spec))
            .and_then(|f| {
                Some(RunAs {
                    uid: number(f.get(2)?)?,
                    gid: number(f.get(3)?)?,
                })
            })
            .ok_or_else(|| RunAsError::NoSuchUser(spec.to_string()))
    }
}

/// The supervisor's answer to a start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The run was started (or its start failed and its state says exit 127).
    Started,
    /// The run's job was started as this pid (when asked for, see
    /// [`StartRequest::want_pid`]).
    Spawned {
        /// The job's pid (also its process group).
        pid: u32,
    },
    /// The run's directory existed: it was started before.
    Exists,
    /// Nothing was started.
    Error(String),
}

/// Sent on a subscribed connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The connection is subscribed: every job that ends from now on is
    /// reported on it (or, if a report cannot be written, the connection is
    /// shut down).
    Subscribed,
    /// The job of this run ended with this exit code (also in its state
    /// file, written before this is sent).
    Ended {
        /// The run's id.
        id: String,
        /// The exit code (128 + the signal number for a killed job).
        code: i32,
    },
    /// The job of this run ended; its exit code is in its state file (what
    /// supervisors of earlier versions send).
    Exit(String),
}

/// Creates `dir/name` holding `contents` (whole lines), written in one write.
/// Readers take only whole lines (each ends with its newline), so a reader,
/// or a daemon restarted after a crash, sees each line complete or not at all;
/// no temporary file and rename are needed, and a run costs one file
/// creation less (creating files is most of a local run's cost).
/// Not fsynced: the files describe live processes, which a power loss ends
/// anyway; after one, a run whose exit code was not yet on disk ends in `error`
/// ("executor lost the process") rather than with its result.
pub fn write_lines(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(dir.join(name))?
        .write_all(contents.as_bytes())
}

/// Appends one line in a single write: a reader sees all of it or none (the
/// file's size grows only once the bytes are in place).
fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// Nanoseconds on the clock a process's start time is taken from
/// (`CLOCK_BOOTTIME`, of this time namespace as `/proc` shows it).
fn boot_clock_ns() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// The start time, in clock ticks since boot as `/proc/PID/stat` gives it, of
/// a process forked between the boot clock's readings `before` and `after`
/// (ns): the kernel stamps a new process with that clock and shows the stamp
/// divided down to whole ticks. Known when both readings (widened by a
/// margin for any rounding) fall in one tick; `None` when the spawn
/// straddled a tick's end, for the caller to read `/proc`. This spares the
/// supervisor a file's open, read and close per run.
fn start_tick_between(before: u128, after: u128) -> Option<u64> {
    const MARGIN_NS: u128 = 100_000;
    let ticks_per_second = rustix::param::clock_ticks_per_second() as u128;
    if ticks_per_second == 0 {
        return None;
    }
    let tick_ns = 1_000_000_000 / ticks_per_second;
    let first = before.checked_sub(MARGIN_NS)? / tick_ns;
    let last = (after + MARGIN_NS) / tick_ns;
    if first != last {
        return None;
    }
    u64::try_from(first).ok()
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/PID/stat`), or `None` if there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: skip past
    // the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    // rest starts at field 3 (state); starttime is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Arguments of the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimArgs {
    /// The cluster's root directory.
    pub root: PathBuf,
    /// States go to `ROOT/ID.state` files even where the log could carry
    /// them as an attribute (`--state-files`, hidden: what a filesystem
    /// without user attributes gets, for tests).
    pub state_files: bool,
}

/// The supervisor's arguments are not `--root ROOT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("usage: bosun run-shim --root DIR")]
pub struct UsageError;

/// Parses `[--state-files] --root ROOT`.
pub fn parse_args(args: &[String]) -> Result<ShimArgs, UsageError> {
    let (state_files, args) = match args {
        [flag, rest @ ..] if flag == "--state-files" => (true, rest),
        _ => (false, args),
    };
    match args {
        [flag, root] if flag == "--root" => Ok(ShimArgs {
            root: PathBuf::from(root),
            state_files,
        }),
        _ => Err(UsageError),
    }
}

/// A running job's record.
struct Job {
    /// Its run's id.
    id: String,
    /// Its state line ("PID STARTTIME SUPERVISOR_PID SUPERVISOR_STARTTIME\n").
    line: String,
    /// The state is in the log's extended attribute (else in the state file).
    in_xattr: bool,
}

struct State {
    /// Running jobs by pid.
    children: HashMap<i32, Job>,
    /// Exit codes of jobs reaped before their start registered them (a start
    /// spawns without holding the lock): pid -> code.
    early: HashMap<i32, i32>,
    /// Open connections.
    connections: usize,
    /// Subscribed connections by connection number.
    subscribers: HashMap<u64, UnixStream>,
}

struct Supervisor {
    root: PathBuf,
    /// This process: pid and start time, written into every run's state.
    me: (u32, u64),
    /// Keep states in files only (`--state-files`: what a filesystem
    /// without user attributes gets; tests use it).
    state_files: bool,
    state: Mutex<State>,
    /// Signalled when a job is started (the reaper waits for one).
    spawned: Condvar,
}

impl Supervisor {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Exits the process when nothing needs it any more.
    fn exit_if_idle(&self, state: &State) {
        if state.connections == 0 && state.children.is_empty() {
            let _ = fs::remove_file(self.root.join(SOCKET));
            std::process::exit(0);
        }
    }

    fn start(&self, req: &StartRequest) -> Reply {
        if req.id.is_empty() || req.id.starts_with('.') || req.id.contains('/') {
            return Reply::Error(format!("invalid run id {:?}", req.id));
        }
        let Some((program, args)) = req.command.split_first() else {
            return Reply::Error("no command".into());
        };
        let relative = Path::new(req.working_dir.as_deref().unwrap_or(""));
        if relative
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return Reply::Error(format!(
                "workingDir {:?} leaves the run's directory",
                relative.display()
            ));
        }
        let dir = self.root.join(&req.id);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Reply::Exists,
            Err(e) => return Reply::Error(format!("cannot create {}: {e}", dir.display())),
        }
        let state_name = format!("{}{STATE_SUFFIX}", req.id);
        let me = format!("{} {}", self.me.0, self.me.1);
        let failed = |why: String| {
            let _ = write_lines(&self.root, &state_name, &format!("0 0 {me}\nexit 127\n"));
            why
        };
        let workdir = relative
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .fold(dir.clone(), |p, c| p.join(c));
        // The run's directory itself was made above.
        let made = match workdir == dir {
            true => Ok(()),
            false => fs::create_dir_all(&workdir),
        };
        let opened = made.and_then(|()| {
            // 0644: a job running as another user writes its log only
            // through the descriptors it inherits, and cannot change the
            // log's state attribute.
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o644)
                .open(self.root.join(format!("{}{LOG_SUFFIX}", req.id)))
        });
        let owned = req.run_as.map_or(Ok(()), |u| {
            // The run's directories belong to the job's user, so it can write
            // there; its log is written through the descriptors it inherits.
            let mut at = dir.clone();
            std::os::unix::fs::chown(&at, Some(u.uid), Some(u.gid))?;
            for c in relative
                .components()
                .filter(|c| matches!(c, Component::Normal(_)))
            {
                at.push(c);
                std::os::unix::fs::chown(&at, Some(u.uid), Some(u.gid))?;
            }
            Ok(())
        });
        let opened = opened.and_then(|l| owned.map(|()| l));
        let mut log = match opened {
            Ok(l) => l,
            Err(e) => {
                return Reply::Error(failed(format!("cannot prepare {}: {e}", dir.display())))
            }
        };
        let (out, err) = match (log.try_clone(), log.try_clone()) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => {
                return Reply::Error(failed(format!("cannot open the log: {e}")))
            }
        };
        // Spawned without the lock (starts on several connections proceed at
        // once); a job the reaper collects before it is registered below has
        // its code left in `early`.
        let mut command = Command::new(program);
        if let Some(u) = req.run_as {
            // As root, std also drops the supplementary groups.
            command.uid(u.uid).gid(u.gid);
        }
        let before = boot_clock_ns();
        let spawned = command
            .args(args)
            .current_dir(&workdir)
            .env_clear()
            .envs(req.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn();
        let after = boot_clock_ns();
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = writeln!(log, "bosun: cannot start {program:?}: {e}");
                failed(String::new());
                return Reply::Started;
            }
        };
        let pid = child.id();
        // Reaped by the reaper thread with waitpid, not through `child`.
        drop(child);
        let started = start_tick_between(before, after)
            .or_else(|| start_time(pid))
            .unwrap_or(0);
        let line = format!("{pid} {started} {me}\n");
        // The state goes into the log's attribute: no file to create. A
        // filesystem without user attributes gets the state file.
        let in_xattr = !self.state_files
            && rustix::fs::fsetxattr(&log, STATE_XATTR, line.as_bytes(), XattrFlags::empty())
                .is_ok();
        if !in_xattr {
            if let Err(e) = write_lines(&self.root, &state_name, &line) {
                let _ = writeln!(log, "bosun: cannot record the job's pid: {e}");
            }
        }
        let job = Job {
            id: req.id.clone(),
            line,
            in_xattr,
        };
        let mut state = self.lock();
        match state.early.remove(&(pid as i32)) {
            Some(code) => {
                let mut line = String::new();
                self.ended(&job, code, &mut line);
                tell(&mut state, &line);
            }
            None => {
                state.children.insert(pid as i32, job);
                // Under the lock: the reaper checks for children under it too.
                self.spawned.notify_one();
            }
        }
        drop(state);
        if req.want_pid {
            Reply::Spawned { pid }
        } else {
            Reply::Started
        }
    }

    /// Records that the job of run `id` ended with `code` in its state
    /// (the log's attribute or the state file), and appends the event for
    /// the subscribers to `events` (see [`tell`]).
    fn ended(&self, job: &Job, code: i32, events: &mut String) {
        let id = &job.id;
        let exit = format!("exit {code}\n");
        let whole = format!("{}{exit}", job.line);
        let written = job.in_xattr
            && rustix::fs::setxattr(
                self.root.join(format!("{id}{LOG_SUFFIX}")),
                STATE_XATTR,
                whole.as_bytes(),
                XattrFlags::empty(),
            )
            .is_ok();
        if !written {
            // Readers look at the state file when the attribute has no exit.
            let state_name = format!("{id}{STATE_SUFFIX}");
            let _ = if job.in_xattr {
                write_lines(&self.root, &state_name, &whole)
            } else {
                append_line(&self.root.join(state_name), &exit)
            };
        }
        if let Ok(line) = serde_json::to_string(&Event::Ended {
            id: id.to_string(),
            code,
        }) {
            events.push_str(&line);
            events.push('\n');
        }
    }

    /// Records the end of a reaped job (`pid` with wait status `status`),
    /// appending its event to `events`; one whose start has not registered
    /// it yet is left for the start.
    fn reaped(
        &self,
        state: &mut State,
        pid: rustix::process::Pid,
        status: rustix::process::WaitStatus,
        events: &mut String,
    ) {
        let code = status
            .exit_status()
            .unwrap_or_else(|| 128 + status.terminating_signal().unwrap_or(0));
        let pid = pid.as_raw_nonzero().get();
        match state.children.remove(&pid) {
            Some(job) => self.ended(&job, code, events),
            // Its start has not registered it yet.
            None => {
                state.early.insert(pid, code);
            }
        }
    }

    /// Reaps every ended job: writes its exit code and tells the
    /// subscribers. The jobs that have ended by the time one is reaped are
    /// reaped with it and told in one write (a daemon's events thread then
    /// wakes once for them).
    fn reap(&self) {
        let mut events = String::new();
        loop {
            match rustix::process::wait(rustix::process::WaitOptions::empty()) {
                Ok(Some((pid, status))) => {
                    let mut state = self.lock();
                    self.reaped(&mut state, pid, status, &mut events);
                    while let Ok(Some((pid, status))) =
                        rustix::process::wait(rustix::process::WaitOptions::NOHANG)
                    {
                        self.reaped(&mut state, pid, status, &mut events);
                    }
                    tell(&mut state, &events);
                    events.clear();
                    self.exit_if_idle(&state);
                }
                Ok(None) => {}
                Err(rustix::io::Errno::CHILD) => {
                    let state = self.lock();
                    let _unused = self
                        .spawned
                        .wait_while(state, |s| s.children.is_empty())
                        .unwrap_or_else(|e| e.into_inner());
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn serve(self: &Arc<Self>, stream: UnixStream, number: u64) {
        let mut reader = match stream.try_clone() {
            Ok(r) => BufReader::new(r),
            Err(_) => return self.disconnected(number),
        };
        let mut writer = stream;
        // Replies wait while more requests are already read (a daemon that
        // sends a pass's starts at once gets their replies in one write, and
        // wakes once); a lone request is answered at once.
        let mut out = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = line.trim_end_matches('\n');
            let reply = match serde_json::from_str::<Request>(line) {
                Ok(Request::Start(req)) => Some(self.start(&req)),
                Ok(Request::Subscribe) => {
                    if let Ok(mut s) = writer.try_clone() {
                        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                        let mut ack = serde_json::to_string(&Event::Subscribed).unwrap_or_default();
                        ack.push('\n');
                        // Registered and acknowledged under the lock: no
                        // report of an end can come before the ack.
                        let mut state = self.lock();
                        if s.write_all(ack.as_bytes()).is_ok() {
                            state.subscribers.insert(number, s);
                        }
                    }
                    None
                }
                Err(e) => Some(Reply::Error(format!("bad request: {e}"))),
            };
            if let Some(reply) = reply {
                out.push_str(&serde_json::to_string(&reply).unwrap_or_default());
                out.push('\n');
            }
            if out.is_empty() || reader.buffer().contains(&b'\n') {
                continue;
            }
            if writer.write_all(out.as_bytes()).is_err() {
                break;
            }
            out.clear();
        }
        self.disconnected(number);
    }

    fn disconnected(&self, number: u64) {
        let mut state = self.lock();
        state.connections -= 1;
        state.subscribers.remove(&number);
        self.exit_if_idle(&state);
    }
}

/// Sends `events` (whole lines) to every subscriber. A subscriber that
/// cannot take them within its write timeout is dropped and its connection
/// shut down, so its daemon sees that reports may be missing (it
/// resubscribes).
fn tell(state: &mut State, events: &str) {
    if events.is_empty() {
        return;
    }
    state.subscribers.retain(|_, s| {
        let sent = s.write_all(events.as_bytes()).is_ok();
        if !sent {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        sent
    });
}

/// Runs the supervisor; returns its exit code (it normally exits from within,
/// once idle).
pub fn run(args: &ShimArgs) -> i32 {
    match supervise(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("bosun run-shim: {e}");
            2
        }
    }
}

fn supervise(args: &ShimArgs) -> std::io::Result<()> {
    // Our own session: signals aimed at the daemon's process group pass us by.
    let _ = rustix::process::setsid();
    // The jobs get the limit of open files the daemon started with (it
    // raised its own, and ours with it).
    if let Err(e) = bosun_base::process::restore_open_files_limit() {
        eprintln!("bosun run-shim: cannot restore the limit of open files: {e}");
    }
    fs::create_dir_all(&args.root)?;
    let lock = File::create(args.root.join(LOCK))?;
    // Only one supervisor per cluster. One that is exiting holds the lock a
    // moment longer: wait for it rather than give up at once.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            // Another supervisor serves this cluster.
            Err(_) => return Ok(()),
        }
    }
    let socket = args.root.join(SOCKET);
    let _ = fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|e| {
        std::io::Error::other(format!(
            "cannot listen on {}: {e} (a Unix socket path has at most 107 bytes)",
            socket.display()
        ))
    })?;
    fs::set_permissions(&socket, fs::Permissions::from_mode(0o600))?;
    let pid = std::process::id();
    let sup = Arc::new(Supervisor {
        root: args.root.clone(),
        me: (pid, start_time(pid).unwrap_or(0)),
        state_files: args.state_files,
        state: Mutex::new(State {
            children: HashMap::new(),
            early: HashMap::new(),
            connections: 0,
            subscribers: HashMap::new(),
        }),
        spawned: Condvar::new(),
    });
    let reaper = sup.clone();
    std::thread::spawn(move || reaper.reap());
    // A supervisor nobody connects to (its daemon died at once) does not linger.
    let idle = sup.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(10));
        let state = idle.lock();
        idle.exit_if_idle(&state);
    });
    let mut number = 0u64;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        number += 1;
        sup.lock().connections += 1;
        let serving = sup.clone();
        let n = number;
        let spawned = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || serving.serve(stream, n));
        if spawned.is_err() {
            sup.disconnected(n);
        }
    }
    drop(lock);
    Ok(())
}

#[cfg(test)]
mod run_as_tests {
    use super::RunAs;

    #[test]
    fn run_as_takes_numbers_or_a_passwd_name() {
        let passwd =
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65533:nobody:/:/usr/sbin/nologin\n";
        assert_eq!(
            RunAs::resolve("nobody", passwd),
            Ok(RunAs {
                uid: 65534,
                gid: 65533
            })
        );
        assert_eq!(
            RunAs::resolve("1000", passwd),
            Ok(RunAs {
                uid: 1000,
                gid: 1000
            })
        );
        assert_eq!(
            RunAs::resolve("1000:50", passwd),
            Ok(RunAs { uid: 1000, gid: 50 })
        );
        assert!(RunAs::resolve("ghost", passwd)
            .unwrap_err()
            .to_string()
            .contains("no such user"));
        assert!(RunAs::resolve("a:b", passwd)
            .unwrap_err()
            .to_string()
            .contains("UID:GID"));
    }
}

#[cfg(test)]
mod start_tick_tests {
    use super::{boot_clock_ns, start_tick_between, start_time};
    use std::process::{Command, Stdio};

    #[test]
    fn a_start_time_taken_from_the_clock_is_the_one_proc_shows() {
        let mut known = 0;
        for _ in 0..200 {
            let before = boot_clock_ns();
            let mut child = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("cat runs");
            let after = boot_clock_ns();
            let proc = start_time(child.id()).expect("the child is alive");
            if let Some(tick) = start_tick_between(before, after) {
                known += 1;
                assert_eq!(tick, proc, "spawned between {before} and {after} ns");
            }
            drop(child.stdin.take());
            child.wait().unwrap();
        }
        // Most spawns fall within one tick (10 ms): the clock answered for
        // some (a bound low enough for a loaded machine's slow spawns).
        assert!(
            known >= 20,
            "only {known} of 200 start times from the clock"
        );
    }

    #[test]
    fn a_spawn_across_a_tick_is_left_to_proc() {
        let tick = 1_000_000_000 / rustix::param::clock_ticks_per_second() as u128;
        let base = 1_000 * tick;
        assert_eq!(
            start_tick_between(base + tick / 2, base + tick / 2 + 1_000),
            Some(1_000)
        );
        assert_eq!(start_tick_between(base + tick - 10, base + tick + 10), None);
        assert_eq!(start_tick_between(base + 10, base + 20), None);
    }
}
