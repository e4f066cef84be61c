//! Frames as a sniffing daemon sees them, and IP packets as a raw socket
//! sends them.
//!
//! [`parse_frame`] reads an Ethernet II frame (optionally with one 802.1Q
//! or 802.1ad tag) carrying IPv4 (header options honoured) and UDP, and
//! borrows the UDP payload; an ICMP echo request or reply with a valid
//! ICMP checksum is [`Frame::Echo`] (the in-path driver hands the replies
//! addressed to the node to its engine: PEMI's RTT calibration). Anything
//! else — ARP, IPv6, TCP, other ICMP, IP fragments (the first one
//! included: a UDP header alone does not make a datagram) — is
//! [`Frame::Other`], with the reason; bytes that claim to be IPv4 or UDP
//! but are inconsistent (truncated, a bad header length or checksum) are a
//! [`FrameError`]. No input panics.
//!
//! The IPv4 header checksum is verified (the kernel drops a packet whose
//! checksum is wrong, so counting it would be wrong); the UDP checksum is
//! not (a router does not check it either, and a sender with checksum
//! offload may hand the wire a partial one that the NIC completes).
//!
//! [`ipv4_packet`] builds the reverse: a complete IPv4 + UDP (or ICMP
//! echo) packet with its checksums, for a raw socket with `IP_HDRINCL`,
//! and [`write_frame`] the same in an Ethernet frame, for a packet socket
//! (the in-path middlebox driver, [`crate::driver`]).

use bytes::Bytes;
use netsim::{Datagram, Protocol};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

/// Bytes of an Ethernet II header.
pub const ETHERNET_HEADER: usize = 14;
/// Bytes of an IPv4 header without options.
pub const IPV4_HEADER: usize = 20;
/// Bytes of a UDP header.
pub const UDP_HEADER: usize = 8;
/// The largest UDP payload an IPv4 packet can carry.
pub const MAX_UDP_PAYLOAD: usize = 65_535 - IPV4_HEADER - UDP_HEADER;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const PROTOCOL_UDP: u8 = 17;
const PROTOCOL_ICMP: u8 = 1;
const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO_REQUEST: u8 = 8;
/// Bytes of an ICMP echo header (type, code, checksum, identifier,
/// sequence number).
const ICMP_ECHO_HEADER: usize = 8;

/// A UDP datagram inside a frame, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpPacket<'a> {
    /// Source address and port.
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The IP time-to-live as it arrived.
    pub ttl: u8,
    /// The UDP payload (as long as the UDP header says).
    pub payload: &'a [u8],
}

impl UdpPacket<'_> {
    /// An owned [`netsim::Datagram`] (copies the payload).
    pub fn to_datagram(&self) -> Datagram {
        Datagram {
            src: SocketAddr::V4(self.src),
            dst: SocketAddr::V4(self.dst),
            ttl: self.ttl,
            payload: Bytes::copy_from_slice(self.payload),
            protocol: Protocol::Udp,
        }
    }
}

/// An ICMP echo request or reply inside a frame, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EchoPacket<'a> {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// The IP time-to-live as it arrived.
    pub ttl: u8,
    /// The echo message's kind, identifier and sequence number
    /// ([`Protocol::EchoRequest`] or [`Protocol::EchoReply`]).
    pub protocol: Protocol,
    /// The echo data.
    pub data: &'a [u8],
}

impl EchoPacket<'_> {
    /// An owned [`netsim::Datagram`] (ports 0; copies the data).
    pub fn to_datagram(&self) -> Datagram {
        Datagram {
            src: SocketAddr::new(IpAddr::V4(self.src), 0),
            dst: SocketAddr::new(IpAddr::V4(self.dst), 0),
            ttl: self.ttl,
            payload: Bytes::copy_from_slice(self.data),
            protocol: self.protocol,
        }
    }
}

/// Why a well-formed frame is not an IPv4/UDP datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Other {
    /// Not IPv4 (the innermost EtherType).
    NotIpv4(u16),
    /// IPv4 but not UDP (the protocol number).
    NotUdp(u8),
    /// An IPv4 fragment (any: the first one's UDP header does not make a
    /// whole datagram).
    Fragment,
}

/// What a frame holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete UDP datagram over IPv4.
    Udp(UdpPacket<'a>),
    /// An ICMP echo request or reply over IPv4 (checksum verified).
    Echo(EchoPacket<'a>),
    /// Something else, well formed as far as it was read.
    Other(Other),
}

/// A frame or packet that claims a layout it does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than a header it announces.
    #[error("truncated {layer}: {needed} bytes needed, {got} present")]
    Truncated {
        /// `ethernet`, `vlan`, `ipv4` or `udp`.
        layer: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// An IPv4 header whose version is not 4.
    #[error("IP version {0} where IPv4 was announced")]
    BadVersion(u8),
    /// An IPv4 header length below 20 bytes.
    #[error("IPv4 header length {0} bytes")]
    BadHeaderLength(usize),
    /// An IPv4 total length shorter than its header.
    #[error("IPv4 total length {total} shorter than its {header}-byte header")]
    BadTotalLength {
        /// The total length field.
        total: usize,
        /// The header length.
        header: usize,
    },
    /// A wrong IPv4 header checksum.
    #[error("bad IPv4 header checksum")]
    BadChecksum,
    /// A UDP length shorter than the UDP header.
    #[error("UDP length {0} shorter than the header")]
    BadUdpLength(usize),
    /// Not an IPv4 address pair (for [`ipv4_packet`]).
    #[error("not an IPv4 datagram")]
    NotIpv4,
    /// A payload too large for one IPv4 packet (for [`ipv4_packet`]).
    #[error("a UDP payload of {0} bytes does not fit an IPv4 packet")]
    TooLarge(usize),
}

fn need(layer: &'static str, bytes: &[u8], needed: usize) -> Result<(), FrameError> {
    if bytes.len() < needed {
        Err(FrameError::Truncated {
            layer,
            needed,
            got: bytes.len(),
        })
    } else {
        Ok(())
    }
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// Parses an Ethernet frame (the bytes a packet socket returns).
pub fn parse_frame(frame: &[u8]) -> Result<Frame<'_>, FrameError> {
    need("ethernet", frame, ETHERNET_HEADER)?;
    let mut ethertype = be16(frame, 12);
    let mut at = ETHERNET_HEADER;
    // One tag (802.1Q, or an 802.1ad outer tag followed by an inner one).
    for _ in 0..2 {
        if ethertype != ETHERTYPE_VLAN && ethertype != ETHERTYPE_QINQ {
            break;
        }
        need("vlan", frame, at + 4)?;
        ethertype = be16(frame, at + 2);
        at += 4;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Ok(Frame::Other(Other::NotIpv4(ethertype)));
    }
    parse_ipv4(&frame[at..])
}

/// Parses an IPv4 packet (no link header). Bytes after the IP total
/// length (Ethernet padding) are ignored.
pub fn parse_ipv4(packet: &[u8]) -> Result<Frame<'_>, FrameError> {
    need("ipv4", packet, IPV4_HEADER)?;
    let version = packet[0] >> 4;
    if version != 4 {
        return Err(FrameError::BadVersion(version));
    }
    let header = usize::from(packet[0] & 0x0f) * 4;
    if header < IPV4_HEADER {
        return Err(FrameError::BadHeaderLength(header));
    }
    need("ipv4", packet, header)?;
    let total = usize::from(be16(packet, 2));
    if total < header {
        return Err(FrameError::BadTotalLength { total, header });
    }
    need("ipv4", packet, total)?;
    if checksum(&[&packet[..header]]) != 0 {
        return Err(FrameError::BadChecksum);
    }
    let flags_fragment = be16(packet, 6);
    // More fragments, or a fragment offset: part of a datagram.
    if flags_fragment & 0x3fff != 0 {
        return Ok(Frame::Other(Other::Fragment));
    }
    let protocol = packet[9];
    let ttl = packet[8];
    let src_ip = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let dst_ip = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    if protocol == PROTOCOL_ICMP {
        let icmp = &packet[header..total];
        return Ok(match parse_echo(icmp) {
            Some((protocol, data)) => Frame::Echo(EchoPacket {
                src: src_ip,
                dst: dst_ip,
                ttl,
                protocol,
                data,
            }),
            None => Frame::Other(Other::NotUdp(protocol)),
        });
    }
    if protocol != PROTOCOL_UDP {
        return Ok(Frame::Other(Other::NotUdp(protocol)));
    }
    let udp = &packet[header..total];
    need("udp", udp, UDP_HEADER)?;
    let length = usize::from(be16(udp, 4));
    if length < UDP_HEADER {
        return Err(FrameError::BadUdpLength(length));
    }
    need("udp", udp, length)?;
    Ok(Frame::Udp(UdpPacket {
        src: SocketAddrV4::new(src_ip, be16(udp, 0)),
        dst: SocketAddrV4::new(dst_ip, be16(udp, 2)),
        ttl,
        payload: &udp[UDP_HEADER..length],
    }))
}

/// An ICMP message's echo kind and data, if it is an echo request or
/// reply (code 0) with a correct checksum.
fn parse_echo(icmp: &[u8]) -> Option<(Protocol, &[u8])> {
    if icmp.len() < ICMP_ECHO_HEADER || icmp[1] != 0 || checksum(&[icmp]) != 0 {
        return None;
    }
    let (id, seq) = (be16(icmp, 4), be16(icmp, 6));
    let protocol = match icmp[0] {
        ICMP_ECHO_REQUEST => Protocol::EchoRequest { id, seq },
        ICMP_ECHO_REPLY => Protocol::EchoReply { id, seq },
        _ => return None,
    };
    Some((protocol, &icmp[ICMP_ECHO_HEADER..]))
}

/// The Internet checksum (RFC 1071) of the concatenated `parts` (each of
/// even length but the last): 0 over a header that includes a correct one.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for pair in &mut chunks {
            sum += u64::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(u16::from_be_bytes([*last, 0]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes the IPv4 packet of `datagram` into `out` (cleared first): a
/// 20-byte header with don't-fragment set, ID 0 (the kernel picks one for
/// a raw socket), the datagram's TTL, a valid IP checksum, and UDP with a
/// valid checksum — or, for an echo datagram ([`Protocol`]), the ICMP
/// echo message with its checksum.
pub fn write_ipv4_packet(datagram: &Datagram, out: &mut Vec<u8>) -> Result<(), FrameError> {
    out.clear();
    append_ipv4_packet(datagram, out)
}

/// Writes an Ethernet II frame carrying `datagram` into `out` (cleared
/// first): destination and source MAC, EtherType IPv4, then the packet of
/// [`write_ipv4_packet`] (no padding: the NIC or veth pads short frames).
pub fn write_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    datagram: &Datagram,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    out.clear();
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&src_mac);
    out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    append_ipv4_packet(datagram, out).inspect_err(|_| out.clear())
}

/// The destination address of an Ethernet frame carrying IPv4 (after at
/// most two VLAN tags), whatever the protocol; `None` for anything else or
/// a header too short to hold it. Checks nothing else (see
/// [`parse_frame`]).
pub fn ipv4_destination(frame: &[u8]) -> Option<Ipv4Addr> {
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let mut at = ETHERNET_HEADER;
    for _ in 0..2 {
        if ethertype != ETHERTYPE_VLAN && ethertype != ETHERTYPE_QINQ {
            break;
        }
        ethertype = u16::from_be_bytes([*frame.get(at + 2)?, *frame.get(at + 3)?]);
        at += 4;
    }
    if ethertype != ETHERTYPE_IPV4 || frame.get(at)? >> 4 != 4 {
        return None;
    }
    let dst: [u8; 4] = frame.get(at + 16..at + 20)?.try_into().ok()?;
    Some(Ipv4Addr::from(dst))
}

/// Appends the packet of [`write_ipv4_packet`] to `out`.
fn append_ipv4_packet(datagram: &Datagram, out: &mut Vec<u8>) -> Result<(), FrameError> {
    let (SocketAddr::V4(src), SocketAddr::V4(dst)) = (datagram.src, datagram.dst) else {
        return Err(FrameError::NotIpv4);
    };
    let payload = &datagram.payload[..];
    if payload.len() > MAX_UDP_PAYLOAD {
        return Err(FrameError::TooLarge(payload.len()));
    }
    // UDP's and ICMP echo's headers are both 8 bytes.
    let udp_len = (UDP_HEADER + payload.len()) as u16;
    let total = IPV4_HEADER as u16 + udp_len;
    let ip = out.len();
    let udp = ip + IPV4_HEADER;
    let protocol = match datagram.protocol {
        Protocol::Udp => PROTOCOL_UDP,
        Protocol::EchoRequest { .. } | Protocol::EchoReply { .. } => PROTOCOL_ICMP,
    };
    out.reserve(usize::from(total));
    out.extend_from_slice(&[0x45, 0]);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0, datagram.ttl, protocol, 0, 0]);
    out.extend_from_slice(&src.ip().octets());
    out.extend_from_slice(&dst.ip().octets());
    let ip_checksum = checksum(&[&out[ip..udp]]);
    out[ip + 10..ip + 12].copy_from_slice(&ip_checksum.to_be_bytes());
    let (kind, id, seq) = match datagram.protocol {
        Protocol::Udp => (None, 0, 0),
        Protocol::EchoRequest { id, seq } => (Some(ICMP_ECHO_REQUEST), id, seq),
        Protocol::EchoReply { id, seq } => (Some(ICMP_ECHO_REPLY), id, seq),
    };
    if let Some(kind) = kind {
        out.extend_from_slice(&[kind, 0, 0, 0]);
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&seq.to_be_bytes());
        out.extend_from_slice(payload);
        let sum = checksum(&[&out[udp..]]);
        out[udp + 2..udp + 4].copy_from_slice(&sum.to_be_bytes());
        return Ok(());
    }
    out.extend_from_slice(&src.port().to_be_bytes());
    out.extend_from_slice(&dst.port().to_be_bytes());
    out.extend_from_slice(&udp_len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    // The pseudo-header: addresses, zero, protocol, UDP length.
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = PROTOCOL_UDP;
    pseudo[10..12].copy_from_slice(&udp_len.to_be_bytes());
    let udp_checksum = match checksum(&[&pseudo, &out[udp..]]) {
        0 => 0xffff, // 0 means "no checksum" in UDP over IPv4
        sum => sum,
    };
    out[udp + 6..udp + 8].copy_from_slice(&udp_checksum.to_be_bytes());
    Ok(())
}

/// The IPv4 packet of `datagram` (see [`write_ipv4_packet`]).
pub fn ipv4_packet(datagram: &Datagram) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    write_ipv4_packet(datagram, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn datagram(src: &str, dst: &str, ttl: u8, payload: &[u8]) -> Datagram {
        Datagram {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            ttl,
            payload: Bytes::copy_from_slice(payload),
            protocol: Protocol::Udp,
        }
    }

    fn ethernet(ethertype: u16, body: &[u8]) -> Vec<u8> {
        let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(body);
        frame
    }

    #[test]
    fn a_built_packet_parses_back_and_etherparse_agrees() {
        let d = datagram("10.0.1.10:4433", "10.0.2.10:5000", 63, b"hello, sidekick");
        let packet = ipv4_packet(&d).unwrap();
        assert_eq!(packet.len(), 20 + 8 + 15);
        let Frame::Udp(udp) = parse_ipv4(&packet).unwrap() else {
            panic!("not UDP")
        };
        assert_eq!(udp.to_datagram(), d);
        // An independent parser checks both checksums.
        let sliced = etherparse::SlicedPacket::from_ip(&packet).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &sliced.net else {
            panic!("not IPv4")
        };
        let header = ip.header().to_header();
        assert_eq!(header.header_checksum, header.calc_header_checksum());
        assert!(header.dont_fragment);
        let Some(etherparse::TransportSlice::Udp(u)) = &sliced.transport else {
            panic!("not UDP")
        };
        let expected = u
            .to_header()
            .calc_checksum_ipv4(&header, u.payload())
            .unwrap();
        assert_eq!(u.checksum(), expected);
    }

    #[test]
    fn tags_padding_and_options_are_handled() {
        let d = datagram("192.168.1.2:1", "192.168.1.3:2", 5, &[7; 3]);
        let mut packet = ipv4_packet(&d).unwrap();
        // Ethernet pads short frames: the padding is not payload.
        let mut padded = packet.clone();
        padded.extend_from_slice(&[0; 20]);
        let frame = ethernet(ETHERTYPE_IPV4, &padded);
        assert_eq!(parse_frame(&frame).unwrap(), parse_ipv4(&packet).unwrap());
        // One 802.1Q tag.
        let mut tagged = ethernet(ETHERTYPE_VLAN, &[0, 42]);
        tagged.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        tagged.extend_from_slice(&packet);
        let Frame::Udp(udp) = parse_frame(&tagged).unwrap() else {
            panic!("not UDP")
        };
        assert_eq!(udp.payload, &[7; 3]);
        // Four bytes of IP options (IHL 6), checksum fixed up.
        packet.splice(20..20, [1, 1, 1, 0]);
        packet[0] = 0x46;
        let total = packet.len() as u16;
        packet[2..4].copy_from_slice(&total.to_be_bytes());
        packet[10..12].copy_from_slice(&[0, 0]);
        let sum = checksum(&[&packet[..24]]);
        packet[10..12].copy_from_slice(&sum.to_be_bytes());
        let Frame::Udp(udp) = parse_ipv4(&packet).unwrap() else {
            panic!("not UDP")
        };
        assert_eq!(udp.to_datagram(), d);
    }

    #[test]
    fn other_traffic_is_named_and_bad_headers_are_errors() {
        let arp = ethernet(0x0806, &[0; 28]);
        assert_eq!(parse_frame(&arp), Ok(Frame::Other(Other::NotIpv4(0x0806))));
        let d = datagram("10.0.0.1:1", "10.0.0.2:2", 64, &[1, 2, 3, 4]);
        let packet = ipv4_packet(&d).unwrap();
        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut p = packet.clone();
            f(&mut p);
            // Keep the header checksum right, so the named error shows.
            p[10..12].copy_from_slice(&[0, 0]);
            let sum = checksum(&[&p[..20]]);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
            parse_ipv4(&p).map(|f| match f {
                Frame::Other(other) => Some(other),
                Frame::Udp(_) | Frame::Echo(_) => None,
            })
        };
        assert_eq!(with(&|p| p[9] = 6), Ok(Some(Other::NotUdp(6))));
        assert_eq!(with(&|p| p[6] = 0x20), Ok(Some(Other::Fragment)));
        assert_eq!(with(&|p| p[7] = 1), Ok(Some(Other::Fragment)));
        assert_eq!(with(&|_| {}), Ok(None));
        assert_eq!(with(&|p| p[0] = 0x65), Err(FrameError::BadVersion(6)));
        assert_eq!(with(&|p| p[0] = 0x44), Err(FrameError::BadHeaderLength(16)));
        assert!(matches!(
            with(&|p| p[2..4].copy_from_slice(&200u16.to_be_bytes())),
            Err(FrameError::Truncated { layer: "ipv4", .. })
        ));
        assert_eq!(
            with(&|p| p[24..26].copy_from_slice(&7u16.to_be_bytes())),
            Err(FrameError::BadUdpLength(7))
        );
        assert!(matches!(
            with(&|p| p[24..26].copy_from_slice(&13u16.to_be_bytes())),
            Err(FrameError::Truncated { layer: "udp", .. })
        ));
        let mut bad = packet.clone();
        bad[8] ^= 1;
        assert_eq!(parse_ipv4(&bad), Err(FrameError::BadChecksum));
        assert!(matches!(
            parse_frame(&[0; 13]),
            Err(FrameError::Truncated {
                layer: "ethernet",
                ..
            })
        ));
        assert!(matches!(
            parse_frame(&ethernet(ETHERTYPE_VLAN, &[0, 1])),
            Err(FrameError::Truncated { layer: "vlan", .. })
        ));
        let v6 = datagram("[::1]:1", "[::1]:2", 64, &[]);
        assert_eq!(ipv4_packet(&v6), Err(FrameError::NotIpv4));
    }

    #[test]
    fn echo_messages_round_trip_and_etherparse_agrees() {
        let request = Datagram::echo_request(
            "10.255.255.2".parse().unwrap(),
            "10.0.2.10".parse().unwrap(),
            0x1234,
            7,
            vec![0xab; 33],
        );
        for d in [request.clone(), request.echo_reply().unwrap()] {
            let packet = ipv4_packet(&d).unwrap();
            assert_eq!(packet.len(), 20 + 8 + 33);
            let Frame::Echo(echo) = parse_ipv4(&packet).unwrap() else {
                panic!("not an echo message")
            };
            assert_eq!(echo.to_datagram(), d);
            let sliced = etherparse::SlicedPacket::from_ip(&packet).unwrap();
            let Some(etherparse::TransportSlice::Icmpv4(icmp)) = &sliced.transport else {
                panic!("not ICMP")
            };
            assert_eq!(
                icmp.checksum(),
                icmp.icmp_type().calc_checksum(icmp.payload())
            );
        }
        // A wrong ICMP checksum, or another ICMP type: not an echo message.
        let mut bad = ipv4_packet(&request).unwrap();
        bad[30] ^= 1;
        assert_eq!(parse_ipv4(&bad), Ok(Frame::Other(Other::NotUdp(1))));
        let mut unreachable = ipv4_packet(&request).unwrap();
        unreachable[20] = 3;
        assert_eq!(parse_ipv4(&unreachable), Ok(Frame::Other(Other::NotUdp(1))));
    }

    #[test]
    fn a_built_frame_parses_back_and_names_its_destination() {
        let d = datagram(
            "10.0.2.10:5000",
            "10.0.1.10:6000",
            63,
            b"through the middle",
        );
        let (dst_mac, src_mac) = ([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 8]);
        let mut frame = vec![1, 2, 3]; // cleared first
        write_frame(dst_mac, src_mac, &d, &mut frame).unwrap();
        assert_eq!(&frame[..6], &dst_mac);
        assert_eq!(&frame[6..12], &src_mac);
        assert_eq!(&frame[14..], &ipv4_packet(&d).unwrap()[..]);
        let Frame::Udp(udp) = parse_frame(&frame).unwrap() else {
            panic!("not UDP")
        };
        assert_eq!(udp.to_datagram(), d);
        assert_eq!(ipv4_destination(&frame), Some("10.0.1.10".parse().unwrap()));
        // Whatever the protocol, behind a tag; nothing for ARP or scraps.
        let mut tcp = frame.clone();
        tcp[14 + 9] = 6;
        assert_eq!(ipv4_destination(&tcp), Some("10.0.1.10".parse().unwrap()));
        let mut tagged = ethernet(ETHERTYPE_VLAN, &[0, 42]);
        tagged.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        tagged.extend_from_slice(&frame[14..]);
        assert_eq!(
            ipv4_destination(&tagged),
            Some("10.0.1.10".parse().unwrap())
        );
        assert_eq!(ipv4_destination(&ethernet(0x0806, &[0; 28])), None);
        assert_eq!(ipv4_destination(&frame[..30]), None);
        let v6 = datagram("[::1]:1", "[::1]:2", 64, &[]);
        let mut out = vec![7];
        assert_eq!(
            write_frame(dst_mac, src_mac, &v6, &mut out),
            Err(FrameError::NotIpv4)
        );
        assert!(out.is_empty());
    }

    proptest! {
        #[test]
        fn any_datagram_round_trips(
            src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
            sport in any::<u16>(), dport in any::<u16>(), ttl in any::<u8>(),
            payload in proptest::collection::vec(any::<u8>(), 0..1600),
            tag in any::<bool>(),
        ) {
            let d = Datagram {
                src: SocketAddr::from((src, sport)),
                dst: SocketAddr::from((dst, dport)),
                ttl,
                payload: Bytes::from(payload),
                protocol: Protocol::Udp,
            };
            let packet = ipv4_packet(&d).unwrap();
            let frame = if tag {
                let mut f = ethernet(ETHERTYPE_VLAN, &[0, 7]);
                f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                f.extend_from_slice(&packet);
                f
            } else {
                ethernet(ETHERTYPE_IPV4, &packet)
            };
            let Ok(Frame::Udp(udp)) = parse_frame(&frame) else {
                panic!("not parsed back");
            };
            prop_assert_eq!(udp.to_datagram(), d);
            let sliced = etherparse::SlicedPacket::from_ip(&packet).unwrap();
            let Some(etherparse::TransportSlice::Udp(u)) = &sliced.transport else {
                panic!("not UDP")
            };
            let Some(etherparse::NetSlice::Ipv4(ip)) = &sliced.net else {
                panic!("not IPv4")
            };
            let expected = u
                .to_header()
                .calc_checksum_ipv4(&ip.header().to_header(), u.payload())
                .unwrap();
            prop_assert_eq!(u.checksum(), expected);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_frame(&bytes);
            let _ = parse_ipv4(&bytes);
            let _ = ipv4_destination(&bytes);
        }

        #[test]
        fn corrupted_packets_never_panic(
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            flips in proptest::collection::vec((0usize..100, any::<u8>()), 1..6),
            cut in 0usize..120,
        ) {
            let d = Datagram::new(
                "10.0.0.1:1".parse().unwrap(),
                "10.0.0.2:2".parse().unwrap(),
                payload,
            );
            let mut frame = ethernet(ETHERTYPE_IPV4, &ipv4_packet(&d).unwrap());
            let n = frame.len();
            for (at, x) in flips {
                frame[at % n] ^= x;
            }
            frame.truncate(cut.min(n));
            if let Ok(Frame::Udp(udp)) = parse_frame(&frame) {
                // Whatever parsed lies inside the frame.
                prop_assert!(udp.payload.len() <= frame.len());
            }
        }
    }
}
