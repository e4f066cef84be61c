//! LEDBAT (RFC 6817) as a QUIC congestion controller, with its settings
//! (`controller = { name = "ledbat", target = "25ms" }`; default 100 ms).
//!
//! ```text
//! queuing_delay = current_delay − base_delay
//! off_target    = (TARGET − queuing_delay) / TARGET
//! cwnd         += GAIN · off_target · bytes_newly_acked · MSS / cwnd
//! cwnd          = min(cwnd, flightsize + ALLOWED_INCREASE · MSS)
//! cwnd          = max(cwnd, MIN_CWND · MSS)
//! on loss (once per RTT): cwnd = max(cwnd / 2, MIN_CWND · MSS)
//! ```
//!
//! with GAIN = 1 (the RFC's "MUST be 1 or less": at most one MSS per RTT),
//! ALLOWED_INCREASE = 1 and MIN_CWND = 2.
//!
//! **Delays from RTTs (a deviation from RFC 6817).** LEDBAT measures
//! one-way delays from timestamps the receiver echoes; QUIC carries none.
//! Here the delays are RTT samples (the time from sending each packet to
//! its acknowledgement): current_delay is the minimum of the last
//! CURRENT_FILTER = 4 samples, base_delay the minimum over BASE_HISTORY =
//! 10 one-minute buckets. On our paths the reverse direction carries only
//! ACKs, so the queueing part of an RTT is the forward queue's, and
//! RTT − min RTT is exactly the one-way queueing delay LEDBAT wants (the
//! constant parts cancel).
//!
//! **Slow start.** Like µTorrent's libutp (the implementation the paper
//! ran), it starts in slow start (cwnd grows by the bytes acknowledged)
//! and leaves it at the first loss or once the queueing delay exceeds
//! 0.9·TARGET.

use crate::engine::{CongestionEngine, Engine};
use quic::congestion::{Controller, ControllerFactory};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// LEDBAT's settings.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "RawLedbat")]
pub struct LedbatSettings {
    /// The target queueing delay (default 100 ms, RFC 6817; the first
    /// draft had 25 ms).
    pub target: Duration,
}

impl Default for LedbatSettings {
    fn default() -> LedbatSettings {
        LedbatSettings {
            target: Duration::from_millis(100),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLedbat {
    #[serde(default)]
    target: Option<String>,
}

impl TryFrom<RawLedbat> for LedbatSettings {
    type Error = String;

    fn try_from(raw: RawLedbat) -> Result<LedbatSettings, String> {
        let Some(text) = raw.target else {
            return Ok(LedbatSettings::default());
        };
        let millis = text
            .strip_suffix("ms")
            .and_then(|n| n.trim().parse::<u64>().ok())
            .filter(|&ms| (1..=10_000).contains(&ms))
            .ok_or_else(|| format!("`target` {text:?} is not a delay like \"100ms\" (1–10000)"))?;
        Ok(LedbatSettings {
            target: Duration::from_millis(millis),
        })
    }
}

/// RTT samples the current delay is the minimum of.
const CURRENT_FILTER: usize = 4;
/// One-minute buckets the base delay is the minimum of.
const BASE_HISTORY: usize = 10;
/// A base-delay bucket's span.
const BASE_BUCKET: Duration = Duration::from_secs(60);
/// The smallest window, segments.
const MIN_CWND: u64 = 2;
/// The initial window, segments.
const INITIAL_CWND: u64 = 10;

/// LEDBAT on one connection.
#[derive(Clone, Debug)]
pub struct Ledbat {
    target: Duration,
    mss: u64,
    /// Window, bytes (fractional growth kept).
    cwnd: f64,
    slow_start: bool,
    current: VecDeque<Duration>,
    /// (bucket start, minimum) of the last BASE_HISTORY minutes.
    base: VecDeque<(Instant, Duration)>,
    /// Bytes acknowledged in the current batch of ACKs.
    acked_in_batch: u64,
    /// Losses before this time are of the window already halved.
    recovery_until: Option<Instant>,
}

impl Ledbat {
    /// LEDBAT with `settings` for segments of `mtu` bytes.
    pub fn new(settings: &LedbatSettings, mtu: u16) -> Ledbat {
        let mss = u64::from(mtu);
        Ledbat {
            target: settings.target,
            mss,
            cwnd: (INITIAL_CWND * mss) as f64,
            slow_start: true,
            current: VecDeque::with_capacity(CURRENT_FILTER),
            base: VecDeque::with_capacity(BASE_HISTORY),
            acked_in_batch: 0,
            recovery_until: None,
        }
    }

    /// The window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd as u64
    }

    /// Whether it is in slow start.
    pub fn is_slow_start(&self) -> bool {
        self.slow_start
    }

    /// current_delay − base_delay, if any sample arrived.
    pub fn queuing_delay(&self) -> Option<Duration> {
        let current = self.current.iter().min()?;
        let base = self.base.iter().map(|(_, d)| d).min()?;
        Some(current.saturating_sub(*base))
    }

    /// An RTT sample at `now`.
    pub fn add_delay(&mut self, now: Instant, rtt: Duration) {
        if self.current.len() == CURRENT_FILTER {
            self.current.pop_front();
        }
        self.current.push_back(rtt);
        match self.base.back_mut() {
            Some((start, min)) if now - *start < BASE_BUCKET => *min = (*min).min(rtt),
            _ => {
                if self.base.len() == BASE_HISTORY {
                    self.base.pop_front();
                }
                self.base.push_back((now, rtt));
            }
        }
    }

    /// A batch of ACKs acknowledged `acked` bytes; `flightsize` bytes were
    /// in flight before it.
    pub fn on_acked(&mut self, acked: u64, flightsize: u64) {
        let Some(queuing) = self.queuing_delay() else {
            return;
        };
        let mss = self.mss as f64;
        let target = self.target.as_secs_f64();
        if self.slow_start && queuing.as_secs_f64() > 0.9 * target {
            self.slow_start = false;
        }
        if self.slow_start {
            self.cwnd += acked as f64;
        } else {
            let off_target = (target - queuing.as_secs_f64()) / target;
            self.cwnd += off_target * acked as f64 * mss / self.cwnd;
        }
        let allowed = (flightsize + self.mss) as f64;
        self.cwnd = self.cwnd.min(allowed).max((MIN_CWND * self.mss) as f64);
    }

    /// A loss of packets sent at `sent`, detected at `now`.
    pub fn on_loss(&mut self, now: Instant, sent: Instant) {
        self.slow_start = false;
        if self.recovery_until.is_some_and(|until| sent <= until) {
            return;
        }
        self.cwnd = (self.cwnd / 2.0).max((MIN_CWND * self.mss) as f64);
        self.recovery_until = Some(now);
    }
}

impl CongestionEngine for Ledbat {
    fn handle_sent(&mut self, _now: Instant, _bytes: u16, _pn: u64) {}

    fn handle_ack(&mut self, now: Instant, sent: Instant, bytes: u64, _pn: u64, _: Duration) {
        self.add_delay(now, now.saturating_duration_since(sent));
        self.acked_in_batch += bytes;
    }

    fn handle_end_acks(&mut self, _now: Instant, in_flight: u64, _app_limited: bool) {
        let acked = std::mem::take(&mut self.acked_in_batch);
        if acked > 0 {
            self.on_acked(acked, in_flight + acked);
        }
    }

    fn handle_lost(&mut self, _now: Instant, _bytes: u16, _pn: u64) {}

    fn handle_congestion(&mut self, now: Instant, sent: Instant, _persistent: bool) {
        self.on_loss(now, sent);
    }

    fn handle_mtu(&mut self, mtu: u16) {
        self.mss = u64::from(mtu);
    }

    fn poll_window(&self) -> u64 {
        self.cwnd as u64
    }

    fn poll_pacing_rate(&self) -> Option<u64> {
        None
    }
}

impl ControllerFactory for LedbatSettings {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Engine(Ledbat::new(&self, current_mtu)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1200;

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    /// LEDBAT-100 out of slow start at `cwnd` bytes, base delay 30 ms.
    fn steady(cwnd: f64) -> (Ledbat, Instant) {
        let t0 = Instant::now();
        let mut ledbat = Ledbat::new(&LedbatSettings::default(), MSS as u16);
        ledbat.slow_start = false;
        ledbat.cwnd = cwnd;
        ledbat.add_delay(t0, ms(30));
        (ledbat, t0)
    }

    #[test]
    fn the_window_responds_to_a_step_in_delay() {
        let (mut ledbat, t0) = steady(120_000.0);
        // No queue: off_target 1, one MSS of ACKs: +1200·1200/120000 = 12.
        ledbat.on_acked(MSS, 200_000);
        assert!((ledbat.cwnd - 120_012.0).abs() < 1e-6);
        // A 50 ms queue: off_target 0.5 once the four-sample filter holds
        // only delayed samples.
        for i in 1..=4 {
            ledbat.add_delay(t0 + ms(i), ms(80));
        }
        let before = ledbat.cwnd;
        ledbat.on_acked(MSS, 200_000);
        let expected = 0.5 * (MSS * MSS) as f64 / before;
        assert!((ledbat.cwnd - before - expected).abs() < 1e-6);
        // A 150 ms queue: off_target −0.5, the window shrinks as fast.
        for i in 5..=8 {
            ledbat.add_delay(t0 + ms(i), ms(180));
        }
        let before = ledbat.cwnd;
        ledbat.on_acked(MSS, 200_000);
        assert!((before - ledbat.cwnd - 0.5 * (MSS * MSS) as f64 / before).abs() < 1e-6);
    }

    #[test]
    fn growth_is_capped_by_the_flight_and_loss_halves_once_per_rtt() {
        let (mut ledbat, t0) = steady(120_000.0);
        // Only 60 000 bytes were in flight: the window cannot exceed
        // 61 200.
        ledbat.on_acked(MSS, 60_000);
        assert_eq!(ledbat.cwnd(), 61_200);
        ledbat.on_loss(t0 + ms(40), t0 + ms(10));
        assert_eq!(ledbat.cwnd(), 30_600);
        // A loss of a packet sent before the halving: ignored.
        ledbat.on_loss(t0 + ms(41), t0 + ms(20));
        assert_eq!(ledbat.cwnd(), 30_600);
        ledbat.on_loss(t0 + ms(90), t0 + ms(50));
        assert_eq!(ledbat.cwnd(), 15_300);
    }

    #[test]
    fn slow_start_ends_near_the_target() {
        let t0 = Instant::now();
        let mut ledbat = Ledbat::new(&LedbatSettings::default(), MSS as u16);
        ledbat.add_delay(t0, ms(30));
        ledbat.on_acked(MSS, 1_000_000);
        assert!(ledbat.is_slow_start());
        for i in 1..=4 {
            ledbat.add_delay(t0 + ms(i), ms(125));
        }
        ledbat.on_acked(MSS, 1_000_000);
        assert!(!ledbat.is_slow_start());
    }

    #[test]
    fn the_base_delay_is_the_minimum_over_ten_minutes() {
        let t0 = Instant::now();
        let mut ledbat = Ledbat::new(&LedbatSettings::default(), MSS as u16);
        ledbat.add_delay(t0, ms(30));
        for minute in 1..=10 {
            ledbat.add_delay(t0 + Duration::from_secs(60 * minute), ms(50));
        }
        // The 30 ms bucket has aged out: the base is 50 ms now.
        for i in 0..4 {
            ledbat.add_delay(t0 + Duration::from_secs(600) + ms(i), ms(60));
        }
        assert_eq!(ledbat.queuing_delay(), Some(ms(10)));
    }
}
