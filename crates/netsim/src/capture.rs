//! Packet capture: pcap files of what crosses a link, with virtual
//! timestamps.
//!
//! Each datagram is written as a full Ethernet II / IPv4 (or IPv6) / UDP (or
//! ICMP echo) frame with valid checksums, so Wireshark and tshark dissect it like a capture
//! from a real interface (add the endpoints' TLS key log to decrypt QUIC).
//! Timestamps are virtual time since the start of the run, shown as seconds
//! after the Unix epoch, at nanosecond resolution. MAC addresses are
//! made up from node numbers (`02:00:00:00:hi:lo`, locally administered).
//! The file is little-endian whatever the machine, so it is byte-identical
//! everywhere.

use crate::{Datagram, Protocol, Time};
use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::net::{IpAddr, Ipv6Addr};

/// Which packets of a link a capture records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapturePoint {
    /// Every packet offered to the link (including those it then drops),
    /// stamped with the time it was offered.
    Offered,
    /// Every packet the link delivers, stamped with its arrival at the far
    /// end.
    Delivered,
}

/// The snapshot length written in the pcap header.
const SNAPLEN: u32 = 262_144;

/// An in-memory pcap file being written.
#[derive(Debug)]
pub struct Capture {
    writer: PcapWriter<Vec<u8>>,
    frame: Vec<u8>,
    packets: u64,
    skipped: u64,
}

impl Default for Capture {
    fn default() -> Self {
        Capture::new()
    }
}

impl Capture {
    /// An empty capture (just the pcap file header).
    pub fn new() -> Capture {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
        };
        // Writing a header into a Vec cannot fail.
        let writer = match PcapWriter::with_header(Vec::new(), header) {
            Ok(w) => w,
            Err(e) => unreachable!("pcap header into a Vec: {e}"),
        };
        Capture {
            writer,
            frame: Vec::with_capacity(2048),
            packets: 0,
            skipped: 0,
        }
    }

    /// The MAC address the capture gives to node number `node`.
    pub fn mac_of(node: usize) -> [u8; 6] {
        let n = u16::try_from(node).unwrap_or(u16::MAX).to_be_bytes();
        [0x02, 0, 0, 0, n[0], n[1]]
    }

    /// Appends `datagram`, sent from node `from_node` to node `to_node`, at
    /// time `at`. A datagram that cannot be encoded (a payload too large for
    /// one IP packet) is skipped and counted in [`Capture::skipped`].
    pub fn record(&mut self, at: Time, datagram: &Datagram, from_node: usize, to_node: usize) {
        self.frame.clear();
        let written = ethernet_frame(datagram, from_node, to_node, &mut self.frame);
        let Ok(len) = u32::try_from(self.frame.len()) else {
            self.skipped += 1;
            return;
        };
        if !written {
            self.skipped += 1;
            return;
        }
        let packet = PcapPacket::new(at.since_start(), len, &self.frame);
        match self.writer.write_packet(&packet) {
            Ok(_) => self.packets += 1,
            Err(_) => self.skipped += 1,
        }
    }

    /// Packets written.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets that could not be written.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The pcap file.
    pub fn into_bytes(self) -> Vec<u8> {
        self.writer.into_writer()
    }
}

/// Writes `datagram`, sent from node `from_node` to node `to_node`, into
/// `frame` as an Ethernet II / IPv4 or IPv6 / UDP or ICMP echo frame with
/// valid checksums. False if it cannot be encoded (a payload too large for
/// one IP packet).
pub(crate) fn ethernet_frame(
    datagram: &Datagram,
    from_node: usize,
    to_node: usize,
    frame: &mut Vec<u8>,
) -> bool {
    let eth = PacketBuilder::ethernet2(Capture::mac_of(from_node), Capture::mac_of(to_node));
    let (src, dst) = (datagram.src, datagram.dst);
    let payload = &datagram.payload[..];
    match (src.ip(), dst.ip(), datagram.protocol) {
        (IpAddr::V4(s), IpAddr::V4(d), Protocol::Udp) => eth
            .ipv4(s.octets(), d.octets(), datagram.ttl)
            .udp(src.port(), dst.port())
            .write(frame, payload)
            .is_ok(),
        (IpAddr::V4(s), IpAddr::V4(d), Protocol::EchoRequest { id, seq }) => eth
            .ipv4(s.octets(), d.octets(), datagram.ttl)
            .icmpv4_echo_request(id, seq)
            .write(frame, payload)
            .is_ok(),
        (IpAddr::V4(s), IpAddr::V4(d), Protocol::EchoReply { id, seq }) => eth
            .ipv4(s.octets(), d.octets(), datagram.ttl)
            .icmpv4_echo_reply(id, seq)
            .write(frame, payload)
            .is_ok(),
        (s, d, Protocol::Udp) => eth
            .ipv6(v6(s).octets(), v6(d).octets(), datagram.ttl)
            .udp(src.port(), dst.port())
            .write(frame, payload)
            .is_ok(),
        (s, d, Protocol::EchoRequest { id, seq }) => eth
            .ipv6(v6(s).octets(), v6(d).octets(), datagram.ttl)
            .icmpv6_echo_request(id, seq)
            .write(frame, payload)
            .is_ok(),
        (s, d, Protocol::EchoReply { id, seq }) => eth
            .ipv6(v6(s).octets(), v6(d).octets(), datagram.ttl)
            .icmpv6_echo_reply(id, seq)
            .write(frame, payload)
            .is_ok(),
    }
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    use pcap_file::pcap::PcapReader;

    #[test]
    fn frames_parse_back_with_valid_checksums() {
        let mut cap = Capture::new();
        let d = Datagram::new(
            "10.0.0.1:4433".parse().unwrap(),
            "10.0.1.1:443".parse().unwrap(),
            b"hello quic".to_vec(),
        );
        cap.record(Time::from_micros(1_500_250), &d, 1, 2);
        let d6 = Datagram::new(
            "[fd00::1]:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            vec![7u8; 3],
        );
        cap.record(Time::from_secs(2), &d6, 2, 1);
        assert_eq!(cap.packets(), 2);
        let bytes = cap.into_bytes();
        let mut reader = PcapReader::new(&bytes[..]).unwrap();
        let p = reader.next_packet().unwrap().unwrap().into_owned();
        assert_eq!(p.timestamp.as_nanos(), 1_500_250_000);
        let sliced = SlicedPacket::from_ethernet(&p.data).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &sliced.net else {
            panic!("not ipv4")
        };
        assert_eq!(ip.header().ttl(), 64);
        let header = ip.header().to_header();
        assert_eq!(header.header_checksum, header.calc_header_checksum());
        let Some(TransportSlice::Udp(udp)) = &sliced.transport else {
            panic!("not udp")
        };
        assert_eq!(udp.payload(), b"hello quic");
        assert_eq!(udp.destination_port(), 443);
        let checksum = udp
            .to_header()
            .calc_checksum_ipv4(&header, udp.payload())
            .unwrap();
        assert_eq!(udp.checksum(), checksum);
        let p6 = reader.next_packet().unwrap().unwrap();
        let sliced = SlicedPacket::from_ethernet(&p6.data).unwrap();
        assert!(matches!(sliced.net, Some(NetSlice::Ipv6(_))));
    }
}
