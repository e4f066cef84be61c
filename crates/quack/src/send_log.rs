//! The data sender's log of what it sent, classified by quACKs (section 4.3.1).
//!
//! The log holds every packet the sender has sent and not yet settled, in
//! send order, each with a sequence number the caller uses to find the
//! datagram again. A prefix of the log is *folded* into `sent`, the power
//! sums of everything the proxy should have seen by now: the packets up to
//! the one the latest quACK says the proxy received last, plus all settled
//! received packets before them. On a quACK the log
//!
//! 1. folds entries until it reaches the quACK's last identifier and the
//!    sender's count is at least the proxy's (the proxy may have seen a
//!    reordered packet last); if the decode then fails, packets sent after
//!    the last one may have overtaken it while a hole hides them from the
//!    count, so it folds one more at a time (up to 16) and decodes again;
//! 2. decodes `sent - quack` against the folded entries, so that `m` counts
//!    only the holes, not the packets still in flight behind the last one;
//! 3. settles every received entry; a missing entry becomes *lost* once at
//!    least `reorder_threshold` packets sent after it have been received
//!    (default 3, like TCP's three duplicate ACKs), and stays in the log,
//!    still folded, until then;
//! 4. settles the entries whose identifier collides between a received and
//!    a missing packet as *indeterminate*: the sender falls back to
//!    end-to-end recovery for them.
//!
//! Lost and indeterminate packets are removed from `sent` (the proxy never
//! counted the missing copies), so the next quACK only has to account for
//! new holes. Entries after the folded prefix are in flight.

use std::collections::VecDeque;

use crate::decode::{DecodeError, Decoder, Missing};
use crate::field::Field;
use crate::power_sum::{InvalidThreshold, PowerSums, Quack};
use crate::strawman::{SearchError, search_sorted_hash};
use crate::wire::Message;

/// Why a message could not be applied to the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeedbackError {
    /// A power-sum quACK did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A strawman-2 hash matched no subset within the budget.
    #[error(transparent)]
    Search(#[from] SearchError),
}

/// Work strawman 2 may do per message before giving up, in bytes hashed
/// (see [`search_sorted_hash`]): 8 MB, tens of milliseconds, whatever the
/// message and however many packets are unsettled (about 200 subsets of
/// 10 000 32-bit identifiers, or all 4 950 pairs of 100).
pub const SORTED_HASH_BUDGET: u64 = 8_000_000;

/// The default reordering rule: a missing packet is lost once three packets
/// sent after it have been received.
pub const DEFAULT_REORDER_THRESHOLD: u32 = 3;

/// How many packets sent after the proxy's last one the log will consider
/// as having overtaken it.
const MAX_REORDERED_FOLD: usize = 16;

/// A sequence number the log gives each sent packet, counting from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SendSeq(pub u64);

#[derive(Clone, Copy, Debug)]
struct Entry<Id> {
    seq: SendSeq,
    id: Id,
    /// Packets sent after this one that quACKs have shown received.
    received_after: u32,
}

/// What one quACK settled. The vectors are in send order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Classification {
    /// Packets the proxy has received.
    pub received: Vec<SendSeq>,
    /// Packets the proxy did not receive, with enough later packets received
    /// that reordering no longer explains it.
    pub lost: Vec<SendSeq>,
    /// Packets whose identifier collides between a received and a missing
    /// packet; only end-to-end feedback can tell their fate.
    pub indeterminate: Vec<SendSeq>,
    /// Packets not yet settled: missing but possibly reordered, or sent after
    /// the last packet the proxy reported.
    pub in_flight: usize,
    /// Whether the quACK was a duplicate of the last one (nothing changed).
    pub duplicate: bool,
}

impl Classification {
    fn clear(&mut self) {
        self.received.clear();
        self.lost.clear();
        self.indeterminate.clear();
        self.in_flight = 0;
        self.duplicate = false;
    }
}

/// The sender's send log; see the module docs.
#[derive(Clone, Debug)]
pub struct SendLog<F: Field> {
    entries: VecDeque<Entry<F::Id>>,
    /// `entries[..folded]` are counted in `sent`.
    folded: usize,
    sent: PowerSums<F>,
    next_seq: u64,
    reorder_threshold: u32,
    last_count: Option<u32>,
    // Scratch, reused across quACKs.
    decoder: Decoder,
    sent_quack: Quack<F>,
    candidates: Vec<F::Id>,
    missing: Missing,
    keep: Vec<bool>,
    /// Strawman 2 only: identifiers settled as received since the reset,
    /// which its cumulative hash still covers.
    hashed_received: Vec<F::Id>,
}

impl<F: Field> SendLog<F> {
    /// An empty log for quACKs with threshold `t`, using the default
    /// reordering rule.
    pub fn new(threshold: usize) -> Result<Self, InvalidThreshold> {
        Ok(Self {
            entries: VecDeque::new(),
            folded: 0,
            sent: PowerSums::new(threshold)?,
            next_seq: 0,
            reorder_threshold: DEFAULT_REORDER_THRESHOLD,
            last_count: None,
            decoder: Decoder::new(),
            sent_quack: Quack::empty(threshold),
            candidates: Vec::new(),
            missing: Missing::default(),
            keep: Vec::new(),
            hashed_received: Vec::new(),
        })
    }

    /// Sets how many later packets must be received before a missing one is
    /// lost (0 declares every hole lost at once).
    pub fn with_reorder_threshold(mut self, packets: u32) -> Self {
        self.reorder_threshold = packets;
        self
    }

    /// Records a sent packet and returns its sequence number.
    pub fn push(&mut self, id: F::Id) -> SendSeq {
        let seq = SendSeq(self.next_seq);
        self.next_seq += 1;
        self.entries.push_back(Entry {
            seq,
            id,
            received_after: 0,
        });
        seq
    }

    /// Packets logged and not yet settled.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no packet awaits settling.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The threshold of the quACKs this log decodes.
    pub fn threshold(&self) -> usize {
        self.sent.threshold()
    }

    /// Forgets everything, as after the sender asks the proxy to reset its
    /// quACK: packets sent from now on start a fresh log. Returns how many
    /// unsettled packets were abandoned to end-to-end recovery.
    pub fn reset(&mut self) -> usize {
        let abandoned = self.entries.len();
        self.entries.clear();
        self.folded = 0;
        self.sent.clear();
        self.last_count = None;
        self.hashed_received.clear();
        abandoned
    }

    /// Classifies the logged packets with a quACK from the proxy. On an
    /// error the log is unchanged apart from folding, and the sender should
    /// [`reset`](Self::reset) (and tell the proxy to).
    pub fn apply(&mut self, quack: &Quack<F>, out: &mut Classification) -> Result<(), DecodeError> {
        out.clear();
        if self.last_count == Some(quack.count()) {
            out.duplicate = true;
            out.in_flight = self.entries.len();
            return Ok(());
        }
        self.fold_to(quack);
        // Packets sent after the proxy's last one may have reached it first
        // (the last one was reordered); a hole can hide them from the count.
        // If the decode fails in a way they would explain, fold one more.
        let mut extra = 0;
        loop {
            self.sent.quack_into(&mut self.sent_quack);
            let diff = &self.sent_quack - quack;
            self.candidates.clear();
            self.candidates
                .extend(self.entries.iter().take(self.folded).map(|e| e.id));
            match self
                .decoder
                .decode(&diff, &self.candidates, &mut self.missing)
            {
                Ok(()) => break,
                Err(
                    DecodeError::Inconsistent
                    | DecodeError::NotInCandidates { .. }
                    | DecodeError::CountWentBackwards { .. },
                ) if extra < MAX_REORDERED_FOLD && self.folded < self.entries.len() => {
                    self.fold_one();
                    extra += 1;
                }
                Err(e) => return Err(e),
            }
        }
        self.settle(out, true);
        self.last_count = Some(quack.count());
        Ok(())
    }

    /// Folds entries up to the first unfolded one carrying the quACK's last
    /// identifier, then on until the sender's count reaches the proxy's.
    fn fold_to(&mut self, quack: &Quack<F>) {
        if let Some(last) = quack.last() {
            let target = F::element(last);
            let found = self
                .entries
                .iter()
                .skip(self.folded)
                .position(|e| F::element(e.id) == target);
            if let Some(offset) = found {
                for _ in 0..=offset {
                    self.fold_one();
                }
            }
        }
        while (quack.count().wrapping_sub(self.sent.count()) as i32) > 0
            && self.folded < self.entries.len()
        {
            self.fold_one();
        }
    }

    fn fold_one(&mut self) {
        let entry = self.entries[self.folded];
        self.sent.insert(entry.id);
        self.folded += 1;
    }

    /// Classifies with a message of any scheme (see [`crate::strawman`]).
    pub fn apply_message(
        &mut self,
        message: &Message<F>,
        out: &mut Classification,
    ) -> Result<(), FeedbackError> {
        match message {
            Message::PowerSum(quack) => Ok(self.apply(quack, out)?),
            Message::Echo(id) => {
                self.apply_received(core::slice::from_ref(id), out);
                Ok(())
            }
            Message::Window(ids) => {
                self.apply_received(ids, out);
                Ok(())
            }
            Message::SortedHash { count, digest } => {
                self.apply_sorted_hash(*count, digest, out)?;
                Ok(())
            }
        }
    }

    /// Strawmen 1a and 1b: each identifier marks the earliest unsettled
    /// packet carrying it as received (identifiers already settled, as
    /// overlapping windows repeat them, match nothing). Then the reordering
    /// rule declares losses as for power sums.
    fn apply_received(&mut self, ids: &[F::Id], out: &mut Classification) {
        out.clear();
        for &id in ids {
            let target = F::element(id);
            let Some(pos) = self.entries.iter().position(|e| F::element(e.id) == target) else {
                continue;
            };
            for e in self.entries.range_mut(..pos) {
                e.received_after = e.received_after.saturating_add(1);
            }
            if let Some(entry) = self.entries.remove(pos) {
                out.received.push(entry.seq);
            }
        }
        let threshold = self.reorder_threshold;
        self.entries.retain(|e| {
            let lost = e.received_after >= threshold && threshold > 0;
            if lost {
                out.lost.push(e.seq);
            }
            !lost
        });
        out.received.sort_unstable();
        out.in_flight = self.entries.len();
    }

    /// Strawman 2: the missing subset is searched among every unsettled
    /// packet (the hash carries no last identifier, so packets in flight
    /// look missing too, and the reordering rule keeps them).
    fn apply_sorted_hash(
        &mut self,
        count: u32,
        digest: &[u8; 32],
        out: &mut Classification,
    ) -> Result<(), SearchError> {
        out.clear();
        self.candidates.clear();
        self.candidates.extend(self.entries.iter().map(|e| e.id));
        let missing = search_sorted_hash::<F>(
            &self.hashed_received,
            &self.candidates,
            count,
            digest,
            SORTED_HASH_BUDGET,
        )?;
        let mut is_missing = vec![false; self.candidates.len()];
        missing.iter().for_each(|&i| is_missing[i] = true);
        self.hashed_received.extend(
            self.candidates
                .iter()
                .zip(&is_missing)
                .filter(|(_, m)| !**m)
                .map(|(&id, _)| id),
        );
        self.missing.indices = missing;
        self.missing.collided.clear();
        self.folded = self.entries.len();
        self.settle(out, false);
        Ok(())
    }

    /// Applies a decode of the folded prefix (in `self.missing`). With
    /// `sums`, settled missing packets also leave the running power sums.
    fn settle(&mut self, out: &mut Classification, sums: bool) {
        let missing = &self.missing;
        // Walk the prefix backwards, counting received packets sent later.
        let mut received_later = 0u32;
        let mut missing_pos = missing.indices.len();
        let mut collided_pos = missing.collided.len();
        self.keep.clear();
        self.keep.resize(self.folded, false);
        for i in (0..self.folded).rev() {
            let is_missing = missing_pos > 0 && missing.indices[missing_pos - 1] == i;
            if is_missing {
                missing_pos -= 1;
            }
            let is_collided = collided_pos > 0 && missing.collided[collided_pos - 1] == i;
            if is_collided {
                collided_pos -= 1;
            }
            let entry = &mut self.entries[i];
            if is_collided {
                if is_missing && sums {
                    self.sent.remove(entry.id);
                }
                out.indeterminate.push(entry.seq);
            } else if is_missing {
                entry.received_after = entry.received_after.saturating_add(received_later);
                if entry.received_after >= self.reorder_threshold {
                    if sums {
                        self.sent.remove(entry.id);
                    }
                    out.lost.push(entry.seq);
                } else {
                    self.keep[i] = true;
                }
            } else {
                received_later += 1;
                out.received.push(entry.seq);
            }
        }
        out.received.reverse();
        out.lost.reverse();
        out.indeterminate.reverse();
        let mut index = 0;
        let keep = &self.keep;
        self.entries.retain(|_| {
            let kept = index >= keep.len() || keep[index];
            index += 1;
            kept
        });
        self.folded = keep.iter().filter(|&&k| k).count();
        out.in_flight = self.entries.len();
    }
}
