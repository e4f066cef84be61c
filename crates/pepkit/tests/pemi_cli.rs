//! `pepkit pemi`, the daemon, in a testbed router's path: a QUIC download
//! (our endpoints) over a lossy client link completes through it; PEMI
//! recognises the connection, protects it and resends losses, answers
//! SIGUSR1 with its connection table and SIGTERM with one JSON line of
//! counters; a bad command line fails with one line. Needs root and
//! network namespaces; skips with the reason otherwise (fails with
//! `PEPKIT_REQUIRE_REAL=1`).

use emu::{HostRunSpec, RealClock, RunUntil, Testbed, TestbedSpec};
use netsim::{BufferLimit, HopConfig, LinkConfig, LossModel, Probability, Rate, Seed};
use quic::{
    BulkClient, BulkReport, BulkServerFactory, Direction, QuicClient, QuicConfig, QuicServer,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const SIZE: u64 = 3_000_000;

/// The Table 4 path, 2% loss on the client's link.
fn path() -> TestbedSpec {
    let near = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
        .with_buffer(BufferLimit::Packets(1000))
        .with_loss(LossModel::Bernoulli(Probability::new(0.02).unwrap()));
    let far = LinkConfig::constant(Duration::from_millis(25), Rate::from_mbps(10))
        .with_buffer(BufferLimit::Packets(1000));
    TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![HopConfig::symmetric(near), HopConfig::symmetric(far)],
        extra: Vec::new(),
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(11),
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

#[test]
fn the_daemon_protects_a_download_and_reports() {
    if !emu::require_real_or_skip("the_daemon_protects_a_download_and_reports") {
        return;
    }
    let testbed = Testbed::build(&path(), RealClock::start()).expect("testbed");
    let middle = testbed.middle(0).expect("a middle node").clone();
    // `ip netns exec` execs the daemon: its pid is the child's.
    let mut daemon = Command::new("ip")
        .args([
            "netns",
            "exec",
            &middle.netns,
            env!("CARGO_BIN_EXE_pepkit"),
            "pemi",
        ])
        .args(["--iface", "eth0", "--iface", "eth1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the daemon starts");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        daemon.try_wait().unwrap().is_none(),
        "the daemon exited early"
    );
    let (client, server) = (
        SocketAddr::new(CLIENT.into(), 5000),
        SocketAddr::new(SERVER.into(), 4433),
    );
    let config = QuicConfig::new(Seed::new(1)).with_ack_frequency(quic::AckFrequency {
        threshold: 0,
        max_delay: None,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = testbed.clock().now() + Duration::from_secs(60);
    let server_thread = testbed
        .run_host(
            testbed.server(),
            QuicServer::new(config.clone(), server, BulkServerFactory),
            vec![server],
            &HostRunSpec::new(RunUntil::Stopped, deadline, stop.clone()),
        )
        .expect("the server");
    let client_run = testbed
        .run_host(
            testbed.client(),
            QuicClient::new(
                QuicConfig::new(Seed::new(1)),
                client,
                server,
                BulkClient::new(Direction::Download, SIZE),
            ),
            vec![client],
            &HostRunSpec::new(RunUntil::Finished, deadline, stop.clone()),
        )
        .expect("the client")
        .join()
        .expect("the client's run");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let server_run = server_thread.join().expect("the server's run");
    let report = BulkReport::from_hosts(&client_run.host, &server_run.host);
    signal(daemon.id(), "USR1");
    std::thread::sleep(Duration::from_millis(300));
    signal(daemon.id(), "TERM");
    let output = daemon.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}{stdout}");
    assert!(
        output.status.success(),
        "the daemon's exit: {:?}",
        output.status
    );
    let report = report.expect("the download completes through the daemon");
    assert_eq!(report.bytes, SIZE);
    assert!(stderr.contains("pemi: 1 connections"), "the dump: {stderr}");
    let stats: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(stats["handshakes"], 1, "{stats}");
    assert!(stats["protected"].as_u64() > Some(1000), "{stats}");
    assert!(stats["retransmissions"].as_u64() > Some(0), "{stats}");
    assert!(stats["driver"]["frames"].as_u64() > Some(2000), "{stats}");
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let output = Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args(["pemi", "--iface", "eth0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("twice"), "{stderr}");
}
