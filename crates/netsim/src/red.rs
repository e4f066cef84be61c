//! Random Early Detection, as Linux's `sch_red` with iproute2's defaults.
//!
//! `tc qdisc add … red limit L avpkt A adaptive harddrop bandwidth B` is
//! [`RedConfig::new(L, B)`](RedConfig::new) (A defaults to 1000). The derived
//! parameters follow iproute2 (`tc/q_red.c`, `tc/tc_red.c`) and the kernel
//! (`include/net/red.h`) in integer fixed point:
//!
//! * thresholds: `max = limit / 4` (or `3 · min` if only `min` is given),
//!   `min = max / 3`, in bytes;
//! * `burst = (2 · min + max) / (3 · avpkt)` packets, and the EWMA weight
//!   `W = 2^-Wlog` with the smallest `Wlog` such that
//!   `burst + 1 − min/avpkt ≤ (1 − (1 − W)^burst) / W` (`tc_red_eval_ewma`);
//! * `max_p = probability · 2^32` (default probability 0.02);
//! * on every arrival `avg ← avg + W · (backlog − avg)` with the backlog in
//!   bytes before the packet is queued; below `min` nothing is dropped, at or
//!   above `max` every packet is dropped ("forced"), in between a packet is
//!   dropped when `count · max_p · (avg − min)/(max − min) ≥ u` with `u` drawn
//!   uniformly after each drop (`red_action`, `red_mark_probability`);
//! * adaptive: every 500 ms, if `avg > min + 0.6 (max − min)` and
//!   `max_p ≤ 0.5`, `max_p += min(0.01, max_p / 4)`; if
//!   `avg < min + 0.4 (max − min)` and `max_p ≥ 0.01`, `max_p ← 0.9 · max_p`
//!   (`red_adaptative_algo`, with the kernel's integer `(max − min) / 5`);
//! * `harddrop` and no ECN: every mark is a drop; the hard limit `L` bytes is
//!   a drop-tail limit behind RED (the kernel's child bfifo).
//!
//! Simplifications, written down here:
//! * After an idle period the kernel decays `avg` with a 256-entry table
//!   (`Stab`, `Scell_log`) approximating `(1 − W)^m` for `m` = idle time /
//!   transmission time of `avpkt` at `bandwidth`. We compute `(1 − W)^m`
//!   exactly in 32-bit fixed point instead.
//! * The adaptive timer runs at multiples of 500 ms of virtual time from
//!   time zero and is caught up when the next packet arrives (the model has
//!   no timers of its own); after 256 missed periods the rest are skipped,
//!   because by then `max_p` has settled.
//! * Dividing a random `u32` by `max_p / (max − min)` is exact division here;
//!   the kernel uses a reciprocal multiplication.

use crate::probability::Probability;
use crate::{Rate, Time};
use rand_chacha::rand_core::RngCore;
use std::time::Duration;

/// `RED_ONE_PERCENT`: 1% of 2^32, rounded to nearest.
const ONE_PERCENT: u32 = 42_949_673;
/// `MAX_P_MIN`: adaptive RED lowers `max_p` only while it is at least 1%.
const MAX_P_MIN: u32 = ONE_PERCENT;
/// `MAX_P_MAX`: adaptive RED raises `max_p` only while it is at most 50%.
const MAX_P_MAX: u32 = 50 * ONE_PERCENT;
/// Period of the adaptive algorithm (the kernel's `HZ / 2`).
const ADAPT_INTERVAL: Duration = Duration::from_millis(500);
/// Missed adaptive periods processed one by one before skipping the rest.
const MAX_CATCH_UP: u32 = 256;

/// A RED queue as `tc red` takes it. Unset optional fields get iproute2's
/// defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct RedConfig {
    /// Hard limit of the queue in bytes (`limit`).
    pub limit: u64,
    /// Average packet size in bytes (`avpkt`, default 1000).
    pub avpkt: u32,
    /// Link bandwidth (`bandwidth`); used only to decay the average over
    /// idle periods.
    pub bandwidth: Rate,
    /// Minimum threshold in bytes (`min`).
    pub min: Option<u64>,
    /// Maximum threshold in bytes (`max`).
    pub max: Option<u64>,
    /// Burst in packets (`burst`), which sets the EWMA weight.
    pub burst: Option<u32>,
    /// Initial maximum drop probability (`probability`, default 0.02).
    pub probability: f64,
    /// Adaptive RED (`adaptive`).
    pub adaptive: bool,
}

impl RedConfig {
    /// `tc red limit <limit> avpkt 1000 adaptive harddrop bandwidth <bandwidth>`.
    pub fn new(limit: u64, bandwidth: Rate) -> RedConfig {
        RedConfig {
            limit,
            avpkt: 1000,
            bandwidth,
            min: None,
            max: None,
            burst: None,
            probability: 0.02,
            adaptive: true,
        }
    }

    /// Sets the average packet size.
    pub fn with_avpkt(mut self, avpkt: u32) -> RedConfig {
        self.avpkt = avpkt;
        self
    }

    /// Sets both thresholds, in bytes.
    pub fn with_thresholds(mut self, min: u64, max: u64) -> RedConfig {
        self.min = Some(min);
        self.max = Some(max);
        self
    }

    /// Sets the burst, in packets.
    pub fn with_burst(mut self, burst: u32) -> RedConfig {
        self.burst = Some(burst);
        self
    }

    /// Sets the initial maximum drop probability.
    pub fn with_probability(mut self, probability: f64) -> RedConfig {
        self.probability = probability;
        self
    }

    /// Turns the adaptive algorithm on or off.
    pub fn with_adaptive(mut self, adaptive: bool) -> RedConfig {
        self.adaptive = adaptive;
        self
    }
}

/// Why a [`RedConfig`] cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RedConfigError {
    /// `limit` is zero.
    #[error("RED limit must be positive")]
    ZeroLimit,
    /// `avpkt` is zero.
    #[error("RED avpkt must be positive")]
    ZeroAvpkt,
    /// `bandwidth` is zero.
    #[error("RED bandwidth must be positive")]
    ZeroBandwidth,
    /// `probability` is not in `(0, 1]`.
    #[error("RED probability must be in (0, 1], got {0}")]
    InvalidProbability(f64),
    /// `max` exceeds `limit`.
    #[error("RED max threshold {max} B is larger than the limit {limit} B")]
    MaxAboveLimit {
        /// The maximum threshold.
        max: u64,
        /// The limit.
        limit: u64,
    },
    /// `min` is not below `max`.
    #[error("RED min threshold {min} B is not smaller than max {max} B")]
    MinNotBelowMax {
        /// The minimum threshold.
        min: u64,
        /// The maximum threshold.
        max: u64,
    },
    /// No EWMA weight satisfies the burst (`tc_red_eval_ewma` fails).
    #[error("RED burst {burst} is too small or too large for min {min} B and avpkt {avpkt} B")]
    BadBurst {
        /// The burst in packets.
        burst: u32,
        /// The minimum threshold.
        min: u64,
        /// The average packet size.
        avpkt: u32,
    },
}

/// The parameters derived from a [`RedConfig`], as the kernel holds them
/// (thresholds in bytes, probabilities as fractions of 2^32).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedParams {
    /// Hard limit in bytes.
    pub limit: u64,
    /// Minimum threshold in bytes.
    pub qth_min: u64,
    /// Maximum threshold in bytes.
    pub qth_max: u64,
    /// Burst in packets.
    pub burst: u32,
    /// EWMA weight exponent: `W = 2^-wlog`.
    pub wlog: u8,
    /// Initial maximum drop probability, times 2^32.
    pub max_p: u32,
    /// Lower edge of the adaptive target band, in bytes.
    pub target_min: u64,
    /// Upper edge of the adaptive target band, in bytes.
    pub target_max: u64,
    /// Transmission time of one `avpkt` at `bandwidth` (idle decay unit).
    pub avpkt_time: Duration,
    /// Whether the adaptive algorithm runs.
    pub adaptive: bool,
}

impl RedParams {
    /// Derives the parameters the way iproute2 and the kernel do.
    pub fn from_config(c: &RedConfig) -> Result<RedParams, RedConfigError> {
        if c.limit == 0 {
            return Err(RedConfigError::ZeroLimit);
        }
        if c.avpkt == 0 {
            return Err(RedConfigError::ZeroAvpkt);
        }
        if c.bandwidth.is_zero() {
            return Err(RedConfigError::ZeroBandwidth);
        }
        if !(c.probability > 0.0 && c.probability <= 1.0) {
            return Err(RedConfigError::InvalidProbability(c.probability));
        }
        let qth_max = c
            .max
            .unwrap_or(c.min.map_or(c.limit / 4, |m| m.saturating_mul(3)));
        let qth_min = c.min.unwrap_or(qth_max / 3);
        if qth_max > c.limit {
            return Err(RedConfigError::MaxAboveLimit {
                max: qth_max,
                limit: c.limit,
            });
        }
        if qth_min >= qth_max {
            return Err(RedConfigError::MinNotBelowMax {
                min: qth_min,
                max: qth_max,
            });
        }
        let avpkt = u64::from(c.avpkt);
        let burst = c.burst.unwrap_or_else(|| {
            u32::try_from((2 * qth_min + qth_max) / (3 * avpkt)).unwrap_or(u32::MAX)
        });
        let wlog = eval_ewma(qth_min, burst, c.avpkt).ok_or(RedConfigError::BadBurst {
            burst,
            min: qth_min,
            avpkt: c.avpkt,
        })?;
        // iproute2: max_P = probability * pow(2, 32), truncated to u32.
        let max_p = (c.probability * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        let delta = qth_max - qth_min;
        Ok(RedParams {
            limit: c.limit,
            qth_min,
            qth_max,
            burst,
            wlog,
            max_p,
            target_min: qth_min + 2 * (delta / 5),
            target_max: qth_min + 3 * (delta / 5),
            avpkt_time: c.bandwidth.transmit_time(avpkt),
            adaptive: c.adaptive,
        })
    }
}

/// `tc_red_eval_ewma`: the smallest `wlog` in 1..32 such that
/// `burst + 1 − qmin/avpkt ≤ (1 − (1 − W)^burst) / W` with `W = 2^-wlog`.
fn eval_ewma(qmin: u64, burst: u32, avpkt: u32) -> Option<u8> {
    let a = f64::from(burst) + 1.0 - qmin as f64 / f64::from(avpkt);
    if a < 1.0 {
        return None;
    }
    let mut w = 0.5_f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - pow_by_squaring(1.0 - w, burst)) / w {
            return Some(wlog);
        }
        w /= 2.0;
    }
    None
}

/// `x^n` by squaring in a fixed order (`powi` may differ across platforms).
fn pow_by_squaring(mut x: f64, mut n: u32) -> f64 {
    let mut acc = 1.0;
    while n > 0 {
        if n & 1 == 1 {
            acc *= x;
        }
        x *= x;
        n >>= 1;
    }
    acc
}

/// What RED decides for an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedVerdict {
    /// Queue it (if the hard limit allows).
    Pass,
    /// Dropped early, with probability (average between the thresholds).
    EarlyDrop,
    /// Dropped because the average is at or above the maximum threshold.
    ForcedDrop,
}

/// What a RED queue's control state is at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedStatus {
    /// The average queue length in bytes (rounded down).
    pub average_bytes: u64,
    /// The current maximum drop probability (changes when adaptive).
    pub max_p: Probability,
}

/// The running state of one RED queue.
#[derive(Clone, Debug)]
pub(crate) struct Red {
    params: RedParams,
    /// Average queue length in bytes, fixed point with `wlog` fraction bits.
    qavg: u64,
    /// Packets since the last drop while between the thresholds; -1 when
    /// outside.
    qcount: i64,
    /// The current random threshold.
    qr: u64,
    max_p: u32,
    max_p_delta: u32,
    next_adapt: Time,
}

impl Red {
    pub(crate) fn new(params: RedParams) -> Red {
        let delta = params.qth_max - params.qth_min;
        let max_p_delta = u32::try_from(u64::from(params.max_p) / delta)
            .unwrap_or(u32::MAX)
            .max(1);
        Red {
            max_p: params.max_p,
            max_p_delta,
            params,
            qavg: 0,
            qcount: -1,
            qr: 0,
            next_adapt: Time::ZERO + ADAPT_INTERVAL,
        }
    }

    pub(crate) fn params(&self) -> &RedParams {
        &self.params
    }

    pub(crate) fn status(&self) -> RedStatus {
        RedStatus {
            average_bytes: self.qavg >> self.params.wlog,
            max_p: Probability::from_q32(self.max_p),
        }
    }

    /// Runs RED for a packet arriving at `now` to a queue holding
    /// `backlog` bytes; `idle_since` is when the queue became empty, if it
    /// has been empty since the previous arrival.
    pub(crate) fn on_arrival(
        &mut self,
        now: Time,
        backlog: u64,
        idle_since: Option<Time>,
        rng: &mut impl RngCore,
    ) -> RedVerdict {
        if self.params.adaptive {
            self.adapt_until(now, idle_since);
        }
        self.qavg = match idle_since {
            Some(start) => self.decayed(now - start),
            None => self.qavg + backlog - (self.qavg >> self.params.wlog),
        };
        self.action(rng)
    }

    /// `red_action`.
    fn action(&mut self, rng: &mut impl RngCore) -> RedVerdict {
        let wlog = self.params.wlog;
        let min = self.params.qth_min << wlog;
        let max = self.params.qth_max << wlog;
        if self.qavg < min {
            self.qcount = -1;
            RedVerdict::Pass
        } else if self.qavg >= max {
            self.qcount = -1;
            RedVerdict::ForcedDrop
        } else {
            self.qcount += 1;
            if self.qcount == 0 {
                self.qr = self.random(rng);
                return RedVerdict::Pass;
            }
            let excess = (self.qavg - min) >> wlog;
            let count = u64::try_from(self.qcount).unwrap_or(u64::MAX);
            if excess.saturating_mul(count) >= self.qr {
                self.qcount = 0;
                self.qr = self.random(rng);
                RedVerdict::EarlyDrop
            } else {
                RedVerdict::Pass
            }
        }
    }

    /// `red_random`: uniform in `[0, 2^32 / (max_p / (max − min)))`.
    fn random(&self, rng: &mut impl RngCore) -> u64 {
        u64::from(rng.next_u32()) / u64::from(self.max_p_delta)
    }

    /// The average after `idle` of empty queue: `avg · (1 − W)^m` with `m`
    /// the number of `avpkt` transmission times in `idle`.
    fn decayed(&self, idle: Duration) -> u64 {
        let unit = self.params.avpkt_time.as_nanos().max(1);
        let m = u64::try_from(idle.as_nanos() / unit).unwrap_or(u64::MAX);
        let factor = q32_pow(
            (1u64 << 32) - (1u64 << (32 - u32::from(self.params.wlog))),
            m,
        );
        u64::try_from((u128::from(self.qavg) * u128::from(factor)) >> 32).unwrap_or(u64::MAX)
    }

    /// Runs the adaptive algorithm for every 500 ms boundary up to `now`.
    fn adapt_until(&mut self, now: Time, idle_since: Option<Time>) {
        let mut steps = 0;
        while self.next_adapt <= now {
            if steps == MAX_CATCH_UP {
                let behind = (now - self.next_adapt).as_nanos() / ADAPT_INTERVAL.as_nanos();
                let skip = u32::try_from(behind + 1).unwrap_or(u32::MAX);
                self.next_adapt += ADAPT_INTERVAL.saturating_mul(skip);
                break;
            }
            let at = self.next_adapt;
            let qavg = match idle_since {
                Some(start) if at >= start => self.decayed(at - start),
                _ => self.qavg,
            };
            self.adapt(qavg >> self.params.wlog);
            self.next_adapt = at + ADAPT_INTERVAL;
            steps += 1;
        }
    }

    /// `red_adaptative_algo` for an average of `avg` bytes.
    fn adapt(&mut self, avg: u64) {
        if avg > self.params.target_max && self.max_p <= MAX_P_MAX {
            self.max_p += MAX_P_MIN.min(self.max_p / 4);
        } else if avg < self.params.target_min && self.max_p >= MAX_P_MIN {
            self.max_p = (self.max_p / 10) * 9;
        }
        let delta = self.params.qth_max - self.params.qth_min;
        let rounded = (u64::from(self.max_p) + delta / 2) / delta;
        self.max_p_delta = u32::try_from(rounded).unwrap_or(u32::MAX).max(1);
    }
}

/// `base^exp` for a base in 32-bit fixed point (`base < 2^32`).
fn q32_pow(mut base: u64, mut exp: u64) -> u64 {
    let mut acc: u64 = 1 << 32;
    while exp > 0 && acc > 0 {
        if exp & 1 == 1 {
            acc = (acc * base) >> 32;
        }
        base = (base * base) >> 32;
        exp >>= 1;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iproute2_defaults() {
        // tc qdisc add dev X root red limit 400000 avpkt 1000 adaptive harddrop bandwidth 10Mbit
        let p = RedParams::from_config(&RedConfig::new(400_000, Rate::from_mbps(10))).unwrap();
        assert_eq!(p.qth_max, 100_000);
        assert_eq!(p.qth_min, 33_333);
        assert_eq!(p.burst, 55);
        assert_eq!(p.wlog, 5);
        assert_eq!(p.max_p, 85_899_345);
        assert_eq!(p.target_min, 33_333 + 2 * 13_333);
        assert_eq!(p.target_max, 33_333 + 3 * 13_333);
        assert_eq!(p.avpkt_time, Duration::from_micros(800));
    }

    #[test]
    fn bad_configs_are_errors() {
        let ok = RedConfig::new(400_000, Rate::from_mbps(10));
        let e = |c: RedConfig| RedParams::from_config(&c).unwrap_err();
        assert_eq!(
            e(RedConfig {
                limit: 0,
                ..ok.clone()
            }),
            RedConfigError::ZeroLimit
        );
        assert_eq!(e(ok.clone().with_avpkt(0)), RedConfigError::ZeroAvpkt);
        assert_eq!(
            e(RedConfig::new(1000, Rate::from_bps(0))),
            RedConfigError::ZeroBandwidth
        );
        assert!(matches!(
            e(ok.clone().with_probability(1.5)),
            RedConfigError::InvalidProbability(_)
        ));
        assert!(matches!(
            e(ok.clone().with_thresholds(5000, 500_000)),
            RedConfigError::MaxAboveLimit { .. }
        ));
        assert!(matches!(
            e(ok.clone().with_thresholds(5000, 5000)),
            RedConfigError::MinNotBelowMax { .. }
        ));
        assert!(matches!(
            e(ok.with_burst(1)),
            RedConfigError::BadBurst { .. }
        ));
    }

    #[test]
    fn idle_decay_is_exponential() {
        let params = RedParams::from_config(&RedConfig::new(400_000, Rate::from_mbps(10))).unwrap();
        let mut red = Red::new(params);
        red.qavg = 64_000 << 5;
        // W = 1/32, one avpkt time: avg · 31/32.
        assert_eq!(red.decayed(Duration::from_micros(800)) >> 5, 62_000);
        assert_eq!(red.decayed(Duration::from_secs(10)), 0);
        assert_eq!(q32_pow(1 << 31, 2), 1 << 30);
    }
}
