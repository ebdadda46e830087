//! How a command of the `bosun` binary ends. Every command returns an
//! [`Outcome`]: `Ok(())`, or [`Failed`] with its exit status and, unless the
//! command has told why already (a report on standard output, a daemon's
//! log, a job's own exit status), the message for standard error. The
//! binary's `main` turns it into the process's exit status ([`exit`]).

use std::fmt;
use std::process::ExitCode;

/// What a command returns.
pub type Outcome = Result<(), Failed>;

/// A command that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    status: u8,
    /// The line for standard error.
    message: Option<String>,
}

impl Failed {
    /// Exit status 1, with `message` for standard error (printed as
    /// `bosun: MESSAGE`).
    pub fn error(message: impl fmt::Display) -> Failed {
        Failed::with_line(1, format!("bosun: {message}"))
    }

    /// Exit status `status` (0 is taken as 1), with `line` printed as it is
    /// on standard error (a program that names itself: `bosun run-shim: …`).
    pub fn with_line(status: u8, line: impl Into<String>) -> Failed {
        Failed {
            status: status.max(1),
            message: Some(line.into()),
        }
    }

    /// Exit status `status` (0 is taken as 1), its reason told already.
    pub fn status(status: u8) -> Failed {
        Failed {
            status: status.max(1),
            message: None,
        }
    }

    /// An exit status of a program's own (a job's, a supervisor's): 0 is
    /// success, any other value is passed on (values outside 1..=255 as
    /// their low byte, as the kernel would; a low byte of 0 as 1).
    pub fn from_code(code: i32) -> Outcome {
        match code {
            0 => Ok(()),
            c => Err(Failed::status((c & 0xff) as u8)),
        }
    }

    /// The process's exit status.
    pub fn exit_status(&self) -> u8 {
        self.status
    }

    /// The line for standard error, if the command has not told why.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl From<std::io::Error> for Failed {
    /// A report that could not be written: exit status 2 (standard output
    /// is gone; there is nobody to tell).
    fn from(_: std::io::Error) -> Failed {
        Failed::status(2)
    }
}

/// The process's exit status for `outcome`, its line for standard error
/// (if any) written first.
pub fn exit(outcome: Outcome) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failed) => {
            if let Some(m) = failed.message() {
                eprintln!("{m}");
            }
            ExitCode::from(failed.exit_status())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_programs_own_code_is_passed_on_as_the_kernel_would() {
        assert_eq!(Failed::from_code(0), Ok(()));
        assert_eq!(Failed::from_code(1).unwrap_err().exit_status(), 1);
        assert_eq!(Failed::from_code(130).unwrap_err().exit_status(), 130);
        // entrypoint's -1 for a test killed by a signal.
        assert_eq!(Failed::from_code(-1).unwrap_err().exit_status(), 255);
        // A code whose low byte is 0 still fails.
        assert_eq!(Failed::from_code(256).unwrap_err().exit_status(), 1);
    }

    #[test]
    fn an_error_says_why_and_a_status_does_not() {
        let e = Failed::error("cannot reach the daemon");
        assert_eq!(
            (e.exit_status(), e.message()),
            (1, Some("bosun: cannot reach the daemon"))
        );
        let l = Failed::with_line(127, "bosun run-decorated: no options");
        assert_eq!(l.message(), Some("bosun run-decorated: no options"));
        let s = Failed::status(2);
        assert_eq!((s.exit_status(), s.message()), (2, None));
        assert_eq!(
            Failed::status(0).exit_status(),
            1,
            "a failure never exits 0"
        );
    }
}
