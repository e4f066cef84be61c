//! The power sums a [`crate::Quack`] carries: inline up to [`INLINE`] of
//! them (every threshold Sidekick configures), on the heap beyond, so that
//! taking, parsing or subtracting a small quACK allocates nothing.

use core::ops::{Deref, DerefMut};

/// Power sums kept without a heap allocation.
pub(crate) const INLINE: usize = 16;

/// A vector of field elements with inline storage for [`INLINE`].
#[derive(Clone)]
pub(crate) enum Sums {
    /// `len <= INLINE` elements in place; those past `len` are zero.
    Inline { len: u8, values: [u64; INLINE] },
    /// More than fit in place (or once did).
    Heap(Vec<u64>),
}

impl Sums {
    /// No elements.
    pub(crate) const fn new() -> Sums {
        Sums::Inline {
            len: 0,
            values: [0; INLINE],
        }
    }

    /// `len` zeros.
    #[inline]
    pub(crate) fn zeros(len: usize) -> Sums {
        if len <= INLINE {
            Sums::Inline {
                len: len as u8,
                values: [0; INLINE],
            }
        } else {
            Sums::Heap(vec![0; len])
        }
    }

    /// Resizes to `len` elements, all zero.
    pub(crate) fn reset_zeros(&mut self, len: usize) {
        match self {
            Sums::Inline { len: l, values } if len <= INLINE => {
                *values = [0; INLINE];
                *l = len as u8;
            }
            Sums::Heap(v) => {
                v.clear();
                v.resize(len, 0);
            }
            _ => *self = Sums::zeros(len),
        }
    }

    /// Keeps the first `len` elements.
    pub(crate) fn truncate(&mut self, len: usize) {
        match self {
            Sums::Inline { len: l, values } => {
                if len < *l as usize {
                    values[len..].fill(0);
                    *l = len as u8;
                }
            }
            Sums::Heap(v) => v.truncate(len),
        }
    }
}

impl Default for Sums {
    fn default() -> Sums {
        Sums::new()
    }
}

impl Deref for Sums {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        match self {
            Sums::Inline { len, values } => &values[..*len as usize],
            Sums::Heap(v) => v,
        }
    }
}

impl DerefMut for Sums {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Sums::Inline { len, values } => &mut values[..*len as usize],
            Sums::Heap(v) => v,
        }
    }
}

impl PartialEq for Sums {
    fn eq(&self, other: &Sums) -> bool {
        **self == **other
    }
}

impl Eq for Sums {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap_behave_alike() {
        for len in [0, 1, INLINE, INLINE + 1, 40] {
            let mut s = Sums::zeros(len);
            assert_eq!(s.len(), len);
            s.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = i as u64 + 1);
            s.truncate(len / 2);
            assert_eq!(*s, (1..=(len / 2) as u64).collect::<Vec<_>>()[..]);
            s.reset_zeros(3);
            assert_eq!(*s, [0, 0, 0]);
            assert!(s == Sums::zeros(3));
        }
    }
}
