//! The event queue: a priority queue ordered by time, then by insertion.

use crate::Time;
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

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
///
/// Events pushed into a *lane* ([`EventQueue::push_in_lane`]) whose times
/// never decrease (a link's arrivals: FIFO, one propagation delay) wait in
/// that lane's FIFO, and only the lane's earliest event is in the heap. A
/// link carrying a few BDPs keeps thousands of datagrams pending; with
/// lanes the heap holds one entry per busy link instead of one per
/// datagram. The order is unchanged: every event keeps its sequence number,
/// a lane is sorted by (time, sequence number), and the heap holds each
/// lane's first, so the earliest in the heap is the earliest of all. An
/// event earlier than its lane's last goes into the heap like any other.
#[derive(Debug)]
pub struct EventQueue<E> {
    /// Min-heap on (time, sequence number); the sequence number is unique,
    /// so the third field (a slot, or [`LANE`] | a lane) never decides the
    /// order.
    heap: BinaryHeap<Reverse<(Time, u64, usize)>>,
    /// The pending events, by slot; `None` for a free slot.
    slots: Vec<Option<E>>,
    /// Free slots, reused last-freed first.
    free: Vec<usize>,
    /// Each lane's pending events, earliest first; a non-empty lane's
    /// first is in the heap.
    lanes: Vec<VecDeque<(Time, u64, E)>>,
    next_seq: u64,
    len: usize,
}

/// Marks a heap entry as a lane's first event.
const LANE: usize = 1 << (usize::BITS - 1);

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            lanes: Vec::new(),
            next_seq: 0,
            len: 0,
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
        self.len += 1;
        self.push_slot(at, seq, event);
    }

    /// Schedules `event` at `at` in lane `lane` (a small number, e.g. a
    /// link's index). The order of events is exactly that of
    /// [`EventQueue::push`]; a lane only makes the queue cheaper when the
    /// times pushed into it do not decrease.
    pub fn push_in_lane(&mut self, lane: usize, at: Time, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.len += 1;
        if lane >= LANE {
            return self.push_slot(at, seq, event);
        }
        if lane >= self.lanes.len() {
            self.lanes.resize_with(lane + 1, VecDeque::new);
        }
        let fifo = &mut self.lanes[lane];
        match fifo.back() {
            None => {
                fifo.push_back((at, seq, event));
                self.heap.push(Reverse((at, seq, LANE | lane)));
            }
            Some(&(last, _, _)) if at >= last => fifo.push_back((at, seq, event)),
            Some(_) => self.push_slot(at, seq, event),
        }
    }

    fn push_slot(&mut self, at: Time, seq: u64, event: E) {
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
        let mut top = self.heap.peek_mut()?;
        let Reverse((at, _, key)) = *top;
        let event = if key & LANE != 0 {
            let fifo = self.lanes.get_mut(key & !LANE)?;
            let (_, _, event) = fifo.pop_front()?;
            match fifo.front() {
                // The lane's next replaces its first: one sift, not two.
                Some(&(next, seq, _)) => *top = Reverse((next, seq, key)),
                None => {
                    PeekMut::pop(top);
                }
            }
            event
        } else {
            PeekMut::pop(top);
            let event = self.slots[key].take()?;
            self.free.push(key);
            event
        };
        self.len -= 1;
        Some((at, event))
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Time> {
        self.peek_key().map(|(at, _)| at)
    }

    /// The time and sequence number of the earliest event.
    pub fn peek_key(&self) -> Option<(Time, u64)> {
        self.heap.peek().map(|Reverse((at, seq, _))| (*at, *seq))
    }

    /// Takes the next sequence number without pushing an event, for
    /// something ordered beside the queue (the simulator's timers): it
    /// comes after everything pushed before and before everything pushed
    /// after.
    pub fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq - 1
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
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

        /// Lanes change nothing in the order: the same pushes, some into
        /// lanes (in and out of each lane's order), pop in the same order
        /// as with plain pushes, also when pops and pushes interleave.
        #[test]
        fn lanes_keep_the_order(
            ops in proptest::collection::vec((0u64..40, 0usize..4, any::<bool>()), 0..300)
        ) {
            let mut plain = EventQueue::new();
            let mut laned = EventQueue::new();
            let mut got = (Vec::new(), Vec::new());
            for (i, &(t, lane, pop)) in ops.iter().enumerate() {
                if pop {
                    got.0.push(plain.pop().map(|(t, e)| (t.as_nanos(), e)));
                    got.1.push(laned.pop().map(|(t, e)| (t.as_nanos(), e)));
                    continue;
                }
                plain.push(Time::from_nanos(t), i);
                if lane == 3 {
                    laned.push(Time::from_nanos(t), i);
                } else {
                    laned.push_in_lane(lane, Time::from_nanos(t), i);
                }
                prop_assert_eq!(plain.len(), laned.len());
                prop_assert_eq!(plain.peek_time(), laned.peek_time());
            }
            got.0.extend(std::iter::from_fn(|| plain.pop()).map(|(t, e)| Some((t.as_nanos(), e))));
            got.1.extend(std::iter::from_fn(|| laned.pop()).map(|(t, e)| Some((t.as_nanos(), e))));
            prop_assert_eq!(got.0, got.1);
            prop_assert!(laned.is_empty());
        }
    }
}
