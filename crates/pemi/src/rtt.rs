//! PEMI's round-trip estimate to one end (§4.4): seeded by the handshake,
//! smoothed over the samples of matched sent/reply pairs as RFC 6298 and
//! RFC 9002 smooth theirs (gain 1/8), with a windowed minimum for the
//! congestion controller (Copa's RTT_min), and reset by a calibration
//! sample that disagrees by more than Δmargin.

use netsim::Time;
use std::time::Duration;

/// A windowed minimum of samples (Kathleen Nichols' algorithm, as BBR's
/// `minmax`: the best, second and third best of the window, O(1)).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WindowedMin {
    best: [(Time, Duration); 3],
    any: bool,
}

impl WindowedMin {
    /// Forgets everything and starts from `sample`.
    pub(crate) fn reset(&mut self, now: Time, sample: Duration) {
        self.best = [(now, sample); 3];
        self.any = true;
    }

    /// Adds `sample` at `now`; samples older than `window` age out.
    pub(crate) fn update(&mut self, now: Time, sample: Duration, window: Duration) {
        if !self.any || sample <= self.best[0].1 || now - self.best[2].0 > window {
            self.reset(now, sample);
            return;
        }
        if sample <= self.best[1].1 {
            self.best[1] = (now, sample);
            self.best[2] = (now, sample);
        } else if sample <= self.best[2].1 {
            self.best[2] = (now, sample);
        }
        // Age out the best ones that left the window.
        let quarter = window / 4;
        if now - self.best[0].0 > window {
            self.best[0] = self.best[1];
            self.best[1] = self.best[2];
            self.best[2] = (now, sample);
            if now - self.best[0].0 > window {
                self.best[0] = self.best[1];
                self.best[1] = self.best[2];
            }
        } else if self.best[1].0 == self.best[0].0 && now - self.best[1].0 > quarter {
            self.best[1] = (now, sample);
            self.best[2] = (now, sample);
        } else if self.best[2].0 == self.best[1].0 && now - self.best[2].0 > window / 2 {
            self.best[2] = (now, sample);
        }
    }

    /// The minimum, if there was a sample.
    pub(crate) fn get(&self) -> Option<Duration> {
        self.any.then_some(self.best[0].1)
    }
}

/// The round-trip estimate between PEMI and one end.
#[derive(Clone, Copy, Debug, Default)]
pub struct RttEstimate {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Option<Duration>,
    min: WindowedMin,
    samples: u64,
}

impl RttEstimate {
    /// The handshake's measurement (§4.4.1), or a calibration reset
    /// (§4.4.3): the estimate starts over from `sample`.
    pub(crate) fn reset(&mut self, now: Time, sample: Duration) {
        self.srtt = Some(sample);
        self.rttvar = sample / 2;
        self.latest = Some(sample);
        self.min.reset(now, sample);
    }

    /// A sample from a matched sent/reply pair.
    pub(crate) fn sample(&mut self, now: Time, sample: Duration, min_window: Duration) {
        self.samples += 1;
        self.latest = Some(sample);
        self.min.update(now, sample, min_window);
        match self.srtt {
            None => self.reset(now, sample),
            Some(srtt) => {
                let deviation = srtt.abs_diff(sample);
                self.rttvar = (self.rttvar * 3 + deviation) / 4;
                self.srtt = Some((srtt * 7 + sample) / 8);
            }
        }
    }

    /// The smoothed RTT, once there is one.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The mean deviation of the samples (RFC 6298's RTTVAR).
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// The windowed minimum.
    pub fn min(&self) -> Option<Duration> {
        self.min.get()
    }

    /// Samples taken from matched pairs.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_estimate_smooths_with_gain_one_eighth() {
        let mut rtt = RttEstimate::default();
        assert_eq!(rtt.srtt(), None);
        rtt.reset(Time::ZERO, ms(8));
        rtt.sample(Time::from_millis(1), ms(16), ms(10_000));
        assert_eq!(rtt.srtt(), Some(ms(9)));
        assert_eq!(rtt.min(), Some(ms(8)));
        assert_eq!(rtt.latest(), Some(ms(16)));
        rtt.reset(Time::from_millis(2), ms(40));
        assert_eq!((rtt.srtt(), rtt.min()), (Some(ms(40)), Some(ms(40))));
    }

    #[test]
    fn the_minimum_ages_out_of_its_window() {
        let mut min = WindowedMin::default();
        let window = ms(100);
        min.update(Time::ZERO, ms(5), window);
        for t in 1..=90 {
            min.update(Time::from_millis(t), ms(10 + t % 3), window);
        }
        assert_eq!(min.get(), Some(ms(5)));
        for t in 91..=300 {
            min.update(Time::from_millis(t), ms(10 + t % 3), window);
        }
        assert_eq!(min.get(), Some(ms(10)));
        min.update(Time::from_millis(301), ms(2), window);
        assert_eq!(min.get(), Some(ms(2)));
    }
}
