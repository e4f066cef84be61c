//! PCC: the utility-based rate control of PCC Vivace (NSDI'18) and PCC
//! Proteus (SIGCOMM'20), as one QUIC congestion controller.
//!
//! # Design
//!
//! The sender sends in monitor intervals ([`monitor`]) of about one RTT
//! (the minimum RTT, as PCC-Uspace; at least [`monitor::MIN_PACKETS`]
//! packets), each at a test rate its rate control chose when the MI
//! opened ([`rate_control`]). When every packet of an MI is acknowledged
//! or lost, its rate, loss, RTT gradient and RTT deviation go through the
//! noise tolerance ([`noise`]) into a utility ([`utility`]) and the rate
//! control learns from it. The sender paces at the open MI's rate (a
//! pacing rate noq-proto's pacer obeys) with a window of about
//! 2·rate·srtt, so the window does not cap the rate: the rate of the
//! unfinished MIs, which hold every byte in flight, times twice the
//! smoothed RTT.
//!
//! The utility is read through a [`UtilityHandle`] once per MI, so an
//! application that holds the handle (a video client's threshold policy,
//! a transfer that turns scavenger at a deadline) changes it mid-flow.
//! A change of utility (not of Proteus-H's threshold) restarts the rate
//! control's probing around the current rate
//! ([`RateControl::restart_probing`]), so no decision compares utilities
//! of two functions.
//!
//! Randomness (the order of each probing pair) comes from a generator
//! seeded by the factory's seed and the connection's index.
//!
//! # Where this differs from PCC-Uspace (notes F)
//!
//! * The majority rule is the paper's: three pairs, the majority decides,
//!   in every mode. PCC-Uspace's scavenger probes two pairs, and its
//!   votes are asymmetric (a primary goes up on a majority, down only
//!   when all agree; a scavenger the reverse).
//! * The regression error is the RMS residual over the MI's duration
//!   (§5); PCC-Uspace divides by the mean RTT.
//! * The trending tolerance follows §5's pseudocode (G1 = 2 on the
//!   gradient, G2 = 4 on the deviation, EWMAs like srtt and mdev);
//!   PCC-Uspace uses 2.0 for both and separate EWMAs of the deviation.
//! * The ACK-interval filter uses the paper's fixed ratio 50; PCC-Uspace
//!   compares with 50 times an EWMA of the ratios.
//! * Starting doubles the rate after each better result and returns to the
//!   best rate on the first worse one (Vivace's paper); PCC-Uspace halves
//!   the current rate. Like PCC-Uspace, the RTT deviation is not
//!   penalised while starting.
//! * The 0.5 Mbit/s minimum step applies before the dynamic boundary, so
//!   below 10 Mbit/s a clipped step is 5% (or more, as the boundary grows)
//!   of the rate; PCC-Uspace applies its minimum after the boundary, so
//!   its steps there are at least 0.5 Mbit/s.
//! * Vivace's fixed gradient tolerance: gradients under 0.01 in magnitude
//!   are ignored (the NSDI'18 code quantises the gradient to 0.02).

pub mod monitor;
pub mod noise;
pub mod rate_control;
pub(crate) mod settings;
pub mod utility;

pub use settings::{HybridSettings, ProteusSettings};

use crate::engine::{CongestionEngine, Engine};
use monitor::{MiStats, MonitorQueue};
use netsim::{Rate, Seed, SimRng};
use noise::{AckFilter, NoiseTolerance, Trending};
use quic::congestion::{Controller, ControllerFactory};
use rate_control::{Decision, RateControl, RateStats};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use utility::{Observation, Utility, UtilityHandle, UtilityParams};

/// PCC-Uspace's initial rate: 10 packets of 1400 B per 100 ms.
const INITIAL_RATE: Rate = Rate::from_bps(1_120_000);
/// The RTT the initial rate assumes; a shorter first sample scales it up.
const INITIAL_RTT: Duration = Duration::from_millis(100);
/// Vivace's fixed gradient tolerance.
const VIVACE_GRADIENT_FLOOR: f64 = 0.01;

/// How a PCC sender behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct PccConfig {
    /// The utility it starts with (its handle may change it).
    pub utility: Utility,
    /// Proteus-H's threshold to start with (the handle may change it).
    pub threshold: Option<Rate>,
    /// The utility constants.
    pub params: UtilityParams,
    /// Proteus's noise tolerance (all on for Proteus, off for Vivace).
    pub noise: NoiseTolerance,
    /// Ignore gradients smaller than this (Vivace's fixed tolerance).
    pub gradient_floor: Option<f64>,
}

impl PccConfig {
    /// PCC Vivace: its utility, two probing pairs that must agree, a fixed
    /// gradient tolerance.
    pub fn vivace() -> PccConfig {
        PccConfig {
            utility: Utility::Vivace,
            threshold: None,
            params: UtilityParams::PAPER,
            noise: NoiseTolerance::NONE,
            gradient_floor: Some(VIVACE_GRADIENT_FLOOR),
        }
    }

    /// PCC Proteus with `utility` and every noise-tolerance mechanism.
    pub fn proteus(utility: Utility) -> PccConfig {
        PccConfig {
            utility,
            threshold: None,
            params: UtilityParams::PAPER,
            noise: NoiseTolerance::ALL,
            gradient_floor: None,
        }
    }
}

/// What the PCC controllers of one factory did, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PccStats {
    /// MIs completed.
    pub mis: u64,
    /// ... by a timeout.
    pub mi_timeouts: u64,
    /// ... whose measurement could not be used.
    pub mi_unusable: u64,
    /// MIs whose gradient the noise tolerance ignored.
    pub gradients_ignored: u64,
    /// MIs whose deviation it ignored.
    pub deviations_ignored: u64,
    /// RTT samples the ACK-interval filter rejected.
    pub samples_rejected: u64,
    /// The rate control's decisions and steps.
    pub rate: RateStats,
    /// Times the window, not the pacer, held back a packet.
    pub cwnd_limited: u64,
    /// Packets sent.
    pub packets: u64,
    /// The last MI's target rate.
    pub last_rate: Option<Rate>,
}

/// A PCC sender on one connection.
#[derive(Clone, Debug)]
pub struct Pcc {
    config: Arc<PccConfig>,
    utility: UtilityHandle,
    control: RateControl<SimRng>,
    monitors: MonitorQueue,
    filter: AckFilter,
    trending: Trending,
    mtu: u16,
    /// The open MI's rate: the pacing rate.
    rate: Rate,
    /// The largest rate of the MIs not yet complete (their bytes are the
    /// ones in flight).
    peak: Rate,
    smoothed_rtt: Option<Duration>,
    min_rtt: Option<Duration>,
    /// The newest packet acknowledged in the current batch of ACKs: (send
    /// time, number, RTT). Its RTT is the batch's sample (as QUIC takes RTT
    /// samples from the largest newly acknowledged packet): the others
    /// waited for the receiver's delayed ACK.
    batch: Option<(Instant, u64, Duration)>,
    stats: PccStats,
    /// What of `stats` is in `shared` already.
    reported: PccStats,
    shared: Arc<Mutex<PccStats>>,
    last: Option<MiStats>,
    /// The utility the last MI was judged with.
    judged_with: Option<Utility>,
}

impl Pcc {
    /// A sender for segments of `mtu` bytes whose probe order comes from
    /// `rng` and whose utility is read from `utility`.
    pub fn new(config: Arc<PccConfig>, utility: UtilityHandle, rng: SimRng, mtu: u16) -> Pcc {
        let decision = if config.noise.majority {
            Decision::MajorityOfThree
        } else {
            Decision::TwoAgree
        };
        Pcc {
            config,
            utility,
            control: RateControl::new(INITIAL_RATE, decision, rng),
            monitors: MonitorQueue::default(),
            filter: AckFilter::default(),
            trending: Trending::default(),
            mtu,
            rate: INITIAL_RATE,
            peak: INITIAL_RATE,
            smoothed_rtt: None,
            min_rtt: None,
            batch: None,
            stats: PccStats::default(),
            reported: PccStats::default(),
            shared: Arc::default(),
            last: None,
            judged_with: None,
        }
    }

    fn with_shared(mut self, shared: Arc<Mutex<PccStats>>) -> Pcc {
        self.shared = shared;
        self
    }

    /// The pacing rate now.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The last complete MI's measurement.
    pub fn last_mi(&self) -> Option<&MiStats> {
        self.last.as_ref()
    }

    /// This sender's counters.
    pub fn stats(&self) -> PccStats {
        self.stats
    }

    /// How long an MI lasts: the minimum RTT (before any sample, 100 ms).
    fn mi_duration(&self) -> Duration {
        self.min_rtt.unwrap_or(INITIAL_RTT)
    }

    /// How long after its last packet an MI waits for every packet to be
    /// accounted for.
    fn mi_timeout(&self) -> Duration {
        4 * self.smoothed_rtt.unwrap_or(INITIAL_RTT) + Duration::from_millis(50)
    }

    /// Judges every MI complete at `now`.
    pub fn poll_intervals(&mut self, now: Instant) {
        let timeout = self.mi_timeout();
        while let Some(mi) = self.monitors.pop_complete(now, timeout, self.mtu) {
            self.judge(mi);
        }
        if self.monitors.is_empty() {
            self.peak = self.rate;
        }
    }

    /// One complete MI: its utility, after the noise tolerance, to the
    /// rate control.
    fn judge(&mut self, mi: MiStats) {
        let noise = self.config.noise;
        let usable = mi.samples >= 2 && mi.rate_mbps >= 0.5 * mi.target.bits_per_sec() as f64 / 1e6;
        let trend = (noise.trending && mi.samples >= 2)
            .then(|| self.trending.observe(mi.mean_rtt_s, mi.deviation_s))
            .flatten();
        let per_mi = noise
            .regression
            .then(|| noise::within_regression_error(mi.gradient, mi.regression_error));
        let (ignore_gradient, ignore_deviation) = noise::ignore(per_mi, trend);
        let mut gradient = if ignore_gradient { 0.0 } else { mi.gradient };
        if let Some(floor) = self.config.gradient_floor
            && gradient.abs() < floor
        {
            gradient = 0.0;
        }
        let deviation_s = if ignore_deviation || self.control.is_starting() {
            0.0
        } else {
            mi.deviation_s
        };
        let observation = Observation {
            rate_mbps: mi.rate_mbps,
            gradient,
            deviation_s,
            loss: mi.loss,
        };
        let (mode, threshold) = self.utility.get();
        if self.judged_with.is_some_and(|before| before != mode) {
            self.control.restart_probing();
        }
        self.judged_with = Some(mode);
        let utility = mode.value(&self.config.params, &observation, threshold);
        if mi.useful {
            self.control
                .on_result(mi.id, (usable && utility.is_finite()).then_some(utility));
        }
        self.count(&mi, usable, ignore_gradient, ignore_deviation);
        self.last = Some(mi);
    }

    fn count(&mut self, mi: &MiStats, usable: bool, gradient: bool, deviation: bool) {
        let s = &mut self.stats;
        s.mis += 1;
        s.mi_timeouts += u64::from(mi.timed_out);
        s.mi_unusable += u64::from(!usable);
        s.gradients_ignored += u64::from(gradient);
        s.deviations_ignored += u64::from(deviation);
        s.samples_rejected = self.filter.rejected();
        s.rate = self.control.stats();
        s.last_rate = Some(self.rate);
        let mut shared = self.shared.lock().expect("stats lock");
        add_stats(&mut shared, &self.reported, &self.stats);
        self.reported = self.stats;
    }
}

/// Adds what changed from `before` to `after` to the factory's sums.
fn add_stats(sum: &mut PccStats, before: &PccStats, after: &PccStats) {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    sum.mis += d(after.mis, before.mis);
    sum.mi_timeouts += d(after.mi_timeouts, before.mi_timeouts);
    sum.mi_unusable += d(after.mi_unusable, before.mi_unusable);
    sum.gradients_ignored += d(after.gradients_ignored, before.gradients_ignored);
    sum.deviations_ignored += d(after.deviations_ignored, before.deviations_ignored);
    sum.samples_rejected += d(after.samples_rejected, before.samples_rejected);
    sum.rate.decisions += d(after.rate.decisions, before.rate.decisions);
    sum.rate.ups += d(after.rate.ups, before.rate.ups);
    sum.rate.undecided += d(after.rate.undecided, before.rate.undecided);
    sum.rate.steps += d(after.rate.steps, before.rate.steps);
    sum.rate.clipped += d(after.rate.clipped, before.rate.clipped);
    sum.cwnd_limited += d(after.cwnd_limited, before.cwnd_limited);
    sum.packets += d(after.packets, before.packets);
    sum.last_rate = after.last_rate;
}

impl CongestionEngine for Pcc {
    fn handle_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        if self.monitors.due(now, self.mi_duration()) {
            let id = self.monitors.next_id();
            let (rate, useful) = self.control.next_interval(id);
            self.monitors.start(now, pn, rate, useful);
            self.rate = rate;
            self.peak = self.peak.max(rate);
        }
        self.monitors.on_sent(now, bytes, pn);
        self.stats.packets += 1;
    }

    fn handle_ack(&mut self, now: Instant, sent: Instant, bytes: u64, pn: u64, smoothed: Duration) {
        let sample = now.saturating_duration_since(sent);
        if self.min_rtt.is_none() && sample < INITIAL_RTT && !sample.is_zero() {
            let scaled = INITIAL_RATE.bits_per_sec() as f64 * INITIAL_RTT.as_secs_f64()
                / sample.as_secs_f64();
            self.control
                .rescale_initial(Rate::from_bps(scaled.round() as u64));
        }
        self.min_rtt = Some(self.min_rtt.map_or(sample, |min| min.min(sample)));
        self.smoothed_rtt = Some(smoothed);
        self.monitors.on_acked(sent, bytes, pn);
        if self.batch.is_none_or(|(newest, _, _)| sent >= newest) {
            self.batch = Some((sent, pn, sample));
        }
    }

    fn handle_end_acks(&mut self, now: Instant, _in_flight: u64, _app_limited: bool) {
        if let Some((sent, pn, rtt)) = self.batch.take() {
            let admitted = if self.config.noise.ack_filter {
                self.filter.on_ack_arrival(now);
                self.filter.admit(rtt)
            } else {
                true
            };
            if admitted {
                self.monitors.on_rtt(sent, pn, rtt);
            }
        }
        self.poll_intervals(now);
    }

    fn handle_lost(&mut self, _now: Instant, bytes: u16, pn: u64) {
        self.monitors.on_lost(bytes, pn);
    }

    fn handle_congestion(&mut self, now: Instant, _sent: Instant, _persistent: bool) {
        // Losses count in their MIs' loss rates; there is no window to cut.
        self.poll_intervals(now);
    }

    fn handle_cwnd_limited(&mut self) {
        self.stats.cwnd_limited += 1;
    }

    fn handle_mtu(&mut self, mtu: u16) {
        self.mtu = mtu;
    }

    fn poll_window(&self) -> u64 {
        let srtt = self.smoothed_rtt.unwrap_or(INITIAL_RTT);
        let rate = self.peak.max(self.rate).bits_per_sec() as f64 / 8.0;
        ((2.0 * rate * srtt.as_secs_f64()) as u64).max(10 * u64::from(self.mtu))
    }

    fn poll_pacing_rate(&self) -> Option<u64> {
        Some(self.rate.bits_per_sec() / 8)
    }
}

/// Builds [`Pcc`] senders that share one utility handle.
#[derive(Debug)]
pub struct PccFactory {
    config: Arc<PccConfig>,
    utility: UtilityHandle,
    seed: Seed,
    built: AtomicU64,
    stats: Arc<Mutex<PccStats>>,
}

impl PccFactory {
    /// A factory of senders configured by `config`, reading `utility`, their
    /// probe orders seeded from `seed`.
    pub fn new(config: PccConfig, utility: UtilityHandle, seed: Seed) -> PccFactory {
        PccFactory {
            config: Arc::new(config),
            utility,
            seed,
            built: AtomicU64::new(0),
            stats: Arc::default(),
        }
    }

    /// The counters of every sender built so far, summed.
    pub fn stats(&self) -> PccStats {
        *self.stats.lock().expect("stats lock")
    }

    /// The handle its senders read their utility from.
    pub fn utility(&self) -> &UtilityHandle {
        &self.utility
    }
}

impl ControllerFactory for PccFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let index = self.built.fetch_add(1, Ordering::Relaxed);
        let rng = self.seed.rng(&format!("pcc/{index}"));
        Box::new(Engine(
            Pcc::new(self.config.clone(), self.utility.clone(), rng, current_mtu)
                .with_shared(self.stats.clone()),
        ))
    }
}
