//! What an endpoint records about each connection, read from the QUIC state
//! machine's own API (statistics and congestion-controller callbacks),
//! never from the traffic.

use netsim::{Rate, Time};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One sample of a connection's sender state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When the sample was taken.
    pub at: Time,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Pacing rate set by the controller, if it sets one (BBR does; CUBIC
    /// and NewReno leave pacing to the connection's window-based pacer).
    pub pacing_rate: Option<Rate>,
    /// Smoothed round-trip time.
    pub smoothed_rtt: Duration,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Packets declared lost so far.
    pub lost_packets: u64,
    /// Congestion events later found spurious so far.
    pub spurious_congestion_events: u64,
}

/// A connection's counters, as of the last input to its endpoint (they are
/// refreshed after each input and when the endpoint has nothing more to
/// send, so they are current whenever the simulator is between events).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// QUIC packets sent (ack-eliciting and probes).
    pub sent_packets: u64,
    /// QUIC packets declared lost.
    pub lost_packets: u64,
    /// Bytes of the packets declared lost.
    pub lost_bytes: u64,
    /// Congestion events (loss episodes that cut the window).
    pub congestion_events: u64,
    /// Congestion events later found spurious.
    pub spurious_congestion_events: u64,
    /// Packets declared lost and acknowledged later (noq-proto's
    /// `PepkitCounters::spurious_losses`, third_party/noq-proto/PEPKIT.md
    /// item 8).
    pub spurious_losses: u64,
    /// UDP datagrams sent.
    pub udp_tx_datagrams: u64,
    /// UDP payload bytes sent.
    pub udp_tx_bytes: u64,
    /// UDP datagrams received.
    pub udp_rx_datagrams: u64,
    /// UDP payload bytes received.
    pub udp_rx_bytes: u64,
    /// Smoothed RTT.
    pub smoothed_rtt: Duration,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
}

/// Everything an endpoint keeps about one of its connections.
#[derive(Clone, Debug, Default)]
pub struct ConnRecord {
    /// When the connection's first packet left this endpoint.
    pub first_tx: Option<Time>,
    /// When the handshake completed here.
    pub connected_at: Option<Time>,
    /// When the connection closed (locally or by the peer), if it did.
    pub closed_at: Option<Time>,
    /// Why it closed, if not by our own application.
    pub error: Option<String>,
    /// Counters.
    pub stats: ConnStats,
    /// The sampled time series (empty unless sampling was asked for).
    pub samples: Vec<Sample>,
    /// The RTT of every packet this endpoint sent and saw acknowledged
    /// within the RTT window ([`crate::QuicConfig::with_rtt_window`]).
    pub rtt: RttLog,
}

/// Per-packet RTT samples of one connection's sent packets: the time from
/// sending each ack-eliciting packet to its acknowledgement, kept exactly
/// (microseconds, 4 bytes each) for the packets acknowledged within the
/// endpoint's RTT window, and the minimum over the whole connection.
#[derive(Clone, Debug, Default)]
pub struct RttLog(Arc<Mutex<RttSamples>>);

#[derive(Debug, Default)]
struct RttSamples {
    micros: Vec<u32>,
    min: Option<Duration>,
    /// If asked for: (send time since the window's start, RTT) of the
    /// kept samples of packets sent in the window, nanoseconds.
    timed: Option<Vec<(u64, u64)>>,
}

impl RttLog {
    /// Also keep each kept sample's send time (see [`RttLog::timed`]).
    pub(crate) fn keep_times(&self) {
        self.0
            .lock()
            .expect("rtt log lock")
            .timed
            .get_or_insert_default();
    }

    /// Records one sample; `keep` it among the window's samples, with its
    /// packet's send time since the window's start if it was sent in the
    /// window.
    pub(crate) fn record(&self, rtt: Duration, keep: bool, sent: Option<Duration>) {
        let mut samples = self.0.lock().expect("rtt log lock");
        samples.min = Some(samples.min.map_or(rtt, |min| min.min(rtt)));
        if keep {
            let micros = u32::try_from(rtt.as_micros()).unwrap_or(u32::MAX);
            samples.micros.push(micros);
            if let (Some(timed), Some(sent)) = (samples.timed.as_mut(), sent) {
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                timed.push((nanos(sent), nanos(rtt)));
            }
        }
    }

    /// The kept samples of packets sent within the window, each as (its
    /// send time since the window's start, its RTT), in the order
    /// acknowledged; empty unless the endpoint was asked to keep them
    /// ([`crate::QuicConfig::with_rtt_times`]).
    pub fn timed(&self) -> Vec<(Duration, Duration)> {
        let samples = self.0.lock().expect("rtt log lock");
        samples
            .timed
            .iter()
            .flatten()
            .map(|&(sent, rtt)| (Duration::from_nanos(sent), Duration::from_nanos(rtt)))
            .collect()
    }

    /// The smallest RTT of the connection.
    pub fn min(&self) -> Option<Duration> {
        self.0.lock().expect("rtt log lock").min
    }

    /// Samples in the window.
    pub fn len(&self) -> usize {
        self.0.lock().expect("rtt log lock").micros.len()
    }

    /// Whether the window holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nearest-rank percentiles `ps` (0–100) of the window's samples
    /// (the sample at rank ⌈p/100 · n⌉), in the order asked; empty without
    /// samples.
    pub fn percentiles(&self, ps: &[f64]) -> Vec<Duration> {
        let mut sorted = self.0.lock().expect("rtt log lock").micros.clone();
        if sorted.is_empty() {
            return Vec::new();
        }
        sorted.sort_unstable();
        ps.iter()
            .map(|p| {
                let rank =
                    ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
                Duration::from_micros(u64::from(sorted[rank - 1]))
            })
            .collect()
    }
}

/// The nearest-rank percentile `p` (0–100) of sorted values: the value at
/// rank ⌈p/100 · n⌉ (at least the first); `None` if there are none.
pub fn nearest_rank(sorted: &[Duration], p: u64) -> Option<Duration> {
    let rank = (p as usize * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// The width of a [`DeliveryLog`]'s bins.
pub const DELIVERY_BIN: Duration = Duration::from_millis(100);

/// How many payload bytes an application had received by each multiple of
/// [`DELIVERY_BIN`]: a flow's throughput over any window of whole bins,
/// and its throughput over time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryLog {
    /// `edges[k]`: bytes received before k·bin.
    edges: Vec<u64>,
}

impl DeliveryLog {
    /// The application is about to take more bytes at `now`, having
    /// received `before` so far.
    pub fn record(&mut self, now: Time, before: u64) {
        let bin = DELIVERY_BIN.as_nanos() as u64;
        while (self.edges.len() as u64).saturating_mul(bin) <= now.as_nanos() {
            self.edges.push(before);
        }
    }

    /// Bytes received before `at`, rounded down to a bin edge; `total` is
    /// what the application received in the end (after its last read).
    pub fn bytes_by(&self, at: Time, total: u64) -> u64 {
        let k = (at.as_nanos() / DELIVERY_BIN.as_nanos() as u64) as usize;
        self.edges.get(k).copied().unwrap_or(total)
    }

    /// Bytes received from `from` to `until` (both rounded down to bin
    /// edges).
    pub fn bytes_between(&self, from: Time, until: Time, total: u64) -> u64 {
        self.bytes_by(until, total)
            .saturating_sub(self.bytes_by(from, total))
    }

    /// The throughput in each bin from time zero to `until`, Mbit/s.
    pub fn rates_mbps(&self, until: Time, total: u64) -> Vec<f64> {
        let bins = (until.as_nanos() / DELIVERY_BIN.as_nanos() as u64) as usize;
        (0..bins)
            .map(|k| {
                let from = Time::ZERO + DELIVERY_BIN * k as u32;
                let to = from + DELIVERY_BIN;
                let bytes = self.bytes_between(from, to, total);
                bytes as f64 * 8.0 / DELIVERY_BIN.as_secs_f64() / 1e6
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delivery_log_counts_bytes_by_bin_edges() {
        let mut log = DeliveryLog::default();
        let ms = Time::from_millis;
        // 1000 bytes read at 50, 150 and 250 ms.
        for (i, t) in [50, 150, 250].into_iter().enumerate() {
            log.record(ms(t), 1000 * i as u64);
        }
        assert_eq!(log.bytes_by(ms(0), 3000), 0);
        assert_eq!(log.bytes_by(ms(100), 3000), 1000);
        assert_eq!(log.bytes_by(ms(299), 3000), 2000);
        assert_eq!(log.bytes_by(ms(300), 3000), 3000, "after the last read");
        assert_eq!(log.bytes_between(ms(100), ms(300), 3000), 2000);
        let rates = log.rates_mbps(ms(300), 3000);
        assert_eq!(rates.len(), 3);
        assert!((rates[1] - 0.08).abs() < 1e-12);
    }

    #[test]
    fn rtt_percentiles_are_nearest_rank() {
        let log = RttLog::default();
        for ms in 1..=100 {
            log.record(Duration::from_millis(ms), ms > 10, None);
        }
        assert_eq!(log.min(), Some(Duration::from_millis(1)));
        assert_eq!(log.len(), 90);
        let p = log.percentiles(&[50.0, 95.0, 100.0]);
        assert_eq!(p, [55, 96, 100].map(Duration::from_millis));
        assert!(log.timed().is_empty(), "send times only when asked");
    }

    #[test]
    fn nearest_rank_takes_the_value_at_the_rounded_up_rank() {
        let sorted: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        let at = |p| nearest_rank(&sorted, p).map(|d| d.as_millis());
        assert_eq!(
            [at(0), at(50), at(51), at(95), at(100)],
            [1, 5, 6, 10, 10].map(Some)
        );
        assert_eq!(nearest_rank(&[], 50), None);
    }

    #[test]
    fn send_times_are_kept_when_asked_for_packets_sent_in_the_window() {
        let log = RttLog::default();
        log.keep_times();
        let ms = Duration::from_millis;
        log.record(ms(30), true, None);
        log.record(ms(31), true, Some(ms(2)));
        log.record(ms(32), false, Some(ms(3)));
        assert_eq!(log.len(), 2);
        assert_eq!(log.timed(), [(ms(2), ms(31))]);
    }
}
