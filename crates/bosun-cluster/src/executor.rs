//! What the controller needs from a build cluster's executor, in the
//! executor's own words: the [`Executor`] trait, what a process run is given
//! ([`JobProcess`]), where a run stands ([`RunStatus`]) and why a request
//! failed ([`ExecError`]). The local and Kubernetes executors implement it;
//! this module knows neither of them.
//!
//! Also a simulated executor whose runs end after a set (simulated) time:
//! with a [`ManualClock`](bosun_store::clock::ManualClock), the whole daemon
//! logic (scheduler, controller, store) runs a day in seconds.

use bosun_base::sync::Lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bosun_store::clock::Clock;

pub use crate::workload::{ClusterKind, Workload};
use jiff::{SignedDuration, Timestamp};

/// Why an executor could not do what it was asked.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ExecError {
    /// The job cannot run on this cluster (a local cluster: no command,
    /// several containers; a Kubernetes cluster: a process instead of a pod).
    #[error("{0}")]
    Unsupported(String),
    /// The cluster refused the request, and asking again would get the same
    /// answer: the run ends. A local run's directory or process that cannot
    /// be created; a request the Kubernetes API refuses (a 4xx).
    // Each executor words its own text (a local one says so).
    #[error("{0}")]
    Refused(String),
    /// The request failed for a reason that may pass (no answer in time, a
    /// lost connection, a server error): it may be tried again, as plank
    /// requeues a pod's creation.
    #[error("{0}")]
    Transient(String),
}

/// What a process run is given: one container's command, as a local
/// cluster runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobProcess {
    /// The container's `command` followed by its `args`.
    pub command: Vec<String>,
    /// The complete environment (the process gets nothing else).
    pub env: Vec<(String, String)>,
    /// The container's `workingDir`, taken inside the run's own directory.
    pub working_dir: Option<String>,
    /// A decorated run: `command` is the test command, which the executor
    /// runs under Prow's pod utilities (refs cloned first, the command
    /// wrapped with its timeout, Prow's artifact files laid out).
    pub decoration: Option<Box<bosun_job::job::DecoratedJob>>,
    /// A pipeline run: the executor runs the pipeline step by step (the
    /// `command` is unused), in the run's directory.
    pub pipeline: Option<Box<bosun_tekton::local::PipelineOptions>>,
}

/// Where a run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// The run exists but its job has not started running yet: a local start
    /// in progress, a pod pending (being scheduled, its images pulled) or
    /// not yet seen by the watch.
    Starting,
    /// A pod not running yet, with the instants plank's two pending
    /// timeouts count from: made at `created`, and, once a node took it
    /// (its `status.startTime`), `scheduled`. Which timeouts apply is the
    /// controller's decision (a job may set its own).
    PodPending {
        /// The pod's creation.
        created: Timestamp,
        /// When a node started it (`status.startTime`), if one has.
        scheduled: Option<Timestamp>,
    },
    /// The job runs as `pid` (0 for a pod).
    Running {
        /// The job's pid (also its process group).
        pid: u32,
    },
    /// The job has ended and its exit code is being recorded (a local job
    /// whose supervisor has not written the code yet).
    Ending,
    /// The job ended with this exit code (128 + signal when killed).
    Exited {
        /// The code.
        code: i32,
    },
    /// Neither the job nor its exit code can be found: "executor lost the process".
    Lost,
    /// The run cannot go on, for this reason (it ends in `error`): a pod
    /// killed for memory, deleted under bosun, ...
    Failed(String),
    /// The run's pod is gone through no fault of the job (evicted, its node
    /// lost, missing): it may be started again (a revival), for this reason.
    Revivable(String),
}

/// What a start's outcome is handed to ([`Executor::start_then`]).
pub type StartDone = Box<dyn FnOnce(Result<(), ExecError>) + Send>;

/// A build cluster's executor: it carries out the [`Workload`] a run was
/// given ([`Workload::for_run`]), follows it, stops and removes it.
pub trait Executor: Send + Sync {
    /// The kind of cluster: what [`Workload`]s it takes.
    fn kind(&self) -> ClusterKind {
        ClusterKind::Local
    }
    /// Starts a run's workload; starting one that was started before does
    /// nothing. A workload of another kind of cluster is
    /// [`ExecError::Unsupported`].
    fn start(&self, run_id: &str, workload: &Workload) -> Result<(), ExecError>;
    /// Starts a run's workload as [`Executor::start`] does, then hands the
    /// outcome to `done`, on whichever thread has it. An executor whose
    /// starts wait their turn (a Kubernetes cluster paces its creations)
    /// waits without holding the caller's thread; by default this is
    /// `start`, in the caller's.
    fn start_then(&self, run_id: &str, workload: &Workload, done: StartDone) {
        done(self.start(run_id, workload))
    }
    /// Starts several runs' workloads as [`Executor::start_then`] does,
    /// each outcome to its `done`. A local cluster sends them to its
    /// supervisor together, and has every outcome before it returns; by
    /// default they are started one after another.
    fn start_all_then(&self, starts: Vec<(&str, &Workload, StartDone)>) {
        for (run_id, workload, done) in starts {
            self.start_then(run_id, workload, done);
        }
    }
    /// Starts a run's workload again in place of its lost one (a
    /// Kubernetes cluster deletes the old pod and creates the new one once
    /// the old one is really gone, however long its grace period, the run
    /// being [`RunStatus::Starting`] meanwhile). A start by default.
    fn revive(&self, run_id: &str, workload: &Workload) -> Result<(), ExecError> {
        self.start(run_id, workload)
    }
    /// Where a run stands.
    fn status(&self, run_id: &str) -> RunStatus;
    /// Whether the next change of a run that stands at `status` will be
    /// reported by an event (the executor's change callback, which wakes
    /// the controller): the controller then reads the run's status again
    /// only when woken. `false` (the default) makes it look again every
    /// second while the run stands so.
    fn reports_change(&self, status: &RunStatus) -> bool {
        let _ = status;
        false
    }
    /// Aborts a run (gracefully first, for `grace`); returns once it ended.
    fn abort(&self, run_id: &str, grace: Duration) -> RunStatus;
    /// Aborts a pipeline run (a [`Workload::PipelineRun`]), found even if
    /// this executor has not seen it yet (a restarted daemon's executor
    /// before it has listed its cluster's pipeline runs).
    fn abort_pipeline(&self, run_id: &str, grace: Duration) -> RunStatus {
        self.abort(run_id, grace)
    }
    /// Deletes a finished run's files.
    fn remove(&self, run_id: &str) -> Result<(), ExecError>;
    /// Drops what the executor caches on this machine and nothing has used
    /// since `unused_since` (the local executor's clone mirrors); says what
    /// it removed. Nothing by default.
    fn prune_caches(&self, unused_since: Timestamp) -> Result<Vec<PathBuf>, ExecError> {
        let _ = unused_since;
        Ok(Vec::new())
    }
    /// The run's log file, if the executor keeps one.
    fn log_path(&self, run_id: &str) -> Option<PathBuf>;
    /// Whether the run's log file holds all it will get: `false` while a
    /// copy still writes it after the run has ended (a Kubernetes pod's log
    /// is copied from the API, behind the pod's state). The log endpoint
    /// follows an ended run's log until then. `true` by default (a log
    /// written by the run itself is whole once the run has ended).
    fn log_complete(&self, run_id: &str) -> bool {
        let _ = run_id;
        true
    }
    /// The directory holding the run's artifacts on this machine (a
    /// decorated run's `started.json`, `finished.json`, `build-log.txt` and
    /// `artifacts/`), if the executor keeps them locally; `None` for
    /// executors whose runs upload their artifacts elsewhere (Kubernetes).
    /// The directory may not exist yet. Its contents are written by the job
    /// and are untrusted.
    fn artifacts_dir(&self, _run_id: &str) -> Option<PathBuf> {
        None
    }
}

/// Runs that succeed `duration` after they start, on `clock`'s time.
pub struct SimulatedExecutor {
    clock: Arc<dyn Clock>,
    duration: SignedDuration,
    /// Start time and, once aborted, the exit code.
    runs: Mutex<HashMap<String, (Timestamp, Option<i32>)>>,
}

impl SimulatedExecutor {
    /// Runs last `duration` on `clock`.
    pub fn new(clock: Arc<dyn Clock>, duration: SignedDuration) -> Self {
        SimulatedExecutor {
            clock,
            duration,
            runs: Mutex::default(),
        }
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Timestamp, Option<i32>)>> {
        self.runs.locked()
    }

    /// When the next running run ends (for a simulation's event loop).
    pub fn next_end(&self) -> Option<Timestamp> {
        let now = self.clock.now();
        self.runs()
            .values()
            .filter(|(_, code)| code.is_none())
            .map(|(t, _)| *t + self.duration)
            .filter(|end| *end > now)
            .min()
    }
}

impl Executor for SimulatedExecutor {
    fn start(&self, run_id: &str, _workload: &Workload) -> Result<(), ExecError> {
        let now = self.clock.now();
        self.runs().entry(run_id.to_string()).or_insert((now, None));
        Ok(())
    }

    fn status(&self, run_id: &str) -> RunStatus {
        match self.runs().get(run_id) {
            None => RunStatus::Lost,
            Some((_, Some(code))) => RunStatus::Exited { code: *code },
            Some((t, None)) if self.clock.now() >= *t + self.duration => {
                RunStatus::Exited { code: 0 }
            }
            Some(_) => RunStatus::Running { pid: 0 },
        }
    }

    fn abort(&self, run_id: &str, _grace: Duration) -> RunStatus {
        if let Some((_, code)) = self.runs().get_mut(run_id) {
            code.get_or_insert(128 + 15);
        }
        self.status(run_id)
    }

    fn remove(&self, run_id: &str) -> Result<(), ExecError> {
        self.runs().remove(run_id);
        Ok(())
    }

    fn log_path(&self, _run_id: &str) -> Option<PathBuf> {
        None
    }
}
