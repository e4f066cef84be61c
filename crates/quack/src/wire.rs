//! The byte layout of quACK messages.
//!
//! Every message starts with a version-and-kind byte and an identifier-width
//! byte; all integers are big-endian (network order). Version 1:
//!
//! ```text
//! byte 0      version (high nibble, = 1) | kind (low nibble)
//! byte 1      identifier width in bytes: 2, 4 or 8;
//!             bit 7 set = a last identifier follows (power sum only)
//!
//! kind 0, power sum (8 + w + k*w bytes; 52 for t = k = 10, w = 4)
//! byte 2      threshold t, 1..=255
//! byte 3      k, the number of power sums carried, 0..=t
//! bytes 4..8  count (u32, wrapping)
//! w bytes     last identifier, if bit 7 of byte 1 is set
//! k*w bytes   power sums p_1 ..= p_k, each < p
//!
//! kind 1, strawman 1a "echo" (2 + w bytes)
//! w bytes     the identifier of one received packet
//!
//! kind 2, strawman 1b "window" (3 + n*w bytes)
//! byte 2      n, the number of identifiers
//! n*w bytes   the last n identifiers received, oldest first
//!
//! kind 3, strawman 2 "sorted hash" (38 bytes)
//! bytes 2..6  count of received packets (u32)
//! 32 bytes    SHA-256 of the sorted received identifiers, each w bytes
//! ```
//!
//! A power-sum quACK may carry fewer sums than its threshold (`k < t`): it
//! still decodes up to `k` missing packets. Parsing checks every field and
//! rejects trailing bytes; it never panics.

use crate::field::Field;
use crate::power_sum::{PowerSums, Quack};
use crate::sums::{INLINE, Sums};

/// The wire format version this crate writes and reads.
pub const VERSION: u8 = 1;

const LAST_PRESENT: u8 = 0x80;

/// The kinds of quACK message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The power-sum quACK.
    PowerSum = 0,
    /// Strawman 1a: echo each identifier.
    Echo = 1,
    /// Strawman 1b: a sliding window of identifiers.
    Window = 2,
    /// Strawman 2: a hash of the sorted received set.
    SortedHash = 3,
}

/// A message that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message ends before a field it needs.
    #[error("message truncated: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes the message needs.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// A version this crate does not speak.
    #[error("unsupported wire version {0}")]
    UnsupportedVersion(u8),
    /// A kind byte this crate does not know.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// The message is for identifiers of another width.
    #[error("identifier width {got} bytes, expected {expected}")]
    WidthMismatch {
        /// The width this decoder reads.
        expected: usize,
        /// The width in the message.
        got: u8,
    },
    /// A threshold of 0.
    #[error("threshold 0")]
    ZeroThreshold,
    /// More power sums than the threshold.
    #[error("{sums} power sums exceed the threshold {threshold}")]
    TooManySums {
        /// Sums carried.
        sums: u8,
        /// The threshold.
        threshold: u8,
    },
    /// A power sum that is not a field element (`>= p`).
    #[error("power sum {index} is not reduced modulo p")]
    NotReduced {
        /// Which sum (0-based).
        index: usize,
    },
    /// Flag bits this version does not define.
    #[error("reserved flag bits set")]
    ReservedBits,
    /// Bytes after the end of the message.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
}

/// A quACK message of any kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<F: Field> {
    /// A power-sum quACK.
    PowerSum(Quack<F>),
    /// Strawman 1a: one received identifier.
    Echo(F::Id),
    /// Strawman 1b: the last identifiers received, oldest first.
    Window(Vec<F::Id>),
    /// Strawman 2: the count and a SHA-256 of the sorted received set.
    SortedHash {
        /// Packets received.
        count: u32,
        /// SHA-256 over the sorted identifiers.
        digest: [u8; 32],
    },
}

impl<F: Field> Message<F> {
    /// The kind of this message.
    pub fn kind(&self) -> Kind {
        match self {
            Self::PowerSum(_) => Kind::PowerSum,
            Self::Echo(_) => Kind::Echo,
            Self::Window(_) => Kind::Window,
            Self::SortedHash { .. } => Kind::SortedHash,
        }
    }

    /// Appends the encoding of this message to `out`. Panics on a window of
    /// more than 255 identifiers (a caller bug: windows are configured).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(VERSION << 4 | self.kind() as u8);
        let width = F::ID_BYTES as u8;
        match self {
            Self::PowerSum(q) => {
                out.pop();
                encode_power_sum(q, out);
            }
            Self::Echo(id) => {
                out.push(width);
                F::write_be(F::raw(*id), out);
            }
            Self::Window(ids) => {
                out.push(width);
                out.push(u8::try_from(ids.len()).expect("window of at most 255"));
                for &id in ids {
                    F::write_be(F::raw(id), out);
                }
            }
            Self::SortedHash { count, digest } => {
                out.push(width);
                out.extend_from_slice(&count.to_be_bytes());
                out.extend_from_slice(digest);
            }
        }
    }

    /// The encoding as a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Parses a message for identifiers of this field's width.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        match parse_small::<F>(bytes) {
            Some(quack) => Ok(Self::PowerSum(quack)),
            // Anything else, the errors included, field by field.
            None => Self::parse_fields(bytes),
        }
    }

    /// [`Message::parse`] field by field, each checked in turn (out of
    /// line: the one-pass path, inlined, then builds its quACK in place).
    #[inline(never)]
    fn parse_fields(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader { bytes, pos: 0 };
        let head = r.u8()?;
        if head >> 4 != VERSION {
            return Err(WireError::UnsupportedVersion(head >> 4));
        }
        let width_byte = r.u8()?;
        let width = width_byte & !LAST_PRESENT;
        if width as usize != F::ID_BYTES {
            return Err(WireError::WidthMismatch {
                expected: F::ID_BYTES,
                got: width,
            });
        }
        let kind = head & 0x0f;
        if kind > Kind::SortedHash as u8 {
            return Err(WireError::UnknownKind(kind));
        }
        if kind != Kind::PowerSum as u8 && width_byte & LAST_PRESENT != 0 {
            return Err(WireError::ReservedBits);
        }
        let message = match kind {
            0 => {
                let threshold = r.u8()?;
                let k = r.u8()?;
                if threshold == 0 {
                    return Err(WireError::ZeroThreshold);
                }
                if k > threshold {
                    return Err(WireError::TooManySums { sums: k, threshold });
                }
                let count = r.u32()?;
                let last = if width_byte & LAST_PRESENT != 0 {
                    Some(r.id::<F>()?)
                } else {
                    None
                };
                let body = r.take(k as usize * F::ID_BYTES)?;
                let mut sums = Sums::zeros(k as usize);
                let fields = body.chunks_exact(F::ID_BYTES);
                for (index, (sum, field)) in sums.iter_mut().zip(fields).enumerate() {
                    let s = F::raw(F::read_be(field).expect("exact width"));
                    if s >= F::MODULUS {
                        return Err(WireError::NotReduced { index });
                    }
                    *sum = s;
                }
                Self::PowerSum(Quack {
                    threshold,
                    count,
                    last,
                    sums,
                })
            }
            1 => Self::Echo(r.id::<F>()?),
            2 => {
                let n = r.u8()? as usize;
                r.need(n * F::ID_BYTES)?;
                let ids = (0..n).map(|_| r.id::<F>()).collect::<Result<_, _>>()?;
                Self::Window(ids)
            }
            3 => {
                let count = r.u32()?;
                let digest = r.take(32)?.try_into().expect("32 bytes");
                Self::SortedHash { count, digest }
            }
            other => return Err(WireError::UnknownKind(other)),
        };
        if r.pos != bytes.len() {
            return Err(WireError::TrailingBytes(bytes.len() - r.pos));
        }
        Ok(message)
    }
}

impl<F: Field> Quack<F> {
    /// Appends the wire encoding of this quACK.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_power_sum(self, out);
    }

    /// Parses a power-sum quACK.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        // Built in place, not moved out of a message.
        if let Some(quack) = parse_small::<F>(bytes) {
            return Ok(quack);
        }
        match Message::<F>::parse_fields(bytes)? {
            Message::PowerSum(q) => Ok(q),
            other => Err(WireError::UnknownKind(other.kind() as u8)),
        }
    }
}

/// A well-formed power-sum quACK of at most [`INLINE`] sums, parsed in
/// one pass (the checks of [`Message::parse`], folded into a few
/// comparisons); `None` for anything else, well-formed or not, which
/// `Message::parse_fields` then reads or rejects with its precise error.
#[inline]
fn parse_small<F: Field>(bytes: &[u8]) -> Option<Quack<F>> {
    let w = F::ID_BYTES;
    let [head, width, threshold, k, c0, c1, c2, c3, rest @ ..] = bytes else {
        return None;
    };
    let (threshold, k) = (*threshold, *k);
    if *head != VERSION << 4 | Kind::PowerSum as u8
        || usize::from(width & !LAST_PRESENT) != w
        || threshold == 0
        || k > threshold
        || usize::from(k) > INLINE
    {
        return None;
    }
    let (last, body) = if width & LAST_PRESENT != 0 {
        let (last, body) = rest.split_at_checked(w)?;
        (Some(F::read_be(last)?), body)
    } else {
        (None, rest)
    };
    if body.len() != usize::from(k) * w {
        return None;
    }
    let mut values = [0u64; INLINE];
    let mut unreduced = false;
    for (value, field) in values.iter_mut().zip(body.chunks_exact(w)) {
        *value = F::raw(F::read_be(field)?);
        unreduced |= *value >= F::MODULUS;
    }
    if unreduced {
        return None;
    }
    Some(Quack {
        threshold,
        count: u32::from_be_bytes([*c0, *c1, *c2, *c3]),
        last,
        sums: Sums::Inline { len: k, values },
    })
}

fn encode_power_sum<F: Field>(q: &Quack<F>, out: &mut Vec<u8>) {
    write_power_sum::<F>(q.threshold, q.count, q.last, &q.sums, out);
}

impl<F: Field> PowerSums<F> {
    /// Appends the quACK of the current multiset in its wire format: the
    /// bytes `self.quack().encode(out)` appends, without building the
    /// [`Quack`] (and, up to a threshold of 16, without an allocation).
    pub fn encode_quack(&self, out: &mut Vec<u8>) {
        let t = self.threshold();
        if t <= INLINE {
            let mut sums = [0u64; INLINE];
            self.small_sums(&mut sums[..t]);
            write_power_sum::<F>(
                self.threshold() as u8,
                self.count(),
                self.last(),
                &sums[..t],
                out,
            );
        } else {
            self.quack().encode(out);
        }
    }
}

/// Appends a power-sum quACK from its fields (`sums` reduced, at most 255):
/// a small one is laid out on the stack and appended in one copy, a larger
/// one written in place after the buffer grows once, to the exact size.
#[inline]
pub(crate) fn write_power_sum<F: Field>(
    threshold: u8,
    count: u32,
    last: Option<F::Id>,
    sums: &[u64],
    out: &mut Vec<u8>,
) {
    /// The largest power-sum quACK of 16 sums: head, last, sums.
    const SMALL: usize = 8 + 8 + 16 * 8;
    let w = F::ID_BYTES;
    let len = 8 + if last.is_some() { w } else { 0 } + sums.len() * w;
    if len <= SMALL {
        let mut buf = [0u8; SMALL];
        lay_out::<F>(threshold, count, last, sums, &mut buf[..len]);
        // The whole buffer, then cut: a copy of a known length is a few
        // vector stores, where `buf[..len]` would call `memcpy`.
        let start = out.len();
        out.extend_from_slice(&buf);
        out.truncate(start + len);
    } else {
        let start = out.len();
        out.resize(start + len, 0);
        lay_out::<F>(threshold, count, last, sums, &mut out[start..]);
    }
}

/// Writes a power-sum quACK into `buf`, exactly its length.
#[inline(always)]
fn lay_out<F: Field>(threshold: u8, count: u32, last: Option<F::Id>, sums: &[u64], buf: &mut [u8]) {
    let w = F::ID_BYTES;
    let head = 8 + if last.is_some() { w } else { 0 };
    buf[0] = VERSION << 4 | Kind::PowerSum as u8;
    buf[1] = w as u8 | if last.is_some() { LAST_PRESENT } else { 0 };
    buf[2] = threshold;
    buf[3] = sums.len() as u8;
    buf[4..8].copy_from_slice(&count.to_be_bytes());
    if let Some(last) = last {
        // The raw identifier, not its reduction modulo p.
        put_be::<F>(F::raw(last), &mut buf[8..8 + w]);
    }
    for (field, &s) in buf[head..].chunks_exact_mut(w).zip(sums) {
        put_be::<F>(s, field);
    }
}

/// Writes the low `ID_BYTES` bytes of `v`, big-endian, into `field`
/// (exactly `ID_BYTES` long).
#[inline(always)]
fn put_be<F: Field>(v: u64, field: &mut [u8]) {
    field.copy_from_slice(&v.to_be_bytes()[8 - F::ID_BYTES..]);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn need(&self, n: usize) -> Result<(), WireError> {
        let needed = self.pos.saturating_add(n);
        if needed > self.bytes.len() {
            return Err(WireError::Truncated {
                needed,
                got: self.bytes.len(),
            });
        }
        Ok(())
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        self.need(n)?;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    fn id<F: Field>(&mut self) -> Result<F::Id, WireError> {
        let b = self.take(F::ID_BYTES)?;
        Ok(F::read_be(b).expect("exact width"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{F16, F32, F64};
    use proptest::prelude::*;

    /// Changes a small quACK's encoding (byte `at` set to `byte`; then the
    /// last byte dropped, or a byte added, or neither, by `cut`) and checks
    /// that the one-pass parser and the field-by-field one agree on it.
    fn agrees<F: Field>(t: usize, ids: &[u64], keep: usize, at: usize, byte: u8, cut: usize) {
        let mut sums = PowerSums::<F>::new(t).unwrap();
        ids.iter().for_each(|&x| sums.insert(F::truncate(x)));
        let mut quack = sums.quack();
        quack.truncate(keep);
        let mut bytes = Message::PowerSum(quack).to_bytes();
        // The header is where the checks are: change it more often.
        let i = if at.is_multiple_of(2) {
            at / 2 % 8
        } else {
            at / 2
        } % bytes.len();
        bytes[i] = byte;
        match cut {
            1 => drop(bytes.pop()),
            2 => bytes.push(byte),
            _ => {}
        }
        assert_eq!(
            Message::<F>::parse(&bytes),
            Message::<F>::parse_fields(&bytes),
            "{bytes:?}"
        );
    }

    proptest! {
        /// The one-pass path for small quACKs accepts and rejects exactly
        /// what the field-by-field parser does, with the same error.
        #[test]
        fn one_pass_parse_agrees_with_field_by_field(
            (t, ids, keep) in (1usize..=20, prop::collection::vec(any::<u64>(), 0..40), 0usize..=20),
            at: usize,
            byte in prop_oneof![any::<u8>(), 0u8..24],
            cut in 0usize..3,
        ) {
            agrees::<F16>(t, &ids, keep, at, byte, cut);
            agrees::<F32>(t, &ids, keep, at, byte, cut);
            agrees::<F64>(t, &ids, keep, at, byte, cut);
        }
    }
}
