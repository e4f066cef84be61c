//! Legitimate senders against a flood of spoofed sidekick requests, on
//! virtual time: one proxy engine (default table of 4096 flows), a flood
//! source sending requests from random spoofed addresses, and sender
//! engines that start one by one during the flood, each 1 ms from the
//! proxy, sending a datagram every 10 ms and asking for a quACK every 2
//! packets. A sender *succeeds* if it has applied at least 3 quACKs within
//! 1 s of its start (a session that works: the grant after the first quACK
//! was accepted).
//!
//! `cargo test -p pepkit-sidekick --release --test flood -- --nocapture`
//! prints the success rate and the proxy's counters.

use netsim::{Datagram, Interface, Middlebox, Seed, Time};
use quack::F32;
use rand_chacha::rand_core::RngCore;
use sidekick::wire::{Discovery, Interval};
use sidekick::{ProxyConfig, ProxyStats, SenderConfig, SidekickProxy, SidekickSender};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

const PROXY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 255, 255, 1)), 1234);
const RECEIVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1)), 4433);
/// Simulation step.
const STEP: Duration = Duration::from_micros(100);
/// One-way delay between a sender and the proxy.
const DELAY: Duration = Duration::from_millis(1);
/// A sender's base traffic: a datagram this often.
const SEND_EVERY: Duration = Duration::from_millis(10);
/// The time a sender has to get a working session.
const DEADLINE: Duration = Duration::from_secs(1);
/// QuACKs a working session has applied by its deadline.
const WORKING: u64 = 3;

struct Legit {
    engine: SidekickSender<F32>,
    start: Time,
    next_send: Time,
    next_id: u32,
    /// When it had applied `WORKING` quACKs.
    working_at: Option<Time>,
}

struct Outcome {
    senders: usize,
    succeeded: usize,
    flood_requests: u64,
    proxy: ProxyStats,
}

/// `senders` legitimate senders start evenly over `duration` (after the
/// flood has run for 1 s); the flood sends `flood_rate` requests per second
/// throughout, and for one more second after the last sender started.
fn run(flood_rate: u64, senders: usize, duration: Duration) -> Outcome {
    let seed = Seed::new(7);
    let mut rng = seed.rng("flood/spoofer");
    let mut proxy = SidekickProxy::new(ProxyConfig::new(PROXY, seed.derive("proxy")));
    let warm_up = Time::from_secs(1);
    let spacing = duration / senders as u32;
    let mut legit: Vec<Legit> = (0..senders)
        .map(|i| {
            let ip = Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8);
            let base = SocketAddr::new(IpAddr::V4(ip), 5000);
            let config = SenderConfig::new(Interval::Packets(2), 8);
            let start = warm_up + spacing * i as u32;
            Legit {
                engine: SidekickSender::new(config, base, RECEIVER, seed.derive(&format!("s{i}"))),
                start,
                next_send: start,
                next_id: 1,
                working_at: None,
            }
        })
        .collect();
    let by_ip: HashMap<IpAddr, usize> = legit
        .iter()
        .enumerate()
        .map(|(i, l)| (l.engine.control_addr().ip(), i))
        .collect();
    let end = warm_up + duration + DEADLINE;
    let flood_every = Duration::from_nanos(1_000_000_000 / flood_rate);
    let mut next_flood = Time::ZERO;
    let mut flood_requests = 0;
    let mut to_proxy: VecDeque<(Time, Datagram)> = VecDeque::new();
    let mut to_senders: VecDeque<(Time, Datagram)> = VecDeque::new();
    let mut now = Time::ZERO;
    while now < end {
        // The flood: requests from random addresses, straight to the proxy.
        while next_flood <= now {
            let ip = Ipv4Addr::from(0xac10_0000 | (rng.next_u32() & 0x000f_ffff));
            let port = 1024 + (rng.next_u32() % 60_000) as u16;
            let request = Discovery::Request {
                nonce: rng.next_u64(),
            };
            proxy.handle_datagram(
                now,
                Interface(0),
                Datagram::new(
                    SocketAddr::new(IpAddr::V4(ip), port),
                    RECEIVER,
                    request.to_bytes(),
                ),
            );
            flood_requests += 1;
            next_flood += flood_every;
        }
        // The legitimate senders.
        for l in &mut legit {
            if now < l.start {
                continue;
            }
            if l.next_send <= now {
                l.next_send += SEND_EVERY;
                let mut payload = vec![0x40u8; 200];
                payload[21..25].copy_from_slice(&l.next_id.to_be_bytes());
                l.next_id += 1;
                let datagram = Datagram::new(
                    SocketAddr::new(l.engine.control_addr().ip(), 5000),
                    RECEIVER,
                    payload,
                );
                l.engine.start(now); // a no-op after the first time
                l.engine.on_sent(now, &datagram);
                to_proxy.push_back((now + DELAY, datagram));
            }
            if l.engine.poll_timeout().is_some_and(|at| at <= now) {
                l.engine.handle_timeout(now);
            }
            while let Some(datagram) = l.engine.poll_transmit() {
                to_proxy.push_back((now + DELAY, datagram));
            }
            while l.engine.poll_event().is_some() {}
            if l.working_at.is_none() && l.engine.stats().quacks >= WORKING {
                l.working_at = Some(now);
            }
        }
        while to_proxy.front().is_some_and(|(at, _)| *at <= now) {
            let (_, datagram) = to_proxy.pop_front().expect("checked");
            proxy.handle_datagram(now, Interface(0), datagram);
        }
        if proxy.poll_timeout().is_some_and(|at| at <= now) {
            proxy.handle_timeout(now);
        }
        while let Some(transmit) = proxy.poll_transmit(now) {
            let datagram = transmit.datagram;
            if by_ip.contains_key(&datagram.dst.ip()) {
                to_senders.push_back((now + DELAY, datagram));
            } // else forwarded to the receiver, or a reply to a spoofed address
        }
        while to_senders.front().is_some_and(|(at, _)| *at <= now) {
            let (_, datagram) = to_senders.pop_front().expect("checked");
            let i = by_ip[&datagram.dst.ip()];
            legit[i].engine.on_received(now, &datagram);
        }
        now += STEP;
    }
    let succeeded = legit
        .iter()
        .filter(|l| l.working_at.is_some_and(|at| at <= l.start + DEADLINE))
        .count();
    Outcome {
        senders,
        succeeded,
        flood_requests,
        proxy: *proxy.stats(),
    }
}

fn report(label: &str, o: &Outcome) {
    println!(
        "{label}: {}/{} legitimate senders got a working session within {:?} \
         ({:.1}%); {} spoofed requests; proxy {:?}",
        o.succeeded,
        o.senders,
        DEADLINE,
        100.0 * o.succeeded as f64 / o.senders as f64,
        o.flood_requests,
        o.proxy
    );
}

/// Without a flood every sender gets a session (the harness works).
#[test]
fn without_a_flood_every_sender_gets_a_session() {
    let o = run(1, 10, Duration::from_secs(1));
    report("no flood", &o);
    assert_eq!(o.succeeded, o.senders);
}

/// 10 000 spoofed requests per second, more than the table holds within
/// half a second: legitimate senders still get sessions.
#[test]
fn legitimate_senders_get_sessions_under_a_flood() {
    let o = run(10_000, 40, Duration::from_secs(4));
    report("10k requests/s", &o);
    assert!(
        o.succeeded * 100 >= o.senders * 95,
        "{} of {} senders got a session",
        o.succeeded,
        o.senders
    );
}

/// Longer runs for the figures in docs/sidekick.md (`cargo test -p
/// pepkit-sidekick --release --test flood -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement; prints figures"]
fn measure_floods() {
    for rate in [10_000, 100_000] {
        let o = run(rate, 200, Duration::from_secs(20));
        report(&format!("{rate} requests/s"), &o);
    }
}
