//! The run supervisor (`bosun run-shim --dir DIR [--workdir W] -- CMD ARGS...`).
//!
//! It starts its own session (so signals aimed at the daemon's process group do
//! not reach it), starts the job in a new process group with stdout and stderr
//! appended to `DIR/build-log.txt`, writes `DIR/pid` ("PID STARTTIME", the
//! child's pid and its start time in clock ticks since boot, to recognise the
//! process after a daemon restart) and, when the job ends, `DIR/exit_code` (the
//! exit status, or 128 + the signal number). Both files are written atomically
//! (temporary file, then rename), so a reader sees all or nothing. The job's
//! environment is exactly what the daemon passed to the shim (the daemon clears
//! it).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The log file of a run directory.
pub const LOG: &str = "build-log.txt";
/// The pid file of a run directory.
pub const PID: &str = "pid";
/// The exit-code file of a run directory.
pub const EXIT_CODE: &str = "exit_code";

/// Writes `contents` to `dir/name` atomically (temporary file, then rename): a
/// reader, or a daemon restarted after a crash, sees the whole file or none.
/// Not fsynced: the files describe live processes, which a power loss ends
/// anyway; after one, a run whose exit code was not yet on disk ends in `error`
/// ("executor lost the process") rather than with its result.
pub fn write_atomic(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(contents.as_bytes())?;
    fs::rename(&tmp, dir.join(name))
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

/// Arguments of the shim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimArgs {
    /// The run directory.
    pub dir: PathBuf,
    /// The job's working directory.
    pub workdir: PathBuf,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// Runs the shim; returns its own exit code (0 when it recorded the job's end).
pub fn run(args: &ShimArgs) -> i32 {
    match supervise(args) {
        Ok(()) => 0,
        Err(e) => {
            // The daemon finds no exit_code and reports the run lost; say why.
            if let Ok(mut log) = OpenOptions::new()
                .create(true)
                .append(true)
                .open(args.dir.join(LOG))
            {
                let _ = writeln!(log, "bosun run-shim: {e}");
            }
            let _ = write_atomic(&args.dir, EXIT_CODE, "127\n");
            2
        }
    }
}

fn supervise(args: &ShimArgs) -> std::io::Result<()> {
    // Our own session: the daemon's terminal and process group signals pass us by.
    let _ = rustix::process::setsid();
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(args.dir.join(LOG))?;
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command"))?;
    let mut child = Command::new(program)
        .args(rest)
        .current_dir(&args.workdir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    let started = start_time(pid).unwrap_or(0);
    write_atomic(&args.dir, PID, &format!("{pid} {started}\n"))?;
    let status = child.wait()?;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    write_atomic(&args.dir, EXIT_CODE, &format!("{code}\n"))
}

/// Parses `--dir DIR [--workdir W] -- CMD ARGS...`.
pub fn parse_args(args: &[String]) -> Result<ShimArgs, String> {
    let mut dir = None;
    let mut workdir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = it.next().map(PathBuf::from),
            "--workdir" => workdir = it.next().map(PathBuf::from),
            "--" => {
                let command: Vec<String> = it.cloned().collect();
                let dir = dir.ok_or("--dir is required")?;
                return Ok(ShimArgs {
                    workdir: workdir.unwrap_or_else(|| dir.join("work")),
                    dir,
                    command,
                });
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Err("expected -- CMD ARGS...".into())
}
