//! Delivery-rate sampling (draft-cheng-iccrg-delivery-rate-estimation):
//! per packet, the connection's delivered count and times when it was
//! sent; per batch of ACKs, the rate at which the newest acknowledged
//! packet's data was delivered.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What the sampler remembers of one sent packet.
#[derive(Clone, Copy, Debug)]
struct Sent {
    pn: u64,
    at: Instant,
    bytes: u64,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    app_limited: bool,
    done: bool,
}

/// One rate sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSample {
    /// Bytes per second.
    pub bytes_per_sec: f64,
    /// The interval it spans.
    pub interval: Duration,
    /// The delivered count when its newest packet was sent.
    pub prior_delivered: u64,
    /// Whether that packet was sent while the application limited the
    /// connection.
    pub app_limited: bool,
    /// The newest packet's RTT.
    pub rtt: Duration,
}

/// The sampler of one connection.
#[derive(Clone, Debug, Default)]
pub struct DeliveryRate {
    /// Sent packets in the order they were sent (so by send time). Finished
    /// records leave from the front, and all of them at once when they are
    /// most of the queue: a record that is never finished (a packet of
    /// discarded handshake keys) holds the front for 10 s, and the queue
    /// behind it must not grow to 10 s of packets.
    sent: VecDeque<Sent>,
    /// How many records in `sent` are finished.
    done: usize,
    delivered: u64,
    delivered_time: Option<Instant>,
    first_sent_time: Option<Instant>,
    in_flight: u64,
    /// The delivered count up to which the connection is app-limited (0:
    /// not).
    app_limited_until: u64,
    /// The batch's newest acknowledged packet so far.
    batch: Option<Sent>,
    batch_rtt: Option<Duration>,
}

impl DeliveryRate {
    /// Bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes in flight as the sampler counts them.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// A packet of `bytes` sent at `now`.
    pub fn on_sent(&mut self, now: Instant, pn: u64, bytes: u64) {
        if self.in_flight == 0 {
            self.first_sent_time = Some(now);
            self.delivered_time = Some(now);
        }
        debug_assert!(
            self.sent.back().is_none_or(|last| last.at <= now),
            "sent out of order"
        );
        self.sent.push_back(Sent {
            pn,
            at: now,
            bytes,
            delivered: self.delivered,
            delivered_time: self.delivered_time.unwrap_or(now),
            first_sent_time: self.first_sent_time.unwrap_or(now),
            app_limited: self.app_limited_until > 0,
            done: false,
        });
        self.in_flight += bytes;
    }

    /// The application has nothing to send: samples until what is in
    /// flight now is delivered are app-limited.
    pub fn on_app_limited(&mut self) {
        self.app_limited_until = (self.delivered + self.in_flight).max(1);
    }

    /// The oldest unfinished record of `pn`, sent at `sent` if given.
    /// Packet numbers repeat across QUIC's number spaces, hence the time;
    /// with it the search starts at the first record sent then.
    fn find(&mut self, pn: u64, sent: Option<Instant>) -> Option<&mut Sent> {
        let from = sent.map_or(0, |at| first_sent_from(&self.sent, at));
        let found = self
            .sent
            .range_mut(from..)
            .take_while(|p| sent.is_none_or(|at| p.at == at))
            .find(|p| !p.done && p.pn == pn)?;
        found.done = true;
        self.done += 1;
        Some(found)
    }

    /// Packet `pn`, sent at `sent`, was acknowledged at `now`.
    pub fn on_acked(&mut self, now: Instant, pn: u64, sent: Instant) {
        let Some(&mut packet) = self.find(pn, Some(sent)) else {
            return;
        };
        self.in_flight = self.in_flight.saturating_sub(packet.bytes);
        self.delivered += packet.bytes;
        self.delivered_time = Some(now);
        if self.batch.is_none_or(|b| packet.delivered >= b.delivered) {
            self.batch = Some(packet);
            self.batch_rtt = Some(now.saturating_duration_since(packet.at));
            self.first_sent_time = Some(packet.at);
        }
        self.prune(now);
    }

    /// Packet `pn` was declared lost: its bytes (0 for a packet the
    /// sampler does not know).
    pub fn on_lost(&mut self, pn: u64, now: Instant) -> u64 {
        let mut lost = 0;
        if let Some(packet) = self.find(pn, None) {
            lost = packet.bytes;
            self.in_flight = self.in_flight.saturating_sub(lost);
        }
        self.prune(now);
        lost
    }

    /// Drops finished records at the front, and records so old that no
    /// callback will come for them (packets of discarded handshake keys);
    /// drops every finished record once they are most of the queue.
    fn prune(&mut self, now: Instant) {
        // Sent before this, a record is more than 10 s old: one Instant
        // subtraction per call instead of one per record looked at (the
        // same test as `now - at > 10 s`, in whole nanoseconds).
        let stale_before = now.checked_sub(Duration::from_secs(10));
        while let Some(front) = self.sent.front() {
            if front.done {
                self.done -= 1;
            } else if stale_before.is_some_and(|before| front.at < before) {
                self.in_flight = self.in_flight.saturating_sub(front.bytes);
            } else {
                break;
            }
            self.sent.pop_front();
        }
        if self.done > 64 && self.done * 2 > self.sent.len() {
            self.sent.retain(|p| !p.done);
            self.done = 0;
        }
    }

    /// Ends a batch of ACKs: the rate sample of its newest packet, if any.
    pub fn end_batch(&mut self) -> Option<RateSample> {
        let packet = self.batch.take()?;
        let rtt = self.batch_rtt.take()?;
        if self.app_limited_until > 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let delivered_time = self.delivered_time?;
        let send_elapsed = packet.at.saturating_duration_since(packet.first_sent_time);
        let ack_elapsed = delivered_time.saturating_duration_since(packet.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        if interval.is_zero() {
            return None;
        }
        let bytes = self.delivered - packet.delivered;
        Some(RateSample {
            bytes_per_sec: bytes as f64 / interval.as_secs_f64(),
            interval,
            prior_delivered: packet.delivered,
            app_limited: packet.app_limited,
            rtt,
        })
    }
}

/// The index of the first record sent at or after `at`: what
/// `sent.partition_point(|p| p.at < at)` returns, found by galloping from
/// the front. An acknowledged packet is usually among the oldest records
/// (finished ones leave from the front), so this reads a few records near
/// the front instead of a binary search's log₂(n) across a window of
/// thousands.
fn first_sent_from(sent: &VecDeque<Sent>, at: Instant) -> usize {
    let (mut below, mut probe) = (0, 0);
    while probe < sent.len() && sent[probe].at < at {
        below = probe + 1;
        probe = 2 * probe + 1;
    }
    // Every record before `below` was sent before `at`; the answer is at
    // most `probe` (or the end): a binary search between.
    let (mut low, mut high) = (below, probe.min(sent.len()));
    while low < high {
        let mid = low + (high - low) / 2;
        if sent[mid].at < at {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galloping_finds_what_partition_point_finds() {
        let t0 = Instant::now();
        for len in 0..70u64 {
            // Send times with repeats: 0, 0, 1, 1, 2, 2, …
            let sent: VecDeque<Sent> = (0..len)
                .map(|i| {
                    let at = t0 + Duration::from_micros(i / 2);
                    Sent {
                        pn: i,
                        at,
                        bytes: 1,
                        delivered: 0,
                        delivered_time: at,
                        first_sent_time: at,
                        app_limited: false,
                        done: false,
                    }
                })
                .collect();
            for target in 0..len / 2 + 3 {
                let at = t0 + Duration::from_micros(target);
                assert_eq!(
                    first_sent_from(&sent, at),
                    sent.partition_point(|p| p.at < at),
                    "len {len}, target {target}"
                );
            }
        }
    }

    #[test]
    fn a_paced_flight_is_sampled_at_its_rate() {
        let t0 = Instant::now();
        let us = |u: u64| t0 + Duration::from_micros(u);
        let mut rate = DeliveryRate::default();
        // 1200 B every 100 µs (12 MB/s), each acknowledged 30 ms later.
        let mut last = None;
        for step in 0..1300 {
            if step >= 300 {
                let pn = step - 300;
                rate.on_acked(us(step * 100), pn, us(pn * 100));
                last = rate.end_batch().or(last);
            }
            if step < 1000 {
                rate.on_sent(us(step * 100), step, 1200);
            }
        }
        let sample = last.unwrap();
        assert!(
            (sample.bytes_per_sec - 12e6).abs() / 12e6 < 0.01,
            "{sample:?}"
        );
        assert_eq!(sample.rtt, Duration::from_millis(30));
        assert_eq!(rate.in_flight(), 0);
        assert_eq!(rate.delivered(), 1_200_000);
    }

    #[test]
    fn a_record_is_dropped_once_more_than_10_s_old() {
        let t0 = Instant::now();
        let mut rate = DeliveryRate::default();
        rate.on_sent(t0, 0, 1200);
        // Pruning runs on every callback; packet 7 is unknown.
        assert_eq!(rate.on_lost(7, t0 + Duration::from_secs(10)), 0);
        assert_eq!(rate.in_flight(), 1200);
        let just_over = t0 + Duration::from_secs(10) + Duration::from_nanos(1);
        assert_eq!(rate.on_lost(7, just_over), 0);
        assert_eq!(rate.in_flight(), 0);
        assert!(rate.sent.is_empty());
    }

    #[test]
    fn a_record_never_finished_does_not_grow_the_queue_behind_it() {
        let t0 = Instant::now();
        let us = |u: u64| t0 + Duration::from_micros(u);
        let mut rate = DeliveryRate::default();
        // A handshake packet whose keys are discarded: never acknowledged.
        rate.on_sent(us(0), 0, 1200);
        for pn in 1..20_000 {
            rate.on_sent(us(pn * 100), pn, 1200);
            rate.on_acked(us(pn * 100 + 50), pn, us(pn * 100));
            assert!(rate.sent.len() <= 130, "{} records kept", rate.sent.len());
        }
        // Packet numbers repeat across number spaces: the send time tells
        // them apart.
        rate.on_sent(us(3_000_000), 1, 1000);
        rate.on_sent(us(3_000_001), 1, 900);
        assert_eq!(rate.on_lost(1, us(3_000_002)), 1000);
        assert_eq!(rate.on_lost(1, us(3_000_002)), 900);
        assert_eq!(rate.on_lost(1, us(3_000_002)), 0);
    }
}
