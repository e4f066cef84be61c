//! Per-packet cost of the sidekick proxy engine on base traffic.
//!
//! `cargo bench -p pepkit-sidekick --bench proxy`. One iteration is one
//! base-traffic datagram (1200-byte payload, identifier at offset 21)
//! through the proxy the way the simulator drives a middlebox: clone a
//! prepared datagram (the API takes it by value), `handle_datagram`, drain
//! `poll_transmit` (the forwarded datagram and any quACK), `poll_timeout`,
//! and `handle_timeout` when a timer is due. Simulated time advances 1 µs
//! per packet (1 Mpacket/s, about 10 Gbit/s of 1200-byte payloads), and
//! packets go round-robin over the flows in the table. Each
//! benchmark first warms up for 300 ms of simulated time (steady state).
//!
//! * `configured_30ms`: every flow configured with t = 10, 4-byte
//!   identifiers, a quACK every 30 ms.
//! * `configured_2pkts`: the same with a quACK every 2 packets of a flow.
//! * `unconfigured`: datagrams of a flow that never asked for quACKs (not
//!   in the table), with the table holding `flows` configured flows: a
//!   lookup and a forward.
//! * `clone_datagram`: the clone and drop of the prepared datagram alone,
//!   to subtract from the others.
//!
//! Divan reports time per iteration, that is ns per packet (each sample
//! times 512 packets in a row, so the timer's own cost is amortised).

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use netsim::{Datagram, Interface, Middlebox, Seed, Time};
use sidekick::wire::{Config, Control, Discovery, Interval};
use sidekick::{ProxyConfig, SidekickProxy};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

fn main() {
    divan::main();
}

const PAYLOAD: usize = 1200;
const THRESHOLD: u8 = 10;
const ID_OFFSET: u16 = 21;
/// Distinct payload buffers (identifiers), shared by the datagrams.
const PAYLOADS: usize = 64;
/// Simulated time between packets.
const STEP: Duration = Duration::from_micros(1);
/// Simulated warm-up before measuring: ten 30 ms quACK intervals.
const WARM_UP: Time = Time::from_millis(300);
const PROXY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254)), 1234);
const RECEIVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)), 4433);

/// The base connection's sender of flow `i`.
fn sender(i: usize) -> SocketAddr {
    let i = u16::try_from(i).expect("few flows");
    let [hi, lo] = i.to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo)), 5000)
}

/// The same host's control port.
fn control(i: usize) -> SocketAddr {
    SocketAddr::new(sender(i).ip(), 5103)
}

/// A proxy, its clock, and the datagrams to feed it.
struct Bed {
    proxy: SidekickProxy,
    now: Time,
    packets: Vec<Datagram>,
    next: usize,
}

impl Bed {
    /// `flows` configured flows; base datagrams from `flows` senders (or,
    /// if `unknown`, from as many senders that never sent a request).
    fn new(flows: usize, interval: Interval, unknown: bool) -> Bed {
        let mut config = ProxyConfig::new(PROXY, Seed::new(1));
        config.max_flows = config.max_flows.max(flows);
        config.max_quota = u32::MAX;
        let mut bed = Bed {
            proxy: SidekickProxy::new(config),
            now: Time::ZERO,
            packets: Vec::new(),
            next: 0,
        };
        for i in 0..flows {
            bed.configure(i, interval);
        }
        // Payload buffers shared among the datagrams (cheap clones, as a
        // real packet buffer would be).
        let payloads: Vec<Datagram> = (0..PAYLOADS)
            .map(|k| {
                let mut payload = vec![0x40u8; PAYLOAD];
                let at = usize::from(ID_OFFSET);
                payload[at..at + 4].copy_from_slice(&(0x1000_0000 + k as u32).to_be_bytes());
                Datagram::new(RECEIVER, RECEIVER, payload)
            })
            .collect();
        let first = if unknown { flows } else { 0 };
        let count = flows.max(PAYLOADS);
        bed.packets = (0..count)
            .map(|k| {
                let template = Datagram::new(sender(first + k % flows), RECEIVER, Vec::new());
                Datagram {
                    payload: payloads[k % PAYLOADS].payload.clone(),
                    ..template
                }
            })
            .collect();
        // Warm up to the steady state: a full round over the flows (arms
        // every timer), and long enough for every flow to have sent more
        // quACKs than the session window holds (the session table stops
        // growing).
        let mut steps = 0;
        while steps < bed.packets.len() || bed.now < WARM_UP {
            bed.step();
            steps += 1;
        }
        bed
    }

    /// Delivers a datagram, returns what the proxy sent.
    fn send(&mut self, datagram: Datagram) -> Vec<Datagram> {
        self.proxy.handle_datagram(self.now, Interface(0), datagram);
        std::iter::from_fn(|| self.proxy.poll_transmit(self.now))
            .map(|t| t.datagram)
            .collect()
    }

    /// Request, configure, and raise the quota with the first quACK's
    /// session ID.
    fn configure(&mut self, i: usize, interval: Interval) {
        let out = self.send(Datagram::new(
            sender(i),
            RECEIVER,
            Discovery::Request { nonce: i as u64 }.to_bytes(),
        ));
        let session = out
            .iter()
            .find_map(|d| match Discovery::parse(&d.payload) {
                Ok(Discovery::Reply { session, .. }) => Some(session),
                _ => None,
            })
            .expect("a reply");
        let config = |interval, quota| Config {
            interval,
            threshold: THRESHOLD,
            id_bytes: 4,
            id_offset: ID_OFFSET,
            quota,
        };
        // A quACK after one packet, for a session ID that raises the quota.
        let configure = Control::Configure {
            session,
            config: config(Interval::Packets(1), 0),
        };
        assert!(
            self.send(Datagram::new(control(i), PROXY, configure.to_bytes()))
                .is_empty()
        );
        let mut payload = vec![0x40u8; PAYLOAD];
        payload[usize::from(ID_OFFSET)..][..4].copy_from_slice(&7u32.to_be_bytes());
        let out = self.send(Datagram::new(sender(i), RECEIVER, payload));
        let next_session = out
            .iter()
            .find_map(|d| match Control::parse(&d.payload) {
                Ok(Control::Quack { next_session, .. }) if d.src == PROXY => Some(next_session),
                _ => None,
            })
            .expect("a quACK");
        let configure = Control::Configure {
            session: next_session,
            config: config(interval, 1 << 30),
        };
        assert!(
            self.send(Datagram::new(control(i), PROXY, configure.to_bytes()))
                .is_empty()
        );
    }

    /// One packet through the proxy, as the simulator drives it.
    #[inline(always)]
    fn step(&mut self) {
        self.now += STEP;
        let now = self.now;
        let datagram = self.packets[self.next].clone();
        self.next += 1;
        if self.next == self.packets.len() {
            self.next = 0;
        }
        let proxy = &mut self.proxy;
        proxy.handle_datagram(now, Interface(0), datagram);
        while let Some(t) = proxy.poll_transmit(now) {
            black_box(t);
        }
        if proxy.poll_timeout().is_some_and(|at| at <= now) {
            proxy.handle_timeout(now);
            while let Some(t) = proxy.poll_transmit(now) {
                black_box(t);
            }
        }
        black_box(proxy.poll_timeout());
    }
}

fn run(bencher: Bencher<'_, '_>, mut bed: Bed) {
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| bed.step());
    black_box(bed.proxy.stats());
}

#[divan::bench(args = [1, 100, 4096], sample_count = 200, sample_size = 512)]
fn configured_30ms(bencher: Bencher<'_, '_>, flows: usize) {
    run(bencher, Bed::new(flows, Interval::Millis(30), false));
}

#[divan::bench(args = [1, 100, 4096], sample_count = 200, sample_size = 512)]
fn configured_2pkts(bencher: Bencher<'_, '_>, flows: usize) {
    run(bencher, Bed::new(flows, Interval::Packets(2), false));
}

#[divan::bench(args = [1, 100, 4096], sample_count = 200, sample_size = 512)]
fn unconfigured(bencher: Bencher<'_, '_>, flows: usize) {
    run(bencher, Bed::new(flows, Interval::Millis(30), true));
}

/// The clone (and drop) of a prepared datagram alone.
#[divan::bench(args = [1, 100, 4096], sample_count = 200, sample_size = 512)]
fn clone_datagram(bencher: Bencher<'_, '_>, flows: usize) {
    let packets = Bed::new(flows, Interval::Millis(30), true).packets;
    let mut next = 0;
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        let datagram = packets[next].clone();
        next += 1;
        if next == packets.len() {
            next = 0;
        }
        black_box(datagram);
    });
}
