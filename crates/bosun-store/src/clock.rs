//! Where the time comes from. The daemon uses the system clock; simulations
//! and tests use a [`ManualClock`] they move themselves, so a day of schedules
//! runs in seconds.

use bosun_base::sync::Lock;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that stands still until it is moved.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock showing `at`.
    pub fn new(at: Timestamp) -> Self {
        ManualClock(Mutex::new(at))
    }

    /// Moves it to `at` (never backwards).
    pub fn set(&self, at: Timestamp) {
        let mut t = self.0.locked();
        if at > *t {
            *t = at;
        }
    }

    /// Moves it forward by `d`.
    pub fn advance(&self, d: SignedDuration) {
        let mut t = self.0.locked();
        *t = t.checked_add(d).unwrap_or(*t);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.locked()
    }
}
