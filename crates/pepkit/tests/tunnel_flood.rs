//! `pepkit middle tecc`, the tunnel server, on real sockets under a flood
//! of QUIC Initials: in a network namespace made for the test, a generator
//! sends real client Initials (a ClientHello each, 1200 bytes) to the
//! daemon as fast as it can (its top rate on the machine), each from one
//! of 4,096 source addresses (127.10.0.0/16 on the namespace's loopback),
//! while our tunnel client connects and downloads 2 MB through the daemon.
//! The download completes within [`DOWNLOAD_SECONDS`], and the daemon sends
//! the flood's sources less than it receives from them (Retry). The
//! generator's rate is printed.
//! Real mode: skips without root (fails with `PEPKIT_REQUIRE_REAL=1`).

mod common;

use common::{addr, download, terminate};
use netsim::{Seed, Time};
use quic::{App, EmbeddedEndpoint, QuicConfig, Session};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tunnel::{Mode, TunnelSettings};

/// Sources the flood cycles through.
const SOURCES: u16 = 4096;
/// The flood's rate, Initials a second, unless `PEPKIT_FLOOD_RATE` says
/// (0: as fast as the generator can).
const RATE: u64 = 0;
/// The download's bound: it takes under a second without the flood.
const DOWNLOAD_SECONDS: u64 = 10;

/// A network namespace of the test's own, deleted when dropped.
struct Netns(String);

impl Netns {
    fn new() -> Netns {
        let name = format!("pepkit-flood-{}", std::process::id());
        let ip = |args: &[&str]| {
            let ok = Command::new("ip").args(args).status().unwrap().success();
            assert!(ok, "ip {args:?}");
        };
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A connection that does nothing (its first Initial is all we want).
struct Idle;

impl App for Idle {
    fn drive(&mut self, _session: &mut Session<'_>) {}
    fn is_done(&self) -> bool {
        false
    }
}

/// `n` real client Initials for the server at `proxy`, each with its own
/// destination CID.
fn initials(proxy: SocketAddr, n: usize) -> Vec<Vec<u8>> {
    let config = tunnel::outer_config(QuicConfig::new(Seed::new(7)), 1350);
    (0..n)
        .map(|i| {
            let label = format!("flood/{i}");
            let mut endpoint =
                EmbeddedEndpoint::new(config.clone(), addr("127.0.0.9:6000"), &label);
            endpoint.connect(Time::ZERO, proxy, Idle).unwrap();
            endpoint.poll_transmit(Time::ZERO).unwrap().payload.to_vec()
        })
        .collect()
}

/// What the generator did.
#[derive(Debug)]
struct Flood {
    sent: u64,
    sent_bytes: u64,
    received_bytes: u64,
    seconds: f64,
}

/// Sends the Initials to `proxy` in turn, each from the next source, at
/// `rate` a second (0: as fast as the sockets take them), until `stop`;
/// counts what comes back.
fn flood(proxy: SocketAddr, initials: &[Vec<u8>], rate: u64, stop: &AtomicBool) -> Flood {
    let sockets: Vec<UdpSocket> = (0..SOURCES)
        .map(|i| {
            let [hi, lo] = i.to_be_bytes();
            let socket = UdpSocket::bind((Ipv4Addr::new(127, 10, hi, lo), 40_000)).unwrap();
            socket.set_nonblocking(true).unwrap();
            socket
        })
        .collect();
    let mut out = Flood {
        sent: 0,
        sent_bytes: 0,
        received_bytes: 0,
        seconds: 0.0,
    };
    let mut buf = [0u8; 2048];
    let start = Instant::now();
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let socket = &sockets[i % sockets.len()];
        let initial = &initials[i % initials.len()];
        if socket.send_to(initial, proxy).is_ok() {
            out.sent += 1;
            out.sent_bytes += initial.len() as u64;
        }
        i += 1;
        // Every source's replies, now and then (and at the end).
        if i.is_multiple_of(4096) {
            out.received_bytes += drain(&sockets, &mut buf);
        }
        if rate > 0 && i.is_multiple_of(64) {
            let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    out.received_bytes += drain(&sockets, &mut buf);
    out
}

fn drain(sockets: &[UdpSocket], buf: &mut [u8]) -> u64 {
    let mut bytes = 0;
    for socket in sockets {
        while let Ok((n, _)) = socket.recv_from(buf) {
            bytes += n as u64;
        }
    }
    bytes
}

#[test]
fn a_tunnel_client_downloads_while_initials_flood_the_daemon() {
    if !emu::require_real_or_skip("tunnel_flood::a_tunnel_client_downloads_while_initials_flood") {
        return;
    }
    let netns = Netns::new();
    emu::sys::enter_netns(&netns.0).unwrap();
    let listen = "127.0.0.1:24451";
    let proxy = addr(listen);
    let child = Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args([
            "middle",
            "{ kind = \"tecc\", mode = \"mdt\", tunnel_cc = \"none\" }",
        ])
        .args(["--addr", listen, "--allow", "127.0.0.2:4433"])
        .args(["--netns", &netns.0, "--seed", "1", "--seconds", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pool = Arc::new(initials(proxy, 4096));
    std::thread::sleep(Duration::from_millis(300));
    // Initials a second; 0 floods as fast as the generator can.
    let rate = std::env::var("PEPKIT_FLOOD_RATE")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(RATE);
    let stop = Arc::new(AtomicBool::new(false));
    let generator = {
        let (stop, pool, name) = (stop.clone(), pool.clone(), netns.0.clone());
        std::thread::spawn(move || {
            emu::sys::enter_netns(&name).unwrap();
            flood(proxy, &pool, rate, &stop)
        })
    };
    // The flood is under way (and past the Retry threshold) first.
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (report, state) = download(
        proxy,
        addr("127.0.0.2:4433"),
        "127.0.0.3",
        TunnelSettings::new(Mode::Datagram),
        DOWNLOAD_SECONDS,
    );
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let flood = generator.join().unwrap();
    let (status, counters) = terminate(child);
    let rate = flood.sent as f64 / flood.seconds;
    let reflection = flood.received_bytes as f64 / flood.sent_bytes as f64;
    println!(
        "flood: {} Initials in {:.1} s ({rate:.0}/s), reflection {reflection:.3}; \
         download {:?} in {took:?}; daemon {status}",
        flood.sent,
        flood.seconds,
        report.as_ref().map(|r| r.bytes)
    );
    let report = report.unwrap_or_else(|| panic!("no transfer during the flood ({state:?})"));
    assert_eq!(report.bytes, 2_000_000);
    assert!(reflection <= 1.0, "reflection {reflection}");
    assert!(status.success(), "{status}");
    let counters: serde_json::Value = serde_json::from_str(counters.trim()).unwrap();
    assert_eq!(counters["system"]["tunnels"], 1, "{counters}");
}
