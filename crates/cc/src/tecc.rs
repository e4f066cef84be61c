//! TECC's sender-side rate control (TECC §4.2.3–4.2.6, Algorithm 1): the
//! application server paces at the rate the tunnel server feeds back,
//! less what drains the tunnel's queue and its retransmissions, plus one
//! MSS per server RTT for fairness.
//!
//! On each feedback (Tr, q, r: a [`Signal::TunnelFeedback`], which the
//! tunnel's side produces from the QUIC_INFO datagrams its client relays):
//!
//! ```text
//! e(t) = q(t) / (θ·Tr(t)) + δ·r(t)            θ = θ_ratio · T_s
//! U(t) = max(1 − e(t), 1 − max_pf)
//! U    ← (1 − w)·U + w·U(t)                    (EWMA; U starts at the first U(t))
//! Sr   = U·Tr + MSS / T_s
//! ```
//!
//! The paper writes e(t) = (q + δ·r·Tr)/(θ·Tr), adding a rate (r·Tr) to a
//! queue; we read r·Tr as the retransmitted bytes over the draining time
//! θ, which gives the form above: the retransmission share of the tunnel's
//! rate comes off U directly. T_s is the server's minimum RTT (the
//! propagation RTT, so θ and the additive term do not move with the queue
//! they regulate). The controller paces at Sr and keeps a window of
//! `window_gain · Sr · srtt` (the paper: W = Sr·T_s, `window_gain = 1`;
//! see [`TeccSettings::window_gain`]).
//!
//! Before the first feedback it is the BBR it wraps ([`crate::Bbr`]),
//! which it keeps informed all along.
//!
//! # Loss detection (§4.2.5)
//!
//! As the paper's server: a time threshold of 9/8 SRTT raised by the
//! tunnel's retransmission delay T_r, and a packet threshold that starts at
//! 3 and grows on spurious retransmissions (to the reordering distance seen
//! plus one, Chromium's rule, up to 300). T_r is at least the repair delay
//! the tunnel reports, and the packet threshold at least the packets the
//! server sends during T_r. The rule and why are in
//! [`LossRule`]; the connection asks the controller for both thresholds each
//! time it looks for losses and reports each spurious loss to it
//! (third_party/noq-proto/PEPKIT.md, item 8). `reordering = "fixed"`
//! with `tunnel_repair_delay = false` keeps the endpoint's thresholds for
//! the whole connection (`time_threshold = 1.5, packet_threshold = 10`
//! was the fixed approximation used before noq-proto could change them).

pub(crate) mod loss;

use crate::bbr::Bbr;
use crate::context::{Built, ControllerContext, ControllerCounters};
use crate::engine::Engine;
use crate::signals::{Signal, Signals};
use loss::{LossRule, Reordering};
use quic::LossDetection;
use quic::congestion::{Controller, ControllerFactory, ControllerMetrics, RttEstimator};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// TECC's settings (`controller = { name = "tecc", … }`), checked when
/// the scenario is read.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawTecc")]
pub struct TeccSettings {
    /// θ as a fraction of T_s (paper: 2/3).
    pub theta: f64,
    /// δ (paper: 0.95).
    pub delta: f64,
    /// max_pf, the largest cut of U (paper: 1/2).
    pub max_penalty: f64,
    /// The EWMA weight of a new U(t) (the paper gives none; 1/4).
    pub ewma: f64,
    /// The window is this times Sr·srtt (paper: 1; we default to 2 so that
    /// ACKs held back by the tunnel's retransmissions do not stall a
    /// sender that pacing already limits).
    pub window_gain: f64,
    /// The server's time threshold for loss, in RTTs (RFC 9002 and the
    /// paper: 9/8), before T_r is added.
    pub time_threshold: f64,
    /// The server's packet (reordering) threshold at the start, packets
    /// (RFC 9002 and the paper: 3).
    pub packet_threshold: u32,
    /// How the packet threshold grows on spurious losses (default
    /// `"distance"`; `"step"`: one per spurious loss; `"fixed"`: never).
    pub reordering: Reordering,
    /// The most the packet threshold grows to (default 300, Linux's
    /// `tcp_max_reordering`).
    pub max_packet_threshold: u32,
    /// Add the tunnel's retransmission delay T_r to the time threshold
    /// (the paper's §4.2.5; default true).
    pub tunnel_repair_delay: bool,
    /// Add the additive-increase term MSS/T_s to Sr (the paper's MAIMD,
    /// §4.2.6); `false` leaves the MIMD law Figure 15 contrasts it with.
    pub additive_increase: bool,
}

/// The settings as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawTecc {
    theta: f64,
    delta: f64,
    max_penalty: f64,
    ewma: f64,
    window_gain: f64,
    time_threshold: f64,
    packet_threshold: u32,
    reordering: Reordering,
    max_packet_threshold: u32,
    tunnel_repair_delay: bool,
    additive_increase: bool,
}

impl Default for RawTecc {
    fn default() -> RawTecc {
        let d = TeccSettings::default();
        RawTecc {
            theta: d.theta,
            delta: d.delta,
            max_penalty: d.max_penalty,
            ewma: d.ewma,
            window_gain: d.window_gain,
            time_threshold: d.time_threshold,
            packet_threshold: d.packet_threshold,
            reordering: d.reordering,
            max_packet_threshold: d.max_packet_threshold,
            tunnel_repair_delay: d.tunnel_repair_delay,
            additive_increase: d.additive_increase,
        }
    }
}

impl TryFrom<RawTecc> for TeccSettings {
    type Error = String;

    fn try_from(raw: RawTecc) -> Result<TeccSettings, String> {
        let settings = TeccSettings {
            theta: raw.theta,
            delta: raw.delta,
            max_penalty: raw.max_penalty,
            ewma: raw.ewma,
            window_gain: raw.window_gain,
            time_threshold: raw.time_threshold,
            packet_threshold: raw.packet_threshold,
            reordering: raw.reordering,
            max_packet_threshold: raw.max_packet_threshold,
            tunnel_repair_delay: raw.tunnel_repair_delay,
            additive_increase: raw.additive_increase,
        };
        settings.check()?;
        Ok(settings)
    }
}

impl Default for TeccSettings {
    fn default() -> TeccSettings {
        TeccSettings {
            theta: 2.0 / 3.0,
            delta: 0.95,
            max_penalty: 0.5,
            ewma: 0.25,
            window_gain: 2.0,
            time_threshold: 9.0 / 8.0,
            packet_threshold: 3,
            reordering: Reordering::Distance,
            max_packet_threshold: 300,
            tunnel_repair_delay: true,
            additive_increase: true,
        }
    }
}

impl TeccSettings {
    /// Why TECC needs an input.
    pub const REQUIRES: &'static str = "tecc reads the tunnel server's feedback: run it on the \
        server of a flow through a TECC tunnel (middle = { kind = \"tecc\", mode = \"tecc\" })";

    /// Checks the ranges.
    pub fn check(&self) -> Result<(), String> {
        let unit = |x: f64| x > 0.0 && x <= 1.0;
        if !(self.theta > 0.0 && self.theta <= 10.0) {
            return Err("`theta` must be in (0, 10]".into());
        }
        if !unit(self.delta) || !unit(self.max_penalty) || !unit(self.ewma) {
            return Err("`delta`, `max_penalty` and `ewma` must be in (0, 1]".into());
        }
        if !(self.window_gain >= 1.0 && self.window_gain <= 10.0) {
            return Err("`window_gain` must be in [1, 10]".into());
        }
        if !(self.time_threshold >= 1.0 && self.time_threshold <= 10.0) {
            return Err("`time_threshold` must be in [1, 10]".into());
        }
        if self.packet_threshold < 3 {
            return Err("`packet_threshold` must be at least 3".into());
        }
        if !(self.max_packet_threshold >= self.packet_threshold
            && self.max_packet_threshold <= 100_000)
        {
            return Err(
                "`max_packet_threshold` must be at least `packet_threshold` and at most 100000"
                    .into(),
            );
        }
        Ok(())
    }

    /// The endpoint's loss thresholds (the controller replaces the packet
    /// threshold unless `reordering = "fixed"`).
    pub fn loss_detection(&self) -> LossDetection {
        LossDetection {
            packet_threshold: self.packet_threshold,
            time_threshold: self.time_threshold as f32,
        }
    }

    /// Builds it for one endpoint (the tunnel's feedback arrives on the
    /// context's signals).
    pub fn build(&self, context: &ControllerContext) -> Built {
        let stats = Arc::new(TeccStats::default());
        let factory = TeccFactory {
            settings: self.clone(),
            signals: context.signals.clone().unwrap_or_default(),
            bbr_seed: context.seed.derive("tecc/bbr"),
            stats: stats.clone(),
        };
        Built {
            factory: Arc::new(factory),
            counters: Some(stats),
            loss_detection: Some(self.loss_detection()),
        }
    }
}

/// What TECC counted, for the reports.
#[derive(Debug, Default)]
pub struct TeccStats {
    feedback: AtomicU64,
    rate_bps: AtomicU64,
    u_per_mille: AtomicU64,
    packet_threshold: AtomicU64,
}

impl ControllerCounters for TeccStats {
    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            (
                "tecc_feedback".into(),
                self.feedback.load(Ordering::Relaxed) as f64,
            ),
            (
                "tecc_rate_mbps".into(),
                self.rate_bps.load(Ordering::Relaxed) as f64 / 1e6,
            ),
            (
                "tecc_u".into(),
                self.u_per_mille.load(Ordering::Relaxed) as f64 / 1000.0,
            ),
            (
                "tecc_packet_threshold".into(),
                self.packet_threshold.load(Ordering::Relaxed) as f64,
            ),
        ]
    }
}

/// Builds [`Tecc`] controllers that read one endpoint's signals.
#[derive(Debug)]
pub struct TeccFactory {
    settings: TeccSettings,
    signals: Signals,
    bbr_seed: netsim::Seed,
    stats: Arc<TeccStats>,
}

impl ControllerFactory for TeccFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let s = &self.settings;
        let loss = LossRule::new(
            s.reordering,
            s.packet_threshold,
            s.max_packet_threshold,
            s.tunnel_repair_delay,
        );
        self.stats
            .packet_threshold
            .fetch_max(u64::from(loss.threshold()), Ordering::Relaxed);
        Box::new(Tecc {
            loss,
            bbr: Engine(Bbr::new(false, self.bbr_seed.rng("bbr"), current_mtu)),
            law: RateLaw::new(self.settings.clone()),
            signals: self.signals.clone(),
            mss: u64::from(current_mtu),
            min_rtt: None,
            srtt: None,
            last_sequence: None,
            stats: self.stats.clone(),
            received: Vec::new(),
        })
    }
}

/// Algorithm 1 alone, on numbers: testable against hand-computed values.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLaw {
    settings: TeccSettings,
    u: Option<f64>,
}

impl RateLaw {
    /// Before any feedback.
    pub fn new(settings: TeccSettings) -> RateLaw {
        RateLaw { settings, u: None }
    }

    /// The smoothed U, once a feedback arrived.
    pub fn u(&self) -> Option<f64> {
        self.u
    }

    /// Sr, bytes per second, for one feedback: the tunnel's rate `tr` (bytes
    /// per second), its queue `q` (bytes), its retransmission ratio `r`, the
    /// server's T_s and MSS.
    pub fn update(&mut self, tr: f64, q: f64, r: f64, t_s: Duration, mss: f64) -> f64 {
        let s = &self.settings;
        let t_s = t_s.as_secs_f64().max(1e-3);
        let theta = s.theta * t_s;
        let e = if tr > 0.0 {
            q / (theta * tr) + s.delta * r
        } else {
            1.0
        };
        let u_t = (1.0 - e).max(1.0 - s.max_penalty);
        let u = match self.u {
            None => u_t,
            Some(u) => (1.0 - s.ewma) * u + s.ewma * u_t,
        };
        self.u = Some(u);
        let additive = if s.additive_increase { mss / t_s } else { 0.0 };
        u * tr + additive
    }
}

/// TECC's controller on the application server.
#[derive(Debug)]
pub struct Tecc {
    bbr: Engine<Bbr>,
    loss: LossRule,
    law: RateLaw,
    signals: Signals,
    mss: u64,
    min_rtt: Option<Duration>,
    srtt: Option<Duration>,
    last_sequence: Option<u64>,
    stats: Arc<TeccStats>,
    /// Scratch for the signals drained.
    received: Vec<Signal>,
}

/// The rate TECC set, bytes per second, once it has one.
fn rate_of(stats: &TeccStats) -> Option<u64> {
    match stats.feedback.load(Ordering::Relaxed) {
        0 => None,
        _ => Some(stats.rate_bps.load(Ordering::Relaxed) / 8),
    }
}

impl Tecc {
    /// Reads the newest feedback, if any arrived, and applies Algorithm 1
    /// (signals of other kinds are drained and ignored).
    fn poll_feedback(&mut self) {
        self.received.clear();
        self.signals.drain_into(&mut self.received);
        let newest = self
            .received
            .iter()
            .filter_map(|signal| match signal {
                Signal::TunnelFeedback(feedback) => Some(*feedback),
                _ => None,
            })
            .filter(|f| self.last_sequence.is_none_or(|last| f.sequence > last))
            .max_by_key(|f| f.sequence);
        let Some(feedback) = newest else {
            return;
        };
        self.last_sequence = Some(feedback.sequence);
        self.loss
            .on_feedback(feedback.tunnel_min_rtt, feedback.repair_delay);
        let t_s = self.min_rtt.unwrap_or(Duration::from_millis(100));
        let sr = self.law.update(
            feedback.rate_bps as f64 / 8.0,
            feedback.queue_bytes as f64,
            feedback.retransmit_ppm as f64 / 1e6,
            t_s,
            self.mss as f64,
        );
        self.stats.feedback.fetch_add(1, Ordering::Relaxed);
        self.stats
            .rate_bps
            .store((sr * 8.0) as u64, Ordering::Relaxed);
        let u = self.law.u().unwrap_or(1.0);
        self.stats
            .u_per_mille
            .store((u * 1000.0) as u64, Ordering::Relaxed);
    }

    fn tecc_rate(&self) -> Option<u64> {
        rate_of(&self.stats).filter(|_| self.last_sequence.is_some())
    }
}

impl Controller for Tecc {
    fn on_packet_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.bbr.on_packet_sent(now, bytes, pn);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.min_rtt = Some(rtt.min());
        self.srtt = Some(rtt.get());
        self.bbr.on_ack(now, sent, bytes, pn, app_limited, rtt);
        self.poll_feedback();
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest: Option<u64>,
    ) {
        self.bbr.on_end_acks(now, in_flight, app_limited, largest);
        self.poll_feedback();
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        is_ecn: bool,
        lost_bytes: u64,
        largest_lost_pn: u64,
    ) {
        self.bbr.on_congestion_event(
            now,
            sent,
            is_persistent_congestion,
            is_ecn,
            lost_bytes,
            largest_lost_pn,
        );
    }

    fn on_packet_lost(&mut self, lost_bytes: u16, pn: u64, now: Instant) {
        self.bbr.on_packet_lost(lost_bytes, pn, now);
    }

    fn on_spurious_loss(&mut self, _now: Instant, pn: u64, largest_acked: u64) {
        self.loss.on_spurious_loss(pn, largest_acked);
        self.stats
            .packet_threshold
            .fetch_max(u64::from(self.loss.threshold()), Ordering::Relaxed);
    }

    fn extra_loss_delay(&self) -> Duration {
        self.loss.repair_delay(self.srtt, self.min_rtt)
    }

    fn packet_threshold(&self) -> Option<u32> {
        let t_r = self.loss.repair_delay(self.srtt, self.min_rtt);
        self.loss
            .packet_threshold_at(self.tecc_rate(), self.mss, t_r)
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mss = u64::from(new_mtu);
        self.bbr.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        let Some(rate) = self.tecc_rate() else {
            return self.bbr.window();
        };
        let srtt = self
            .srtt
            .or(self.min_rtt)
            .unwrap_or(Duration::from_millis(100));
        let window = rate as f64 * srtt.as_secs_f64() * self.law.settings.window_gain;
        (window as u64).max(4 * self.mss)
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = self.bbr.metrics();
        metrics.congestion_window = self.window();
        if let Some(rate) = self.tecc_rate() {
            metrics.pacing_rate = Some(rate.max(self.mss));
        }
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Tecc {
            bbr: self.bbr.clone(),
            loss: self.loss.clone(),
            law: self.law.clone(),
            signals: self.signals.clone(),
            mss: self.mss,
            min_rtt: self.min_rtt,
            srtt: self.srtt,
            last_sequence: self.last_sequence,
            stats: self.stats.clone(),
            received: Vec::new(),
        })
    }

    fn initial_window(&self) -> u64 {
        self.bbr.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_1_against_hand_computed_values() {
        let mut law = RateLaw::new(TeccSettings::default());
        let t_s = Duration::from_millis(150);
        // Tr = 1.25 MB/s (10 Mbit/s), q = 25 kB, r = 0, MSS = 1200:
        // θ = 0.1 s, e = 25000 / (0.1 · 1.25e6) = 0.2, U = 0.8,
        // Sr = 0.8 · 1.25e6 + 1200 / 0.15 = 1_000_000 + 8_000.
        let sr = law.update(1.25e6, 25_000.0, 0.0, t_s, 1200.0);
        assert!((sr - 1_008_000.0).abs() < 1e-6, "{sr}");
        // Then q = 0, r = 0.1: e = 0.95 · 0.1 = 0.095, U(t) = 0.905,
        // U = 0.75 · 0.8 + 0.25 · 0.905 = 0.82625,
        // Sr = 0.82625 · 1.25e6 + 8000 = 1_040_812.5.
        let sr = law.update(1.25e6, 0.0, 0.1, t_s, 1200.0);
        assert!((sr - 1_040_812.5).abs() < 1e-6, "{sr}");
        // A queue of 500 kB would make e = 4: U(t) is held at 1 − 1/2.
        // U = 0.75 · 0.82625 + 0.25 · 0.5 = 0.7446875.
        let sr = law.update(1.25e6, 500_000.0, 0.0, t_s, 1200.0);
        assert!((sr - (0.744_687_5 * 1.25e6 + 8000.0)).abs() < 1e-6, "{sr}");
    }

    #[test]
    fn without_additive_increase_the_law_is_mimd() {
        let mimd = TeccSettings {
            additive_increase: false,
            ..TeccSettings::default()
        };
        let mut law = RateLaw::new(mimd);
        // As above without the MSS/T_s term: U = 0.8, Sr = 0.8 · 1.25e6.
        let sr = law.update(1.25e6, 25_000.0, 0.0, Duration::from_millis(150), 1200.0);
        assert!((sr - 1_000_000.0).abs() < 1e-6, "{sr}");
    }

    #[test]
    fn the_settings_are_checked() {
        assert!(TeccSettings::default().check().is_ok());
        let bad = TeccSettings {
            max_penalty: 1.5,
            ..TeccSettings::default()
        };
        assert!(bad.check().is_err());
    }

    #[test]
    fn the_loss_settings_are_read_and_checked_by_name() {
        let read = |text: &str| toml::from_str::<TeccSettings>(text);
        let d = read("").unwrap();
        assert_eq!(
            (d.time_threshold, d.packet_threshold, d.reordering),
            (1.125, 3, Reordering::Distance)
        );
        let old = read(
            "time_threshold = 1.5\npacket_threshold = 10\nreordering = \"fixed\"\n\
             tunnel_repair_delay = false",
        )
        .unwrap();
        assert_eq!(old.loss_detection().packet_threshold, 10);
        let err = |text: &str| read(text).unwrap_err().to_string();
        assert!(err("packet_threshold = 2").contains("`packet_threshold`"));
        assert!(err("max_packet_threshold = 2").contains("`max_packet_threshold`"));
        assert!(err("time_threshold = 0.5").contains("`time_threshold`"));
        assert!(err("reordering = \"rack\"").contains("reordering"));
        assert!(err("reorder = \"step\"").contains("reorder"));
    }
}
