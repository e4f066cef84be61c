//! pepkit: a map from packet numbers to values, in place of the
//! `sorted-index-buffer` crate's `SortedIndexBuffer` (same methods, same
//! results: it behaves like a `BTreeMap<u64, T>`).
//!
//! That crate keeps its keys in a power-of-two buffer aligned to a page of
//! the key range; when the range of live packet numbers crosses a power of
//! two (a window of thousands of packets that grows and shrinks by a few
//! around 2^k) it grows or shrinks the buffer by swapping every live entry
//! into place, and each time its first page moves on it rotates the whole
//! buffer. Here the entries sit in a ring buffer from the smallest live key
//! on: inserting after the last key pushes at the back, removing the first
//! pops at the front, nothing else moves.

use alloc::collections::VecDeque;
use core::ops::{Bound, RangeBounds};

/// A map from `u64` keys that are mostly contiguous (packet numbers) to
/// values, in key order.
#[derive(Debug, Clone)]
pub(crate) struct SortedIndexBuffer<T> {
    /// `data[i]` holds key `base + i`. When the map is not empty, the first
    /// and the last entry are occupied; when it is empty, `data` is too.
    data: VecDeque<Option<T>>,
    base: u64,
}

impl<T> Default for SortedIndexBuffer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> SortedIndexBuffer<T> {
    /// An empty map.
    pub(crate) fn new() -> Self {
        Self {
            data: VecDeque::new(),
            base: 0,
        }
    }

    /// Whether the map holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One past the largest key the buffer covers.
    fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    /// The value at `index`.
    pub(crate) fn get(&self, index: u64) -> Option<&T> {
        if index < self.base {
            return None;
        }
        let offset = usize::try_from(index - self.base).ok()?;
        self.data.get(offset)?.as_ref()
    }

    /// Sets the value at `index`, replacing any.
    pub(crate) fn insert(&mut self, index: u64, value: T) {
        if self.data.is_empty() {
            self.base = index;
            self.data.push_back(Some(value));
        } else if index >= self.end() {
            let gap = (index - self.end()) as usize;
            self.data.extend(core::iter::repeat_with(|| None).take(gap));
            self.data.push_back(Some(value));
        } else if index < self.base {
            let gap = (self.base - index - 1) as usize;
            for _ in 0..gap {
                self.data.push_front(None);
            }
            self.data.push_front(Some(value));
            self.base = index;
        } else {
            self.data[(index - self.base) as usize] = Some(value);
        }
    }

    /// Removes and returns the value at `index`.
    pub(crate) fn remove(&mut self, index: u64) -> Option<T> {
        if index < self.base || index >= self.end() {
            return None;
        }
        let value = self.data[(index - self.base) as usize].take()?;
        while let Some(None) = self.data.front() {
            self.data.pop_front();
            self.base += 1;
        }
        while let Some(None) = self.data.back() {
            self.data.pop_back();
        }
        if self.data.is_empty() {
            self.base = 0;
        }
        Some(value)
    }

    /// The positions in `data` of the keys in `range`, clipped to the
    /// buffer (an empty range if they do not meet).
    fn positions<R: RangeBounds<u64>>(&self, range: R) -> (usize, usize) {
        let start = match range.start_bound() {
            Bound::Included(&n) => n.max(self.base),
            Bound::Excluded(&n) => n.saturating_add(1).max(self.base),
            Bound::Unbounded => self.base,
        };
        let end = match range.end_bound() {
            Bound::Included(&n) => n.saturating_add(1).min(self.end()),
            Bound::Excluded(&n) => n.min(self.end()),
            Bound::Unbounded => self.end(),
        };
        if start >= end {
            return (0, 0);
        }
        ((start - self.base) as usize, (end - self.base) as usize)
    }

    /// The keys in `range`, in ascending order.
    pub(crate) fn keys_range<R: RangeBounds<u64>>(
        &self,
        range: R,
    ) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.iter_range(range).map(|(key, _)| key)
    }

    /// The (key, value) pairs with keys in `range`, in ascending order.
    pub(crate) fn iter_range<R: RangeBounds<u64>>(
        &self,
        range: R,
    ) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        let (from, to) = self.positions(range);
        let first = self.base + from as u64;
        self.data
            .range(from..to)
            .enumerate()
            .filter_map(move |(i, slot)| slot.as_ref().map(|v| (first + i as u64, v)))
    }

    /// All (key, value) pairs, in ascending order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        self.iter_range(..)
    }

    /// All values, in ascending order of their keys.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.data.iter().filter_map(Option::as_ref)
    }

    /// All values, in ascending order of their keys.
    pub(crate) fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> + '_ {
        self.data.iter_mut().filter_map(Option::as_mut)
    }

    /// The (key, value) pairs, in ascending order.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn into_iter(self) -> impl DoubleEndedIterator<Item = (u64, T)> {
        let base = self.base;
        self.data
            .into_iter()
            .enumerate()
            .filter_map(move |(i, slot)| slot.map(|v| (base + i as u64, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::SortedIndexBuffer;
    use alloc::{collections::BTreeMap, vec::Vec};
    use core::ops::Bound;

    /// A deterministic sequence of operations, checked against a BTreeMap
    /// after each one: mostly in-order inserts and removals near the front
    /// (a window of packets), some anywhere.
    #[test]
    fn behaves_like_a_btreemap() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut map = BTreeMap::new();
        let mut buf = SortedIndexBuffer::new();
        let mut sent = 100u64;
        for step in 0..200_000u64 {
            match next(10) {
                0..=3 => {
                    map.insert(sent, step);
                    buf.insert(sent, step);
                    sent += 1 + next(3) / 2;
                }
                4..=6 => {
                    let first = map.keys().next().copied().unwrap_or(0);
                    let key = first + next(8);
                    assert_eq!(buf.remove(key), map.remove(&key));
                }
                7 => {
                    let key = next(sent + 20);
                    map.insert(key, step);
                    buf.insert(key, step);
                }
                8 => {
                    let key = next(sent + 20);
                    assert_eq!(buf.remove(key), map.remove(&key));
                }
                _ => {
                    let (a, b) = (next(sent + 20), next(sent + 20));
                    let range = (Bound::Excluded(a.min(b)), Bound::Included(a.max(b)));
                    let got: Vec<_> = buf.iter_range(range).map(|(k, v)| (k, *v)).collect();
                    let want: Vec<_> = map.range(range).map(|(k, v)| (*k, *v)).collect();
                    assert_eq!(got, want);
                    let keys: Vec<_> = buf.keys_range(a..).rev().collect();
                    let want: Vec<_> = map.range(a..).rev().map(|(k, _)| *k).collect();
                    assert_eq!(keys, want);
                }
            }
            assert_eq!(buf.is_empty(), map.is_empty());
            let key = next(sent + 20);
            assert_eq!(buf.get(key), map.get(&key));
            if step % 1000 == 0 {
                let got: Vec<_> = buf.iter().map(|(k, v)| (k, *v)).collect();
                let want: Vec<_> = map.iter().map(|(k, v)| (*k, *v)).collect();
                assert_eq!(got, want);
                assert!(buf.values().copied().eq(map.values().copied()));
                for v in buf.values_mut() {
                    *v += 1;
                }
                for v in map.values_mut() {
                    *v += 1;
                }
            }
        }
        let got: Vec<_> = buf.clone().into_iter().collect();
        let want: Vec<_> = map.into_iter().collect();
        assert_eq!(got, want);
    }
}
