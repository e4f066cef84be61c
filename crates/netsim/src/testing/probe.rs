//! The header the test hosts put at the start of every payload.

use crate::Time;
use bytes::{BufMut, Bytes, BytesMut};

/// Sequence number and send time, as the first 16 bytes of a payload
/// (both big-endian `u64`s; the time in nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Probe {
    /// Sequence number, from 0.
    pub seq: u64,
    /// When the sender sent it.
    pub sent_at: Time,
}

impl Probe {
    /// Length of the header.
    pub const LEN: usize = 16;

    /// A payload of `len` bytes (at least [`Probe::LEN`]) starting with this
    /// header, zero-padded.
    pub fn encode(&self, len: usize) -> Bytes {
        let mut buf = BytesMut::with_capacity(len.max(Self::LEN));
        buf.put_u64(self.seq);
        buf.put_u64(self.sent_at.as_nanos());
        buf.resize(len.max(Self::LEN), 0);
        buf.freeze()
    }

    /// Reads the header from the start of a payload; `None` if it is too
    /// short.
    pub fn decode(payload: &[u8]) -> Option<Probe> {
        let seq = payload.get(0..8)?;
        let sent = payload.get(8..16)?;
        Some(Probe {
            seq: u64::from_be_bytes(seq.try_into().ok()?),
            sent_at: Time::from_nanos(u64::from_be_bytes(sent.try_into().ok()?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = Probe {
            seq: 7,
            sent_at: Time::from_millis(3),
        };
        let bytes = p.encode(100);
        assert_eq!(bytes.len(), 100);
        assert_eq!(Probe::decode(&bytes), Some(p));
        assert_eq!(Probe::decode(&bytes[..15]), None);
    }
}
