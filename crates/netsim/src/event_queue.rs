//! The event queue: a priority queue ordered by time, then by insertion.

use crate::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A queue of events ordered by time; events at the same time come out in
/// the order they were pushed (first in, first out).
///
/// The tie-break is an insertion sequence number, so the order never depends
/// on the events' contents, on memory addresses or on hashing.
///
/// The heap holds only small keys (time, sequence number, slot); the events
/// themselves wait in a slab of slots. A simulator event carries a whole
/// datagram (about a hundred bytes), and a binary heap moves its entries
/// some log₂(n) times per push and pop, so keeping them out of the heap
/// makes both cheaper. Freed slots are reused, so a long run allocates no
/// more than its largest backlog of pending events.
#[derive(Debug)]
pub struct EventQueue<E> {
    /// Min-heap on (time, sequence number); the sequence number is unique,
    /// so the slot index never decides the order.
    heap: BinaryHeap<Reverse<(Time, u64, usize)>>,
    /// The pending events, by slot; `None` for a free slot.
    slots: Vec<Option<E>>,
    /// Free slots, reused last-freed first.
    free: Vec<usize>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Time, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(event);
                slot
            }
            None => {
                self.slots.push(Some(event));
                self.slots.len() - 1
            }
        };
        self.heap.push(Reverse((at, seq, slot)));
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let Reverse((at, _, slot)) = self.heap.pop()?;
        let event = self.slots[slot].take()?;
        self.free.push(slot);
        Some((at, event))
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ties_are_fifo() {
        let mut q = EventQueue::new();
        q.push(Time::from_nanos(5), "b");
        q.push(Time::from_nanos(1), "a");
        q.push(Time::from_nanos(5), "c");
        q.push(Time::from_nanos(5), "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }

    proptest! {
        #[test]
        fn pops_sorted_by_time_then_insertion(times in proptest::collection::vec(0u64..20, 0..200)) {
            let mut q = EventQueue::new();
            for (i, &t) in times.iter().enumerate() {
                q.push(Time::from_nanos(t), i);
            }
            let mut expected: Vec<(u64, usize)> = times.iter().copied().zip(0..).collect();
            expected.sort();
            let got: Vec<(u64, usize)> =
                std::iter::from_fn(|| q.pop()).map(|(t, i)| (t.as_nanos(), i)).collect();
            prop_assert_eq!(got, expected);
        }
    }
}
