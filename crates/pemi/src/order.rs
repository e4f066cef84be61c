//! The reply order (beyond the paper; off by default): which of its
//! forwarded packets a reply answers, from the replies' order rather than
//! from a smoothed RTT.
//!
//! A queue the path builds beyond PEMI (a cellular link's) moves the RTT
//! by more within one round trip than a smoothed estimate follows, and
//! §4.2.2's projection t_reply − RTT then lands on the wrong flowlet. But
//! the path delivers in order, and the receiver answers every
//! `sent / replies`-th packet: the k-th reply after a matched pair answers
//! about the packet `q · k` places after the pair's. So each reply is
//! projected to the packet it answers, anchored at the last pair a
//! finished flowlet matched, and a flowlet the replies have not reached
//! yet (data forwarded and not seen replied: the standing queue) is not
//! finished by time while they still come.

use netsim::Time;
use std::time::Duration;

/// The connection's place in its packets and replies, and the anchor.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReplyOrder {
    /// Protected packets recorded in flowlets (PEMI's copies included).
    pub(crate) packets: u64,
    /// Replies seen.
    pub(crate) replies: u64,
    /// The last matched pair: (its packet's place, its reply's place).
    anchor: Option<(u64, u64)>,
    /// The latest reply's time and the packet place it answers.
    latest: Option<(Time, u64)>,
    /// Smoothed interval between replies (gain 1/8).
    gap: Option<Duration>,
}

impl ReplyOrder {
    /// Packets per reply, in thousandths, from the whole connection's
    /// counts: between 1 and 4 (1 until there are replies).
    fn per_reply_milli(&self) -> u64 {
        if self.replies == 0 {
            return 1000;
        }
        (self.packets * 1000 / self.replies).clamp(1000, 4000)
    }

    /// A packet recorded: returns its place.
    pub(crate) fn on_packet(&mut self) -> u64 {
        self.packets += 1;
        self.packets - 1
    }

    /// A reply at `now`: returns its place and the packet place it
    /// answers (`None` before a pair anchors the order).
    pub(crate) fn on_reply(&mut self, now: Time) -> (u64, Option<u64>) {
        let place = self.replies;
        self.replies += 1;
        if let Some((last, _)) = self.latest {
            let gap = now - last;
            self.gap = Some(self.gap.map_or(gap, |g| (g * 7 + gap) / 8));
        }
        let answers = self.anchor.map(|(packet, reply)| {
            let ahead = place.saturating_sub(reply) * self.per_reply_milli() / 1000;
            (packet + ahead).min(self.packets.saturating_sub(1))
        });
        self.latest = Some((now, answers.unwrap_or(u64::MAX)));
        (place, answers)
    }

    /// A matched pair of a finished flowlet: the order restarts from it.
    pub(crate) fn anchor(&mut self, packet: u64, reply: u64) {
        if self.anchor.is_none_or(|(p, r)| reply >= r && packet >= p) {
            self.anchor = Some((packet, reply));
        }
    }

    /// When the replies reach the packet at place `end`, if they are on
    /// their way: the latest reply's time plus the replies still ahead of
    /// it at the smoothed interval. `None` before the order is anchored,
    /// or when the latest reply answered `end` or later.
    pub(crate) fn reaches(&self, end: u64) -> Option<Time> {
        let (at, answers) = self.latest?;
        if answers == u64::MAX || answers >= end {
            return None;
        }
        let gap = self.gap?;
        let replies_ahead = (end - answers) * 1000 / self.per_reply_milli() + 1;
        Some(at + gap * replies_ahead.min(u64::from(u32::MAX)) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_project_to_every_second_packet_after_the_anchor() {
        let mut order = ReplyOrder::default();
        for _ in 0..20 {
            order.on_packet();
        }
        for k in 0..5 {
            assert_eq!(order.on_reply(Time::from_millis(k)).1, None);
        }
        // Packet 9 was answered by reply 4; 20 packets, 6 replies with
        // this one: 3.33 packets per reply.
        order.anchor(9, 4);
        assert_eq!(order.on_reply(Time::from_millis(5)).1, Some(12));
        // 7 replies: 2.86 per reply, two replies after the anchor.
        assert_eq!(order.on_reply(Time::from_millis(6)).1, Some(14));
        // The replies come 1 ms apart: packet 19 is 5 / 2.86 + 1 replies
        // away.
        assert_eq!(
            order.reaches(19),
            Some(Time::from_millis(6) + Duration::from_millis(2))
        );
        assert_eq!(order.reaches(14), None);
        // An older pair does not move the anchor back.
        order.anchor(3, 1);
        assert_eq!(order.on_reply(Time::from_millis(7)).1, Some(16));
    }
}
