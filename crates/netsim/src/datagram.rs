//! The unit that moves through the network: one UDP datagram with real
//! addresses and real payload bytes.

use bytes::Bytes;
use std::net::SocketAddr;

/// IPv4 header length without options.
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// IPv6 fixed header length.
pub(crate) const IPV6_HEADER_LEN: usize = 40;
/// UDP header length.
pub(crate) const UDP_HEADER_LEN: usize = 8;
/// The TTL (hop limit) a new datagram starts with.
pub const DEFAULT_TTL: u8 = 64;

/// One UDP datagram: source and destination socket addresses, an IP TTL and
/// the UDP payload.
///
/// The payload is the exact bytes an endpoint would hand to a UDP socket
/// (for QUIC: one or more coalesced, encrypted QUIC packets), so a capture of
/// the simulation is a faithful capture of the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port; the simulator routes on its IP.
    pub dst: SocketAddr,
    /// IP time-to-live, decremented by every middle node; a datagram whose
    /// TTL runs out is dropped (this bounds routing loops).
    pub ttl: u8,
    /// UDP payload.
    pub payload: Bytes,
}

impl Datagram {
    /// A datagram with the default TTL.
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: impl Into<Bytes>) -> Datagram {
        Datagram {
            src,
            dst,
            ttl: DEFAULT_TTL,
            payload: payload.into(),
        }
    }

    /// Whether source and destination are both IPv4 (the capture writes a
    /// mixed pair as IPv6 with IPv4-mapped addresses).
    pub fn is_ipv4(&self) -> bool {
        self.src.is_ipv4() && self.dst.is_ipv4()
    }

    /// The size of the IP packet that carries this datagram: payload, UDP
    /// header and IPv4 (20 bytes) or IPv6 (40 bytes) header. This is the
    /// length links count against their rate and buffer (no link-layer
    /// framing, like mahimahi).
    pub fn wire_len(&self) -> usize {
        let ip = if self.is_ipv4() {
            IPV4_HEADER_LEN
        } else {
            IPV6_HEADER_LEN
        };
        self.payload.len() + UDP_HEADER_LEN + ip
    }

    /// The same datagram sent back: source and destination swapped, the
    /// given payload, a fresh TTL.
    pub fn reply(&self, payload: impl Into<Bytes>) -> Datagram {
        Datagram::new(self.dst, self.src, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_len_counts_ip_and_udp_headers() {
        let v4 = Datagram::new(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            vec![0u8; 1472],
        );
        assert_eq!(v4.wire_len(), 1500);
        let v6 = Datagram::new(
            "[::1]:1".parse().unwrap(),
            "[::2]:2".parse().unwrap(),
            vec![0u8; 100],
        );
        assert_eq!(v6.wire_len(), 148);
        assert_eq!(v4.reply(Bytes::new()).dst, v4.src);
    }
}
