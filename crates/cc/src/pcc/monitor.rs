//! Monitor intervals (MIs): the packets a PCC sender sends at one test
//! rate over about one RTT, and what became of them.
//!
//! An MI takes every packet sent while it is open, by packet number and
//! send time. It closes to new packets once it has lasted its duration
//! and holds at least [`MIN_PACKETS`]; it is *complete* when every packet
//! it sent is acknowledged or lost, or when a timeout passes after its
//! last packet: noq-proto drops Initial and Handshake packets without a
//! callback when it discards their keys, and reports packet numbers of
//! all spaces through one callback, so an MI of the handshake may never
//! hear of all its packets. An acknowledgement is matched on both its
//! packet number and its send time (packet numbers of different spaces
//! collide; send times do not repeat within one space's range). A loss
//! carries no send time in noq-proto's callback and is matched on the
//! packet number alone.
//!
//! Per MI: the sending rate (bytes over the send span plus one packet's
//! transmission time at the target rate, as PCC-Uspace computes it), the
//! goodput, the loss rate, and the RTT samples of its acknowledged
//! packets against their send times, kept as running sums
//! ([`Regression`]) from which the RTT gradient (least-squares slope, s/s),
//! the RTT deviation (population standard deviation) and the regression
//! error come without storing the samples.

use netsim::Rate;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The fewest packets an MI holds before it closes (PCC-Uspace waits for
/// 4 reliable RTT samples).
pub const MIN_PACKETS: u32 = 8;

/// Running least-squares sums over (x, y) samples (Welford's update, so
/// that nearly equal values lose no precision).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Regression {
    n: u32,
    mean_x: f64,
    mean_y: f64,
    m2_x: f64,
    m2_y: f64,
    c_xy: f64,
}

impl Regression {
    /// Adds one sample.
    pub fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        let n = f64::from(self.n);
        let dx = x - self.mean_x;
        self.mean_x += dx / n;
        let dy = y - self.mean_y;
        self.mean_y += dy / n;
        self.m2_x += dx * (x - self.mean_x);
        self.m2_y += dy * (y - self.mean_y);
        self.c_xy += dx * (y - self.mean_y);
    }

    /// Samples added.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Whether no sample was added.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The mean of y (0 without samples).
    pub fn mean_y(&self) -> f64 {
        self.mean_y
    }

    /// The least-squares slope of y against x (0 with fewer than two
    /// distinct x).
    pub fn slope(&self) -> f64 {
        if self.n < 2 || self.m2_x <= 0.0 {
            0.0
        } else {
            self.c_xy / self.m2_x
        }
    }

    /// The population standard deviation of y.
    pub fn deviation_y(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2_y.max(0.0) / f64::from(self.n)).sqrt()
        }
    }

    /// The root mean square of the residuals y − ŷ of the least-squares
    /// line.
    pub fn residual_rms(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let explained = if self.m2_x > 0.0 {
            self.c_xy * self.c_xy / self.m2_x
        } else {
            0.0
        };
        ((self.m2_y - explained).max(0.0) / f64::from(self.n)).sqrt()
    }
}

/// One monitor interval.
#[derive(Clone, Debug)]
pub struct MonitorInterval {
    /// Its sequence number (from 0 per connection).
    pub id: u64,
    /// The rate it was sent at.
    pub target: Rate,
    /// Whether rate control waits for its utility.
    pub useful: bool,
    /// The first packet's send time.
    pub start: Instant,
    /// The last packet's send time.
    pub end: Instant,
    /// Whether it stopped taking packets.
    pub closed: bool,
    first_pn: u64,
    last_pn: u64,
    sent_packets: u32,
    sent_bytes: u64,
    acked_packets: u32,
    acked_bytes: u64,
    lost_packets: u32,
    lost_bytes: u64,
    /// RTT (s) against send time (s since `start`) of its acknowledged
    /// packets whose samples were admitted.
    rtt: Regression,
}

/// What one complete MI measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MiStats {
    /// The MI's sequence number.
    pub id: u64,
    /// The rate it was sent at.
    pub target: Rate,
    /// Whether rate control waits for it.
    pub useful: bool,
    /// The rate it really sent at, Mbit/s.
    pub rate_mbps: f64,
    /// Bytes acknowledged over the same span, Mbit/s.
    pub goodput_mbps: f64,
    /// Bytes lost over bytes acknowledged or lost.
    pub loss: f64,
    /// The send span plus one packet's transmission time, seconds.
    pub duration_s: f64,
    /// Admitted RTT samples.
    pub samples: u32,
    /// Their mean, seconds.
    pub mean_rtt_s: f64,
    /// The least-squares slope of RTT against send time (dimensionless).
    pub gradient: f64,
    /// The population standard deviation of the RTT samples, seconds.
    pub deviation_s: f64,
    /// The RMS residual of the regression over the MI's duration (the
    /// paper's §5 regression error, dimensionless).
    pub regression_error: f64,
    /// Packets it sent.
    pub packets: u32,
    /// Whether a timeout completed it before every packet was accounted
    /// for.
    pub timed_out: bool,
}

impl MonitorInterval {
    fn new(id: u64, target: Rate, useful: bool, now: Instant, pn: u64) -> MonitorInterval {
        MonitorInterval {
            id,
            target,
            useful,
            start: now,
            end: now,
            closed: false,
            first_pn: pn,
            last_pn: pn,
            sent_packets: 0,
            sent_bytes: 0,
            acked_packets: 0,
            acked_bytes: 0,
            lost_packets: 0,
            lost_bytes: 0,
            rtt: Regression::default(),
        }
    }

    fn add_packet(&mut self, now: Instant, bytes: u16, pn: u64) {
        self.end = now;
        self.first_pn = self.first_pn.min(pn);
        self.last_pn = self.last_pn.max(pn);
        self.sent_packets += 1;
        self.sent_bytes += u64::from(bytes);
    }

    /// Packets sent.
    pub fn packets(&self) -> u32 {
        self.sent_packets
    }

    fn holds(&self, pn: u64) -> bool {
        (self.first_pn..=self.last_pn).contains(&pn)
    }

    fn sent_within(&self, sent: Instant) -> bool {
        self.start <= sent && sent <= self.end
    }

    fn unaccounted(&self) -> u32 {
        self.sent_packets
            .saturating_sub(self.acked_packets + self.lost_packets)
    }

    fn stats(&self, mtu: u16, timed_out: bool) -> MiStats {
        let target_bps = self.target.bits_per_sec().max(1) as f64;
        let span = (self.end - self.start).as_secs_f64();
        let duration_s = span + f64::from(mtu) * 8.0 / target_bps;
        let mbps = |bytes: u64| bytes as f64 * 8.0 / duration_s / 1e6;
        let accounted = self.acked_bytes + self.lost_bytes;
        let loss = if accounted == 0 {
            0.0
        } else {
            self.lost_bytes as f64 / accounted as f64
        };
        MiStats {
            id: self.id,
            target: self.target,
            useful: self.useful,
            rate_mbps: mbps(self.sent_bytes),
            goodput_mbps: mbps(self.acked_bytes),
            loss,
            duration_s,
            samples: self.rtt.len(),
            mean_rtt_s: self.rtt.mean_y(),
            gradient: self.rtt.slope(),
            deviation_s: self.rtt.deviation_y(),
            regression_error: self.rtt.residual_rms() / duration_s,
            packets: self.sent_packets,
            timed_out,
        }
    }
}

/// The open and unfinished MIs of one connection, oldest first.
#[derive(Clone, Debug, Default)]
pub struct MonitorQueue {
    intervals: VecDeque<MonitorInterval>,
    next_id: u64,
}

impl MonitorQueue {
    /// The MI taking packets now, if any.
    pub fn open(&self) -> Option<&MonitorInterval> {
        self.intervals.back().filter(|mi| !mi.closed)
    }

    /// Whether the open MI (if any) should close before a packet sent at
    /// `now`: it lasted `duration` and holds enough packets.
    pub fn due(&self, now: Instant, duration: Duration) -> bool {
        self.open()
            .is_none_or(|mi| mi.sent_packets >= MIN_PACKETS && now - mi.start >= duration)
    }

    /// Closes the open MI and opens the next at `target`; returns its id.
    pub fn start(&mut self, now: Instant, pn: u64, target: Rate, useful: bool) -> u64 {
        if let Some(mi) = self.intervals.back_mut() {
            mi.closed = true;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.intervals
            .push_back(MonitorInterval::new(id, target, useful, now, pn));
        id
    }

    /// The id the next MI will get.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// A packet sent into the open MI.
    pub fn on_sent(&mut self, now: Instant, bytes: u16, pn: u64) {
        if let Some(mi) = self.intervals.back_mut().filter(|mi| !mi.closed) {
            mi.add_packet(now, bytes, pn);
        }
    }

    /// An acknowledged packet: its number, send time and size.
    pub fn on_acked(&mut self, sent: Instant, bytes: u64, pn: u64) {
        if let Some(mi) = self
            .intervals
            .iter_mut()
            .find(|mi| mi.holds(pn) && mi.sent_within(sent) && mi.unaccounted() > 0)
        {
            mi.acked_packets += 1;
            mi.acked_bytes += bytes;
        }
    }

    /// An admitted RTT sample of packet `pn`, sent at `sent`.
    pub fn on_rtt(&mut self, sent: Instant, pn: u64, rtt: Duration) {
        if let Some(mi) = self
            .intervals
            .iter_mut()
            .find(|mi| mi.holds(pn) && mi.sent_within(sent))
        {
            let at = (sent - mi.start).as_secs_f64();
            mi.rtt.add(at, rtt.as_secs_f64());
        }
    }

    /// A lost packet (noq-proto gives no send time with it).
    pub fn on_lost(&mut self, bytes: u16, pn: u64) {
        if let Some(mi) = self
            .intervals
            .iter_mut()
            .find(|mi| mi.holds(pn) && mi.unaccounted() > 0)
        {
            mi.lost_packets += 1;
            mi.lost_bytes += u64::from(bytes);
        }
    }

    /// Takes the oldest MI if it is complete at `now`: every packet
    /// accounted for, or `timeout` passed since its last packet.
    pub fn pop_complete(&mut self, now: Instant, timeout: Duration, mtu: u16) -> Option<MiStats> {
        let mi = self.intervals.front()?;
        if !mi.closed {
            return None;
        }
        let done = mi.unaccounted() == 0;
        let timed_out = !done && now >= mi.end + timeout;
        if !(done || timed_out) {
            return None;
        }
        let mi = self.intervals.pop_front()?;
        Some(mi.stats(mtu, timed_out))
    }

    /// MIs not yet complete.
    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_of_a_line_has_its_slope_and_no_residual() {
        let mut r = Regression::default();
        for i in 0..10 {
            let x = f64::from(i) * 0.001;
            r.add(x, 0.030 + 0.5 * x);
        }
        assert!((r.slope() - 0.5).abs() < 1e-9);
        assert!(r.residual_rms() < 1e-12);
        // y = 0.030 + 0.5·x over x = 0..9 ms: mean 0.03225.
        assert!((r.mean_y() - 0.032_25).abs() < 1e-12);
        // The deviation of 0.5·x, x = 0..9 ms: 0.5 ms · √8.25.
        assert!((r.deviation_y() - 0.0005 * 8.25f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn regression_of_alternating_values_has_no_slope_and_their_spread() {
        // RTTs 30, 32, 30, 32 ms at 0, 1, 2, 3 ms: slope 0.4, mean 31 ms.
        let mut r = Regression::default();
        for (i, y) in [0.030, 0.032, 0.030, 0.032].into_iter().enumerate() {
            r.add(i as f64 * 0.001, y);
        }
        // Sxy = Σ(x−1.5ms)(y−31ms) = 1.5·1 − 0.5·1 − 0.5·1 + 1.5·1 = 2 (ms²),
        // Sxx = 5 ms²: slope 0.4.
        assert!((r.slope() - 0.4).abs() < 1e-9, "{}", r.slope());
        assert!((r.deviation_y() - 0.001).abs() < 1e-12);
        // Syy = 4 ms², explained 4/5 ms²: residual √(3.2/4) ms.
        assert!((r.residual_rms() - 0.001 * 0.8f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn an_mi_completes_when_every_packet_is_accounted_for_or_times_out() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut q = MonitorQueue::default();
        let rate = Rate::from_mbps(12);
        q.start(ms(0), 0, rate, true);
        for pn in 0..10 {
            q.on_sent(ms(pn), 1200, pn);
        }
        q.start(ms(10), 10, rate, true);
        q.on_sent(ms(10), 1200, 10);
        let timeout = Duration::from_millis(100);
        for pn in 0..9 {
            q.on_acked(ms(pn), 1200, pn);
            q.on_rtt(ms(pn), pn, Duration::from_millis(30 + pn));
        }
        assert!(q.pop_complete(ms(40), timeout, 1200).is_none());
        q.on_lost(1200, 9);
        let stats = q.pop_complete(ms(40), timeout, 1200).unwrap();
        assert_eq!(stats.packets, 10);
        assert!((stats.loss - 0.1).abs() < 1e-12);
        // RTT rises 1 ms per ms of send time.
        assert!((stats.gradient - 1.0).abs() < 1e-9);
        // 10 packets of 1200 B over 9 ms + 0.8 ms: 9.80 Mbit/s.
        assert!((stats.rate_mbps - 96_000.0 / 9.8e-3 / 1e6).abs() < 1e-9);
        // The open MI never completes; close it and time it out.
        assert!(q.pop_complete(ms(500), timeout, 1200).is_none());
        q.start(ms(20), 20, rate, false);
        let late = q.pop_complete(ms(111), timeout, 1200).unwrap();
        assert!(late.timed_out && late.id == 1);
    }

    #[test]
    fn acks_match_on_packet_number_and_send_time() {
        // A handshake packet 0 and an application packet 0 in two MIs.
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut q = MonitorQueue::default();
        let rate = Rate::from_mbps(1);
        q.start(ms(0), 0, rate, true);
        q.on_sent(ms(0), 1200, 0);
        q.start(ms(50), 0, rate, true);
        q.on_sent(ms(50), 1200, 0);
        q.start(ms(100), 1, rate, true);
        q.on_acked(ms(50), 1200, 0);
        assert!(
            q.pop_complete(ms(60), Duration::from_secs(1), 1200)
                .is_none()
        );
        q.on_acked(ms(0), 1200, 0);
        assert_eq!(
            q.pop_complete(ms(60), Duration::from_secs(1), 1200)
                .unwrap()
                .id,
            0
        );
        assert_eq!(
            q.pop_complete(ms(60), Duration::from_secs(1), 1200)
                .unwrap()
                .id,
            1
        );
    }
}
