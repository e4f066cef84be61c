//! The tunnel server's workers on real sockets (loopback): tunnel clients
//! spread over two workers by their connections' IDs, each connection's
//! packets keep reaching its worker after the client's port changes
//! (a NAT rebinding in a relay), the connection limit holds for the
//! workers together, and a packet for an unknown connection gets what a
//! single engine gives it (a stateless reset, of the worker's own
//! length). Real mode: skips without root (fails with
//! `PEPKIT_REQUIRE_REAL=1`).

mod common;

use bytes::Bytes;
use common::{addr, outer};
use emu::sys::PollFd;
use emu::{HostDriver, RealClock, RunUntil};
use netsim::{Datagram, Interface, Middlebox, Seed, Time};
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tunnel::{
    AllowList, Mode, ServerLimits, ServerShared, ServerWorkers, TunnelClientConfig,
    TunnelClientHost, TunnelServer, TunnelServerConfig, TunnelSettings, UriTemplate, WorkerReport,
    WorkersConfig,
};

/// How long each tunnel client sends.
const SEND_FOR: Duration = Duration::from_millis(3000);

fn server_config(listen: &str, target: SocketAddr, max_connections: usize) -> TunnelServerConfig {
    TunnelServerConfig {
        addr: addr(listen),
        quic: outer(Seed::new(9)),
        shared: ServerShared {
            settings: TunnelSettings::new(Mode::Datagram),
            template: UriTemplate::default(),
            allow: Arc::new(AllowList::default().allow(target.ip(), target.port()..=target.port())),
            sample_interval: None,
            limits: ServerLimits {
                max_connections,
                ..ServerLimits::default()
            },
        },
        first_port: 31_000,
    }
}

fn start(config: TunnelServerConfig, workers: usize) -> ServerWorkers {
    ServerWorkers::start(&WorkersConfig {
        server: config,
        workers,
    })
    .unwrap()
}

/// Tunnel client `i` (on 127.0.0.(20+i)) through `proxy` to `target`,
/// sending a 200-byte probe every millisecond for [`SEND_FOR`].
fn run_client(i: usize, proxy: SocketAddr, target: SocketAddr) {
    let ip = format!("127.0.0.{}", 20 + i);
    let source = netsim::testing::CbrSource::new(
        addr(&format!("{ip}:5000")),
        target,
        200,
        Duration::from_millis(1),
        SEND_FOR.as_millis() as u64,
    );
    let settings = TunnelSettings::new(Mode::Datagram);
    let config = TunnelClientConfig {
        proxy,
        local: addr(&format!("{ip}:5443")),
        targets: vec![target],
        ..common::client_config(Seed::new(100 + i as u64), &settings)
    };
    let client = TunnelClientHost::new(source, config);
    let deadline = Time::ZERO + SEND_FOR + Duration::from_millis(500);
    let stop = AtomicBool::new(false);
    HostDriver::bind(client, &[])
        .unwrap()
        .run(RealClock::start(), RunUntil::Stopped, deadline, &stop)
        .unwrap();
}

/// `n` tunnel clients ([`run_client`]) at once, client `i` through
/// `proxy(i)`, until they are done.
fn run_clients(n: usize, target: SocketAddr, proxy: impl Fn(usize) -> SocketAddr) {
    let clients: Vec<_> = (0..n)
        .map(|i| {
            let proxy = proxy(i);
            std::thread::spawn(move || run_client(i, proxy, target))
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
}

/// A UDP sink on `at` that counts, per source, what arrives before and
/// after `split`, until `stop`.
fn sink(
    at: SocketAddr,
    split: Instant,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<SocketAddr, (u64, u64)>> {
    let socket = UdpSocket::bind(at).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    std::thread::spawn(move || {
        let mut counts: BTreeMap<SocketAddr, (u64, u64)> = BTreeMap::new();
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((_, from)) = socket.recv_from(&mut buf) {
                let entry = counts.entry(from).or_default();
                if Instant::now() < split {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
            }
        }
        counts
    })
}

/// A relay between `clients` front sockets (127.0.0.1:base+i) and the
/// server: each client's packets leave from a back socket of its own,
/// which is replaced by a new one (a new port: a NAT rebinding) at
/// `rebind`; the server's answers go back to the client.
fn relay(
    base: u16,
    clients: usize,
    server: SocketAddr,
    rebind: Instant,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let bind = |at: &str| {
        let socket = UdpSocket::bind(at).unwrap();
        socket.set_nonblocking(true).unwrap();
        socket
    };
    let fronts: Vec<UdpSocket> = (0..clients)
        .map(|i| bind(&format!("127.0.0.1:{}", base + i as u16)))
        .collect();
    std::thread::spawn(move || {
        let mut backs: Vec<UdpSocket> = (0..clients).map(|_| bind("127.0.0.1:0")).collect();
        let mut peers: Vec<Option<SocketAddr>> = vec![None; clients];
        let mut rebound = false;
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if !rebound && Instant::now() >= rebind {
                backs = (0..clients).map(|_| bind("127.0.0.1:0")).collect();
                rebound = true;
            }
            let mut fds: Vec<PollFd> = fronts
                .iter()
                .chain(&backs)
                .map(|s| PollFd::readable(s.as_fd()))
                .collect();
            emu::sys::poll(&mut fds, Some(Duration::from_millis(5))).unwrap();
            for i in 0..clients {
                while let Ok((n, from)) = fronts[i].recv_from(&mut buf) {
                    peers[i] = Some(from);
                    let _ = backs[i].send_to(&buf[..n], server);
                }
                while let Ok((n, _)) = backs[i].recv_from(&mut buf) {
                    if let Some(peer) = peers[i] {
                        let _ = fronts[i].send_to(&buf[..n], peer);
                    }
                }
            }
        }
    })
}

/// Connections each worker served.
fn connections(reports: &[WorkerReport]) -> Vec<usize> {
    reports.iter().map(|r| r.connections.len()).collect()
}

#[test]
fn connections_spread_over_workers_and_stay_after_a_rebinding() {
    if !emu::require_real_or_skip("workers::connections_spread_over_workers") {
        return;
    }
    const CLIENTS: usize = 12;
    let target = addr("127.0.0.2:24611");
    let listen = "127.0.0.1:24610";
    let workers = start(server_config(listen, target, 64), 2);
    let stop = Arc::new(AtomicBool::new(false));
    let rebind = Instant::now() + Duration::from_millis(1500);
    let counts = sink(target, rebind + Duration::from_millis(300), stop.clone());
    let relayed = relay(24620, CLIENTS, addr(listen), rebind, stop.clone());
    run_clients(CLIENTS, target, |i| {
        addr(&format!("127.0.0.1:{}", 24620 + i))
    });
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    relayed.join().unwrap();
    let counts = counts.join().unwrap();
    let reports = workers.stop().unwrap();
    let per_worker = connections(&reports);
    assert_eq!(per_worker.iter().sum::<usize>(), CLIENTS, "{per_worker:?}");
    assert!(per_worker.iter().all(|&n| n > 0), "{per_worker:?}");
    // Every tunnel (a target-facing port each) carried packets before
    // and after its client's port changed.
    assert_eq!(counts.len(), CLIENTS, "{counts:?}");
    for (port, (before, after)) in &counts {
        assert!(*before > 100 && *after > 100, "{port}: {before} {after}");
    }
}

#[test]
fn the_connection_limit_holds_for_the_workers_together() {
    if !emu::require_real_or_skip("workers::the_connection_limit_holds") {
        return;
    }
    const CLIENTS: usize = 8;
    let target = addr("127.0.0.2:24641");
    let listen = "127.0.0.1:24640";
    let workers = start(server_config(listen, target, 3), 2);
    run_clients(CLIENTS, target, |_| addr(listen));
    let reports = workers.stop().unwrap();
    let tunnels: u64 = reports
        .iter()
        .flat_map(|r| &r.connections)
        .map(|s| s.tunnels)
        .sum();
    assert_eq!(connections(&reports).iter().sum::<usize>(), 3);
    assert_eq!(tunnels, 3);
}

/// What an answer to a 1200-byte packet is: a stateless reset (a short
/// header, shorter than what it answers: RFC 9000 §10.3) or not.
fn kind(answer: &[u8]) -> &'static str {
    if answer[0] & 0xc0 == 0x40 && (21..1200).contains(&answer.len()) {
        "stateless reset"
    } else {
        "other"
    }
}

/// What a server sends back for `packet`: the kinds of its answers.
fn answers(socket: &UdpSocket, packet: &[u8], to: SocketAddr) -> Vec<&'static str> {
    socket.send_to(packet, to).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut kinds = Vec::new();
    while let Ok((n, _)) = socket.recv_from(&mut buf) {
        kinds.push(kind(&buf[..n]));
    }
    kinds
}

#[test]
fn a_packet_for_an_unknown_connection_gets_what_one_engine_gives_it() {
    if !emu::require_real_or_skip("workers::a_packet_for_an_unknown_connection") {
        return;
    }
    let target = addr("127.0.0.2:24651");
    let listen = "127.0.0.1:24650";
    let workers = start(server_config(listen, target, 64), 2);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    for first in [0u8, 1, 7] {
        // A short header for a connection ID no worker issued.
        let mut packet = vec![0x40, first, 9, 9, 9, 9, 9, 9, 9];
        packet.resize(1200, 0x5a);
        let mut engine = TunnelServer::new(server_config(listen, target, 64));
        let src = client.local_addr().unwrap();
        let datagram = Datagram::new(src, addr(listen), Bytes::from(packet.clone()));
        engine.handle_datagram(Time::ZERO, Interface(0), datagram);
        let mut want = Vec::new();
        while let Some(transmit) = engine.poll_transmit(Time::ZERO) {
            want.push(kind(&transmit.datagram.payload));
        }
        assert_eq!(want, ["stateless reset"], "{first}");
        assert_eq!(answers(&client, &packet, addr(listen)), want, "{first}");
    }
    workers.stop().unwrap();
}
