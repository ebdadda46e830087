//! What the controller needs from a build cluster's executor, and a simulated
//! executor whose runs end after a set (simulated) time: with a
//! [`ManualClock`](bosun_store::clock::ManualClock), the whole daemon logic
//! (scheduler, controller, store) runs a day in seconds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bosun_store::clock::Clock;
use jiff::{SignedDuration, Timestamp};

use crate::local::{JobProcess, LocalError, LocalExecutor, ProcessState};

/// A build cluster's executor.
pub trait Executor: Send + Sync {
    /// Starts a run; starting one that was started before does nothing.
    fn start(&self, run_id: &str, job: &JobProcess) -> Result<(), LocalError>;
    /// Where a run stands.
    fn status(&self, run_id: &str) -> ProcessState;
    /// Aborts a run (gracefully first, for `grace`); returns once it ended.
    fn abort(&self, run_id: &str, grace: Duration) -> ProcessState;
    /// Deletes a finished run's files.
    fn remove(&self, run_id: &str) -> Result<(), LocalError>;
    /// The run's log file, if the executor keeps one.
    fn log_path(&self, run_id: &str) -> Option<PathBuf>;
    /// Whether runs start as pods ([`Executor::start_pod`]) rather than
    /// processes.
    fn runs_pods(&self) -> bool {
        false
    }
    /// Starts a run as `pod` (Kubernetes clusters); starting one that was
    /// started before does nothing.
    fn start_pod(
        &self,
        _run_id: &str,
        _pod: &k8s_openapi::api::core::v1::Pod,
    ) -> Result<(), LocalError> {
        Err(LocalError::Unsupported(
            "this cluster runs processes, not pods".into(),
        ))
    }
    /// Starts a run's pod again in place of its lost one: deletes the old
    /// pod, waits until its name is free, then creates `pod`. Blocking.
    fn revive_pod(
        &self,
        run_id: &str,
        pod: &k8s_openapi::api::core::v1::Pod,
    ) -> Result<(), LocalError> {
        self.start_pod(run_id, pod)
    }
}

impl Executor for LocalExecutor {
    fn start(&self, run_id: &str, job: &JobProcess) -> Result<(), LocalError> {
        LocalExecutor::start(self, run_id, job)
    }

    fn status(&self, run_id: &str) -> ProcessState {
        LocalExecutor::status(self, run_id)
    }

    fn abort(&self, run_id: &str, grace: Duration) -> ProcessState {
        LocalExecutor::abort(self, run_id, grace)
    }

    fn remove(&self, run_id: &str) -> Result<(), LocalError> {
        LocalExecutor::remove(self, run_id)
    }

    fn log_path(&self, run_id: &str) -> Option<PathBuf> {
        Some(LocalExecutor::log_path(self, run_id))
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
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
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
    fn start(&self, run_id: &str, _job: &JobProcess) -> Result<(), LocalError> {
        let now = self.clock.now();
        self.runs().entry(run_id.to_string()).or_insert((now, None));
        Ok(())
    }

    fn status(&self, run_id: &str) -> ProcessState {
        match self.runs().get(run_id) {
            None => ProcessState::Lost,
            Some((_, Some(code))) => ProcessState::Exited { code: *code },
            Some((t, None)) if self.clock.now() >= *t + self.duration => {
                ProcessState::Exited { code: 0 }
            }
            Some(_) => ProcessState::Running { pid: 0 },
        }
    }

    fn abort(&self, run_id: &str, _grace: Duration) -> ProcessState {
        if let Some((_, code)) = self.runs().get_mut(run_id) {
            code.get_or_insert(128 + 15);
        }
        self.status(run_id)
    }

    fn remove(&self, run_id: &str) -> Result<(), LocalError> {
        self.runs().remove(run_id);
        Ok(())
    }

    fn log_path(&self, _run_id: &str) -> Option<PathBuf> {
        None
    }
}
