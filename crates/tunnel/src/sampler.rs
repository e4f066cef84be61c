//! TECC's network sampler on the tunnel server (§4.2.2, §4.2.4): per
//! tunnel and feedback cycle τ = T_t (the tunnel's minimum RTT), the
//! smallest queue of packets waiting for the tunnel, the tunnel's
//! retransmission ratio and its sending rate (the controller's pacing
//! rate, or with `RateSource::Sent` the bytes that left in the cycle),
//! and how long its recent repairs took (`SenderStats::repair_delay`).
//!
//! Noise filtering, as §4.2.4 describes it: the queue is detected many
//! times per cycle (at every change of the tunnel's state: each packet
//! queued, sent, acknowledged or lost) and the cycle reports the smallest
//! value; *multiple detection* then reports the smallest of the last
//! `detections` cycles, so a queue that appears in a single cycle (a burst
//! the tunnel drains at once) is not fed back. The EWMA of the same
//! section runs on the application server, over U(t) (`cc::Tecc`).

use crate::mode::{RateSource, SamplerSettings};
use crate::sender::SenderStats;
use crate::wire::feedback::Feedback;
use netsim::{Rate, Time};
use std::collections::VecDeque;
use std::time::Duration;

/// The cycle before the tunnel's RTT is known.
const FIRST_CYCLE: Duration = Duration::from_millis(100);

/// One tunnel's sampler.
#[derive(Clone, Debug)]
pub struct Sampler {
    settings: SamplerSettings,
    cycle_end: Option<Time>,
    /// When the current cycle started (its first observation, then the
    /// previous poll): the span `RateSource::Sent` divides by.
    cycle_start: Option<Time>,
    cycle_min: Option<u64>,
    minima: VecDeque<u64>,
    last: SenderStats,
    sequence: u64,
}

/// What the sampler reads at the end of a cycle.
#[derive(Clone, Copy, Debug)]
pub struct TunnelState {
    /// The tunnel connection's minimum RTT, once known.
    pub min_rtt: Option<Duration>,
    /// The tunnel controller's pacing rate.
    pub rate: Rate,
    /// The tunnel's datagram counters.
    pub stats: SenderStats,
}

impl Sampler {
    /// A sampler that starts its first cycle at its first observation.
    pub fn new(settings: SamplerSettings) -> Sampler {
        Sampler {
            settings,
            cycle_end: None,
            cycle_start: None,
            cycle_min: None,
            minima: VecDeque::new(),
            last: SenderStats::default(),
            sequence: 0,
        }
    }

    /// One detection of the queue, bytes.
    pub fn observe(&mut self, now: Time, queue: usize) {
        let queue = queue as u64;
        self.cycle_min = Some(self.cycle_min.map_or(queue, |min| min.min(queue)));
        self.cycle_end.get_or_insert(now + FIRST_CYCLE);
        self.cycle_start.get_or_insert(now);
    }

    /// When the current cycle ends.
    pub fn next_wakeup(&self) -> Option<Time> {
        self.cycle_end
    }

    /// At the end of a cycle: the feedback to send, and the next cycle
    /// starts.
    pub fn poll(&mut self, now: Time, state: TunnelState) -> Option<Feedback> {
        let end = self.cycle_end?;
        if now < end {
            return None;
        }
        let cycle = state
            .min_rtt
            .map_or(FIRST_CYCLE, |rtt| rtt.max(self.settings.min_cycle));
        self.cycle_end = Some(now + cycle);
        let minimum = self.cycle_min.take().unwrap_or(0);
        self.minima.push_back(minimum);
        while self.minima.len() > usize::from(self.settings.detections.max(1)) {
            self.minima.pop_front();
        }
        let queue = self.minima.iter().copied().min().unwrap_or(0);
        let sent = state.stats.sent - self.last.sent;
        let retransmitted = state.stats.retransmitted - self.last.retransmitted;
        // Over the span the cycle really lasted: polls come at drives,
        // which can be later than the cycle's end.
        let span = now - self.cycle_start.replace(now).unwrap_or(now);
        let rate = match self.settings.rate {
            RateSource::Pacing => state.rate,
            RateSource::Sent => {
                Rate::from_bytes_over(state.stats.sent_bytes - self.last.sent_bytes, span)
            }
        };
        self.last = state.stats;
        let retransmit_ppm = (retransmitted.min(sent) * 1_000_000)
            .checked_div(sent)
            .unwrap_or(0);
        let feedback = Feedback {
            sequence: self.sequence,
            rate_bps: rate.bits_per_sec(),
            queue_bytes: queue,
            retransmit_ppm,
            tunnel_min_rtt: state.min_rtt.unwrap_or_default(),
            cycle,
            repair_delay: state.stats.repair_delay,
        };
        self.sequence += 1;
        Some(feedback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(sent: u64, retransmitted: u64) -> TunnelState {
        TunnelState {
            min_rtt: Some(Duration::from_millis(20)),
            rate: Rate::from_mbps(10),
            stats: SenderStats {
                sent,
                retransmitted,
                ..SenderStats::default()
            },
        }
    }

    #[test]
    fn reports_the_smallest_queue_of_consecutive_cycles_and_the_ratio() {
        let mut sampler = Sampler::new(SamplerSettings::default());
        let t = |ms| Time::from_millis(ms);
        sampler.observe(t(0), 5000);
        sampler.observe(t(50), 3000);
        assert!(sampler.poll(t(99), state(0, 0)).is_none());
        let first = sampler.poll(t(100), state(100, 10)).unwrap();
        assert_eq!((first.queue_bytes, first.retransmit_ppm), (3000, 100_000));
        assert_eq!(first.cycle, Duration::from_millis(20));
        // A one-cycle burst is filtered out by the previous cycle's minimum.
        sampler.observe(t(110), 40_000);
        let second = sampler.poll(t(120), state(150, 10)).unwrap();
        assert_eq!((second.queue_bytes, second.retransmit_ppm), (3000, 0));
        sampler.observe(t(130), 40_000);
        let third = sampler.poll(t(140), state(150, 10)).unwrap();
        assert_eq!(third.queue_bytes, 40_000);
        assert_eq!(third.sequence, 2);
    }

    #[test]
    fn the_sent_reading_is_the_bytes_that_left_over_the_cycle_it_lasted() {
        let settings = SamplerSettings {
            rate: RateSource::Sent,
            ..SamplerSettings::default()
        };
        let mut sampler = Sampler::new(settings);
        let t = |ms| Time::from_millis(ms);
        let sent = |bytes| TunnelState {
            stats: SenderStats {
                sent_bytes: bytes,
                ..SenderStats::default()
            },
            ..state(0, 0)
        };
        // The first cycle runs from the first observation (10 ms) to its
        // poll (110 ms): 125 000 bytes in 100 ms is 10 Mbit/s, whatever
        // the pacing rate (also 10 Mbit/s in `state`, so not that).
        sampler.observe(t(10), 0);
        let first = sampler.poll(t(110), sent(125_000)).unwrap();
        assert_eq!(first.rate_bps, 10_000_000);
        // The next cycle (τ = 20 ms, due at 130 ms) is polled at 140 ms:
        // 3 000 bytes in 30 ms is 800 kbit/s.
        sampler.observe(t(120), 0);
        let second = sampler.poll(t(140), sent(128_000)).unwrap();
        assert_eq!(second.rate_bps, 8 * 3_000 * 1000 / 30);
        // Nothing sent: zero.
        let third = sampler.poll(t(160), sent(128_000)).unwrap();
        assert_eq!(third.rate_bps, 0);
    }

    #[test]
    fn the_pacing_reading_reports_the_controllers_rate() {
        let mut sampler = Sampler::new(SamplerSettings::default());
        sampler.observe(Time::from_millis(0), 0);
        let mut state = state(100, 0);
        state.stats.sent_bytes = 1;
        state.rate = Rate::from_mbps(3);
        let feedback = sampler.poll(Time::from_millis(100), state).unwrap();
        assert_eq!(feedback.rate_bps, 3_000_000);
    }
}
