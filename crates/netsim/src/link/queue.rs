//! What is in the link's buffer at a given time.
//!
//! The link decides each packet's departure time on arrival, so the buffer
//! is just the list of accepted packets that have not departed yet, in FIFO
//! order (departure times are non-decreasing).

use crate::Time;
use std::collections::VecDeque;

/// The packets accepted and not yet fully transmitted.
#[derive(Clone, Debug, Default)]
pub(crate) struct Backlog {
    /// (departure time, length in bytes), oldest first.
    packets: VecDeque<(Time, u32)>,
    bytes: u64,
    /// When the buffer last became empty, until an arrival consumes it.
    idle_since: Option<Time>,
}

impl Backlog {
    /// Forgets the packets that have departed by `now`.
    pub(crate) fn drain(&mut self, now: Time) {
        while let Some(&(departure, len)) = self.packets.front() {
            if departure > now {
                break;
            }
            self.packets.pop_front();
            self.bytes -= u64::from(len);
            if self.packets.is_empty() {
                self.idle_since = Some(departure);
            }
        }
    }

    /// Adds a packet that leaves at `departure`.
    pub(crate) fn push(&mut self, departure: Time, len: u32) {
        self.packets.push_back((departure, len));
        self.bytes += u64::from(len);
    }

    /// Bytes queued.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Packets queued.
    pub(crate) fn packets(&self) -> u64 {
        self.packets.len() as u64
    }

    /// When the buffer became empty, if it has been empty since the last
    /// call; the next call returns `None` until the buffer empties again.
    pub(crate) fn take_idle_since(&mut self) -> Option<Time> {
        if self.packets.is_empty() {
            self.idle_since.take()
        } else {
            self.idle_since = None;
            None
        }
    }
}
