//! The unit that moves through the network: one UDP datagram with real
//! addresses and real payload bytes — or, for middleboxes that measure
//! round trips with ping (PEMI's calibration), an ICMP echo request or
//! reply, which the simulator's hosts answer themselves.

use bytes::Bytes;
use std::net::{IpAddr, SocketAddr};

/// IPv4 header length without options.
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// IPv6 fixed header length.
pub(crate) const IPV6_HEADER_LEN: usize = 40;
/// UDP header length.
pub(crate) const UDP_HEADER_LEN: usize = 8;
/// The TTL (hop limit) a new datagram starts with.
pub const DEFAULT_TTL: u8 = 64;

/// What a datagram carries above IP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// UDP: the ports and payload an endpoint's socket sees.
    #[default]
    Udp,
    /// An ICMP echo request (ping) with its identifier and sequence
    /// number; the ports are 0 and the payload is the echo data.
    EchoRequest {
        /// The identifier.
        id: u16,
        /// The sequence number.
        seq: u16,
    },
    /// An ICMP echo reply: the request's identifier, sequence number and
    /// data.
    EchoReply {
        /// The identifier.
        id: u16,
        /// The sequence number.
        seq: u16,
    },
}

/// One UDP datagram: source and destination socket addresses, an IP TTL and
/// the UDP payload — or an ICMP echo message ([`Protocol`]).
///
/// The payload is the exact bytes an endpoint would hand to a UDP socket
/// (for QUIC: one or more coalesced, encrypted QUIC packets), so a capture of
/// the simulation is a faithful capture of the wire. Hosts only ever see
/// UDP: the simulator answers an echo request to a host itself, as a
/// kernel would, and drops echo replies addressed to one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port; the simulator routes on its IP.
    pub dst: SocketAddr,
    /// IP time-to-live, decremented by every middle node; a datagram whose
    /// TTL runs out is dropped (this bounds routing loops).
    pub ttl: u8,
    /// UDP payload (ICMP: the echo data).
    pub payload: Bytes,
    /// UDP, or an ICMP echo message.
    pub protocol: Protocol,
}

impl Datagram {
    /// A datagram with the default TTL.
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: impl Into<Bytes>) -> Datagram {
        Datagram {
            src,
            dst,
            ttl: DEFAULT_TTL,
            payload: payload.into(),
            protocol: Protocol::Udp,
        }
    }

    /// An ICMP echo request from `src` to `dst` (ports 0) with the default
    /// TTL.
    pub fn echo_request(
        src: IpAddr,
        dst: IpAddr,
        id: u16,
        seq: u16,
        data: impl Into<Bytes>,
    ) -> Datagram {
        Datagram {
            src: SocketAddr::new(src, 0),
            dst: SocketAddr::new(dst, 0),
            ttl: DEFAULT_TTL,
            payload: data.into(),
            protocol: Protocol::EchoRequest { id, seq },
        }
    }

    /// The reply to an echo request (addresses swapped, the same
    /// identifier, sequence number and data, a fresh TTL); `None` for
    /// anything else.
    pub fn echo_reply(&self) -> Option<Datagram> {
        let Protocol::EchoRequest { id, seq } = self.protocol else {
            return None;
        };
        Some(Datagram {
            src: self.dst,
            dst: self.src,
            ttl: DEFAULT_TTL,
            payload: self.payload.clone(),
            protocol: Protocol::EchoReply { id, seq },
        })
    }

    /// Whether it is a UDP datagram (not ICMP).
    pub fn is_udp(&self) -> bool {
        self.protocol == Protocol::Udp
    }

    /// A 64-bit fingerprint of the addresses, protocol and payload
    /// (FNV-1a): equal for byte-identical copies, different otherwise but
    /// for a chance of 2^-64. Ground-truth accounting (which packets a
    /// link dropped, which of them a middlebox resent) matches packets by
    /// it; nothing in a forwarding path needs it.
    pub fn fingerprint(&self) -> u64 {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                hash = (hash ^ u64::from(b)).wrapping_mul(PRIME);
            }
        };
        for addr in [self.src, self.dst] {
            match addr.ip() {
                IpAddr::V4(v4) => eat(&v4.octets()),
                IpAddr::V6(v6) => eat(&v6.octets()),
            }
            eat(&addr.port().to_be_bytes());
        }
        match self.protocol {
            Protocol::Udp => eat(&[17]),
            Protocol::EchoRequest { id, seq } | Protocol::EchoReply { id, seq } => {
                eat(&[1]);
                eat(&id.to_be_bytes());
                eat(&seq.to_be_bytes());
            }
        }
        eat(&self.payload);
        hash
    }

    /// Whether source and destination are both IPv4 (the capture writes a
    /// mixed pair as IPv6 with IPv4-mapped addresses).
    pub fn is_ipv4(&self) -> bool {
        self.src.is_ipv4() && self.dst.is_ipv4()
    }

    /// The size of the IP packet that carries this datagram: payload, UDP
    /// header (or the ICMP echo header, also 8 bytes) and IPv4 (20 bytes)
    /// or IPv6 (40 bytes) header. This is the
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

    #[test]
    fn echo_requests_have_replies_and_fingerprints_tell_copies() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let request = Datagram::echo_request(a, b, 7, 9, vec![1u8; 56]);
        assert_eq!(request.wire_len(), 20 + 8 + 56);
        assert!(!request.is_udp());
        let reply = request.echo_reply().unwrap();
        assert_eq!((reply.src.ip(), reply.dst.ip()), (b, a));
        assert_eq!(reply.protocol, Protocol::EchoReply { id: 7, seq: 9 });
        assert_eq!(reply.payload, request.payload);
        assert!(reply.echo_reply().is_none());
        let udp = Datagram::new(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            vec![1u8; 56],
        );
        assert!(udp.is_udp() && udp.echo_reply().is_none());
        assert_eq!(udp.fingerprint(), udp.clone().fingerprint());
        assert_ne!(udp.fingerprint(), request.fingerprint());
        let mut other = udp.clone();
        other.payload = vec![2u8; 56].into();
        assert_ne!(udp.fingerprint(), other.fingerprint());
        // The TTL changes hop by hop; the fingerprint does not.
        let mut hopped = udp.clone();
        hopped.ttl -= 1;
        assert_eq!(udp.fingerprint(), hopped.fingerprint());
    }
}
