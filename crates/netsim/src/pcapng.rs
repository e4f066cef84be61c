//! pcapng files with the TLS secrets inside: one interface per tapped link
//! direction, each packet an Enhanced Packet Block, and the endpoints' key
//! log in a Decryption Secrets Block, so Wireshark and tshark decrypt the
//! QUIC packets with no other file.
//!
//! The writer is ours (a few dozen lines, no parser): blocks are written
//! little-endian whatever the machine, timestamps are virtual time in
//! nanoseconds (`if_tsresol` = 9) shown as seconds after the Unix epoch, so
//! the same run gives a byte-identical file anywhere. Frames are the same
//! Ethernet/IP/UDP frames as the pcap captures ([`crate::Capture`]).
//!
//! The Decryption Secrets Block comes before the first packet (Wireshark
//! reads the secrets as it meets them), so the packets are held in memory
//! until [`Pcapng::finish`] is given the secrets.
//!
//! Block layouts: draft-ietf-opsawg-pcapng §4.1 (Section Header Block),
//! §4.2 (Interface Description Block), §4.3 (Enhanced Packet Block) and
//! §4.7 (Decryption Secrets Block, secrets type `0x544c534b`: an NSS key
//! log, the SSLKEYLOGFILE format).

use crate::capture::ethernet_frame;
use crate::{Datagram, Time};

/// Block types (draft-ietf-opsawg-pcapng §10.1).
const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 0x0000_0001;
const ENHANCED_PACKET: u32 = 0x0000_0006;
const DECRYPTION_SECRETS: u32 = 0x0000_000A;
/// The byte-order magic of a Section Header Block.
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// Secrets type of a TLS key log (NSS key log format).
pub const TLS_KEY_LOG: u32 = 0x544C_534B;
/// `LINKTYPE_ETHERNET`.
const LINKTYPE_ETHERNET: u16 = 1;
/// The snapshot length of every interface.
const SNAPLEN: u32 = 262_144;
/// Option codes: end of options, comment, `shb_userappl`, `if_name`,
/// `if_tsresol`.
const OPT_END: u16 = 0;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;

/// An in-memory pcapng file being written: its interfaces, then its packets.
#[derive(Clone, Debug, Default)]
pub struct Pcapng {
    interfaces: Vec<String>,
    packets_blocks: Vec<u8>,
    frame: Vec<u8>,
    packets: u64,
    skipped: u64,
}

impl Pcapng {
    /// An empty file whose interfaces are named `interfaces` (interface `i`
    /// is the `i`-th name).
    pub fn new<S: Into<String>>(interfaces: impl IntoIterator<Item = S>) -> Pcapng {
        Pcapng {
            interfaces: interfaces.into_iter().map(Into::into).collect(),
            frame: Vec::with_capacity(2048),
            ..Pcapng::default()
        }
    }

    /// Appends `datagram`, seen on interface `interface` at `at`, sent from
    /// node `from_node` to node `to_node` (their MAC addresses, as in
    /// [`crate::Capture::mac_of`]). A datagram that cannot be encoded, or
    /// an interface that does not exist, is skipped and counted.
    pub fn record(
        &mut self,
        interface: u32,
        at: Time,
        datagram: &Datagram,
        from_node: usize,
        to_node: usize,
    ) {
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        if ethernet_frame(datagram, from_node, to_node, &mut frame) {
            self.record_frame(interface, at, &frame);
        } else {
            self.skipped += 1;
        }
        self.frame = frame;
    }

    /// Appends an Ethernet frame as it was seen on interface `interface`
    /// at `at` (a real interface's frames: the link emulator's). A frame
    /// too long for the format, or an interface that does not exist, is
    /// skipped and counted.
    pub fn record_frame(&mut self, interface: u32, at: Time, frame: &[u8]) {
        let (Ok(len), true) = (
            u32::try_from(frame.len()),
            (interface as usize) < self.interfaces.len(),
        ) else {
            self.skipped += 1;
            return;
        };
        let nanos = at.as_nanos();
        let mut body = Vec::with_capacity(20 + frame.len() + 3);
        body.extend_from_slice(&interface.to_le_bytes());
        body.extend_from_slice(&((nanos >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(nanos as u32).to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(frame);
        pad(&mut body);
        block(&mut self.packets_blocks, ENHANCED_PACKET, &body);
        self.packets += 1;
    }

    /// Packets written.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets that could not be written.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The file: a Section Header Block, one Interface Description Block
    /// per interface, a Decryption Secrets Block holding `tls_key_log`
    /// (SSLKEYLOGFILE lines; none if empty), then the packets.
    pub fn finish(self, tls_key_log: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.packets_blocks.len() + 1024 + tls_key_log.len());
        let mut shb = Vec::new();
        shb.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        option(&mut shb, SHB_USERAPPL, b"pepkit");
        option(&mut shb, OPT_END, &[]);
        block(&mut out, SECTION_HEADER, &shb);
        for name in &self.interfaces {
            let mut idb = Vec::new();
            idb.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
            idb.extend_from_slice(&0u16.to_le_bytes());
            idb.extend_from_slice(&SNAPLEN.to_le_bytes());
            option(&mut idb, IF_NAME, name.as_bytes());
            option(&mut idb, IF_TSRESOL, &[9]);
            option(&mut idb, OPT_END, &[]);
            block(&mut out, INTERFACE_DESCRIPTION, &idb);
        }
        if !tls_key_log.is_empty() {
            let secrets = tls_key_log.as_bytes();
            let mut dsb = Vec::with_capacity(secrets.len() + 11);
            dsb.extend_from_slice(&TLS_KEY_LOG.to_le_bytes());
            let len = u32::try_from(secrets.len()).unwrap_or(u32::MAX);
            dsb.extend_from_slice(&len.to_le_bytes());
            dsb.extend_from_slice(&secrets[..len as usize]);
            pad(&mut dsb);
            block(&mut out, DECRYPTION_SECRETS, &dsb);
        }
        out.extend_from_slice(&self.packets_blocks);
        out
    }
}

/// Appends a block: type, total length, `body` (already padded to 32
/// bits), total length again.
fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let total = u32::try_from(body.len() + 12).unwrap_or(u32::MAX);
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&total.to_le_bytes());
}

/// Appends an option: code, length, value padded to 32 bits.
fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&value[..len as usize]);
    pad(out);
}

/// Pads `out` with zeros to a multiple of 4 bytes.
fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    /// Splits a file into (type, body) blocks, checking both lengths.
    fn blocks(bytes: &[u8]) -> Vec<(u32, &[u8])> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < bytes.len() {
            let (kind, len) = (u32_at(bytes, at), u32_at(bytes, at + 4) as usize);
            assert_eq!(len % 4, 0, "block length {len} is not a multiple of 4");
            assert_eq!(u32_at(bytes, at + len - 4) as usize, len, "trailing length");
            out.push((kind, &bytes[at + 8..at + len - 4]));
            at += len;
        }
        assert_eq!(at, bytes.len());
        out
    }

    fn datagram(payload: &[u8]) -> Datagram {
        Datagram::new(
            "10.0.0.1:4433".parse().unwrap(),
            "10.0.1.1:443".parse().unwrap(),
            payload.to_vec(),
        )
    }

    #[test]
    fn blocks_are_laid_out_as_the_format_says() {
        let mut file = Pcapng::new(["near forward", "near reverse"]);
        file.record(
            1,
            Time::from_nanos(0x1_0000_0002),
            &datagram(b"hello"),
            1,
            2,
        );
        file.record(7, Time::ZERO, &datagram(b"nowhere"), 1, 2);
        assert_eq!((file.packets(), file.skipped()), (1, 1));
        let keys = "CLIENT_HANDSHAKE_TRAFFIC_SECRET 00 11\n";
        let bytes = file.finish(keys);
        let blocks = blocks(&bytes);
        let kinds: Vec<u32> = blocks.iter().map(|b| b.0).collect();
        assert_eq!(
            kinds,
            [
                SECTION_HEADER,
                INTERFACE_DESCRIPTION,
                INTERFACE_DESCRIPTION,
                DECRYPTION_SECRETS,
                ENHANCED_PACKET
            ]
        );
        // Section header: magic, version 1.0, unknown section length.
        let shb = blocks[0].1;
        assert_eq!(u32_at(shb, 0), BYTE_ORDER_MAGIC);
        assert_eq!(&shb[4..8], &[1, 0, 0, 0]);
        assert_eq!(&shb[8..16], &[0xff; 8]);
        // Interface: Ethernet, its name, nanosecond timestamps.
        let idb = blocks[2].1;
        assert_eq!(u16::from_le_bytes([idb[0], idb[1]]), LINKTYPE_ETHERNET);
        assert_eq!(&idb[8..12], &[2, 0, 12, 0]);
        assert_eq!(&idb[12..24], b"near reverse");
        assert_eq!(&idb[24..29], &[9, 0, 1, 0, 9]);
        // Secrets: the key log, padded.
        let dsb = blocks[3].1;
        assert_eq!(u32_at(dsb, 0), TLS_KEY_LOG);
        assert_eq!(u32_at(dsb, 4) as usize, keys.len());
        assert_eq!(&dsb[8..8 + keys.len()], keys.as_bytes());
        // Packet: interface 1, the time in two halves, 14 + 20 + 8 + 5 bytes.
        let epb = blocks[4].1;
        assert_eq!(u32_at(epb, 0), 1);
        assert_eq!((u32_at(epb, 4), u32_at(epb, 8)), (1, 2));
        assert_eq!((u32_at(epb, 12), u32_at(epb, 16)), (47, 47));
        assert_eq!(&epb[20 + 42..20 + 47], b"hello");
    }

    #[test]
    fn no_secrets_no_secrets_block_and_the_same_bytes_twice() {
        let write = || {
            let mut file = Pcapng::new(["a"]);
            file.record(0, Time::from_millis(3), &datagram(&[1, 2, 3]), 0, 1);
            file.finish("")
        };
        let bytes = write();
        assert!(blocks(&bytes).iter().all(|b| b.0 != DECRYPTION_SECRETS));
        assert_eq!(bytes, write());
    }
}
