//! Independent QUIC peers (quic-go, aioquic, ngtcp2, quiche) complete bulk
//! transfers through an emulated path, with and without the Sidekick proxy
//! daemon on the middle node — and the proxy leaves flows that never asked
//! for quACKs alone; and each carries RTC frames to its own client and to
//! the others' (`peers/run … server --rtc`). Needs root, network namespaces and the peers that
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
                "middle",
                "sidekick",
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
                // It saw the flow (it sniffs every packet the client sends:
                // an upload's ~700 data packets, a download's ACKs, of which
                // aioquic's client sent 238 and 331 in two runs) but the flow
                // never asked: no reply, no quACK, no flow state.
                assert!(stats["driver"]["datagrams"].as_u64() > Some(100), "{stats}");
                assert_eq!(stats["system"]["requests"].as_u64(), Some(0), "{stats}");
                assert_eq!(stats["system"]["replies"].as_u64(), Some(0), "{stats}");
                assert_eq!(stats["system"]["quacks"].as_u64(), Some(0), "{stats}");
                assert_eq!(
                    stats["system"]["packets_encoded"].as_u64(),
                    Some(0),
                    "{stats}"
                );
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

#[test]
fn quiche_through_the_emulated_path() {
    peer_through_path("quiche");
}

/// `Err(why)` if `peer`'s RTC client and server cannot run here.
fn rtc_runnable(peer: &str) -> Result<(), String> {
    runnable(peer)?;
    let check = std::process::Command::new(peers_run())
        .args([peer, "check"])
        .output()
        .map_err(|e| format!("cannot run peers/run {peer} check: {e}"))?;
    let says = String::from_utf8_lossy(&check.stdout).into_owned();
    if says.contains("RTC frames") && !says.contains("no RTC frames") {
        Ok(())
    } else {
        Err(format!("{peer} has no RTC peer here: {}", says.trim()))
    }
}

/// 60 RTC frames (30 fps, 12.5 kB) from `server`'s RTC server to
/// `client`'s client through a fresh testbed: every frame arrives once, no
/// sooner than the path's 11 ms one-way delay after its generation, and
/// the frames are generated on the server's 30 fps clock.
fn rtc_through_path(client: &str, server: &str) {
    let test = format!("{client} RTC client, {server} RTC server");
    for peer in [client, server] {
        if !emu::require_or_skip(&test, rtc_runnable(peer)) {
            return;
        }
    }
    let testbed = Testbed::build(&path(), RealClock::start()).expect("testbed");
    let run = peers_run().to_string_lossy().to_string();
    let limit = Duration::from_secs(60);
    let listen = format!("{SERVER}:4433");
    let server_process = Process::spawn(
        "server",
        Some(&testbed.server().netns),
        limit,
        &run,
        &[server, "server", "--listen", &listen, "--rtc"],
    )
    .expect("the server starts");
    std::thread::sleep(Duration::from_millis(1500));
    let args = [
        client,
        "client",
        "--connect",
        &listen,
        "--rtc-frames",
        "60",
        "--timeout",
        "30",
    ];
    let finished = Process::spawn("client", Some(&testbed.client().netns), limit, &run, &args)
        .expect("the client starts")
        .wait(limit);
    let server_finished = server_process.stop();
    assert!(
        finished.success(),
        "{test}: {}\nserver: {}",
        finished.stderr,
        server_finished.stderr
    );
    let line: serde_json::Value = finished
        .stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the client's JSON line");
    assert_eq!(line["peer"].as_str(), Some(client), "{line}");
    assert_eq!(line["mode"].as_str(), Some("rtc"), "{line}");
    let frames: Vec<[u64; 3]> = line["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| {
            let n: Vec<u64> = f
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.as_u64())
                .collect();
            [n[0], n[1], n[2]]
        })
        .collect();
    let mut indexes: Vec<u64> = frames.iter().map(|f| f[0]).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..60).collect::<Vec<u64>>(), "{test}: {line}");
    for [index, generated, arrived] in &frames {
        assert!(
            *arrived >= generated + 11_000_000,
            "{test}: frame {index} took {} ns",
            arrived.saturating_sub(*generated)
        );
    }
    let generated = |k: u64| frames.iter().find(|f| f[0] == k).unwrap()[1];
    let span = (generated(59) - generated(0)) as f64 / 1e9;
    assert!(
        (span - 59.0 / 30.0).abs() < 0.1,
        "{test}: 60 frames generated over {span} s"
    );
    eprintln!("{test}: 60 frames, median delay {} ms", {
        let mut delays: Vec<u64> = frames.iter().map(|f| (f[2] - f[1]) / 1_000_000).collect();
        delays.sort_unstable();
        delays[30]
    });
}

#[test]
fn rtc_frames_through_the_emulated_path() {
    for peer in ["quic-go", "aioquic", "ngtcp2", "quiche"] {
        rtc_through_path(peer, peer);
    }
    // The RTC protocol is the same in all four: across stacks too.
    rtc_through_path("quic-go", "ngtcp2");
    rtc_through_path("ngtcp2", "aioquic");
    rtc_through_path("quiche", "quic-go");
    rtc_through_path("ngtcp2", "quiche");
}
