//! Children that do not outlive their parent.

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
