//! Mapping netsim's virtual [`Time`] onto the clocks the QUIC state machine
//! uses: monotonic `Instant`s and, for address-validation tokens, a
//! `SystemTime`.

use netsim::Time;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Converts between virtual [`Time`] and `Instant`s: `base + time`.
///
/// `std` offers no way to make an `Instant` other than reading the clock, so
/// the base is read once, when the clock is created. It is an opaque origin:
/// the state machine only ever subtracts `Instant`s, so no output depends
/// on it, and nothing else reads the real clock.
#[derive(Clone, Copy, Debug)]
pub struct SimClock {
    base: Instant,
}

impl SimClock {
    /// A clock whose origin is virtual time zero.
    pub fn new() -> SimClock {
        SimClock {
            base: Instant::now(),
        }
    }

    /// The `Instant` of virtual time `t`.
    pub fn instant(&self, t: Time) -> Instant {
        self.base + t.since_start()
    }

    /// The virtual time of `instant` (saturating at zero before the origin).
    pub fn time(&self, instant: Instant) -> Time {
        let span = instant.saturating_duration_since(self.base);
        Time::from_nanos(u64::try_from(span.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl Default for SimClock {
    fn default() -> SimClock {
        SimClock::new()
    }
}

/// The wall-clock time at virtual time zero: 2025-01-01T00:00:00Z.
const EPOCH_OFFSET: Duration = Duration::from_secs(1_735_689_600);

/// A `noq_proto::TimeSource` (used to stamp and check address-validation
/// tokens) that reads the endpoint's current virtual time instead of the
/// system clock: 2025-01-01T00:00:00Z plus the virtual time.
///
/// The endpoint stores the time of every input with [`VirtualWallClock::set`].
#[derive(Clone, Debug, Default)]
pub(crate) struct VirtualWallClock {
    now_nanos: Arc<AtomicU64>,
}

impl VirtualWallClock {
    /// Records the current virtual time.
    pub(crate) fn set(&self, now: Time) {
        self.now_nanos.store(now.as_nanos(), Ordering::Relaxed);
    }
}

impl noq_proto::TimeSource for VirtualWallClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
            + EPOCH_OFFSET
            + Duration::from_nanos(self.now_nanos.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let clock = SimClock::new();
        let t = Time::from_nanos(1_234_567_891);
        assert_eq!(clock.time(clock.instant(t)), t);
        assert_eq!(
            clock.instant(t) - clock.instant(Time::ZERO),
            t.since_start()
        );
    }
}
