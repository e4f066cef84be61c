//! HTTP Datagrams in QUIC DATAGRAM frames (RFC 9297 §2.1): the quarter
//! stream ID of the request stream, then (RFC 9298 §5) the context ID, 0
//! for a whole UDP payload.

use super::{WireError, varint};

/// Bytes the prefix takes for a request stream `stream_id`, context 0.
pub fn prefix_len(stream_id: u64) -> usize {
    varint::len(stream_id / 4) + 1
}

/// Appends an HTTP datagram of a UDP payload for request stream
/// `stream_id`.
pub fn encode(out: &mut Vec<u8>, stream_id: u64, payload: &[u8]) {
    varint::write(out, stream_id / 4);
    out.push(0);
    out.extend_from_slice(payload);
}

/// The context ID of TECC's TUNNEL_INFO as an HTTP datagram: an odd
/// (proxy-allocated, RFC 9298 §4) ID of ours, used only when the tunnel's
/// settings enable TECC's feedback on both ends; a peer that does not know
/// it drops the datagram.
pub const TUNNEL_INFO_CONTEXT: u64 = 1;

/// Appends an HTTP datagram with context ID `context`.
pub fn encode_with_context(out: &mut Vec<u8>, stream_id: u64, context: u64, payload: &[u8]) {
    varint::write(out, stream_id / 4);
    varint::write(out, context);
    out.extend_from_slice(payload);
}

/// An HTTP datagram as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpDatagram<'a> {
    /// The request stream it belongs to (4 × the quarter stream ID).
    pub stream_id: u64,
    /// The context ID.
    pub context: u64,
    /// The payload.
    pub payload: &'a [u8],
}

/// Parses a QUIC DATAGRAM frame's payload as an HTTP datagram.
pub fn decode(mut input: &[u8]) -> Result<HttpDatagram<'_>, WireError> {
    let quarter = varint::read(&mut input)?;
    // RFC 9297 §2.1: at most 2^60 - 1, so the stream ID fits.
    if quarter >= 1 << 60 {
        return Err(WireError::Malformed("quarter stream ID too large"));
    }
    let context = varint::read(&mut input)?;
    Ok(HttpDatagram {
        stream_id: quarter * 4,
        context,
        payload: input,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_prefix_length() {
        let mut out = Vec::new();
        encode(&mut out, 400, b"payload");
        assert_eq!(out.len(), prefix_len(400) + 7);
        let datagram = decode(&out).unwrap();
        assert_eq!((datagram.stream_id, datagram.context), (400, 0));
        assert_eq!(datagram.payload, b"payload");
        assert!(decode(&[0x40]).is_err());
        let mut out = Vec::new();
        encode_with_context(&mut out, 8, TUNNEL_INFO_CONTEXT, b"x");
        let datagram = decode(&out).unwrap();
        assert_eq!((datagram.stream_id, datagram.context), (8, 1));
        assert_eq!(datagram.payload, b"x");
        assert!(decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]).is_err());
    }
}
