//! Hand-built packet timelines for the engine: QUIC-shaped datagrams (long
//! headers during the handshake, short headers after it) between a client
//! and a server on either side of PEMI, fed at chosen times, with the
//! engine's timers run in between, and everything it sends recorded.
#![allow(dead_code)]

use bytes::Bytes;
use netsim::{Datagram, Interface, Middlebox, Time, Transmit};
use pemi::{Pemi, PemiConfig};
use std::net::SocketAddr;
use std::time::Duration;

pub(crate) const CLIENT: &str = "10.0.2.10:5000";
pub(crate) const SERVER: &str = "10.0.1.10:4433";
/// The client's side of PEMI, as on a simulator chain.
pub(crate) const CLIENT_SIDE: Interface = Interface(0);
pub(crate) const SERVER_SIDE: Interface = Interface(1);

pub(crate) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

pub(crate) fn at_ms(v: f64) -> Time {
    Time::from_nanos((v * 1e6) as u64)
}

/// A QUIC v1 long-header packet of raw type bits with `body` bytes.
pub(crate) fn long(type_bits: u8, body: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (type_bits << 4), 0, 0, 0, 1, 8];
    p.extend_from_slice(&[0xaa; 8]);
    p.push(8);
    p.extend_from_slice(&[0xbb; 8]);
    if type_bits == 0 {
        p.push(0); // no token
    }
    p.extend_from_slice(&(0x4000u16 | body as u16).to_be_bytes());
    p.extend(std::iter::repeat_n(0x11, body));
    p
}

/// The client's first Initial, padded to 1200 bytes.
pub(crate) fn client_initial() -> Datagram {
    let mut p = long(0, 300);
    p.resize(1200, 0);
    Datagram::new(addr(CLIENT), addr(SERVER), p)
}

/// The server's Initial and Handshake, coalesced.
pub(crate) fn server_flight() -> Datagram {
    let mut p = long(0, 100);
    p.extend(long(2, 800));
    Datagram::new(addr(SERVER), addr(CLIENT), p)
}

/// The client's Handshake (its Finished).
pub(crate) fn client_finished() -> Datagram {
    Datagram::new(addr(CLIENT), addr(SERVER), long(2, 60))
}

/// A 1-RTT packet: short header with the spin bit, a unique payload of
/// `len` bytes.
pub(crate) fn short(from: &str, to: &str, spin: bool, id: u32, len: usize) -> Datagram {
    let mut p = vec![0x40 | if spin { 0x20 } else { 0 }];
    p.extend_from_slice(&[0xaa; 8]);
    p.extend_from_slice(&id.to_be_bytes());
    p.resize(len.max(13), 0x22);
    Datagram::new(addr(from), addr(to), Bytes::from(p))
}

/// Data from the server (1200-byte payloads).
pub(crate) fn data(id: u32) -> Datagram {
    short(SERVER, CLIENT, false, id, 1200)
}

/// A client's reply (an ACK-sized packet).
pub(crate) fn ack(id: u32) -> Datagram {
    short(CLIENT, SERVER, false, 1_000_000 + id, 40)
}

/// A datagram arriving at a time from a side.
pub(crate) type Event = (Time, Interface, Datagram);

/// The engine with everything it sent, and when.
pub(crate) struct Harness {
    pub(crate) pemi: Pemi,
    pub(crate) now: Time,
    pub(crate) out: Vec<(Time, Transmit)>,
    /// Times the engine's timer was handled.
    pub(crate) wakes: u32,
}

impl Harness {
    pub(crate) fn new(config: PemiConfig) -> Harness {
        Harness {
            pemi: Pemi::new(config),
            now: Time::ZERO,
            out: Vec::new(),
            wakes: 0,
        }
    }

    fn drain(&mut self) {
        while let Some(t) = self.pemi.poll_transmit(self.now) {
            self.out.push((self.now, t));
        }
    }

    /// Runs the engine's timers up to `to`.
    pub(crate) fn advance(&mut self, to: Time) {
        while let Some(wake) = self.pemi.poll_timeout() {
            if wake > to {
                break;
            }
            self.now = self.now.max(wake);
            self.wakes += 1;
            self.pemi.handle_timeout(self.now);
            self.drain();
        }
        self.now = self.now.max(to);
    }

    /// `datagram` arrives at `at` from the `from` side.
    pub(crate) fn feed(&mut self, at: Time, from: Interface, datagram: Datagram) {
        assert!(
            at >= self.now,
            "time runs backwards: {at} after {}",
            self.now
        );
        self.advance(at);
        self.pemi.handle_datagram(at, from, datagram);
        self.drain();
    }

    /// Feeds `events` in time order (stable for equal times).
    pub(crate) fn play(&mut self, mut events: Vec<Event>) {
        events.sort_by_key(|(t, _, _)| *t);
        for (t, from, d) in events {
            self.feed(t, from, d);
        }
    }

    /// From the server.
    pub(crate) fn server_sends(&mut self, at: Time, datagram: Datagram) {
        self.feed(at, SERVER_SIDE, datagram);
    }

    /// From the client.
    pub(crate) fn client_sends(&mut self, at: Time, datagram: Datagram) {
        self.feed(at, CLIENT_SIDE, datagram);
    }

    /// The handshake at 0, 50 and 60 ms: PEMI is 50 ms (round trip) from
    /// the server and 10 ms from the client.
    pub(crate) fn handshake(&mut self) {
        self.client_sends(at_ms(0.0), client_initial());
        self.server_sends(at_ms(50.0), server_flight());
        self.client_sends(at_ms(60.0), client_finished());
    }

    /// Server data and client ACKs from `from` ms for `count` packets 1 ms
    /// apart, each acknowledged 10 ms later: long enough to make the
    /// server the dominant sender. Ids from `first_id`.
    pub(crate) fn warm_up(&mut self, from: f64, count: u32, first_id: u32) {
        for k in 0..count {
            let t = from + f64::from(k);
            self.server_sends(at_ms(t), data(first_id + k));
            // Earlier packets' ACKs interleave.
            if k >= 10 {
                self.client_sends(at_ms(t + 0.5), ack(first_id + k - 10));
            }
        }
        let end = from + f64::from(count);
        for k in count.saturating_sub(10)..count {
            self.client_sends(at_ms(end + f64::from(k + 10 - count)), ack(first_id + k));
        }
    }

    /// The retransmissions: datagrams sent more than once, with the time of
    /// each later copy.
    pub(crate) fn copies(&self) -> Vec<(Time, Datagram)> {
        let mut seen = std::collections::HashMap::new();
        let mut copies = Vec::new();
        for (t, transmit) in &self.out {
            let n = seen.entry(transmit.datagram.fingerprint()).or_insert(0);
            *n += 1;
            if *n > 1 {
                copies.push((*t, transmit.datagram.clone()));
            }
        }
        copies
    }
}

/// The id a [`short`] packet carries.
pub(crate) fn id_of(d: &Datagram) -> u32 {
    u32::from_be_bytes(d.payload[9..13].try_into().unwrap())
}
