//! PEMI under attack, in real mode: our QUIC client and server in their
//! namespaces, `pepkit middle pemi` on the router between them.
//!
//! - A receiver that withholds most of its replies (as an attacker who
//!   drops them after PEMI would) cannot make PEMI send more than 1.1× the
//!   sender's traffic toward it: bytes the client received over bytes the
//!   server sent, and PEMI's own (protected + retransmitted) / protected.
//! - A flood of spoofed client Initials (each from its own address, sent
//!   from the client's namespace through the router) does not push a real
//!   connection out of protection: the legitimate download keeps its
//!   goodput and PEMI keeps repairing its losses. A million of them, with
//!   the user-space forwarder as the control, is a measurement run on
//!   demand (`a_million_spoofed_initials_measured`).
//!
//! Needs root and network namespaces; skips with the reason otherwise
//! (fails with `PEPKIT_REQUIRE_REAL=1`). One test at a time.

mod common;

use common::middle::{Daemon, Download, router};
use emu::{RealClock, Testbed, TestbedSpec};
use netsim::{
    BufferLimit, Datagram, HopConfig, Host, LinkConfig, LossModel, Probability, Rate, Seed, Time,
};
use quic::{BulkClient, QuicClient, QuicConfig};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);

static SERIAL: Mutex<()> = Mutex::new(());

/// Table 4's path: 1 ms at 100 Mbit/s, then 25 ms at 10 Mbit/s, with
/// `loss` toward the client on its link. With `fast_up`, the directions
/// toward the server have no rate limit (the flood shares no bottleneck
/// with the download's replies: what it tests is PEMI's tables, not the
/// link's capacity).
fn testbed(loss: f64, fast_up: bool) -> Testbed {
    let buffer = BufferLimit::Packets(1000);
    let mut near_down =
        LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100)).with_buffer(buffer);
    if loss > 0.0 {
        near_down = near_down.with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
    }
    let far_down =
        LinkConfig::constant(Duration::from_millis(25), Rate::from_mbps(10)).with_buffer(buffer);
    let up = |delay: u64, rate: u64| {
        if fast_up {
            LinkConfig::delay_only(Duration::from_millis(delay))
                .with_buffer(BufferLimit::Packets(10_000))
        } else {
            LinkConfig::constant(Duration::from_millis(delay), Rate::from_mbps(rate))
                .with_buffer(buffer)
        }
    };
    let spec = TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![
            HopConfig::new(up(1, 100), near_down),
            HopConfig::new(up(25, 10), far_down),
        ],
        extra: Vec::new(),
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(11),
    };
    Testbed::build(&spec, RealClock::start()).expect("testbed")
}

/// A client that sends only one in `cycle` of its datagrams once it has
/// sent `after` (its handshake and the first replies go through).
struct Withholding {
    inner: QuicClient<BulkClient>,
    after: u64,
    cycle: u64,
    sent: u64,
    withheld: u64,
}

impl Host for Withholding {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.inner.handle_datagram(now, datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.inner.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        loop {
            let datagram = self.inner.poll_transmit(now)?;
            self.sent += 1;
            if self.sent <= self.after || self.sent.is_multiple_of(self.cycle) {
                return Some(datagram);
            }
            self.withheld += 1;
        }
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.inner.poll_timeout()
    }

    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

/// A download of `size` bytes by `client` (wrapped by `wrap`, on UDP port
/// `port`) from our server, within `limit`.
fn download<H: Host + Send + 'static>(
    testbed: &Testbed,
    port: u16,
    config: QuicConfig,
    size: u64,
    limit: Duration,
    wrap: impl FnOnce(QuicClient<BulkClient>) -> H,
    inner: impl FnOnce(&H) -> &QuicClient<BulkClient>,
) -> Download<H> {
    let ends = (
        SocketAddr::new(CLIENT.into(), port),
        SocketAddr::new(SERVER.into(), 4433),
    );
    common::middle::download(testbed, ends, config, size, limit, wrap, inner)
}

/// ACK every packet, as Table 4's PEMI rows: the most replies to withhold.
fn ack_every_packet() -> QuicConfig {
    let acks = quic::AckFrequency {
        threshold: 0,
        max_delay: None,
    };
    QuicConfig::new(Seed::new(1)).with_ack_frequency(acks)
}

fn counter(stats: &serde_json::Value, name: &str) -> u64 {
    stats[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name} in {stats}"))
}

#[test]
fn withheld_replies_cannot_make_pemi_send_more_than_1_1x() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("withheld_replies_cannot_make_pemi_send_more_than_1_1x") {
        return;
    }
    let testbed = testbed(0.0, false);
    let daemon = Daemon::start(
        &router(&testbed),
        &["pemi", "--iface", "eth0", "--iface", "eth1"],
    );
    // After 40 datagrams, three replies in four are withheld.
    let run = download(
        &testbed,
        5000,
        ack_every_packet(),
        3_000_000,
        Duration::from_secs(30),
        |inner| Withholding {
            inner,
            after: 40,
            cycle: 4,
            sent: 0,
            withheld: 0,
        },
        |host| &host.inner,
    );
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    let system = &stopped.stats["system"];
    let client_rx = run
        .client
        .inner
        .record()
        .expect("the client connected")
        .stats
        .udp_rx_bytes;
    let (protected, retransmissions) = (
        counter(system, "protected"),
        counter(system, "retransmissions"),
    );
    let bytes_ratio = client_rx as f64 / run.server_tx_bytes as f64;
    let packets_ratio = (protected + retransmissions) as f64 / protected as f64;
    eprintln!(
        "withheld {} of {} replies; server sent {} B, client received {} B ({bytes_ratio:.4}x); \
         PEMI protected {protected}, retransmitted {retransmissions} ({packets_ratio:.4}x), \
         inferred lost {}, withheld by the cap {}, backed off {}; goodput {:?} Mbit/s",
        run.client.withheld,
        run.client.sent,
        run.server_tx_bytes,
        client_rx,
        counter(system, "inferred_lost"),
        counter(system, "withheld_cap"),
        counter(system, "backoffs"),
        run.goodput_mbps(),
    );
    assert!(run.client.withheld > 1000, "too few replies withheld");
    assert!(protected > 1000, "{system}");
    // Whether PEMI infers losses from the withheld replies depends on the
    // flowlets the machine's timing makes (a bulk download's flowlets of
    // over 100 packets are not protected): the bound must hold either way.
    assert!(bytes_ratio <= 1.1, "{bytes_ratio}");
    assert!(packets_ratio <= 1.1, "{packets_ratio}");
}

/// A client Initial (long header, version 1, padded to 1200 bytes, as PEMI
/// tracks only padded ones) from spoofed address number `k`.
fn spoofed_initial(k: u32) -> Vec<u8> {
    let from = SocketAddr::new(Ipv4Addr::from(0x0b00_0000 + k).into(), 40_000);
    // A port the server does not listen on: the flood loads PEMI, not it.
    let to = SocketAddr::new(SERVER.into(), 4434);
    let mut payload = vec![0xc0, 0, 0, 0, 1, 8];
    payload.extend_from_slice(&u64::from(k).to_be_bytes());
    payload.push(8);
    payload.extend_from_slice(&[0xbb; 8]);
    payload.push(0);
    payload.extend_from_slice(&(0x4000u16 | 1000).to_be_bytes());
    payload.resize(1200, 0x11);
    emu::driver::frame::ipv4_packet(&Datagram::new(from, to, payload)).expect("a packet")
}

/// Sends spoofed Initials from the client's namespace (a raw socket) at
/// about `rate` per second until `stop` or `most` sent; counts them in
/// `sent`.
fn flood(
    testbed: &Testbed,
    rate: u64,
    most: u32,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<std::io::Result<std::io::Result<()>>> {
    testbed
        .spawn_in(testbed.client(), "spoofer", move || {
            use socket2::{Domain, Protocol, Socket, Type};
            let socket = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255)))?;
            let to: SocketAddr = SocketAddr::new(SERVER.into(), 0);
            let start = Instant::now();
            for k in 0..most {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // Paced in bursts of 100.
                if k.is_multiple_of(100) {
                    let due = Duration::from_secs_f64(f64::from(k) / rate as f64);
                    if let Some(wait) = due.checked_sub(start.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
                if socket.send_to(&spoofed_initial(k), &to.into()).is_ok() {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })
        .expect("the spoofer")
}

/// What one download under a flood gave: goodput (if it completed), the
/// Initials sent and the daemon's counters.
struct Flooded {
    goodput_mbps: Option<f64>,
    sent: u64,
    system: serde_json::Value,
}

/// A download of `size` through the daemon `middle`, with `most` spoofed
/// Initials at `rate` per second from 1.5 s in (once the connection is
/// protected) until it ends.
fn flooded_download(testbed: &Testbed, middle: &str, size: u64, rate: u64, most: u32) -> Flooded {
    let daemon = Daemon::start(
        &router(testbed),
        &[middle, "--iface", "eth0", "--iface", "eth1"],
    );
    let (stop, sent) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let (spoofer, run) = std::thread::scope(|scope| {
        let (stop, sent) = (stop.clone(), sent.clone());
        let delayed = scope.spawn(move || {
            (most > 0).then(|| {
                std::thread::sleep(Duration::from_millis(1500));
                flood(testbed, rate, most, stop, sent)
            })
        });
        let run = download(
            testbed,
            5000,
            ack_every_packet(),
            size,
            Duration::from_secs(30),
            |c| c,
            |c| c,
        );
        (delayed.join().unwrap(), run)
    });
    stop.store(true, Ordering::Relaxed);
    if let Some(spoofer) = spoofer {
        spoofer
            .join()
            .unwrap()
            .and_then(|sent| sent)
            .expect("the spoofer ran");
    }
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    Flooded {
        goodput_mbps: run.goodput_mbps(),
        sent: sent.load(Ordering::Relaxed),
        system: stopped.stats["system"].clone(),
    }
}

fn describe(name: &str, run: &Flooded) -> String {
    let count = |field| run.system[field].as_u64().unwrap_or(0);
    format!(
        "{name}: {} spoofed Initials, goodput {:?} Mbit/s, retransmissions {}, connections {}, \
         handshakes {}, handshakes evicted {}, table full {}, tracked at the end {}",
        run.sent,
        run.goodput_mbps,
        count("retransmissions"),
        count("connections"),
        count("handshakes"),
        count("handshakes_evicted"),
        count("table_full"),
        count("tracked"),
    )
}

#[test]
fn spoofed_initials_do_not_push_a_real_connection_out_of_protection() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip(
        "spoofed_initials_do_not_push_a_real_connection_out_of_protection",
    ) {
        return;
    }
    let testbed = testbed(0.01, true);
    // 4 MB at 10 Mbit/s: some 4 s; 10,000 Initials a second overflow the
    // handshake table (16,384) within the download.
    let alone = flooded_download(&testbed, "pemi", 4_000_000, 0, 0);
    let during = flooded_download(&testbed, "pemi", 4_000_000, 10_000, 200_000);
    eprintln!(
        "{}\n{}",
        describe("alone", &alone),
        describe("during", &during)
    );
    let (a, b) = (&alone.system, &during.system);
    let before = alone.goodput_mbps.expect("the download alone completes");
    let flooded = during
        .goodput_mbps
        .expect("the download during the flood completes");
    // The flood reached PEMI and overflowed its handshake table.
    assert!(during.sent > 20_000, "the spoofer sent {}", during.sent);
    assert!(counter(b, "connections") > 20_000, "{b}");
    assert!(counter(b, "handshakes_evicted") > 0, "{b}");
    assert!(counter(b, "tracked") <= 16_385, "{b}");
    // The real connection stayed protected and kept its goodput.
    assert_eq!(counter(b, "handshakes"), 1, "{b}");
    assert!(
        counter(b, "retransmissions") * 2 >= counter(a, "retransmissions"),
        "{a}\n{b}"
    );
    // One download each at 1% loss on a shared machine: alone against
    // flooded measured 2.99 against 4.59 and 7.42 against 6.08 Mbit/s,
    // so the bound is half, not parity.
    assert!(flooded >= 0.5 * before, "{flooded} vs {before} Mbit/s");
}

/// A measurement, not run by default (it takes about five minutes): a
/// million spoofed Initials at 10,000 a second (a rate the 2-core test
/// machine sustains with the download beside it) against one PEMI daemon,
/// with 4 MB downloads one after another, three before the flood and as
/// many as fit while it runs, each a new connection on a port of its own;
/// then the same through the user-space forwarder (`forward`), the control
/// for what the flood costs the machine rather than PEMI. Run alone:
/// `cargo test -p pepkit --test pemi_attacks million -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: run alone with --ignored --nocapture"]
fn a_million_spoofed_initials_measured() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("a_million_spoofed_initials_measured") {
        return;
    }
    let testbed = testbed(0.01, true);
    let median = |runs: &[Option<f64>]| {
        let mut done: Vec<f64> = runs.iter().flatten().copied().collect();
        done.sort_by(f64::total_cmp);
        done.get(done.len() / 2).copied().unwrap_or(0.0)
    };
    for middle in ["pemi", "forward"] {
        let (alone, during, system) = million(&testbed, middle);
        eprintln!(
            "{middle}: alone {alone:?} Mbit/s (median {}), during {during:?} Mbit/s (median {})\n\
             {system}",
            median(&alone),
            median(&during)
        );
        if middle == "pemi" {
            // Every download completed, each a connection PEMI protected
            // and kept beside the handshake table's 16,384.
            assert!(alone.iter().chain(&during).all(Option::is_some));
            let downloads = (alone.len() + during.len()) as u64;
            assert_eq!(counter(&system, "handshakes"), downloads, "{system}");
            assert!(
                counter(&system, "tracked") <= 16_384 + downloads,
                "{system}"
            );
            assert!(counter(&system, "handshakes_evicted") > 900_000, "{system}");
            assert!(median(&during) >= 0.5 * median(&alone));
        }
    }
}

/// The goodputs of 4 MB downloads through `middle` before and during a
/// million spoofed Initials at 10,000 a second, and the daemon's counters.
fn million(
    testbed: &Testbed,
    middle: &str,
) -> (Vec<Option<f64>>, Vec<Option<f64>>, serde_json::Value) {
    const MILLION: u32 = 1_000_000;
    let daemon = Daemon::start(
        &router(testbed),
        &[middle, "--iface", "eth0", "--iface", "eth1"],
    );
    let mut port = 5000;
    let mut goodput = || {
        port += 1;
        let limit = Duration::from_secs(30);
        let run = download(
            testbed,
            port,
            ack_every_packet(),
            4_000_000,
            limit,
            |c| c,
            |c| c,
        );
        run.goodput_mbps()
    };
    let alone: Vec<Option<f64>> = (0..3).map(|_| goodput()).collect();
    let (stop, sent) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let started = Instant::now();
    let spoofer = flood(testbed, 10_000, MILLION, stop, sent.clone());
    let mut during = Vec::new();
    while !spoofer.is_finished() {
        during.push(goodput());
    }
    spoofer
        .join()
        .unwrap()
        .and_then(|sent| sent)
        .expect("the spoofer ran");
    let sent = sent.load(Ordering::Relaxed);
    eprintln!(
        "{middle}: {sent} spoofed Initials in {:?}",
        started.elapsed()
    );
    assert_eq!(sent, u64::from(MILLION));
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    (alone, during, stopped.stats["system"].clone())
}
