//! Link capacity as a bit rate.

use std::fmt;
use std::time::Duration;

/// A data rate in bits per second.
///
/// A zero rate can be written down but is rejected when a link or a RED
/// queue is built from it ([`crate::LinkConfigError::ZeroRate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate {
    bits_per_sec: u64,
}

impl Rate {
    /// `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Rate {
        Rate { bits_per_sec: bps }
    }

    /// `kbps` kilobits (10^3 bits) per second.
    pub const fn from_kbps(kbps: u64) -> Rate {
        Rate::from_bps(kbps.saturating_mul(1_000))
    }

    /// `mbps` megabits (10^6 bits) per second.
    pub const fn from_mbps(mbps: u64) -> Rate {
        Rate::from_bps(mbps.saturating_mul(1_000_000))
    }

    /// `gbps` gigabits (10^9 bits) per second.
    pub const fn from_gbps(gbps: u64) -> Rate {
        Rate::from_bps(gbps.saturating_mul(1_000_000_000))
    }

    /// Bits per second.
    pub const fn bits_per_sec(self) -> u64 {
        self.bits_per_sec
    }

    /// Whether the rate is zero.
    pub const fn is_zero(self) -> bool {
        self.bits_per_sec == 0
    }

    /// The time to serialise `bytes` bytes, rounded up to the nanosecond.
    /// A zero rate gives `Duration::MAX`.
    pub fn transmit_time(self, bytes: u64) -> Duration {
        if self.bits_per_sec == 0 {
            return Duration::MAX;
        }
        let bit_nanos = u128::from(bytes) * 8 * 1_000_000_000;
        let nanos = bit_nanos.div_ceil(u128::from(self.bits_per_sec));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The rate at which `bytes` bytes take `span` (0 for an empty span).
    pub fn from_bytes_over(bytes: u64, span: Duration) -> Rate {
        let nanos = span.as_nanos();
        if nanos == 0 {
            return Rate::from_bps(0);
        }
        let bps = u128::from(bytes) * 8 * 1_000_000_000 / nanos;
        Rate::from_bps(u64::try_from(bps).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Rate {
    /// `10 Mbit/s`, `1.5 Mbit/s`, `800 kbit/s`, `12 bit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_sec;
        let (unit, scale) = match b {
            1_000_000_000.. => ("Gbit/s", 1_000_000_000),
            1_000_000.. => ("Mbit/s", 1_000_000),
            1_000.. => ("kbit/s", 1_000),
            _ => ("bit/s", 1),
        };
        let whole = b / scale;
        let frac = b % scale;
        if frac == 0 {
            write!(f, "{whole} {unit}")
        } else {
            // Three decimals, trailing zeros trimmed; integer-only formatting.
            let milli = frac * 1000 / scale;
            let s = format!("{milli:03}");
            write!(f, "{whole}.{} {unit}", s.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmit_time_is_exact() {
        let r = Rate::from_mbps(10);
        assert_eq!(r.transmit_time(1500), Duration::from_micros(1200));
        assert_eq!(
            Rate::from_mbps(12).transmit_time(1000),
            Duration::from_nanos(666_667)
        );
        assert_eq!(Rate::from_bps(0).transmit_time(1), Duration::MAX);
        assert_eq!(Rate::from_bytes_over(1_250_000, Duration::from_secs(1)), r);
    }

    #[test]
    fn display() {
        assert_eq!(Rate::from_mbps(10).to_string(), "10 Mbit/s");
        assert_eq!(Rate::from_kbps(1500).to_string(), "1.5 Mbit/s");
        assert_eq!(Rate::from_bps(12).to_string(), "12 bit/s");
    }
}
