//! The nodes' timers, kept beside the event queue instead of in it.
//!
//! A QUIC endpoint's next deadline changes at almost every activation (each
//! ACK moves its loss and pacing timers). Pushing every new deadline into
//! the event queue and ignoring the superseded ones when they surface left
//! the heap full of dead entries, one per activation for about an RTT: at
//! large windows a fifth of the simulator's CPU. Here each node has at most
//! one pending timer, replaced in place, and the earliest is found by a scan
//! of the few nodes when it changes.
//!
//! A timer takes its sequence number from the event queue, so timers and
//! events come out in exactly the order the single heap gave them.
//!
//! `SimStats::events` used to count the dead entries too, when they were
//! popped; it still does, so that the trial files of earlier runs compare
//! byte for byte. The superseded keys wait in a list and are counted once
//! the run has passed them ([`Timers::count_passed`]); the list is pruned
//! whenever it has doubled, so its memory stays about one RTT's worth.

use crate::{NodeId, Time};

/// A position in the order of events: time, then sequence number.
pub(crate) type Key = (Time, u64);

#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// Each node's pending timer, by node index.
    pending: Vec<Option<Key>>,
    /// The node whose pending timer comes first.
    earliest: Option<usize>,
    /// Keys of superseded timers the run has not yet passed.
    superseded: Vec<Key>,
    /// Prune `superseded` when it reaches this length.
    prune_at: usize,
}

/// Below this many superseded keys the list is not pruned.
const MIN_PRUNE: usize = 4096;

impl Timers {
    /// The earliest pending timer and its node.
    pub(crate) fn peek(&self) -> Option<(Key, NodeId)> {
        let node = self.earliest?;
        Some((self.pending[node]?, NodeId(u32::try_from(node).ok()?)))
    }

    /// Sets `node`'s timer to `key` (or none), superseding its pending one.
    pub(crate) fn set(&mut self, node: NodeId, key: Option<Key>) {
        let node = node.index();
        if node >= self.pending.len() {
            self.pending.resize(node + 1, None);
        }
        if let Some(old) = std::mem::replace(&mut self.pending[node], key) {
            self.superseded.push(old);
        }
        self.update_earliest(node);
    }

    /// Removes `node`'s timer because it fired.
    pub(crate) fn fire(&mut self, node: NodeId) {
        let node = node.index();
        if let Some(slot) = self.pending.get_mut(node) {
            *slot = None;
            self.update_earliest(node);
        }
    }

    fn update_earliest(&mut self, changed: usize) {
        let current = self.earliest.and_then(|n| self.pending[n]);
        match (self.pending[changed], current) {
            (Some(key), Some(first)) if key < first => self.earliest = Some(changed),
            (Some(_), None) => self.earliest = Some(changed),
            _ if self.earliest == Some(changed) || current.is_none() => {
                self.earliest = (0..self.pending.len())
                    .filter_map(|n| Some((self.pending[n]?, n)))
                    .min()
                    .map(|(_, n)| n);
            }
            _ => {}
        }
    }

    /// Forgets the superseded timers ordered before `key` and returns how
    /// many (the dead entries the old queue would have popped by then).
    /// Prunes only when the list has doubled, unless `force`.
    pub(crate) fn count_passed(&mut self, key: Key, force: bool) -> u64 {
        if !force && self.superseded.len() < self.prune_at {
            return 0;
        }
        let before = self.superseded.len();
        self.superseded.retain(|&k| k >= key);
        self.prune_at = (2 * self.superseded.len()).max(MIN_PRUNE);
        (before - self.superseded.len()) as u64
    }

    /// Counts and forgets the superseded timers at or before `limit`;
    /// returns their number, the latest of their times, and whether any
    /// later one remains.
    pub(crate) fn count_until(&mut self, limit: Time) -> (u64, Option<Time>, bool) {
        let before = self.superseded.len();
        let mut latest = None;
        self.superseded.retain(|&(at, _)| {
            if at <= limit {
                latest = latest.max(Some(at));
            }
            at > limit
        });
        let counted = (before - self.superseded.len()) as u64;
        (counted, latest, !self.superseded.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ms: u64, seq: u64) -> Key {
        (Time::from_millis(ms), seq)
    }

    #[test]
    fn the_earliest_follows_every_change() {
        let mut timers = Timers::default();
        timers.set(NodeId(0), Some(key(10, 0)));
        timers.set(NodeId(2), Some(key(5, 1)));
        assert_eq!(timers.peek(), Some((key(5, 1), NodeId(2))));
        timers.set(NodeId(2), Some(key(20, 2)));
        assert_eq!(timers.peek(), Some((key(10, 0), NodeId(0))));
        timers.fire(NodeId(0));
        assert_eq!(timers.peek(), Some((key(20, 2), NodeId(2))));
        timers.set(NodeId(2), None);
        assert_eq!(timers.peek(), None);
    }

    #[test]
    fn superseded_timers_are_counted_once_passed() {
        let mut timers = Timers::default();
        timers.set(NodeId(0), Some(key(10, 0)));
        timers.set(NodeId(0), Some(key(30, 1))); // supersedes (10, 0)
        timers.set(NodeId(0), Some(key(5, 2))); // supersedes (30, 1)
        timers.fire(NodeId(0));
        assert_eq!(timers.count_passed(key(10, 0), true), 0);
        assert_eq!(timers.count_passed(key(10, 5), true), 1);
        assert_eq!(timers.count_until(Time::from_millis(20)), (0, None, true));
        assert_eq!(
            timers.count_until(Time::from_millis(30)),
            (1, Some(Time::from_millis(30)), false)
        );
    }
}
