//! What QUIC-aware forwarding reads of an inner QUIC packet: only the
//! version-invariant header fields (RFC 8999): the header form and the
//! connection IDs. Nothing is decrypted.

use super::WireError;

/// An inner packet's invariant header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnerHeader<'a> {
    /// A long header: version, destination and source connection IDs.
    Long {
        /// The version.
        version: u32,
        /// The destination connection ID.
        dcid: &'a [u8],
        /// The source connection ID.
        scid: &'a [u8],
    },
    /// A short header (its destination CID's length is known only to the
    /// receiver).
    Short,
}

/// Parses the invariant header of a QUIC packet.
pub fn parse(packet: &[u8]) -> Result<InnerHeader<'_>, WireError> {
    let first = *packet.first().ok_or(WireError::Truncated)?;
    if first & 0x80 == 0 {
        return Ok(InnerHeader::Short);
    }
    let version_bytes = packet.get(1..5).ok_or(WireError::Truncated)?;
    let version = u32::from_be_bytes([
        version_bytes[0],
        version_bytes[1],
        version_bytes[2],
        version_bytes[3],
    ]);
    let mut at = 5;
    let mut cid = || -> Result<&[u8], WireError> {
        let len = usize::from(*packet.get(at).ok_or(WireError::Truncated)?);
        let cid = packet
            .get(at + 1..at + 1 + len)
            .ok_or(WireError::Truncated)?;
        at += 1 + len;
        Ok(cid)
    };
    let dcid = cid()?;
    let scid = cid()?;
    Ok(InnerHeader::Long {
        version,
        dcid,
        scid,
    })
}

/// Whether a short-header packet's destination CID starts with `cid`.
pub fn short_dcid_is(packet: &[u8], cid: &[u8]) -> bool {
    packet.first().is_some_and(|b| b & 0x80 == 0) && packet.get(1..1 + cid.len()) == Some(cid)
}

/// A short-header packet with its `old_len`-byte destination CID replaced
/// by `new` (the virtual CID rewrite of QUIC-aware forwarding).
pub fn rewrite_short_dcid(packet: &[u8], old_len: usize, new: &[u8]) -> Option<Vec<u8>> {
    let rest = packet.get(1 + old_len..)?;
    let mut out = Vec::with_capacity(1 + new.len() + rest.len());
    out.push(packet[0]);
    out.extend_from_slice(new);
    out.extend_from_slice(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_short_headers() {
        let long = [0xc0, 0, 0, 0, 1, 2, 0xaa, 0xbb, 1, 0xcc, 0xff];
        assert_eq!(
            parse(&long),
            Ok(InnerHeader::Long {
                version: 1,
                dcid: &[0xaa, 0xbb],
                scid: &[0xcc],
            })
        );
        assert_eq!(parse(&long[..7]), Err(WireError::Truncated));
        let short = [0x40, 1, 2, 3, 4, 9, 9];
        assert_eq!(parse(&short), Ok(InnerHeader::Short));
        assert!(short_dcid_is(&short, &[1, 2, 3, 4]));
        assert!(!short_dcid_is(&short, &[1, 2, 4]));
        let rewritten = rewrite_short_dcid(&short, 4, &[7, 7]).unwrap();
        assert_eq!(rewritten, [0x40, 7, 7, 9, 9]);
        assert!(rewrite_short_dcid(&short, 10, &[1]).is_none());
    }
}
