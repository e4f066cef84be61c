//! RTT calibration from the spin bit (RFC 9000 §17.4, RFC 9312 §3.8.2):
//! an edge of the spin value in the protected direction, then the next
//! edge in the reply direction, are one round trip between PEMI and the
//! receiver apart (the receiver flips its bit when it sees the edge) —
//! plus however long the receiver waits before it next sends (an ACK
//! every second packet, its ACK timer, idle time). So a sample is the
//! minimum of the last [`SAMPLES`] edge pairs, as RFC 9312 §3.8.2
//! suggests (docs/pemi.md).
//!
//! An endpoint that does not spin sets the bit at random, per packet
//! (RFC 9000 §17.4 recommends it; noq-proto does so on one connection in
//! eight), which an observer must not read as round trips. A genuine
//! spin value flips at most once per end-to-end round trip each way, so
//! a flip sooner than half the end-to-end RTT after the previous one in
//! its direction is no edge, and after [`ERRATIC_LIMIT`] of them the
//! connection is taken not to spin (no samples; ICMP probes calibrate).

use netsim::Time;
use std::time::Duration;

/// Edge pairs a sample is the minimum of.
pub(crate) const SAMPLES: usize = 4;
/// Flips too soon after the previous one before the bit is ignored.
pub(crate) const ERRATIC_LIMIT: u32 = 3;

/// The spin values seen each way and the pending edge.
///
/// `repr(C)`: what every packet reads (the values seen, and whether the
/// connection is trusted) first, in the line [`crate::protect::Protection`]
/// shares with its other per-packet fields; the edges and samples after.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct Spin {
    sent: Option<bool>,
    reply: Option<bool>,
    /// Flips too soon after the previous one in their direction.
    erratic: u32,
    /// The pending protected-direction edge.
    edge: Option<Time>,
    /// The last flip each way, edge or not.
    last_sent_flip: Option<Time>,
    last_reply_flip: Option<Time>,
    last_sample: Option<Time>,
    recent: [Option<Duration>; SAMPLES],
    next: usize,
}

impl Spin {
    /// A short-header packet in the protected direction; `e2e` is the
    /// end-to-end RTT.
    pub(crate) fn on_sent(&mut self, now: Time, spin: bool, e2e: Duration) {
        let flipped = self.sent.is_some_and(|v| v != spin);
        self.sent = Some(spin);
        if flipped {
            let genuine = self.flip(now, e2e, Direction::Sent);
            self.edge = genuine.then_some(now);
        }
    }

    /// A short-header reply; when it completes an edge pair, returns the
    /// minimum of the last [`SAMPLES`] pairs.
    pub(crate) fn on_reply(&mut self, now: Time, spin: bool, e2e: Duration) -> Option<Duration> {
        let flipped = self.reply.is_some_and(|v| v != spin);
        self.reply = Some(spin);
        if !flipped || !self.flip(now, e2e, Direction::Reply) {
            return None;
        }
        let edge = self.edge.take()?;
        self.last_sample = Some(now);
        self.recent[self.next] = Some(now - edge);
        self.next = (self.next + 1) % SAMPLES;
        self.recent.iter().flatten().min().copied()
    }

    /// Whether the connection gave a spin sample within `window` of `now`
    /// and has not been found to set its bit at random.
    pub(crate) fn spinning(&self, now: Time, window: Duration) -> bool {
        self.honest() && self.last_sample.is_some_and(|t| now - t <= window)
    }

    /// The last instant through which [`Spin::spinning`] holds for
    /// `window`, if it holds at `now`: only a new sample moves it later.
    pub(crate) fn spinning_until(&self, now: Time, window: Duration) -> Option<Time> {
        let last = self.last_sample.filter(|_| self.spinning(now, window))?;
        Some(last + window)
    }

    fn honest(&self) -> bool {
        self.erratic < ERRATIC_LIMIT
    }

    /// A flip in `direction`: whether it can be a genuine edge (at least
    /// half the end-to-end RTT after the last flip that way, on a
    /// connection still trusted).
    fn flip(&mut self, now: Time, e2e: Duration, direction: Direction) -> bool {
        let last = match direction {
            Direction::Sent => &mut self.last_sent_flip,
            Direction::Reply => &mut self.last_reply_flip,
        };
        // The first flip each way only starts the count: a random bit's
        // first flip would pass as an edge.
        let previous = last.replace(now);
        let too_soon = previous.is_some_and(|t| now - t < e2e / 2);
        if too_soon {
            self.erratic = self.erratic.saturating_add(1);
        }
        previous.is_some() && !too_soon && self.honest()
    }
}

/// Which way a packet went.
#[derive(Clone, Copy, Debug)]
enum Direction {
    /// The protected direction.
    Sent,
    /// The replies.
    Reply,
}

#[cfg(test)]
mod tests {
    use super::*;

    const E2E: Duration = Duration::from_millis(40);

    #[test]
    fn edges_each_way_give_the_near_round_trip() {
        let mut spin = Spin::default();
        let t = Time::from_millis;
        // The first flip each way only starts the count.
        spin.on_sent(t(0), true, E2E);
        spin.on_sent(t(1), false, E2E);
        assert_eq!(spin.on_reply(t(2), false, E2E), None);
        assert_eq!(spin.on_reply(t(3), true, E2E), None);
        spin.on_sent(t(50), true, E2E); // the edge
        spin.on_sent(t(51), true, E2E);
        assert_eq!(spin.on_reply(t(52), true, E2E), None);
        assert_eq!(
            spin.on_reply(t(54), false, E2E),
            Some(Duration::from_millis(4))
        );
        // A later pair inflated by the receiver's wait: the minimum stands.
        spin.on_sent(t(100), false, E2E);
        assert_eq!(
            spin.on_reply(t(110), true, E2E),
            Some(Duration::from_millis(4))
        );
        spin.on_sent(t(150), true, E2E);
        assert!(spin.spinning(t(115), Duration::from_millis(10)));
        assert!(!spin.spinning(t(130), Duration::from_millis(10)));
        // A reply edge without a pending edge is no sample.
        spin.on_reply(t(160), false, E2E);
        assert_eq!(spin.on_reply(t(200), true, E2E), None);
    }

    /// A bit set at random per packet (a connection that does not spin)
    /// gives no samples, and the connection is soon taken not to spin.
    #[test]
    fn a_random_bit_gives_no_samples() {
        let mut spin = Spin::default();
        let mut samples = 0;
        for i in 0..200u64 {
            let now = Time::from_micros(1_000 * i);
            let bit = (i * 2_654_435_761) >> 7 & 1 == 1;
            spin.on_sent(now, bit, E2E);
            let reply = Time::from_micros(1_000 * i + 500);
            samples += usize::from(spin.on_reply(reply, !bit, E2E).is_some());
        }
        assert_eq!(samples, 0);
        assert!(spin.erratic >= ERRATIC_LIMIT);
        // Even a well-spaced pair afterwards is not trusted.
        spin.on_sent(Time::from_secs(1), !spin.sent.unwrap(), E2E);
        let flipped = !spin.reply.unwrap();
        assert_eq!(spin.on_reply(Time::from_millis(1_002), flipped, E2E), None);
        assert!(!spin.spinning(Time::from_millis(1_003), Duration::from_secs(1)));
    }
}
