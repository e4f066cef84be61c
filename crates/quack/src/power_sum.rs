//! Power sums of a multiset of identifiers, and the quACK that carries them.

use core::fmt;
use core::ops::Sub;

use crate::field::{Field, MAX_THRESHOLD};
use crate::lanes::{
    BATCH, Lane, SMALL_BATCH, accumulate, add_id_powers, add_id_powers_reduced, add_power_sums,
    write_id_powers,
};

/// Identifiers up to which [`PowerSums::small_sums`] keeps its sums
/// reduced as it adds: beyond, normalising once costs less than a
/// reduction in every addition.
const FEW: usize = 4;
use crate::sums::{INLINE, Sums};

/// The running power sums `p_k = sum of x^k` (`k = 1..=t`) of a multiset of
/// identifiers, with its element count and the last identifier inserted.
///
/// The proxy keeps one per flow and inserts every packet it sees; the data
/// sender keeps one over the packets it has sent. [`PowerSums::quack`] takes
/// a [`Quack`], the value sent on the wire.
///
/// Inserts are buffered `BATCH` at a time and folded into per-lane sums by a
/// vectorised kernel, so the per-packet cost is a store plus an amortised
/// share of one vector multiply-add per power sum. The lanes are allocated
/// at the first full batch: power sums that never see one (a quACK of a
/// few packets) live without a heap allocation.
#[derive(Clone)]
pub struct PowerSums<F: Field> {
    /// `lanes[k].0[l]`: the sum over lane `l` of `x^(k+1)`; empty until
    /// the first batch is folded in (all zero until then).
    lanes: Vec<Lane>,
    /// The threshold `t`.
    threshold: u8,
    /// Identifiers not yet folded into the lanes, as inserted.
    pending: [F::Id; BATCH],
    pending_len: usize,
    /// Kernel calls since the lanes were last normalised.
    batches: u32,
    /// Inserts folded into the lanes (wrapping); with `pending_len`, all
    /// inserts. Counting this way leaves one counter per insert.
    folded_inserts: u32,
    /// Removals (wrapping).
    removals: u32,
    /// The last identifier folded in; the last inserted is the last pending
    /// one when there is one.
    last_folded: Option<F::Id>,
    /// The insert count at which `remove` took the last identifier away.
    last_removed_at: Option<u32>,
}

/// A threshold outside `1..=MAX_THRESHOLD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("threshold {0} is outside 1..={max}", max = MAX_THRESHOLD)]
pub struct InvalidThreshold(pub usize);

/// Checks a threshold chosen at run time.
#[inline]
pub(crate) fn check_threshold(t: usize) -> Result<(), InvalidThreshold> {
    if (1..=MAX_THRESHOLD).contains(&t) {
        Ok(())
    } else {
        Err(InvalidThreshold(t))
    }
}

impl<F: Field> PowerSums<F> {
    /// Empty power sums with threshold `t` (the number of sums kept).
    pub fn new(threshold: usize) -> Result<Self, InvalidThreshold> {
        check_threshold(threshold)?;
        Ok(Self {
            lanes: Vec::new(),
            threshold: threshold as u8,
            pending: [F::Id::default(); BATCH],
            pending_len: 0,
            batches: 0,
            folded_inserts: 0,
            removals: 0,
            last_folded: None,
            last_removed_at: None,
        })
    }

    /// The threshold `t`: how many missing identifiers a difference can decode.
    pub fn threshold(&self) -> usize {
        self.threshold as usize
    }

    /// How many identifiers the multiset holds (wrapping at `2^32`).
    pub fn count(&self) -> u32 {
        self.inserts().wrapping_sub(self.removals)
    }

    fn inserts(&self) -> u32 {
        self.folded_inserts.wrapping_add(self.pending_len as u32)
    }

    /// The identifier inserted last, unless it has been removed since.
    pub fn last(&self) -> Option<F::Id> {
        if self.last_removed_at == Some(self.inserts()) {
            None
        } else if self.pending_len > 0 {
            Some(self.pending[self.pending_len - 1])
        } else {
            self.last_folded
        }
    }

    /// Adds one identifier.
    ///
    /// The per-packet path is a store and an increment. Every `BATCH`
    /// packets the batch is folded in, out of line, by a function that sees
    /// only the lanes, so a caller's packet loop keeps the counter in a
    /// register.
    #[inline(always)]
    pub fn insert(&mut self, id: F::Id) {
        // The mask (BATCH is a power of two) drops the bounds check.
        self.pending[self.pending_len & (BATCH - 1)] = id;
        self.pending_len += 1;
        if self.pending_len == BATCH {
            fold_batch::<F>(
                &mut self.lanes,
                self.threshold,
                &self.pending,
                &mut self.batches,
            );
            self.folded_inserts = self.folded_inserts.wrapping_add(BATCH as u32);
            self.last_folded = Some(self.pending[BATCH - 1]);
            // A removal of the last identifier is now history (and the
            // wrapping insert count can never meet it again).
            self.last_removed_at = None;
            self.pending_len = 0;
        }
    }

    /// Removes one occurrence of an identifier (the caller knows it is there;
    /// removing one that is not leaves sums that decode to an error).
    pub fn remove(&mut self, id: F::Id) {
        if self.last() == Some(id) {
            self.last_removed_at = Some(self.inserts());
        }
        // Subtract from lane 0; which lane holds a term does not matter.
        if self.lanes.is_empty() {
            self.lanes = vec![Lane::default(); self.threshold as usize];
        }
        let x = F::element(id);
        let prepared = F::kernel_prepare(x);
        let mut pow = x;
        for lane in &mut self.lanes {
            lane.0[0] = F::sub(F::normalize(lane.0[0]), pow);
            pow = F::kernel_mul(pow, x, prepared);
        }
        self.removals = self.removals.wrapping_add(1);
    }

    /// Empties the multiset, keeping the threshold.
    pub fn clear(&mut self) {
        self.lanes
            .iter_mut()
            .for_each(|lane| *lane = Lane::default());
        self.pending_len = 0;
        self.batches = 0;
        self.folded_inserts = 0;
        self.removals = 0;
        self.last_folded = None;
        self.last_removed_at = None;
    }

    /// Writes the current power sums into `sums` (resized to `t`).
    pub(crate) fn sums_into(&self, sums: &mut Sums) {
        sums.reset_zeros(self.threshold());
        self.add_sums(sums);
    }

    /// [`PowerSums::add_sums`] (`t` zeros on entry), with the sums of up
    /// to [`FEW`] identifiers and no lanes (a quACK every few packets)
    /// computed in line: the first one's powers written, the others'
    /// added, each sum kept reduced as it goes, so that nothing is
    /// normalised.
    #[inline(always)]
    pub(crate) fn small_sums(&self, sums: &mut [u64]) {
        if self.lanes.is_empty() && (1..=FEW).contains(&self.pending_len) {
            let (first, rest) = self.pending[..self.pending_len & (BATCH - 1)]
                .split_first()
                .expect("one or more");
            write_id_powers::<F>(sums, F::element(*first));
            for &id in rest {
                add_id_powers_reduced::<F>(sums, F::element(id));
            }
        } else {
            self.add_sums(sums);
        }
    }

    /// Writes the current power sums into `sums` (`t` zeros on entry).
    pub(crate) fn add_sums(&self, sums: &mut [u64]) {
        if self.lanes.is_empty() && self.pending_len == 1 {
            write_id_powers::<F>(sums, F::element(self.pending[0]));
            return;
        }
        // Each power's lanes are added with `lane_add` and reduced once: a
        // small field's lane holds less than 2^58 (see `Field::LANE_BATCHES`),
        // so its eight lanes and the pending identifiers' powers stay below
        // 2^62; the 64-bit field's `lane_add` reduces as it goes.
        for (sum, lane) in sums.iter_mut().zip(&self.lanes) {
            *sum = lane.0.iter().fold(0, |acc, &v| F::lane_add(acc, v));
        }
        // The pending identifiers, a small batch at a time; a last partial
        // batch one identifier at a time (padding it with zeros, which add
        // nothing, would cost a full batch's multiplies).
        let mut chunks = self.pending[..self.pending_len].chunks_exact(SMALL_BATCH);
        for chunk in &mut chunks {
            let mut xs = [0u64; SMALL_BATCH];
            for (x, &id) in xs.iter_mut().zip(chunk) {
                *x = F::element(id);
            }
            add_power_sums::<F>(sums, &xs);
        }
        for &id in chunks.remainder() {
            add_id_powers::<F>(sums, F::element(id));
        }
        sums.iter_mut().for_each(|s| *s = F::normalize(*s));
    }

    /// The quACK of the current multiset.
    pub fn quack(&self) -> Quack<F> {
        let mut quack = Quack::empty(self.threshold());
        self.quack_into(&mut quack);
        quack
    }

    /// Writes the quACK of the current multiset into `out`, reusing its buffer.
    pub fn quack_into(&self, out: &mut Quack<F>) {
        self.sums_into(&mut out.sums);
        out.threshold = self.threshold() as u8;
        out.count = self.count();
        out.last = self.last();
    }
}

/// Folds a full batch into the lanes (allocating them, `threshold` of
/// them, the first time), normalising them when due.
#[inline(never)]
fn fold_batch<F: Field>(
    lanes: &mut Vec<Lane>,
    threshold: u8,
    batch: &[F::Id; BATCH],
    batches: &mut u32,
) {
    if lanes.is_empty() {
        *lanes = vec![Lane::default(); threshold as usize];
    }
    let mut xs = [0u64; BATCH];
    for (x, &id) in xs.iter_mut().zip(batch) {
        *x = F::element(id);
    }
    accumulate::<F>(lanes, &xs);
    *batches += 1;
    if *batches == F::LANE_BATCHES {
        for lane in lanes.iter_mut() {
            lane.0.iter_mut().for_each(|v| *v = F::normalize(*v));
        }
        *batches = 0;
    }
}

impl<F: Field> fmt::Debug for PowerSums<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.quack().fmt(f)
    }
}

impl<F: Field> PartialEq for PowerSums<F> {
    fn eq(&self, other: &Self) -> bool {
        self.quack() == other.quack()
    }
}

impl<F: Field> Eq for PowerSums<F> {}

/// A power-sum quACK: the first power sums of a multiset, its count and the
/// last identifier inserted. This is what a proxy sends, and what the
/// difference of two quACKs is; [`Quack::decode`] finds the missing multiset.
///
/// `sums` may hold fewer than `threshold` sums when the sender of the quACK
/// truncated it (see [`crate::wire`]); then at most `sums.len()` missing
/// identifiers can be decoded.
#[derive(Clone, PartialEq, Eq)]
pub struct Quack<F: Field> {
    pub(crate) threshold: u8,
    pub(crate) count: u32,
    pub(crate) last: Option<F::Id>,
    /// Field elements `p_1 ..= p_k`, each `< p`.
    pub(crate) sums: Sums,
}

impl<F: Field> Quack<F> {
    /// The quACK of the empty multiset. Panics unless `1 <= t <= MAX_THRESHOLD`.
    pub(crate) fn empty(threshold: usize) -> Self {
        assert!(check_threshold(threshold).is_ok(), "threshold {threshold}");
        Self {
            threshold: threshold as u8,
            count: 0,
            last: None,
            sums: Sums::zeros(threshold),
        }
    }

    /// The threshold the encoder was configured with.
    pub fn threshold(&self) -> usize {
        self.threshold as usize
    }

    /// The element count (wrapping). In a difference, the number of missing
    /// identifiers.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The last identifier inserted; `None` in a difference.
    pub fn last(&self) -> Option<F::Id> {
        self.last
    }

    /// The power sums carried, `p_1 ..= p_k`, as identifiers of the field.
    pub fn power_sums(&self) -> impl ExactSizeIterator<Item = F::Id> + '_ {
        self.sums.iter().map(|&s| F::id(s))
    }

    /// Keeps only the first `k` power sums (a smaller quACK on the wire that
    /// still decodes up to `k` missing identifiers).
    pub fn truncate(&mut self, k: usize) {
        self.sums.truncate(k);
    }
}

impl<F: Field> fmt::Debug for Quack<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quack")
            .field("field_bits", &F::BITS)
            .field("threshold", &self.threshold)
            .field("count", &self.count)
            .field("last", &self.last)
            .field("sums", &&self.sums[..])
            .finish()
    }
}

/// The sender's quACK minus the receiver's: the power sums and count of the
/// identifiers the receiver is missing. Sums beyond the shorter operand are
/// dropped; `last` is meaningless in a difference and is `None`.
impl<F: Field> Sub<&Quack<F>> for &Quack<F> {
    type Output = Quack<F>;

    #[inline]
    fn sub(self, rhs: &Quack<F>) -> Quack<F> {
        let len = self.sums.len().min(rhs.sums.len());
        let sums = if len <= INLINE {
            // Built in place: the inline array's unused tail stays zero.
            let mut values = [0u64; INLINE];
            for ((d, &a), &b) in values.iter_mut().zip(self.sums.iter()).zip(rhs.sums.iter()) {
                *d = F::sub(a, b);
            }
            Sums::Inline {
                len: len as u8,
                values,
            }
        } else {
            let mut sums = Sums::zeros(len);
            for ((d, &a), &b) in sums.iter_mut().zip(self.sums.iter()).zip(rhs.sums.iter()) {
                *d = F::sub(a, b);
            }
            sums
        };
        Quack {
            threshold: self.threshold.min(rhs.threshold),
            count: self.count.wrapping_sub(rhs.count),
            last: None,
            sums,
        }
    }
}

impl<F: Field> Sub<&Quack<F>> for Quack<F> {
    type Output = Quack<F>;

    fn sub(self, rhs: &Quack<F>) -> Quack<F> {
        &self - rhs
    }
}

/// `sender - receiver` on two running power sums.
impl<F: Field> Sub<&PowerSums<F>> for &PowerSums<F> {
    type Output = Quack<F>;

    fn sub(self, rhs: &PowerSums<F>) -> Quack<F> {
        &self.quack() - &rhs.quack()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{F16, F32, F64};
    use crate::lanes::add_powers;

    fn naive_sums<F: Field>(ids: &[u64], t: usize) -> Vec<u64> {
        let mut sums = vec![0; t];
        for &x in ids {
            add_powers::<F>(&mut sums, F::element(F::truncate(x)));
        }
        sums
    }

    fn check<F: Field>(t: usize, n: u64) {
        let ids: Vec<u64> = (0..n)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 77)
            .collect();
        let mut ps = PowerSums::<F>::new(t).unwrap();
        for &x in &ids {
            ps.insert(F::truncate(x));
        }
        let q = ps.quack();
        let expect: Vec<u64> = naive_sums::<F>(&ids, t);
        assert_eq!(q.sums[..], expect[..], "t={t} n={n} bits={}", F::BITS);
        assert_eq!(q.count, n as u32);
        assert_eq!(q.last, ids.last().map(|&x| F::truncate(x)));
    }

    #[test]
    fn lane_kernel_matches_scalar_powers() {
        for t in [1, 2, 7, 10, 33, 64, 255] {
            for n in [0, 1, 7, 8, 9, 64, 101] {
                check::<F16>(t, n);
                check::<F32>(t, n);
                check::<F64>(t, n);
            }
        }
    }

    fn check_encode_quack<F: Field>(t: usize, n: u64) {
        let mut ps = PowerSums::<F>::new(t).unwrap();
        for i in 0..n {
            ps.insert(F::truncate(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 5));
        }
        let (mut direct, mut via_quack) = (vec![9], vec![9]);
        ps.encode_quack(&mut direct);
        ps.quack().encode(&mut via_quack);
        assert_eq!(direct, via_quack, "t={t} n={n} bits={}", F::BITS);
    }

    #[test]
    fn encode_quack_writes_the_quacks_bytes() {
        for t in [1, 2, 10, 16, 17, 40] {
            for n in [0, 1, 2, 3, 4, 5, 31, 32, 33, 70] {
                check_encode_quack::<F16>(t, n);
                check_encode_quack::<F32>(t, n);
                check_encode_quack::<F64>(t, n);
            }
        }
    }

    #[test]
    fn remove_undoes_insert() {
        let mut a = PowerSums::<F32>::new(10).unwrap();
        let mut b = a.clone();
        for id in 1..=20u32 {
            a.insert(id);
        }
        for id in 1..=19u32 {
            b.insert(id);
        }
        a.remove(20);
        assert_eq!(a.quack().sums[..], b.quack().sums[..]);
        assert_eq!(a.count(), 19);
        assert_eq!(a.last(), None, "removing the last value forgets it");
    }

    #[test]
    fn count_wraps() {
        let mut a = PowerSums::<F16>::new(1).unwrap();
        a.remove(5);
        assert_eq!(a.count(), u32::MAX);
        a.insert(5);
        assert_eq!(a.count(), 0);
        assert_eq!(a.quack().sums[..], [0]);
    }

    #[test]
    fn thresholds_are_checked() {
        assert_eq!(PowerSums::<F32>::new(0).unwrap_err(), InvalidThreshold(0));
        assert!(PowerSums::<F32>::new(MAX_THRESHOLD + 1).is_err());
        assert!(PowerSums::<F32>::new(MAX_THRESHOLD).is_ok());
    }

    #[test]
    fn clear_resets() {
        let mut a = PowerSums::<F64>::new(4).unwrap();
        a.insert(3);
        a.clear();
        assert_eq!(a, PowerSums::<F64>::new(4).unwrap());
    }
}
