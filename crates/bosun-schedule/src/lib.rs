//! bosun's schedule engine: when does a periodic fire next, and what should happen
//! now? Pure functions of (schedule, policies, schedule state, previous runs, now):
//! no I/O, no clock, no async.
//!
//! - [`cron`]: Prow-compatible cron (robfig/cron v3 grammar), time zones with a
//!   documented DST rule, Jenkins' `H`, never-firing detection.
//! - [`hash`]: the stable hash behind `H`.

#![warn(missing_docs)]

pub mod cron;
pub mod hash;

pub use cron::{ParseError, ParseOptions, Schedule};
