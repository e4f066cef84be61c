//! CUBIC (RFC 9438) as a sans-IO core, and a plain controller around it.
//!
//! # Design
//!
//! [`CubicCore`] holds the window state and nothing else: callers pass
//! every time in (`Instant`s from the endpoint's clock) and say, per
//! congestion event, which constants respond to it ([`CubicParams`]). That
//! lets PACUBIC respond to a near-segment loss with β' and C' and to an
//! end-to-end loss with plain β and C on one window. The growth constant
//! of the last reduction stays in force until the next one (the authors'
//! quiche does the same: "all later cwnd growth uses C'").
//!
//! * **Slow start** while the window is below ssthresh: the window grows
//!   by the acknowledged bytes.
//! * **Congestion avoidance** (RFC 9438 §4.2–4.4): the target is
//!   W_cubic(t + RTT) clamped to [cwnd, 1.5·cwnd], approached by
//!   (target − cwnd)/cwnd per acknowledged byte; the Reno-friendly estimate
//!   W_est grows by α = 3(1 − β)/(1 + β) segments per window (1 once it
//!   passes W_max), and the window follows W_est while W_cubic is below it.
//!   α always uses the base β (as the reference PACUBIC does), whatever β
//!   the last event used. t counts from the last reduction (the start of
//!   the recovery period), or from the first ACK in congestion avoidance
//!   after slow start, with K = 0 there.
//! * **Reduction** (§4.6–4.7): W_max is the window before the event, or
//!   (fast convergence) cwnd·(1 + β)/2 if the window is still below the
//!   previous W_max; ssthresh = cwnd = max(β·cwnd, 2·MSS);
//!   K = ∛((W_max − cwnd)/C) in segments.
//! * **One reduction per recovery period** (RFC 9002 §7.3.2): a congestion
//!   event for a packet sent at or before the start of the current
//!   recovery period is ignored, and ACKs of such packets do not grow the
//!   window. This rule is also what keeps PACUBIC from responding twice to
//!   one loss (see the `pacubic` module).
//! * **Spurious events**: each reduction saves the state it replaced;
//!   [`CubicCore::undo_last_reduction`] puts it back (if the window is still
//!   below it). A caller that knows a reduction is real can drop the saved
//!   state with [`CubicCore::forget_saved`].
//! * **Persistent congestion** collapses the window to the minimum,
//!   2·MSS, and leaves recovery so that slow start resumes.
//!
//! The arithmetic is in `f64` (the cubic function needs a cube root); the
//! window itself is whole bytes, and fractional growth is carried over as
//! credit, so many small ACKs add up exactly as one large one.

use quic::congestion::{Controller, ControllerFactory, ControllerMetrics, RttEstimator};
use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The two constants of CUBIC's response to a congestion event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicParams {
    /// Multiplicative decrease: the window after an event is β times the
    /// window before it (RFC 9438: 0.7).
    pub beta: f64,
    /// Scaling of the cubic growth function, in segments per second cubed
    /// (RFC 9438: 0.4).
    pub c: f64,
}

impl CubicParams {
    /// RFC 9438's constants: β = 0.7, C = 0.4.
    pub const RFC9438: CubicParams = CubicParams { beta: 0.7, c: 0.4 };

    /// α of the Reno-friendly estimate, 3(1 − β)/(1 + β) segments per
    /// window acknowledged.
    pub fn reno_alpha(&self) -> f64 {
        3.0 * (1.0 - self.beta) / (1.0 + self.beta)
    }
}

impl Default for CubicParams {
    fn default() -> CubicParams {
        CubicParams::RFC9438
    }
}

/// The window state that a spurious event rolls back.
#[derive(Clone, Debug)]
struct State {
    /// Congestion window, bytes.
    window: u64,
    /// Slow-start threshold, bytes (`u64::MAX` before the first event).
    ssthresh: u64,
    /// Window before the last reduction, bytes.
    w_max: f64,
    /// Time from the epoch start until W_cubic reaches W_max, seconds.
    k: f64,
    /// Growth constant of the last reduction, segments/s³.
    c: f64,
    /// Reno-friendly window estimate, bytes.
    w_est: f64,
    /// Growth not yet added to the window, bytes (< 1).
    credit: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch_start: Option<Instant>,
    /// Start of the current recovery period.
    recovery_start: Option<Instant>,
}

/// CUBIC's window state machine, with byte-based windows.
#[derive(Clone, Debug)]
pub struct CubicCore {
    base: CubicParams,
    mss: u64,
    initial_window: u64,
    state: State,
    saved: Option<State>,
}

impl CubicCore {
    /// A core in slow start with `initial_window` bytes, segments of `mtu`
    /// bytes, and `base` as the constants of the Reno-friendly estimate and
    /// the initial growth constant.
    pub fn new(base: CubicParams, initial_window: u64, mtu: u16) -> CubicCore {
        let mss = u64::from(mtu);
        CubicCore {
            base,
            mss,
            initial_window,
            state: State {
                window: initial_window.max(2 * mss),
                ssthresh: u64::MAX,
                w_max: 0.0,
                k: 0.0,
                c: base.c,
                w_est: 0.0,
                credit: 0.0,
                epoch_start: None,
                recovery_start: None,
            },
            saved: None,
        }
    }

    /// The congestion window, bytes.
    pub fn window(&self) -> u64 {
        self.state.window
    }

    /// The slow-start threshold, bytes (`u64::MAX` before the first
    /// congestion event).
    pub fn ssthresh(&self) -> u64 {
        self.state.ssthresh
    }

    /// The window before the last reduction, bytes.
    pub fn w_max(&self) -> u64 {
        self.state.w_max as u64
    }

    /// The growth constant in force (that of the last reduction).
    pub fn growth_constant(&self) -> f64 {
        self.state.c
    }

    /// The window this core started with, bytes.
    pub fn initial_window(&self) -> u64 {
        self.initial_window
    }

    /// The segment size, bytes (the current MTU).
    pub fn mss(&self) -> u64 {
        self.mss
    }

    /// The smallest window after a reduction: 2 segments.
    pub fn minimum_window(&self) -> u64 {
        2 * self.mss
    }

    /// The MTU changed: segments are now `mtu` bytes.
    pub fn set_mtu(&mut self, mtu: u16) {
        self.mss = u64::from(mtu);
        self.state.window = self.state.window.max(self.minimum_window());
    }

    /// Whether a packet sent at `sent` belongs to the current recovery
    /// period's past: its loss gets no response and its ACK no growth.
    pub fn is_recovering_from(&self, sent: Instant) -> bool {
        self.state.recovery_start.is_some_and(|start| sent <= start)
    }

    /// When the current recovery period started, if one did.
    pub fn recovery_start(&self) -> Option<Instant> {
        self.state.recovery_start
    }

    /// `bytes` of a packet sent at `sent` were acknowledged at `now`;
    /// `rtt` is the smoothed round-trip time. Nothing grows while the
    /// sender was application-limited or for packets sent before the
    /// current recovery period.
    pub fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: Duration,
    ) {
        if app_limited || self.is_recovering_from(sent) {
            return;
        }
        let state = &mut self.state;
        if state.window < state.ssthresh {
            state.window = state.window.saturating_add(bytes);
            return;
        }
        let epoch_start = match state.epoch_start {
            Some(start) => start,
            None => {
                // Congestion avoidance straight from slow start: K = 0.
                state.epoch_start = Some(now);
                state.w_max = state.window as f64;
                state.k = 0.0;
                state.w_est = state.window as f64;
                now
            }
        };
        let mss = self.mss as f64;
        let cwnd = state.window as f64;
        let t = now.saturating_duration_since(epoch_start).as_secs_f64();

        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.3
        // W_est grows by α segments per window acknowledged, and by one
        // once it reaches W_max.
        let alpha = if state.w_est >= state.w_max {
            1.0
        } else {
            self.base.reno_alpha()
        };
        state.w_est += alpha * mss * bytes as f64 / cwnd;

        let w_cubic = |t: f64| (state.c * (t - state.k).powi(3) + state.w_max / mss) * mss;
        if w_cubic(t) < state.w_est {
            // Reno-friendly region: follow W_est.
            if state.w_est > cwnd {
                state.window = state.w_est as u64;
            }
            return;
        }
        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.2
        // target = W_cubic(t + RTT), within [cwnd, 1.5·cwnd]; the window
        // moves (target − cwnd)/cwnd per acknowledged byte.
        let target = w_cubic(t + rtt.as_secs_f64()).clamp(cwnd, 1.5 * cwnd);
        state.credit += (target - cwnd) * bytes as f64 / cwnd;
        let whole = state.credit.floor();
        state.credit -= whole;
        state.window = state.window.saturating_add(whole as u64);
    }

    /// A congestion event at `now` for packets the latest of which was
    /// sent at `sent`, answered with `response`'s β and C. Returns whether
    /// the window was reduced: an event for a packet sent before the
    /// current recovery period started is ignored.
    pub fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        response: CubicParams,
    ) -> bool {
        if self.is_recovering_from(sent) {
            return false;
        }
        self.saved = Some(self.state.clone());
        let min_window = self.minimum_window();
        let mss = self.mss as f64;
        let state = &mut self.state;
        let cwnd = state.window as f64;
        let beta = response.beta;
        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.7
        // Fast convergence: a window still below the last W_max releases
        // bandwidth by lowering W_max further; the β reduction still
        // applies to the window itself.
        state.w_max = if cwnd < state.w_max {
            cwnd * (1.0 + beta) / 2.0
        } else {
            cwnd
        };
        //= https://www.rfc-editor.org/rfc/rfc9438#section-4.6
        state.ssthresh = ((cwnd * beta) as u64).max(min_window);
        state.window = state.ssthresh;
        state.c = response.c;
        state.k = ((state.w_max - state.window as f64).max(0.0) / mss / state.c).cbrt();
        state.w_est = state.window as f64;
        state.credit = 0.0;
        state.epoch_start = Some(now);
        state.recovery_start = Some(now);
        if persistent {
            // RFC 9002 §7.6.2: collapse to the minimum window and slow-start
            // back to ssthresh.
            state.window = min_window;
            state.recovery_start = None;
            state.epoch_start = None;
        }
        true
    }

    /// [`CubicCore::on_congestion_event`] for a signal that may be `certain`
    /// (an ECN mark, a loss the proxy saw): a reduction for a certain
    /// signal cannot be undone as spurious. Returns whether it reduced.
    pub fn on_congestion_signal(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        certain: bool,
        response: CubicParams,
    ) -> bool {
        let reduced = self.on_congestion_event(now, sent, persistent, response);
        if reduced && certain {
            self.forget_saved();
        }
        reduced
    }

    /// Drops the state saved by the last reduction, so that
    /// [`CubicCore::undo_last_reduction`] cannot undo it (the caller knows
    /// the loss was real).
    pub fn forget_saved(&mut self) {
        self.saved = None;
    }

    /// The last reduction was spurious: restores the state it replaced, if
    /// one is saved and its window is larger. Returns whether it did.
    pub fn undo_last_reduction(&mut self) -> bool {
        match self.saved.take() {
            Some(saved) if saved.window > self.state.window => {
                self.state = saved;
                true
            }
            _ => false,
        }
    }
}

/// Our CUBIC as a QUIC congestion controller, without path awareness.
#[derive(Clone, Debug)]
pub struct Cubic {
    core: CubicCore,
    /// The pacing rate it reports (bytes/s), if any.
    pacing: Option<u64>,
}

/// The pacing rate of an unpaced CUBIC: a 10 Gbit/s line rate, so that
/// noq-proto's pacer lets a whole window out in one burst (up to its
/// largest burst, 256 packets), as a TCP sender without a pacing qdisc
/// does.
pub const UNPACED_RATE: u64 = 1_250_000_000;

impl Cubic {
    /// A controller with `config`'s constants and initial window.
    pub fn new(config: &CubicConfig, mtu: u16) -> Cubic {
        Cubic {
            core: CubicCore::new(config.params, config.initial_window, mtu),
            pacing: (!config.paced).then_some(UNPACED_RATE),
        }
    }

    /// The window state machine.
    pub fn core(&self) -> &CubicCore {
        &self.core
    }
}

impl Controller for Cubic {
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        _pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.core.on_ack(now, sent, bytes, app_limited, rtt.get());
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
        let params = self.core.base;
        // ECN marks are never spurious.
        self.core
            .on_congestion_signal(now, sent, is_persistent_congestion, is_ecn, params);
    }

    fn on_spurious_congestion_event(&mut self) {
        self.core.undo_last_reduction();
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.core.set_mtu(new_mtu);
    }

    fn window(&self) -> u64 {
        self.core.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.core.window();
        metrics.ssthresh = Some(self.core.ssthresh());
        metrics.pacing_rate = self.pacing;
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

/// `{ name = "pepkit-cubic", paced = false }`: our CUBIC's settings in a
/// scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CubicSettings {
    /// Whether noq-proto paces it (default true); unpaced, it sends its
    /// window in bursts as a TCP sender without a pacing qdisc (the
    /// Proteus paper's kernel CUBIC) does.
    #[serde(default = "paced")]
    pub paced: bool,
}

fn paced() -> bool {
    true
}

impl Default for CubicSettings {
    fn default() -> CubicSettings {
        CubicSettings { paced: true }
    }
}

/// The factory of [`Cubic`]: its constants and initial window.
#[derive(Clone, Debug)]
pub struct CubicConfig {
    /// β and C (default RFC 9438's).
    pub params: CubicParams,
    /// Initial window, bytes (default 14 720 clamped to 2–10 segments of
    /// 1200 bytes, i.e. 12 000, as noq-proto).
    pub initial_window: u64,
    /// Whether noq-proto paces it over the RTT (default), or it bursts
    /// its window ([`UNPACED_RATE`]).
    pub paced: bool,
}

/// RFC 9002's initial window for QUIC's smallest datagram:
/// min(10·1200, max(2·1200, 14 720)).
pub(crate) const DEFAULT_INITIAL_WINDOW: u64 = 12_000;

impl Default for CubicConfig {
    fn default() -> CubicConfig {
        CubicConfig {
            params: CubicParams::RFC9438,
            initial_window: DEFAULT_INITIAL_WINDOW,
            paced: true,
        }
    }
}

impl ControllerFactory for CubicConfig {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Cubic::new(&self, current_mtu))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_unpaced_cubic_reports_a_line_rate_and_a_paced_one_none() {
        use quic::congestion::Controller as _;
        let paced = Cubic::new(&CubicConfig::default(), 1200);
        assert_eq!(paced.metrics().pacing_rate, None);
        let config = CubicConfig {
            paced: false,
            ..CubicConfig::default()
        };
        let unpaced = Cubic::new(&config, 1200);
        assert_eq!(unpaced.metrics().pacing_rate, Some(UNPACED_RATE));
        assert_eq!(unpaced.window(), paced.window());
    }
    use super::*;

    const MSS: u16 = 1200;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    /// A core in congestion avoidance at `window` bytes (one event at t0).
    fn avoiding(t0: Instant, window: u64) -> CubicCore {
        let mut core = CubicCore::new(CubicParams::RFC9438, window, MSS);
        core.state.window = window;
        assert!(core.on_congestion_event(t0, t0, false, CubicParams::RFC9438));
        core
    }

    #[test]
    fn slow_start_grows_by_acked_bytes() {
        let t0 = Instant::now();
        let mut core = CubicCore::new(CubicParams::RFC9438, 12_000, MSS);
        core.on_ack(at(t0, 10), t0, 1200, false, Duration::from_millis(50));
        assert_eq!(core.window(), 13_200);
        core.on_ack(at(t0, 10), t0, 1200, true, Duration::from_millis(50));
        assert_eq!(core.window(), 13_200, "app-limited ACKs do not grow");
    }

    #[test]
    fn loss_reduces_by_beta_once_per_recovery_period() {
        let t0 = Instant::now();
        let mut core = CubicCore::new(CubicParams::RFC9438, 100_000, MSS);
        assert!(core.on_congestion_event(at(t0, 100), at(t0, 50), false, CubicParams::RFC9438));
        assert_eq!(core.window(), 70_000);
        assert_eq!(core.ssthresh(), 70_000);
        assert_eq!(core.w_max(), 100_000);
        // A loss of a packet sent before the period started: no response.
        assert!(!core.on_congestion_event(at(t0, 150), at(t0, 99), false, CubicParams::RFC9438));
        assert_eq!(core.window(), 70_000);
        // Nor growth from its ACK.
        core.on_ack(
            at(t0, 150),
            at(t0, 90),
            1200,
            false,
            Duration::from_millis(50),
        );
        assert_eq!(core.window(), 70_000);
        // A packet sent after the start: a new period.
        assert!(core.on_congestion_event(at(t0, 300), at(t0, 101), false, CubicParams::RFC9438));
        // Fast convergence: W_max = 70 000 · 1.7 / 2.
        assert_eq!(core.window(), 49_000);
        assert_eq!(core.w_max(), 59_500);
    }

    #[test]
    fn minimum_window_is_two_segments() {
        let t0 = Instant::now();
        let mut core = CubicCore::new(CubicParams::RFC9438, 3000, MSS);
        core.on_congestion_event(t0, t0, false, CubicParams::RFC9438);
        assert_eq!(core.window(), 2400);
        core.on_congestion_event(at(t0, 1), at(t0, 1), true, CubicParams::RFC9438);
        assert_eq!(core.window(), 2400);
        assert!(core.recovery_start().is_none(), "persistent: slow start");
    }

    #[test]
    fn cubic_growth_reaches_w_max_near_k() {
        // W_max = 1000 segments, after the cut 700: K = ∛(300 / 0.4) ≈ 9.09 s.
        // (A large window, so the Reno-friendly estimate, 0.53 segments per
        // RTT, stays below W_cubic.)
        let t0 = Instant::now();
        let mut core = avoiding(t0, 1_200_000);
        assert_eq!(core.window(), 840_000);
        let rtt = Duration::from_millis(50);
        let mut now = t0;
        // About one window per RTT.
        let gap = Duration::from_micros(70);
        while now < at(t0, 9_086) {
            now += gap;
            core.on_ack(now, now - rtt, 1200, false, rtt);
        }
        let w = core.window();
        assert!(
            (1_150_000..=1_210_000).contains(&w),
            "window near W_max = 1 200 000 at K: {w}"
        );
        // Then convex growth beyond W_max.
        while now < at(t0, 12_000) {
            now += gap;
            core.on_ack(now, now - rtt, 1200, false, rtt);
        }
        // W_cubic(12.05 s) = 0.4 · 2.96³ + 1000 ≈ 1010 segments.
        assert!(
            (1_205_000..=1_220_000).contains(&core.window()),
            "{}",
            core.window()
        );
    }

    #[test]
    fn growth_constant_speeds_up_recovery() {
        let t0 = Instant::now();
        let rtt = Duration::from_millis(50);
        let grow = |c: f64| {
            let mut core = CubicCore::new(CubicParams::RFC9438, 120_000, MSS);
            core.on_congestion_event(t0, t0, false, CubicParams { beta: 0.7, c });
            let mut now = t0;
            while now < at(t0, 1000) {
                now += Duration::from_micros(600);
                core.on_ack(now, now - rtt, 1200, false, rtt);
            }
            core.window()
        };
        let (slow, fast) = (grow(0.4), grow(40.0));
        assert!(fast > slow + 10_000, "C = 40: {fast}, C = 0.4: {slow}");
    }

    #[test]
    fn reno_friendly_region_follows_w_est() {
        // A tiny C makes W_cubic flat: the window follows W_est, which
        // grows by α = 3·0.3/1.7 ≈ 0.53 segments per window.
        let t0 = Instant::now();
        let mut core = CubicCore::new(CubicParams::RFC9438, 100_000, MSS);
        core.on_congestion_event(t0, t0, false, CubicParams { beta: 0.7, c: 1e-9 });
        let rtt = Duration::from_millis(50);
        let mut now = at(t0, 1);
        for _ in 0..(70_000 / 1200) * 10 {
            now += Duration::from_micros(100);
            core.on_ack(now, now, 1200, false, rtt);
        }
        // Ten windows' worth of ACKs: about 5 segments more.
        let grown = core.window() - 70_000;
        assert!((4_500..=7_500).contains(&grown), "grew {grown}");
    }

    #[test]
    fn spurious_event_is_undone() {
        let t0 = Instant::now();
        let mut core = CubicCore::new(CubicParams::RFC9438, 100_000, MSS);
        core.on_congestion_event(t0, t0, false, CubicParams::RFC9438);
        assert_eq!(core.window(), 70_000);
        assert!(core.undo_last_reduction());
        assert_eq!(core.window(), 100_000);
        assert_eq!(core.ssthresh(), u64::MAX);
        assert!(!core.undo_last_reduction(), "only once");
        core.on_congestion_event(t0, t0, false, CubicParams::RFC9438);
        core.forget_saved();
        assert!(!core.undo_last_reduction());
        assert_eq!(core.window(), 70_000);
    }

    #[test]
    fn controller_reports_window_and_ssthresh() {
        let config = Arc::new(CubicConfig::default());
        let mut cubic = config.build(Instant::now(), MSS);
        assert_eq!(cubic.window(), 12_000);
        let now = Instant::now();
        cubic.on_congestion_event(now, now, false, false, 1200, 7);
        let metrics = cubic.metrics();
        assert_eq!(metrics.congestion_window, 8_400);
        assert_eq!(metrics.ssthresh, Some(8_400));
        cubic.on_spurious_congestion_event();
        assert_eq!(cubic.window(), 12_000);
        cubic.on_mtu_update(5000);
        assert_eq!(cubic.window(), 12_000);
    }
}
