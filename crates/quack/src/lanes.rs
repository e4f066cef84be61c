//! The arithmetic kernels on the hot paths, written so the compiler can
//! vectorise them.
//!
//! Encoding folds identifiers into power sums `LANES` at a time: lane `l` of
//! `lanes[k]` accumulates `x^(k+1)` for the identifiers that passed through
//! lane `l`. The lanes are independent, so each step is one vector multiply
//! and one vector add; the scalar power chain `x, x^2, x^3, ...` of a single
//! identifier, by contrast, is a dependency chain that no compiler can
//! parallelise. The lanes are summed only when a quACK is read.

use crate::field::Field;

/// Lanes of running sums kept per power sum (the state is `t * LANES`
/// words per quACK).
pub(crate) const LANES: usize = 8;

/// One power sum's lane accumulators, aligned to a cache line: a row
/// that straddled two lines would split half of its vector loads, by an
/// amount that depends on where the allocator put it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Lane(pub(crate) [u64; LANES]);

/// Identifiers folded by one call of the encode kernel, and candidates
/// evaluated together by the decoder: enough independent multiply chains to
/// hide the latency of a modular multiplication.
pub(crate) const BATCH: usize = 4 * LANES;

/// Adds `x^1 ..= x^t` of each of `BATCH` identifiers into `lanes[..t]`
/// with [`Field::lane_add`]: the caller normalises the lanes at least every
/// [`Field::LANE_BATCHES`] calls.
#[inline]
pub(crate) fn accumulate<F: Field>(lanes: &mut [Lane], xs: &[u64; BATCH]) {
    let prepared = prepare::<F, BATCH>(xs);
    let modulus = opaque_modulus::<F>();
    let mut pow = *xs;
    let Some((last, earlier)) = lanes.split_last_mut() else {
        return;
    };
    for acc in earlier {
        add_lanes::<F>(&mut acc.0, &pow);
        for l in 0..BATCH {
            pow[l] = F::kernel_mul_mod(pow[l], xs[l], prepared[l], modulus);
        }
    }
    // The last power needs no successor.
    add_lanes::<F>(&mut last.0, &pow);
}

/// Adds `BATCH` values into `LANES` accumulators.
#[inline(always)]
fn add_lanes<F: Field>(acc: &mut [u64; LANES], values: &[u64; BATCH]) {
    for l in 0..LANES {
        let mut a = acc[l];
        for k in 0..BATCH / LANES {
            a = F::lane_add(a, values[l + k * LANES]);
        }
        acc[l] = a;
    }
}

/// Identifiers per call of [`add_power_sums`]: a quACK folds the partial
/// batch it reads in chunks this small, so a few pending identifiers cost a
/// fraction of a full batch.
pub(crate) const SMALL_BATCH: usize = LANES;

/// Adds `x^1 ..= x^t` of each of `SMALL_BATCH` identifiers into
/// `totals[..t]` with [`Field::lane_add`].
#[inline]
pub(crate) fn add_power_sums<F: Field>(totals: &mut [u64], xs: &[u64; SMALL_BATCH]) {
    let prepared = prepare::<F, SMALL_BATCH>(xs);
    let modulus = opaque_modulus::<F>();
    let mut pow = *xs;
    for total in totals {
        *total = pow.iter().fold(*total, |acc, &v| F::lane_add(acc, v));
        for l in 0..SMALL_BATCH {
            pow[l] = F::kernel_mul_mod(pow[l], xs[l], prepared[l], modulus);
        }
    }
}

/// Adds `x^1 ..= x^t` of one identifier into `sums` (`t = sums.len()`):
/// the plain scalar reference the kernels are tested against.
/// Adds the powers `x^1 ..= x^t` of one element to `totals` (`t` of them)
/// with [`Field::lane_add`]: for the few identifiers a small quACK holds,
/// where a vector of padded lanes would cost more multiplies than it saves.
/// Four chains (`x^k = x^(k-4) * x^4`) put a quarter of the multiplications
/// on the path a one-packet quACK waits for.
#[inline]
pub(crate) fn add_id_powers<F: Field>(totals: &mut [u64], x: u64) {
    add_id_powers_by::<F>(totals, x, F::lane_add);
}

/// [`add_id_powers`] with each total kept reduced ([`Field::add`]): for
/// the few identifiers of a small quACK, whose sums then need no
/// normalising.
#[inline]
pub(crate) fn add_id_powers_reduced<F: Field>(totals: &mut [u64], x: u64) {
    add_id_powers_by::<F>(totals, x, F::add);
}

/// [`add_id_powers`] adding each power with `add`.
#[inline(always)]
fn add_id_powers_by<F: Field>(totals: &mut [u64], x: u64, add: impl Fn(u64, u64) -> u64) {
    let x2 = F::mul(x, x);
    let x4 = F::mul(x2, x2);
    let mut pow = [x, x2, F::mul(x2, x), x4];
    let mut quads = totals.chunks_exact_mut(4);
    for quad in &mut quads {
        for l in 0..4 {
            quad[l] = add(quad[l], pow[l]);
            pow[l] = F::mul(pow[l], x4);
        }
    }
    for (total, &p) in quads.into_remainder().iter_mut().zip(&pow) {
        *total = add(*total, p);
    }
}

/// Writes the powers `x^1 ..= x^t` of one element into `sums` (`t` of
/// them), by the four chains of [`add_id_powers`].
#[inline]
pub(crate) fn write_id_powers<F: Field>(sums: &mut [u64], x: u64) {
    let x2 = F::mul(x, x);
    let x4 = F::mul(x2, x2);
    let mut pow = [x, x2, F::mul(x2, x), x4];
    let mut quads = sums.chunks_exact_mut(4);
    for quad in &mut quads {
        quad.copy_from_slice(&pow);
        for p in &mut pow {
            *p = F::mul(*p, x4);
        }
    }
    let rest = quads.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&pow[..n]);
}

#[cfg(test)]
pub(crate) fn add_powers<F: Field>(sums: &mut [u64], x: u64) {
    let mut pow = x;
    for s in sums.iter_mut() {
        *s = F::add(*s, pow);
        pow = F::mul(pow, x);
    }
}

/// Evaluates the monic polynomial `x^m + c[0] x^(m-1) + ... + c[m-1]` at
/// `N` points at once (Horner's rule, lane-parallel); `prepared[i]` is
/// [`Field::kernel_prepare`]`(c[i])`.
#[inline]
pub(crate) fn eval_monic<F: Field, const N: usize>(
    coeffs: &[u64],
    prepared: &[u64],
    xs: &[u64; N],
) -> [u64; N] {
    let mut acc = [1u64; N];
    let Some((&first, coeffs)) = coeffs.split_first() else {
        return acc;
    };
    // The first step multiplies by the leading 1: an addition.
    for l in 0..N {
        acc[l] = F::add(xs[l], first);
    }
    let xs_prepared = prepare::<F, N>(xs);
    let modulus = opaque_modulus::<F>();
    for (&c, &c_prepared) in coeffs.iter().zip(&prepared[1..]) {
        for l in 0..N {
            acc[l] = F::kernel_mul_add(acc[l], xs[l], xs_prepared[l], c, c_prepared, modulus);
        }
    }
    acc
}

/// [`Field::kernel_prepare`] of every lane. (A plain loop: the compiler
/// vectorises it, where it leaves `core::array::from_fn` scalar.)
#[inline(always)]
fn prepare<F: Field, const N: usize>(xs: &[u64; N]) -> [u64; N] {
    let mut prepared = [0u64; N];
    for (p, &x) in prepared.iter_mut().zip(xs) {
        *p = F::kernel_prepare(x);
    }
    prepared
}

/// `p`, as a value the optimiser cannot see is a constant, for
/// [`Field::kernel_mul_mod`]: read once per kernel call. (The modular multiply
/// subtracts `q * p`; with a visible constant, LLVM negates it and emits a
/// 64-bit vector multiply, `vpmullq`, instead of `vpmuludq`.)
#[inline(always)]
fn opaque_modulus<F: Field>() -> u64 {
    core::hint::black_box(F::MODULUS)
}

/// The lanes whose value is zero, as a bit mask (bit `l` for lane `l`).
#[inline(always)]
pub(crate) fn zero_lanes<const N: usize>(values: &[u64; N]) -> u32 {
    let mut mask = 0u32;
    for (l, &v) in values.iter().enumerate() {
        mask |= ((v == 0) as u32) << l;
    }
    mask
}
