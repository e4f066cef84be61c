//! Per-link counters and the queue occupancy time series.

use crate::Time;

/// A number of packets and their total size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketCount {
    /// Packets.
    pub packets: u64,
    /// Bytes (IP packet lengths).
    pub bytes: u64,
}

impl PacketCount {
    pub(crate) fn add(&mut self, len: u64) {
        self.packets += 1;
        self.bytes += len;
    }
}

/// Why a link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropCause {
    /// The random loss model.
    Loss,
    /// The buffer was full (drop-tail, or RED's hard limit).
    BufferFull,
    /// RED dropped it early: the average queue was between the thresholds.
    RedEarly,
    /// RED dropped it because the average queue was at or above the maximum
    /// threshold.
    RedForced,
}

/// What a link has seen. All counts are of IP packets and their lengths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkStats {
    /// Everything offered to the link.
    pub offered: PacketCount,
    /// Accepted and scheduled for delivery. A link never drops a packet it
    /// has accepted, so once a run has drained this is what came out; if a
    /// run stops early, packets still in the queue or in flight are
    /// included.
    pub delivered: PacketCount,
    /// Lost by the random loss model.
    pub dropped_loss: PacketCount,
    /// Dropped because the buffer was full.
    pub dropped_buffer: PacketCount,
    /// Dropped early by RED.
    pub dropped_red_early: PacketCount,
    /// Dropped by RED above its maximum threshold.
    pub dropped_red_forced: PacketCount,
    /// The largest queue seen on arrival, in bytes.
    pub max_queue_bytes: u64,
}

impl LinkStats {
    /// The drops for one cause.
    pub fn dropped(&self, cause: DropCause) -> PacketCount {
        match cause {
            DropCause::Loss => self.dropped_loss,
            DropCause::BufferFull => self.dropped_buffer,
            DropCause::RedEarly => self.dropped_red_early,
            DropCause::RedForced => self.dropped_red_forced,
        }
    }

    /// All drops together.
    pub fn dropped_total(&self) -> PacketCount {
        let all = [
            self.dropped_loss,
            self.dropped_buffer,
            self.dropped_red_early,
            self.dropped_red_forced,
        ];
        PacketCount {
            packets: all.iter().map(|c| c.packets).sum(),
            bytes: all.iter().map(|c| c.bytes).sum(),
        }
    }

    pub(crate) fn record_drop(&mut self, cause: DropCause, len: u64) {
        match cause {
            DropCause::Loss => self.dropped_loss.add(len),
            DropCause::BufferFull => self.dropped_buffer.add(len),
            DropCause::RedEarly => self.dropped_red_early.add(len),
            DropCause::RedForced => self.dropped_red_forced.add(len),
        }
    }
}

/// The queue at one moment: taken when a packet arrives, before it is
/// queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueSample {
    /// When.
    pub at: Time,
    /// Bytes queued (including the packet in transmission).
    pub bytes: u64,
    /// Packets queued (including the packet in transmission).
    pub packets: u64,
    /// RED's average queue in bytes after this arrival, for RED links.
    pub red_average_bytes: Option<u64>,
}
