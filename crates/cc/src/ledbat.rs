//! LEDBAT (RFC 6817) as a QUIC congestion controller, with its settings
//! (`controller = { name = "ledbat", target = "25ms", delay = "rtt" }`;
//! defaults 100 ms and `"one_way"`).
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
//! **Delays.** current_delay is the minimum of the last CURRENT_FILTER = 4
//! samples, base_delay the minimum over BASE_HISTORY = 10 one-minute
//! buckets. A sample is, by [`LedbatDelay`]:
//!
//! - `one_way` (the default; RFC 6817 and libutp): the forward one-way
//!   delay of the largest packet each ACK newly acknowledges, from QUIC
//!   timestamps (draft-huitema-quic-ts; `quic::QuicConfig::with_timestamps`,
//!   which pepkit gives both endpoints of a connection whose controller
//!   asks for it). The sender derives it from the peer's timestamp, the
//!   ACK delay and the packet's send time; the two clocks' epochs differ
//!   by a constant, which the sample carries and which cancels in
//!   current_delay − base_delay, as in RFC 6817 (whose clocks are not
//!   synchronised either). Queueing on the ACK path is not in it. Until the
//!   first such sample (the handshake), and for the whole connection when
//!   the peer does not send timestamps (another QUIC stack), the samples
//!   are RTTs as below.
//! - `rtt`: RTT samples (the time from sending each packet to its
//!   acknowledgement), a deviation from RFC 6817 for peers without
//!   timestamps. RTT − min RTT is the forward queueing delay only while the
//!   reverse path has no queue: a queue on the ACK path counts too.
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
    /// Which delay it measures (default one-way where the peer sends
    /// timestamps).
    pub delay: LedbatDelay,
}

/// The delay LEDBAT measures (module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LedbatDelay {
    /// The forward one-way delay from QUIC timestamps, where both
    /// endpoints negotiated them; RTTs where the peer did not.
    #[default]
    OneWay,
    /// RTTs always (timestamps are not offered).
    Rtt,
}

impl Default for LedbatSettings {
    fn default() -> LedbatSettings {
        LedbatSettings {
            target: Duration::from_millis(100),
            delay: LedbatDelay::default(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLedbat {
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    delay: LedbatDelay,
}

impl TryFrom<RawLedbat> for LedbatSettings {
    type Error = String;

    fn try_from(raw: RawLedbat) -> Result<LedbatSettings, String> {
        let Some(text) = raw.target else {
            return Ok(LedbatSettings {
                delay: raw.delay,
                ..LedbatSettings::default()
            });
        };
        let millis = text
            .strip_suffix("ms")
            .and_then(|n| n.trim().parse::<u64>().ok())
            .filter(|&ms| (1..=10_000).contains(&ms))
            .ok_or_else(|| format!("`target` {text:?} is not a delay like \"100ms\" (1–10000)"))?;
        Ok(LedbatSettings {
            target: Duration::from_millis(millis),
            delay: raw.delay,
        })
    }
}

/// Delay samples the current delay is the minimum of.
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
    /// Whether it takes one-way delays when it hears them.
    takes_one_way: bool,
    /// Whether its samples are one-way delays (from the first one heard).
    one_way: bool,
    /// The last samples, ns (one-way delays carry the clocks' offset, so
    /// they may be negative).
    current: VecDeque<i64>,
    /// (bucket start, minimum sample, ns) of the last BASE_HISTORY minutes.
    base: VecDeque<(Instant, i64)>,
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
            takes_one_way: settings.delay == LedbatDelay::OneWay,
            one_way: false,
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
        let nanos = u64::try_from(current.saturating_sub(*base)).unwrap_or(0);
        Some(Duration::from_nanos(nanos))
    }

    /// Whether its samples are one-way delays.
    pub fn is_one_way(&self) -> bool {
        self.one_way
    }

    /// An RTT sample at `now` (ignored once one-way delays arrive).
    pub fn add_delay(&mut self, now: Instant, rtt: Duration) {
        if !self.one_way {
            self.add_sample(now, i64::try_from(rtt.as_nanos()).unwrap_or(i64::MAX));
        }
    }

    /// A one-way delay sample at `now`, µs plus the clocks' offset
    /// (ignored with `delay = "rtt"`). The first one drops the RTT samples
    /// before it (the two do not compare).
    pub fn add_one_way_delay(&mut self, now: Instant, delay_micros: i64) {
        if !self.takes_one_way {
            return;
        }
        if !self.one_way {
            self.one_way = true;
            self.current.clear();
            self.base.clear();
        }
        self.add_sample(now, delay_micros.saturating_mul(1000));
    }

    fn add_sample(&mut self, now: Instant, nanos: i64) {
        if self.current.len() == CURRENT_FILTER {
            self.current.pop_front();
        }
        self.current.push_back(nanos);
        match self.base.back_mut() {
            Some((start, min)) if now - *start < BASE_BUCKET => *min = (*min).min(nanos),
            _ => {
                if self.base.len() == BASE_HISTORY {
                    self.base.pop_front();
                }
                self.base.push_back((now, nanos));
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

    fn handle_one_way_delay(&mut self, now: Instant, delay_micros: i64) {
        self.add_one_way_delay(now, delay_micros);
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

    #[test]
    fn one_way_delays_replace_rtts_and_their_offset_cancels() {
        let t0 = Instant::now();
        let mut ledbat = Ledbat::new(&LedbatSettings::default(), MSS as u16);
        ledbat.add_delay(t0, ms(30));
        ledbat.add_delay(t0 + ms(1), ms(90));
        assert!(!ledbat.is_one_way());
        // The clocks' offset makes these negative: −50 ms plus 20 ms of
        // one-way delay, then 10 ms of queue.
        ledbat.add_one_way_delay(t0 + ms(2), -30_000);
        assert!(ledbat.is_one_way());
        assert_eq!(ledbat.queuing_delay(), Some(ms(0)));
        for i in 3..=6 {
            ledbat.add_one_way_delay(t0 + ms(i), -20_000);
        }
        assert_eq!(ledbat.queuing_delay(), Some(ms(10)));
        // RTT samples no longer count (this one's queue is on the ACK path).
        ledbat.add_delay(t0 + ms(7), ms(500));
        assert_eq!(ledbat.queuing_delay(), Some(ms(10)));
    }

    #[test]
    fn the_rtt_variant_ignores_one_way_delays() {
        let t0 = Instant::now();
        let settings = LedbatSettings {
            delay: LedbatDelay::Rtt,
            ..LedbatSettings::default()
        };
        let mut ledbat = Ledbat::new(&settings, MSS as u16);
        ledbat.add_delay(t0, ms(30));
        ledbat.add_one_way_delay(t0 + ms(1), 5_000);
        assert!(!ledbat.is_one_way());
        for i in 2..=5 {
            ledbat.add_delay(t0 + ms(i), ms(50));
        }
        assert_eq!(ledbat.queuing_delay(), Some(ms(20)));
    }

    #[test]
    fn settings_name_the_delay() {
        let parse = |text: &str| toml::from_str::<LedbatSettings>(text);
        assert_eq!(parse("").unwrap(), LedbatSettings::default());
        assert_eq!(parse("").unwrap().delay, LedbatDelay::OneWay);
        let rtt = parse("delay = \"rtt\"\ntarget = \"25ms\"").unwrap();
        assert_eq!(rtt.delay, LedbatDelay::Rtt);
        assert_eq!(rtt.target, ms(25));
        assert_eq!(
            parse("delay = \"one_way\"").unwrap().delay,
            LedbatDelay::OneWay
        );
        assert!(parse("delay = \"owd\"").is_err());
    }
}
