//! TECC's feedback (§4.2.2) on the wire: what the tunnel server's network
//! sampler measured over one feedback cycle.
//!
//! The same fields travel twice (the paper's TUNNEL_INFO and QUIC_INFO
//! frames):
//!
//! * **TUNNEL_INFO**, a capsule (type `0x7ecc01`, unregistered) on the
//!   CONNECT stream from the tunnel server to the tunnel client: reliable
//!   and in order, inside the tunnel connection's encryption.
//! * **QUIC_INFO**, a QUIC DATAGRAM frame (RFC 9221) of the end-to-end
//!   connection from the application client to the application server,
//!   inside the end-to-end encryption, so that the path sees nothing new:
//!   the varint `0x7ecc01` then the fields. noq-proto refuses unknown frame
//!   types, which rules out the paper's own QUIC frame; a lost QUIC_INFO is
//!   not resent (the next cycle's replaces it).
//!
//! Fields, each a QUIC variable-length integer (RFC 9000 §16), in order:
//!
//! | field | unit | meaning |
//! |---|---|---|
//! | sequence | – | the cycle's number, from 0; a receiver ignores older ones |
//! | tunnel rate Tr | bit/s | the tunnel server's sending rate for this tunnel (its controller's pacing rate) |
//! | queue q | bytes | the smallest queue of packets waiting in the tunnel server for this tunnel over the cycle, after the multiple-detection filter |
//! | retransmission ratio r | parts per million | datagrams the tunnel server retransmitted over those it sent in the cycle |
//! | tunnel min RTT T_t | µs | the tunnel connection's minimum RTT |
//! | cycle τ | µs | the feedback cycle (T_t) |
//! | repair delay | µs | the largest time from first send to acknowledgement of the tunnel's latest 64 acknowledged repairs (0 before the first; ours, not the paper's) |

use super::{WireError, varint};
use std::time::Duration;

/// The varint that opens a QUIC_INFO datagram, and TUNNEL_INFO's capsule
/// type (ours, not registered).
pub const QUIC_INFO: u64 = 0x7ecc01;

/// One cycle's feedback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feedback {
    /// The cycle's number.
    pub sequence: u64,
    /// Tr: the tunnel server's sending rate, bit/s.
    pub rate_bps: u64,
    /// q: the tunnel server's queue for this tunnel, bytes.
    pub queue_bytes: u64,
    /// r: the retransmission ratio, parts per million.
    pub retransmit_ppm: u64,
    /// T_t: the tunnel's minimum RTT.
    pub tunnel_min_rtt: Duration,
    /// τ: the feedback cycle.
    pub cycle: Duration,
    /// How long the tunnel's recent repairs took, first send to
    /// acknowledgement (the largest of the latest 64; zero before the
    /// first).
    pub repair_delay: Duration,
}

/// The largest value a field may take: more is nonsense or an attack.
const MAX_FIELD: u64 = 1 << 48;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros())
        .unwrap_or(MAX_FIELD)
        .min(MAX_FIELD)
}

impl Feedback {
    /// A plausible value for tests.
    #[doc(hidden)]
    pub fn example() -> Feedback {
        Feedback {
            sequence: 7,
            rate_bps: 10_000_000,
            queue_bytes: 12_000,
            retransmit_ppm: 50_000,
            tunnel_min_rtt: Duration::from_millis(20),
            cycle: Duration::from_millis(20),
            repair_delay: Duration::from_millis(45),
        }
    }

    /// Appends the fields.
    pub fn encode_fields(&self, out: &mut Vec<u8>) {
        for value in [
            self.sequence,
            self.rate_bps,
            self.queue_bytes,
            self.retransmit_ppm,
            micros(self.tunnel_min_rtt),
            micros(self.cycle),
            micros(self.repair_delay),
        ] {
            varint::write(out, value.min(MAX_FIELD));
        }
    }

    /// Reads the fields.
    pub fn decode_fields(input: &mut &[u8]) -> Result<Feedback, WireError> {
        let mut field = || {
            let value = varint::read(input)?;
            if value > MAX_FIELD {
                return Err(WireError::TooLarge("feedback field"));
            }
            Ok(value)
        };
        let feedback = Feedback {
            sequence: field()?,
            rate_bps: field()?,
            queue_bytes: field()?,
            retransmit_ppm: field()?,
            tunnel_min_rtt: Duration::from_micros(field()?),
            cycle: Duration::from_micros(field()?),
            repair_delay: Duration::from_micros(field()?),
        };
        if feedback.retransmit_ppm > 1_000_000 {
            return Err(WireError::Malformed("a ratio above one"));
        }
        Ok(feedback)
    }

    /// The QUIC_INFO datagram.
    pub fn to_quic_info(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        varint::write(&mut out, QUIC_INFO);
        self.encode_fields(&mut out);
        out
    }

    /// Parses a QUIC_INFO datagram; `Ok(None)` for a datagram of another
    /// kind.
    pub fn from_quic_info(mut datagram: &[u8]) -> Result<Option<Feedback>, WireError> {
        if varint::read(&mut datagram)? != QUIC_INFO {
            return Ok(None);
        }
        let feedback = Feedback::decode_fields(&mut datagram)?;
        if !datagram.is_empty() {
            return Err(WireError::Malformed("bytes after QUIC_INFO"));
        }
        Ok(Some(feedback))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quic_info_round_trips_and_others_are_not_feedback() {
        let feedback = Feedback::example();
        let datagram = feedback.to_quic_info();
        assert_eq!(Feedback::from_quic_info(&datagram), Ok(Some(feedback)));
        assert_eq!(Feedback::from_quic_info(&[0x01, 0x02]), Ok(None));
        assert!(Feedback::from_quic_info(&datagram[..datagram.len() - 1]).is_err());
        let mut bad = Vec::new();
        varint::write(&mut bad, QUIC_INFO);
        Feedback {
            retransmit_ppm: 2_000_000,
            ..feedback
        }
        .encode_fields(&mut bad);
        assert!(Feedback::from_quic_info(&bad).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Feedback::from_quic_info(&input);
        }
    }
}
