//! bosun's schedule engine: when does a periodic fire next, and what should happen
//! now? Pure functions of (schedule, policies, schedule state, previous runs, now):
//! no I/O, no clock, no async.
//!
//! - [`cron`]: Prow-compatible cron (robfig/cron v3 grammar), time zones with a
//!   documented DST rule, Jenkins' `H`, never-firing detection.
//! - [`hash`]: the stable hash behind `H`.
//! - [`decide`]: what happens now: run a tick, skip it (missed, overlap, paused),
//!   queue it, re-run a failed one, and when to look again.
//! - [`describe`](mod@describe): human descriptions.
//! - [`check`]: the configuration's schedule checks (`bosun check`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
pub mod cron;
pub mod decide;
pub mod describe;
pub mod hash;

pub use check::ConfigScheduleCheck;
pub use cron::{ParseError, ParseOptions, Schedule};
pub use describe::describe;
