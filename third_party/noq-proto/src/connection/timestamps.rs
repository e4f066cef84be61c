//! pepkit: one-way delays from the TIMESTAMP frame of draft-huitema-quic-ts (PEPKIT.md, item 13).
//!
//! An endpoint that offers the extension (`TransportConfig::enable_timestamps`) sends
//! `enable_timestamp = 3` (it sends TIMESTAMP frames and wants them). Once the peer's parameters
//! are known it sends a TIMESTAMP frame before the ACK frames of each 1-RTT packet if the peer
//! wants them, and reads the peer's if it sends them.
//!
//! A TIMESTAMP frame says when the peer sent its packet, on the peer's clock; the ACK frame after
//! it says how long the peer held the largest packet it acknowledges (the ACK delay). So the
//! peer received that packet at `timestamp − ack_delay` on its clock, and the packet's forward
//! one-way delay is that minus the time we sent it on ours. The two clocks count from each
//! endpoint's own epoch (its connection's creation), so the value is the one-way delay plus a
//! constant offset (the difference of the epochs), which may make it negative: a consumer that
//! subtracts a minimum (LEDBAT's base delay) cancels it.

use crate::transport_parameters::TransportParameters;
use crate::{Duration, Instant, VarInt};

/// The timestamp state of one connection.
#[derive(Debug)]
pub(super) struct Timestamps {
    /// The epoch of this endpoint's timestamps.
    epoch: Instant,
    /// Whether this endpoint offered the extension.
    offered: bool,
    /// Whether to send TIMESTAMP frames (we offered, the peer wants them).
    pub(super) send: bool,
    /// Whether the peer sends them (we offered, the peer sends them).
    pub(super) receive: bool,
    /// The TIMESTAMP of the packet being read, µs on the peer's clock.
    pub(super) peer: Option<u64>,
}

/// The ACK delay exponent this endpoint encodes ACK delays and timestamps with (noq-proto's
/// default, as in `populate_acks`).
fn own_exponent() -> u64 {
    TransportParameters::default()
        .ack_delay_exponent
        .into_inner()
}

impl Timestamps {
    /// The state of a connection created at `epoch` that offers the extension if `offered`.
    pub(super) fn new(epoch: Instant, offered: bool) -> Self {
        Self {
            epoch,
            offered,
            send: false,
            receive: false,
            peer: None,
        }
    }

    /// The peer's parameters are known.
    pub(super) fn negotiate(&mut self, peer: &TransportParameters) {
        let (wants, sends) = peer.timestamp_bits();
        self.send = self.offered && wants;
        self.receive = self.offered && sends;
    }

    /// The frame to send at `now`.
    pub(super) fn frame(&self, now: Instant) -> crate::frame::Timestamp {
        let micros = now.saturating_duration_since(self.epoch).as_micros() as u64;
        let value = VarInt::from_u64(micros >> own_exponent()).unwrap_or(VarInt::MAX);
        crate::frame::Timestamp(value)
    }

    /// The forward one-way delay (plus the clocks' offset), µs, of a packet sent at `sent` that
    /// the peer acknowledged with `ack_delay` (its encoded field) in a packet whose TIMESTAMP
    /// was `timestamp` (encoded), both with the peer's `exponent`.
    pub(super) fn one_way_delay(
        &self,
        sent: Instant,
        timestamp: u64,
        ack_delay: u64,
        exponent: u64,
    ) -> i64 {
        let scale = |v: u64| i64::try_from(v.saturating_mul(1 << exponent)).unwrap_or(i64::MAX);
        let received = scale(timestamp).saturating_sub(scale(ack_delay));
        let sent = sent.saturating_duration_since(self.epoch);
        received.saturating_sub(micros(sent))
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_the_peer_receive_time_minus_the_send_time() {
        let epoch = Instant::now();
        let ts = Timestamps::new(epoch, true);
        // Sent at 100 ms; the peer (whose epoch is 30 ms later) received it 40 ms later, at 110
        // ms on its clock, and acknowledged it 8 ms after that, at 118 ms (exponent 3).
        let sent = epoch + Duration::from_millis(100);
        let timestamp = 118_000 >> 3;
        let ack_delay = 8_000 >> 3;
        assert_eq!(ts.one_way_delay(sent, timestamp, ack_delay, 3), 10_000);
        // The frame counts from the epoch, in units of 8 µs.
        let frame = ts.frame(epoch + Duration::from_millis(1));
        assert_eq!(frame.0.into_inner(), 125);
    }

    #[test]
    fn both_ends_must_offer() {
        let mut ours = TransportParameters::default();
        let mut ts = Timestamps::new(Instant::now(), true);
        ts.negotiate(&ours);
        assert!(!ts.send && !ts.receive);
        ours.enable_timestamp = Some(VarInt(1));
        ts.negotiate(&ours);
        assert!(ts.send && !ts.receive);
        ours.enable_timestamp = Some(VarInt(3));
        ts.negotiate(&ours);
        assert!(ts.send && ts.receive);
        let mut off = Timestamps::new(Instant::now(), false);
        off.negotiate(&ours);
        assert!(!off.send && !off.receive);
    }
}
