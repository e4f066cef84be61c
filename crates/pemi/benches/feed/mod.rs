//! The engine's traffic for its benchmark and for `examples/cold_lines`:
//! per protected connection the server sends flowlets of 20 packets of
//! 1200 bytes, 100 µs apart, one flowlet every 5 ms; the client
//! acknowledges every second packet 2 ms later, and at once after a gap;
//! 1% of the data packets are lost after PEMI (never acknowledged). See
//! `engine.rs` for what each benchmark times.

// Each includer uses a different part.
#![allow(dead_code)]

use bytes::Bytes;
use netsim::{Datagram, Interface, Middlebox, Time};
use pemi::{Pemi, PemiConfig};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

pub(crate) const SERVER: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 10)), 4433);
const FLOWLET: u32 = 20;
const GAP: Duration = Duration::from_micros(100);
const EVERY: Duration = Duration::from_millis(5);
const RTT: Duration = Duration::from_millis(2);
/// Flowlets per repetition of the schedule.
const FLOWLETS: u32 = 100;

pub(crate) fn client(i: u32) -> SocketAddr {
    let [_, b, c, d] = i.to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, b, c, d.max(1))), 5000)
}

pub(crate) fn short(spin: bool, id: u32, len: usize) -> Bytes {
    let mut p = vec![0x40 | if spin { 0x20 } else { 0 }];
    p.extend_from_slice(&[0xaa; 8]);
    p.extend_from_slice(&id.to_be_bytes());
    p.resize(len, 0x22);
    Bytes::from(p)
}

pub(crate) fn long(type_bits: u8, body: usize, pad: usize) -> Bytes {
    let mut p = vec![0xc0 | (type_bits << 4), 0, 0, 0, 1, 8];
    p.extend_from_slice(&[0xaa; 8]);
    p.push(8);
    p.extend_from_slice(&[0xbb; 8]);
    if type_bits == 0 {
        p.push(0);
    }
    p.extend_from_slice(&(0x4000u16 | body as u16).to_be_bytes());
    p.extend(std::iter::repeat_n(0x11, body));
    p.resize(pad.max(p.len()), 0);
    Bytes::from(p)
}

/// One datagram of the repeating schedule.
#[derive(Clone, Copy)]
pub(crate) struct Event {
    at: Duration,
    conn: u32,
    from_server: bool,
    /// Data packet index in the schedule (payloads cycle).
    index: u32,
}

/// Whether data packet `index` of the schedule is lost (1%, scattered).
pub(crate) fn lost(index: u32) -> bool {
    let x = u64::from(index).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x ^ (x >> 31)).is_multiple_of(100)
}

/// The schedule of `conns` connections over one period, time-ordered.
/// The client acknowledges as RFC 9000 §13.2 receivers with an eliciting
/// threshold of 2 do: every second packet, at once after a gap, and by
/// its 25 ms timer when one packet is left over.
pub(crate) fn schedule(conns: u32) -> Vec<Event> {
    let mut events = Vec::new();
    let stagger = EVERY / conns.max(1);
    for conn in 0..conns {
        let offset = stagger * conn;
        for f in 0..FLOWLETS {
            let start = offset + EVERY * f;
            let (mut pending, mut gap) = (0, false);
            for k in 0..FLOWLET {
                let index = f * FLOWLET + k;
                let at = start + GAP * k;
                events.push(Event {
                    at,
                    conn,
                    from_server: true,
                    index,
                });
                if lost(index) {
                    gap = true;
                    continue;
                }
                pending += 1;
                if pending == 2 || gap {
                    events.push(Event {
                        at: at + RTT,
                        conn,
                        from_server: false,
                        index,
                    });
                    (pending, gap) = (0, false);
                }
            }
            if pending > 0 {
                let at = start + GAP * (FLOWLET - 1) + RTT + Duration::from_millis(25);
                let index = f * FLOWLET + FLOWLET - 1;
                events.push(Event {
                    at,
                    conn,
                    from_server: false,
                    index,
                });
            }
        }
    }
    events.sort_by_key(|e| (e.at, e.conn, e.from_server));
    events
}

/// The schedule, and where it is: the datagrams in order.
pub(crate) struct Feed {
    events: Vec<Event>,
    data: Vec<Bytes>,
    acks: Vec<Bytes>,
    next: usize,
    base: Time,
    period: Duration,
    /// Each payload a fresh copy, as the daemon's in-path driver makes
    /// (`Bytes::copy_from_slice` of its receive buffer), rather than a
    /// clone of a shared one.
    fresh: bool,
}

impl Feed {
    /// The next datagram: when, from where, and it.
    pub(crate) fn next(&mut self) -> (Time, Interface, Datagram) {
        let e = self.events[self.next];
        let now = self.base + e.at;
        self.next += 1;
        if self.next == self.events.len() {
            self.next = 0;
            self.base += self.period;
        }
        let c = client(e.conn);
        let (side, src, dst, payload) = if e.from_server {
            (Interface(1), SERVER, c, &self.data[(e.index % 64) as usize])
        } else {
            (Interface(0), c, SERVER, &self.acks[(e.index % 64) as usize])
        };
        let payload = if self.fresh {
            Bytes::copy_from_slice(payload)
        } else {
            payload.clone()
        };
        (now, side, Datagram::new(src, dst, payload))
    }
}

/// One datagram through the engine as the drivers do it.
pub(crate) fn deliver(pemi: &mut impl Middlebox, (now, side, d): (Time, Interface, Datagram)) {
    if pemi.poll_timeout().is_some_and(|t| t <= now) {
        pemi.handle_timeout(now);
    }
    pemi.handle_datagram(now, side, d);
    while let Some(t) = pemi.poll_transmit(now) {
        black_box(t);
    }
}

/// The engine and its feed.
pub(crate) struct Driver {
    pub(crate) pemi: Pemi,
    pub(crate) feed: Feed,
}

impl Driver {
    pub(crate) fn new(conns: u32, fresh: bool) -> Driver {
        let mut pemi = Pemi::new(PemiConfig::default());
        // Handshakes: PEMI 40 ms from the server, 2 ms from the clients.
        for conn in 0..conns {
            let c = client(conn);
            let t = Time::from_micros(u64::from(conn));
            pemi.handle_datagram(
                t,
                Interface(0),
                Datagram::new(c, SERVER, long(0, 300, 1200)),
            );
            let mut flight = long(0, 100, 0).to_vec();
            flight.extend_from_slice(&long(2, 800, 0));
            pemi.handle_datagram(
                t + Duration::from_millis(40),
                Interface(1),
                Datagram::new(SERVER, c, flight),
            );
            pemi.handle_datagram(
                t + Duration::from_millis(42),
                Interface(0),
                Datagram::new(c, SERVER, long(2, 60, 0)),
            );
        }
        while pemi.poll_transmit(Time::ZERO).is_some() {}
        let mut driver = Driver {
            pemi,
            feed: Feed {
                events: schedule(conns),
                data: (0..64).map(|i| short(false, i, 1200)).collect(),
                acks: (0..64).map(|i| short(false, 1_000_000 + i, 40)).collect(),
                next: 0,
                base: Time::from_millis(100),
                period: EVERY * FLOWLETS,
                fresh,
            },
        };
        // One period of traffic: the dominant direction is decided and the
        // flowlets run.
        for _ in 0..driver.feed.events.len() {
            driver.step();
        }
        driver
    }

    pub(crate) fn step(&mut self) {
        let input = self.feed.next();
        deliver(&mut self.pemi, input);
    }
}

/// Reads every cache line of `sweep` ([`SWEEP`] bytes, well over this
/// machine's per-core L2): what the engine touched is out of L1 and L2, as
/// after the daemon's wake-up, system calls and the other processes that
/// ran on the core between two packets (~1 ms apart in Figure 13).
pub(crate) fn evict(sweep: &[u8]) {
    let mut sum = 0u8;
    for line in sweep.chunks(64) {
        sum = sum.wrapping_add(line[0]);
    }
    black_box(sum);
}

/// For [`evict`]: 8 MiB, eight times this machine's per-core L2 (1 MiB)
/// and a quarter of its L3 (32 MiB).
pub(crate) const SWEEP: usize = 8 << 20;
/// Twice this machine's L3.
pub(crate) const SWEEP_L3: usize = 64 << 20;
