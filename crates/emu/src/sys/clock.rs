//! Real time as the engines see it: a [`netsim::Time`] counted from the
//! start of a run, so one engine runs unchanged under either driver.

use netsim::Time;
use std::time::{Duration, Instant};

/// The wall clock of one real-mode run: `now()` is the time since its
/// origin. Every thread of a run shares one origin, so times taken in
/// different namespaces compare directly (namespaces share the kernel's
/// monotonic clock).
#[derive(Clone, Copy, Debug)]
pub struct RealClock {
    origin: Instant,
}

impl RealClock {
    /// A clock whose origin is now.
    pub fn start() -> RealClock {
        RealClock {
            origin: Instant::now(),
        }
    }

    /// The same clock with its origin `by` later: its times are this
    /// clock's minus `by` (zero before the new origin).
    pub fn later(self, by: Duration) -> RealClock {
        RealClock {
            origin: self.origin + by,
        }
    }

    /// The time since the origin.
    pub fn now(&self) -> Time {
        self.at(Instant::now())
    }

    /// An instant as a time since the origin (zero if before it).
    pub fn at(&self, instant: Instant) -> Time {
        let nanos = instant.saturating_duration_since(self.origin).as_nanos();
        Time::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// How long until `time` (zero if it has passed).
    pub fn until(&self, time: Time) -> Duration {
        time.saturating_duration_since(self.now())
    }
}
