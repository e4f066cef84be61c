//! The receiver's de-jitter buffer: holds packets until every earlier
//! sequence number has arrived, plays them in order, and remembers which
//! holes it NACKed when.

use netsim::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// One sequence number between the next to play and the highest known.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// When the packet arrived (stored in the buffer), if it has.
    received: Option<Time>,
    /// When the hole was last NACKed, if ever.
    nacked: Option<Time>,
}

/// What [`DejitterBuffer::insert`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Insert {
    /// Stored (and possibly played at once).
    New,
    /// Already buffered or played.
    Duplicate,
    /// Beyond the window; ignored.
    TooFar,
}

/// The de-jitter buffer of the reference media server: a deque of slots
/// covering `next ..= highest`.
#[derive(Clone, Debug)]
pub(crate) struct DejitterBuffer {
    /// The next sequence number to play (sequence numbers start at 1).
    next: u32,
    /// Slots for `next`, `next + 1`, ….
    slots: VecDeque<Slot>,
    /// De-jitter delay of every played packet, in play order (so index
    /// `seq − 1`).
    delays: Vec<Duration>,
    max_window: u32,
}

impl DejitterBuffer {
    pub(crate) fn new(max_window: u32) -> DejitterBuffer {
        DejitterBuffer {
            next: 1,
            slots: VecDeque::new(),
            delays: Vec::new(),
            max_window: max_window.max(1),
        }
    }

    /// Makes sure there is a slot for `seq`; false if it is too far ahead.
    fn cover(&mut self, seq: u32) -> bool {
        if seq < self.next {
            return true;
        }
        let offset = seq - self.next;
        if offset >= self.max_window {
            return false;
        }
        let needed = offset as usize + 1;
        if self.slots.len() < needed {
            self.slots.resize(needed, Slot::default());
        }
        true
    }

    /// Makes the holes up to `last` known (the end of the stream was
    /// announced), so they get NACKed.
    pub(crate) fn cover_until(&mut self, last: u32) -> bool {
        self.cover(last)
    }

    /// A packet arrived at `now`: store it, then play out every packet that
    /// is now in order, recording `now − stored` for each.
    pub(crate) fn insert(&mut self, now: Time, seq: u32) -> Insert {
        if seq < self.next {
            return Insert::Duplicate;
        }
        if !self.cover(seq) {
            return Insert::TooFar;
        }
        let slot = &mut self.slots[(seq - self.next) as usize];
        if slot.received.is_some() {
            return Insert::Duplicate;
        }
        slot.received = Some(now);
        while let Some(Slot {
            received: Some(stored),
            ..
        }) = self.slots.front().copied()
        {
            self.delays.push(now - stored);
            self.slots.pop_front();
            self.next += 1;
        }
        Insert::New
    }

    /// The holes to NACK at `now`: each one never NACKed, and each one
    /// NACKed at least `renack` ago (the flag says it is a re-NACK). Marks
    /// them NACKed at `now`.
    pub(crate) fn holes_to_nack(&mut self, now: Time, renack: Duration) -> Vec<(u32, bool)> {
        let mut out = Vec::new();
        let next = self.next;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.received.is_some() {
                continue;
            }
            let again = match slot.nacked {
                None => false,
                Some(at) if now - at >= renack => true,
                Some(_) => continue,
            };
            slot.nacked = Some(now);
            out.push((next + i as u32, again));
        }
        out
    }

    /// The next sequence number to play.
    pub(crate) fn next(&self) -> u32 {
        self.next
    }

    /// Packets waiting in the buffer (received, not yet playable).
    pub(crate) fn buffered(&self) -> usize {
        self.slots.iter().filter(|s| s.received.is_some()).count()
    }

    /// De-jitter delays of the played packets, index `seq − 1`.
    pub(crate) fn delays(&self) -> &[Duration] {
        &self.delays
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plays_in_order_and_nacks_holes_once_per_interval() {
        let rtt = Duration::from_millis(52);
        let mut b = DejitterBuffer::new(100);
        let t = Time::from_millis;
        assert_eq!(b.insert(t(0), 1), Insert::New);
        assert_eq!(b.insert(t(40), 3), Insert::New);
        assert_eq!(b.holes_to_nack(t(40), rtt), vec![(2, false)]);
        assert_eq!(b.insert(t(60), 4), Insert::New);
        assert!(b.holes_to_nack(t(60), rtt).is_empty());
        assert_eq!(b.holes_to_nack(t(92), rtt), vec![(2, true)]);
        assert_eq!(b.buffered(), 2);
        assert_eq!(b.insert(t(100), 2), Insert::New);
        assert_eq!(b.insert(t(100), 2), Insert::Duplicate);
        assert_eq!(b.next(), 5);
        let ms = Duration::from_millis;
        assert_eq!(b.delays(), &[ms(0), ms(0), ms(60), ms(40)]);
        assert_eq!(b.insert(t(120), 500), Insert::TooFar);
    }
}
