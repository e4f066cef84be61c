//! BBR version 1 (Cardwell et al., ACM Queue 2016; Linux `tcp_bbr.c`, the
//! kernel BBR the Proteus paper ran) as a deterministic QUIC congestion
//! controller, and BBR-S (Proteus §7.1).
//!
//! noq-proto's own BBR is version 3 and seeds its probing randomness from
//! the operating system, so runs with it do not repeat; this one draws
//! from a generator seeded by the scenario.
//!
//! * **Model**: BtlBw is the maximum delivery rate over the last 10 round
//!   trips ([`delivery`]); RTprop the minimum RTT over 10 s.
//! * **Startup**: pacing and window gain 2/ln 2 until BtlBw grows less
//!   than 25% in three rounds; **Drain**: pacing gain ln 2/2 until the
//!   flight is at most one BDP; **ProbeBW**: pacing gains 5/4, 3/4, 1 × 6,
//!   a phase per RTprop (the 5/4 phase until the flight reaches 5/4 BDP or
//!   a loss, the 3/4 phase ends early at one BDP), starting at a random
//!   phase other than 3/4; window gain 2; **ProbeRTT**: when RTprop is 10 s
//!   old, the window drops to 4 packets for max(200 ms, one round) once the
//!   flight is that small.
//! * **ACK aggregation** (Linux's `extra_acked`, since 4.19): once the
//!   pipe is full, the window also covers the largest excess of bytes
//!   acknowledged over BtlBw's expectation within an epoch, over the last
//!   10 rounds (two slots of 5), at most 100 ms at BtlBw, so bursty links
//!   (cellular traces) stay busy.
//! * **Startup** is left only on rounds whose samples were not limited by
//!   the application (a round the application starved says nothing about
//!   the pipe).
//! * **Pacing never goes down before the pipe is filled** (Linux's
//!   `bbr_set_pacing_rate`, the draft's BBRSetPacingRateWithGain), counted
//!   from the first RTT sample (Linux's `bbr_init_pacing_rate_from_rtt`):
//!   a sender the application limits (a client sending only requests and
//!   TECC feedback) stays in Startup, and its samples measure only what it
//!   offered; pacing at them would hold back its next burst.
//! * The window is the window gain times the BDP plus three send quanta
//!   (2 packets each, Linux's budget below 1.2 Gbit/s), at least 4
//!   packets; it grows towards that by the bytes acknowledged. Pacing is
//!   the pacing gain times BtlBw, less a 1% margin (as Linux).
//! * **Losses**: packet conservation for one round trip after a loss
//!   (window = flight + acknowledged), then the window from before the
//!   loss is restored, as Linux does around recovery; persistent congestion
//!   sets the window to 4 packets. Linux's long-term ("policer") bandwidth
//!   model is not implemented.
//!
//! **BBR-S**: whenever the smoothed RTT deviation (RFC 6298's rttvar over
//! the newest RTT of each ACK) exceeds 20 ms, the sender enters ProbeRTT
//! for at least 40 ms.

pub mod delivery;

use crate::engine::{CongestionEngine, Engine};
use crate::registry::ControllerCounters;
use delivery::{DeliveryRate, RateSample};
use netsim::{Seed, SimRng};
use quic::congestion::{Controller, ControllerFactory};
use rand_chacha::rand_core::RngCore;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// 2/ln 2, the startup gain.
const HIGH_GAIN: f64 = 2.885;
/// The ProbeBW pacing gains.
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Rounds BtlBw is the maximum over.
const BTLBW_ROUNDS: u64 = 10;
/// RTprop's window.
const RTPROP_WINDOW: Duration = Duration::from_secs(10);
/// How long ProbeRTT holds the window down.
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// The smallest window, packets.
const MIN_CWND: u64 = 4;
/// The initial window, packets.
const INITIAL_CWND: u64 = 10;
/// ACK aggregation: rounds per `extra_acked` slot (Linux: 5).
const EXTRA_ACKED_ROUNDS: u64 = 5;
/// ACK aggregation: the window it adds covers at most this long at BtlBw.
const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);
/// ACK aggregation: an epoch restarts once it acknowledged this many bytes.
const EPOCH_RESET_BYTES: u64 = 1 << 20;
/// BBR-S: the smoothed RTT deviation that forces ProbeRTT.
const BBR_S_DEVIATION: Duration = Duration::from_millis(20);
/// BBR-S: how long that ProbeRTT lasts at least.
const BBR_S_PROBE_TIME: Duration = Duration::from_millis(40);

/// BBR's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Ramping up.
    Startup,
    /// Draining the startup queue.
    Drain,
    /// Cycling around BtlBw.
    ProbeBw,
    /// Measuring RTprop with a small window.
    ProbeRtt,
}

/// BBR on one connection.
#[derive(Clone, Debug)]
pub struct Bbr {
    scavenger: bool,
    rng: SimRng,
    mss: u64,
    mode: Mode,
    rate: DeliveryRate,
    /// (round, bytes/s) keeping the maximum over [`BTLBW_ROUNDS`].
    btlbw: VecDeque<(u64, f64)>,
    rtprop: Option<(Duration, Instant)>,
    round: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bw: f64,
    full_bw_rounds: u32,
    filled_pipe: bool,
    cycle_index: usize,
    cycle_stamp: Option<Instant>,
    cwnd: u64,
    /// The window before ProbeRTT or a loss, to restore.
    prior_cwnd: u64,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    probe_rtt_length: Duration,
    /// Packet conservation until this round.
    conservation_until: Option<u64>,
    loss_in_round: bool,
    acked_in_batch: u64,
    srtt: Option<Duration>,
    rttvar: Duration,
    forced_probes: u64,
    /// Where the factory counts forced probes over its connections.
    forced_total: Option<Arc<AtomicU64>>,
    /// ACK aggregation: the current epoch's start and bytes acknowledged
    /// in it.
    ack_epoch: Option<(Instant, u64)>,
    /// The largest excess of acknowledged bytes over BtlBw's expectation,
    /// in two slots of [`EXTRA_ACKED_ROUNDS`] rounds each (Linux's
    /// `extra_acked`), and the current slot with its age in rounds.
    extra_acked: [u64; 2],
    extra_slot: (usize, u64),
    /// The highest pacing rate since the first RTT sample, while the pipe
    /// is not yet filled: the floor of the pacing rate until then.
    startup_pacing: u64,
}

impl Bbr {
    /// BBR (or BBR-S with `scavenger`) for segments of `mtu` bytes, drawing
    /// its ProbeBW start phase from `rng`.
    pub fn new(scavenger: bool, rng: SimRng, mtu: u16) -> Bbr {
        let mss = u64::from(mtu);
        Bbr {
            scavenger,
            rng,
            mss,
            mode: Mode::Startup,
            rate: DeliveryRate::default(),
            btlbw: VecDeque::new(),
            rtprop: None,
            round: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: 0.0,
            full_bw_rounds: 0,
            filled_pipe: false,
            cycle_index: 0,
            cycle_stamp: None,
            cwnd: INITIAL_CWND * mss,
            prior_cwnd: INITIAL_CWND * mss,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            probe_rtt_length: PROBE_RTT_TIME,
            conservation_until: None,
            loss_in_round: false,
            acked_in_batch: 0,
            srtt: None,
            rttvar: Duration::ZERO,
            forced_probes: 0,
            forced_total: None,
            ack_epoch: None,
            extra_acked: [0; 2],
            extra_slot: (0, 0),
            startup_pacing: 0,
        }
    }

    /// The state now.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// BtlBw, bytes/s.
    pub fn btlbw(&self) -> f64 {
        self.btlbw.iter().map(|&(_, b)| b).fold(0.0, f64::max)
    }

    /// RTprop.
    pub fn rtprop(&self) -> Option<Duration> {
        self.rtprop.map(|(rtt, _)| rtt)
    }

    /// Times BBR-S forced ProbeRTT.
    pub fn forced_probes(&self) -> u64 {
        self.forced_probes
    }

    fn pacing_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => HIGH_GAIN,
            Mode::Drain => 1.0 / HIGH_GAIN,
            Mode::ProbeBw => CYCLE[self.cycle_index],
            Mode::ProbeRtt => 1.0,
        }
    }

    fn cwnd_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup | Mode::Drain => HIGH_GAIN,
            Mode::ProbeBw | Mode::ProbeRtt => 2.0,
        }
    }

    /// The bandwidth-delay product times `gain`, bytes (the initial window
    /// before any estimate).
    fn bdp(&self, gain: f64) -> u64 {
        let bw = self.btlbw();
        match self.rtprop {
            Some((rtt, _)) if bw > 0.0 => (gain * bw * rtt.as_secs_f64()) as u64,
            _ => INITIAL_CWND * self.mss,
        }
    }

    /// The pacing rate, bytes/s: the model's, never lower than before
    /// until the pipe is filled.
    pub fn pacing_rate(&self) -> u64 {
        let rate = self.model_pacing_rate();
        if self.filled_pipe {
            rate
        } else {
            rate.max(self.startup_pacing)
        }
    }

    /// Raises the Startup floor to the model's rate (once an RTT is known).
    fn hold_startup_pacing(&mut self) {
        if !self.filled_pipe && self.srtt.is_some() {
            self.startup_pacing = self.startup_pacing.max(self.model_pacing_rate());
        }
    }

    /// The pacing gain times BtlBw less 1% (before any estimate, the
    /// initial window over the smoothed RTT).
    fn model_pacing_rate(&self) -> u64 {
        let bw = self.btlbw();
        let rate = if bw > 0.0 {
            self.pacing_gain() * bw * 0.99
        } else {
            let rtt = self.srtt.unwrap_or(Duration::from_millis(1)).as_secs_f64();
            HIGH_GAIN * (INITIAL_CWND * self.mss) as f64 / rtt.max(1e-3)
        };
        (rate as u64).max(1)
    }

    /// The window ACK aggregation calls for once the pipe is full: the
    /// largest recent excess of acknowledged bytes, at most 100 ms at
    /// BtlBw (Linux's `bbr_ack_aggregation_cwnd`, gain 1).
    fn aggregation_cwnd(&self) -> u64 {
        if !self.filled_pipe {
            return 0;
        }
        let cap = (self.btlbw() * EXTRA_ACKED_MAX.as_secs_f64()) as u64;
        self.extra_acked.iter().copied().max().unwrap_or(0).min(cap)
    }

    /// Linux's `bbr_update_ack_aggregation`: how far the bytes
    /// acknowledged since the epoch began exceed what BtlBw would have
    /// delivered in that time.
    fn update_ack_aggregation(&mut self, now: Instant, acked: u64) {
        if acked == 0 {
            return;
        }
        if self.round_start {
            self.extra_slot.1 += 1;
            if self.extra_slot.1 >= EXTRA_ACKED_ROUNDS {
                self.extra_slot = (1 - self.extra_slot.0, 0);
                self.extra_acked[self.extra_slot.0] = 0;
            }
        }
        let (start, epoch_acked) = self.ack_epoch.unwrap_or((now, 0));
        let elapsed = now.saturating_duration_since(start).as_secs_f64();
        let expected = (self.btlbw() * elapsed) as u64;
        let (start, epoch_acked, expected) =
            if epoch_acked <= expected || epoch_acked + acked >= EPOCH_RESET_BYTES {
                (now, 0, 0)
            } else {
                (start, epoch_acked, expected)
            };
        let epoch_acked = (epoch_acked + acked).min(EPOCH_RESET_BYTES - 1);
        self.ack_epoch = Some((start, epoch_acked));
        let extra = epoch_acked.saturating_sub(expected).min(self.cwnd);
        let slot = &mut self.extra_acked[self.extra_slot.0];
        *slot = (*slot).max(extra);
    }

    /// The target window, bytes.
    fn target_cwnd(&self) -> u64 {
        let mut target = self.bdp(self.cwnd_gain()) + self.aggregation_cwnd() + 3 * 2 * self.mss;
        if self.mode == Mode::ProbeBw && self.cycle_index == 0 {
            target += 2 * self.mss;
        }
        target.max(MIN_CWND * self.mss)
    }

    /// One rate sample at the end of a batch of ACKs at `now`.
    fn on_sample(&mut self, now: Instant, sample: RateSample) {
        self.round_start = false;
        if sample.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = self.rate.delivered();
            self.round += 1;
            self.round_start = true;
            self.loss_in_round = false;
        }
        if !sample.app_limited || sample.bytes_per_sec >= self.btlbw() {
            self.btlbw.push_back((self.round, sample.bytes_per_sec));
        }
        while self
            .btlbw
            .front()
            .is_some_and(|&(round, _)| round + BTLBW_ROUNDS <= self.round)
        {
            self.btlbw.pop_front();
        }
        let expired = self
            .rtprop
            .is_some_and(|(_, stamp)| now.saturating_duration_since(stamp) > RTPROP_WINDOW);
        if self.rtprop.is_none_or(|(rtt, _)| sample.rtt <= rtt) || expired {
            self.rtprop = Some((sample.rtt, now));
        }
        self.check_full_pipe(sample.app_limited);
        self.advance(now, expired);
    }

    fn check_full_pipe(&mut self, app_limited: bool) {
        if self.filled_pipe || !self.round_start || app_limited {
            return;
        }
        let bw = self.btlbw();
        if bw >= 1.25 * self.full_bw {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        if self.full_bw_rounds >= 3 {
            self.filled_pipe = true;
        }
    }

    /// The state machine after a sample.
    fn advance(&mut self, now: Instant, rtprop_expired: bool) {
        let in_flight = self.rate.in_flight();
        if self.mode == Mode::Startup && self.filled_pipe {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && in_flight <= self.bdp(1.0) {
            self.enter_probe_bw(now);
        }
        if self.mode == Mode::ProbeBw {
            self.cycle(now, in_flight);
        }
        let forced = self.scavenger && self.rttvar > BBR_S_DEVIATION;
        if self.mode != Mode::ProbeRtt && (rtprop_expired || forced) {
            if forced && !rtprop_expired {
                self.forced_probes += 1;
                if let Some(total) = &self.forced_total {
                    total.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.probe_rtt_length = if forced {
                BBR_S_PROBE_TIME
            } else {
                PROBE_RTT_TIME
            };
            self.mode = Mode::ProbeRtt;
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            self.probe_rtt(now, in_flight);
        }
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        // Any phase but the draining 3/4.
        let draw = (self.rng.next_u32() % 7) as usize;
        self.cycle_index = if draw == 0 { 0 } else { draw + 1 };
        self.cycle_stamp = Some(now);
    }

    fn cycle(&mut self, now: Instant, in_flight: u64) {
        let Some(stamp) = self.cycle_stamp else {
            self.cycle_stamp = Some(now);
            return;
        };
        let rtprop = self.rtprop().unwrap_or(Duration::from_millis(100));
        let elapsed = now.saturating_duration_since(stamp) > rtprop;
        let gain = CYCLE[self.cycle_index];
        let next = if gain > 1.0 {
            elapsed && (self.loss_in_round || in_flight >= self.bdp(gain))
        } else if gain < 1.0 {
            elapsed || in_flight <= self.bdp(1.0)
        } else {
            elapsed
        };
        if next {
            self.cycle_index = (self.cycle_index + 1) % CYCLE.len();
            self.cycle_stamp = Some(now);
        }
    }

    fn probe_rtt(&mut self, now: Instant, in_flight: u64) {
        match self.probe_rtt_done {
            None if in_flight <= MIN_CWND * self.mss => {
                self.probe_rtt_done = Some(now + self.probe_rtt_length);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = self.rate.delivered();
            }
            None => {}
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now >= done {
                    if let Some((rtt, _)) = self.rtprop {
                        self.rtprop = Some((rtt, now));
                    }
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    if self.filled_pipe {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
        }
    }

    fn update_cwnd(&mut self, acked: u64) {
        let target = self.target_cwnd();
        let conserving = self.conservation_until.is_some_and(|r| self.round < r);
        if conserving {
            self.cwnd = self.cwnd.max(self.rate.in_flight() + acked);
        } else if let Some(_ended) = self.conservation_until.take() {
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
        if self.filled_pipe {
            self.cwnd = (self.cwnd + acked).min(target);
        } else if self.cwnd < target || self.rate.delivered() < INITIAL_CWND * self.mss {
            self.cwnd += acked;
        }
        self.cwnd = self.cwnd.max(MIN_CWND * self.mss);
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(MIN_CWND * self.mss);
        }
    }

    fn on_rtt(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(rtt)) / 4;
                self.srtt = Some((7 * srtt + rtt) / 8);
            }
        }
    }

    /// A congestion event (`persistent`: persistent congestion).
    pub fn on_loss(&mut self, persistent: bool) {
        self.loss_in_round = true;
        if persistent {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
            self.cwnd = MIN_CWND * self.mss;
            return;
        }
        if self.conservation_until.is_none() {
            self.prior_cwnd = self.cwnd;
            self.cwnd = self.rate.in_flight().max(MIN_CWND * self.mss);
            self.conservation_until = Some(self.round + 1);
        }
    }
}

impl CongestionEngine for Bbr {
    fn handle_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.rate.on_sent(now, pn, u64::from(bytes));
    }

    fn handle_ack(&mut self, now: Instant, sent: Instant, bytes: u64, pn: u64, _: Duration) {
        self.rate.on_acked(now, pn, sent);
        self.acked_in_batch += bytes;
    }

    fn handle_end_acks(&mut self, now: Instant, _in_flight: u64, app_limited: bool) {
        if app_limited {
            self.rate.on_app_limited();
        }
        let acked = std::mem::take(&mut self.acked_in_batch);
        // A round starts only with a sample of this batch.
        self.round_start = false;
        if let Some(sample) = self.rate.end_batch() {
            self.on_rtt(sample.rtt);
            self.on_sample(now, sample);
        }
        self.update_ack_aggregation(now, acked);
        if acked > 0 {
            self.update_cwnd(acked);
        }
        self.hold_startup_pacing();
    }

    fn handle_lost(&mut self, now: Instant, _bytes: u16, pn: u64) {
        self.rate.on_lost(pn, now);
    }

    fn handle_congestion(&mut self, _now: Instant, _sent: Instant, persistent: bool) {
        self.on_loss(persistent);
    }

    fn handle_mtu(&mut self, mtu: u16) {
        self.mss = u64::from(mtu);
    }

    fn poll_window(&self) -> u64 {
        self.cwnd
    }

    fn poll_pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate())
    }
}

/// Builds [`Bbr`] (or BBR-S) controllers, each with its own generator.
#[derive(Debug)]
pub struct BbrFactory {
    scavenger: bool,
    seed: Seed,
    built: AtomicU64,
    /// BBR-S: the ProbeRTTs its senders were forced into.
    forced: Arc<AtomicU64>,
}

impl BbrFactory {
    /// BBR (`scavenger`: BBR-S) seeded from `seed`.
    pub fn new(scavenger: bool, seed: Seed) -> BbrFactory {
        BbrFactory {
            scavenger,
            seed,
            built: AtomicU64::new(0),
            forced: Arc::default(),
        }
    }
}

impl ControllerFactory for BbrFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let index = self.built.fetch_add(1, Ordering::Relaxed);
        let rng = self.seed.rng(&format!("bbr/{index}"));
        let mut bbr = Bbr::new(self.scavenger, rng, current_mtu);
        bbr.forced_total = Some(self.forced.clone());
        Box::new(Engine(bbr))
    }
}

impl ControllerCounters for BbrFactory {
    /// BBR-S: `bbr_s_forced_probes`, the ProbeRTTs its RTT deviation
    /// forced (none for plain BBR).
    fn counters(&self) -> Vec<(String, f64)> {
        if !self.scavenger {
            return Vec::new();
        }
        let forced = self.forced.load(Ordering::Relaxed) as f64;
        vec![("bbr_s_forced_probes".into(), forced)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BBR fed a steady 12 MB/s, 30 ms path: `rounds` of sends and ACKs.
    fn run(bbr: &mut Bbr, t0: Instant, steps: u64, rtt_of: impl Fn(u64) -> u64) {
        let us = |u: u64| t0 + Duration::from_micros(u);
        for step in 0..steps {
            if step >= 300 {
                let pn = step - 300;
                let sent = us(pn * 100);
                let now = sent + Duration::from_micros(rtt_of(pn));
                bbr.rate.on_acked(now, pn, sent);
                bbr.acked_in_batch += 1200;
                bbr.handle_end_acks(now, 0, false);
            }
            bbr.handle_sent(us(step * 100), 1200, step);
        }
    }

    #[test]
    fn bbr_measures_the_path_and_leaves_startup() {
        let t0 = Instant::now();
        let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
        run(&mut bbr, t0, 20_000, |_| 30_000);
        assert!((bbr.btlbw() - 12e6).abs() / 12e6 < 0.02, "{}", bbr.btlbw());
        assert_eq!(bbr.rtprop(), Some(Duration::from_millis(30)));
        assert_eq!(bbr.mode(), Mode::ProbeBw);
        // Window: 2 · 12 MB/s · 30 ms + 3 quanta, plus 2 packets in the
        // 5/4 phase.
        let bdp2 = 2.0 * bbr.btlbw() * 0.03;
        assert!(bbr.target_cwnd() as f64 >= bdp2 + 7200.0 - 1.0);
    }

    #[test]
    fn bbr_s_probes_rtt_when_the_rtt_deviates() {
        let t0 = Instant::now();
        let mut bbr = Bbr::new(true, Seed::new(1).rng("bbr"), 1200);
        // RTTs alternating 30 and 110 ms: rttvar far above 20 ms.
        run(&mut bbr, t0, 5_000, |pn| {
            if pn % 2 == 0 { 30_000 } else { 110_000 }
        });
        assert!(bbr.forced_probes() > 0);
        let mut plain = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
        run(&mut plain, t0, 5_000, |pn| {
            if pn % 2 == 0 { 30_000 } else { 110_000 }
        });
        assert_eq!(plain.forced_probes(), 0);
    }

    #[test]
    fn the_probe_bw_phase_is_seeded() {
        let phase = |seed: u64| {
            let mut bbr = Bbr::new(false, Seed::new(seed).rng("bbr"), 1200);
            bbr.enter_probe_bw(Instant::now());
            bbr.cycle_index
        };
        assert_eq!(phase(7), phase(7));
        let phases: std::collections::BTreeSet<usize> = (0..64).map(phase).collect();
        assert!(!phases.contains(&1), "never starts in the 3/4 phase");
        assert!(phases.len() >= 5);
    }

    /// An application-limited sender in Startup keeps its highest pacing
    /// rate while its samples (a small packet now and then) fall; once the
    /// pipe is filled, the model alone sets the rate.
    #[test]
    fn startup_pacing_never_goes_down_before_the_pipe_fills() {
        let t0 = Instant::now();
        let mut bbr = Bbr::new(false, Seed::new(1).rng("bbr"), 1200);
        run(&mut bbr, t0, 400, |_| 30_000);
        let before = bbr.pacing_rate();
        assert_eq!(bbr.mode(), Mode::Startup);
        bbr.btlbw.clear();
        bbr.btlbw.push_back((bbr.round, 2_500.0));
        bbr.hold_startup_pacing();
        assert_eq!(bbr.pacing_rate(), before);
        bbr.filled_pipe = true;
        assert_eq!(bbr.pacing_rate(), (HIGH_GAIN * 2_500.0 * 0.99) as u64);
    }
}
