//! Independent QUIC peers (quic-go, aioquic, ngtcp2) complete bulk
//! transfers through an emulated path, with and without the Sidekick proxy
//! daemon on the middle node — and the proxy leaves flows that never asked
//! for quACKs alone. Needs root, network namespaces and the peers that
//! `scripts/setup` installs; skips with the reason otherwise (fails with
//! `PEPKIT_REQUIRE_REAL=1`).

use emu::{Process, RealClock, Testbed, TestbedSpec};
use netsim::{HopConfig, LinkConfig, LossModel, Probability, Rate, Seed};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const PROXY: &str = "10.255.255.1:1234";
/// Bytes per transfer: a few seconds at 10 Mbit/s with loss.
const SIZE: u64 = 1_000_000;

fn peers_run() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers/run")
}

/// `Err(why)` if the test of `peer` cannot run here.
fn runnable(peer: &str) -> Result<(), String> {
    emu::available().map_err(|reason| format!("real mode {reason}"))?;
    let check = std::process::Command::new(peers_run())
        .args([peer, "check"])
        .output()
        .map_err(|e| format!("cannot run peers/run {peer} check: {e}"))?;
    if check.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{peer} is not installed (scripts/setup installs it): {}",
            String::from_utf8_lossy(&check.stderr).trim()
        ))
    }
}

/// Scenario 2's path, shortened: a lossy 1 ms near hop and a 10 ms,
/// 20 Mbit/s far hop, with the proxy's address on the middle node.
fn path() -> TestbedSpec {
    let near = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
        .with_loss(LossModel::Bernoulli(Probability::new(0.01).unwrap()));
    let far = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(20))
        .with_buffer(netsim::BufferLimit::Packets(200));
    TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![HopConfig::symmetric(near), HopConfig::symmetric(far)],
        extra: vec![(0, PROXY.split(':').next().unwrap().parse().unwrap())],
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(5),
    }
}

/// The final stats line of a stopped daemon.
fn stats(finished: &emu::Finished) -> serde_json::Value {
    finished
        .stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no stats line; stderr: {}", finished.stderr))
}

/// One transfer of `peer` through a fresh testbed; returns the client's
/// JSON line and, with `proxy`, the proxy daemon's stats.
fn transfer(
    peer: &str,
    upload: bool,
    proxy: bool,
) -> (serde_json::Value, Option<serde_json::Value>) {
    let testbed = Testbed::build(&path(), RealClock::start()).expect("testbed");
    let middle = testbed.middle(0).expect("a middle node");
    let run = peers_run().to_string_lossy().to_string();
    let limit = Duration::from_secs(90);
    let daemon = proxy.then(|| {
        let daemon = Process::spawn(
            "sidekick-proxy",
            Some(&middle.netns),
            limit,
            env!("CARGO_BIN_EXE_pepkit"),
            &[
                "sidekick-proxy",
                "--iface",
                &middle.interfaces[0].name,
                "--addr",
                PROXY,
            ],
        )
        .expect("the proxy starts");
        std::thread::sleep(Duration::from_millis(300));
        daemon
    });
    let listen = format!("{SERVER}:4433");
    let server = Process::spawn(
        "server",
        Some(&testbed.server().netns),
        limit,
        &run,
        &[peer, "server", "--listen", &listen],
    )
    .expect("the server starts");
    // The peers print "ready" on stderr; their servers bind within a second.
    std::thread::sleep(Duration::from_millis(1500));
    let size = SIZE.to_string();
    let mut args = vec![
        peer,
        "client",
        "--connect",
        &listen,
        "--size",
        &size,
        "--timeout",
        "60",
    ];
    if upload {
        args.push("--upload");
    }
    let client = Process::spawn("client", Some(&testbed.client().netns), limit, &run, &args)
        .expect("the client starts")
        .wait(limit);
    let server = server.stop();
    let proxy_stats = daemon.map(|d| stats(&d.stop()));
    assert!(
        client.success(),
        "{peer} client failed: {}\nserver: {}",
        client.stderr,
        server.stderr
    );
    let line = client
        .stdout
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .expect("the client's JSON line");
    (line, proxy_stats)
}

fn peer_through_path(peer: &str) {
    if !emu::require_or_skip(&format!("{peer} through the emulated path"), runnable(peer)) {
        return;
    }
    for upload in [false, true] {
        for proxy in [false, true] {
            let (line, proxy_stats) = transfer(peer, upload, proxy);
            eprintln!("{peer} upload={upload} proxy={proxy}: {line} {proxy_stats:?}");
            assert_eq!(line["bytes"].as_u64(), Some(SIZE), "{line}");
            if let Some(stats) = proxy_stats {
                // It saw the flow (it sniffs every packet) but the flow
                // never asked: no reply, no quACK, no flow state.
                assert!(stats["datagrams"].as_u64() > Some(300), "{stats}");
                assert_eq!(stats["requests"].as_u64(), Some(0), "{stats}");
                assert_eq!(stats["replies"].as_u64(), Some(0), "{stats}");
                assert_eq!(stats["quacks"].as_u64(), Some(0), "{stats}");
                assert_eq!(stats["packets_encoded"].as_u64(), Some(0), "{stats}");
            }
        }
    }
}

#[test]
fn quic_go_through_the_emulated_path() {
    peer_through_path("quic-go");
}

#[test]
fn aioquic_through_the_emulated_path() {
    peer_through_path("aioquic");
}

#[test]
fn ngtcp2_through_the_emulated_path() {
    peer_through_path("ngtcp2");
}
