//! The hook through which schedules are checked: the schedule engine implements
//! [`ScheduleCheck`]; this crate only knows that a periodic's `cron` and
//! `timezone` must be checked, and turns each [`ScheduleProblem`] into a
//! diagnostic.

use crate::diag::Severity;
use crate::model::Periodic;

/// A problem the schedule engine found in a periodic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleProblem {
    /// Error or warning.
    pub severity: Severity,
    /// The field concerned (`cron`, `timezone`, ...).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
}

/// Validates a periodic's schedule. The schedule engine implements it; the config
/// crate only knows that schedules must be checked.
pub trait ScheduleCheck: Send + Sync {
    /// Problems with the periodic's `cron` and `timezone`.
    fn check(&self, periodic: &Periodic) -> Vec<ScheduleProblem>;
}
