//! TECC's feedback where the application server's controller reads it.
//!
//! The tunnel client relays each TUNNEL_INFO it receives to the
//! application server as a QUIC_INFO datagram on the end-to-end connection
//! ([`crate::TunnelClientConfig::feedback`]). On the server, the endpoint's
//! datagram channel hands each one to [`deliver_feedback`], which decodes
//! it and pushes `cc`'s [`Signal::TunnelFeedback`] to the queue the
//! server's controller drains (`cc::Tecc`). The wire format stays here:
//! the controller reads only `cc`'s signal.

use crate::wire::feedback::Feedback;
use cc::{Signal, Signals, TunnelFeedback};
use quic::DatagramChannel;

impl Feedback {
    /// The signal a controller reads (the cycle τ is the tunnel's
    /// business).
    pub fn signal(&self) -> TunnelFeedback {
        TunnelFeedback {
            sequence: self.sequence,
            rate_bps: self.rate_bps,
            queue_bytes: self.queue_bytes,
            retransmit_ppm: self.retransmit_ppm,
            tunnel_min_rtt: self.tunnel_min_rtt,
            repair_delay: self.repair_delay,
        }
    }
}

/// Makes the application server endpoint's `channel` turn every QUIC_INFO
/// datagram it receives into a [`Signal::TunnelFeedback`] on `signals`, at
/// once and in order; other datagrams and malformed ones are dropped.
pub fn deliver_feedback(channel: &DatagramChannel, signals: Signals) {
    channel.deliver_to(move |_, datagram| {
        if let Ok(Some(feedback)) = Feedback::from_quic_info(&datagram) {
            signals.push(Signal::TunnelFeedback(feedback.signal()));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signal_carries_what_a_controller_reads() {
        let feedback = Feedback::example();
        let signal = feedback.signal();
        assert_eq!(
            (
                signal.sequence,
                signal.rate_bps,
                signal.queue_bytes,
                signal.retransmit_ppm,
                signal.tunnel_min_rtt,
                signal.repair_delay
            ),
            (
                feedback.sequence,
                feedback.rate_bps,
                feedback.queue_bytes,
                feedback.retransmit_ppm,
                feedback.tunnel_min_rtt,
                feedback.repair_delay
            )
        );
    }
}
