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
    /// [`Field::kernel_mul`] with `modulus = p` passed in: the vector
    /// kernels pass it as a value the optimiser cannot see is a constant,
    /// which the 32-bit field needs to keep its multiplies cheap (see
    /// `F32::shoup`).
    #[inline(always)]
    fn kernel_mul_mod(a: u64, b: u64, b_prepared: u64, _modulus: u64) -> u64 {
        Self::kernel_mul(a, b, b_prepared)
    }
    /// `a * b + c mod p` in the vector kernels (a Horner step), with
    /// `b_prepared` and `c_prepared` from [`Field::kernel_prepare`] and
    /// `modulus` as in [`Field::kernel_mul_mod`].
    #[inline(always)]
    fn kernel_mul_add(
        a: u64,
        b: u64,
        b_prepared: u64,
        c: u64,
        _c_prepared: u64,
        modulus: u64,
    ) -> u64 {
        Self::add(Self::kernel_mul_mod(a, b, b_prepared, modulus), c)
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
    /// `-1/k` for `1 <= k <= MAX_THRESHOLD`, with its
    /// [`Field::kernel_prepare`] (a table lookup).
    fn neg_inv_small(k: usize) -> (u64, u64);
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

/// Builds the table of `-1/k mod p` for `k` in `1..=MAX_THRESHOLD` at
/// compile time (Fermat: `k^(p-2)`), each with Shoup's precomputation
/// `floor(v * 2^32 / p)` when `shoup` (see [`Field::kernel_prepare`]), else
/// 0. Index 0 is unused.
const fn neg_inverse_table(p: u64, shoup: bool) -> [(u64, u64); MAX_THRESHOLD + 1] {
    let mut table = [(0u64, 0u64); MAX_THRESHOLD + 1];
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
        let neg = p - result as u64;
        let prepared = if shoup {
            ((neg as u128) << 32) / p as u128
        } else {
            0
        };
        table[k] = (neg, prepared as u64);
        k += 1;
    }
    table
}

/// Declares a field: a unit type, sealed (only this module makes fields).
macro_rules! field_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name;

        impl sealed::Sealed for $name {}
    };
}

/// What every field declares the same way: its modulus `$p`, its
/// identifier type `$id` (whose width gives `ID_BYTES`), the identifier
/// conversions, and the inverses of small integers from a table built at
/// compile time (with Shoup's precomputation when `$shoup`).
macro_rules! prime_field_items {
    ($id:ty, modulus: $p:expr, shoup: $shoup:expr) => {
        type Id = $id;

        const MODULUS: u64 = $p;
        const ID_BYTES: usize = core::mem::size_of::<$id>();

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
            Self::MODULUS - Self::neg_inv_small(k).0
        }

        #[inline(always)]
        fn neg_inv_small(k: usize) -> (u64, u64) {
            static NEG_INVERSES: [(u64, u64); MAX_THRESHOLD + 1] = neg_inverse_table($p, $shoup);
            NEG_INVERSES[k]
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

field_type! {
    /// `GF(65521)`, for 16-bit identifiers (`p = 2^16 - 15`).
    F16
}

impl Field for F16 {
    prime_field_items!(u16, modulus: 65_521, shoup: false);

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

field_type! {
    /// `GF(2^32 - 5)`, for 32-bit identifiers.
    F32
}

impl F32 {
    /// Shoup's precomputation for a multiplier `b < p` used many times:
    /// `b' = floor(b * 2^32 / p)`. As `2^32 = p + 5`, that is
    /// `b + floor(5b / p)`. Write `5b` as `h * 2^32 + l` (`h < 5`), which
    /// is `h * p + 5h + l`: `floor(5b / p)` is `h`, plus one when
    /// `l + 5h >= p`, that is when `l + 5h + 5` carries into bit 32. So it
    /// is the high word of `w + 5h` for `w = 5b + 5` (if adding 5 already
    /// carried, `l >= p` and the answer is `h + 1` either way): two
    /// multiply-adds by 5 and two shifts, no comparison.
    #[inline(always)]
    const fn shoup_prepare(b: u64) -> u64 {
        let w = 5 * (b & 0xffff_ffff) + 5; // < 5p + 5
        b + ((w + 5 * (w >> 32)) >> 32)
    }

    /// `a * b mod p` by Shoup's method, for `a, b < p`, `b_prepared =
    /// shoup_prepare(b)` and `modulus = p`: the quotient estimate `q = (a *
    /// b') >> 32` is exact or one short, so `a * b - q * p` lies in `[0,
    /// 2p)`. Four 32x32->64 multiplies (`q * p` included), which the
    /// compiler keeps on the cheap vector multiply (`vpmuludq`) as long as
    /// it cannot see that `modulus` is a constant: with the constant it
    /// rewrites `- q * p` as `+ q * (-p)`, a slow 64-bit vector multiply
    /// (`vpmullq`), and spelt `(q << 32) - 5q` it takes three operations
    /// instead of two. Scalar code passes the constant (one `imul`).
    #[inline(always)]
    fn shoup(a: u64, b: u64, b_prepared: u64, modulus: u64) -> u64 {
        const MASK: u64 = 0xffff_ffff;
        let q = ((a & MASK) * (b_prepared & MASK)) >> 32;
        let r = ((a & MASK) * (b & MASK)).wrapping_sub(q * (modulus & MASK));
        r.min(r.wrapping_sub(Self::MODULUS))
    }

    /// `a * b + c mod p` by Shoup's method, for `a, b, c < p`, `c' =
    /// shoup_prepare(c)` and `modulus` as in [`F32::shoup`]: with `c'` added
    /// to `a * b'`, the quotient estimate of `(a * b + c) / p` is still
    /// exact or one short. (It falls short by `a (b / p - b' / 2^32) + (c /
    /// p - c' / 2^32)`, each bracket below `2^-32`, and `a + 1 <= 2^32`.)
    /// The addend costs two additions instead of a modular one.
    #[inline(always)]
    fn shoup_mul_add(
        a: u64,
        b: u64,
        b_prepared: u64,
        c: u64,
        c_prepared: u64,
        modulus: u64,
    ) -> u64 {
        const MASK: u64 = 0xffff_ffff;
        let q = ((a & MASK) * (b_prepared & MASK) + (c_prepared & MASK)) >> 32;
        let r = ((a & MASK) * (b & MASK) + (c & MASK)).wrapping_sub(q * (modulus & MASK));
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

impl Field for F32 {
    prime_field_items!(u32, modulus: 4_294_967_291, shoup: true);

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
        Self::shoup(a, b, b_prepared, Self::MODULUS)
    }

    #[inline(always)]
    fn kernel_mul_mod(a: u64, b: u64, b_prepared: u64, modulus: u64) -> u64 {
        Self::shoup(a, b, b_prepared, modulus)
    }

    #[inline(always)]
    fn kernel_mul_add(
        a: u64,
        b: u64,
        b_prepared: u64,
        c: u64,
        c_prepared: u64,
        modulus: u64,
    ) -> u64 {
        Self::shoup_mul_add(a, b, b_prepared, c, c_prepared, modulus)
    }

    #[inline(always)]
    fn wide_mul(a: u64, b: u64) -> u128 {
        ((a & 0xffff_ffff) * (b & 0xffff_ffff)) as u128
    }

    #[inline(always)]
    fn reduce_wide(x: u128) -> u64 {
        // 2^32 = 5, 2^64 = 25 and 2^96 = 125 (mod p): the four 32-bit limbs
        // fold into less than 156 * 2^32, which `reduce` takes.
        let limb = |i: u32| ((x >> (32 * i)) as u64) & 0xffff_ffff;
        Self::reduce(limb(0) + 5 * limb(1) + 25 * limb(2) + 125 * limb(3))
    }

    lazy_lanes!();

    #[inline(always)]
    fn normalize(acc: u64) -> u64 {
        Self::reduce(acc)
    }
}

field_type! {
    /// `GF(2^64 - 59)`, for 64-bit identifiers.
    F64
}

impl Field for F64 {
    prime_field_items!(u64, modulus: 18_446_744_073_709_551_557, shoup: false);

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
        let (kb, kc, m) = (F::kernel_prepare(b), F::kernel_prepare(a), F::MODULUS);
        assert_eq!(
            F::kernel_mul(a, b, kb) as u128,
            wa * wb % p,
            "kernel_mul {a} {b}"
        );
        assert_eq!(
            F::kernel_mul_mod(a, b, kb, m) as u128,
            wa * wb % p,
            "kernel_mul {a} {b}"
        );
        assert_eq!(
            F::kernel_mul_add(b, a, kc, a, kc, m) as u128,
            (wb * wa + wa) % p,
            "kernel_mul_add {b} {a} {a}"
        );
        assert_eq!(
            F::kernel_mul_add(a, b, kb, b, kb, m) as u128,
            (wa * wb + wb) % p,
            "kernel_mul_add {a} {b} {b}"
        );
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

    fn check_neg_inverses<F: Field>() {
        for k in 1..=MAX_THRESHOLD {
            let (neg_inv, prepared) = F::neg_inv_small(k);
            assert_eq!(F::mul(neg_inv, k as u64), F::MODULUS - 1, "k = {k}");
            assert_eq!(prepared, F::kernel_prepare(neg_inv), "k = {k}");
        }
    }

    #[test]
    fn neg_inverses() {
        check_neg_inverses::<F16>();
        check_neg_inverses::<F32>();
        check_neg_inverses::<F64>();
    }

    #[test]
    fn reduce_wide_edges() {
        let top = F32::MODULUS - 1;
        let mut sum = 0u128;
        for n in 1..=MAX_THRESHOLD as u128 {
            sum += F32::wide_mul(top, top);
            let want = (n * (top as u128) * (top as u128) % F32::MODULUS as u128) as u64;
            assert_eq!(F32::reduce_wide(sum), want, "{n} terms");
        }
        for x in [0, 1, u64::MAX as u128, u128::MAX, u128::MAX - 1] {
            assert_eq!(F32::reduce_wide(x) as u128, x % F32::MODULUS as u128);
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

    fn check_shoup_prepare(b: u64) {
        let want = ((b as u128) << 32) / F32::MODULUS as u128;
        assert_eq!(F32::shoup_prepare(b) as u128, want, "b = {b}");
    }

    #[test]
    fn shoup_prepare_edges() {
        let p = F32::MODULUS;
        for b in [0, 1, 2, p / 2, p - 2, p - 1] {
            check_shoup_prepare(b);
        }
        // Where floor(5b / p) and floor(5b / 2^32) step.
        for k in 1..5u64 {
            for centre in [k * p / 5, (k << 32) / 5] {
                for b in centre.saturating_sub(8)..(centre + 8).min(p) {
                    check_shoup_prepare(b);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn shoup_prepare_is_exact(b in 0..F32::MODULUS) {
            check_shoup_prepare(b);
        }

        #[test]
        fn reduce_wide_is_exact(x: u128) {
            prop_assert_eq!(F32::reduce_wide(x) as u128, x % F32::MODULUS as u128);
        }

        #[test]
        fn ops_match_wide_arithmetic(a: u64, b: u64) {
            check_ops::<F16>(a, b);
            check_ops::<F32>(a, b);
            check_ops::<F64>(a, b);
        }
    }
}
