//! Proteus's noise tolerance (§5): which RTT samples to believe, and when
//! an MI's RTT gradient and deviation are noise to be ignored.
//!
//! * **ACK-interval filter** (per ACK): when the ratio of two consecutive
//!   ACK intervals exceeds 50, RTT samples are ignored until one is below
//!   "the exponentially weighted moving RTT average" (α = 1/8, as a
//!   connection's smoothed RTT). That average follows every sample,
//!   ignored ones included: the paper ignores samples for the utility, not
//!   for the average, and PCC-Uspace compares with the connection's
//!   average RTT. An average of admitted samples only would freeze while
//!   the filter rejects, and a queue that keeps the RTT above it would
//!   keep the filter on for good (it did on the cellular traces).
//! * **Regression-error tolerance** (per MI): if |gradient| is below the
//!   regression error (RMS residual over the MI's duration), the gradient
//!   and the deviation are noise.
//! * **Trending tolerance** (over MIs): the least-squares slope of the last
//!   k = 6 MIs' mean RTTs (the trending gradient) and the standard
//!   deviation of their RTT deviations (the trending deviation), each with
//!   an EWMA average and mean deviation as Linux keeps srtt and mdev. A
//!   trending gradient within G1 = 2 mean deviations of its average is
//!   noise; then so is a trending deviation less than G2 = 4 mean
//!   deviations above its average (the paper's pseudocode). A trend
//!   outside those bands cannot be ignored, whatever the per-MI error
//!   said (the reason trending exists: "the above per-MI error tolerance
//!   may hide a slow but persistent RTT increase").
//! * **Majority rule** lives in the rate control (three probing pairs).
//!
//! How the two MI-level mechanisms combine (the paper leaves it open; this
//! is PCC-Uspace's order): a value is zeroed when the per-MI test says
//! noise and the trend does not say signal. The trend only ever vetoes
//! the per-MI test's "noise" (PCC-Uspace's trending test can only mark a
//! value intolerable), so without the per-MI test nothing is ignored,
//! and without the trend the per-MI test decides alone.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Which noise-tolerance mechanisms are on (all of them in Proteus; none
/// in Vivace, which has a fixed gradient threshold instead). A scenario
/// turns single ones off: `noise = { trending = false }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct NoiseTolerance {
    /// The ACK-interval filter.
    pub ack_filter: bool,
    /// The per-MI regression-error tolerance.
    pub regression: bool,
    /// The trending tolerance.
    pub trending: bool,
    /// The majority rule over three probing pairs (else two pairs that
    /// must agree, as Vivace).
    pub majority: bool,
}

impl NoiseTolerance {
    /// Every mechanism on (Proteus).
    pub const ALL: NoiseTolerance = NoiseTolerance {
        ack_filter: true,
        regression: true,
        trending: true,
        majority: true,
    };
    /// None (Vivace).
    pub const NONE: NoiseTolerance = NoiseTolerance {
        ack_filter: false,
        regression: false,
        trending: false,
        majority: false,
    };
}

impl Default for NoiseTolerance {
    fn default() -> NoiseTolerance {
        NoiseTolerance::ALL
    }
}

/// The ratio of consecutive ACK intervals that starts filtering.
pub const ACK_INTERVAL_RATIO: f64 = 50.0;
/// ACK intervals shorter than this count as this long (two ACKs in one
/// instant would give an infinite ratio).
const MIN_ACK_INTERVAL: Duration = Duration::from_micros(1);

/// The per-ACK RTT sample filter.
#[derive(Clone, Debug, Default)]
pub struct AckFilter {
    last_ack: Option<Instant>,
    last_interval: Option<Duration>,
    /// Filtering until a sample falls below the average.
    filtering: bool,
    /// EWMA of every sample, admitted or not, seconds: the moving RTT
    /// average of §5. An average of admitted samples only would stop
    /// moving while the filter rejects, and a queue that stays above it
    /// would keep the filter on for good.
    average_s: Option<f64>,
    /// Samples rejected so far.
    rejected: u64,
}

impl AckFilter {
    /// An ACK (a batch of acknowledged packets) arrived at `now`.
    pub fn on_ack_arrival(&mut self, now: Instant) {
        if self.last_ack == Some(now) {
            return;
        }
        if let Some(last) = self.last_ack {
            let interval = (now - last).max(MIN_ACK_INTERVAL);
            if let Some(previous) = self.last_interval {
                let (a, b) = (interval.as_secs_f64(), previous.as_secs_f64());
                if (a / b).max(b / a) > ACK_INTERVAL_RATIO {
                    self.filtering = true;
                }
            }
            self.last_interval = Some(interval);
        }
        self.last_ack = Some(now);
    }

    /// Whether the RTT sample `rtt` of the current ACK is admitted. Every
    /// sample moves the average first; while filtering, a sample below the
    /// average before it moved (equivalently, after) ends the filtering and
    /// is admitted.
    pub fn admit(&mut self, rtt: Duration) -> bool {
        let sample = rtt.as_secs_f64();
        let previous = self.average_s;
        self.average_s = Some(match previous {
            None => sample,
            Some(average) => 0.875 * average + 0.125 * sample,
        });
        if self.filtering {
            if previous.is_some_and(|average| sample < average) {
                self.filtering = false;
            } else {
                self.rejected += 1;
                return false;
            }
        }
        true
    }

    /// Samples rejected so far.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }
}

/// Whether an MI's gradient is within its regression error.
pub fn within_regression_error(gradient: f64, regression_error: f64) -> bool {
    gradient.abs() < regression_error
}

/// The MIs the trending metrics look back over (k).
pub const TREND_MIS: usize = 6;
/// Gain G1 on the trending gradient's deviation.
pub const G1: f64 = 2.0;
/// Gain G2 on the trending deviation's deviation.
pub const G2: f64 = 4.0;

/// An EWMA average and mean deviation, as Linux keeps srtt and mdev
/// (gains 1/8 and 1/4).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Smoothed {
    average: f64,
    deviation: f64,
}

impl Smoothed {
    fn first(x: f64) -> Smoothed {
        Smoothed {
            average: x,
            deviation: x.abs() / 2.0,
        }
    }

    fn update(&mut self, x: f64) {
        self.deviation = 0.75 * self.deviation + 0.25 * (x - self.average).abs();
        self.average = 0.875 * self.average + 0.125 * x;
    }
}

/// What the trend says about the newest MI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trend {
    /// The trending gradient is more than G1 deviations from its average
    /// (a value exactly at the bound, or a trend that has not moved at all,
    /// is noise).
    pub gradient_significant: bool,
    /// The trending deviation is more than G2 deviations above its average.
    pub deviation_significant: bool,
}

/// The trending tolerance's history.
#[derive(Clone, Debug, Default)]
pub struct Trending {
    /// (mean RTT, RTT deviation) of the last k MIs, seconds.
    history: VecDeque<(f64, f64)>,
    gradient: Option<Smoothed>,
    deviation: Option<Smoothed>,
}

impl Trending {
    /// Adds an MI's mean RTT and deviation; once k MIs are known, what the
    /// trend says (compared with the averages before this MI updates
    /// them).
    pub fn observe(&mut self, mean_rtt_s: f64, deviation_s: f64) -> Option<Trend> {
        if self.history.len() == TREND_MIS {
            self.history.pop_front();
        }
        self.history.push_back((mean_rtt_s, deviation_s));
        if self.history.len() < TREND_MIS {
            return None;
        }
        let (gradient, deviation) = self.metrics();
        let trend = match (self.gradient, self.deviation) {
            (Some(g), Some(d)) => Trend {
                gradient_significant: (gradient - g.average).abs() > G1 * g.deviation,
                deviation_significant: deviation - d.average > G2 * d.deviation,
            },
            _ => Trend {
                gradient_significant: true,
                deviation_significant: true,
            },
        };
        match &mut self.gradient {
            Some(g) => g.update(gradient),
            None => self.gradient = Some(Smoothed::first(gradient)),
        }
        match &mut self.deviation {
            Some(d) => d.update(deviation),
            None => self.deviation = Some(Smoothed::first(deviation)),
        }
        Some(trend)
    }

    /// The trending gradient (slope of the mean RTTs against their index,
    /// seconds per MI) and the trending deviation (the population standard
    /// deviation of the RTT deviations).
    pub fn metrics(&self) -> (f64, f64) {
        let k = self.history.len() as f64;
        if k < 2.0 {
            return (0.0, 0.0);
        }
        let mean_j = (k + 1.0) / 2.0;
        let mean_rtt = self.history.iter().map(|h| h.0).sum::<f64>() / k;
        let mean_dev = self.history.iter().map(|h| h.1).sum::<f64>() / k;
        let (mut sxy, mut sxx, mut sdd) = (0.0, 0.0, 0.0);
        for (index, (rtt, dev)) in self.history.iter().enumerate() {
            let j = index as f64 + 1.0 - mean_j;
            sxy += j * (rtt - mean_rtt);
            sxx += j * j;
            sdd += (dev - mean_dev) * (dev - mean_dev);
        }
        (sxy / sxx, (sdd / k).sqrt())
    }
}

/// Decides whether an MI's gradient and deviation are noise, from the
/// per-MI test (`Some(noise)` when that mechanism is on) and the trend
/// (`Some` when trending is on and has its history).
pub fn ignore(per_mi: Option<bool>, trend: Option<Trend>) -> (bool, bool) {
    let gradient = match (per_mi, trend) {
        (Some(noise), Some(t)) => noise && !t.gradient_significant,
        (Some(noise), None) => noise,
        (None, _) => false,
    };
    let deviation = match (per_mi, trend) {
        (Some(noise), Some(t)) => gradient && noise && !t.deviation_significant,
        (Some(noise), None) => noise,
        (None, _) => false,
    };
    (gradient, deviation)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter after five ACKs 0.5 ms apart, each with a 30 ms RTT, and
    /// the last ACK's time.
    fn settled_filter() -> (AckFilter, Instant) {
        let mut filter = AckFilter::default();
        let mut t = Instant::now();
        for _ in 0..5 {
            t += Duration::from_micros(500);
            filter.on_ack_arrival(t);
            assert!(filter.admit(Duration::from_millis(30)));
        }
        (filter, t)
    }

    #[test]
    fn a_burst_of_acks_filters_samples_until_one_is_below_the_average() {
        let (mut filter, mut t) = settled_filter();
        let ms = Duration::from_millis;
        // An ACK 40 ms later: 80 times the last interval.
        t += ms(40);
        filter.on_ack_arrival(t);
        assert!(!filter.admit(ms(70)));
        t += Duration::from_micros(500);
        filter.on_ack_arrival(t);
        // The average followed the rejected 70 ms sample: 35 ms.
        assert!(!filter.admit(ms(36)), "above the 35 ms average");
        assert!(filter.admit(ms(34)), "below it: admitted, filter off");
        assert!(filter.admit(ms(35)));
        assert_eq!(filter.rejected(), 2);
    }

    #[test]
    fn a_standing_rise_in_rtt_ends_the_filtering() {
        let (mut filter, mut t) = settled_filter();
        let ms = Duration::from_millis;
        t += ms(40);
        filter.on_ack_arrival(t);
        // A queue builds and stays: every sample from now on is 80 ms, and
        // the average rises towards it with the rejected samples.
        assert!(
            (0..100).all(|_| !filter.admit(ms(80))),
            "none below an average rising to it"
        );
        // Jitter around the standing queue: the first sample below the
        // average, which has caught up, is admitted.
        assert!(filter.admit(ms(79)));
        assert!(filter.admit(ms(85)));
    }

    #[test]
    fn trending_metrics_by_hand() {
        let mut trending = Trending::default();
        // Mean RTTs 30, 31, …, 35 ms: slope 1 ms per MI. Deviations
        // alternate 1 and 3 ms: their standard deviation is 1 ms.
        let mut last = None;
        for i in 0..6 {
            let dev = if i % 2 == 0 { 0.001 } else { 0.003 };
            last = trending.observe(0.030 + 0.001 * f64::from(i), dev);
        }
        let (gradient, deviation) = trending.metrics();
        assert!((gradient - 0.001).abs() < 1e-12);
        assert!((deviation - 0.001).abs() < 1e-12);
        assert!(last.is_some_and(|t| t.gradient_significant));
    }

    #[test]
    fn a_steady_trend_is_noise_and_a_jump_is_not() {
        let mut trending = Trending::default();
        let mut last = None;
        for i in 0..40 {
            // Tiny wobble around 30 ms.
            let wobble = if i % 2 == 0 { 1e-5 } else { -1e-5 };
            last = trending.observe(0.030 + wobble, 0.0002);
        }
        let steady = last.unwrap();
        assert!(!steady.gradient_significant && !steady.deviation_significant);
        let jump = trending.observe(0.040, 0.004).unwrap();
        assert!(jump.gradient_significant && jump.deviation_significant);
    }

    #[test]
    fn the_mechanisms_combine() {
        let calm = Trend {
            gradient_significant: false,
            deviation_significant: false,
        };
        let rising = Trend {
            gradient_significant: true,
            deviation_significant: false,
        };
        assert_eq!(ignore(Some(true), Some(calm)), (true, true));
        assert_eq!(ignore(Some(true), Some(rising)), (false, false));
        assert_eq!(ignore(Some(false), Some(calm)), (false, false));
        assert_eq!(ignore(None, Some(calm)), (false, false));
        assert_eq!(ignore(Some(true), None), (true, true));
        assert_eq!(ignore(None, None), (false, false));
    }
}
