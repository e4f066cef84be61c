//! What PEMI reads of a QUIC datagram: the cleartext invariants of
//! RFC 8999 and the long-header fields of RFC 9000 §17.2 and RFC 9369
//! (QUIC version 2), nothing that is encrypted.
//!
//! [`summarize`] walks the coalesced packets of one UDP payload: long
//! headers carry their type, connection IDs and (Initial, 0-RTT,
//! Handshake) a length, so the next packet can be found; a short header
//! (the 1-RTT packet, always last in a datagram) shows only its spin bit.
//! It never panics and never reads past the payload: anything that does
//! not parse is a [`WireError`], and the engine forwards such a datagram
//! untouched.
//!
//! The fixed bit (0x40) is not checked: endpoints that negotiated
//! `grease_quic_bit` (RFC 9287; noq-proto does) clear it at random in
//! packets after the first flight. A datagram that does not start with a
//! long header is therefore a short header, whatever its first byte.

use std::fmt;

/// QUIC version 1 (RFC 9000).
pub const VERSION_1: u32 = 0x0000_0001;
/// QUIC version 2 (RFC 9369).
pub const VERSION_2: u32 = 0x6b33_43cf;
/// The longest connection ID of versions 1 and 2.
pub const MAX_CID_LEN: usize = 20;
/// RFC 9000 §14.1: a client pads every datagram carrying an Initial to
/// at least this many bytes.
pub const MIN_INITIAL_DATAGRAM: usize = 1200;
/// The most coalesced packets [`summarize`] looks at in one datagram.
pub const MAX_COALESCED: usize = 8;

/// The header form bit (RFC 8999 §5.1).
const LONG_FORM: u8 = 0x80;
/// The spin bit of a short header (RFC 9000 §17.3.1); not protected.
const SPIN_BIT: u8 = 0x20;

/// A long-header packet type (RFC 9000 Table 5; RFC 9369 §3.2 renumbers
/// them for version 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LongType {
    /// Initial.
    Initial,
    /// 0-RTT.
    ZeroRtt,
    /// Handshake.
    Handshake,
    /// Retry.
    Retry,
}

impl LongType {
    fn from_bits(version: u32, bits: u8) -> Option<LongType> {
        let bits = bits & 0b11;
        Some(match (version, bits) {
            (VERSION_1, 0) | (VERSION_2, 1) => LongType::Initial,
            (VERSION_1, 1) | (VERSION_2, 2) => LongType::ZeroRtt,
            (VERSION_1, 2) | (VERSION_2, 3) => LongType::Handshake,
            (VERSION_1, 3) | (VERSION_2, 0) => LongType::Retry,
            _ => return None,
        })
    }

    /// Its bit in [`Summary::long`].
    pub fn bit(self) -> u8 {
        match self {
            LongType::Initial => 1,
            LongType::ZeroRtt => 2,
            LongType::Handshake => 4,
            LongType::Retry => 8,
        }
    }
}

/// Why a payload is not a QUIC datagram PEMI understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Empty.
    #[error("empty datagram")]
    Empty,
    /// Ends inside a header or a length it announces.
    #[error("truncated at byte {0}")]
    Truncated(usize),
    /// A long header of another version (0: version negotiation).
    #[error("version {0:#010x} is not QUIC v1 or v2")]
    UnknownVersion(u32),
    /// A connection ID longer than 20 bytes.
    #[error("connection ID of {0} bytes")]
    CidTooLong(usize),
}

/// The coalesced packets of one datagram, as far as they are cleartext.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// The long-header types present, as [`LongType::bit`]s.
    pub long: u8,
    /// The QUIC version of the first long header, if any.
    pub version: Option<u32>,
    /// The spin bit of the short-header packet, if the datagram ends with
    /// one.
    pub spin: Option<bool>,
    /// The first long header's destination connection ID length.
    pub dcid_len: u8,
    /// Coalesced packets read.
    pub packets: u8,
}

impl Summary {
    /// Whether a packet of type `kind` is present.
    pub fn has(&self, kind: LongType) -> bool {
        self.long & kind.bit() != 0
    }

    /// Whether the datagram starts with a short header (1-RTT only).
    pub fn is_short(&self) -> bool {
        self.long == 0 && self.spin.is_some()
    }
}

impl fmt::Debug for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<&str> = [
            (LongType::Initial, "Initial"),
            (LongType::ZeroRtt, "0-RTT"),
            (LongType::Handshake, "Handshake"),
            (LongType::Retry, "Retry"),
        ]
        .iter()
        .filter(|(kind, _)| self.has(*kind))
        .map(|&(_, name)| name)
        .collect();
        f.debug_struct("Summary")
            .field("long", &kinds)
            .field("version", &self.version)
            .field("spin", &self.spin)
            .field("packets", &self.packets)
            .finish()
    }
}

/// A QUIC variable-length integer (RFC 9000 §16) at `at`: its value and
/// the position after it.
pub fn varint(bytes: &[u8], at: usize) -> Result<(u64, usize), WireError> {
    let first = *bytes.get(at).ok_or(WireError::Truncated(at))?;
    let len = 1usize << (first >> 6);
    let end = at.checked_add(len).ok_or(WireError::Truncated(at))?;
    let raw = bytes.get(at..end).ok_or(WireError::Truncated(at))?;
    let mut value = u64::from(first & 0x3f);
    for &b in &raw[1..] {
        value = (value << 8) | u64::from(b);
    }
    Ok((value, end))
}

/// Reads a connection ID (length byte, then the ID) at `at`; returns the
/// position after it and its length.
fn cid(bytes: &[u8], at: usize) -> Result<(usize, usize), WireError> {
    let len = usize::from(*bytes.get(at).ok_or(WireError::Truncated(at))?);
    if len > MAX_CID_LEN {
        return Err(WireError::CidTooLong(len));
    }
    let end = at + 1 + len;
    if end > bytes.len() {
        return Err(WireError::Truncated(at));
    }
    Ok((end, len))
}

/// Skips `len` bytes from `at`, which must lie inside `bytes`.
fn skip(bytes: &[u8], at: usize, len: u64) -> Result<usize, WireError> {
    let len = usize::try_from(len).map_err(|_| WireError::Truncated(at))?;
    match at.checked_add(len) {
        Some(end) if end <= bytes.len() => Ok(end),
        _ => Err(WireError::Truncated(at)),
    }
}

/// One long-header packet at `at`: its type, the first one's DCID length,
/// and where the next packet starts (`bytes.len()` for a Retry).
fn long_packet(bytes: &[u8], at: usize) -> Result<(LongType, u32, usize, usize), WireError> {
    let first = bytes[at];
    let version_bytes = bytes
        .get(at + 1..at + 5)
        .ok_or(WireError::Truncated(at + 1))?;
    let version = u32::from_be_bytes([
        version_bytes[0],
        version_bytes[1],
        version_bytes[2],
        version_bytes[3],
    ]);
    if version != VERSION_1 && version != VERSION_2 {
        return Err(WireError::UnknownVersion(version));
    }
    let kind =
        LongType::from_bits(version, first >> 4).ok_or(WireError::UnknownVersion(version))?;
    let (after_dcid, dcid_len) = cid(bytes, at + 5)?;
    let (mut pos, _) = cid(bytes, after_dcid)?;
    let next = match kind {
        LongType::Retry => bytes.len(),
        LongType::Initial => {
            let (token_len, after) = varint(bytes, pos)?;
            pos = skip(bytes, after, token_len)?;
            let (length, after) = varint(bytes, pos)?;
            skip(bytes, after, length)?
        }
        LongType::ZeroRtt | LongType::Handshake => {
            let (length, after) = varint(bytes, pos)?;
            skip(bytes, after, length)?
        }
    };
    Ok((kind, version, dcid_len, next))
}

/// Reads the cleartext of a UDP payload: the long-header packets it
/// coalesces (at most [`MAX_COALESCED`]) and, if it ends with one, the
/// short header's spin bit. Padding after the last long packet (zeros:
/// not a header) ends the walk.
pub fn summarize(payload: &[u8]) -> Result<Summary, WireError> {
    let first = *payload.first().ok_or(WireError::Empty)?;
    let mut summary = Summary {
        long: 0,
        version: None,
        spin: None,
        dcid_len: 0,
        packets: 0,
    };
    if first & LONG_FORM == 0 {
        summary.spin = Some(first & SPIN_BIT != 0);
        summary.packets = 1;
        return Ok(summary);
    }
    let mut at = 0;
    while at < payload.len() && usize::from(summary.packets) < MAX_COALESCED {
        let byte = payload[at];
        if byte & LONG_FORM == 0 {
            // A short header ends the datagram; zeros are padding.
            if byte != 0 {
                summary.spin = Some(byte & SPIN_BIT != 0);
                summary.packets += 1;
            }
            break;
        }
        let (kind, version, dcid_len, next) = long_packet(payload, at)?;
        if summary.version.is_none() {
            summary.version = Some(version);
            summary.dcid_len = dcid_len as u8;
        }
        summary.long |= kind.bit();
        summary.packets += 1;
        at = next;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A long header of `version` and raw type bits, with connection IDs
    /// and, unless Retry, a length covering `body` bytes.
    pub(crate) fn long(version: u32, type_bits: u8, token: &[u8], body: usize) -> Vec<u8> {
        let mut p = vec![0xc0 | (type_bits << 4)];
        p.extend_from_slice(&version.to_be_bytes());
        p.push(8);
        p.extend_from_slice(&[0xaa; 8]);
        p.push(4);
        p.extend_from_slice(&[0xbb; 4]);
        let kind = LongType::from_bits(version, type_bits).unwrap();
        if kind == LongType::Initial {
            p.push(token.len() as u8);
            p.extend_from_slice(token);
        }
        if kind != LongType::Retry {
            // A two-byte varint length.
            p.extend_from_slice(&(0x4000u16 | body as u16).to_be_bytes());
        }
        p.extend(std::iter::repeat_n(0x5a, body));
        p
    }

    #[test]
    fn varints_of_every_length() {
        assert_eq!(varint(&[0x25], 0), Ok((37, 1)));
        assert_eq!(varint(&[0x7b, 0xbd], 0), Ok((15_293, 2)));
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d], 0), Ok((494_878_333, 4)));
        assert_eq!(
            varint(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c], 0),
            Ok((151_288_809_941_952_652, 8))
        );
        assert_eq!(varint(&[0x7b], 0), Err(WireError::Truncated(0)));
        assert_eq!(varint(&[], 0), Err(WireError::Truncated(0)));
    }

    #[test]
    fn coalesced_v1_packets_are_walked() {
        let mut d = long(VERSION_1, 0, &[1, 2, 3], 40);
        d.extend(long(VERSION_1, 2, &[], 30));
        d.push(0x40 | SPIN_BIT);
        d.extend_from_slice(&[9; 20]);
        let s = summarize(&d).unwrap();
        assert!(s.has(LongType::Initial) && s.has(LongType::Handshake));
        assert!(!s.has(LongType::Retry) && !s.has(LongType::ZeroRtt));
        assert_eq!(s.version, Some(VERSION_1));
        assert_eq!(s.spin, Some(true));
        assert_eq!((s.packets, s.dcid_len), (3, 8));
        assert!(!s.is_short());
    }

    #[test]
    fn version_2_renumbers_the_types() {
        let initial = summarize(&long(VERSION_2, 1, &[], 10)).unwrap();
        assert!(initial.has(LongType::Initial));
        let handshake = summarize(&long(VERSION_2, 3, &[], 10)).unwrap();
        assert!(handshake.has(LongType::Handshake));
        let retry = summarize(&long(VERSION_2, 0, &[], 24)).unwrap();
        assert!(retry.has(LongType::Retry));
        assert_eq!(retry.packets, 1);
    }

    #[test]
    fn padding_ends_the_walk_and_short_headers_show_their_spin() {
        let mut d = long(VERSION_1, 0, &[], 20);
        d.extend_from_slice(&[0; 1000]);
        let s = summarize(&d).unwrap();
        assert_eq!((s.packets, s.spin), (1, None));
        let short = summarize(&[0x41, 1, 2, 3]).unwrap();
        assert!(short.is_short());
        assert_eq!(short.spin, Some(false));
        assert_eq!(summarize(&[0x61]).unwrap().spin, Some(true));
        // Greased (RFC 9287): the fixed bit clear, long and short.
        assert_eq!(summarize(&[0x21, 9]).unwrap().spin, Some(true));
        let mut greased = long(VERSION_1, 2, &[], 4);
        greased[0] &= !0x40;
        assert!(summarize(&greased).unwrap().has(LongType::Handshake));
    }

    #[test]
    fn what_is_not_quic_is_an_error() {
        assert_eq!(summarize(&[]), Err(WireError::Empty));
        // Version negotiation and unknown versions.
        let mut vn = long(VERSION_1, 0, &[], 4);
        vn[1..5].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(summarize(&vn), Err(WireError::UnknownVersion(0)));
        // A length beyond the datagram.
        let mut short = long(VERSION_1, 2, &[], 30);
        short.truncate(40);
        assert!(matches!(summarize(&short), Err(WireError::Truncated(_))));
        // A connection ID over 20 bytes.
        let mut long_cid = long(VERSION_1, 0, &[], 4);
        long_cid[5] = 21;
        assert_eq!(summarize(&long_cid), Err(WireError::CidTooLong(21)));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(s) = summarize(&bytes) {
                prop_assert!(usize::from(s.packets) <= MAX_COALESCED);
                prop_assert!(s.packets >= 1);
            }
        }

        #[test]
        fn corrupted_headers_never_panic(
            flips in proptest::collection::vec((0usize..80, any::<u8>()), 1..6),
            cut in 0usize..120,
        ) {
            let mut d = long(VERSION_1, 0, &[7; 5], 30);
            d.extend(long(VERSION_1, 2, &[], 20));
            let n = d.len();
            for (at, x) in flips {
                d[at % n] ^= x;
            }
            d.truncate(cut.min(n));
            let _ = summarize(&d);
        }
    }
}
