//! A constant-bit-rate source.

use super::{Arrival, Probe};
use crate::{Datagram, Host, Time};
use std::net::SocketAddr;
use std::time::Duration;

/// Sends `count` datagrams of a fixed payload size, one every `interval`,
/// from its start time, whatever happens to them. Records what it receives.
/// Finished a linger time (1 s unless set) after the last one is sent, so
/// that a run does not stop while the last datagrams are still in flight.
#[derive(Clone, Debug)]
pub struct CbrSource {
    src: SocketAddr,
    dst: SocketAddr,
    payload_len: usize,
    interval: Duration,
    count: u64,
    sent: u64,
    next_at: Option<Time>,
    linger: Duration,
    done_at: Option<Time>,
    done: bool,
    received: Vec<Arrival>,
}

impl CbrSource {
    /// A source from `src` to `dst` (`payload_len` is at least
    /// [`Probe::LEN`]).
    pub fn new(
        src: SocketAddr,
        dst: SocketAddr,
        payload_len: usize,
        interval: Duration,
        count: u64,
    ) -> CbrSource {
        CbrSource {
            src,
            dst,
            payload_len,
            interval,
            count,
            sent: 0,
            next_at: None,
            linger: Duration::from_secs(1),
            done_at: None,
            done: false,
            received: Vec::new(),
        }
    }

    /// How long to stay unfinished after the last datagram is sent.
    pub fn with_linger(mut self, linger: Duration) -> CbrSource {
        self.linger = linger;
        self
    }

    /// Datagrams sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Everything received (acknowledgements, injected datagrams).
    pub fn received(&self) -> &[Arrival] {
        &self.received
    }
}

impl Host for CbrSource {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.received.push(Arrival::of(now, &datagram));
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.done_at.is_some_and(|t| now >= t) {
            self.done = true;
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if self.sent >= self.count {
            return None;
        }
        let due = *self.next_at.get_or_insert(now);
        if due > now {
            return None;
        }
        let probe = Probe {
            seq: self.sent,
            sent_at: now,
        };
        self.sent += 1;
        self.next_at = Some(due + self.interval);
        if self.sent == self.count {
            self.done_at = Some(now + self.linger);
        }
        Some(Datagram::new(
            self.src,
            self.dst,
            probe.encode(self.payload_len),
        ))
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        if self.sent < self.count {
            self.next_at
        } else if self.done {
            None
        } else {
            self.done_at
        }
    }

    fn is_finished(&self) -> bool {
        self.done || self.count == 0
    }
}
