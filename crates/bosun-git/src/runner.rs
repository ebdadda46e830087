//! Running git (and the few other commands a clone needs) as Prow's
//! clonerefs runs them, and recording each command as Prow's
//! `clone.Command`: the working directory and environment written into the
//! command string, output and error captured, fetches retried with a
//! backoff, the environment scrubbed of what would point git elsewhere.
//! Shared by the clone of a decorated run (`bosun_injob::clone`) and
//! [`crate::mirror`].

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use bosun_job::gojson::{empty_str, is_zero};

/// One command of a clone record: Prow's `clone.Command`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    /// `PWD=DIR ENV COMMAND ARGS`.
    pub command: String,
    /// Its stdout and stderr, interleaved as written.
    pub output: String,
    /// Why it failed (`exit status 1`); empty when it succeeded.
    pub error: String,
    /// How long it ran, retries and their delays included.
    pub duration: Duration,
}

/// A clone stopped at a failed command (recorded in the runner).
pub struct Failed;

/// Which git configuration a command sees (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Works on the local repository only: no system or user configuration.
    Local,
    /// Reaches a remote: this machine's git configuration applies.
    Remote,
}

/// A command to run and record.
#[derive(Debug, Clone)]
pub struct Step {
    /// Its working directory.
    pub dir: PathBuf,
    /// Extra `NAME=VALUE` environment, also written into the record.
    pub env: Vec<String>,
    /// The program (`git`, `mkdir`).
    pub program: &'static str,
    /// Its arguments.
    pub args: Vec<String>,
    /// Which git configuration it sees.
    pub scope: Scope,
    /// Whether it is retried with the fetch backoff.
    pub retry: bool,
}

/// Variables that would point git at another repository, configuration or
/// identity than the clone's; never passed on.
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_SHALLOW_FILE",
    "GIT_GRAFT_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_CONFIG",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
];

/// Runs [`Step`]s and keeps the record of those that count.
pub struct Runner<'a> {
    /// The recorded commands so far.
    pub commands: Vec<Command>,
    backoff: &'a [Duration],
    env: &'a [String],
}

impl<'a> Runner<'a> {
    /// A runner retrying fetches after each delay of `backoff`, giving
    /// every command `env` (`NAME=VALUE`) besides its own.
    pub fn new(backoff: &'a [Duration], env: &'a [String]) -> Self {
        Runner {
            commands: Vec::new(),
            backoff,
            env,
        }
    }

    /// Runs `step` (with retries if it asks for them) and records it; its
    /// output, or [`Failed`] when it failed.
    pub fn run(&mut self, step: Step) -> Result<String, Failed> {
        let start = Instant::now();
        let mut result = self.execute(&step);
        if step.retry {
            for delay in self.backoff {
                if result.1.is_empty() {
                    break;
                }
                std::thread::sleep(*delay);
                result = self.execute(&step);
            }
        }
        let (output, error) = result;
        self.commands.push(Command {
            command: self.describe(&step),
            output: output.clone(),
            error: error.clone(),
            duration: start.elapsed(),
        });
        if error.is_empty() {
            Ok(output)
        } else {
            Err(Failed)
        }
    }

    /// Records a step of bosun's own that failed (`bosun: WHAT`, no
    /// process ran), and fails.
    pub fn fail(&mut self, what: String, error: String) -> Failed {
        self.commands.push(Command {
            command: what,
            error,
            ..Command::default()
        });
        Failed
    }

    /// Runs `step` once without recording it; its output, or its output
    /// and error when it failed.
    pub fn quiet(&self, step: &Step) -> Result<String, String> {
        let (output, error) = self.execute(step);
        if error.is_empty() {
            Ok(output)
        } else {
            Err(format!("{error}: {output}"))
        }
    }

    /// The recorded form of `step`: `PWD=DIR ENV PROGRAM ARGS`.
    fn describe(&self, step: &Step) -> String {
        let env: Vec<&str> = self
            .env
            .iter()
            .chain(&step.env)
            .map(String::as_str)
            .collect();
        format!(
            "PWD={} {} {} {}",
            step.dir.display(),
            env.join(" "),
            step.program,
            step.args.join(" ")
        )
    }

    /// Runs `step` once: its combined output and its error (empty on
    /// success).
    fn execute(&self, step: &Step) -> (String, String) {
        let mut cmd = std::process::Command::new(step.program);
        cmd.args(&step.args).current_dir(&step.dir);
        scrub(&mut cmd, step.scope);
        for pair in self.env.iter().chain(&step.env) {
            match pair.split_once('=') {
                Some((k, v)) => cmd.env(k, v),
                None => cmd.env_remove(pair),
            };
        }
        let (mut reader, writer) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => return (String::new(), e.to_string()),
        };
        let stderr = match writer.try_clone() {
            Ok(w) => w,
            Err(e) => return (String::new(), e.to_string()),
        };
        cmd.stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(stderr);
        let spawned = cmd.spawn();
        // The pipe's write ends must be closed here, or the read below never
        // sees the end of the output.
        drop(cmd);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => return (String::new(), spawn_error(step.program, &step.dir, &e)),
        };
        let mut output = Vec::new();
        let _ = reader.read_to_end(&mut output);
        let error = match child.wait() {
            Ok(status) => exit_error(status),
            Err(e) => e.to_string(),
        };
        (String::from_utf8_lossy(&output).into_owned(), error)
    }
}

/// Keeps `cmd` from what would point git at another repository,
/// configuration or identity, and from prompting; under [`Scope::Local`] it
/// sees no system or user configuration either.
pub(crate) fn scrub(cmd: &mut std::process::Command, scope: Scope) {
    for name in SCRUBBED {
        cmd.env_remove(name);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    if scope == Scope::Local {
        cmd.env_remove("GIT_CONFIG_PARAMETERS")
            .env_remove("GIT_CONFIG_COUNT")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
    }
}

/// Why a process could not start, in Go's `exec` words where they exist.
fn spawn_error(program: &str, dir: &Path, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound && !dir.is_dir() {
        format!("chdir {}: no such file or directory", dir.display())
    } else if e.kind() == std::io::ErrorKind::NotFound {
        format!("exec: {program:?}: executable file not found in $PATH")
    } else {
        format!("fork/exec {program}: {e}")
    }
}

/// A signal's name as Go prints it (`interrupt`, `terminated`, `killed`).
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        _ => return format!("signal {sig}"),
    };
    name.into()
}

/// A failed exit status as Go's `ProcessState.String()` prints it (`exit
/// status 1`, `signal: killed`); empty for success.
pub fn exit_error(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return String::new();
    }
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => {
            let core = if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            };
            format!("signal: {}{core}", signal_name(sig))
        }
        (None, None) => status.to_string(),
    }
}

/// A duration in Go's nanoseconds (saturating).
pub fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Prow's `clone.Command` as JSON.
#[derive(Serialize)]
struct CommandJson<'a> {
    command: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    output: &'a str,
    #[serde(skip_serializing_if = "empty_str")]
    error: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    duration: i64,
}

impl Serialize for Command {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CommandJson {
            command: &self.command,
            output: &self.output,
            error: &self.error,
            duration: nanos(self.duration),
        }
        .serialize(s)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CommandIn {
    command: String,
    output: String,
    error: String,
    duration: i64,
}

/// Go's nanoseconds as a duration (negative: zero).
pub fn from_nanos(n: i64) -> Duration {
    Duration::from_nanos(n.max(0) as u64)
}

impl From<CommandIn> for Command {
    fn from(c: CommandIn) -> Self {
        Command {
            command: c.command,
            output: c.output,
            error: c.error,
            duration: from_nanos(c.duration),
        }
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        CommandIn::deserialize(d).map(Command::from)
    }
}

/// Reads a `FETCH_HEAD` file's lines as (object, flag, description).
pub fn fetch_head_lines(path: &Path) -> Vec<(String, String, String)> {
    let Ok(text) = fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, '\t');
            Some((
                parts.next()?.to_string(),
                parts.next()?.to_string(),
                parts.next()?.to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn exit_errors_read_as_go_writes_them() {
        assert_eq!(exit_error(ExitStatus::from_raw(0)), "");
        assert_eq!(
            exit_error(ExitStatus::from_raw(128 << 8)),
            "exit status 128"
        );
        assert_eq!(exit_error(ExitStatus::from_raw(9)), "signal: killed");
        assert_eq!(exit_error(ExitStatus::from_raw(2)), "signal: interrupt");
    }
}
