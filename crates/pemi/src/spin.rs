//! RTT calibration from the spin bit (RFC 9000 §17.4, RFC 9312 §3.8.2):
//! an edge of the spin value in the protected direction, then the next
//! edge in the reply direction, are one round trip between PEMI and the
//! receiver apart (the receiver flips its bit when it sees the edge) —
//! plus however long the receiver waits before it next sends (an ACK
//! every second packet, its ACK timer, idle time). So a sample is the
//! minimum of the last [`SAMPLES`] edge pairs, as RFC 9312 §3.8.2
//! suggests (docs/pemi.md).

use netsim::Time;
use std::time::Duration;

/// Edge pairs a sample is the minimum of.
pub(crate) const SAMPLES: usize = 4;

/// The spin values seen each way and the pending edge.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Spin {
    sent: Option<bool>,
    reply: Option<bool>,
    edge: Option<Time>,
    last_sample: Option<Time>,
    recent: [Option<Duration>; SAMPLES],
    next: usize,
}

impl Spin {
    /// A short-header packet in the protected direction.
    pub(crate) fn on_sent(&mut self, now: Time, spin: bool) {
        if self.sent.is_some_and(|v| v != spin) {
            self.edge = Some(now);
        }
        self.sent = Some(spin);
    }

    /// A short-header reply; when it completes an edge pair, returns the
    /// minimum of the last [`SAMPLES`] pairs.
    pub(crate) fn on_reply(&mut self, now: Time, spin: bool) -> Option<Duration> {
        let flipped = self.reply.is_some_and(|v| v != spin);
        self.reply = Some(spin);
        if !flipped {
            return None;
        }
        let edge = self.edge.take()?;
        self.last_sample = Some(now);
        self.recent[self.next] = Some(now - edge);
        self.next = (self.next + 1) % SAMPLES;
        self.recent.iter().flatten().min().copied()
    }

    /// Whether the connection gave a spin sample within `window` of `now`.
    pub(crate) fn spinning(&self, now: Time, window: Duration) -> bool {
        self.last_sample.is_some_and(|t| now - t <= window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_each_way_give_the_near_round_trip() {
        let mut spin = Spin::default();
        let t = Time::from_millis;
        spin.on_sent(t(0), false);
        assert_eq!(spin.on_reply(t(1), true), None);
        spin.on_sent(t(50), true); // the edge
        spin.on_sent(t(51), true);
        assert_eq!(spin.on_reply(t(52), true), None);
        assert_eq!(spin.on_reply(t(54), false), Some(Duration::from_millis(4)));
        // A later pair inflated by the receiver's wait: the minimum stands.
        spin.on_sent(t(56), false);
        assert_eq!(spin.on_reply(t(66), true), Some(Duration::from_millis(4)));
        spin.on_sent(t(67), true);
        assert!(spin.spinning(t(70), Duration::from_millis(10)));
        assert!(!spin.spinning(t(80), Duration::from_millis(10)));
        // A reply edge without a pending edge is no sample.
        spin.on_reply(t(90), false);
        assert_eq!(spin.on_reply(t(91), true), None);
    }
}
