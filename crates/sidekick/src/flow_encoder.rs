//! A flow's quACK encoder at the configured identifier width (16, 32 or
//! 64 bits), with the buffers the proxy reuses to build quACK messages.

use quack::{AnyEncoder, Encoder, F16, F32, F64, Field, IdentifierSource, Scheme};

/// A flow's quACK, for the configured identifier width.
pub(crate) enum FlowEncoder {
    W16(AnyEncoder<F16>),
    W32(AnyEncoder<F32>),
    W64(AnyEncoder<F64>),
}

impl FlowEncoder {
    pub(crate) fn new(id_bytes: u8, scheme: Scheme) -> Option<FlowEncoder> {
        Some(match id_bytes {
            2 => FlowEncoder::W16(AnyEncoder::new(scheme).ok()?),
            4 => FlowEncoder::W32(AnyEncoder::new(scheme).ok()?),
            8 => FlowEncoder::W64(AnyEncoder::new(scheme).ok()?),
            _ => return None,
        })
    }

    /// Inserts the payload's identifier; false if the payload has none.
    #[inline]
    pub(crate) fn insert(&mut self, source: IdentifierSource, payload: &[u8]) -> bool {
        #[inline(always)]
        fn insert<F: Field>(e: &mut AnyEncoder<F>, s: IdentifierSource, p: &[u8]) -> bool {
            let Some(id) = s.identify::<F>(p) else {
                return false;
            };
            match e {
                // The common case, without the dynamic dispatch.
                AnyEncoder::PowerSum(sums) => sums.insert(id),
                other => other.insert(id),
            }
            true
        }
        match self {
            FlowEncoder::W16(e) => insert(e, source, payload),
            FlowEncoder::W32(e) => insert(e, source, payload),
            FlowEncoder::W64(e) => insert(e, source, payload),
        }
    }

    /// Appends the quACK message's bytes to `out` (the same bytes as
    /// `message().to_bytes()`; the power sum without building a `Quack`);
    /// false if there is nothing to say.
    pub(crate) fn encode_message(&self, out: &mut Vec<u8>) -> bool {
        fn encode<F: Field>(e: &AnyEncoder<F>, out: &mut Vec<u8>) -> bool {
            match e {
                AnyEncoder::PowerSum(sums) => {
                    sums.encode_quack(out);
                    true
                }
                other => other.message().map(|m| m.encode(out)).is_some(),
            }
        }
        match self {
            FlowEncoder::W16(e) => encode(e, out),
            FlowEncoder::W32(e) => encode(e, out),
            FlowEncoder::W64(e) => encode(e, out),
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            FlowEncoder::W16(e) => e.clear(),
            FlowEncoder::W32(e) => e.clear(),
            FlowEncoder::W64(e) => e.clear(),
        }
    }
}

/// Reused buffers for building quACKs.
#[derive(Default)]
pub(crate) struct QuackScratch {
    /// The control message being built.
    pub(crate) bytes: Vec<u8>,
}
