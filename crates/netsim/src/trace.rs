//! Capacity traces in mahimahi format.
//!
//! A trace is a text file with one integer per line: a time in milliseconds
//! from the start of the trace at which the link may deliver one packet of up
//! to [`CapacityTrace::OPPORTUNITY_BYTES`] bytes. Several lines with the same
//! time are several opportunities in that millisecond. The trace repeats with
//! a period equal to its last timestamp: opportunity `k` happens at
//! `(k / n) · period + t[k mod n]` for a trace of `n` lines.

use crate::Time;
use std::path::Path;
use std::time::Duration;

/// A parsed capacity trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityTrace {
    /// Opportunity times within one period, in nanoseconds, non-decreasing.
    times_ns: Vec<u64>,
    /// The period: the last timestamp.
    period_ns: u64,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("cannot read trace {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The trace has no timestamps.
    #[error("trace has no timestamps")]
    Empty,
    /// A line is not a non-negative integer number of milliseconds.
    #[error("trace line {line}: expected a non-negative integer (milliseconds), got {content:?}")]
    InvalidLine {
        /// 1-based line number.
        line: usize,
        /// The offending text (truncated to 40 characters).
        content: String,
    },
    /// A timestamp is smaller than the one before it.
    #[error(
        "trace line {line}: timestamp {value} ms is smaller than the previous one ({previous} ms)"
    )]
    NotMonotonic {
        /// 1-based line number.
        line: usize,
        /// The timestamp on that line.
        value: u64,
        /// The timestamp before it.
        previous: u64,
    },
    /// The last timestamp is 0, so the trace would repeat with period zero.
    #[error("trace period (its last timestamp) is 0 ms; it must be positive")]
    ZeroPeriod,
}

impl CapacityTrace {
    /// Bytes one delivery opportunity can carry (mahimahi's 1500-byte MTU).
    pub const OPPORTUNITY_BYTES: u32 = 1500;

    /// Parses a trace from text. Blank lines and surrounding whitespace are
    /// ignored; anything else that is not a non-negative integer is an error.
    pub fn parse(text: &str) -> Result<CapacityTrace, TraceError> {
        let mut times_ms: Vec<u64> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let value: u64 = line.parse().map_err(|_| TraceError::InvalidLine {
                line: index + 1,
                content: line.chars().take(40).collect(),
            })?;
            if let Some(&previous) = times_ms.last()
                && value < previous
            {
                return Err(TraceError::NotMonotonic {
                    line: index + 1,
                    value,
                    previous,
                });
            }
            times_ms.push(value);
        }
        CapacityTrace::from_millis(times_ms)
    }

    /// Reads and parses a trace file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<CapacityTrace, TraceError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.display().to_string(),
            source,
        })?;
        CapacityTrace::parse(&text)
    }

    /// A trace from opportunity times in milliseconds (non-decreasing, last
    /// one positive).
    pub fn from_millis(times_ms: Vec<u64>) -> Result<CapacityTrace, TraceError> {
        let Some(&last) = times_ms.last() else {
            return Err(TraceError::Empty);
        };
        if let Some(i) = times_ms.windows(2).position(|w| w[1] < w[0]) {
            return Err(TraceError::NotMonotonic {
                line: i + 2,
                value: times_ms[i + 1],
                previous: times_ms[i],
            });
        }
        if last == 0 {
            return Err(TraceError::ZeroPeriod);
        }
        let times_ns = times_ms
            .iter()
            .map(|&ms| ms.saturating_mul(1_000_000))
            .collect();
        Ok(CapacityTrace {
            times_ns,
            period_ns: last.saturating_mul(1_000_000),
        })
    }

    /// Number of delivery opportunities in one period.
    pub fn opportunities_per_period(&self) -> usize {
        self.times_ns.len()
    }

    /// The period after which the trace repeats.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// The mean capacity over one period, in bits per second.
    pub fn mean_rate(&self) -> crate::Rate {
        let bytes = self.times_ns.len() as u64 * u64::from(Self::OPPORTUNITY_BYTES);
        crate::Rate::from_bytes_over(bytes, self.period())
    }

    /// The time of opportunity number `k` (counting from 0 over all
    /// repetitions).
    pub fn opportunity_time(&self, k: u64) -> Time {
        let n = self.times_ns.len() as u64;
        let cycle = k / n;
        let offset = self.times_ns[(k % n) as usize];
        Time::from_nanos(cycle.saturating_mul(self.period_ns).saturating_add(offset))
    }

    /// The index of the first opportunity at or after `now`.
    pub fn first_opportunity_at_or_after(&self, now: Time) -> u64 {
        let now = now.as_nanos();
        let n = self.times_ns.len() as u64;
        let cycle = now / self.period_ns;
        // Opportunities of the previous cycle can equal `now` (its last one
        // sits exactly on the cycle boundary); the next cycle always has one.
        for c in cycle.saturating_sub(1)..=cycle.saturating_add(1) {
            let base = c.saturating_mul(self.period_ns);
            let i = self
                .times_ns
                .partition_point(|&t| base.saturating_add(t) < now);
            if i < self.times_ns.len() {
                return c.saturating_mul(n).saturating_add(i as u64);
            }
        }
        cycle.saturating_add(2).saturating_mul(n)
    }

    /// The index of the first opportunity strictly after `now`: the first
    /// one a packet arriving at `now` can use (mahimahi serves an
    /// opportunity before it queues a packet that arrives in the same
    /// millisecond).
    pub fn first_opportunity_after(&self, now: Time) -> u64 {
        self.first_opportunity_at_or_after(Time::from_nanos(now.as_nanos().saturating_add(1)))
    }

    /// Number of opportunities with a time in `[from, to)`.
    pub fn opportunities_between(&self, from: Time, to: Time) -> u64 {
        if to <= from {
            return 0;
        }
        self.first_opportunity_at_or_after(to) - self.first_opportunity_at_or_after(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_with_period_of_last_timestamp() {
        let t = CapacityTrace::parse("0\n0\n5\n10\n").unwrap();
        let times: Vec<u64> = (0..8)
            .map(|k| t.opportunity_time(k).as_nanos() / 1_000_000)
            .collect();
        assert_eq!(times, [0, 0, 5, 10, 10, 10, 15, 20]);
        assert_eq!(t.first_opportunity_at_or_after(Time::from_millis(10)), 3);
        assert_eq!(t.first_opportunity_at_or_after(Time::from_millis(11)), 6);
        assert_eq!(t.first_opportunity_at_or_after(Time::ZERO), 0);
        assert_eq!(t.first_opportunity_after(Time::ZERO), 2);
        assert_eq!(t.first_opportunity_after(Time::from_millis(10)), 6);
        assert_eq!(t.first_opportunity_after(Time::from_nanos(9_999_999)), 3);
        assert_eq!(
            t.opportunities_between(Time::ZERO, Time::from_millis(20)),
            7
        );
    }

    #[test]
    fn errors_are_clear() {
        assert!(matches!(CapacityTrace::parse(""), Err(TraceError::Empty)));
        assert!(matches!(
            CapacityTrace::parse("1\nx2\n"),
            Err(TraceError::InvalidLine { line: 2, .. })
        ));
        assert!(matches!(
            CapacityTrace::parse("1\n-2\n"),
            Err(TraceError::InvalidLine { line: 2, .. })
        ));
        assert!(matches!(
            CapacityTrace::parse("5\n\n3\n"),
            Err(TraceError::NotMonotonic { line: 3, .. })
        ));
        assert!(matches!(
            CapacityTrace::parse("0\n0\n"),
            Err(TraceError::ZeroPeriod)
        ));
        let err = CapacityTrace::from_file("/nonexistent/trace").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/trace"));
    }
}
