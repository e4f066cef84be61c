//! Real time as the engines see it: a [`netsim::Time`] counted from the
//! start of a run, so one engine runs unchanged under either driver.

use netsim::Time;
use std::time::{Duration, Instant, SystemTime};

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

    /// This clock and the system's real-time clock read together, to
    /// place the kernel's real-time stamps on this clock.
    pub fn anchor(&self) -> Anchor {
        let real = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        Anchor {
            now: self.now(),
            real,
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

/// A [`RealClock`] reading taken together with real time
/// ([`RealClock::anchor`]).
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    now: Time,
    real: Duration,
}

impl Anchor {
    /// The clock's time at the anchor.
    pub fn now(&self) -> Time {
        self.now
    }

    /// A real-time stamp (since the Unix epoch, as the kernel stamps
    /// frames) on the clock: the anchor's time minus how long before the
    /// anchor the stamp is; never after the anchor (a stamp from the
    /// future, after a clock step, is taken as now) nor before the
    /// origin.
    pub fn place(&self, stamp: Duration) -> Time {
        self.now - self.real.saturating_sub(stamp)
    }
}
