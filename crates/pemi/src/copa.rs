//! The black-box congestion control of §4.5: a Copa-derived window
//! updated per RTT sample (not per ACK, which PEMI cannot see), a target
//! rate CWND / RTT_min, and its feedback enforcement — stop
//! retransmitting, then slow the replies, doubling the slow-down for a
//! sender that has not slowed after an end-to-end RTT.
//!
//! Copa (NSDI 2018) moves towards the target rate 1 / (δ · d_q), with d_q
//! the queueing delay (standing RTT − RTT_min), by ν / (δ · CWND) per ACK,
//! about ν / δ packets per RTT; PEMI changes the window by
//! min(Δt, srtt) / srtt · ν / δ at each RTT sample, Δt being the time since
//! the last change. The velocity ν doubles once per RTT after the window
//! has moved the same way for three RTTs, and returns to 1 when it turns.
//! The standing RTT is the smallest sample of the last srtt / 2. Windows
//! are kept in thousandths of a packet, rates in packets per second: all
//! integers.

use crate::config::Enforcement;
use netsim::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Thousandths of a packet per packet.
const MILLI: u64 = 1000;
/// The smallest window, in packets.
const MIN_CWND: u64 = 2;
/// The largest velocity.
const MAX_VELOCITY: u64 = 1 << 16;
/// Standing-RTT samples kept.
const STANDING_SAMPLES: usize = 256;

/// Which way the window moved over an RTT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// The Copa-derived window.
///
/// `repr(C)`: `last_down`, which every protected packet reads, last, in
/// the line [`crate::protect::Protection`] shares with its other
/// per-packet fields.
#[derive(Clone, Debug)]
#[repr(C)]
pub(crate) struct Copa {
    cwnd: u64,
    velocity: u64,
    delta_percent: u64,
    last_update: Option<Time>,
    standing: VecDeque<(Time, Duration)>,
    /// The window at the start of the current RTT, and when it started.
    period: Option<(Time, u64)>,
    direction: Option<Direction>,
    same_direction: u32,
    /// When a sample last showed a queue (the window went down).
    last_down: Option<Time>,
}

impl Copa {
    /// A window of `initial` packets.
    pub(crate) fn new(initial: u64, delta_percent: u64) -> Copa {
        Copa {
            cwnd: initial.max(MIN_CWND) * MILLI,
            velocity: 1,
            delta_percent: delta_percent.max(1),
            last_update: None,
            standing: VecDeque::new(),
            period: None,
            direction: None,
            same_direction: 0,
            last_down: None,
        }
    }

    /// Whether a sample within `horizon` of `now` showed a standing queue.
    /// Only then is the target a limit: without samples, or without a
    /// queue, the window is only how far it has grown yet (docs/pemi.md).
    pub(crate) fn congested(&self, now: Time, horizon: Duration) -> bool {
        self.last_down.is_some_and(|t| now - t <= horizon)
    }

    /// The window, in packets.
    pub(crate) fn cwnd_packets(&self) -> u64 {
        self.cwnd / MILLI
    }

    /// The velocity ν.
    #[cfg(test)]
    pub(crate) fn velocity(&self) -> u64 {
        self.velocity
    }

    /// An RTT sample at `now`.
    pub(crate) fn on_sample(&mut self, now: Time, sample: Duration, srtt: Duration, min: Duration) {
        let srtt = srtt.max(Duration::from_micros(1));
        while self
            .standing
            .front()
            .is_some_and(|&(t, _)| now - t > srtt / 2 || self.standing.len() >= STANDING_SAMPLES)
        {
            self.standing.pop_front();
        }
        self.standing.push_back((now, sample));
        let standing = self
            .standing
            .iter()
            .map(|&(_, s)| s)
            .min()
            .unwrap_or(sample);
        let queueing = standing.saturating_sub(min);
        // Up while CWND / standing ≤ 1 / (δ · d_q), i.e. CWND · δ · d_q ≤
        // standing (in thousandths of a packet and hundredths of δ).
        let lhs = u128::from(self.cwnd) * u128::from(self.delta_percent) * queueing.as_nanos();
        let rhs = standing.as_nanos() * u128::from(MILLI) * 100;
        let up = lhs <= rhs;
        let elapsed = self.last_update.map_or(srtt, |t| (now - t).min(srtt));
        self.last_update = Some(now);
        // min(Δt, srtt) / srtt · ν / δ packets.
        let change = elapsed.as_nanos() * u128::from(self.velocity) * u128::from(MILLI) * 100
            / (srtt.as_nanos() * u128::from(self.delta_percent));
        let change = u64::try_from(change).unwrap_or(u64::MAX);
        self.cwnd = if up {
            self.cwnd.saturating_add(change)
        } else {
            self.last_down = Some(now);
            self.cwnd.saturating_sub(change).max(MIN_CWND * MILLI)
        };
        self.update_velocity(now, srtt);
    }

    /// Once per RTT: the direction the window moved, and ν.
    fn update_velocity(&mut self, now: Time, srtt: Duration) {
        let Some((start, cwnd)) = self.period else {
            self.period = Some((now, self.cwnd));
            return;
        };
        if now - start < srtt {
            return;
        }
        let direction = if self.cwnd >= cwnd {
            Direction::Up
        } else {
            Direction::Down
        };
        if self.direction == Some(direction) {
            self.same_direction += 1;
            if self.same_direction >= 3 {
                self.velocity = (self.velocity * 2).min(MAX_VELOCITY);
            }
        } else {
            self.direction = Some(direction);
            self.same_direction = 0;
            self.velocity = 1;
        }
        self.period = Some((now, self.cwnd));
    }

    /// The target rate CWND / RTT_min, in packets per second.
    pub(crate) fn target_pps(&self, min: Duration) -> u64 {
        let min = min.as_nanos().max(1);
        let pps = u128::from(self.cwnd) * 1_000_000_000 / (min * u128::from(MILLI));
        u64::try_from(pps).unwrap_or(u64::MAX)
    }
}

/// How PEMI acts on a connection's rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Under the target: retransmit as inference says.
    #[default]
    Normal,
    /// Over it: no retransmissions.
    NoRetransmit,
    /// Over it on forwarded packets alone: slow the replies too.
    SlowReplies,
}

/// The rate meter and the enforcement state of §4.5.2.
#[derive(Clone, Debug, Default)]
pub(crate) struct Enforcer {
    period_start: Option<Time>,
    forwarded: u64,
    resent: u64,
    /// Forwarded packets per second over the last period.
    last_forwarded_pps: Option<u64>,
    level: Level,
    /// Doublings of the slow-down.
    doublings: u32,
}

/// What the enforcer asks for a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplyAction {
    /// Hold every reply this long.
    pub(crate) delay: Option<Duration>,
    /// Hold one reply back until this many later ones have passed.
    pub(crate) reorder: Option<u32>,
}

impl Enforcer {
    /// A protected packet forwarded (`resent`: PEMI's retransmission).
    pub(crate) fn on_sent(&mut self, resent: bool) {
        if resent {
            self.resent += 1;
        } else {
            self.forwarded += 1;
        }
    }

    /// Closes a measurement period of length `period` at `now` against
    /// `target` packets per second. Returns whether the level rose.
    pub(crate) fn tick(&mut self, now: Time, period: Duration, target: u64) -> bool {
        let Some(start) = self.period_start else {
            self.period_start = Some(now);
            return false;
        };
        let span = now - start;
        if span < period || span.is_zero() {
            return false;
        }
        let per_second = |n: u64| {
            let pps = u128::from(n) * 1_000_000_000 / span.as_nanos();
            u64::try_from(pps).unwrap_or(u64::MAX)
        };
        let (forwarded, total) = (
            per_second(self.forwarded),
            per_second(self.forwarded + self.resent),
        );
        let before = self.level;
        self.level = if forwarded > target {
            Level::SlowReplies
        } else if total > target {
            Level::NoRetransmit
        } else {
            Level::Normal
        };
        match (before, self.level) {
            // Still too fast an end-to-end RTT later and not slower: double.
            (Level::SlowReplies, Level::SlowReplies)
                if self
                    .last_forwarded_pps
                    .is_some_and(|last| forwarded >= last) =>
            {
                self.doublings = (self.doublings + 1).min(6);
            }
            (_, Level::SlowReplies) => {}
            _ => self.doublings = 0,
        }
        self.last_forwarded_pps = Some(forwarded);
        self.period_start = Some(now);
        self.forwarded = 0;
        self.resent = 0;
        self.level > before
    }

    /// The current level.
    pub(crate) fn level(&self) -> Level {
        self.level
    }

    /// How to treat a reply now, for an end-to-end RTT of `e2e`.
    pub(crate) fn reply_action(&self, mode: Enforcement, e2e: Duration) -> ReplyAction {
        if self.level != Level::SlowReplies {
            return ReplyAction {
                delay: None,
                reorder: None,
            };
        }
        let factor = 1u32 << self.doublings;
        let delay = (e2e / 8 * factor).min(Duration::from_secs(1));
        let reorder = 3 * factor;
        let (delay, reorder) = match mode {
            Enforcement::Off => (None, None),
            Enforcement::Delay => (Some(delay), None),
            Enforcement::Reorder => (None, Some(reorder)),
            Enforcement::Both => (Some(delay), Some(reorder)),
        };
        ReplyAction { delay, reorder }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn without_queueing_the_window_grows_about_two_packets_per_rtt() {
        let mut copa = Copa::new(10, 50);
        for k in 1..=10 {
            copa.on_sample(Time::from_millis(10 * k), ms(10), ms(10), ms(10));
        }
        // ν / δ = 2 packets per RTT while ν is 1 (it doubles after three
        // RTTs in the same direction).
        assert!(copa.cwnd_packets() >= 28, "{}", copa.cwnd_packets());
        assert!(copa.velocity() > 1);
        assert_eq!(copa.target_pps(ms(10)), copa.cwnd / 10);
    }

    #[test]
    fn a_standing_queue_shrinks_the_window() {
        let mut copa = Copa::new(100, 50);
        assert!(!copa.congested(Time::ZERO, ms(100)));
        // d_q = 30 ms: target 1 / (0.5 · 30 ms) ≈ 67 packets/s, far below
        // 100 packets / 40 ms.
        for k in 1..=20 {
            copa.on_sample(Time::from_millis(40 * k), ms(40), ms(40), ms(10));
        }
        assert!(copa.cwnd_packets() < 100);
        assert!(copa.congested(Time::from_millis(800), ms(100)));
        assert!(!copa.congested(Time::from_millis(1000), ms(100)));
    }

    #[test]
    fn enforcement_escalates_then_relaxes() {
        let mut e = Enforcer::default();
        let period = ms(100);
        assert!(!e.tick(Time::ZERO, period, 1000));
        for _ in 0..200 {
            e.on_sent(false);
        }
        for _ in 0..10 {
            e.on_sent(true);
        }
        // 2000 forwarded per second against a target of 1000.
        assert!(e.tick(Time::from_millis(100), period, 1000));
        assert_eq!(e.level(), Level::SlowReplies);
        let first = e.reply_action(Enforcement::Both, ms(80));
        assert_eq!(first.delay, Some(ms(10)));
        assert_eq!(first.reorder, Some(3));
        for _ in 0..200 {
            e.on_sent(false);
        }
        e.tick(Time::from_millis(200), period, 1000);
        let second = e.reply_action(Enforcement::Delay, ms(80));
        assert_eq!((second.delay, second.reorder), (Some(ms(20)), None));
        // Retransmissions alone put it over: only they stop.
        for _ in 0..90 {
            e.on_sent(false);
        }
        for _ in 0..20 {
            e.on_sent(true);
        }
        e.tick(Time::from_millis(300), period, 1000);
        assert_eq!(e.level(), Level::NoRetransmit);
        assert_eq!(e.reply_action(Enforcement::Both, ms(80)).delay, None);
        e.tick(Time::from_millis(400), period, 1000);
        assert_eq!(e.level(), Level::Normal);
    }
}
