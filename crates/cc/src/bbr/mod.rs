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
//!   flight is that small. A sample *equal* to RTprop refreshes its age, as
//!   in Linux before 5.10 (the kernels of the Proteus paper's time; 5.10
//!   refreshes only on a smaller one). In the simulator samples often equal
//!   the minimum to the nanosecond, so ProbeRTT is rare: 4 and 7 entries in
//!   two trials of `fig6-yield.toml`'s BBR + Proteus-S (two 100 s BBR runs
//!   each), where an expiry every 10 s would give about 20.
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
//! * **Losses**, as Linux's `bbr_set_cwnd_to_recover_or_restore` around
//!   TCP's recovery: every ACK takes the bytes lost since the last one off
//!   the window; entering recovery saves the window, cuts it to the flight
//!   plus the bytes just acknowledged and starts a round with packet
//!   conservation (the window only replaces what is acknowledged); after
//!   that round the window grows as usual, and leaving recovery restores
//!   the saved window. Persistent congestion (TCP's RTO) sets the window to
//!   4 packets, in an episode restored the same way. Linux's long-term
//!   ("policer") bandwidth model is not implemented.
//! * **The recovery episode**, TCP's in QUIC's terms. TCP recovers until
//!   the retransmission of the last hole found below its recovery point is
//!   acknowledged, and Linux's BBR looks at TCP's state once per ACK, so
//!   when TCP leaves recovery and enters it again on one ACK (under random
//!   loss it does so every round, holes above the old recovery point being
//!   known by then) BBR sees one recovery: one cut and one round of
//!   conservation, not one per round. Here an episode starts when a packet
//!   is declared lost (not one sent before the last episode's newest loss,
//!   RFC 9002 §7.3.2), every loss declared in it moves its mark to now, and
//!   it ends when a packet sent after the mark is acknowledged (QUIC's
//!   retransmissions go in new packets, so this is TCP's "the last repair
//!   acknowledged"). noq-proto declares an ACK's losses after the ACK
//!   batch, so BBR leaves an episode at the batch after the one that ended
//!   it, unless that one's losses moved the mark.
//!
//! **BBR-S**: whenever the smoothed RTT deviation exceeds 20 ms, the sender
//! enters ProbeRTT for at least 40 ms. The paper modified "the kernel BBR
//! implementation" on "the smoothed RTT deviation": the kernel's is `mdev`
//! (`tcp_rtt_estimator`; `tcpi_rttvar`), kept over the newest RTT of each
//! ACK: gain 1/4, but 1/32 for a sample below srtt by more than the
//! deviation.

pub mod delivery;

use crate::context::ControllerCounters;
use crate::engine::{CongestionEngine, Engine};
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
    /// (round, bytes/s) keeping the maximum over [`BTLBW_ROUNDS`]: a
    /// monotonic queue, each sample larger than every later one, so the
    /// maximum is the front (a sample that a later, larger one outlives can
    /// never be the maximum).
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
    /// Whether a recovery episode is under way.
    in_recovery: bool,
    /// When the last episode's newest loss was declared: the episode ends
    /// when a packet sent after it is acknowledged, and losses of packets
    /// sent before it start no new one.
    recovery_mark: Option<Instant>,
    /// The last ACK batch acknowledged a packet sent after the mark: the
    /// episode ends at the next batch unless a loss moves the mark.
    recovery_ending: bool,
    /// This ACK batch acknowledged a packet sent after the mark.
    acked_past_mark: bool,
    /// Packet conservation: the first round of a recovery episode.
    conserving: bool,
    /// Bytes declared lost since the last ACK batch (Linux's
    /// `rs->losses`), taken off the window at the next one.
    lost_since_batch: u64,
    /// The last ACK batch's time and bytes acknowledged (the losses it
    /// reveals are declared right after it).
    last_batch: Option<(Instant, u64)>,
    loss_in_round: bool,
    acked_in_batch: u64,
    srtt: Option<Duration>,
    /// The kernel's smoothed mean deviation of the RTT (BBR-S's signal).
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
            in_recovery: false,
            recovery_mark: None,
            recovery_ending: false,
            acked_past_mark: false,
            conserving: false,
            lost_since_batch: 0,
            last_batch: None,
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
        self.btlbw.front().map_or(0.0, |&(_, b)| b)
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
            self.conserving = false;
        }
        if !sample.app_limited || sample.bytes_per_sec >= self.btlbw() {
            while self
                .btlbw
                .back()
                .is_some_and(|&(_, b)| b <= sample.bytes_per_sec)
            {
                self.btlbw.pop_back();
            }
            self.btlbw.push_back((self.round, sample.bytes_per_sec));
            // Entries expire only as a sample enters, as in Linux's
            // minmax filter: app-limited rounds keep the estimate.
            while self
                .btlbw
                .front()
                .is_some_and(|&(round, _)| round + BTLBW_ROUNDS <= self.round)
            {
                self.btlbw.pop_front();
            }
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

    /// The window after an ACK batch that acknowledged `acked` bytes
    /// (Linux's `bbr_set_cwnd`).
    fn update_cwnd(&mut self, acked: u64) {
        // An ACK for P packets releases at most 2P: the losses first.
        let lost = std::mem::take(&mut self.lost_since_batch);
        self.cwnd = self.cwnd.saturating_sub(lost).max(self.mss);
        if self.conserving {
            self.cwnd = self.cwnd.max(self.rate.in_flight() + acked);
        } else {
            let target = self.target_cwnd();
            if self.filled_pipe {
                self.cwnd = (self.cwnd + acked).min(target);
            } else if self.cwnd < target || self.rate.delivered() < INITIAL_CWND * self.mss {
                self.cwnd += acked;
            }
        }
        self.cwnd = self.cwnd.max(MIN_CWND * self.mss);
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(MIN_CWND * self.mss);
        }
    }

    /// Leaves a recovery episode that the last ACK batch ended and no loss
    /// extended: the window from before it comes back.
    fn settle_recovery(&mut self) {
        if self.recovery_ending {
            self.recovery_ending = false;
            self.in_recovery = false;
            self.conserving = false;
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
    }

    /// Keeps the window to restore after a cut (Linux's `bbr_save_cwnd`):
    /// the window now, unless recovery or ProbeRTT already cut it.
    fn save_cwnd(&mut self) {
        if !self.in_recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    fn on_rtt(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                self.rttvar = kernel_mdev(self.rttvar, srtt, rtt);
                self.srtt = Some((7 * srtt + rtt) / 8);
            }
        }
    }

    /// A congestion event at `now` whose newest lost packet was sent at
    /// `sent` (`persistent`: persistent congestion).
    pub fn on_loss(&mut self, now: Instant, sent: Instant, persistent: bool) {
        self.loss_in_round = true;
        if persistent {
            self.save_cwnd();
            self.in_recovery = true;
            self.recovery_mark = Some(now);
            self.recovery_ending = false;
            self.conserving = false;
            self.lost_since_batch = 0;
            self.cwnd = MIN_CWND * self.mss;
            return;
        }
        if self.in_recovery {
            // The episode goes on until this loss is repaired too.
            self.save_cwnd();
            self.recovery_mark = Some(now);
            self.recovery_ending = false;
            return;
        }
        if self.recovery_mark.is_some_and(|mark| sent <= mark) {
            // A packet in flight during the last episode.
            return;
        }
        self.save_cwnd();
        let acked = match self.last_batch {
            Some((at, acked)) if at == now => acked,
            _ => 0,
        };
        self.in_recovery = true;
        self.recovery_mark = Some(now);
        self.conserving = true;
        self.lost_since_batch = 0;
        // The round of conservation starts now.
        self.next_round_delivered = self.rate.delivered();
        self.cwnd = (self.rate.in_flight() + acked).max(MIN_CWND * self.mss);
    }
}

impl CongestionEngine for Bbr {
    fn handle_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.rate.on_sent(now, pn, u64::from(bytes));
    }

    fn handle_ack(&mut self, now: Instant, sent: Instant, bytes: u64, pn: u64, _: Duration) {
        self.rate.on_acked(now, pn, sent);
        self.acked_in_batch += bytes;
        if self.in_recovery && self.recovery_mark.is_some_and(|mark| sent > mark) {
            self.acked_past_mark = true;
        }
    }

    fn handle_end_acks(&mut self, now: Instant, _in_flight: u64, app_limited: bool) {
        if app_limited {
            self.rate.on_app_limited();
        }
        let acked = std::mem::take(&mut self.acked_in_batch);
        // The episode the previous batch ended; this batch may end it in
        // turn unless its losses, declared after it, extend it.
        self.settle_recovery();
        let past_mark = std::mem::take(&mut self.acked_past_mark);
        self.recovery_ending = past_mark && self.in_recovery;
        self.last_batch = Some((now, acked));
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
        self.lost_since_batch += self.rate.on_lost(pn, now);
    }

    fn handle_congestion(&mut self, now: Instant, sent: Instant, persistent: bool) {
        self.on_loss(now, sent, persistent);
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

/// Linux's update of its smoothed mean deviation (`tcp_rtt_estimator`'s
/// `mdev_us`, unscaled) by `rtt` against the smoothed RTT before it: gain
/// 1/4, and 1/32 for a sample below srtt by more than the deviation (the
/// kernel's damping of decreases).
fn kernel_mdev(mdev: Duration, srtt: Duration, rtt: Duration) -> Duration {
    let error = rtt.abs_diff(srtt);
    let change = if rtt < srtt && error > mdev {
        (error - mdev) / 32
    } else {
        error.abs_diff(mdev) / 4
    };
    if error >= mdev {
        mdev + change
    } else {
        mdev - change
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
mod tests;
