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

/// CPU seconds a process used so far (utime + stime from /proc).
fn cpu_seconds(pid: u32) -> f64 {
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

/// Packets per second per core each proxy forwards in datagram mode: our
/// tunnel client sends 200-byte probes as fast as it can for 5 s through
/// the proxy to a UDP sink; the rate is what reached the sink over the
/// proxy process's CPU time. Ignored: run with
/// `cargo test --release -p pepkit --test masque_interop capacity -- --ignored --nocapture`.
#[test]
#[ignore]
fn capacity_against_masque_go() {
    if !emu::require_or_skip("tunnel server capacity", runnable()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sink_addr = addr("127.0.0.2:9000");
    let mut results = Vec::new();
    for (name, proxy_addr) in [
        ("pepkit", "127.0.0.1:24461"),
        ("masque-go", "127.0.0.1:24462"),
    ] {
        let proxy = if name == "pepkit" {
            spawn(
                PathBuf::from(env!("CARGO_BIN_EXE_pepkit")),
                &[
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
                ],
            )
        } else {
            masque_go_proxy(proxy_addr, dir.path())
        };
        std::thread::sleep(Duration::from_millis(500));
        let sink = std::net::UdpSocket::bind(sink_addr).unwrap();
        sink.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let counter = std::thread::spawn(move || {
            let (mut count, mut buf) = (0u64, [0u8; 2048]);
            while sink.recv_from(&mut buf).is_ok() {
                count += 1;
            }
            count
        });
        let cpu_before = cpu_seconds(proxy.id());
        let source = netsim::testing::CbrSource::new(
            addr("127.0.0.3:5000"),
            sink_addr,
            200,
            Duration::from_micros(10),
            500_000,
        );
        let outer = tunnel::outer_config(
            QuicConfig::new(Seed::new(4)).with_controller(Arc::new(cc::Unlimited)),
            1350,
        );
        let settings = TunnelSettings::new(Mode::Datagram);
        let client = tunnel_client(
            source,
            outer,
            settings,
            addr(proxy_addr),
            sink_addr,
            "127.0.0.3",
        );
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
        let delivered = counter.join().unwrap();
        let cpu = cpu_seconds(proxy.id()) - cpu_before;
        terminate(proxy);
        let pps = delivered as f64 / cpu.max(0.01);
        println!(
            "{name}: {} probes sent, {delivered} delivered, proxy CPU {cpu:.2} s, {pps:.0} packets/s per core",
            run.host.inner().sent()
        );
        results.push(pps);
    }
    println!("pepkit / masque-go: {:.2}", results[0] / results[1]);
}
