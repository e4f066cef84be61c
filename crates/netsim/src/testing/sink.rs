//! A receiver that records what arrives and can echo acknowledgements.

use super::Probe;
use crate::{Datagram, Host, PacketCount, Time};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// One datagram as a test host saw it arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arrival {
    /// Arrival time.
    pub at: Time,
    /// Who sent it.
    pub src: SocketAddr,
    /// Its IP packet length.
    pub wire_len: usize,
    /// Its probe header, if it had one.
    pub probe: Option<Probe>,
}

impl Arrival {
    pub(crate) fn of(now: Time, datagram: &Datagram) -> Arrival {
        Arrival {
            at: now,
            src: datagram.src,
            wire_len: datagram.wire_len(),
            probe: Probe::decode(&datagram.payload),
        }
    }

    /// One-way delay, if the datagram carried a probe header.
    pub fn one_way_delay(&self) -> Option<std::time::Duration> {
        self.probe.map(|p| self.at - p.sent_at)
    }
}

/// Records every datagram it receives; optionally answers each with a
/// 16-byte acknowledgement echoing its probe header. Always finished.
#[derive(Clone, Debug, Default)]
pub struct Sink {
    echo: bool,
    arrivals: Vec<Arrival>,
    replies: VecDeque<Datagram>,
}

impl Sink {
    /// A silent sink.
    pub fn new() -> Sink {
        Sink::default()
    }

    /// A sink that acknowledges every datagram.
    pub fn echoing() -> Sink {
        Sink {
            echo: true,
            ..Sink::default()
        }
    }

    /// Everything received, in order.
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }

    /// Packets and IP bytes received in `[from, to)`.
    pub fn received_between(&self, from: Time, to: Time) -> PacketCount {
        let mut count = PacketCount::default();
        for a in self.arrivals.iter().filter(|a| a.at >= from && a.at < to) {
            count.packets += 1;
            count.bytes += a.wire_len as u64;
        }
        count
    }
}

impl Host for Sink {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        let arrival = Arrival::of(now, &datagram);
        self.arrivals.push(arrival);
        if self.echo {
            let probe = arrival.probe.unwrap_or(Probe {
                seq: u64::MAX,
                sent_at: now,
            });
            self.replies
                .push_back(datagram.reply(probe.encode(Probe::LEN)));
        }
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, _now: Time) -> Option<Datagram> {
        self.replies.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }

    fn is_finished(&self) -> bool {
        true
    }
}
