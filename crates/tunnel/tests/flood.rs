//! The tunnel server under a flood of QUIC Initials from spoofed sources
//! (simulator): it keeps serving a legitimate tunnel client, answers with
//! Retry once enough handshakes are unvalidated (so it reflects less than
//! it receives), gives up handshakes that never complete and frees what
//! closed connections held.

mod common;

use bytes::Bytes;
use common::*;
use netsim::testing::{CbrSource, Sink};
use netsim::{
    ChainSpec, Datagram, HopConfig, Host, HostSpec, Interface, MiddleSpec, Middlebox, Seed,
    Simulator, Time, Transmit,
};
use quic::{App, EmbeddedEndpoint, HandshakeLimits, Session};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tunnel::{Mode, ServerLimits, TunnelClientHost, TunnelServer, TunnelSettings};

/// A connection that does nothing (its first Initial is all we want).
struct Idle;

impl App for Idle {
    fn drive(&mut self, _session: &mut Session<'_>) {}
    fn is_done(&self) -> bool {
        false
    }
}

/// `n` real client Initials (a ClientHello each, padded to 1200 bytes),
/// each with its own destination CID.
fn initials(seed: Seed, n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            let mut endpoint =
                EmbeddedEndpoint::new(outer(seed), addr("10.0.0.9:6000"), &format!("flood/{i}"));
            endpoint.connect(Time::ZERO, addr(PROXY), Idle).unwrap();
            endpoint.poll_transmit(Time::ZERO).unwrap().payload
        })
        .collect()
}

/// The target (a sink) with a flood generator beside it: from `start` to
/// `end` it sends the Initials, in turn, to the tunnel server at `rate` a
/// second, each from its own spoofed source (10.200.0.0/16).
struct FloodAndTarget {
    sink: Sink,
    initials: Vec<Bytes>,
    interval: Duration,
    next: Time,
    end: Time,
    sent: usize,
    sent_bytes: u64,
}

/// A node between the tunnel server and the target that counts and drops
/// what is sent to the flood's spoofed sources (the tunnel server's
/// default route leads this way) and forwards everything else.
#[derive(Default)]
struct Meter {
    out: VecDeque<Transmit>,
    reflected: u64,
    reflected_bytes: u64,
}

impl Middlebox for Meter {
    fn handle_datagram(&mut self, now: Time, _from: Interface, datagram: Datagram) {
        if matches!(datagram.dst.ip(), IpAddr::V4(ip) if ip.octets()[..2] == [10, 200]) {
            self.reflected += 1;
            self.reflected_bytes += datagram.payload.len() as u64;
        } else {
            self.out.push_back(Transmit::at(now, datagram));
        }
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.out.pop_front()
    }
    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }
}

impl FloodAndTarget {
    fn new(initials: Vec<Bytes>, rate: u64, start: Time, end: Time) -> FloodAndTarget {
        FloodAndTarget {
            sink: Sink::new(),
            initials,
            interval: Duration::from_nanos(1_000_000_000 / rate),
            next: start,
            end,
            sent: 0,
            sent_bytes: 0,
        }
    }

    fn spoofed(i: usize) -> SocketAddr {
        let [_, _, hi, lo] = u32::try_from(i % 65_000).unwrap().to_be_bytes();
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 200, hi, lo)), 40_000)
    }
}

/// What the flood sent and drew back.
struct Flooded {
    sent: usize,
    sent_bytes: u64,
    reflected: u64,
    reflected_bytes: u64,
}

impl Flooded {
    /// Bytes the server sent to spoofed sources per byte of flood.
    fn reflection(&self) -> f64 {
        self.reflected_bytes as f64 / self.sent_bytes as f64
    }
}

impl Host for FloodAndTarget {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.sink.handle_datagram(now, datagram);
    }
    fn handle_timeout(&mut self, now: Time) {
        self.sink.handle_timeout(now);
    }
    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if self.next <= now && self.next < self.end {
            let payload = self.initials[self.sent % self.initials.len()].clone();
            let datagram = Datagram::new(Self::spoofed(self.sent), addr(PROXY), payload);
            self.sent += 1;
            self.sent_bytes += datagram.payload.len() as u64;
            self.next += self.interval;
            return Some(datagram);
        }
        self.sink.poll_transmit(now)
    }
    fn poll_timeout(&mut self) -> Option<Time> {
        let flood = (self.next < self.end).then_some(self.next);
        flood.into_iter().chain(self.sink.poll_timeout()).min()
    }
    fn is_finished(&self) -> bool {
        self.next >= self.end && self.sink.is_finished()
    }
}

/// What a flood run shows.
struct Outcome {
    /// Probes of the legitimate client that reached the target.
    arrived: usize,
    flood: Flooded,
    live: usize,
    unvalidated: usize,
    stats: Vec<tunnel::ServerStats>,
}

/// A legitimate tunnel client sends `probes` probes (1000 B every 2 ms,
/// from `client_start`) to the target while `flood` runs; the simulation
/// stops at `until`.
fn run(
    limits: ServerLimits,
    flood: FloodAndTarget,
    probes: u64,
    client_start: Time,
    until: Time,
) -> Outcome {
    let seed = Seed::new(5);
    let settings = TunnelSettings::new(Mode::Datagram);
    let source = CbrSource::new(
        addr(CLIENT),
        addr(SERVER),
        1000,
        Duration::from_millis(2),
        probes,
    );
    let client = wrap(source, seed, &settings);
    let middle = server_with(seed, &settings, limits, 1);
    let spec = ChainSpec::new(
        HostSpec::new("client", addr(CLIENT).ip(), client).starting_at(client_start),
        HostSpec::new("target", addr(SERVER).ip(), flood),
    )
    .hop(HopConfig::symmetric(link(10, 20)))
    .middle(MiddleSpec::with_middlebox("tunnel", middle).with_addr(addr(PROXY).ip()))
    // Wide enough for 100k Initials a second (960 Mbit/s).
    .hop(HopConfig::symmetric(link(1, 10_000)))
    .middle(MiddleSpec::with_middlebox("meter", Meter::default()))
    .hop(HopConfig::symmetric(link(4, 10_000)));
    let mut sim = Simulator::new(seed);
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(until);
    let server = sim.middlebox::<TunnelServer>(chain.middles[0]).unwrap();
    let (live, unvalidated, stats) = (
        server.live_connections(),
        server.unvalidated_handshakes(),
        server.stats(),
    );
    let client = sim
        .host::<TunnelClientHost<CbrSource>>(chain.sender)
        .unwrap();
    assert!(client.record().is_some());
    let meter = sim.middlebox::<Meter>(chain.middles[1]).unwrap();
    let (reflected, reflected_bytes) = (meter.reflected, meter.reflected_bytes);
    let flood = sim.host::<FloodAndTarget>(chain.receiver).unwrap();
    Outcome {
        arrived: flood.sink.arrivals().len(),
        flood: Flooded {
            sent: flood.sent,
            sent_bytes: flood.sent_bytes,
            reflected,
            reflected_bytes,
        },
        live,
        unvalidated,
        stats,
    }
}

#[test]
fn eleven_hundred_initials_do_not_lock_the_server_out() {
    // 1,100 handshakes from spoofed sources before the client comes: the
    // server once counted every connection it ever accepted against its
    // 1024 and refused everyone after.
    let flood = FloodAndTarget::new(
        initials(Seed::new(5), 1100),
        100_000,
        Time::ZERO,
        Time::from_millis(11),
    );
    let out = run(
        ServerLimits::default(),
        flood,
        200,
        Time::from_millis(50),
        Time::from_secs(2),
    );
    assert_eq!(out.flood.sent, 1100);
    assert_eq!(out.arrived, 200, "the legitimate client's probes");
    let threshold = HandshakeLimits::default().retry_threshold;
    // The flood's handshakes stop at the Retry threshold; the client is
    // served beside them.
    assert_eq!(out.unvalidated, threshold);
    assert_eq!(out.live, threshold + 1);
    println!(
        "1,100 Initials: reflection {:.3} ({} datagrams back)",
        out.flood.reflection(),
        out.flood.reflected
    );
}

#[test]
fn a_legitimate_client_tunnels_through_a_100k_per_second_flood() {
    let flood = FloodAndTarget::new(
        initials(Seed::new(5), 4096),
        100_000,
        Time::ZERO,
        Time::from_millis(1500),
    );
    // The handshakes the flood started are given up after their deadline.
    let limits = ServerLimits {
        handshakes: HandshakeLimits {
            timeout: Duration::from_secs(2),
            ..HandshakeLimits::default()
        },
        ..ServerLimits::default()
    };
    let out = run(
        limits,
        flood,
        500,
        Time::from_millis(100),
        Time::from_secs(4),
    );
    assert_eq!(out.flood.sent, 150_000);
    assert_eq!(out.arrived, 500, "the legitimate client's probes");
    let reflection = out.flood.reflection();
    println!(
        "100k Initials/s for 1.5 s: reflection {reflection:.3} ({} datagrams, {} bytes back \
         for {} bytes)",
        out.flood.reflected, out.flood.reflected_bytes, out.flood.sent_bytes
    );
    assert!(reflection <= 1.0, "reflection {reflection}");
    // Only the client is left: every flood handshake was given up.
    assert_eq!(out.unvalidated, 0);
    assert_eq!(out.live, 1);
    assert_eq!(out.stats.len(), 1, "given-up handshakes are forgotten");
}

#[test]
fn without_retry_each_handshake_reflects_three_times_its_initial() {
    // The stack's anti-amplification limit (RFC 9000 §8.1): 3x, reached
    // with the handshake's retransmissions. What a flood drew before
    // Retry, and below the threshold still does.
    let flood = FloodAndTarget::new(
        initials(Seed::new(5), 50),
        1_000,
        Time::ZERO,
        Time::from_millis(50),
    );
    let out = run(
        ServerLimits::default(),
        flood,
        10,
        Time::from_millis(100),
        Time::from_secs(5),
    );
    let reflection = out.flood.reflection();
    println!("50 handshakes, no Retry: reflection {reflection:.3}");
    assert!(reflection > 2.5 && reflection <= 3.0, "{reflection}");
    assert_eq!(out.unvalidated, 50);
}

#[test]
fn closed_and_abandoned_connections_give_back_their_place() {
    // Two connections at most, no Retry: the flood's two handshakes hold
    // both places until their deadline; then the client is served.
    let limits = ServerLimits {
        max_connections: 2,
        handshakes: HandshakeLimits {
            retry_threshold: usize::MAX,
            timeout: Duration::from_secs(1),
        },
        ..ServerLimits::default()
    };
    let flood = FloodAndTarget::new(
        initials(Seed::new(5), 2),
        1_000,
        Time::ZERO,
        Time::from_millis(2),
    );
    let out = run(
        limits,
        flood,
        100,
        Time::from_millis(1500),
        Time::from_secs(3),
    );
    assert_eq!(out.arrived, 100);
    assert_eq!(out.live, 1);
    assert_eq!(out.unvalidated, 0);
}
