//! The configuration's schedule checks: every periodic's `cron` and `timezone`
//! are validated by the same parser that fires them.

use bosun_config::validate::{ScheduleCheck, ScheduleProblem};
use bosun_config::{Periodic, Severity};

use crate::cron::{zone, ParseOptions, Schedule};

/// Implements [`ScheduleCheck`] for `bosun check` and the daemon.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigScheduleCheck;

impl ScheduleCheck for ConfigScheduleCheck {
    fn check(&self, p: &Periodic) -> Vec<ScheduleProblem> {
        let mut out = Vec::new();
        let tz = p.kind.timezone.as_deref();
        if let Some(name) = tz {
            if let Err(e) = zone(name) {
                out.push(ScheduleProblem {
                    severity: Severity::Error,
                    field: "timezone",
                    message: format!("invalid timezone in periodic {}: {e}", p.base.name),
                    hint: Some(
                        "use an IANA zone name such as America/New_York, Europe/Berlin or UTC"
                            .into(),
                    ),
                });
                return out;
            }
        }
        let Some(cron) = p.kind.cron.as_deref().filter(|c| !c.is_empty()) else {
            if tz.is_some() {
                out.push(ScheduleProblem {
                    severity: Severity::Warning,
                    field: "timezone",
                    message: "timezone applies only to cron schedules".into(),
                    hint: None,
                });
            }
            return out;
        };
        let identity = p.identity();
        match Schedule::parse(cron, ParseOptions { timezone: tz, identity: Some(&identity) }) {
            Err(e) => out.push(ScheduleProblem {
                severity: Severity::Error,
                field: "cron",
                message: format!("invalid cron string {cron} in periodic {}: {e}", p.base.name),
                hint: Some("fields: [second] minute hour day-of-month month day-of-week, or @hourly, @daily, @every 1h, ...".into()),
            }),
            Ok(s) if s.never_fires() => out.push(ScheduleProblem {
                severity: Severity::Warning,
                field: "cron",
                message: format!("cron {cron:?} never fires: no calendar date matches it"),
                hint: Some("bosun will never run this periodic (a common way to disable a job)".into()),
            }),
            Ok(_) => {}
        }
        out
    }
}
