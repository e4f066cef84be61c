//! Virtual time: an instant in integer nanoseconds since the start of a run.
//!
//! Spans of time are plain [`std::time::Duration`]s, so that an engine can
//! map a [`Time`] onto its own clock type (for example a base `Instant` plus
//! `time.since_start()`) without loss.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An instant of virtual time, in nanoseconds since the start of the run.
///
/// The representation is a `u64` on every platform, so arithmetic is exact
/// and identical everywhere. Arithmetic saturates instead of wrapping:
/// `Time::MAX` means "never".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The start of the run.
    pub const ZERO: Time = Time(0);
    /// The last representable instant (about 584 years); used as "never".
    pub const MAX: Time = Time(u64::MAX);

    /// The instant `nanos` nanoseconds after the start.
    pub const fn from_nanos(nanos: u64) -> Time {
        Time(nanos)
    }

    /// The instant `micros` microseconds after the start (saturating).
    pub const fn from_micros(micros: u64) -> Time {
        Time(micros.saturating_mul(1_000))
    }

    /// The instant `millis` milliseconds after the start (saturating).
    pub const fn from_millis(millis: u64) -> Time {
        Time(millis.saturating_mul(1_000_000))
    }

    /// The instant `secs` seconds after the start (saturating).
    pub const fn from_secs(secs: u64) -> Time {
        Time(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The span from the start of the run to this instant.
    pub const fn since_start(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Seconds since the start as a float, for reports and plots only
    /// (never feed it back into the simulation).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The span from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + span`, or `None` if it does not fit.
    pub fn checked_add(self, span: Duration) -> Option<Time> {
        let nanos = u64::try_from(span.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Time)
    }
}

/// Converts a span to whole nanoseconds, saturating at `u64::MAX`.
pub(crate) fn duration_nanos(span: Duration) -> u64 {
    u64::try_from(span.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Time {
    type Output = Time;
    /// Saturates at [`Time::MAX`].
    fn add(self, span: Duration) -> Time {
        Time(self.0.saturating_add(duration_nanos(span)))
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, span: Duration) {
        *self = *self + span;
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    /// Saturates at [`Time::ZERO`].
    fn sub(self, span: Duration) -> Time {
        Time(self.0.saturating_sub(duration_nanos(span)))
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturates at zero, like `std::time::Instant`.
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Display for Time {
    /// Seconds with nanosecond precision, e.g. `1.250000000s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}s",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_exact_and_saturating() {
        let t = Time::from_millis(1500);
        assert_eq!(t.as_nanos(), 1_500_000_000);
        assert_eq!(
            t + Duration::from_micros(1),
            Time::from_nanos(1_500_001_000)
        );
        assert_eq!(t - Time::from_secs(1), Duration::from_millis(500));
        assert_eq!(Time::from_secs(1) - t, Duration::ZERO);
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::ZERO - Duration::from_secs(1), Time::ZERO);
        assert_eq!(Time::MAX.checked_add(Duration::from_nanos(1)), None);
        assert_eq!(t.to_string(), "1.500000000s");
    }
}
