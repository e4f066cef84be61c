//! Interoperability with masque-go v0.4.0 (peers/masque-go), in datagram
//! mode, on loopback sockets:
//!
//! * masque-go's client, through `pepkit middle tecc` (the tunnel server
//!   in datagram mode), downloads 2 MB
//!   from the quic-go bulk server (peers/quic-go);
//! * our tunnel client (beside our QUIC client) downloads 2 MB from our
//!   QUIC server through masque-go's proxy, which presents pepkit's test
//!   certificate (our clients pin it).
//!
//! masque-go ignores capsules, so the stream modes and TECC's feedback are
//! tested between our own ends (`tunnel_server.rs`, the simulator). Real
//! mode: skips without root or without the peers (scripts/setup builds
//! them); fails instead with `PEPKIT_REQUIRE_REAL=1`.

mod common;

use common::{addr, download, terminate, tunnel_client};
use emu::{HostDriver, RealClock, RunUntil};
use netsim::{Seed, Time};
use quic::QuicConfig;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tunnel::{Mode, TunnelSettings};

const TEMPLATE_PATH: &str = "/.well-known/masque/udp/{target_host}/{target_port}/";

fn peer(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/peers")
        .join(name)
}

fn runnable() -> Result<(), String> {
    emu::available().map_err(|reason| format!("real mode {reason}"))?;
    for name in ["masquego", "quicgo-bulk"] {
        if !peer(name).exists() {
            return Err(format!("{name} is not built (scripts/setup builds it)"));
        }
    }
    Ok(())
}

fn spawn(program: PathBuf, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// pepkit's test certificate and key as PEM files in `dir`, for
/// masque-go's proxy (our clients pin that certificate).
fn certificate_files(dir: &std::path::Path) -> (String, String) {
    let cert = quic::TestCertificate::new();
    let (cert_file, key_file) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_file, pem("CERTIFICATE", cert.cert_der())).unwrap();
    std::fs::write(&key_file, pem("PRIVATE KEY", cert.key_pkcs8())).unwrap();
    let text = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    (text(cert_file), text(key_file))
}

/// masque-go's proxy at `listen`.
fn masque_go_proxy(listen: &str, dir: &std::path::Path) -> Child {
    let (cert, key) = certificate_files(dir);
    let template = format!("https://{listen}{TEMPLATE_PATH}");
    let args = [
        "proxy",
        "--listen",
        listen,
        "--template",
        &template,
        "--cert",
        &cert,
        "--key",
        &key,
    ];
    spawn(peer("masquego"), &args)
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

#[test]
fn masque_go_client_through_our_tunnel_server() {
    if !emu::require_or_skip("masque-go client through pepkit middle tecc", runnable()) {
        return;
    }
    let server = spawn(
        peer("quicgo-bulk"),
        &["server", "--listen", "127.0.0.2:4443"],
    );
    let proxy = spawn(
        PathBuf::from(env!("CARGO_BIN_EXE_pepkit")),
        &[
            "middle",
            "{ kind = \"tecc\", mode = \"mdt\", tunnel_cc = \"none\" }",
            "--addr",
            "127.0.0.1:24451",
            "--allow",
            "127.0.0.2:4443",
            "--seed",
            "1",
            "--seconds",
            "60",
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    let template = format!("https://127.0.0.1:24451{TEMPLATE_PATH}");
    let output = Command::new(peer("masquego"))
        .args([
            "client",
            "--template",
            &template,
            "--target",
            "127.0.0.2:4443",
        ])
        .args(["--size", "2000000", "--timeout", "20"])
        .output()
        .unwrap();
    let (_, counters) = terminate(proxy);
    terminate(server);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("\"bytes\":2000000"),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(counters.contains("\"tunnels\":1"), "{counters}");
}

#[test]
fn our_tunnel_client_through_masque_go_proxy() {
    if !emu::require_or_skip("pepkit tunnel client through masque-go's proxy", runnable()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let proxy = masque_go_proxy("127.0.0.1:24452", dir.path());
    std::thread::sleep(Duration::from_millis(500));
    let target = addr("127.0.0.2:4444");
    let settings = TunnelSettings::new(Mode::Datagram);
    let (report, state) = download(addr("127.0.0.1:24452"), target, "127.0.0.3", settings, 20);
    terminate(proxy);
    let report = report.unwrap_or_else(|| panic!("no transfer: tunnel {state:?}"));
    assert_eq!(report.bytes, 2_000_000);
}

/// CPU seconds a process (`/proc/PID`) or the test itself (`self`) used
/// so far (utime + stime, every thread).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat (utime, stime), counted after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// The machine's load averages (`/proc/loadavg`'s first three fields).
fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The kernel's count of UDP datagrams dropped because a socket's
/// receive buffer was full (`/proc/net/snmp`, `Udp: RcvbufErrors`; this
/// network namespace).
fn receive_buffer_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == "RcvbufErrors")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0)
}

/// One proxy's figures in one round.
#[derive(Clone, Debug)]
struct Capacity {
    name: String,
    sent: u64,
    delivered: u64,
    seconds: f64,
    /// The proxy's CPU seconds.
    cpu: f64,
    /// The generator's (the test process's: the tunnel client and the
    /// sink) CPU seconds.
    generator_cpu: f64,
    /// Each worker's datagrams received and CPU seconds (ours only).
    workers: Vec<(u64, f64)>,
    /// Datagrams the kernel dropped at full receive buffers meanwhile
    /// (any socket: the proxy's, the sink's, the generator's).
    buffer_drops: u64,
}

impl Capacity {
    fn per_cpu_second(&self) -> f64 {
        self.delivered as f64 / self.cpu.max(0.01)
    }
}

/// The proxy `name` on `proxy_addr`: ours with `workers` workers, or
/// masque-go's.
fn capacity_proxy(name: &str, proxy_addr: &str, workers: u8, dir: &std::path::Path) -> Child {
    if name == "masque-go" {
        return masque_go_proxy(proxy_addr, dir);
    }
    let mut args = vec![
        "middle",
        "{ kind = \"tecc\", mode = \"mdt\", tunnel_cc = \"none\" }",
        "--addr",
        proxy_addr,
        "--allow",
        "127.0.0.2:9000",
        "--seed",
        "1",
        "--seconds",
        "60",
    ];
    let workers = workers.to_string();
    let program = match std::env::var_os("PEPKIT_CAPACITY_BASE") {
        Some(base) if name == "pepkit-base" => PathBuf::from(base),
        _ => {
            args.extend(["--workers", &workers]);
            PathBuf::from(env!("CARGO_BIN_EXE_pepkit"))
        }
    };
    spawn(program, &args)
}

/// A UDP sink on `at` with a 4 MB buffer, read in `recvmmsg` batches
/// until nothing came for half a second; returns how many datagrams came.
fn sink(at: SocketAddr) -> std::thread::JoinHandle<u64> {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .unwrap();
    socket.set_recv_buffer_size(4 << 20).unwrap();
    socket.bind(&at.into()).unwrap();
    socket.set_nonblocking(true).unwrap();
    let socket: std::net::UdpSocket = socket.into();
    std::thread::spawn(move || {
        let mut batch = emu::sys::RecvBatch::new(64, 2048);
        let mut count = 0;
        loop {
            let mut fds = [emu::sys::PollFd::readable(socket.as_fd())];
            if emu::sys::poll(&mut fds, Some(Duration::from_millis(500))).unwrap() == 0 {
                return count;
            }
            while let n @ 1.. = emu::sys::udp_recv_batch(&socket, &mut batch).unwrap() {
                count += n as u64;
            }
        }
    })
}

/// Tunnel client `i` of `clients` (on 127.0.0.(3+i)), each a connection
/// of its own, sends its share of 100,000 200-byte probes a second for
/// 5 s through the proxy to the sink; returns how many it sent.
fn generate(i: usize, clients: usize, proxy: SocketAddr, sink: SocketAddr) -> u64 {
    let ip = format!("127.0.0.{}", 3 + i);
    let source = netsim::testing::CbrSource::new(
        addr(&format!("{ip}:5000")),
        sink,
        200,
        Duration::from_micros(10 * clients as u64),
        500_000 / clients as u64,
    );
    let outer = tunnel::outer_config(
        QuicConfig::new(Seed::new(4 + i as u64)).with_controller(Arc::new(cc::Unlimited)),
        1350,
    );
    let settings = TunnelSettings::new(Mode::Datagram);
    let client = tunnel_client(source, outer, settings, proxy, sink, &ip);
    let driver = HostDriver::bind(client, &[]).unwrap();
    let deadline = Time::ZERO + Duration::from_secs(5);
    let run = driver
        .run(
            RealClock::start(),
            RunUntil::Stopped,
            deadline,
            &AtomicBool::new(false),
        )
        .unwrap();
    run.host.inner().sent()
}

/// `clients` tunnel clients ([`generate`]) send 100,000 200-byte probes a
/// second together for 5 s through the proxy to a UDP sink; what reached
/// the sink, the proxy's CPU time and the generator's.
fn measure_capacity(
    name: &str,
    proxy_addr: &str,
    workers: u8,
    clients: usize,
    dir: &std::path::Path,
) -> Capacity {
    let sink_addr = addr("127.0.0.2:9000");
    let proxy = capacity_proxy(name, proxy_addr, workers, dir);
    std::thread::sleep(Duration::from_millis(500));
    let counter = sink(sink_addr);
    let pid = proxy.id().to_string();
    let (cpu_before, generator_before) = (cpu_seconds(&pid), cpu_seconds("self"));
    let drops_before = receive_buffer_drops();
    let started = std::time::Instant::now();
    let generators: Vec<_> = (0..clients)
        .map(|i| {
            let proxy = addr(proxy_addr);
            std::thread::spawn(move || generate(i, clients, proxy, sink_addr))
        })
        .collect();
    let sent = generators.into_iter().map(|g| g.join().unwrap()).sum();
    let seconds = started.elapsed().as_secs_f64();
    let delivered = counter.join().unwrap();
    let cpu = cpu_seconds(&pid) - cpu_before;
    let generator_cpu = cpu_seconds("self") - generator_before;
    let buffer_drops = receive_buffer_drops() - drops_before;
    let (_, counters) = terminate(proxy);
    let workers = serde_json::from_str::<serde_json::Value>(counters.trim())
        .ok()
        .and_then(|c| c["system"]["workers"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|w| {
            let received = w["received"].as_u64().unwrap_or(0);
            (received, w["cpu_s"].as_f64().unwrap_or(0.0))
        })
        .collect();
    Capacity {
        name: name.to_string(),
        sent,
        delivered,
        seconds,
        cpu,
        generator_cpu,
        workers,
        buffer_drops,
    }
}

/// Packets per CPU-second each proxy forwards in datagram mode, ours with
/// one worker and with two, alternating with masque-go's in one run
/// (`PEPKIT_CAPACITY_ROUNDS` rounds, default 1): `PEPKIT_CAPACITY_CLIENTS`
/// tunnel clients (default 4, a connection each) send 200-byte probes,
/// 100,000 a second together, for 5 s through the proxy to a UDP sink;
/// the rate is what reached the sink over the proxy process's CPU time. Also printed: what reached the sink a second (the scaling from
/// one worker to two at one offered load), the generator's share of the
/// machine's cores, and each worker's datagrams and CPU time. With
/// `PEPKIT_CAPACITY_BASE=BINARY`, another pepkit binary's tunnel server
/// (its default workers) runs in each round too, as `pepkit-base`. Ignored:
/// run with
/// `cargo test --release -p pepkit --test masque_interop capacity -- --ignored --nocapture`.
#[test]
#[ignore]
fn capacity_against_masque_go() {
    if !emu::require_or_skip("tunnel server capacity", runnable()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rounds: usize = std::env::var("PEPKIT_CAPACITY_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let clients: usize = std::env::var("PEPKIT_CAPACITY_CLIENTS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let mut results: Vec<Capacity> = Vec::new();
    let mut proxies = vec![
        ("pepkit-1", "127.0.0.1:24461", 1),
        ("masque-go", "127.0.0.1:24462", 0),
        ("pepkit-2", "127.0.0.1:24463", 2),
    ];
    if std::env::var_os("PEPKIT_CAPACITY_BASE").is_some() {
        proxies.push(("pepkit-base", "127.0.0.1:24464", 0));
    }
    for round in 0..rounds {
        for &(name, proxy_addr, workers) in &proxies {
            let load = load();
            let c = measure_capacity(name, proxy_addr, workers, clients, dir.path());
            println!(
                "round {round} {}: {} probes sent, {} delivered ({:.0}/s), proxy CPU {:.2} s, \
                 {:.0} packets per CPU-second; generator {:.0}% of {cores} cores; \
                 workers (received, CPU s) {:?}; {} dropped at full socket buffers; load {load}",
                c.name,
                c.sent,
                c.delivered,
                c.delivered as f64 / c.seconds,
                c.cpu,
                c.per_cpu_second(),
                100.0 * c.generator_cpu / (c.seconds * cores),
                c.workers,
                c.buffer_drops,
            );
            results.push(c);
        }
    }
    let median = |name: &str, f: &dyn Fn(&Capacity) -> f64| {
        let mut values: Vec<f64> = results.iter().filter(|c| c.name == name).map(f).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let go = median("masque-go", &Capacity::per_cpu_second);
    for (name, _, _) in proxies.iter().filter(|p| p.0 != "masque-go") {
        println!(
            "{name} / masque-go per CPU-second: {:.2} (medians of {rounds}); delivered {:.0}/s",
            median(name, &Capacity::per_cpu_second) / go,
            median(name, &|c| c.delivered as f64 / c.seconds),
        );
    }
}
