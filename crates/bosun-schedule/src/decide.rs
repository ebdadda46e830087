//! Tick decisions: given a periodic's policies, its schedule state, what is known
//! of its previous runs, and the current instant, what happens now and when to look
//! again. A pure function: the scheduler applies the decision (creating runs under
//! their unique key, recording skips) and calls again at `wake_at` or when a run of
//! the periodic ends.
//!
//! Every scheduled time gets exactly one outcome: a run (attempt 0), or a skip with
//! its reason (`missed`, `overlap`, `paused`). Re-runs of a failed tick (Prow's
//! `retry`) are attempts 1..n of the same tick.

use jiff::Timestamp;

use crate::cron::Schedule;
use crate::hash::Hash;

/// How a periodic is triggered.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// A calendar (or `@every`) schedule: ticks are its fire times.
    Cron(Schedule),
    /// Prow's `interval`: this long after the previous run was created, once it
    /// has completed.
    Interval(u64),
    /// Prow's `minimum_interval`: this long after the previous run completed.
    MinimumInterval(u64),
}

/// What to do with ticks missed while bosun was down.
pub use bosun_config::types::CatchUp;
/// What to do with a tick while the previous run is still active.
pub use bosun_config::types::ConcurrencyPolicy;

/// Prow's `retry` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Re-runs per tick (Prow caps it at 10).
    pub attempts: u32,
    /// Wait after the previous attempt was created, in seconds.
    pub interval: u64,
    /// Re-run regardless of the previous attempt's result or completion.
    pub run_all: bool,
}

/// A periodic's scheduling policies.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The periodic's identity (seeds jitter).
    pub identity: std::sync::Arc<str>,
    /// When it fires.
    pub trigger: Trigger,
    /// Overlap handling (cron ticks; intervals always wait for the previous run).
    pub concurrency: ConcurrencyPolicy,
    /// Missed-tick handling (cron ticks).
    pub catch_up: CatchUp,
    /// A tick older than this is not started (seconds).
    pub starting_deadline: Option<u64>,
    /// Largest delay added to a tick, stable per (identity, tick) (seconds).
    pub jitter: Option<u64>,
    /// Re-runs of failed ticks.
    pub retry: Option<RetryPolicy>,
}

/// With `catch_up: skip` and no `starting_deadline`, a tick is on time (not missed)
/// when it is at most this late: the slack of a scheduler that was up.
pub const ON_TIME_GRACE_SECS: i64 = 60;

/// Persisted per periodic, beside (not in) the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleState {
    /// The latest tick that has an outcome.
    pub last_tick: Option<Timestamp>,
    /// When the current schedule was first seen; earlier ticks never count.
    pub first_seen: Timestamp,
    /// Paused: ticks are recorded as skipped.
    pub paused: bool,
    /// `queue_one`: the tick held until the active run ends.
    pub queued: Option<Timestamp>,
}

/// What the decision needs to know about a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunView {
    /// When it was created.
    pub created_at: Timestamp,
    /// When it reached a final state, if it has.
    pub completed_at: Option<Timestamp>,
    /// Its tick, for scheduled runs.
    pub scheduled_at: Option<Timestamp>,
    /// 0 for a tick's run, 1.. for re-runs.
    pub attempt: u32,
    /// Ended in `success`.
    pub succeeded: bool,
}

/// The periodic's runs as far as decisions go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runs {
    /// The most recently created run, whatever created it.
    pub last: Option<RunView>,
    /// Some run of it is not complete.
    pub active: bool,
}

/// Why a tick got no run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    /// It fell while bosun was down (or past `starting_deadline`).
    Missed,
    /// The previous run was still active (`forbid`, or an older `queue_one` tick).
    Overlap,
    /// The periodic was paused.
    Paused,
}

impl SkipReason {
    /// The reason as recorded and used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Missed => "missed",
            SkipReason::Overlap => "overlap",
            SkipReason::Paused => "paused",
        }
    }
}

/// One outcome to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Create the run of `tick` (attempt 0) or a re-run (attempt 1..).
    Run {
        /// The nominal tick (UTC); the run's identity with `attempt`.
        tick: Timestamp,
        /// Re-run number.
        attempt: u32,
    },
    /// Record ticks `first..=last` (`count` of them) as skipped.
    Skip {
        /// Earliest skipped tick.
        first: Timestamp,
        /// Latest skipped tick.
        last: Timestamp,
        /// How many ticks.
        count: u64,
        /// Why.
        reason: SkipReason,
    },
    /// `queue_one`: hold this tick until the active run ends.
    Queue {
        /// The held tick.
        tick: Timestamp,
    },
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Outcomes to record, oldest first.
    pub outcomes: Vec<Outcome>,
    /// `replace`: abort the active runs before creating the new one.
    pub abort_active: bool,
    /// When to decide again (besides when a run ends); `None`: only on events.
    pub wake_at: Option<Timestamp>,
}

/// The stable delay of `tick` within `jitter` seconds.
pub fn jitter_of(identity: &str, tick: Timestamp, jitter: Option<u64>) -> u64 {
    match jitter {
        Some(j) if j > 0 => {
            let mut h = Hash::from_seed(&format!("{identity}@{}", tick.as_second()));
            u64::from(h.next(u32::try_from(j + 1).unwrap_or(u32::MAX)))
        }
        _ => 0,
    }
}

fn plus(t: Timestamp, secs: u64) -> Timestamp {
    Timestamp::from_second(t.as_second().saturating_add(secs as i64)).unwrap_or(Timestamp::MAX)
}

/// After this many ticks in one decision, the walk jumps to two days before now;
/// the skipped range then still spans every missed tick but its count is a lower
/// bound (a schedule firing every second, down for 115 days).
pub const MAX_COUNTED_TICKS: u64 = 10_000_000;

/// Decides what happens now.
pub fn decide(p: &Policy, state: &ScheduleState, runs: &Runs, now: Timestamp) -> Decision {
    match &p.trigger {
        Trigger::Cron(s) => decide_cron(p, s, state, runs, now),
        Trigger::Interval(secs) => decide_interval(p, state, runs, now, *secs, false),
        Trigger::MinimumInterval(secs) => decide_interval(p, state, runs, now, *secs, true),
    }
}

fn decide_cron(
    p: &Policy,
    s: &Schedule,
    state: &ScheduleState,
    runs: &Runs,
    now: Timestamp,
) -> Decision {
    let mut d = Decision::default();
    let from = match state.last_tick {
        Some(t) if t > state.first_seen => t,
        _ => state.first_seen,
    };
    // Due ticks: after `from`, at or before now (a tick is due once its jitter passed).
    let due_at = |t: Timestamp| plus(t, jitter_of(&p.identity, t, p.jitter));
    let mut latest: Option<Timestamp> = None;
    let mut earlier: Option<(Timestamp, Timestamp, u64)> = None; // first, last, count
    let mut next = s.next_after(from);
    let mut walked = 0u64;
    while let Some(t) = next {
        if due_at(t) > now {
            break;
        }
        if let Some(prev) = latest {
            earlier = Some(match earlier {
                None => (prev, prev, 1),
                Some((f, _, c)) => (f, prev, c + 1),
            });
        }
        latest = Some(t);
        walked += 1;
        next = s.next_after(t);
        if walked == MAX_COUNTED_TICKS {
            // Jump close to now; the ticks jumped over stay inside the skipped
            // range, whose count becomes a lower bound.
            let near = Timestamp::from_second(now.as_second() - 2 * 86_400).unwrap_or(now);
            if near > t {
                next = s.next_after(near);
            }
        }
    }
    d.wake_at = next.map(due_at);

    // A queued tick runs once the active run has ended.
    if let Some(q) = state.queued {
        if !runs.active && latest.is_none() {
            d.outcomes.push(Outcome::Run {
                tick: q,
                attempt: 0,
            });
            return d;
        }
    }

    let Some(tick) = latest else {
        // Nothing due: maybe a re-run of the latest tick.
        retry(p, state, runs, now, &mut d);
        return d;
    };
    if state.paused {
        push_skip(&mut d, earlier, SkipReason::Paused);
        d.outcomes.push(Outcome::Skip {
            first: tick,
            last: tick,
            count: 1,
            reason: SkipReason::Paused,
        });
        return d;
    }
    push_skip(&mut d, earlier, SkipReason::Missed);
    let lateness = now.as_second() - due_at(tick).as_second();
    let limit = match (p.catch_up, p.starting_deadline) {
        (_, Some(deadline)) => deadline as i64,
        (CatchUp::Latest, None) => i64::MAX,
        (CatchUp::Skip, None) => ON_TIME_GRACE_SECS,
    };
    if lateness > limit {
        d.outcomes.push(Outcome::Skip {
            first: tick,
            last: tick,
            count: 1,
            reason: SkipReason::Missed,
        });
        return d;
    }
    if runs.active {
        match p.concurrency {
            ConcurrencyPolicy::Forbid => {
                d.outcomes.push(Outcome::Skip {
                    first: tick,
                    last: tick,
                    count: 1,
                    reason: SkipReason::Overlap,
                });
                return d;
            }
            ConcurrencyPolicy::QueueOne => {
                if let Some(q) = state.queued {
                    d.outcomes.push(Outcome::Skip {
                        first: q,
                        last: q,
                        count: 1,
                        reason: SkipReason::Overlap,
                    });
                }
                d.outcomes.push(Outcome::Queue { tick });
                return d;
            }
            ConcurrencyPolicy::Replace => d.abort_active = true,
            ConcurrencyPolicy::Allow => {}
        }
    } else if let Some(q) = state.queued {
        // The held tick is superseded by a newer one.
        d.outcomes.push(Outcome::Skip {
            first: q,
            last: q,
            count: 1,
            reason: SkipReason::Overlap,
        });
    }
    d.outcomes.push(Outcome::Run { tick, attempt: 0 });
    d
}

fn push_skip(d: &mut Decision, range: Option<(Timestamp, Timestamp, u64)>, reason: SkipReason) {
    if let Some((first, last, count)) = range {
        d.outcomes.push(Outcome::Skip {
            first,
            last,
            count,
            reason,
        });
    }
}

/// A re-run of the latest tick when its last attempt failed.
fn retry(p: &Policy, state: &ScheduleState, runs: &Runs, now: Timestamp, d: &mut Decision) {
    let (Some(r), Some(last)) = (p.retry, runs.last) else {
        return;
    };
    if state.paused || last.scheduled_at.is_none() || last.scheduled_at != state.last_tick {
        return;
    }
    let attempts = r.attempts.min(10);
    if last.attempt >= attempts {
        return;
    }
    if !r.run_all && (last.completed_at.is_none() || last.succeeded) {
        return;
    }
    let due = plus(last.created_at, r.interval);
    if due <= now {
        d.outcomes.push(Outcome::Run {
            tick: last.scheduled_at.expect("checked"),
            attempt: last.attempt + 1,
        });
    } else {
        d.wake_at = Some(d.wake_at.map_or(due, |w| w.min(due)));
    }
}

fn decide_interval(
    p: &Policy,
    state: &ScheduleState,
    runs: &Runs,
    now: Timestamp,
    secs: u64,
    minimum: bool,
) -> Decision {
    let mut d = Decision::default();
    let now_s = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let Some(last) = runs.last else {
        // Never ran: at once (as Prow), or the pause is recorded.
        let tick = now_s;
        if state.last_tick.is_some_and(|t| t >= tick) {
            return d;
        }
        d.outcomes.push(if state.paused {
            Outcome::Skip {
                first: tick,
                last: tick,
                count: 1,
                reason: SkipReason::Paused,
            }
        } else {
            Outcome::Run { tick, attempt: 0 }
        });
        d.wake_at = if state.paused {
            Some(plus(tick, secs))
        } else {
            None
        };
        return d;
    };
    // Intervals never overlap: wait for the previous run to end (as Prow).
    if runs.active {
        return d;
    }
    let base = if minimum {
        last.completed_at.unwrap_or(last.created_at)
    } else {
        last.created_at
    };
    let base = match state.last_tick {
        Some(t) if t > base => t,
        _ => base,
    };
    let tick = Timestamp::from_second(plus(base, secs).as_second()).unwrap_or(now);
    let due = plus(tick, jitter_of(&p.identity, tick, p.jitter));
    if due > now {
        d.wake_at = Some(due);
        retry(p, state, runs, now, &mut d);
        return d;
    }
    d.outcomes.push(if state.paused {
        Outcome::Skip {
            first: tick,
            last: tick,
            count: 1,
            reason: SkipReason::Paused,
        }
    } else {
        Outcome::Run { tick, attempt: 0 }
    });
    if state.paused {
        d.wake_at = Some(plus(tick, secs));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::ParseOptions;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cron_policy(spec: &str) -> Policy {
        Policy {
            identity: "job".into(),
            trigger: Trigger::Cron(Schedule::parse(spec, ParseOptions::default()).unwrap()),
            concurrency: ConcurrencyPolicy::Forbid,
            catch_up: CatchUp::Latest,
            starting_deadline: None,
            jitter: None,
            retry: None,
        }
    }

    fn state(last_tick: Option<&str>, first_seen: &str) -> ScheduleState {
        ScheduleState {
            last_tick: last_tick.map(ts),
            first_seen: ts(first_seen),
            paused: false,
            queued: None,
        }
    }

    fn run(
        created: &str,
        completed: Option<&str>,
        tick: Option<&str>,
        attempt: u32,
        ok: bool,
    ) -> RunView {
        RunView {
            created_at: ts(created),
            completed_at: completed.map(ts),
            scheduled_at: tick.map(ts),
            attempt,
            succeeded: ok,
        }
    }

    fn skip(first: &str, last: &str, count: u64, reason: SkipReason) -> Outcome {
        Outcome::Skip {
            first: ts(first),
            last: ts(last),
            count,
            reason,
        }
    }

    fn run_of(tick: &str) -> Outcome {
        Outcome::Run {
            tick: ts(tick),
            attempt: 0,
        }
    }

    #[test]
    fn on_time_tick_runs_and_sleeps_until_the_next() {
        let p = cron_policy("0 * * * *");
        let d = decide(
            &p,
            &state(Some("2026-01-01T09:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T10:00:00.2Z"),
        );
        assert_eq!(d.outcomes, vec![run_of("2026-01-01T10:00:00Z")]);
        assert_eq!(d.wake_at, Some(ts("2026-01-01T11:00:00Z")));
        // Nothing due yet.
        let d = decide(
            &p,
            &state(Some("2026-01-01T10:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T10:30:00Z"),
        );
        assert!(d.outcomes.is_empty());
        assert_eq!(d.wake_at, Some(ts("2026-01-01T11:00:00Z")));
    }

    #[test]
    fn downtime_runs_the_latest_tick_and_records_the_others() {
        let p = cron_policy("0 * * * *");
        let d = decide(
            &p,
            &state(Some("2026-01-01T09:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T13:20:00Z"),
        );
        assert_eq!(
            d.outcomes,
            vec![
                skip(
                    "2026-01-01T10:00:00Z",
                    "2026-01-01T12:00:00Z",
                    3,
                    SkipReason::Missed
                ),
                run_of("2026-01-01T13:00:00Z")
            ]
        );
        // Prow's behaviour: everything missed is skipped.
        let mut p = cron_policy("0 * * * *");
        p.catch_up = CatchUp::Skip;
        let d = decide(
            &p,
            &state(Some("2026-01-01T09:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T13:20:00Z"),
        );
        assert_eq!(
            d.outcomes,
            vec![
                skip(
                    "2026-01-01T10:00:00Z",
                    "2026-01-01T12:00:00Z",
                    3,
                    SkipReason::Missed
                ),
                skip(
                    "2026-01-01T13:00:00Z",
                    "2026-01-01T13:00:00Z",
                    1,
                    SkipReason::Missed
                )
            ]
        );
        // ... but an on-time tick runs.
        let d = decide(
            &p,
            &state(Some("2026-01-01T12:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T13:00:01Z"),
        );
        assert_eq!(d.outcomes, vec![run_of("2026-01-01T13:00:00Z")]);
    }

    #[test]
    fn starting_deadline_bounds_catch_up() {
        let mut p = cron_policy("0 * * * *");
        p.starting_deadline = Some(600);
        let d = decide(
            &p,
            &state(Some("2026-01-01T12:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T13:20:00Z"),
        );
        assert_eq!(
            d.outcomes,
            vec![skip(
                "2026-01-01T13:00:00Z",
                "2026-01-01T13:00:00Z",
                1,
                SkipReason::Missed
            )]
        );
        let d = decide(
            &p,
            &state(Some("2026-01-01T12:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-01T13:09:00Z"),
        );
        assert_eq!(d.outcomes, vec![run_of("2026-01-01T13:00:00Z")]);
    }

    #[test]
    fn new_or_edited_schedules_never_run_past_ticks() {
        let p = cron_policy("0 * * * *");
        let d = decide(
            &p,
            &state(None, "2026-01-01T12:30:00Z"),
            &Runs::default(),
            ts("2026-01-01T12:30:00Z"),
        );
        assert!(d.outcomes.is_empty());
        assert_eq!(d.wake_at, Some(ts("2026-01-01T13:00:00Z")));
        // Edited at 12:30 (first_seen moves), last tick 09:00 under the old schedule.
        let d = decide(
            &p,
            &state(Some("2026-01-01T09:00:00Z"), "2026-01-01T12:30:00Z"),
            &Runs::default(),
            ts("2026-01-01T12:40:00Z"),
        );
        assert!(d.outcomes.is_empty());
    }

    #[test]
    fn concurrency_policies() {
        let active = Runs {
            last: None,
            active: true,
        };
        let st = state(Some("2026-01-01T09:00:00Z"), "2026-01-01T00:00:00Z");
        let now = ts("2026-01-01T10:00:00Z");
        let mut p = cron_policy("0 * * * *");
        assert_eq!(
            decide(&p, &st, &active, now).outcomes,
            vec![skip(
                "2026-01-01T10:00:00Z",
                "2026-01-01T10:00:00Z",
                1,
                SkipReason::Overlap
            )]
        );
        p.concurrency = ConcurrencyPolicy::Allow;
        let d = decide(&p, &st, &active, now);
        assert_eq!(
            (d.outcomes, d.abort_active),
            (vec![run_of("2026-01-01T10:00:00Z")], false)
        );
        p.concurrency = ConcurrencyPolicy::Replace;
        let d = decide(&p, &st, &active, now);
        assert_eq!(
            (d.outcomes, d.abort_active),
            (vec![run_of("2026-01-01T10:00:00Z")], true)
        );
        p.concurrency = ConcurrencyPolicy::QueueOne;
        assert_eq!(
            decide(&p, &st, &active, now).outcomes,
            vec![Outcome::Queue {
                tick: ts("2026-01-01T10:00:00Z")
            }]
        );
        // A newer tick replaces the held one, which becomes an overlap skip.
        let st2 = ScheduleState {
            queued: Some(ts("2026-01-01T10:00:00Z")),
            last_tick: Some(ts("2026-01-01T10:00:00Z")),
            ..st
        };
        assert_eq!(
            decide(&p, &st2, &active, ts("2026-01-01T11:00:00Z")).outcomes,
            vec![
                skip(
                    "2026-01-01T10:00:00Z",
                    "2026-01-01T10:00:00Z",
                    1,
                    SkipReason::Overlap
                ),
                Outcome::Queue {
                    tick: ts("2026-01-01T11:00:00Z")
                }
            ]
        );
        // When the active run ends, the held tick runs.
        assert_eq!(
            decide(&p, &st2, &Runs::default(), ts("2026-01-01T10:40:00Z")).outcomes,
            vec![run_of("2026-01-01T10:00:00Z")]
        );
    }

    #[test]
    fn paused_ticks_are_recorded_not_caught_up() {
        let p = cron_policy("0 * * * *");
        let st = ScheduleState {
            paused: true,
            ..state(Some("2026-01-01T09:00:00Z"), "2026-01-01T00:00:00Z")
        };
        assert_eq!(
            decide(&p, &st, &Runs::default(), ts("2026-01-01T11:00:00Z")).outcomes,
            vec![
                skip(
                    "2026-01-01T10:00:00Z",
                    "2026-01-01T10:00:00Z",
                    1,
                    SkipReason::Paused
                ),
                skip(
                    "2026-01-01T11:00:00Z",
                    "2026-01-01T11:00:00Z",
                    1,
                    SkipReason::Paused
                )
            ]
        );
    }

    #[test]
    fn retries_of_a_failed_tick() {
        let mut p = cron_policy("0 0 * * *");
        p.retry = Some(RetryPolicy {
            attempts: 2,
            interval: 600,
            run_all: false,
        });
        let st = state(Some("2026-01-01T00:00:00Z"), "2025-12-01T00:00:00Z");
        let failed = |attempt, created: &str| Runs {
            last: Some(run(
                created,
                Some("2026-01-01T00:05:00Z"),
                Some("2026-01-01T00:00:00Z"),
                attempt,
                false,
            )),
            active: false,
        };
        let d = decide(
            &p,
            &st,
            &failed(0, "2026-01-01T00:00:01Z"),
            ts("2026-01-01T00:06:00Z"),
        );
        assert!(d.outcomes.is_empty());
        assert_eq!(d.wake_at, Some(ts("2026-01-01T00:10:01Z")));
        let d = decide(
            &p,
            &st,
            &failed(0, "2026-01-01T00:00:01Z"),
            ts("2026-01-01T00:10:02Z"),
        );
        assert_eq!(
            d.outcomes,
            vec![Outcome::Run {
                tick: ts("2026-01-01T00:00:00Z"),
                attempt: 1
            }]
        );
        // Attempts exhausted.
        assert!(decide(
            &p,
            &st,
            &failed(2, "2026-01-01T00:20:00Z"),
            ts("2026-01-01T01:00:00Z")
        )
        .outcomes
        .is_empty());
        // Success: no re-run.
        let ok = Runs {
            last: Some(run(
                "2026-01-01T00:00:01Z",
                Some("2026-01-01T00:05:00Z"),
                Some("2026-01-01T00:00:00Z"),
                0,
                true,
            )),
            active: false,
        };
        assert!(decide(&p, &st, &ok, ts("2026-01-01T01:00:00Z"))
            .outcomes
            .is_empty());
    }

    #[test]
    fn intervals_follow_prow() {
        let p = Policy {
            trigger: Trigger::Interval(3600),
            ..cron_policy("* * * * *")
        };
        let st = state(None, "2026-01-01T00:00:00Z");
        // Never ran: at once.
        assert_eq!(
            decide(&p, &st, &Runs::default(), ts("2026-01-01T00:00:07.5Z")).outcomes,
            vec![run_of("2026-01-01T00:00:07Z")]
        );
        // From the previous run's creation; only once it completed.
        let last = run(
            "2026-01-01T00:00:07Z",
            Some("2026-01-01T00:50:00Z"),
            Some("2026-01-01T00:00:07Z"),
            0,
            true,
        );
        let st = state(Some("2026-01-01T00:00:07Z"), "2026-01-01T00:00:00Z");
        let d = decide(
            &p,
            &st,
            &Runs {
                last: Some(last),
                active: false,
            },
            ts("2026-01-01T00:55:00Z"),
        );
        assert_eq!(
            (d.outcomes.len(), d.wake_at),
            (0, Some(ts("2026-01-01T01:00:07Z")))
        );
        assert_eq!(
            decide(
                &p,
                &st,
                &Runs {
                    last: Some(last),
                    active: false
                },
                ts("2026-01-01T05:00:00Z")
            )
            .outcomes,
            vec![run_of("2026-01-01T01:00:07Z")]
        );
        let running = run(
            "2026-01-01T00:00:07Z",
            None,
            Some("2026-01-01T00:00:07Z"),
            0,
            false,
        );
        assert!(decide(
            &p,
            &st,
            &Runs {
                last: Some(running),
                active: true
            },
            ts("2026-01-01T05:00:00Z")
        )
        .outcomes
        .is_empty());
        // minimum_interval: from completion.
        let p = Policy {
            trigger: Trigger::MinimumInterval(3600),
            ..p
        };
        let d = decide(
            &p,
            &st,
            &Runs {
                last: Some(last),
                active: false,
            },
            ts("2026-01-01T01:10:00Z"),
        );
        assert_eq!(d.wake_at, Some(ts("2026-01-01T01:50:00Z")));
    }

    #[test]
    fn jitter_is_stable_and_bounded() {
        let mut p = cron_policy("0 * * * *");
        p.jitter = Some(300);
        let tick = ts("2026-01-01T10:00:00Z");
        let j = jitter_of("job", tick, Some(300));
        assert!(j <= 300);
        assert_eq!(j, jitter_of("job", tick, Some(300)));
        let st = state(Some("2026-01-01T09:00:00Z"), "2026-01-01T00:00:00Z");
        let before = decide(
            &p,
            &st,
            &Runs::default(),
            plus(tick, j)
                .checked_sub(jiff::SignedDuration::from_secs(1))
                .unwrap(),
        );
        assert!(before.outcomes.is_empty());
        assert_eq!(before.wake_at, Some(plus(tick, j)));
        let at = decide(&p, &st, &Runs::default(), plus(tick, j));
        assert_eq!(
            at.outcomes,
            vec![Outcome::Run { tick, attempt: 0 }],
            "scheduled_at stays the nominal tick"
        );
    }

    #[test]
    fn never_firing_schedules_never_wake() {
        let p = cron_policy("0 0 31 2 *");
        let d = decide(
            &p,
            &state(None, "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2030-01-01T00:00:00Z"),
        );
        assert_eq!(d, Decision::default());
    }

    #[test]
    fn a_long_downtime_of_a_per_second_schedule_is_one_skip_range() {
        let p = cron_policy("* * * * * *");
        let d = decide(
            &p,
            &state(Some("2026-01-01T00:00:00Z"), "2026-01-01T00:00:00Z"),
            &Runs::default(),
            ts("2026-01-02T00:00:00Z"),
        );
        assert_eq!(
            d.outcomes,
            vec![
                skip(
                    "2026-01-01T00:00:01Z",
                    "2026-01-01T23:59:59Z",
                    86_399,
                    SkipReason::Missed
                ),
                run_of("2026-01-02T00:00:00Z")
            ]
        );
    }
}
