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

impl Flowlet {
    /// A flowlet starting with `packet`.
    pub(crate) fn new(packet: Sent) -> Flowlet {
        let buffered = packet.copy.as_ref().map_or(0, Bytes::len);
        Flowlet {
            first: packet.at,
            last: packet.at,
            sent: vec![packet],
            replies: Vec::new(),
            count: 1,
            abandoned: false,
            buffered,
        }
    }

    /// Adds a packet; past `max` packets the flowlet is abandoned and its
    /// buffers freed. Returns the change of its buffered bytes.
    pub(crate) fn push(&mut self, packet: Sent, max: usize) -> isize {
        self.last = packet.at;
        self.count += 1;
        if self.abandoned {
            return 0;
        }
        if self.count > max {
            self.abandoned = true;
            self.sent = Vec::new();
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

    /// The send times of its packets.
    pub(crate) fn times(&self) -> Vec<Time> {
        self.sent.iter().map(|s| s.at).collect()
    }

    /// Which of its packets are PEMI's copies.
    pub(crate) fn copies(&self) -> Vec<bool> {
        self.sent.iter().map(|s| s.retransmission).collect()
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
        let mut f = Flowlet::new(sent(0, 100));
        assert_eq!(f.push(sent(1, 100), 3), 100);
        assert_eq!(f.push(sent(2, 100), 3), 100);
        assert_eq!(f.buffered, 300);
        assert_eq!(f.push(sent(3, 100), 3), -300);
        assert!(f.abandoned && f.sent.is_empty());
        assert_eq!(f.push(sent(4, 100), 3), 0);
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
