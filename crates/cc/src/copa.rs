//! Copa (Arun and Balakrishnan, NSDI'18) as a QUIC congestion
//! controller, with its settings (`controller = { name = "copa", delta =
//! 0.5, competitive = true }`).
//!
//! Per ACK, with RTT samples of each acknowledged packet:
//!
//! * RTT_standing is the minimum RTT over the last srtt/2, RTT_min the
//!   minimum over 10 s; the queueing delay is d_q = RTT_standing − RTT_min;
//! * the target rate is λ_t = 1/(δ·d_q) packets/s, the current rate
//!   λ = cwnd/RTT_standing;
//! * λ ≤ λ_t: cwnd += v/(δ·cwnd) packets; else cwnd −= v/(δ·cwnd);
//! * the velocity v starts at 1; once per RTT the direction of cwnd (up or
//!   down against one RTT before) is compared with the last RTT's: after
//!   three RTTs in one direction v doubles each RTT, and a change of
//!   direction resets it to 1;
//! * it starts in slow start (cwnd doubling per RTT) until λ first exceeds
//!   λ_t, and paces at 2·cwnd/RTT_standing.
//!
//! **Competitive mode** (§2.2): the queue is "nearly empty" when d_q is
//! below 10% of the largest RTT of the last four RTTs minus RTT_min. When
//! it was not nearly empty once in the last five RTTs, a buffer-filling
//! flow is present and Copa competes: 1/δ grows by 1 per RTT and halves on
//! a loss (at most once per RTT). When the queue empties again, δ returns
//! to its default. In default mode losses do not change the window (only
//! persistent congestion resets it to the minimum).

use crate::engine::{CongestionEngine, Engine};
use crate::windowed::WindowedExtreme;
use quic::congestion::{Controller, ControllerFactory};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Copa's settings.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "RawCopa")]
pub struct CopaSettings {
    /// δ in default mode (default 0.5).
    pub delta: f64,
    /// Switch to competitive mode when a buffer-filling flow is present
    /// (default true).
    pub competitive: bool,
}

impl Default for CopaSettings {
    fn default() -> CopaSettings {
        CopaSettings {
            delta: 0.5,
            competitive: true,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCopa {
    #[serde(default)]
    delta: Option<f64>,
    #[serde(default)]
    competitive: Option<bool>,
}

impl TryFrom<RawCopa> for CopaSettings {
    type Error = String;

    fn try_from(raw: RawCopa) -> Result<CopaSettings, String> {
        let default = CopaSettings::default();
        let delta = raw.delta.unwrap_or(default.delta);
        if !(delta.is_finite() && delta > 0.0 && delta <= 1.0) {
            return Err(format!("`delta` {delta} is not in (0, 1]"));
        }
        Ok(CopaSettings {
            delta,
            competitive: raw.competitive.unwrap_or(default.competitive),
        })
    }
}

/// RTT_min's window.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// The smallest window, packets.
const MIN_CWND: f64 = 2.0;
/// The initial window, packets.
const INITIAL_CWND: f64 = 10.0;

/// Copa on one connection.
#[derive(Clone, Debug)]
pub struct Copa {
    settings: CopaSettings,
    mss: f64,
    /// Window, packets.
    cwnd: f64,
    velocity: f64,
    /// Direction of the last RTT: +1, −1 or 0 (none yet).
    direction: i8,
    same_direction_rtts: u32,
    /// cwnd at the start of this RTT.
    round_cwnd: f64,
    round_start: Option<Instant>,
    slow_start: bool,
    /// 1/δ now.
    inverse_delta: f64,
    competing: bool,
    /// A loss already halved 1/δ this RTT.
    loss_this_round: bool,
    /// The last time the queue was nearly empty.
    last_empty: Option<Instant>,
    smoothed: Duration,
    standing: WindowedExtreme<Duration>,
    min: WindowedExtreme<Duration>,
    max: WindowedExtreme<Duration>,
    standing_now: Option<Duration>,
}

impl Copa {
    /// Copa for segments of `mtu` bytes.
    pub fn new(settings: CopaSettings, mtu: u16) -> Copa {
        let inverse_delta = 1.0 / settings.delta;
        Copa {
            settings,
            mss: f64::from(mtu),
            cwnd: INITIAL_CWND,
            velocity: 1.0,
            direction: 0,
            same_direction_rtts: 0,
            round_cwnd: INITIAL_CWND,
            round_start: None,
            slow_start: true,
            inverse_delta,
            competing: false,
            loss_this_round: false,
            last_empty: None,
            smoothed: Duration::from_millis(100),
            standing: WindowedExtreme::min(),
            min: WindowedExtreme::min(),
            max: WindowedExtreme::max(),
            standing_now: None,
        }
    }

    /// The window, packets.
    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd
    }

    /// The velocity.
    pub fn velocity(&self) -> f64 {
        self.velocity
    }

    /// δ now.
    pub fn delta(&self) -> f64 {
        1.0 / self.inverse_delta
    }

    /// Whether it is in competitive mode.
    pub fn is_competing(&self) -> bool {
        self.competing
    }

    /// Whether it is in slow start.
    pub fn is_slow_start(&self) -> bool {
        self.slow_start
    }

    /// An acknowledged packet with RTT sample `rtt`, the connection's
    /// smoothed RTT being `smoothed`.
    pub fn on_rtt_sample(&mut self, now: Instant, rtt: Duration, smoothed: Duration) {
        self.smoothed = smoothed.max(Duration::from_micros(1));
        self.standing.add(now, rtt);
        self.min.add(now, rtt);
        self.max.add(now, rtt);
        let (Some(standing), Some(min)) = (
            self.standing.get(now, self.smoothed / 2),
            self.min.get(now, MIN_RTT_WINDOW),
        ) else {
            return;
        };
        self.standing_now = Some(standing);
        let queueing = standing.saturating_sub(min).as_secs_f64();
        let largest = self.max.get(now, 4 * self.smoothed).unwrap_or(standing);
        if queueing <= 0.1 * largest.saturating_sub(min).as_secs_f64() {
            self.last_empty = Some(now);
        }
        self.per_rtt(now);
        let delta = 1.0 / self.inverse_delta;
        let rate = self.cwnd / standing.as_secs_f64().max(1e-6);
        let target = if queueing > 0.0 {
            1.0 / (delta * queueing)
        } else {
            f64::INFINITY
        };
        if self.slow_start {
            if rate <= target {
                self.cwnd += 1.0;
                return;
            }
            self.slow_start = false;
        }
        let change = self.velocity / (delta * self.cwnd);
        if rate <= target {
            self.cwnd += change;
        } else {
            self.cwnd = (self.cwnd - change).max(MIN_CWND);
        }
    }

    /// Once per RTT: the velocity, the mode and competitive δ.
    fn per_rtt(&mut self, now: Instant) {
        let Some(start) = self.round_start else {
            self.round_start = Some(now);
            self.round_cwnd = self.cwnd;
            return;
        };
        if now - start < self.smoothed {
            return;
        }
        let direction = if self.cwnd > self.round_cwnd {
            1
        } else if self.cwnd < self.round_cwnd {
            -1
        } else {
            0
        };
        if direction != 0 && direction == self.direction {
            self.same_direction_rtts += 1;
            if self.same_direction_rtts >= 3 {
                self.velocity = (2.0 * self.velocity).min(self.cwnd.max(1.0));
            }
        } else {
            self.same_direction_rtts = 0;
            self.velocity = 1.0;
        }
        self.direction = direction;
        let empty_recently = self
            .last_empty
            .is_some_and(|at| now - at <= 5 * self.smoothed);
        let competing = self.settings.competitive && !empty_recently;
        if competing {
            if self.competing && !self.loss_this_round {
                self.inverse_delta += 1.0;
            }
        } else {
            self.inverse_delta = 1.0 / self.settings.delta;
        }
        self.competing = competing;
        self.loss_this_round = false;
        self.round_start = Some(now);
        self.round_cwnd = self.cwnd;
    }

    /// Packets were lost.
    pub fn on_loss(&mut self, persistent: bool) {
        if persistent {
            self.cwnd = MIN_CWND;
            self.velocity = 1.0;
        }
        if self.competing && !self.loss_this_round {
            self.inverse_delta = (self.inverse_delta / 2.0).max(1.0 / self.settings.delta);
            self.loss_this_round = true;
        }
    }

    fn pacing_bytes_per_sec(&self) -> u64 {
        let rtt = self.standing_now.unwrap_or(self.smoothed).as_secs_f64();
        let rate = 2.0 * self.cwnd * self.mss / rtt.max(1e-6);
        (rate as u64).max(1)
    }
}

impl CongestionEngine for Copa {
    fn handle_sent(&mut self, _now: Instant, _bytes: u16, _pn: u64) {}

    fn handle_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        _bytes: u64,
        _pn: u64,
        smoothed: Duration,
    ) {
        self.on_rtt_sample(now, now.saturating_duration_since(sent), smoothed);
    }

    fn handle_end_acks(&mut self, _now: Instant, _in_flight: u64, _app_limited: bool) {}

    fn handle_lost(&mut self, _now: Instant, _bytes: u16, _pn: u64) {}

    fn handle_congestion(&mut self, _now: Instant, _sent: Instant, persistent: bool) {
        self.on_loss(persistent);
    }

    fn handle_mtu(&mut self, mtu: u16) {
        self.mss = f64::from(mtu);
    }

    fn poll_window(&self) -> u64 {
        (self.cwnd * self.mss) as u64
    }

    fn poll_pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_bytes_per_sec())
    }
}

impl ControllerFactory for CopaSettings {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Engine(Copa::new((*self).clone(), current_mtu)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    /// Copa out of slow start at `cwnd` packets, RTT_min 30 ms known.
    fn steady(cwnd: f64) -> (Copa, Instant) {
        let t0 = Instant::now();
        let mut copa = Copa::new(CopaSettings::default(), 1200);
        copa.slow_start = false;
        copa.on_rtt_sample(t0, ms(30), ms(30));
        copa.cwnd = cwnd;
        (copa, t0)
    }

    #[test]
    fn below_the_target_rate_the_window_grows_by_v_over_delta_cwnd() {
        // 100 packets over 30 ms (3333 pkt/s) with no queue: the target is
        // infinite; +1/(0.5·100) = 0.02 packets.
        let (mut copa, t0) = steady(100.0);
        copa.on_rtt_sample(t0 + ms(1), ms(30), ms(30));
        assert!((copa.cwnd_packets() - 100.02).abs() < 1e-9);
    }

    #[test]
    fn above_the_target_rate_the_window_shrinks() {
        // A 10 ms standing queue: target 1/(0.5·0.01) = 200 pkt/s; the
        // rate 100/0.040 = 2500 pkt/s is above it: −0.02 packets.
        let (mut copa, t0) = steady(100.0);
        // RTT_standing is the minimum over srtt/2 = 20 ms: wait it out.
        copa.on_rtt_sample(t0 + ms(25), ms(40), ms(40));
        assert!((copa.cwnd_packets() - 99.98).abs() < 1e-9, "{}", copa.cwnd);
    }

    #[test]
    fn velocity_doubles_after_three_rtts_in_one_direction() {
        let (mut copa, t0) = steady(10.0);
        let mut t = t0;
        let mut velocities = Vec::new();
        for _ in 0..7 {
            // One RTT of ACKs with no queue: the window keeps growing.
            for _ in 0..10 {
                t += ms(3);
                copa.on_rtt_sample(t, ms(30), ms(30));
            }
            velocities.push(copa.velocity());
        }
        assert_eq!(velocities[..2], [1.0, 1.0]);
        assert!(velocities[6] >= 8.0, "{velocities:?}");
        // A standing queue turns it round: velocity back to 1.
        for _ in 0..100 {
            t += ms(3);
            copa.on_rtt_sample(t, ms(80), ms(80));
        }
        assert_eq!(copa.velocity(), 1.0);
    }

    #[test]
    fn a_queue_that_never_empties_makes_it_compete() {
        let (mut copa, t0) = steady(50.0);
        let mut t = t0;
        // The RTT never returns near 30 ms for many RTTs.
        for i in 0..400 {
            t += ms(2);
            let rtt = ms(60 + (i % 10));
            copa.on_rtt_sample(t, rtt, ms(65));
        }
        assert!(copa.is_competing());
        assert!(copa.delta() < 0.5);
        let before = copa.delta();
        copa.on_loss(false);
        assert!(copa.delta() > before, "a loss halves 1/δ");
    }
}
