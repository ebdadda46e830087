//! What a decorated local run is given: the refs to clone, the test command
//! to wrap, the decoration config's timeout and grace period, and the
//! ProwJob document to lay out beside its artifacts. The local executor hands
//! it to `bosun run-decorated` as JSON in [`OPTIONS_ENV`].

use std::path::PathBuf;
use std::time::Duration;

use bosun_config::types::Refs;
use serde::{Deserialize, Serialize};

use crate::artifacts::ProwJob;

/// The environment variable `bosun run-decorated` reads its options from
/// (removed from the test process's environment).
pub const OPTIONS_ENV: &str = "BOSUN_DECORATED_OPTIONS";

/// entrypoint's timeout when none is set (Prow's `DefaultTimeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);

/// entrypoint's grace period when none is set (Prow's
/// `DefaultGracePeriod`).
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(15);

/// The directory of a run's job-path files (`started.json`, `build-log.txt`,
/// `artifacts/`, ...), relative to the run's directory.
pub const LOGS_DIR: &str = "logs";

/// The directory a run's refs are cloned under (its `GOPATH`), relative to
/// the run's directory.
pub const GOPATH_DIR: &str = "go";

/// The options a `bosun run-*` subcommand was given as JSON in the variable
/// `name`, which is then removed from this process's environment (the job's
/// processes get the run's environment without them). Call it before any
/// other thread starts.
pub fn take_options<T: serde::de::DeserializeOwned>(name: &str) -> Result<T, String> {
    let json = std::env::var(name).map_err(|_| format!("{name} is not set"))?;
    let options = serde_json::from_str(&json).map_err(|e| format!("{name} is not valid: {e}"))?;
    std::env::remove_var(name);
    Ok(options)
}

/// A decorated run's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DecoratedJob {
    /// The test container's `command` followed by its `args`.
    pub args: Vec<String>,
    /// The refs to clone: the run's `refs` (if any) first, then its
    /// `extra_refs`.
    pub refs: Vec<Refs>,
    /// Whether `refs[0]` is the run's own `refs` (rather than its first
    /// `extra_refs`): `started.json`'s `repo-commit` comes from it.
    pub primary: bool,
    /// The container's `workingDir`, taken inside the run's directory, where
    /// the test runs when nothing is cloned (a clone's directory otherwise,
    /// as Prow sets it).
    pub working_dir: Option<String>,
    /// `decoration_config.skip_cloning`.
    pub skip_cloning: bool,
    /// `decoration_config.timeout` in nanoseconds (0: entrypoint's 2 h).
    pub timeout_ns: i64,
    /// `decoration_config.grace_period` in nanoseconds (0: 15 s).
    pub grace_period_ns: i64,
    /// The cluster's clone cache (set by the executor).
    pub mirror_root: Option<PathBuf>,
    /// The run as a ProwJob, written to `prowjob.json` (its status updated
    /// when the run ends).
    pub prowjob: Option<ProwJob>,
}
