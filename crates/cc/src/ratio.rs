//! r, the near path segment's share of the connection's round trip, and
//! the CUBIC constants PACUBIC derives from it.
//!
//! # How r is estimated
//!
//! PACUBIC uses r as a stand-in for the fraction of the in-flight bytes
//! that are on the near segment (paper §4.3.2, appendix A). The authors
//! configured it by hand (`delay_ratio`, 1/26 in their emulation). Here it
//! is measured: r = (minimum near-segment RTT) / (minimum end-to-end RTT).
//!
//! * The near RTT comes from the sender engine's `NearRtt` samples: the
//!   time from sending the proxy's newest reported packet to receiving the
//!   quACK. Each sample also contains the wait for the proxy's next quACK
//!   (up to one quACK interval), so only the minimum is meaningful: it
//!   approaches the true near RTT whenever a packet goes out just before a
//!   quACK is due, which happens often in a bulk transfer.
//! * The end-to-end RTT is the QUIC RTT estimator's minimum (raw samples,
//!   not adjusted for ACK delay, so it never underestimates).
//!
//! Minimums, because queueing inflates both RTTs, and inflates the far
//! segment's (the bottleneck) more, which would bias r low. Until both are
//! known r is 1: plain CUBIC. The result is clamped to
//! [[`MIN_RATIO`], [`MAX_RATIO`]]: C' = C / r³ grows fast as r shrinks
//! (r = 1/26 gives C' ≈ 7030), and a near RTT measured as nearly zero (a
//! sample taken within one simulator instant) must not make it infinite.
//! A configured value replaces the estimate (to reproduce the paper's
//! r = 1/26).

use crate::cubic::CubicParams;
use std::time::Duration;

/// The smallest r used: C' is then at most 10⁶·C.
pub const MIN_RATIO: f64 = 0.01;

/// The largest r used: the near segment is the whole path (plain CUBIC).
pub const MAX_RATIO: f64 = 1.0;

/// Estimates r from minimum RTTs, or holds a fixed r.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PathRatio {
    fixed: Option<f64>,
    near_min: Option<Duration>,
    e2e_min: Option<Duration>,
}

impl PathRatio {
    /// An estimator; with `fixed`, r is that value (clamped) whatever the
    /// samples say.
    pub fn new(fixed: Option<f64>) -> PathRatio {
        PathRatio {
            fixed: fixed.map(clamp),
            near_min: None,
            e2e_min: None,
        }
    }

    /// A near-segment RTT sample (sender engine `NearRtt`).
    pub fn on_near_rtt(&mut self, rtt: Duration) {
        self.near_min = Some(self.near_min.map_or(rtt, |m| m.min(rtt)));
    }

    /// The end-to-end minimum RTT as the QUIC estimator has it now.
    pub fn on_e2e_min_rtt(&mut self, rtt: Duration) {
        self.e2e_min = Some(self.e2e_min.map_or(rtt, |m| m.min(rtt)));
    }

    /// The minimum near-segment RTT seen.
    pub fn near_min(&self) -> Option<Duration> {
        self.near_min
    }

    /// The minimum end-to-end RTT seen.
    pub fn e2e_min(&self) -> Option<Duration> {
        self.e2e_min
    }

    /// r: the fixed value, or near / end-to-end minimum RTT clamped to
    /// [[`MIN_RATIO`], [`MAX_RATIO`]], or 1 while either is unknown.
    pub fn get(&self) -> f64 {
        if let Some(r) = self.fixed {
            return r;
        }
        match (self.near_min, self.e2e_min) {
            (Some(near), Some(e2e)) if !e2e.is_zero() => {
                clamp(near.as_secs_f64() / e2e.as_secs_f64())
            }
            _ => MAX_RATIO,
        }
    }

    /// PACUBIC's response to a near-segment loss with the current r:
    /// β' = 1 − r(1 − β), C' = C / r³.
    pub fn near_response(&self, base: CubicParams) -> CubicParams {
        near_response(base, self.get())
    }
}

/// β' = 1 − r(1 − β) and C' = C / r³ (paper §4.3.2).
pub(crate) fn near_response(base: CubicParams, r: f64) -> CubicParams {
    CubicParams {
        beta: 1.0 - r * (1.0 - base.beta),
        c: base.c / (r * r * r),
    }
}

fn clamp(r: f64) -> f64 {
    if r.is_nan() {
        MAX_RATIO
    } else {
        r.clamp(MIN_RATIO, MAX_RATIO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_until_both_rtts_are_known() {
        let mut r = PathRatio::new(None);
        assert_eq!(r.get(), 1.0);
        r.on_near_rtt(ms(2));
        assert_eq!(r.get(), 1.0);
        r.on_e2e_min_rtt(ms(52));
        assert!((r.get() - 2.0 / 52.0).abs() < 1e-12);
    }

    #[test]
    fn uses_minimums() {
        let mut r = PathRatio::new(None);
        for near in [31, 12, 2, 17] {
            r.on_near_rtt(ms(near));
        }
        for e2e in [80, 60, 52, 90] {
            r.on_e2e_min_rtt(ms(e2e));
        }
        assert_eq!(r.near_min(), Some(ms(2)));
        assert_eq!(r.e2e_min(), Some(ms(52)));
        assert!((r.get() - 1.0 / 26.0).abs() < 1e-12);
    }

    #[test]
    fn clamped() {
        let mut r = PathRatio::new(None);
        r.on_near_rtt(Duration::ZERO);
        r.on_e2e_min_rtt(ms(50));
        assert_eq!(r.get(), MIN_RATIO);
        let mut r = PathRatio::new(None);
        r.on_near_rtt(ms(80));
        r.on_e2e_min_rtt(ms(50));
        assert_eq!(r.get(), MAX_RATIO);
        assert_eq!(PathRatio::new(Some(0.0)).get(), MIN_RATIO);
    }

    #[test]
    fn fixed_wins() {
        let mut r = PathRatio::new(Some(1.0 / 26.0));
        r.on_near_rtt(ms(10));
        r.on_e2e_min_rtt(ms(20));
        assert!((r.get() - 1.0 / 26.0).abs() < 1e-12);
    }

    #[test]
    fn paper_constants() {
        let p = near_response(CubicParams::RFC9438, 1.0 / 26.0);
        assert!((p.beta - 0.988_46).abs() < 1e-5, "{p:?}");
        assert!((p.c - 7030.4).abs() < 0.1, "{p:?}");
        assert_eq!(
            near_response(CubicParams::RFC9438, 1.0),
            CubicParams::RFC9438
        );
    }
}
