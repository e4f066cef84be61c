//! A toy middlebox in the path of a real testbed (client — hop — middle —
//! hop — server), on the generic driver: it forwards, drops and delays UDP
//! datagrams as it says, TTLs are decremented, what is not UDP passes
//! unchanged, and datagrams to its own socket address reach it without an
//! ICMP port unreachable.
//!
//! Needs root and `ip netns`; skips (and says so) without them, or fails
//! with `PEPKIT_REQUIRE_REAL=1`. The namespaces are removed when the
//! testbed drops, also when an assertion fails.

use emu::driver::{MiddleStats, Placement};
use emu::sys::{PacketSocket, RecvBatch};
use emu::{RealClock, Testbed, TestbedSpec};
use netsim::{BufferLimit, Datagram, HopConfig, Interface, LinkConfig, Middlebox, Rate, Seed};
use netsim::{Time, Transmit};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const OWN: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 1);
/// The toy's own socket address (bound by the driver).
const CONTROL: SocketAddrV4 = SocketAddrV4::new(OWN, 1234);
/// A port of the node's address nobody owns: the kernel answers it.
const UNOWNED: SocketAddrV4 = SocketAddrV4::new(OWN, 1235);
/// Forwarded at once, by destination.
const PLAIN: u16 = 7001;
/// Every second datagram dropped.
const DROPPY: u16 = 7002;
/// Held for [`DELAY`], out of an explicit interface.
const DELAYED: u16 = 7003;
/// Sent with TTL 1: expires at the middle node.
const EXPIRING: u16 = 7004;
const TCP_PORT: u16 = 7100;
const DELAY: Duration = Duration::from_millis(50);
const COUNT: u32 = 20;

/// The toy: forwards everything not for the node, but drops every second
/// datagram to [`DROPPY`] and delays those to [`DELAYED`].
#[derive(Default)]
struct Toy {
    out: VecDeque<Transmit>,
    droppy_seen: u64,
    /// Arrival interface, destination and TTL of every datagram.
    seen: Vec<(Interface, SocketAddr, u8)>,
    /// The time the driver gave with each.
    times: Vec<Time>,
    /// Datagrams for the node itself.
    for_node: Vec<Datagram>,
}

impl Middlebox for Toy {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        self.seen.push((from, datagram.dst, datagram.ttl));
        self.times.push(now);
        if datagram.dst.ip() == OWN {
            self.for_node.push(datagram);
            return;
        }
        match datagram.dst.port() {
            DROPPY => {
                self.droppy_seen += 1;
                if self.droppy_seen.is_multiple_of(2) {
                    return;
                }
                self.out.push_back(Transmit::at(now, datagram));
            }
            DELAYED => {
                let transmit = Transmit::at(now + DELAY, datagram).via(Interface(1));
                self.out.push_back(transmit);
            }
            _ => self.out.push_back(Transmit::at(now, datagram)),
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

fn hop() -> HopConfig {
    HopConfig::symmetric(
        LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
            .with_buffer(BufferLimit::Packets(1000)),
    )
}

/// What the server saw: per port, (sequence number, one-way delay).
type Arrivals = Vec<(u16, u32, Duration)>;

/// Receives on the UDP ports until `stop`, stamping each arrival.
fn serve_udp(sockets: &[UdpSocket], clock: RealClock, stop: &AtomicBool) -> io::Result<Arrivals> {
    let mut arrivals = Vec::new();
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        let mut idle = true;
        for socket in sockets {
            while let Ok(len) = socket.recv(&mut buf) {
                idle = false;
                let now = clock.now();
                assert_eq!(len, 12);
                let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                let sent = Time::from_nanos(u64::from_be_bytes(buf[4..12].try_into().unwrap()));
                arrivals.push((socket.local_addr()?.port(), seq, now - sent));
            }
        }
        if idle {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(arrivals)
}

/// Sends [`COUNT`] stamped datagrams to each test port, 3 with TTL 1, and
/// some to the node's own address; returns what the sends to the node's
/// address saw (owned port, unowned port): `Ok` or the error.
fn client_udp(clock: RealClock) -> io::Result<(io::Result<()>, io::Result<()>)> {
    let socket = UdpSocket::bind(SocketAddrV4::new(CLIENT, 0))?;
    let stamp = |seq: u32| {
        let mut payload = seq.to_be_bytes().to_vec();
        payload.extend_from_slice(&clock.now().as_nanos().to_be_bytes());
        payload
    };
    for seq in 0..COUNT {
        for port in [PLAIN, DROPPY, DELAYED] {
            socket.send_to(&stamp(seq), SocketAddrV4::new(SERVER, port))?;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    socket.set_ttl(1)?;
    for seq in 0..3 {
        socket.send_to(&stamp(seq), SocketAddrV4::new(SERVER, EXPIRING))?;
    }
    // To the node itself: a connected socket reports an ICMP port
    // unreachable as ECONNREFUSED on a later call.
    let to_node = |addr: SocketAddrV4| -> io::Result<io::Result<()>> {
        let socket = UdpSocket::bind(SocketAddrV4::new(CLIENT, 0))?;
        socket.connect(addr)?;
        socket.set_read_timeout(Some(Duration::from_millis(100)))?;
        for _ in 0..3 {
            if let Err(e) = socket.send(b"hello, node") {
                return Ok(Err(e));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(match socket.recv(&mut [0u8; 16]) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
            Ok(_) => Err(io::Error::other("an answer from the node")),
        })
    };
    Ok((to_node(CONTROL)?, to_node(UNOWNED)?))
}

/// A TCP exchange through the middle node: 64 KiB up, their count back.
fn client_tcp() -> io::Result<u64> {
    let addr = SocketAddr::from((SERVER, TCP_PORT));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    stream.write_all(&[7u8; 65_536])?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut count = [0u8; 8];
    stream.read_exact(&mut count)?;
    Ok(u64::from_be_bytes(count))
}

/// Serves one [`client_tcp`] (waits for it at most 10 s).
fn serve_tcp(listener: TcpListener) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(io::Error::other("no TCP connection"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    };
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    let mut received = Vec::new();
    stream.read_to_end(&mut received)?;
    stream.write_all(&(received.len() as u64).to_be_bytes())
}

/// The TTLs of the UDP frames to [`PLAIN`] a packet socket saw.
fn wire_ttls(socket: &PacketSocket) -> io::Result<Vec<u8>> {
    let mut batch = RecvBatch::new(64, 2048);
    let mut ttls = Vec::new();
    while socket.recv_batch(&mut batch)? > 0 {
        for (frame, _) in batch.frames() {
            if let Ok(emu::driver::frame::Frame::Udp(udp)) = emu::driver::frame::parse_frame(frame)
                && udp.dst.port() == PLAIN
            {
                ttls.push(udp.ttl);
            }
        }
    }
    Ok(ttls)
}

fn forwarding(testbed: &Testbed) -> String {
    let middle = testbed.middle(0).unwrap();
    emu::sys::command::in_netns(
        &middle.netns,
        "sysctl",
        &["-n", "net.ipv4.conf.eth0.forwarding"],
    )
    .unwrap()
    .trim()
    .to_string()
}

fn median(mut delays: Vec<Duration>) -> Duration {
    delays.sort();
    delays[delays.len() / 2]
}

/// What crossed the middle node.
struct Traffic {
    /// What the server's UDP sockets received.
    arrivals: Arrivals,
    /// The TTLs of the datagrams to [`PLAIN`] on the server's wire.
    ttls: Vec<u8>,
    /// Sends to the node's own address: to the engine's port, to another.
    to_control: io::Result<()>,
    to_unowned: io::Result<()>,
    /// The bytes the TCP server counted, as the client read them.
    tcp: u64,
}

/// Runs the server (UDP ports, a TCP listener, a packet socket on its
/// wire) and the client's sends through the middle node.
fn exchange(testbed: &Testbed) -> Traffic {
    let clock = testbed.clock();
    let server_stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = {
        let stop = server_stop.clone();
        testbed
            .spawn_in(testbed.server(), "server", move || -> io::Result<_> {
                let sniffer = PacketSocket::bind("eth0", 4 << 20)?;
                let listener = TcpListener::bind(SocketAddrV4::new(SERVER, TCP_PORT))?;
                let tcp = std::thread::spawn(move || serve_tcp(listener));
                // Bound before the client is told to send: a datagram to a
                // port nobody has bound yet is dropped.
                let sockets: Vec<UdpSocket> = [PLAIN, DROPPY, DELAYED, EXPIRING]
                    .iter()
                    .map(|&port| UdpSocket::bind(SocketAddrV4::new(SERVER, port)))
                    .collect::<io::Result<_>>()?;
                for socket in &sockets {
                    socket.set_nonblocking(true)?;
                }
                let _ = ready_tx.send(());
                let arrivals = serve_udp(&sockets, clock, &stop)?;
                let tcp = tcp.join().expect("the TCP server thread");
                Ok((arrivals, wire_ttls(&sniffer)?, tcp))
            })
            .unwrap()
    };
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the server is ready");
    let (udp, tcp) = testbed
        .spawn_in(testbed.client(), "client", move || {
            (client_udp(clock), client_tcp())
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    let (to_control, to_unowned) = udp.expect("the client sends");
    let tcp = tcp.expect("TCP passes through the middle node");
    std::thread::sleep(DELAY + Duration::from_millis(100));
    server_stop.store(true, Ordering::Relaxed);
    let (arrivals, ttls, served) = server.join().unwrap().unwrap().expect("the server runs");
    served.expect("the TCP server");
    Traffic {
        arrivals,
        ttls,
        to_control,
        to_unowned,
        tcp,
    }
}

/// The datagrams to [`DELAYED`] were held 50 ms (out of interface 1).
fn check_delays(traffic: &Traffic, stats: &MiddleStats) {
    let delays = |port: u16| -> Vec<Duration> {
        traffic
            .arrivals
            .iter()
            .filter(|a| a.0 == port)
            .map(|a| a.2)
            .collect()
    };
    let plain = median(delays(PLAIN));
    let delayed = delays(DELAYED);
    assert_eq!(delayed.len(), COUNT as usize);
    let extra = median(delayed.clone()) - plain;
    eprintln!(
        "one-way delay: plain median {plain:?}, delayed median {:?} (min {:?}): +{extra:?}",
        median(delayed.clone()),
        delayed.iter().min().unwrap()
    );
    assert!(delayed.iter().all(|&d| d >= DELAY), "{delayed:?}");
    assert!(
        extra >= DELAY - Duration::from_millis(1) && extra <= DELAY + Duration::from_millis(15),
        "{extra:?}"
    );
    assert_eq!(stats.held, u64::from(COUNT));
    assert_eq!(stats.late.frames, u64::from(COUNT));
}

/// The node's own address: both ports reach the engine; only the one the
/// engine owns is spared the kernel's port unreachable.
fn check_own_address(traffic: &Traffic, toy: &Toy, stats: &MiddleStats) {
    assert!(traffic.to_control.is_ok(), "{:?}", traffic.to_control);
    assert_eq!(
        traffic.to_unowned.as_ref().map_err(io::Error::kind).err(),
        Some(io::ErrorKind::ConnectionRefused),
        "the control case: the kernel answers a port nobody bound"
    );
    let to = |addr: SocketAddrV4| {
        toy.for_node
            .iter()
            .filter(|d| d.dst == SocketAddr::V4(addr))
            .count()
    };
    // (The unowned port's sends stop at the first refusal.)
    assert_eq!(to(CONTROL), 3);
    assert!(to(UNOWNED) >= 1);
    assert_eq!(stats.local_datagrams, 3, "the bound socket's copies");
}

#[test]
fn a_toy_middlebox_in_path_forwards_drops_and_delays() {
    if !emu::require_real_or_skip("a_toy_middlebox_in_path_forwards_drops_and_delays") {
        return;
    }
    let clock = RealClock::start();
    let spec = TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![hop(), hop()],
        extra: vec![(0, OWN)],
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(3),
    };
    let testbed = Testbed::build(&spec, clock).expect("the testbed builds");
    assert_eq!(
        forwarding(&testbed),
        "1",
        "the testbed's middle node forwards"
    );
    let routes = testbed.routes(0).expect("a middle node");
    let stop = Arc::new(AtomicBool::new(false));
    let middle = testbed
        .run_middlebox(
            0,
            Placement::InPath { routes },
            vec![CONTROL],
            Toy::default(),
            stop.clone(),
        )
        .expect("the driver opens");
    assert_eq!(forwarding(&testbed), "0", "in path, the kernel does not");

    let traffic = exchange(&testbed);
    stop.store(true, Ordering::Relaxed);
    let run = middle.join().expect("the driver runs");
    assert!(run.error.is_none(), "{:?}", run.error);
    let (toy, stats) = (run.engine, run.stats);
    eprintln!("driver: {}", serde_json::to_string(&stats).unwrap());
    assert_eq!(
        forwarding(&testbed),
        "1",
        "the kernel forwards again afterwards"
    );

    // Forwarded by destination: all of them, TTL 64 - 1 on the wire.
    let on = |port: u16| -> Vec<&(u16, u32, Duration)> {
        traffic.arrivals.iter().filter(|a| a.0 == port).collect()
    };
    assert_eq!(on(PLAIN).len(), COUNT as usize, "{:?}", traffic.arrivals);
    assert_eq!(
        traffic.ttls,
        vec![63; COUNT as usize],
        "TTLs on the server's wire"
    );
    // Every second one dropped.
    let droppy: Vec<u32> = on(DROPPY).iter().map(|a| a.1).collect();
    assert_eq!(droppy, (0..COUNT).step_by(2).collect::<Vec<_>>());
    check_delays(&traffic, &stats);
    // Every frame came with its kernel arrival stamp, and the engine's
    // times never went back.
    assert_eq!(stats.unstamped, 0);
    assert!(toy.times.is_sorted(), "{:?}", toy.times);
    // TTL 1 expires here.
    assert!(on(EXPIRING).is_empty());
    assert_eq!(stats.ttl_expired, 3);
    // The engine saw every datagram on interface 0, TTL decremented.
    let to_server = toy.seen.iter().filter(|(_, dst, _)| dst.ip() == SERVER);
    assert_eq!(to_server.clone().count(), 3 * COUNT as usize);
    assert!(
        to_server
            .clone()
            .all(|&(from, _, ttl)| from == Interface(0) && ttl == 63)
    );
    check_own_address(&traffic, &toy, &stats);

    // TCP passed through unchanged (in both directions).
    assert_eq!(traffic.tcp, 65_536);
    assert!(stats.passed_through > 40, "{stats:?}");
    assert_eq!(stats.malformed_frames, 0, "{stats:?}");
    assert_eq!(stats.send_errors, 0, "{stats:?}");
    assert_eq!(stats.unroutable, 0, "{stats:?}");
}
