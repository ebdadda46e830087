//! Children that do not outlive their parent, and the limit of open files.

use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{getpid, getppid, set_parent_process_death_signal, Signal};

/// Makes the child `cmd` starts get SIGKILL when this process (the thread
/// that spawns it, as Linux counts it) ends, so a job's processes never
/// outlive the program that runs them. A parent that ended before the child
/// could ask for the signal makes the spawn fail (`ESRCH`): no orphan is
/// left running.
#[allow(unsafe_code)] // The one `unsafe` block: see below.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = getpid();
    // SAFETY: the closure makes two system calls and builds an error from a
    // constant, all async-signal-safe, as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // This process may have ended before the line above took
            // effect; then no signal would come.
            if getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        })
    }
}

/// The soft limit of open files this process had before
/// [`raise_open_files_limit`] raised it.
static ORIGINAL_OPEN_FILES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// The environment variable that hands a process the soft limit of open
/// files its own children should have ([`restore_open_files_limit`]).
pub const OPEN_FILES_ENV: &str = "BOSUN_OPEN_FILES";

/// Raises this process's soft limit of open files to its hard limit, as Go
/// programs do at start (a daemon following thousands of pods holds a
/// stream and a file open for each, far over the usual soft limit of
/// 1,024); returns the limit it had, when raised. Children that should have
/// the usual limit get it back from [`original_open_files_limit`] (many
/// programs still use `select`, which cannot take descriptors over 1,023).
pub fn raise_open_files_limit() -> std::io::Result<Option<u64>> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    let (Some(current), Some(maximum)) = (limit.current, limit.maximum) else {
        return Ok(None);
    };
    if current >= maximum {
        return Ok(None);
    }
    limit.current = Some(maximum);
    setrlimit(Resource::Nofile, limit)?;
    let _ = ORIGINAL_OPEN_FILES.set(current);
    Ok(Some(current))
}

/// The soft limit of open files before [`raise_open_files_limit`] raised it,
/// if it did.
pub fn original_open_files_limit() -> Option<u64> {
    ORIGINAL_OPEN_FILES.get().copied()
}

/// Lowers this process's soft limit of open files to what [`OPEN_FILES_ENV`]
/// says, if it says (a supervisor started by a daemon that raised its own:
/// the jobs it starts inherit the usual limit).
pub fn restore_open_files_limit() -> std::io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let Some(want) = std::env::var(OPEN_FILES_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return Ok(());
    };
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_none_or(|c| c > want) {
        limit.current = Some(want);
        setrlimit(Resource::Nofile, limit)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn the_child_is_killed_when_the_thread_that_started_it_ends() {
        // Linux sends the signal when the spawning thread ends.
        let mut child = std::thread::spawn(|| {
            die_with_parent(Command::new("sleep").arg("30"))
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{status:?}");
    }

    #[test]
    fn without_it_the_child_lives_on() {
        let mut child = std::thread::spawn(|| Command::new("sleep").arg("30").spawn().unwrap())
            .join()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(child.try_wait().unwrap().is_none());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
