//! Flowlets (§4.2.1): bursts of a connection's protected packets
//! separated by more than the flowlet timeout α · sINV, each with the
//! replies assigned to it (§4.2.2).
//!
//! sINV, which the paper leaves open, is an exponentially weighted mean
//! (gain 1/8) of the intervals between consecutive protected packets as
//! they arrive at PEMI, each interval capped at the end-to-end smoothed
//! RTT so that one idle period cannot stretch the timeout beyond a round
//! trip (docs/pemi.md).

use bytes::Bytes;
use netsim::Time;
use std::time::Duration;

/// A protected packet as PEMI forwarded it.
#[derive(Clone, Debug)]
pub(crate) struct Sent {
    /// When PEMI forwarded it.
    pub(crate) at: Time,
    /// The UDP payload, while it is buffered for retransmission.
    pub(crate) copy: Option<Bytes>,
    /// The IP TTL it left with (a retransmission is byte-identical).
    pub(crate) ttl: u8,
    /// PEMI's own retransmission, or an original PEMI has retransmitted:
    /// never retransmitted (again).
    pub(crate) resent: bool,
    /// PEMI's own retransmission. A copy of a packet that had arrived is a
    /// duplicate the receiver does not answer, so an unanswered copy says
    /// nothing and is neutral in inference.
    pub(crate) retransmission: bool,
    /// Its fingerprint ([`netsim::Datagram::fingerprint`]), when the
    /// engine records (0 otherwise).
    pub(crate) fingerprint: u64,
}

/// A flowlet and the replies assigned to it.
#[derive(Clone, Debug)]
pub(crate) struct Flowlet {
    /// Its packets, in order (empty once abandoned).
    pub(crate) sent: Vec<Sent>,
    /// The arrival times of the replies assigned to it, in order.
    pub(crate) replies: Vec<Time>,
    /// Its first packet's time.
    pub(crate) first: Time,
    /// Its last packet's time.
    pub(crate) last: Time,
    /// Packets, counted past the limit once abandoned.
    pub(crate) count: usize,
    /// More than N packets: not protected (§4.6).
    pub(crate) abandoned: bool,
    /// Bytes of `sent` buffered.
    pub(crate) buffered: usize,
}

/// Lists of packets and of reply times retained beyond this many are
/// freed (each list's capacity is bounded by the flowlet limit N and by
/// `2 N + 1` replies).
const POOLED: usize = 64;

/// The emptied lists of finished flowlets, kept for the next ones so that
/// a flowlet in steady state allocates nothing: shared by all connections,
/// at most [`POOLED`] of each kind.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    sent: Vec<Vec<Sent>>,
    replies: Vec<Vec<Time>>,
}

impl Pool {
    /// An empty list of reply times (reused when there is one).
    pub(crate) fn replies(&mut self) -> Vec<Time> {
        self.replies.pop().unwrap_or_default()
    }

    /// Takes back a flowlet's lists, emptied (its buffered copies freed).
    pub(crate) fn recycle(&mut self, flowlet: Flowlet) {
        let Flowlet {
            mut sent,
            mut replies,
            ..
        } = flowlet;
        self.recycle_sent(&mut sent);
        if replies.capacity() > 0 && self.replies.len() < POOLED {
            replies.clear();
            self.replies.push(replies);
        }
    }

    fn recycle_sent(&mut self, sent: &mut Vec<Sent>) {
        let mut sent = std::mem::take(sent);
        if sent.capacity() > 0 && self.sent.len() < POOLED {
            sent.clear();
            self.sent.push(sent);
        }
    }
}

impl Flowlet {
    /// A flowlet starting with `packet`.
    pub(crate) fn new(packet: Sent, pool: &mut Pool) -> Flowlet {
        let buffered = packet.copy.as_ref().map_or(0, Bytes::len);
        let at = packet.at;
        let mut sent = pool.sent.pop().unwrap_or_default();
        sent.push(packet);
        Flowlet {
            first: at,
            last: at,
            sent,
            replies: Vec::new(),
            count: 1,
            abandoned: false,
            buffered,
        }
    }

    /// Adds a packet; past `max` packets the flowlet is abandoned and its
    /// buffers freed. Returns the change of its buffered bytes.
    pub(crate) fn push(&mut self, packet: Sent, max: usize, pool: &mut Pool) -> isize {
        self.last = packet.at;
        self.count += 1;
        if self.abandoned {
            return 0;
        }
        if self.count > max {
            self.abandoned = true;
            pool.recycle_sent(&mut self.sent);
            return -(std::mem::take(&mut self.buffered) as isize);
        }
        let added = packet.copy.as_ref().map_or(0, Bytes::len);
        self.buffered += added;
        self.sent.push(packet);
        added as isize
    }

    /// The distance from `t` to the flowlet's span (0 inside it).
    pub(crate) fn distance(&self, t: Time) -> Duration {
        if t < self.first {
            self.first - t
        } else if t > self.last {
            t - self.last
        } else {
            Duration::ZERO
        }
    }
}

/// sINV and the flowlet timeout.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Interval {
    sinv: Option<Duration>,
    last: Option<Time>,
}

impl Interval {
    /// A protected packet at `now`; `cap` bounds one interval's weight.
    pub(crate) fn on_packet(&mut self, now: Time, cap: Duration) {
        if let Some(last) = self.last {
            let gap = (now - last).min(cap);
            self.sinv = Some(match self.sinv {
                None => gap,
                Some(sinv) => (sinv * 7 + gap) / 8,
            });
        }
        self.last = Some(now);
    }

    /// α · sINV (before two packets: `fallback`).
    pub(crate) fn timeout(&self, alpha: u32, fallback: Duration) -> Duration {
        self.sinv.map_or(fallback, |sinv| sinv * alpha)
    }

    /// The smoothed interval, once there is one.
    #[cfg(test)]
    pub(crate) fn sinv(&self) -> Option<Duration> {
        self.sinv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(ms: u64, bytes: usize) -> Sent {
        Sent {
            at: Time::from_millis(ms),
            copy: Some(Bytes::from(vec![0; bytes])),
            ttl: 63,
            resent: false,
            retransmission: false,
            fingerprint: 0,
        }
    }

    #[test]
    fn a_flowlet_past_n_packets_is_abandoned_and_freed() {
        let pool = &mut Pool::default();
        let mut f = Flowlet::new(sent(0, 100), pool);
        assert_eq!(f.push(sent(1, 100), 3, pool), 100);
        assert_eq!(f.push(sent(2, 100), 3, pool), 100);
        assert_eq!(f.buffered, 300);
        assert_eq!(f.push(sent(3, 100), 3, pool), -300);
        assert!(f.abandoned && f.sent.is_empty());
        // Its list went back to the pool, emptied, for the next flowlet.
        assert_eq!(pool.sent.len(), 1);
        assert!(pool.sent[0].is_empty() && pool.sent[0].capacity() >= 3);
        assert_eq!(f.push(sent(4, 100), 3, pool), 0);
        assert_eq!((f.count, f.last), (5, Time::from_millis(4)));
        assert_eq!(f.distance(Time::from_millis(2)), Duration::ZERO);
        assert_eq!(f.distance(Time::from_millis(9)), Duration::from_millis(5));
    }

    #[test]
    fn sinv_is_smoothed_and_capped() {
        let mut i = Interval::default();
        let cap = Duration::from_millis(50);
        assert_eq!(i.timeout(2, cap), cap);
        for ms in [0, 8, 16] {
            i.on_packet(Time::from_millis(ms), cap);
        }
        assert_eq!(i.sinv(), Some(Duration::from_millis(8)));
        assert_eq!(i.timeout(2, cap), Duration::from_millis(16));
        // A second of silence weighs like 50 ms.
        i.on_packet(Time::from_millis(1016), cap);
        assert_eq!(i.sinv(), Some(Duration::from_micros(13_250)));
    }
}
