//! Packet identifiers: how a middlebox names an opaque packet (section 3.2).
//!
//! QUIC's short-header packets are pseudorandom after the connection ID
//! (header protection masks the packet number, and the payload is
//! ciphertext), so the paper's implementation takes the `b` bytes right after
//! a 1-byte header and a 20-byte destination connection ID. For protocols
//! without such a field, hashing the whole payload gives an identifier too.

use xxhash_rust::xxh3::xxh3_64;

use crate::field::Field;

/// The default offset: a QUIC short header (1 flags byte) with a 20-byte
/// destination connection ID.
pub const QUIC_SHORT_HEADER_OFFSET: usize = 1 + 20;

/// Where an identifier comes from in a UDP payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentifierSource {
    /// The identifier-width bytes at this offset, big-endian. Payloads too
    /// short to hold them have no identifier.
    Offset(usize),
    /// A hash (XXH3-64) of the whole payload, truncated to the width.
    PayloadHash,
}

impl Default for IdentifierSource {
    fn default() -> Self {
        Self::Offset(QUIC_SHORT_HEADER_OFFSET)
    }
}

impl IdentifierSource {
    /// The identifier of a UDP payload, or `None` if it is too short.
    #[inline]
    pub fn identify<F: Field>(self, payload: &[u8]) -> Option<F::Id> {
        match self {
            Self::Offset(offset) => {
                let bytes = payload.get(offset..offset.checked_add(F::ID_BYTES)?)?;
                F::read_be(bytes)
            }
            Self::PayloadHash => Some(F::truncate(xxh3_64(payload))),
        }
    }
}

/// The probability that a given identifier among `n` uniformly random
/// `bytes`-byte identifiers collides with another (Table 1):
/// `1 - (1 - 256^-b)^(n-1)`.
pub fn collision_probability(bytes: u32, n: u64) -> f64 {
    let per_pair = 256f64.powi(-(bytes as i32));
    // ln_1p / exp_m1 keep precision when 256^-b is tiny.
    -((n.saturating_sub(1) as f64) * (-per_pair).ln_1p()).exp_m1()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{F16, F32, F64};

    #[test]
    fn offset_reads_big_endian_after_the_connection_id() {
        let mut payload = vec![0x40u8; 21];
        payload.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04]);
        let src = IdentifierSource::default();
        assert_eq!(src.identify::<F32>(&payload), Some(0xdead_beef));
        assert_eq!(src.identify::<F16>(&payload), Some(0xdead));
        assert_eq!(src.identify::<F64>(&payload), Some(0xdead_beef_0102_0304));
        assert_eq!(src.identify::<F64>(&payload[..28]), None, "too short");
        assert_eq!(
            IdentifierSource::Offset(usize::MAX).identify::<F32>(&payload),
            None
        );
    }

    #[test]
    fn hash_depends_on_every_byte() {
        let a = IdentifierSource::PayloadHash.identify::<F32>(b"hello world");
        let b = IdentifierSource::PayloadHash.identify::<F32>(b"hello worle");
        assert_ne!(a, b);
        assert_eq!(
            a,
            IdentifierSource::PayloadHash.identify::<F32>(b"hello world")
        );
        assert!(IdentifierSource::PayloadHash.identify::<F16>(b"").is_some());
    }
}
