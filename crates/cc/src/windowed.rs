//! Running minima and maxima over a sliding time window (monotonic
//! deques): the RTT filters of Copa and BBR.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The minimum (or maximum) of the values seen within a window of time.
#[derive(Clone, Debug)]
pub(crate) struct WindowedExtreme<T> {
    /// (time, value), values strictly improving from back to front.
    samples: VecDeque<(Instant, T)>,
    max: bool,
}

impl<T: PartialOrd + Copy> WindowedExtreme<T> {
    /// A running minimum.
    pub(crate) fn min() -> WindowedExtreme<T> {
        WindowedExtreme {
            samples: VecDeque::new(),
            max: false,
        }
    }

    /// A running maximum.
    pub(crate) fn max() -> WindowedExtreme<T> {
        WindowedExtreme {
            samples: VecDeque::new(),
            max: true,
        }
    }

    fn dominates(&self, a: T, b: T) -> bool {
        if self.max { a >= b } else { a <= b }
    }

    /// Adds `value` seen at `now`.
    pub(crate) fn add(&mut self, now: Instant, value: T) {
        while let Some(&(_, last)) = self.samples.back() {
            if self.dominates(value, last) {
                self.samples.pop_back();
            } else {
                break;
            }
        }
        self.samples.push_back((now, value));
    }

    /// The extreme of the values seen since `now − window` (the newest
    /// value is kept even if older).
    pub(crate) fn get(&mut self, now: Instant, window: Duration) -> Option<T> {
        while self.samples.len() > 1
            && self
                .samples
                .front()
                .is_some_and(|&(at, _)| now.saturating_duration_since(at) > window)
        {
            self.samples.pop_front();
        }
        self.samples.front().map(|&(_, value)| value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_and_maximum_over_a_window() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let window = Duration::from_millis(10);
        let mut min = WindowedExtreme::min();
        let mut max = WindowedExtreme::max();
        for (ms, v) in [(0, 5), (3, 7), (6, 4), (9, 8), (14, 6)] {
            min.add(at(ms), v);
            max.add(at(ms), v);
        }
        assert_eq!(min.get(at(14), window), Some(4));
        assert_eq!(max.get(at(14), window), Some(8));
        assert_eq!(min.get(at(17), window), Some(6));
        assert_eq!(max.get(at(20), window), Some(6));
    }
}
