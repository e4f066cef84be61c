//! BBR (version 1: Cardwell et al., "BBR: Congestion-Based Congestion
//! Control", ACM Queue 2016; draft-cardwell-iccrg-bbr-congestion-control-00)
//! as a deterministic controller.
//!
//! noq-proto's own BBRv3 draws its probe timing from the operating
//! system, so runs with it do not repeat; TECC uses BBR twice (the tunnel's
//! controller and the one the application server's TECC controller starts
//! with), and its runs must repeat. This one draws nothing at run time: the
//! ProbeBW phase it starts in comes from the seed.
//!
//! * **Delivery rate** per acknowledged packet (draft-cheng-iccrg-delivery-
//!   rate-estimation): the bytes delivered between the packet's send and
//!   its ACK over the longer of the send and ACK intervals; a sample taken
//!   while the connection was application-limited only raises the
//!   estimate.
//! * **BtlBw**: the maximum delivery rate over the last 10 round trips;
//!   **RTprop**: the minimum RTT over 10 s.
//! * **Pacing** in Startup never goes down (draft §4.2.1's
//!   BBRSetPacingRateWithGain: a lower rate is taken only once the pipe is
//!   filled): a sender the application limits (a client that sends only
//!   requests and feedback) stays in Startup, and its samples measure only
//!   what it offered.
//! * **States**: Startup (gain 2/ln 2 for pacing and window until the
//!   bandwidth grew less than 25% in 3 rounds not limited by the
//!   application), Drain (pacing gain ln 2/2
//!   until the data in flight fits one BDP), ProbeBW (pacing gains 5/4, 3/4,
//!   then six rounds of 1, each phase one RTprop; window gain 2), ProbeRTT
//!   (4 packets for 200 ms and a round, when RTprop was not refreshed for
//!   10 s).
//! * **ACK aggregation** (Linux BBR's `extra_acked`, 2019): the window
//!   also covers the largest burst of ACKs beyond BtlBw's expectation over
//!   the last 10 rounds, so bursty links (cellular traces) stay busy.
//! * Losses do not change the window (BBRv1 without its packet-conservation
//!   episode; the model, not loss, sets the rate).
//!
//! Gains are integers per thousand; rates are bytes per second.

use quic::congestion::{Controller, ControllerFactory, ControllerMetrics, RttEstimator};
use std::any::Any;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HIGH_GAIN: u64 = 2885; // 2/ln 2, per mille
const DRAIN_GAIN: u64 = 347; // ln 2/2
const CYCLE: [u64; 8] = [1250, 750, 1000, 1000, 1000, 1000, 1000, 1000];
const BW_ROUNDS: u64 = 10;
const RTPROP_WINDOW: Duration = Duration::from_secs(10);
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
const INITIAL_RTT: Duration = Duration::from_millis(100);
/// Packets tracked behind the latest acknowledged one.
const MAX_TRACKED: u64 = 100_000;

/// The factory: BBR with its ProbeBW starting phase from the seed.
#[derive(Clone, Copy, Debug, Default)]
pub struct BbrConfig {
    /// Chooses the ProbeBW phase to start in (0–7, skipping the 3/4 one).
    pub phase_seed: u64,
}

impl ControllerFactory for BbrConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Bbr::new(now, current_mtu, self.phase_seed))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// What was known when a packet left.
#[derive(Clone, Copy, Debug)]
struct Sent {
    delivered: u64,
    delivered_time: Instant,
    first_sent: Instant,
    sent: Instant,
}

/// Deterministic BBRv1.
#[derive(Clone, Debug)]
pub struct Bbr {
    mss: u64,
    state: State,
    /// Max delivery rate per round over the last rounds: (round, rate).
    bw_samples: VecDeque<(u64, u64)>,
    rtprop: Option<Duration>,
    rtprop_at: Instant,
    delivered: u64,
    delivered_time: Instant,
    first_sent: Instant,
    in_flight: u64,
    packets: BTreeMap<u64, Sent>,
    round: u64,
    next_round_delivered: u64,
    full_bw: u64,
    full_bw_rounds: u8,
    filled: bool,
    /// The highest pacing rate set before the pipe filled: until then the
    /// rate never goes down (the draft's BBRSetPacingRateWithGain, Linux's
    /// `bbr_set_pacing_rate`).
    startup_pacing: u64,
    phase: usize,
    phase_start: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round: Option<u64>,
    cwnd: u64,
    saved_cwnd: u64,
    /// The window before a persistent-congestion collapse, restored if the
    /// losses prove spurious.
    before_collapse: Option<u64>,
    /// ACK aggregation: the current epoch's start and bytes acknowledged.
    ack_epoch: (Instant, u64),
    /// The largest excess of acknowledged bytes over BtlBw's expectation,
    /// in two slots of 5 rounds each (Linux's `extra_acked`).
    extra_acked: [u64; 2],
    extra_slot: (usize, u64),
}

impl Bbr {
    /// A controller at `now` with `mtu`-byte packets.
    pub fn new(now: Instant, mtu: u16, phase_seed: u64) -> Bbr {
        let mss = u64::from(mtu);
        // Any phase but the 3/4 one (index 1), as BBRv1 chooses.
        let phase = [0, 2, 3, 4, 5, 6, 7][(phase_seed % 7) as usize];
        let mut bbr = Bbr {
            mss,
            state: State::Startup,
            bw_samples: VecDeque::new(),
            rtprop: None,
            rtprop_at: now,
            delivered: 0,
            delivered_time: now,
            first_sent: now,
            in_flight: 0,
            packets: BTreeMap::new(),
            round: 0,
            next_round_delivered: 0,
            full_bw: 0,
            full_bw_rounds: 0,
            filled: false,
            startup_pacing: 0,
            phase,
            phase_start: now,
            probe_rtt_done: None,
            probe_rtt_round: None,
            cwnd: 10 * mss,
            saved_cwnd: 10 * mss,
            before_collapse: None,
            ack_epoch: (now, 0),
            extra_acked: [0; 2],
            extra_slot: (0, 0),
        };
        bbr.startup_pacing = bbr.model_pacing_rate();
        bbr
    }

    /// BtlBw, bytes per second (0 before the first sample).
    pub fn bandwidth(&self) -> u64 {
        self.bw_samples.iter().map(|&(_, r)| r).max().unwrap_or(0)
    }

    fn rtprop(&self) -> Duration {
        self.rtprop.unwrap_or(INITIAL_RTT)
    }

    fn bdp(&self) -> u64 {
        let bw = self.bandwidth();
        if bw == 0 {
            return 10 * self.mss;
        }
        (u128::from(bw) * self.rtprop().as_micros() / 1_000_000) as u64
    }

    fn pacing_gain(&self) -> u64 {
        match self.state {
            State::Startup => HIGH_GAIN,
            State::Drain => DRAIN_GAIN,
            State::ProbeBw => CYCLE[self.phase],
            State::ProbeRtt => 1000,
        }
    }

    fn cwnd_gain(&self) -> u64 {
        match self.state {
            State::Startup | State::Drain => HIGH_GAIN,
            _ => 2000,
        }
    }

    /// The pacing rate, bytes per second: the gain times BtlBw (ten
    /// packets per RTT before the first sample), never lower than before
    /// until the pipe is filled. A sender the application limits from the
    /// start (a client sending requests and feedback) stays in Startup,
    /// and its samples only measure what it offered: pacing at them would
    /// hold back its next burst.
    pub fn pacing_rate(&self) -> u64 {
        let rate = self.model_pacing_rate();
        if self.filled {
            rate
        } else {
            rate.max(self.startup_pacing)
        }
    }

    fn hold_startup_pacing(&mut self) {
        if !self.filled {
            self.startup_pacing = self.startup_pacing.max(self.model_pacing_rate());
        }
    }

    fn model_pacing_rate(&self) -> u64 {
        let bw = self.bandwidth();
        let bw = if bw == 0 {
            let rtt = self.rtprop().as_micros().max(1);
            (u128::from(10 * self.mss) * 1_000_000 / rtt) as u64
        } else {
            bw
        };
        bw * self.pacing_gain() / 1000
    }

    fn add_bw_sample(&mut self, rate: u64) {
        match self.bw_samples.back_mut() {
            Some((round, best)) if *round == self.round => *best = (*best).max(rate),
            _ => self.bw_samples.push_back((self.round, rate)),
        }
        while self
            .bw_samples
            .front()
            .is_some_and(|&(round, _)| round + BW_ROUNDS <= self.round)
        {
            self.bw_samples.pop_front();
        }
    }

    /// Leaves Startup once the bandwidth stops growing (3 rounds <25%).
    fn check_full_pipe(&mut self, round_start: bool) {
        if self.filled || !round_start {
            return;
        }
        let bw = self.bandwidth();
        if bw * 4 >= self.full_bw * 5 {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        if self.full_bw_rounds >= 3 {
            self.filled = true;
        }
    }

    fn update_state(&mut self, now: Instant) {
        match self.state {
            State::Startup if self.filled => self.state = State::Drain,
            State::Drain if self.in_flight <= self.bdp() => {
                self.state = State::ProbeBw;
                self.phase_start = now;
            }
            State::ProbeBw if now.saturating_duration_since(self.phase_start) >= self.rtprop() => {
                self.phase = (self.phase + 1) % CYCLE.len();
                self.phase_start = now;
            }
            _ => {}
        }
        let stale = now.saturating_duration_since(self.rtprop_at) > RTPROP_WINDOW;
        if stale && self.state != State::ProbeRtt && self.rtprop.is_some() {
            self.saved_cwnd = self.cwnd;
            self.state = State::ProbeRtt;
            self.probe_rtt_done = None;
            self.probe_rtt_round = None;
        }
        if self.state == State::ProbeRtt {
            if self.probe_rtt_done.is_none() && self.in_flight <= 4 * self.mss {
                self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                self.probe_rtt_round = Some(self.round + 1);
            }
            let done = self.probe_rtt_done.is_some_and(|at| now >= at)
                && self.probe_rtt_round.is_some_and(|r| self.round >= r);
            if done {
                self.rtprop_at = now;
                self.cwnd = self.cwnd.max(self.saved_cwnd);
                self.state = if self.filled {
                    self.phase_start = now;
                    State::ProbeBw
                } else {
                    State::Startup
                };
            }
        }
    }

    /// Estimates how much more than BtlBw·t arrives in bursts (ACK
    /// aggregation, bursty links such as cellular traces), so the window
    /// covers it (Linux BBR's `bbr_update_ack_aggregation`).
    fn update_ack_aggregation(&mut self, now: Instant, acked: u64, round_start: bool) {
        if round_start {
            self.extra_slot.1 += 1;
            if self.extra_slot.1 >= 5 {
                self.extra_slot = (1 - self.extra_slot.0, 0);
                self.extra_acked[self.extra_slot.0] = 0;
            }
        }
        let elapsed = now.saturating_duration_since(self.ack_epoch.0);
        let expected = (u128::from(self.bandwidth()) * elapsed.as_micros() / 1_000_000) as u64;
        if self.ack_epoch.1 <= expected || self.ack_epoch.1 + acked >= 1 << 20 {
            self.ack_epoch = (now, 0);
            return;
        }
        self.ack_epoch.1 += acked;
        let extra = (self.ack_epoch.1 - expected).min(self.cwnd);
        let slot = &mut self.extra_acked[self.extra_slot.0];
        *slot = (*slot).max(extra);
    }

    fn update_cwnd(&mut self, acked: u64) {
        let extra = self.extra_acked.iter().copied().max().unwrap_or(0);
        let target = self.bdp() * self.cwnd_gain() / 1000 + 3 * self.mss + extra;
        if self.filled {
            self.cwnd = (self.cwnd + acked).min(target);
        } else if self.cwnd < target || self.delivered < 10 * self.mss {
            self.cwnd += acked;
        }
        self.cwnd = self.cwnd.max(4 * self.mss);
    }
}

impl Controller for Bbr {
    fn on_packet_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        if self.in_flight == 0 {
            self.first_sent = now;
            self.delivered_time = now;
        }
        self.in_flight += u64::from(bytes);
        self.packets.insert(
            pn,
            Sent {
                delivered: self.delivered,
                delivered_time: self.delivered_time,
                first_sent: self.first_sent,
                sent: now,
            },
        );
    }

    fn on_ack(
        &mut self,
        now: Instant,
        _sent: Instant,
        bytes: u64,
        pn: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        let min = rtt.min();
        if self.rtprop.is_none_or(|r| min < r)
            || now.saturating_duration_since(self.rtprop_at) > RTPROP_WINDOW
        {
            if self.rtprop != Some(min) {
                self.rtprop_at = now;
            }
            self.rtprop = Some(min);
        }
        self.delivered += bytes;
        self.delivered_time = now;
        self.in_flight = self.in_flight.saturating_sub(bytes);
        let Some(sent) = self.packets.remove(&pn) else {
            return;
        };
        // Forget packets far older than this one (lost for good).
        while self
            .packets
            .first_key_value()
            .is_some_and(|(&old, _)| old + MAX_TRACKED < pn)
        {
            self.packets.pop_first();
        }
        self.first_sent = sent.sent;
        let round_start = sent.delivered >= self.next_round_delivered;
        if round_start {
            self.next_round_delivered = self.delivered;
            self.round += 1;
        }
        let send_elapsed = sent.sent.saturating_duration_since(sent.first_sent);
        let ack_elapsed = now.saturating_duration_since(sent.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        if interval >= Duration::from_micros(100) {
            let rate = (u128::from(self.delivered - sent.delivered) * 1_000_000
                / interval.as_micros().max(1)) as u64;
            if !app_limited || rate > self.bandwidth() {
                self.add_bw_sample(rate);
            }
        }
        // A round limited by the application says nothing about the pipe.
        self.check_full_pipe(round_start && !app_limited);
        self.update_ack_aggregation(now, bytes, round_start);
        self.update_state(now);
        self.update_cwnd(bytes);
        self.hold_startup_pacing();
    }

    fn on_end_acks(
        &mut self,
        _now: Instant,
        in_flight: u64,
        _app_limited: bool,
        _largest: Option<u64>,
    ) {
        self.in_flight = in_flight;
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent: Instant,
        is_persistent_congestion: bool,
        _is_ecn: bool,
        _lost_bytes: u64,
        _largest_lost_pn: u64,
    ) {
        if is_persistent_congestion {
            self.before_collapse = Some(self.cwnd);
            self.cwnd = 4 * self.mss;
        }
    }

    fn on_spurious_congestion_event(&mut self) {
        if let Some(cwnd) = self.before_collapse.take() {
            self.cwnd = self.cwnd.max(cwnd);
        }
    }

    fn on_packet_lost(&mut self, lost_bytes: u16, _pn: u64, _now: Instant) {
        // The packet's send state stays: a loss declared on reordering is
        // often followed by its ACK, whose delivery-rate sample counts.
        self.in_flight = self.in_flight.saturating_sub(u64::from(lost_bytes));
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mss = u64::from(new_mtu);
    }

    fn window(&self) -> u64 {
        if self.state == State::ProbeRtt {
            4 * self.mss
        } else {
            self.cwnd
        }
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window();
        metrics.pacing_rate = Some(self.pacing_rate());
        metrics.bandwidth_estimate = Some(self.bandwidth().saturating_mul(8));
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        10 * self.mss
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_and_gains() {
        let now = Instant::now();
        let bbr = Bbr::new(now, 1200, 1);
        assert_eq!(bbr.state, State::Startup);
        assert_eq!(bbr.phase, 2);
        // Before any sample: ten packets per initial RTT, times 2/ln 2.
        assert_eq!(bbr.pacing_rate(), 120_000 * 2885 / 1000);
        assert_eq!(bbr.window(), 12_000);
    }

    /// An application-limited sender in Startup: its samples (a small
    /// packet now and then) are far below the initial rate, which it keeps;
    /// a higher sample raises the rate for good until the pipe is filled.
    #[test]
    fn startup_pacing_never_goes_down() {
        let now = Instant::now();
        let mut bbr = Bbr::new(now, 1200, 1);
        let initial = bbr.pacing_rate();
        bbr.add_bw_sample(2_500);
        bbr.hold_startup_pacing();
        assert_eq!(bbr.pacing_rate(), initial);
        bbr.round = 1;
        bbr.add_bw_sample(1_000_000);
        bbr.hold_startup_pacing();
        assert_eq!(bbr.pacing_rate(), 1_000_000 * 2885 / 1000);
        bbr.round = 20;
        bbr.add_bw_sample(2_500);
        bbr.hold_startup_pacing();
        assert_eq!(bbr.bandwidth(), 2_500);
        assert_eq!(bbr.pacing_rate(), 1_000_000 * 2885 / 1000);
        // Once the pipe is filled, the model alone sets it.
        bbr.filled = true;
        assert_eq!(bbr.pacing_rate(), 2_500 * 2885 / 1000);
    }
}
