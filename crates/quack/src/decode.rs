//! Decoding a quACK difference into the missing multiset.
//!
//! The difference of the sender's and the receiver's power sums is the power
//! sums `d_1 ..= d_m` of the `m` missing identifiers (`m` is the difference of
//! the counts). Newton's identities turn them into the coefficients of the
//! monic polynomial whose roots are exactly the missing identifiers,
//! `c_k = -(1/k) * sum_{i=1..k} c_{k-i} d_i` (O(m^2), with precomputed
//! inverses). The decoder then evaluates the polynomial at every candidate
//! the sender knows it sent, `BATCH` candidates at a time (O(n m)), as the
//! paper does: for the sizes that occur (n, m up to a few hundred) this beats
//! factoring.
//!
//! Multiplicity: if the roots found are `m` distinct values, the polynomial
//! is their product and each is missing once. Otherwise a root may be
//! missing several times, or some missing identifier is not a candidate; the
//! decoder then divides the polynomial by `(x - r)` as long as `r` stays a
//! root, up to the number of times `r` was sent, and checks that the
//! multiplicities add up to `m`.
//!
//! Verification: the decode uses only `d_1 ..= d_m`; the sums beyond them
//! must be the power sums of the identifiers found, or the difference was
//! not what it seemed (`Inconsistent`). Without this check a difference that
//! is not a sub-multiset of the candidates decodes falsely whenever the
//! polynomial happens to have `m` roots among them.

use crate::field::Field;
use crate::lanes::{BATCH, eval_monic, zero_lanes};
use crate::power_sum::Quack;

/// Why a quACK difference does not decode. Every case is an ordinary outcome
/// on a real path (the sender answers it with a reset), never a panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// More identifiers are missing than there are power sums to solve for.
    #[error("{missing} identifiers are missing but the quACK carries only {sums} power sums")]
    TooManyMissing {
        /// The number of missing identifiers (the count difference).
        missing: u32,
        /// The number of power sums available (the threshold, or fewer if
        /// the quACK was truncated).
        sums: usize,
    },
    /// The receiver counted more identifiers than the sender has sent: its
    /// count wrapped, it has not yet applied a reset, or the sender's log is
    /// behind.
    #[error("the receiver counted {ahead} more identifiers than the sender sent")]
    CountWentBackwards {
        /// By how many the receiver's count is ahead.
        ahead: u32,
    },
    /// Some missing identifiers are not among the candidates.
    #[error("{unexplained} of {missing} missing identifiers are not among the candidates")]
    NotInCandidates {
        /// The number of missing identifiers.
        missing: u32,
        /// How many of them no candidate accounts for.
        unexplained: u32,
    },
    /// Nothing is missing by count, yet the power sums differ: the two sides
    /// did not see the same identifiers.
    #[error("no identifier is missing by count but the power sums differ")]
    Inconsistent,
}

/// The outcome of a decode, as positions in the candidate list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Missing {
    /// Positions of the missing candidates, ascending. When an identifier was
    /// sent several times and only some copies are missing, the earliest
    /// copies are listed.
    pub indices: Vec<usize>,
    /// Positions of every candidate whose identifier is missing some but not
    /// all of the times it was sent: which copy is missing is unknowable
    /// (the paper's "indeterminate"). Ascending.
    pub collided: Vec<usize>,
}

impl Missing {
    fn clear(&mut self) {
        self.indices.clear();
        self.collided.clear();
    }
}

/// A decoder with reusable scratch space, so that decoding allocates nothing
/// once warm.
#[derive(Clone, Debug, Default)]
pub struct Decoder {
    coeffs: Vec<u64>,
    /// [`Field::kernel_prepare`] of each coefficient, for the evaluation.
    prepared: Vec<u64>,
    roots: Vec<(u64, usize)>,
    scratch: Vec<u64>,
}

impl Decoder {
    /// A decoder with empty scratch space.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `diff` (the sender's quACK minus the receiver's) against the
    /// identifiers the sender sent, writing the positions of the missing ones
    /// into `out`.
    pub fn decode<F: Field>(
        &mut self,
        diff: &Quack<F>,
        candidates: &[F::Id],
        out: &mut Missing,
    ) -> Result<(), DecodeError> {
        out.clear();
        let m = missing_count(diff)?;
        if m == 1
            && let Some(found) = single_root::<F>(diff.sums[0], candidates)
        {
            // One candidate is `d_1`, the root of `x - d_1`: the missing
            // identifier, if the other sums are its powers.
            if !powers_agree::<F>(diff.sums[0], &diff.sums[1..]) {
                return Err(DecodeError::Inconsistent);
            }
            out.indices.push(found);
            return Ok(());
        }
        self.decode_general(diff, m, candidates, out)
    }

    /// [`Decoder::decode`] of `m` missing identifiers but for the case of
    /// one missing identifier that one candidate matches: out of line, so
    /// that the common case does not pay for its stack frame.
    #[inline(never)]
    fn decode_general<F: Field>(
        &mut self,
        diff: &Quack<F>,
        m: usize,
        candidates: &[F::Id],
        out: &mut Missing,
    ) -> Result<(), DecodeError> {
        if m == 0 {
            return if diff.sums.iter().all(|&s| s == 0) {
                Ok(())
            } else {
                Err(DecodeError::Inconsistent)
            };
        }
        newton_coefficients::<F>(&diff.sums[..m], &mut self.coeffs);
        if m == 1 {
            // The polynomial is `x - d_1`: its roots among the candidates
            // are the candidates equal to `d_1`, found without evaluating.
            let root = diff.sums[0];
            self.roots.clear();
            for (i, &id) in candidates.iter().enumerate() {
                if F::element(id) == root {
                    self.roots.push((root, i));
                }
            }
        } else {
            self.prepared.clear();
            self.prepared
                .extend(self.coeffs.iter().map(|&c| F::kernel_prepare(c)));
            self.find_roots::<F>(candidates);
        }
        if self.roots.len() == m && self.roots_distinct() {
            // Found in candidate order, so already ascending.
            out.indices.extend(self.roots.iter().map(|&(_, i)| i));
        } else {
            self.resolve_multiplicities::<F>(m, out)?;
        }
        if !extra_sums_agree::<F>(
            &diff.sums[m..],
            m,
            candidates,
            &out.indices,
            &mut self.scratch,
        ) {
            out.clear();
            return Err(DecodeError::Inconsistent);
        }
        Ok(())
    }

    /// Candidates at which the polynomial vanishes, as (element, position).
    fn find_roots<F: Field>(&mut self, candidates: &[F::Id]) {
        self.roots.clear();
        for (chunk_index, chunk) in candidates.chunks(BATCH).enumerate() {
            // A partial chunk is evaluated in as few vectors (of 4 lanes)
            // as cover it, not padded to a full batch.
            let (c, p) = (&self.coeffs[..], &self.prepared[..]);
            let mut zeros = match chunk.len() {
                0..=4 => zero_candidates::<F, 4>(c, p, chunk),
                5..=8 => zero_candidates::<F, 8>(c, p, chunk),
                9..=12 => zero_candidates::<F, 12>(c, p, chunk),
                13..=16 => zero_candidates::<F, 16>(c, p, chunk),
                17..=20 => zero_candidates::<F, 20>(c, p, chunk),
                21..=24 => zero_candidates::<F, 24>(c, p, chunk),
                25..=28 => zero_candidates::<F, 28>(c, p, chunk),
                _ => zero_candidates::<F, BATCH>(c, p, chunk),
            };
            while zeros != 0 {
                let l = zeros.trailing_zeros() as usize;
                self.roots
                    .push((F::element(chunk[l]), chunk_index * BATCH + l));
                zeros &= zeros - 1;
            }
        }
    }

    /// Whether the roots found are pairwise distinct values.
    ///
    /// A quick exact test first: each root sets one bit of a 1024-bit map
    /// chosen by a hash of its value, and roots that set different bits
    /// are different. Only when two share a bit (for ten roots about one
    /// time in twenty, or when some value repeats) are pairs compared,
    /// which for a few dozen roots beats sorting.
    fn roots_distinct(&self) -> bool {
        let roots = &self.roots;
        let mut map = [0u64; 16];
        let mut shared = 0u64;
        for &(value, _) in roots {
            let bit = map_bit(value);
            let (word, mask) = (bit / 64, 1u64 << (bit % 64));
            shared |= map[word] & mask;
            map[word] |= mask;
        }
        if shared == 0 {
            return true;
        }
        if roots.len() > 64 {
            let mut values: Vec<u64> = roots.iter().map(|r| r.0).collect();
            values.sort_unstable();
            return values.windows(2).all(|w| w[0] != w[1]);
        }
        (1..roots.len()).all(|i| roots[..i].iter().all(|r| r.0 != roots[i].0))
    }

    /// The slow path: repeated roots, or roots that are not candidates.
    fn resolve_multiplicities<F: Field>(
        &mut self,
        m: usize,
        out: &mut Missing,
    ) -> Result<(), DecodeError> {
        self.roots.sort_unstable();
        let mut explained = 0;
        let mut start = 0;
        while start < self.roots.len() {
            let r = self.roots[start].0;
            let end = start + self.roots[start..].iter().take_while(|e| e.0 == r).count();
            let sent = end - start;
            let mut times = 0;
            while times < sent && divide_if_root::<F>(&mut self.coeffs, r) {
                times += 1;
            }
            out.indices
                .extend(self.roots[start..start + times].iter().map(|&(_, i)| i));
            if times < sent {
                out.collided
                    .extend(self.roots[start..end].iter().map(|&(_, i)| i));
            }
            explained += times;
            start = end;
        }
        if explained != m {
            out.clear();
            return Err(DecodeError::NotInCandidates {
                missing: m as u32,
                unexplained: (m - explained) as u32,
            });
        }
        out.indices.sort_unstable();
        out.collided.sort_unstable();
        Ok(())
    }
}

/// The candidates (at most `N`) at which the monic polynomial with
/// coefficients `coeffs` (and their [`Field::kernel_prepare`] `prepared`)
/// vanishes, as a bit mask of positions.
#[inline]
fn zero_candidates<F: Field, const N: usize>(
    coeffs: &[u64],
    prepared: &[u64],
    candidates: &[F::Id],
) -> u32 {
    // Padding lanes evaluate at 0; the mask drops them.
    let mut xs = [0u64; N];
    for (x, &id) in xs.iter_mut().zip(candidates) {
        *x = F::element(id);
    }
    zero_lanes(&eval_monic::<F, N>(coeffs, prepared, &xs)) & lane_mask(candidates.len())
}

/// The bit of the 1024-bit map in [`Decoder::roots_distinct`] that a value
/// sets (a multiplicative hash, so that nearby values spread).
fn map_bit(value: u64) -> usize {
    (value.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize
}

/// A mask of the first `len` lanes.
fn lane_mask(len: usize) -> u32 {
    if len >= 32 {
        u32::MAX
    } else {
        (1u32 << len) - 1
    }
}

/// The number of missing identifiers a difference describes, checked
/// against the power sums it carries.
fn missing_count<F: Field>(diff: &Quack<F>) -> Result<usize, DecodeError> {
    let m = diff.count;
    if (m as i32) < 0 {
        return Err(DecodeError::CountWentBackwards {
            ahead: m.wrapping_neg(),
        });
    }
    if m as usize > diff.sums.len() {
        return Err(DecodeError::TooManyMissing {
            missing: m,
            sums: diff.sums.len(),
        });
    }
    Ok(m as usize)
}

/// The position of the one candidate whose element is `root`; `None` if
/// there is none or several (the general path sorts those out).
#[inline]
fn single_root<F: Field>(root: u64, candidates: &[F::Id]) -> Option<usize> {
    let mut found = None;
    for (i, &id) in candidates.iter().enumerate() {
        if F::element(id) == root {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

/// Whether `extra` are `x^2, x^3, ...`: the power sums of a difference of
/// one missing identifier `x` beyond the first. Four chains stepping by
/// `x^4`, compared as they go (no scratch space).
#[inline]
fn powers_agree<F: Field>(x: u64, extra: &[u64]) -> bool {
    let x2 = F::mul(x, x);
    let x4 = F::mul(x2, x2);
    let mut pow = [x2, F::mul(x2, x), x4, F::mul(x4, x)];
    let mut differ = 0u64;
    let mut quads = extra.chunks_exact(4);
    for quad in &mut quads {
        for l in 0..4 {
            differ |= quad[l] ^ pow[l];
            pow[l] = F::mul(pow[l], x4);
        }
    }
    for (&s, &p) in quads.remainder().iter().zip(&pow) {
        differ |= s ^ p;
    }
    differ == 0
}

/// Whether the power sums beyond the first `m` (which the decode did not
/// use) are those of the missing identifiers found. A difference that is not
/// the power sums of a sub-multiset of the candidates (e.g. the receiver
/// holds a packet the sender did not fold) can still have `m` roots among
/// the candidates by chance; the extra sums expose it.
fn extra_sums_agree<F: Field>(
    extra: &[u64],
    m: usize,
    candidates: &[F::Id],
    found: &[usize],
    sums: &mut Vec<u64>,
) -> bool {
    if extra.is_empty() {
        return true;
    }
    sums.clear();
    sums.resize(extra.len(), 0);
    for &i in found {
        let x = F::element(candidates[i]);
        // x^(m+1) ..= x^(m+4), then four chains stepping by x^4 (a quarter
        // of the multiplications on the path).
        let prepared = F::kernel_prepare(x);
        let mut first = x;
        for _ in 0..m {
            first = F::kernel_mul(first, x, prepared);
        }
        let second = F::kernel_mul(first, x, prepared);
        let x2 = F::mul(x, x);
        let x4 = F::mul(x2, x2);
        let mut pow = [first, second, F::mul(first, x2), F::mul(second, x2)];
        let mut quads = sums.chunks_exact_mut(4);
        for quad in &mut quads {
            for l in 0..4 {
                quad[l] = F::add(quad[l], pow[l]);
                pow[l] = F::mul(pow[l], x4);
            }
        }
        for (s, &p) in quads.into_remainder().iter_mut().zip(&pow) {
            *s = F::add(*s, p);
        }
    }
    sums[..] == *extra
}

/// Newton's identities: the coefficients `c_1 ..= c_m` (the leading 1
/// omitted) of the monic polynomial whose roots have power sums `d`:
/// `c_k = -(1/k) (d_k + sum_{i=1..k-1} c_{k-i} d_i)`.
///
/// Each `c_k` needs `c_{k-1}`, so the loop is a dependency chain, but only
/// through the term `c_{k-1} d_1`: the older terms are a dot product, summed
/// unreduced (128-bit) and reduced once, which the processor computes
/// ahead while the chain waits. The chain is then two multiplications by
/// Shoup's method (`d_1` prepared once, `-1/k` from a table with its
/// precomputation) and a modular addition. The loop is short of both
/// latency and throughput; splitting `c_k` into `rest_k + (-d_1 / k)
/// c_{k-1}` (one multiplication on the chain) cost more instructions than
/// it saved waiting.
fn newton_coefficients<F: Field>(d: &[u64], coeffs: &mut Vec<u64>) {
    coeffs.clear();
    let Some(&d1) = d.first() else {
        return;
    };
    let d1_prepared = F::kernel_prepare(d1);
    let mut previous = F::sub(0, d1); // c_1 = -d_1
    coeffs.push(previous);
    for k in 2..=d.len() {
        // c_0 d_k + sum_{j=1..k-2} c_j d_{k-j}, with c_0 = 1.
        let older = &coeffs[..k - 2];
        let dot = older
            .iter()
            .zip(d[1..k - 1].iter().rev())
            .fold(d[k - 1] as u128, |acc, (&c, &di)| acc + F::wide_mul(c, di));
        let sum = F::add(
            F::reduce_wide(dot),
            F::kernel_mul(previous, d1, d1_prepared),
        );
        let (neg_inv, neg_inv_prepared) = F::neg_inv_small(k);
        previous = F::kernel_mul(sum, neg_inv, neg_inv_prepared);
        coeffs.push(previous);
    }
}

/// Divides the monic polynomial by `(x - r)` in place if `r` is a root;
/// returns whether it was.
fn divide_if_root<F: Field>(coeffs: &mut Vec<u64>, r: u64) -> bool {
    if coeffs.is_empty() {
        return false; // the constant 1 has no roots
    }
    // Synthetic division: b_i = a_i + r * b_{i-1}, b_{-1} = 1; the last b is
    // the remainder.
    let mut carry = 1;
    let mut remainder = 0;
    for &a in coeffs.iter() {
        carry = F::add(a, F::mul(r, carry));
        remainder = carry;
    }
    if remainder != 0 {
        return false;
    }
    let mut carry = 1;
    for a in coeffs.iter_mut() {
        carry = F::add(*a, F::mul(r, carry));
        *a = carry;
    }
    coeffs.pop();
    true
}

impl<F: Field> Quack<F> {
    /// Decodes this difference against the identifiers the sender sent and
    /// returns the missing multiset, in candidate order. A convenience over
    /// [`Decoder::decode`], which reuses its buffers.
    pub fn decode(&self, candidates: &[F::Id]) -> Result<Vec<F::Id>, DecodeError> {
        let mut missing = Missing::default();
        Decoder::new().decode(self, candidates, &mut missing)?;
        Ok(missing.indices.iter().map(|&i| candidates[i]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{F16, F32, F64};
    use crate::power_sum::PowerSums;

    fn diff<F: Field>(sent: &[F::Id], received: &[F::Id], t: usize) -> Quack<F> {
        let mut s = PowerSums::<F>::new(t).unwrap();
        let mut r = PowerSums::<F>::new(t).unwrap();
        sent.iter().for_each(|&x| s.insert(x));
        received.iter().for_each(|&x| r.insert(x));
        &s - &r
    }

    #[test]
    fn decodes_single_and_several() {
        let sent: Vec<u32> = (1..=25).map(|i| i * 7919).collect();
        let received: Vec<u32> = sent.iter().copied().filter(|x| x % 3 != 0).collect();
        let d = diff::<F32>(&sent, &received, 10);
        let missing = d.decode(&sent).unwrap();
        let expect: Vec<u32> = sent.iter().copied().filter(|x| x % 3 == 0).collect();
        assert_eq!(missing, expect);
    }

    #[test]
    fn nothing_missing() {
        let sent = [5u16, 6, 7];
        assert_eq!(diff::<F16>(&sent, &sent, 3).decode(&sent).unwrap(), vec![]);
    }

    #[test]
    fn repeated_identifiers_keep_multiplicity() {
        let sent = [9u64, 4, 9, 9, 2, 4];
        let received = [9u64, 2];
        let d = diff::<F64>(&sent, &received, 5);
        assert_eq!(d.count(), 4);
        // Two of three 9s and both 4s are missing.
        let mut missing = Missing::default();
        Decoder::new().decode(&d, &sent, &mut missing).unwrap();
        assert_eq!(missing.indices, vec![0, 1, 2, 5]);
        assert_eq!(missing.collided, vec![0, 2, 3], "the 9s are indeterminate");
    }

    #[test]
    fn too_many_missing() {
        let sent: Vec<u32> = (1..=20).collect();
        let d = diff::<F32>(&sent, &sent[..5], 10);
        assert_eq!(
            d.decode(&sent),
            Err(DecodeError::TooManyMissing {
                missing: 15,
                sums: 10
            })
        );
    }

    #[test]
    fn truncated_quack_decodes_up_to_its_length() {
        let sent: Vec<u32> = (1..=20).collect();
        let mut d = diff::<F32>(&sent, &sent[..17], 10);
        d.truncate(3);
        assert_eq!(d.decode(&sent).unwrap(), vec![18, 19, 20]);
        d.truncate(2);
        assert!(matches!(
            d.decode(&sent),
            Err(DecodeError::TooManyMissing {
                missing: 3,
                sums: 2
            })
        ));
    }

    #[test]
    fn missing_identifier_not_a_candidate() {
        let sent: Vec<u32> = (1..=10).collect();
        let d = diff::<F32>(&sent, &sent[..8], 4);
        // The sender forgot that it sent 10.
        assert_eq!(
            d.decode(&sent[..9]),
            Err(DecodeError::NotInCandidates {
                missing: 2,
                unexplained: 1
            })
        );
    }

    #[test]
    fn more_copies_missing_than_sent() {
        // The polynomial has 3 twice, but 3 appears once among candidates.
        let d = diff::<F32>(&[3, 3, 5], &[5], 4);
        assert!(matches!(
            d.decode(&[3, 5]),
            Err(DecodeError::NotInCandidates { unexplained: 1, .. })
        ));
    }

    #[test]
    fn count_went_backwards() {
        let d = diff::<F32>(&[1, 2], &[1, 2, 3], 4);
        assert_eq!(
            d.decode(&[1, 2]),
            Err(DecodeError::CountWentBackwards { ahead: 1 })
        );
    }

    #[test]
    fn inconsistent_sums() {
        let d = diff::<F32>(&[1, 2], &[1, 3], 4);
        assert_eq!(d.decode(&[1, 2]), Err(DecodeError::Inconsistent));
    }

    #[test]
    fn extra_sums_reject_a_false_root() {
        // The receiver holds 31, which the sender never counted, and misses
        // 14 and 23: the difference has count 1 and first sum 14 + 23 - 31 = 6,
        // which is a candidate. Only the second sum shows the lie.
        let sent = [6u32, 14, 23, 40];
        let d = &diff::<F32>(&sent, &[], 4) - &diff::<F32>(&[6, 40, 31], &[], 4);
        assert_eq!(d.count(), 1);
        assert_eq!(d.decode(&sent), Err(DecodeError::Inconsistent));
        // The same with the four chains of a larger threshold.
        for t in [10, 13] {
            let d = &diff::<F32>(&sent, &[], t) - &diff::<F32>(&[6, 40, 31], &[], t);
            assert_eq!(d.decode(&sent), Err(DecodeError::Inconsistent), "t={t}");
            let honest = &diff::<F32>(&sent, &[], t) - &diff::<F32>(&[6, 40, 23], &[], t);
            assert_eq!(honest.decode(&sent), Ok(vec![14]), "t={t}");
        }
        // With only one sum there is nothing to check against.
        let mut one = d.clone();
        one.truncate(1);
        assert_eq!(one.decode(&sent), Ok(vec![6]));
    }

    #[test]
    fn roots_distinct_checks_pairs_when_the_map_collides() {
        let mut decoder = Decoder::new();
        // Two different values that set the same bit, plus a few others.
        let first = 12_345u64;
        let twin = (first + 1..)
            .find(|&v| map_bit(v) == map_bit(first))
            .unwrap();
        decoder.roots = vec![(first, 0), (7, 1), (twin, 2), (99, 3)];
        assert!(decoder.roots_distinct());
        decoder.roots.push((first, 4));
        assert!(!decoder.roots_distinct());
        // Without a collision in the map, distinct by the map alone.
        decoder.roots = vec![(1, 0), (2, 1), (3, 2)];
        assert!(decoder.roots_distinct());
        // Past 64 roots, by sorting.
        decoder.roots = (0..100).map(|i| (i as u64 * 7_919, i)).collect();
        assert!(decoder.roots_distinct());
        decoder.roots.push((7_919 * 50, 100));
        assert!(!decoder.roots_distinct());
    }

    #[test]
    fn zero_identifier_is_found_by_count() {
        // 0 contributes nothing to any power sum; the count still finds it.
        let sent = [0u32, 11, 12];
        let d = diff::<F32>(&sent, &[11, 12], 4);
        assert_eq!(d.decode(&sent).unwrap(), vec![0]);
    }
}
