//! The strawmen of section 3.3 and the power sum behind one interface, so a
//! scenario can swap the acknowledgement scheme of a proxy and its sender.
//!
//! * 1a, [`Scheme::Echo`]: one message per received packet, echoing its
//!   identifier. Not cumulative: a lost message looks like a lost packet.
//! * 1b, [`Scheme::Window`]: one message per received packet carrying the
//!   last `size` identifiers, so consecutive messages overlap.
//! * 2, [`Scheme::SortedHash`]: a SHA-256 of the sorted received multiset
//!   and its count; the sender finds the missing subset by trying subsets,
//!   which explodes combinatorially (that is the point of the strawman), so
//!   the search takes a budget of work (bytes hashed), which bounds
//!   its time whatever the digest and however many packets are unsettled.
//!
//! (Strawman 1c is 1a over TCP: a transport choice, not a message format.)

use std::collections::{BTreeMap, VecDeque};

use sha2::{Digest, Sha256};

use crate::field::Field;
use crate::power_sum::{InvalidThreshold, PowerSums};
use crate::wire::Message;

/// An acknowledgement scheme and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// The power-sum quACK with this threshold.
    PowerSum {
        /// How many missing packets a quACK can describe.
        threshold: usize,
    },
    /// Strawman 1a.
    Echo,
    /// Strawman 1b with a window of this many identifiers (1..=255).
    Window {
        /// Identifiers per message.
        size: usize,
    },
    /// Strawman 2.
    SortedHash,
}

impl Scheme {
    /// Whether the proxy sends a message for every packet it receives (the
    /// strawmen 1a and 1b) rather than at an interval.
    pub fn per_packet(self) -> bool {
        matches!(self, Self::Echo | Self::Window { .. })
    }
}

/// The proxy side of every scheme: observe identifiers, describe them.
pub trait Encoder<F: Field> {
    /// Observes one received packet.
    fn insert(&mut self, id: F::Id);
    /// The message describing what was observed; `None` before anything was
    /// (for the per-packet strawmen, which have nothing to echo).
    fn message(&self) -> Option<Message<F>>;
    /// Forgets everything (a reset from the sender).
    fn clear(&mut self);
}

impl<F: Field> Encoder<F> for PowerSums<F> {
    fn insert(&mut self, id: F::Id) {
        PowerSums::insert(self, id);
    }

    fn message(&self) -> Option<Message<F>> {
        Some(Message::PowerSum(self.quack()))
    }

    fn clear(&mut self) {
        PowerSums::clear(self);
    }
}

/// Strawman 1a's proxy side: remembers the last identifier.
#[derive(Clone, Debug, Default)]
pub struct EchoEncoder<F: Field> {
    last: Option<F::Id>,
}

impl<F: Field> Encoder<F> for EchoEncoder<F> {
    fn insert(&mut self, id: F::Id) {
        self.last = Some(id);
    }

    fn message(&self) -> Option<Message<F>> {
        self.last.map(Message::Echo)
    }

    fn clear(&mut self) {
        self.last = None;
    }
}

/// Strawman 1b's proxy side: the last `size` identifiers.
#[derive(Clone, Debug)]
pub struct WindowEncoder<F: Field> {
    window: VecDeque<F::Id>,
    size: usize,
}

impl<F: Field> WindowEncoder<F> {
    /// A window of `size` identifiers (clamped to 1..=255).
    pub fn new(size: usize) -> Self {
        let size = size.clamp(1, 255);
        Self {
            window: VecDeque::with_capacity(size),
            size,
        }
    }
}

impl<F: Field> Encoder<F> for WindowEncoder<F> {
    fn insert(&mut self, id: F::Id) {
        if self.window.len() == self.size {
            self.window.pop_front();
        }
        self.window.push_back(id);
    }

    fn message(&self) -> Option<Message<F>> {
        (!self.window.is_empty()).then(|| Message::Window(self.window.iter().copied().collect()))
    }

    fn clear(&mut self) {
        self.window.clear();
    }
}

/// Strawman 2's proxy side: the received multiset, kept sorted.
#[derive(Clone, Debug, Default)]
pub struct SortedHashEncoder<F: Field> {
    received: BTreeMap<F::Id, u32>,
    count: u32,
}

impl<F: Field> Encoder<F> for SortedHashEncoder<F> {
    fn insert(&mut self, id: F::Id) {
        *self.received.entry(id).or_default() += 1;
        self.count = self.count.wrapping_add(1);
    }

    fn message(&self) -> Option<Message<F>> {
        let mut hasher = Sha256::new();
        let mut buf = Vec::with_capacity(8);
        for (&id, &times) in &self.received {
            buf.clear();
            F::write_be(F::raw(id), &mut buf);
            for _ in 0..times {
                hasher.update(&buf);
            }
        }
        Some(Message::SortedHash {
            count: self.count,
            digest: hasher.finalize().into(),
        })
    }

    fn clear(&mut self) {
        self.received.clear();
        self.count = 0;
    }
}

/// Any scheme's proxy side, chosen at run time.
// The power sum is the common case and sits on the per-packet path; boxing
// it to shrink the strawman variants would cost it an indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum AnyEncoder<F: Field> {
    /// The power sum.
    PowerSum(PowerSums<F>),
    /// Strawman 1a.
    Echo(EchoEncoder<F>),
    /// Strawman 1b.
    Window(WindowEncoder<F>),
    /// Strawman 2.
    SortedHash(SortedHashEncoder<F>),
}

impl<F: Field> AnyEncoder<F> {
    /// The encoder for a scheme.
    pub fn new(scheme: Scheme) -> Result<Self, InvalidThreshold> {
        Ok(match scheme {
            Scheme::PowerSum { threshold } => Self::PowerSum(PowerSums::new(threshold)?),
            Scheme::Echo => Self::Echo(EchoEncoder { last: None }),
            Scheme::Window { size } => Self::Window(WindowEncoder::new(size)),
            Scheme::SortedHash => Self::SortedHash(SortedHashEncoder {
                received: BTreeMap::new(),
                count: 0,
            }),
        })
    }

    fn inner(&mut self) -> &mut dyn Encoder<F> {
        match self {
            Self::PowerSum(e) => e,
            Self::Echo(e) => e,
            Self::Window(e) => e,
            Self::SortedHash(e) => e,
        }
    }
}

impl<F: Field> Encoder<F> for AnyEncoder<F> {
    fn insert(&mut self, id: F::Id) {
        self.inner().insert(id);
    }

    fn message(&self) -> Option<Message<F>> {
        match self {
            Self::PowerSum(e) => e.message(),
            Self::Echo(e) => e.message(),
            Self::Window(e) => e.message(),
            Self::SortedHash(e) => e.message(),
        }
    }

    fn clear(&mut self) {
        self.inner().clear();
    }
}

/// Why strawman 2 did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// More packets received than sent.
    #[error("the receiver counted {received} packets but only {sent} were sent")]
    CountWentBackwards {
        /// The receiver's count.
        received: u32,
        /// Candidates.
        sent: usize,
    },
    /// The budget of work ran out before a match (or would have before
    /// the first subset was hashed: `tried` is then 0).
    #[error("no match within the work budget ({tried} subsets hashed)")]
    BudgetExhausted {
        /// Subsets hashed.
        tried: u64,
    },
    /// Every subset of the right size was tried and none matched.
    #[error("no subset of the candidates matches the digest")]
    NoMatch,
}

/// Strawman 2's sender side: finds which of the `candidates` are missing,
/// given that the receiver also holds every identifier in `received_before`
/// (settled earlier), by hashing subsets. Returns the positions of the
/// missing candidates, ascending.
///
/// `budget` bounds the work, in bytes: sorting costs an identifier's width
/// per identifier, and each subset tried the bytes it hashes plus 64 (a
/// SHA-256 block, for finishing the hash). A search that would exceed it
/// returns [`SearchError::BudgetExhausted`] before doing so; with `n`
/// identifiers of `w` bytes in all, a budget `b` admits about `b / (n·w)`
/// subsets and takes time proportional to `b` (SHA-256's few nanoseconds
/// per byte), whatever the input.
pub fn search_sorted_hash<F: Field>(
    received_before: &[F::Id],
    candidates: &[F::Id],
    count: u32,
    digest: &[u8; 32],
    budget: u64,
) -> Result<Vec<usize>, SearchError> {
    let n = candidates.len();
    let total = n + received_before.len();
    let Some(m) = total.checked_sub(count as usize) else {
        return Err(SearchError::CountWentBackwards {
            received: count,
            sent: total,
        });
    };
    if m > n {
        return Err(SearchError::NoMatch);
    }
    // Each subset hashes the `total - m` identifiers kept.
    let width = F::ID_BYTES;
    let per_subset = ((total - m) * width) as u64 + 64;
    let mut work = (total * width) as u64;
    if work.saturating_add(per_subset) > budget {
        return Err(SearchError::BudgetExhausted { tried: 0 });
    }
    // Everything sorted once, tagged with its candidate position (if any);
    // a subset is then hashed by skipping its members in order.
    let mut all: Vec<(F::Id, Option<usize>)> = received_before
        .iter()
        .map(|&id| (id, None))
        .chain(candidates.iter().enumerate().map(|(i, &id)| (id, Some(i))))
        .collect();
    all.sort_unstable();
    let mut encoded = Vec::with_capacity(total * F::ID_BYTES);
    for &(id, _) in &all {
        F::write_be(F::raw(id), &mut encoded);
    }
    // Sorted positions of the candidates, in sorted order.
    let choosable: Vec<usize> = (0..all.len()).filter(|&p| all[p].1.is_some()).collect();
    // Combinations of m of the choosable positions, lexicographic.
    let mut pick: Vec<usize> = (0..m).collect();
    let mut tried = 0u64;
    loop {
        if work.saturating_add(per_subset) > budget {
            return Err(SearchError::BudgetExhausted { tried });
        }
        work += per_subset;
        tried += 1;
        // The kept identifiers are the runs between the picked positions.
        let mut hasher = Sha256::new();
        let mut from = 0;
        for &k in &pick {
            let at = choosable[k];
            hasher.update(&encoded[from * width..at * width]);
            from = at + 1;
        }
        hasher.update(&encoded[from * width..]);
        if hasher.finalize().as_slice() == digest {
            let mut missing: Vec<usize> =
                pick.iter().filter_map(|&k| all[choosable[k]].1).collect();
            missing.sort_unstable();
            return Ok(missing);
        }
        let Some(i) = (0..m).rev().find(|&i| pick[i] != i + n - m) else {
            return Err(SearchError::NoMatch);
        };
        pick[i] += 1;
        for j in i + 1..m {
            pick[j] = pick[j - 1] + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::F32;

    #[test]
    fn window_keeps_the_last_size_identifiers() {
        let mut w = WindowEncoder::<F32>::new(3);
        assert_eq!(w.message(), None);
        for id in 1..=5 {
            w.insert(id);
        }
        assert_eq!(w.message(), Some(Message::Window(vec![3, 4, 5])));
    }

    #[test]
    fn sorted_hash_search_finds_the_missing_subset() {
        let sent: Vec<u32> = vec![40, 10, 30, 20, 50, 60];
        let mut enc = SortedHashEncoder::<F32>::default();
        for &id in &[60, 10, 50, 20] {
            enc.insert(id);
        }
        let Some(Message::SortedHash { count, digest }) = enc.message() else {
            panic!("sorted hash message");
        };
        assert_eq!(
            search_sorted_hash::<F32>(&[], &sent, count, &digest, 1000),
            Ok(vec![0, 2])
        );
        // Sorting 6 identifiers costs 24 bytes, each subset 16 + 64: room
        // for 3 subsets.
        assert_eq!(
            search_sorted_hash::<F32>(&[], &sent, count, &digest, 24 + 3 * 80 + 79),
            Err(SearchError::BudgetExhausted { tried: 3 })
        );
        assert_eq!(
            search_sorted_hash::<F32>(&[], &sent, count, &digest, 100),
            Err(SearchError::BudgetExhausted { tried: 0 })
        );
        assert_eq!(
            search_sorted_hash::<F32>(&[], &sent[..3], count, &digest, 10),
            Err(SearchError::CountWentBackwards {
                received: 4,
                sent: 3
            })
        );
        assert_eq!(
            search_sorted_hash::<F32>(&[], &[1, 2, 3, 4, 5], count, &digest, 1000),
            Err(SearchError::NoMatch)
        );
        // With 10 and 20 settled earlier, only the rest are searched.
        assert_eq!(
            search_sorted_hash::<F32>(&[10, 20], &[30, 50, 40, 60], count, &digest, 1000),
            Ok(vec![0, 2])
        );
    }

    #[test]
    fn any_encoder_dispatches() {
        let mut e = AnyEncoder::<F32>::new(Scheme::Echo).unwrap();
        e.insert(7);
        assert_eq!(e.message(), Some(Message::Echo(7)));
        e.clear();
        assert_eq!(e.message(), None);
        assert!(AnyEncoder::<F32>::new(Scheme::PowerSum { threshold: 0 }).is_err());
        assert!(Scheme::Window { size: 4 }.per_packet());
        assert!(!Scheme::SortedHash.per_packet());
    }
}
