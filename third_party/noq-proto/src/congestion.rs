//! Logic for controlling the rate at which data is sent

use crate::connection::RttEstimator;
use crate::{Duration, Instant};
use alloc::{boxed::Box, sync::Arc};
use core::any::Any;

mod bbr3;
mod cubic;
mod new_reno;

pub use bbr3::{Bbr3, Bbr3Config};
pub use cubic::{Cubic, CubicConfig};
pub use new_reno::{NewReno, NewRenoConfig};

/// Common interface for different congestion controllers
pub trait Controller: Send + Sync + core::fmt::Debug {
    /// One or more packets were just sent
    #[allow(unused_variables)]
    fn on_sent(&mut self, now: Instant, bytes: u64, largest_pn: u64) {}

    /// One packet was just sent
    #[allow(unused_variables)]
    fn on_packet_sent(&mut self, now: Instant, bytes: u16, pn: u64) {}

    /// The connection had data to send but was blocked by the congestion window
    ///
    /// Reports the spec's `C.is_cwnd_limited` signal to the controller: the sender fully utilized
    /// the congestion window at this point in the current round trip.
    fn on_cwnd_limited(&mut self) {}

    /// Packet deliveries were confirmed
    ///
    /// `app_limited` indicates whether the connection was blocked on outgoing
    /// application data prior to receiving these acknowledgements.
    #[allow(unused_variables)]
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
    }

    /// Packets are acked in batches, all with the same `now` argument. This indicates one of those
    /// batches has completed.
    #[allow(unused_variables)]
    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
    }

    /// Packets were deemed lost or marked congested
    ///
    /// `in_persistent_congestion` indicates whether all packets sent within the persistent
    /// congestion threshold period ending when the most recent packet in this batch was sent were
    /// lost.
    /// `lost_bytes` indicates how many bytes were lost. This value will be 0 for ECN triggers.
    /// `largest_lost_pn` indicates the packet number of the packet with the highest packet number
    /// in the congestion event.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        is_ecn: bool,
        lost_bytes: u64,
        largest_lost_pn: u64,
    );

    /// One packet was just lost
    #[allow(unused_variables)]
    fn on_packet_lost(&mut self, lost_bytes: u16, pn: u64, now: Instant) {}

    /// Packets were incorrectly deemed lost
    ///
    /// This function is called when all packets that were deemed lost (for instance because
    /// of packet reordering) are acknowledged after the congestion event was raised.
    fn on_spurious_congestion_event(&mut self) {}

    /// pepkit: one packet that was deemed lost has been acknowledged (a spurious loss).
    ///
    /// Called once per such packet, before the acknowledgement is otherwise processed, while the
    /// packet is still remembered as lost (for two PTOs after it was deemed lost).
    /// `largest_acked` is the largest packet number acknowledged before the ACK frame that
    /// acknowledged it, so `largest_acked - pn + 1` is a packet threshold that would not have
    /// deemed it lost (PEPKIT.md, item 8).
    #[allow(unused_variables)]
    fn on_spurious_loss(&mut self, now: Instant, pn: u64, largest_acked: u64) {}

    /// pepkit: the forward one-way delay of the packet an ACK newly acknowledged as the largest,
    /// µs, from the peer's TIMESTAMP frame (draft-huitema-quic-ts; only when both endpoints
    /// enabled it, `TransportConfig::enable_timestamps`). It includes the constant offset between
    /// the two endpoints' clocks, so it may be negative; differences between samples are exact
    /// (PEPKIT.md, item 13). Called before the batch's `on_end_acks`.
    #[allow(unused_variables)]
    fn on_one_way_delay(&mut self, now: Instant, delay_micros: i64) {}

    /// pepkit: time added to the loss delay of time-threshold loss detection, which is otherwise
    /// `TransportConfig::time_threshold` times the RTT (RFC 9002 §6.1.2). Asked each time losses
    /// are looked for (PEPKIT.md, item 8).
    fn extra_loss_delay(&self) -> Duration {
        Duration::ZERO
    }

    /// pepkit: the packet threshold of packet-threshold loss detection (RFC 9002 §6.1.1) to use
    /// instead of `TransportConfig::packet_threshold`, if any. Asked each time losses are looked
    /// for (PEPKIT.md, item 8).
    fn packet_threshold(&self) -> Option<u32> {
        None
    }

    /// The known MTU for the current network path has been updated
    fn on_mtu_update(&mut self, new_mtu: u16);

    /// The peer's ACK-frequency parameters have changed
    ///
    /// `ack_eliciting_threshold` is the number of ack-eliciting packets the peer may receive
    /// before being required to send an immediate ACK (per the QUIC ACK frequency extension).
    /// `requested_max_ack_delay` is the maximum delay we asked the peer to wait before sending
    /// an ACK when the threshold hasn't been reached.
    ///
    /// Controllers can use this to refine estimates that depend on peer ACK behavior (e.g.
    /// BBR's offload budget).
    #[allow(unused_variables)]
    fn on_ack_frequency_update(
        &mut self,
        ack_eliciting_threshold: u64,
        requested_max_ack_delay: Duration,
    ) {
    }

    /// Number of ack-eliciting bytes that may be in flight
    fn window(&self) -> u64;

    /// Retrieve implementation-specific metrics used to populate connection statistics and `qlog`
    /// traces when they are enabled. This is also used to alter the pacing of the connection with
    /// `pacing_rate` and `send_quantum`.
    fn metrics(&self) -> ControllerMetrics {
        ControllerMetrics {
            congestion_window: self.window(),
            ssthresh: None,
            pacing_rate: None,
            send_quantum: None,
            bandwidth_estimate: None,
        }
    }

    /// Duplicate the controller's state
    fn clone_box(&self) -> Box<dyn Controller>;

    /// Initial congestion window
    fn initial_window(&self) -> u64;

    /// Returns Self for use in down-casting to extract implementation details
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// Common congestion controller metrics used both for logging purposes
/// but also to alter the pacing of the connection with
/// `pacing_rate` and `send_quantum`
#[derive(Default)]
#[non_exhaustive]
pub struct ControllerMetrics {
    /// Congestion window (bytes)
    pub congestion_window: u64,
    /// Slow start threshold (bytes)
    pub ssthresh: Option<u64>,
    /// Pacing rate (bytes/s)
    pub pacing_rate: Option<u64>,
    /// Send Quantum (bytes) used to control the size of packet bursts
    pub send_quantum: Option<u64>,
    /// Estimated sustainable path bandwidth (bits/s).
    pub bandwidth_estimate: Option<u64>,
}

/// Constructs controllers on demand
pub trait ControllerFactory {
    /// Construct a fresh `Controller`
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller>;
}

const BASE_DATAGRAM_SIZE: u64 = 1200;
