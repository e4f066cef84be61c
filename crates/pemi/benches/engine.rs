//! Per-packet cost of the PEMI engine.
//!
//! `cargo bench -p pepkit-pemi --bench engine`. One iteration is one
//! datagram through the engine the way the simulator and the daemon drive
//! it: clone a prepared datagram (the API takes it by value),
//! `handle_datagram`, drain `poll_transmit` (the forward and any
//! retransmission), `poll_timeout`, and `handle_timeout` when a timer is
//! due. Divan reports time per iteration: ns per packet.
//!
//! The traffic, per protected connection: the server sends flowlets of 20
//! packets of 1200 bytes, 100 µs apart, one flowlet every 5 ms; the client
//! acknowledges every second packet 2 ms later, and at once after a gap
//! (RFC 9000's out-of-order rule); 1% of the data packets are lost after
//! PEMI (never acknowledged), so PEMI infers and retransmits them. With
//! many connections their schedules are staggered and interleaved, and
//! each lookup hits a different one. Every connection first completes a
//! handshake and one period of traffic (steady state) before timing.
//!
//! * `protected`: that traffic (connection lookup, flowlet record, reply
//!   assignment and matching, inference, retransmission, timers);
//! * `fresh`: `protected` with each payload a fresh copy made before
//!   timing, as the daemon's in-path driver hands them over (a clone of
//!   such a `Bytes` allocates, and the engine frees it);
//! * `cold`: `fresh` with L1 and L2 evicted before each datagram (an 8 MiB
//!   read, untimed), one datagram per sample: the daemon's conditions,
//!   where packets arrive ~1 ms apart after a wake-up; `cold_nothing` is
//!   the same sample around nothing;
//! * `cold_data`: `cold` with the instructions warm (another engine takes
//!   a datagram after the sweep): what instruction misses add to `cold`;
//! * `cold_forward`: `cold` through an engine that only forwards
//!   ([`netsim::Forward`]): the floor any engine pays to take a datagram
//!   and give it back;
//! * `cold_l3`, `cold_l3_forward`: the same with L3 and the TLB evicted too
//!   (a 64 MiB read), beyond the daemon's conditions;
//! * `untracked`: UDP of no connection (a lookup miss and a header walk);
//! * `clone_datagram`: the clone and drop of the prepared datagram alone.
//!
//! A counting allocator ([`divan::AllocProfiler`]) reports allocations
//! per iteration beside the times.

use bytes::Bytes;
use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use netsim::{Datagram, Interface, Middlebox, Time};
use pemi::{Pemi, PemiConfig};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

fn main() {
    divan::main();
}

/// Counts allocations: divan reports them per iteration (per packet).
#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

const SERVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 10)), 4433);
const FLOWLET: u32 = 20;
const GAP: Duration = Duration::from_micros(100);
const EVERY: Duration = Duration::from_millis(5);
const RTT: Duration = Duration::from_millis(2);
/// Flowlets per repetition of the schedule.
const FLOWLETS: u32 = 100;

fn client(i: u32) -> SocketAddr {
    let [_, b, c, d] = i.to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, b, c, d.max(1))), 5000)
}

fn short(spin: bool, id: u32, len: usize) -> Bytes {
    let mut p = vec![0x40 | if spin { 0x20 } else { 0 }];
    p.extend_from_slice(&[0xaa; 8]);
    p.extend_from_slice(&id.to_be_bytes());
    p.resize(len, 0x22);
    Bytes::from(p)
}

fn long(type_bits: u8, body: usize, pad: usize) -> Bytes {
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
struct Event {
    at: Duration,
    conn: u32,
    from_server: bool,
    /// Data packet index in the schedule (payloads cycle).
    index: u32,
}

/// Whether data packet `index` of the schedule is lost (1%, scattered).
fn lost(index: u32) -> bool {
    let x = u64::from(index).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x ^ (x >> 31)).is_multiple_of(100)
}

/// The schedule of `conns` connections over one period, time-ordered.
/// The client acknowledges as RFC 9000 §13.2 receivers with an eliciting
/// threshold of 2 do: every second packet, at once after a gap, and by
/// its 25 ms timer when one packet is left over.
fn schedule(conns: u32) -> Vec<Event> {
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
struct Feed {
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
    fn next(&mut self) -> (Time, Interface, Datagram) {
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
fn deliver(pemi: &mut impl Middlebox, (now, side, d): (Time, Interface, Datagram)) {
    if pemi.poll_timeout().is_some_and(|t| t <= now) {
        pemi.handle_timeout(now);
    }
    pemi.handle_datagram(now, side, d);
    while let Some(t) = pemi.poll_transmit(now) {
        black_box(t);
    }
}

/// The engine and its feed.
struct Driver {
    pemi: Pemi,
    feed: Feed,
}

impl Driver {
    fn new(conns: u32, fresh: bool) -> Driver {
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

    fn step(&mut self) {
        let input = self.feed.next();
        deliver(&mut self.pemi, input);
    }
}

/// Reads every cache line of a buffer twice the size of this machine's
/// per-core L2 (4 MiB): what the engine touched is out of L1 and L2, as
/// after the daemon's wake-up, system calls and the other processes that
/// ran on the core between two packets (~1 ms apart in Figure 13).
fn evict(sweep: &[u8]) {
    let mut sum = 0u8;
    for line in sweep.chunks(64) {
        sum = sum.wrapping_add(line[0]);
    }
    black_box(sum);
}

const SWEEP: usize = 8 << 20;
/// Twice this machine's L3.
const SWEEP_L3: usize = 64 << 20;

#[divan::bench(args = [1, 100, 1000])]
fn protected(bencher: Bencher<'_, '_>, conns: u32) {
    let mut driver = Driver::new(conns, false);
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| driver.step());
    let stats = driver.pemi.stats();
    assert!(stats.retransmissions > 0, "{stats:?}");
}

/// `protected` with a fresh payload per datagram, made before timing.
#[divan::bench(args = [1, 100, 1000])]
fn fresh(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| feed.next())
        .bench_local_values(|input| deliver(&mut pemi, input));
    assert!(pemi.stats().retransmissions > 0, "{:?}", pemi.stats());
}

/// `fresh` with the caches evicted before each datagram (untimed): one
/// datagram per sample, the engine's data cold as in the daemon.
#[divan::bench(args = [1, 100, 1000], sample_size = 1, sample_count = 3000)]
fn cold(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    let sweep = vec![1u8; SWEEP];
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            let input = feed.next();
            evict(&sweep);
            input
        })
        .bench_local_values(|input| deliver(&mut pemi, input));
    assert!(pemi.stats().retransmissions > 0, "{:?}", pemi.stats());
}

/// `cold` with the code warm: after the sweep a second engine (its own
/// data) takes one datagram, which brings the instructions back to L1i
/// and the branch predictors up to date but leaves this engine's data
/// cold. The difference to `cold` is what instruction misses cost.
#[divan::bench(args = [1, 100, 1000], sample_size = 1, sample_count = 3000)]
fn cold_data(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    let mut warm = Driver::new(conns, true);
    let sweep = vec![1u8; SWEEP];
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            let input = feed.next();
            evict(&sweep);
            warm.step();
            input
        })
        .bench_local_values(|input| deliver(&mut pemi, input));
    assert!(pemi.stats().retransmissions > 0, "{:?}", pemi.stats());
}

/// `cold` with an engine that forwards every datagram and does nothing
/// else ([`netsim::Forward`]): the floor any engine pays for taking a
/// datagram and giving it back with its data cold.
#[divan::bench(sample_size = 1, sample_count = 3000)]
fn cold_forward(bencher: Bencher<'_, '_>) {
    let Driver { mut feed, .. } = Driver::new(1, true);
    let mut forward = netsim::Forward::default();
    let sweep = vec![1u8; SWEEP];
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            let input = feed.next();
            evict(&sweep);
            input
        })
        .bench_local_values(|input| deliver(&mut forward, input));
}

/// `cold` with the 32 MiB L3 evicted too (a 64 MiB read, which also
/// empties the TLB): the bound beyond the daemon's conditions, where some
/// of the engine's lines stay in L3 between packets.
#[divan::bench(args = [1], sample_size = 1, sample_count = 400)]
fn cold_l3(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    let sweep = vec![1u8; SWEEP_L3];
    bencher
        .with_inputs(|| {
            let input = feed.next();
            evict(&sweep);
            input
        })
        .bench_local_values(|input| deliver(&mut pemi, input));
}

/// `cold_l3` through the forwarder.
#[divan::bench(sample_size = 1, sample_count = 400)]
fn cold_l3_forward(bencher: Bencher<'_, '_>) {
    let Driver { mut feed, .. } = Driver::new(1, true);
    let mut forward = netsim::Forward::default();
    let sweep = vec![1u8; SWEEP_L3];
    bencher
        .with_inputs(|| {
            let input = feed.next();
            evict(&sweep);
            input
        })
        .bench_local_values(|input| deliver(&mut forward, input));
}

/// What `cold` measures around nothing: the floor of one cold sample.
#[divan::bench(sample_size = 1, sample_count = 3000)]
fn cold_nothing(bencher: Bencher<'_, '_>) {
    let sweep = vec![1u8; SWEEP];
    bencher
        .with_inputs(|| evict(&sweep))
        .bench_local_values(black_box);
}

#[divan::bench]
fn untracked(bencher: Bencher<'_, '_>) {
    let mut driver = Driver::new(100, false);
    let stranger = Datagram::new(client(5000), SERVER, short(false, 7, 1200));
    let mut now = Time::from_secs(100);
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        now += Duration::from_micros(1);
        driver
            .pemi
            .handle_datagram(now, Interface(0), stranger.clone());
        while let Some(t) = driver.pemi.poll_transmit(now) {
            black_box(t);
        }
    });
}

#[divan::bench]
fn clone_datagram(bencher: Bencher<'_, '_>) {
    let d = Datagram::new(client(1), SERVER, short(false, 7, 1200));
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| black_box(d.clone()));
}
