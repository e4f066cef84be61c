//! Prime fields for 16-, 32- and 64-bit identifiers.
//!
//! Each identifier width maps to the largest prime below `2^bits`, and every
//! prime has the form `2^bits - c` with a small `c`. Reduction therefore folds
//! the high half of a product back in as `c * high` instead of dividing: two
//! folds and one conditional subtraction, all branch-free, which is what lets
//! the compiler vectorise the lane kernels in [`crate::lanes`].
//!
//! Elements are carried as `u64` in `[0, p)` for every width so that one
//! generic code path serves all three fields.

use core::fmt::Debug;
use core::hash::Hash;

/// The largest threshold (number of power sums) a quACK can carry; the wire
/// format stores it in one byte.
pub const MAX_THRESHOLD: usize = 255;

mod sealed {
    pub trait Sealed {}
}

/// A prime field `GF(p)` whose elements represent packet identifiers of one
/// width.
///
/// Identifiers at or above `p` alias to `id - p` (there are `c` such values per
/// width); the send log compares identifiers as field elements, so such an
/// alias is handled as an ordinary collision.
pub trait Field:
    sealed::Sealed + Copy + Debug + Default + PartialEq + Eq + Hash + Send + Sync + 'static
{
    /// The identifier type (`u16`, `u32` or `u64`).
    type Id: Copy + Eq + Ord + Hash + Debug + Default + Send + Sync + 'static;
    /// The prime modulus `p`.
    const MODULUS: u64;
    /// Identifier width in bytes.
    const ID_BYTES: usize;
    /// Identifier width in bits, for display.
    const BITS: u32 = 8 * Self::ID_BYTES as u32;

    /// Maps an identifier into the field (`id mod p`).
    fn element(id: Self::Id) -> u64;
    /// The identifier whose field element is `e` (`e < p`).
    fn id(e: u64) -> Self::Id;
    /// `a * b mod p` for `a, b < p`.
    fn mul(a: u64, b: u64) -> u64;
    /// `a + b mod p` for `a, b < p`.
    fn add(a: u64, b: u64) -> u64;
    /// `a - b mod p` for `a, b < p`.
    fn sub(a: u64, b: u64) -> u64;
    /// Precomputes what [`Field::kernel_mul`] needs of a multiplier that
    /// is used many times (the identifier whose powers are being taken, the
    /// point a polynomial is evaluated at): Shoup's quotient estimate for
    /// the 32-bit field, nothing for the others.
    #[inline(always)]
    fn kernel_prepare(_b: u64) -> u64 {
        0
    }
    /// `a * b mod p` in the vector kernels, `b_prepared` from
    /// [`Field::kernel_prepare`]`(b)`.
    #[inline(always)]
    fn kernel_mul(a: u64, b: u64, _b_prepared: u64) -> u64 {
        Self::mul(a, b)
    }
    /// Adds an element into a lane accumulator of the encode kernel. The
    /// small fields add without reducing (an accumulator is a `u64` far
    /// larger than `p`) and reduce only in [`Field::normalize`]; the 64-bit
    /// field must reduce every time.
    fn lane_add(acc: u64, v: u64) -> u64;
    /// Reduces a lane accumulator to an element.
    fn normalize(acc: u64) -> u64;
    /// `a * b` for elements, as a term of a sum reduced later by
    /// [`Field::reduce_wide`]. The small fields keep the product unreduced
    /// (below 2^64, so 2^64 of them fit in 128 bits); the 64-bit field
    /// reduces at once.
    #[inline(always)]
    fn wide_mul(a: u64, b: u64) -> u128 {
        Self::mul(a, b) as u128
    }
    /// Reduces a sum of [`Field::wide_mul`] terms. For the 64-bit field the
    /// sum of reduced terms must stay below 2^128 (at most 2^64 terms).
    #[inline(always)]
    fn reduce_wide(x: u128) -> u64 {
        (x % Self::MODULUS as u128) as u64
    }
    /// How many kernel calls (each adding at most `BATCH / LANES` elements
    /// to an accumulator) a lane accumulator absorbs before it must be
    /// normalised.
    const LANE_BATCHES: u32;
    /// The inverse of `k` for `1 <= k <= MAX_THRESHOLD` (a table lookup).
    fn inv_small(k: usize) -> u64;
    /// The identifier as an integer, unreduced.
    fn raw(id: Self::Id) -> u64;
    /// Reads a big-endian identifier from exactly `ID_BYTES` bytes.
    fn read_be(bytes: &[u8]) -> Option<Self::Id>;
    /// Appends the low `ID_BYTES` bytes of `v`, big-endian (an element or a
    /// raw identifier).
    fn write_be(v: u64, out: &mut Vec<u8>);
    /// Truncates a 64-bit value (e.g. a hash) to an identifier.
    fn truncate(v: u64) -> Self::Id;
}

/// `-a mod p`.
#[inline(always)]
pub(crate) fn neg<F: Field>(a: u64) -> u64 {
    F::sub(0, a)
}

/// Builds the table of inverses `k^-1 mod p` for `k` in `1..=MAX_THRESHOLD`
/// at compile time (Fermat: `k^(p-2)`). Index 0 is unused.
const fn inverse_table(p: u64) -> [u64; MAX_THRESHOLD + 1] {
    let mut table = [0u64; MAX_THRESHOLD + 1];
    let mut k = 1;
    while k <= MAX_THRESHOLD {
        let mut result: u128 = 1;
        let mut base = k as u128 % p as u128;
        let mut exp = p - 2;
        while exp > 0 {
            if exp & 1 == 1 {
                result = result * base % p as u128;
            }
            base = base * base % p as u128;
            exp >>= 1;
        }
        table[k] = result as u64;
        k += 1;
    }
    table
}

/// The identifier conversions, the same for every width.
macro_rules! identifier_ops {
    ($id:ty, $inverses:ident) => {
        type Id = $id;

        #[inline(always)]
        fn element(id: $id) -> u64 {
            // Identifiers at or above p alias to id - p.
            let v = id as u64;
            v.min(v.wrapping_sub(Self::MODULUS))
        }

        #[inline(always)]
        fn id(e: u64) -> $id {
            e as $id
        }

        #[inline(always)]
        fn inv_small(k: usize) -> u64 {
            $inverses[k]
        }

        #[allow(clippy::unnecessary_cast)]
        fn raw(id: $id) -> u64 {
            id as u64
        }

        fn read_be(bytes: &[u8]) -> Option<$id> {
            Some(<$id>::from_be_bytes(bytes.try_into().ok()?))
        }

        fn write_be(v: u64, out: &mut Vec<u8>) {
            out.extend_from_slice(&(v as $id).to_be_bytes());
        }

        fn truncate(v: u64) -> $id {
            v as $id
        }
    };
}

/// Lazy lane accumulation for the fields whose elements fit in 32 bits.
macro_rules! lazy_lanes {
    () => {
        // At most BATCH / LANES = 4 elements below 2^32 per call: 2^24 calls
        // stay below 2^58.
        const LANE_BATCHES: u32 = 1 << 24;

        #[inline(always)]
        fn lane_add(acc: u64, v: u64) -> u64 {
            acc + v
        }
    };
}

macro_rules! small_field_ops {
    ($p:expr) => {
        #[inline(always)]
        fn add(a: u64, b: u64) -> u64 {
            let s = a + b;
            // Branch-free; `s - p` wraps when `s < p`, so `min` picks `s`.
            s.min(s.wrapping_sub($p))
        }

        #[inline(always)]
        fn sub(a: u64, b: u64) -> u64 {
            let d = a.wrapping_sub(b);
            d.min(d.wrapping_add($p))
        }
    };
}

/// `GF(65521)`, for 16-bit identifiers (`p = 2^16 - 15`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16;

impl sealed::Sealed for F16 {}

static INV16: [u64; MAX_THRESHOLD + 1] = inverse_table(F16::MODULUS);

impl Field for F16 {
    identifier_ops!(u16, INV16);

    const MODULUS: u64 = 65_521;
    const ID_BYTES: usize = 2;

    #[inline(always)]
    fn mul(a: u64, b: u64) -> u64 {
        const P: u64 = F16::MODULUS;
        const MASK: u64 = 0xffff;
        // The masks tell the compiler both factors fit in 32 bits, so it can
        // use a 32x32->64 vector multiply. Each fold is `low + 15 * high`
        // with `15 * high` as shift-and-subtract: written as a multiply,
        // LLVM merges it with the mask into one slow 64-bit vector multiply.
        let prod = (a & 0xffff_ffff) * (b & 0xffff_ffff); // < 2^32
        let hi = prod >> 16;
        let r = (prod & MASK) + (hi << 4) - hi; // < 2^20
        let hi = r >> 16;
        let r = (r & MASK) + (hi << 4) - hi; // < 2^16 + 240
        r.min(r.wrapping_sub(P))
    }

    small_field_ops!(Self::MODULUS);

    lazy_lanes!();

    #[inline(always)]
    fn normalize(acc: u64) -> u64 {
        acc % Self::MODULUS
    }
}

/// `GF(2^32 - 5)`, for 32-bit identifiers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F32;

impl F32 {
    /// Shoup's precomputation for a multiplier `b < p` used many times:
    /// `b' = floor(b * 2^32 / p)`. As `2^32 = p + 5`, that is
    /// `b + floor(5b / p)`, and `floor(5b / p) < 5` takes one fold.
    #[inline(always)]
    fn shoup_prepare(b: u64) -> u64 {
        const MASK: u64 = 0xffff_ffff;
        let w = 5 * (b & MASK); // < 5p
        let q = w >> 32;
        let rem = (w & MASK) + 5 * q; // w - q * p, < 2^32 + 20
        b + q + (rem >= Self::MODULUS) as u64
    }

    /// `a * b mod p` by Shoup's method, for `a, b < p` and `b_prepared =
    /// shoup_prepare(b)`: the quotient estimate `q = (a * b') >> 32` is
    /// exact or one short, so `a * b - q * p` lies in `[0, 2p)`. Three
    /// 32x32->64 multiplies whose high halves are all used, which keeps the
    /// compiler on the cheap vector multiply.
    #[inline(always)]
    fn shoup(a: u64, b: u64, b_prepared: u64) -> u64 {
        const MASK: u64 = 0xffff_ffff;
        let q = ((a & MASK) * (b_prepared & MASK)) >> 32;
        // q * p = q * 2^32 - 5q, spelt out: as `q * p` LLVM negates the
        // constant and emits a slow 64-bit vector multiply.
        let r = ((a & MASK) * (b & MASK))
            .wrapping_sub(q << 32)
            .wrapping_add((q << 2) + q);
        r.min(r.wrapping_sub(Self::MODULUS))
    }

    /// Reduces any `u64` modulo `p`.
    #[inline(always)]
    fn reduce(x: u64) -> u64 {
        const P: u64 = F32::MODULUS;
        const MASK: u64 = 0xffff_ffff;
        // Folds as in F16: `low + 5 * high`, as shift-and-add.
        let hi = x >> 32;
        let r = (x & MASK) + (hi << 2) + hi; // < 6 * 2^32
        let hi = r >> 32;
        let r = (r & MASK) + (hi << 2) + hi; // < 2^32 + 25
        r.min(r.wrapping_sub(P))
    }
}

impl sealed::Sealed for F32 {}

static INV32: [u64; MAX_THRESHOLD + 1] = inverse_table(F32::MODULUS);

impl Field for F32 {
    identifier_ops!(u32, INV32);

    const MODULUS: u64 = 4_294_967_291;
    const ID_BYTES: usize = 4;

    #[inline(always)]
    fn mul(a: u64, b: u64) -> u64 {
        const MASK: u64 = 0xffff_ffff;
        Self::reduce((a & MASK) * (b & MASK))
    }

    small_field_ops!(Self::MODULUS);

    #[inline(always)]
    fn kernel_prepare(b: u64) -> u64 {
        Self::shoup_prepare(b)
    }

    #[inline(always)]
    fn kernel_mul(a: u64, b: u64, b_prepared: u64) -> u64 {
        Self::shoup(a, b, b_prepared)
    }

    #[inline(always)]
    fn wide_mul(a: u64, b: u64) -> u128 {
        ((a & 0xffff_ffff) * (b & 0xffff_ffff)) as u128
    }

    #[inline(always)]
    fn reduce_wide(x: u128) -> u64 {
        // 2^64 = 25 (mod p).
        let (lo, hi) = (x as u64, (x >> 64) as u64);
        Self::add(Self::reduce(lo), Self::mul(Self::reduce(hi), 25))
    }

    lazy_lanes!();

    #[inline(always)]
    fn normalize(acc: u64) -> u64 {
        Self::reduce(acc)
    }
}

/// `GF(2^64 - 59)`, for 64-bit identifiers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F64;

impl sealed::Sealed for F64 {}

static INV64: [u64; MAX_THRESHOLD + 1] = inverse_table(F64::MODULUS);

impl Field for F64 {
    identifier_ops!(u64, INV64);

    const MODULUS: u64 = 18_446_744_073_709_551_557;
    const ID_BYTES: usize = 8;

    #[inline(always)]
    fn mul(a: u64, b: u64) -> u64 {
        const C: u64 = 59;
        let prod = (a as u128) * (b as u128);
        let (lo, hi) = (prod as u64, (prod >> 64) as u64);
        let r = (hi as u128) * (C as u128) + lo as u128; // < 60 * 2^64
        let (lo, hi) = (r as u64, (r >> 64) as u64); // hi < 60
        let (s, carry) = lo.overflowing_add(hi * C);
        // On carry the true value is s + 2^64 = s + 59 (mod p), with s tiny.
        let s = if carry { s + C } else { s };
        s.min(s.wrapping_sub(Self::MODULUS))
    }

    #[inline(always)]
    fn add(a: u64, b: u64) -> u64 {
        let (s, carry) = a.overflowing_add(b);
        if carry || s >= Self::MODULUS {
            s.wrapping_sub(Self::MODULUS)
        } else {
            s
        }
    }

    #[inline(always)]
    fn sub(a: u64, b: u64) -> u64 {
        let (d, borrow) = a.overflowing_sub(b);
        if borrow {
            d.wrapping_add(Self::MODULUS)
        } else {
            d
        }
    }

    const LANE_BATCHES: u32 = u32::MAX;

    #[inline(always)]
    fn lane_add(acc: u64, v: u64) -> u64 {
        Self::add(acc, v)
    }

    #[inline(always)]
    fn normalize(acc: u64) -> u64 {
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check_ops<F: Field>(a: u64, b: u64) {
        let p = F::MODULUS as u128;
        let (a, b) = (a % F::MODULUS, b % F::MODULUS);
        let (wa, wb) = (a as u128, b as u128);
        assert_eq!(F::mul(a, b) as u128, wa * wb % p, "mul {a} {b}");
        assert_eq!(F::add(a, b) as u128, (wa + wb) % p, "add {a} {b}");
        assert_eq!(F::sub(a, b) as u128, (wa + p - wb) % p, "sub {a} {b}");
    }

    #[test]
    fn edges() {
        for f in [F16::MODULUS, F32::MODULUS, F64::MODULUS] {
            let edge = [0, 1, 2, f - 2, f - 1, f / 2, f / 2 + 1];
            for &a in &edge {
                for &b in &edge {
                    match f {
                        F16::MODULUS => check_ops::<F16>(a, b),
                        F32::MODULUS => check_ops::<F32>(a, b),
                        _ => check_ops::<F64>(a, b),
                    }
                }
            }
        }
    }

    #[test]
    fn inverses() {
        for k in 1..=MAX_THRESHOLD {
            assert_eq!(F16::mul(F16::inv_small(k), k as u64), 1);
            assert_eq!(F32::mul(F32::inv_small(k), k as u64), 1);
            assert_eq!(F64::mul(F64::inv_small(k), k as u64), 1);
        }
    }

    #[test]
    fn aliasing_identifiers_reduce() {
        assert_eq!(F32::element(u32::MAX), 4);
        assert_eq!(F32::element(4_294_967_291), 0);
        assert_eq!(F16::element(u16::MAX), 14);
        assert_eq!(F64::element(u64::MAX), 58);
        assert_eq!(F32::element(7), 7);
    }

    proptest! {
        #[test]
        fn ops_match_wide_arithmetic(a: u64, b: u64) {
            check_ops::<F16>(a, b);
            check_ops::<F32>(a, b);
            check_ops::<F64>(a, b);
        }
    }
}
