//! Counters and de-jitter delay percentiles of a media flow.

use std::time::Duration;

/// The sender's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaSenderStats {
    /// Media packets sent for the first time.
    pub packets_sent: u64,
    /// Retransmissions sent (on NACK or [`crate::MediaSender::retransmit`]).
    pub retransmissions: u64,
    /// Valid NACKs received.
    pub nacks_received: u64,
    /// Retransmission requests from outside the flow (a Sidekick engine).
    pub external_requests: u64,
    /// End-of-stream packets sent.
    pub end_packets_sent: u64,
    /// Datagrams ignored: malformed, undecryptable, or a NACK of a sequence
    /// number never sent.
    pub rejected: u64,
}

/// The receiver's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaReceiverStats {
    /// Distinct media packets received.
    pub packets_received: u64,
    /// Media packets received again (already buffered or played).
    pub duplicates: u64,
    /// NACK datagrams sent, first NACKs and re-NACKs.
    pub nacks_sent: u64,
    /// Of those, re-NACKs of a hole already NACKed.
    pub renacks_sent: u64,
    /// End-of-stream packets received.
    pub end_packets_received: u64,
    /// Datagrams ignored: malformed, undecryptable, or too far ahead.
    pub rejected: u64,
}

/// Percentiles of the per-packet de-jitter delays, in integer nanoseconds
/// (a [`Duration`]).
///
/// The percentile `q` is the value at index `⌊q · n / 100⌋` (clamped to
/// `n − 1`) of the sorted delays, as the reference server prints them (its
/// "Average" is the value at index `0.5 · n`, i.e. the median).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelaySummary {
    /// Number of packets played.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 95th percentile.
    pub p95: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl DelaySummary {
    /// Summarises `delays` (any order); all zero when empty.
    pub fn from_delays(delays: &[Duration]) -> DelaySummary {
        let mut sorted = delays.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let at = |q: usize| {
            if n == 0 {
                Duration::ZERO
            } else {
                sorted[(q * n / 100).min(n - 1)]
            }
        };
        DelaySummary {
            count: n,
            p50: at(50),
            p95: at(95),
            p99: at(99),
            max: sorted.last().copied().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_index_like_the_reference() {
        let delays: Vec<Duration> = (0..200u64).rev().map(Duration::from_millis).collect();
        let s = DelaySummary::from_delays(&delays);
        assert_eq!(s.count, 200);
        assert_eq!(s.p50, Duration::from_millis(100));
        assert_eq!(s.p95, Duration::from_millis(190));
        assert_eq!(s.p99, Duration::from_millis(198));
        assert_eq!(s.max, Duration::from_millis(199));
        assert_eq!(DelaySummary::from_delays(&[]), DelaySummary::default());
    }
}
