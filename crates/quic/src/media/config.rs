//! The parameters of one media flow, shared by its sender and receiver.

use netsim::Seed;
use std::time::Duration;

/// Configuration of a media flow (Sidekick §5.1 defaults: 240 B every
/// 20 ms, re-NACK interval 52 ms as the reference server's `--rtt 52`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaConfig {
    /// Scenario seed: the AEAD key and the per-transmission nonces derive
    /// from it.
    pub seed: Seed,
    /// How long the sender produces media; it sends
    /// `duration / interval` packets (3000 for 60 s).
    pub duration: Duration,
    /// Spacing of media packets.
    pub interval: Duration,
    /// The receiver re-NACKs a hole at most once per this interval (the
    /// end-to-end RTT). Checked only when a packet arrives, as in the
    /// reference server.
    pub renack_interval: Duration,
    /// End-of-stream packets the sender sends after the last media packet,
    /// one per `interval` (the reference client sends 100 timeout
    /// packets). They tell the receiver the last sequence number, so it can
    /// NACK trailing holes, and keep its re-NACKs going.
    pub end_packets: u32,
    /// Largest number of sequence numbers the receiver buffers ahead of the
    /// next one to play; a packet further ahead is ignored (bounds memory).
    pub max_window: u32,
}

impl MediaConfig {
    /// Defaults: 60 s of media, 20 ms interval, 52 ms re-NACK interval,
    /// 100 end-of-stream packets, a 65 536-packet window.
    pub fn new(seed: Seed) -> MediaConfig {
        MediaConfig {
            seed,
            duration: Duration::from_secs(60),
            interval: Duration::from_millis(20),
            renack_interval: Duration::from_millis(52),
            end_packets: 100,
            max_window: 1 << 16,
        }
    }

    /// Sets how long media is produced.
    pub fn with_duration(mut self, duration: Duration) -> MediaConfig {
        self.duration = duration;
        self
    }

    /// Sets the re-NACK interval (the end-to-end RTT).
    pub fn with_renack_interval(mut self, interval: Duration) -> MediaConfig {
        self.renack_interval = interval;
        self
    }

    /// Sets the number of end-of-stream packets.
    pub fn with_end_packets(mut self, count: u32) -> MediaConfig {
        self.end_packets = count;
        self
    }

    /// The number of media packets the sender sends (sequence numbers
    /// `1..=packet_count()`).
    pub fn packet_count(&self) -> u32 {
        let interval = self.interval.as_nanos().max(1);
        u32::try_from(self.duration.as_nanos() / interval).unwrap_or(u32::MAX - 1)
    }
}
