//! What an endpoint records about each connection, read from the QUIC state
//! machine's own API (statistics and congestion-controller callbacks),
//! never from the traffic.

use netsim::{Rate, Time};
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
    pub spurious_losses: u64,
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
}
