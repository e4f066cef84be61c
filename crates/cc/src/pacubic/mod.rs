//! PACUBIC: Sidekick's path-aware CUBIC (NSDI 2024 §4.3.2, appendix A),
//! a QUIC congestion controller that reads the near segment's signals
//! ([`crate::signals`], produced by a Sidekick sender engine).
//!
//! # Design
//!
//! One [`CubicCore`] window, two kinds of congestion event:
//!
//! * **Near-segment loss** ([`Signal::NearLost`]: the proxy did not
//!   receive these packets) → β' = 1 − r(1 − β), C' = C / r³, with r
//!   from [`PathRatio`]. The window drops by r times CUBIC's cut and grows
//!   back with K' = r^(4/3)·K; C' stays in force until the next end-to-end
//!   event, as in the authors' quiche (notes B.5).
//! * **End-to-end loss** (QUIC's own `on_congestion_event`) → plain CUBIC.
//!
//! The signals arrive in a shared queue ([`Signals`]); the controller
//! drains it at the start of every callback that has a `now` (packet sent,
//! ACK, end of an ACK batch, congestion event), so a signal is applied
//! within one callback of its arrival, and always before an end-to-end
//! congestion event that QUIC raises later. Signals of other kinds are
//! drained and ignored.
//!
//! ## Why no loss gets two responses
//!
//! The sender's Sidekick engine retransmits a packet the proxy did not
//! receive (byte for byte) and reports the loss about one near RTT plus up to one quACK
//! interval after sending it. QUIC notices the same hole an end-to-end RTT
//! later and raises its own congestion event for it. The core's recovery
//! rule ignores an event whose newest lost packet was sent at or before the
//! start of the current recovery period, and the quACK's event *starts* a
//! recovery period at the moment it is applied, which is after the lost
//! packet was sent (the signal carries its send time, `largest_sent_at`).
//! So QUIC's later event for that packet, or any packet sent before it,
//! finds itself covered and is ignored. The same rule gives one reduction
//! per recovery period across both kinds of events. This needs the
//! signal's virtual send time and the controller's `Instant`s on one scale:
//! [`PacubicConfig::clock`] must be the clock the QUIC endpoint uses.
//!
//! The retransmitted copy usually reaches the receiver after QUIC has
//! declared the original lost, and its ACK makes noq-proto report the loss
//! as spurious (`on_spurious_congestion_event`). That report undoes the
//! last end-to-end reduction only: a quACK-driven reduction drops its saved
//! state (the proxy saw the loss, it was real), so an end-to-end event
//! that was ignored and then reported spurious restores nothing.
//!
//! ## ACK reduction (`quack_acks`)
//!
//! With [`PacubicConfig::quack_acks`] (the paper's `mark_acked`, §2.3,
//! notes B.6) the bytes a quACK shows received grow the window as an ACK
//! would, and [`Controller::window`] is cwnd plus the quACKed bytes not
//! yet acknowledged end to end, so they no longer hold back sending while
//! QUIC keeps them for retransmission. The engine does not know packet
//! numbers, so that balance is kept in bytes: quACKed bytes add to it, and
//! an end-to-end ACK first uses it up (those bytes already grew the window)
//! before growing the window with the rest. Bytes QUIC declares lost come
//! off it too (they were lost after the proxy, or are being resent).
//! QuACK ACKs carry no send time; the [`Signal::NearRtt`] that follows
//! them gives the newest one's (callback time minus the sample, a slight
//! overestimate by the delay until the next callback), which is what the
//! recovery rule checks.

mod settings;
pub use settings::PacubicSettings;

use crate::cubic::{CubicCore, CubicParams, DEFAULT_INITIAL_WINDOW};
use crate::ratio::PathRatio;
use crate::signals::{Signal, Signals};
use quic::SimClock;
use quic::congestion::{Controller, ControllerFactory, ControllerMetrics, RttEstimator};
use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How PACUBIC responds, and how it reads the signals' times.
#[derive(Clone, Debug)]
pub struct PacubicConfig {
    /// The end-to-end constants (default RFC 9438's β = 0.7, C = 0.4);
    /// near-segment events derive β' and C' from them.
    pub base: CubicParams,
    /// Use this r instead of estimating it (the paper used 1/26).
    pub fixed_ratio: Option<f64>,
    /// Count quACKed bytes as acknowledged for the window (default off).
    pub quack_acks: bool,
    /// Initial window, bytes (default 12 000).
    pub initial_window: u64,
    /// The clock of the QUIC endpoint: maps the signals' virtual send
    /// times onto the controller's `Instant`s. (In a real deployment: a
    /// clock whose origin is the producer's time zero.)
    pub clock: SimClock,
}

impl PacubicConfig {
    /// Defaults with `clock`, which must be the QUIC endpoint's.
    pub fn new(clock: SimClock) -> PacubicConfig {
        PacubicConfig {
            base: CubicParams::RFC9438,
            fixed_ratio: None,
            quack_acks: false,
            initial_window: DEFAULT_INITIAL_WINDOW,
            clock,
        }
    }

    /// Fixes r (clamped to [`crate::MIN_RATIO`]..=[`crate::MAX_RATIO`]).
    pub fn with_fixed_ratio(mut self, r: f64) -> PacubicConfig {
        self.fixed_ratio = Some(r);
        self
    }

    /// Turns the quACK ACKs on or off.
    pub fn with_quack_acks(mut self, on: bool) -> PacubicConfig {
        self.quack_acks = on;
        self
    }
}

/// What the controllers of one factory did, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacubicStats {
    /// `Lost` events from quACKs.
    pub quack_losses: u64,
    /// ... that reduced the window.
    pub quack_reductions: u64,
    /// End-to-end congestion events from QUIC.
    pub e2e_events: u64,
    /// ... that reduced the window (the rest were covered by a recovery
    /// period, most by a quACK's).
    pub e2e_reductions: u64,
    /// Spurious-loss reports from QUIC.
    pub spurious_reports: u64,
    /// ... that restored the window.
    pub spurious_rollbacks: u64,
    /// Bytes quACKed (counted only with `quack_acks`).
    pub quacked_bytes: u64,
    /// The minimum near-segment RTT behind the last quACK response's r.
    pub near_min_rtt: Option<Duration>,
    /// The minimum end-to-end RTT behind the last quACK response's r.
    pub e2e_min_rtt: Option<Duration>,
    /// That r, in millionths.
    pub ratio_ppm: u32,
}

/// The PACUBIC controller of one connection.
#[derive(Clone, Debug)]
pub struct Pacubic {
    core: CubicCore,
    config: Arc<PacubicConfig>,
    signals: Signals,
    ratio: PathRatio,
    /// The QUIC estimator's smoothed RTT at the last ACK.
    smoothed_rtt: Option<Duration>,
    /// QuACKed bytes not yet acknowledged end to end.
    quacked_pending: u64,
    stats: Arc<Mutex<PacubicStats>>,
    scratch: Vec<Signal>,
}

impl Pacubic {
    /// A controller for segments of `mtu` bytes that reads `signals`.
    pub fn new(config: Arc<PacubicConfig>, signals: Signals, mtu: u16) -> Pacubic {
        Pacubic {
            core: CubicCore::new(config.base, config.initial_window, mtu),
            ratio: PathRatio::new(config.fixed_ratio),
            config,
            signals,
            smoothed_rtt: None,
            quacked_pending: 0,
            stats: Arc::default(),
            scratch: Vec::new(),
        }
    }

    fn with_stats(mut self, stats: Arc<Mutex<PacubicStats>>) -> Pacubic {
        self.stats = stats;
        self
    }

    /// The window state machine.
    pub fn core(&self) -> &CubicCore {
        &self.core
    }

    /// The r estimator.
    pub fn ratio(&self) -> &PathRatio {
        &self.ratio
    }

    /// QuACKed bytes not yet acknowledged end to end (0 without
    /// `quack_acks`).
    pub fn quacked_pending(&self) -> u64 {
        self.quacked_pending
    }

    /// This controller's counters (shared with its factory's).
    pub fn stats(&self) -> PacubicStats {
        *self.stats.lock().expect("stats lock")
    }

    fn count(&self, f: impl FnOnce(&mut PacubicStats)) {
        f(&mut self.stats.lock().expect("stats lock"));
    }

    /// Applies every signal queued so far, at `now`.
    pub fn poll_signals(&mut self, now: Instant) {
        let mut events = std::mem::take(&mut self.scratch);
        self.signals.drain_into(&mut events);
        if events.is_empty() {
            self.scratch = events;
            return;
        }
        for (i, event) in events.iter().enumerate() {
            match *event {
                Signal::NearRtt(rtt) => self.ratio.on_near_rtt(rtt),
                Signal::NearLost {
                    largest_sent_at, ..
                } => self.on_near_loss(now, self.config.clock.instant(largest_sent_at)),
                Signal::NearReceived { bytes, .. } if self.config.quack_acks => {
                    // A NearReceived is followed by the NearRtt of its
                    // newest packet.
                    let sent = match events.get(i + 1) {
                        Some(Signal::NearRtt(rtt)) => now.checked_sub(*rtt).unwrap_or(now),
                        _ => now,
                    };
                    self.on_quacked(now, sent, bytes);
                }
                Signal::NearReceived { .. }
                | Signal::ProxyActive
                | Signal::NoProxy
                | Signal::NearReset
                | Signal::TunnelFeedback(_) => {}
            }
        }
        events.clear();
        self.scratch = events;
    }

    /// With `quack_acks`, the bytes of quACKs reported that no callback has
    /// applied yet. A sender that the window stops gets no
    /// callbacks until an end-to-end ACK arrives, so the window must see
    /// them at once, or quACKs could not advance it between rare ACKs.
    fn queued_quacked_bytes(&self) -> u64 {
        if !self.config.quack_acks {
            return 0;
        }
        self.signals.sum_queued(|signal| match signal {
            Signal::NearReceived { bytes, .. } => *bytes,
            _ => 0,
        })
    }

    /// A quACK showed packets lost on the near segment, the newest sent at
    /// `sent`.
    fn on_near_loss(&mut self, now: Instant, sent: Instant) {
        let response = self.ratio.near_response(self.config.base);
        // The proxy saw the hole: this loss is real, and a later spurious
        // report must not undo it (nor an older reduction).
        let reduced = self
            .core
            .on_congestion_signal(now, sent.min(now), false, true, response);
        let ratio = self.ratio;
        self.count(|s| {
            s.quack_losses += 1;
            s.quack_reductions += u64::from(reduced);
            s.near_min_rtt = ratio.near_min();
            s.e2e_min_rtt = ratio.e2e_min();
            s.ratio_ppm = (ratio.get() * 1e6).round() as u32;
        });
    }

    /// A quACK showed `bytes` received, the newest sent at `sent`.
    fn on_quacked(&mut self, now: Instant, sent: Instant, bytes: u64) {
        self.quacked_pending = self.quacked_pending.saturating_add(bytes);
        let rtt = self
            .smoothed_rtt
            .or(self.ratio.near_min())
            .unwrap_or_default();
        self.core.on_ack(now, sent, bytes, false, rtt);
        self.count(|s| s.quacked_bytes += bytes);
    }

    /// An end-to-end ACK of `bytes` sent at `sent`, with the QUIC
    /// estimator's `smoothed` and `min` RTT (the sans-IO form of
    /// [`Controller::on_ack`]).
    pub fn handle_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        smoothed: Duration,
        min: Duration,
    ) {
        self.poll_signals(now);
        self.smoothed_rtt = Some(smoothed);
        self.ratio.on_e2e_min_rtt(min);
        let mut bytes = bytes;
        if self.config.quack_acks {
            // Bytes a quACK already counted do not grow the window again.
            let counted = bytes.min(self.quacked_pending);
            self.quacked_pending -= counted;
            bytes -= counted;
        }
        if bytes > 0 {
            self.core.on_ack(now, sent, bytes, app_limited, smoothed);
        }
    }
}

impl Controller for Pacubic {
    fn on_sent(&mut self, now: Instant, _bytes: u64, _largest_pn: u64) {
        self.poll_signals(now);
    }

    fn on_packet_sent(&mut self, now: Instant, _bytes: u16, _pn: u64) {
        self.poll_signals(now);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        _pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.handle_ack(now, sent, bytes, app_limited, rtt.get(), rtt.min());
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        _app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.poll_signals(now);
        // QuACKed bytes are still in flight until acknowledged end to end.
        // A quACKed packet lost after the proxy leaves the flight when QUIC
        // declares it lost; which lost bytes had been quACKed is unknown
        // (most losses happen before the proxy, unquACKed), so the balance
        // is bounded here rather than debited on every loss.
        self.quacked_pending = self.quacked_pending.min(in_flight);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        is_ecn: bool,
        _lost_bytes: u64,
        _largest_lost_pn: u64,
    ) {
        // A quACK may have reported this loss already: apply it first.
        self.poll_signals(now);
        if self.config.quack_acks && is_persistent_congestion {
            self.quacked_pending = 0;
        }
        // ECN marks are never spurious.
        let reduced = self.core.on_congestion_signal(
            now,
            sent,
            is_persistent_congestion,
            is_ecn,
            self.config.base,
        );
        self.count(|s| {
            s.e2e_events += 1;
            s.e2e_reductions += u64::from(reduced);
        });
    }

    fn on_spurious_congestion_event(&mut self) {
        let restored = self.core.undo_last_reduction();
        self.count(|s| {
            s.spurious_reports += 1;
            s.spurious_rollbacks += u64::from(restored);
        });
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.core.set_mtu(new_mtu);
    }

    fn window(&self) -> u64 {
        self.core
            .window()
            .saturating_add(self.quacked_pending)
            .saturating_add(self.queued_quacked_bytes())
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window();
        metrics.ssthresh = Some(self.core.ssthresh());
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.core.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds [`Pacubic`] controllers that read one queue of signals.
#[derive(Debug)]
pub struct PacubicFactory {
    signals: Signals,
    config: Arc<PacubicConfig>,
    stats: Arc<Mutex<PacubicStats>>,
}

impl PacubicFactory {
    /// A factory whose controllers drain `signals` (the queue the near
    /// segment's signals are pushed to).
    pub fn new(signals: Signals, config: PacubicConfig) -> PacubicFactory {
        PacubicFactory {
            signals,
            config: Arc::new(config),
            stats: Arc::default(),
        }
    }

    /// The counters of every controller built so far, summed.
    pub fn stats(&self) -> PacubicStats {
        *self.stats.lock().expect("stats lock")
    }
}

impl ControllerFactory for PacubicFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(
            Pacubic::new(self.config.clone(), self.signals.clone(), current_mtu)
                .with_stats(self.stats.clone()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsim::Time;

    const MSS: u16 = 1200;
    const R: f64 = 1.0 / 26.0;

    /// `window` is `expected` bytes, give or take rounding.
    fn assert_near(window: u64, expected: f64) {
        assert!(
            (window as f64 - expected).abs() <= 1.0,
            "window {window}, expected {expected}"
        );
    }

    struct Rig {
        clock: SimClock,
        signals: Signals,
        cc: Pacubic,
    }

    impl Rig {
        fn new(config: impl FnOnce(PacubicConfig) -> PacubicConfig) -> Rig {
            let clock = SimClock::new();
            let signals = Signals::default();
            let config = Arc::new(config(PacubicConfig::new(clock)));
            let cc = Pacubic::new(config, signals.clone(), MSS);
            Rig { clock, signals, cc }
        }

        fn at(&self, ms: u64) -> Instant {
            self.clock.instant(Time::from_millis(ms))
        }

        fn push(&self, signal: Signal) {
            self.signals.push(signal);
        }

        /// A near-segment loss of one packet sent at `sent_ms`, applied at
        /// `now_ms` (by the next packet sent).
        fn quack_loss(&mut self, sent_ms: u64, now_ms: u64) {
            self.push(Signal::NearLost {
                packets: 1,
                bytes: 1200,
                largest_sent_at: Time::from_millis(sent_ms),
            });
            let now = self.at(now_ms);
            self.cc.on_packet_sent(now, 1200, 0);
        }

        /// QUIC's loss of a packet sent at `sent_ms`, detected at `now_ms`.
        fn e2e_loss(&mut self, sent_ms: u64, now_ms: u64) {
            let (now, sent) = (self.at(now_ms), self.at(sent_ms));
            self.cc
                .on_congestion_event(now, sent, false, false, 1200, 0);
        }

        /// End-to-end ACKs of segments sent one RTT before, every 0.6 ms
        /// from `from_ms` to `to_ms`.
        fn acks(&mut self, from_ms: u64, to_ms: u64, rtt: Duration) {
            let mut now = self.at(from_ms);
            while now < self.at(to_ms) {
                now += Duration::from_micros(600);
                self.cc.handle_ack(now, now - rtt, 1200, false, rtt, rtt);
            }
        }

        /// Puts the window at `bytes` in congestion avoidance, with a
        /// reduction long ago.
        fn start_at(&mut self, bytes: u64) {
            self.cc.core = CubicCore::new(CubicParams::RFC9438, bytes, MSS);
            let t = self.at(0);
            self.cc
                .core
                .on_congestion_event(t, t, false, CubicParams { beta: 1.0, c: 0.4 });
            self.cc.core.forget_saved();
        }
    }

    #[test]
    fn quack_loss_cuts_by_r_times_cubic() {
        let mut rig = Rig::new(|c| c.with_fixed_ratio(R));
        rig.start_at(120_000);
        rig.quack_loss(100, 110);
        let w = rig.cc.window();
        // β' = 1 − 0.3/26 ≈ 0.98846: a 1.15 % cut.
        assert_near(w, 120_000.0 * (1.0 - 0.3 / 26.0));
        assert!((118_500..=118_700).contains(&w), "{w}");
        assert!((rig.cc.core().growth_constant() - 0.4 * 26f64.powi(3)).abs() < 1e-6);
        let stats = rig.cc.stats();
        assert_eq!((stats.quack_losses, stats.quack_reductions), (1, 1));
    }

    #[test]
    fn e2e_loss_cuts_by_thirty_percent() {
        let mut rig = Rig::new(|c| c.with_fixed_ratio(R));
        rig.start_at(120_000);
        rig.e2e_loss(100, 160);
        assert_eq!(rig.cc.window(), 84_000);
        assert_eq!(rig.cc.core().growth_constant(), 0.4);
        assert_eq!(rig.cc.metrics().ssthresh, Some(84_000));
        assert_eq!(rig.cc.metrics().congestion_window, 84_000);
    }

    #[test]
    fn e2e_detection_of_a_quacked_loss_does_not_cut_again() {
        let mut rig = Rig::new(|c| c.with_fixed_ratio(R));
        rig.start_at(120_000);
        // Packet sent at 100 ms, lost before the proxy; the quACK at 125 ms.
        rig.quack_loss(100, 125);
        let after_quack = rig.cc.window();
        // QUIC finds the same hole (and one sent just before it) an
        // end-to-end RTT later.
        rig.e2e_loss(100, 160);
        rig.e2e_loss(90, 161);
        assert_eq!(rig.cc.window(), after_quack);
        // The sidekick's copy gets acknowledged: noq-proto reports the
        // loss as spurious. Nothing to undo: the quACK's cut stays.
        rig.cc.on_spurious_congestion_event();
        assert_eq!(rig.cc.window(), after_quack);
        let stats = rig.cc.stats();
        assert_eq!(stats.e2e_events, 2);
        assert_eq!(stats.e2e_reductions, 0);
        assert_eq!((stats.spurious_reports, stats.spurious_rollbacks), (1, 0));
        // A loss of a packet sent after the quACK's period started is new.
        rig.e2e_loss(126, 200);
        assert_eq!(rig.cc.window(), (after_quack as f64 * 0.7) as u64);
    }

    #[test]
    fn quack_loss_inside_an_e2e_recovery_period_is_ignored() {
        // The engine's virtual send time is compared with the recovery
        // start through the endpoint's clock.
        let mut rig = Rig::new(|c| c.with_fixed_ratio(R));
        rig.start_at(120_000);
        rig.e2e_loss(150, 200);
        assert_eq!(rig.cc.window(), 84_000);
        // Sent at 190 ms, before the period began at 200 ms: covered.
        rig.quack_loss(190, 210);
        assert_eq!(rig.cc.window(), 84_000);
        // Sent at 205 ms: a new period, a small cut.
        rig.quack_loss(205, 230);
        assert_near(rig.cc.window(), 84_000.0 * (1.0 - 0.3 / 26.0));
        let stats = rig.cc.stats();
        assert_eq!((stats.quack_losses, stats.quack_reductions), (2, 1));
        // The quACK's cut was real: a spurious report now restores nothing.
        rig.cc.on_spurious_congestion_event();
        assert!(rig.cc.window() < 84_000);
    }

    #[test]
    fn quack_applied_before_a_simultaneous_e2e_event() {
        // The quACK's Lost is still queued when QUIC raises its event:
        // the controller applies the queue first, so the quACK's smaller
        // cut is the response.
        let mut rig = Rig::new(|c| c.with_fixed_ratio(R));
        rig.start_at(120_000);
        rig.push(Signal::NearLost {
            packets: 1,
            bytes: 1200,
            largest_sent_at: Time::from_millis(100),
        });
        rig.e2e_loss(100, 150);
        assert_near(rig.cc.window(), 120_000.0 * (1.0 - 0.3 / 26.0));
    }

    #[test]
    fn spurious_e2e_loss_is_rolled_back() {
        let mut rig = Rig::new(|c| c);
        rig.start_at(120_000);
        rig.e2e_loss(100, 160);
        assert_eq!(rig.cc.window(), 84_000);
        rig.cc.on_spurious_congestion_event();
        assert_eq!(rig.cc.window(), 120_000);
        assert_eq!(rig.cc.stats().spurious_rollbacks, 1);
    }

    #[test]
    fn growth_after_a_quack_loss_is_faster() {
        let rtt = Duration::from_millis(52);
        let grown = |near: bool| {
            let mut rig = Rig::new(|c| c.with_fixed_ratio(R));
            rig.start_at(120_000);
            if near {
                rig.quack_loss(100, 110);
            } else {
                rig.e2e_loss(100, 110);
            }
            let cut = rig.cc.window();
            rig.acks(110, 610, rtt);
            rig.cc.window() - cut
        };
        let (near, e2e) = (grown(true), grown(false));
        // C' = 7030: W_max is back within K' ≈ 0.03 s and the window then
        // grows convexly, bounded by 1.5× per RTT; plain CUBIC's K is 4.2 s.
        assert!(near > 100_000, "after a quACK loss: +{near} B in 0.5 s");
        assert!(e2e < 20_000, "after an e2e loss: +{e2e} B in 0.5 s");
    }

    #[test]
    fn r_is_estimated_from_near_and_e2e_rtts() {
        let mut rig = Rig::new(|c| c);
        rig.start_at(120_000);
        // Only near samples: r = 1, a quACK loss is a plain CUBIC loss.
        rig.push(Signal::NearRtt(Duration::from_millis(20)));
        rig.push(Signal::NearRtt(Duration::from_millis(2)));
        rig.quack_loss(100, 110);
        assert_eq!(rig.cc.ratio().get(), 1.0);
        assert_eq!(rig.cc.window(), 84_000);
        // End-to-end samples: min RTT 52 ms → r = 2/52.
        let now = rig.at(200);
        for min in [60, 52, 55] {
            let min = Duration::from_millis(min);
            rig.cc.handle_ack(now, now - min, 1200, false, min, min);
        }
        let r = rig.cc.ratio().get();
        assert!((r - 2.0 / 52.0).abs() < 1e-9, "r = {r}");
        let before = rig.cc.window();
        rig.quack_loss(300, 310);
        // Fast convergence lowers W_max, not the window's cut.
        assert_near(rig.cc.window(), before as f64 * (1.0 - 0.3 * 2.0 / 52.0));
    }

    #[test]
    fn quack_acks_advance_the_window_once() {
        let mut rig = Rig::new(|c| c.with_quack_acks(true));
        let initial = rig.cc.window();
        assert_eq!(initial, 12_000);
        // In slow start: 6000 quACKed bytes grow cwnd by 6000 and also
        // stay outside the window until acknowledged end to end.
        rig.push(Signal::NearReceived {
            packets: 5,
            bytes: 6000,
        });
        rig.push(Signal::NearRtt(Duration::from_millis(3)));
        rig.cc.on_packet_sent(rig.at(10), 1200, 1);
        assert_eq!(rig.cc.quacked_pending(), 6000);
        assert_eq!(rig.cc.core().window(), 18_000);
        assert_eq!(rig.cc.window(), 24_000);
        // The end-to-end ACK of those bytes grows nothing and releases
        // them; a further 1200 B not quACKed grow cwnd as usual.
        let rtt = Duration::from_millis(52);
        let now = rig.at(60);
        rig.cc.handle_ack(now, rig.at(5), 6000, false, rtt, rtt);
        assert_eq!(rig.cc.quacked_pending(), 0);
        assert_eq!(rig.cc.window(), 18_000);
        rig.cc.handle_ack(now, rig.at(5), 1200, false, rtt, rtt);
        assert_eq!(rig.cc.window(), 19_200);
        // A quACK opens the window at once, before any callback applies
        // it: a window-limited sender gets no callback until an ACK.
        rig.push(Signal::NearReceived {
            packets: 2,
            bytes: 2400,
        });
        assert_eq!(rig.cc.window(), 21_600);
        // QuACKed bytes no longer in flight (declared lost after the
        // proxy) leave the balance.
        rig.cc.on_end_acks(rig.at(100), 1200, false, None);
        assert_eq!(rig.cc.quacked_pending(), 1200);
        assert_eq!(rig.cc.stats().quacked_bytes, 8400);
    }

    #[test]
    fn quack_acks_off_ignores_received() {
        let mut rig = Rig::new(|c| c);
        rig.push(Signal::NearReceived {
            packets: 5,
            bytes: 6000,
        });
        rig.cc.on_packet_sent(rig.at(10), 1200, 1);
        assert_eq!(rig.cc.window(), 12_000);
        assert_eq!(rig.cc.quacked_pending(), 0);
    }

    #[test]
    fn factory_shares_signals_and_stats() {
        let clock = SimClock::new();
        let signals = Signals::default();
        let factory = Arc::new(PacubicFactory::new(
            signals.clone(),
            PacubicConfig::new(clock).with_fixed_ratio(R),
        ));
        let mut cc = factory.clone().build(clock.instant(Time::ZERO), MSS);
        signals.push(Signal::NearLost {
            packets: 1,
            bytes: 1200,
            largest_sent_at: Time::from_millis(5),
        });
        cc.on_end_acks(clock.instant(Time::from_millis(20)), 0, false, None);
        assert!(signals.is_empty());
        assert_eq!(factory.stats().quack_reductions, 1);
        assert_near(cc.window(), 12_000.0 * (1.0 - 0.3 / 26.0));
    }
}
