//! `pepkit middle`, the one daemon for every middle system, on a
//! testbed's router: for each system a real transfer between our
//! endpoints (or Linux TCP) in the client's and the server's namespaces
//! goes through the daemon, which enters the router's namespace itself
//! (`--netns`), and its counters say it did its work. PEMI protects a
//! lossy download and dumps its connection table on SIGUSR1; the split
//! QUIC proxy terminates and relays a download; the TCP PEP splits a TCP
//! upload; the TECC tunnel server carries a tunnelled download.
//!
//! Needs root and network namespaces; skips with the reason otherwise
//! (fails with `PEPKIT_REQUIRE_REAL=1`). One test at a time: each builds a
//! testbed and loads the cores.

mod common;

use common::middle::{Daemon, router};
use emu::tcp::bulk::{
    BulkDirection, TcpBulkClient, TcpBulkClientConfig, TcpBulkServer, TcpBulkServerConfig,
};
use emu::{RealClock, Testbed, TestbedSpec};
use netsim::{BufferLimit, HopConfig, Host, LinkConfig, LossModel, Probability, Rate, Seed};
use quic::{BulkClient, BulkReport, QuicClient, QuicConfig};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tunnel::{Mode, TunnelSettings};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
/// The tunnel server's own address on the router.
const TUNNEL: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 2);
const SIZE: u64 = 3_000_000;

static SERIAL: Mutex<()> = Mutex::new(());

/// Table 4's path (1 ms at 100 Mbit/s, then 25 ms at 10 Mbit/s) with
/// `loss` on the client's link, and `extra` addresses on the router.
fn testbed(loss: f64, extra: Vec<(usize, Ipv4Addr)>) -> Testbed {
    let mut near = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
        .with_buffer(BufferLimit::Packets(1000));
    if loss > 0.0 {
        near = near.with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
    }
    let far = LinkConfig::constant(Duration::from_millis(25), Rate::from_mbps(10))
        .with_buffer(BufferLimit::Packets(1000));
    let spec = TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![HopConfig::symmetric(near), HopConfig::symmetric(far)],
        extra,
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(11),
    };
    Testbed::build(&spec, RealClock::start()).expect("testbed")
}

/// A QUIC download of [`SIZE`] by our client from our server (both with
/// `config`), the client wrapped by `wrap` (what runs beside it), within
/// 60 s.
fn download<H: Host + Send + 'static>(
    testbed: &Testbed,
    config: QuicConfig,
    wrap: impl FnOnce(QuicClient<BulkClient>) -> H,
    inner: impl FnOnce(&H) -> &QuicClient<BulkClient>,
) -> Option<BulkReport> {
    let ends = (
        SocketAddr::new(CLIENT.into(), 5000),
        SocketAddr::new(SERVER.into(), 4433),
    );
    common::middle::download(
        testbed,
        ends,
        config,
        SIZE,
        Duration::from_secs(60),
        wrap,
        inner,
    )
    .report
}

#[test]
fn pemi_protects_a_lossy_download_and_reports() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("pemi_protects_a_lossy_download_and_reports") {
        return;
    }
    let testbed = testbed(0.02, Vec::new());
    let daemon = Daemon::start(
        &router(&testbed),
        &["pemi", "--iface", "eth0", "--iface", "eth1"],
    );
    // ACK every packet, as Table 4's PEMI rows.
    let acks = quic::AckFrequency {
        threshold: 0,
        max_delay: None,
    };
    let config = QuicConfig::new(Seed::new(1)).with_ack_frequency(acks);
    let report = download(&testbed, config, |c| c, |c| c);
    daemon.dump();
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    assert_eq!(report.expect("the download completes").bytes, SIZE);
    assert!(
        stopped.log.contains("pemi: 1 connections"),
        "{}",
        stopped.log
    );
    let (system, driver) = (&stopped.stats["system"], &stopped.stats["driver"]);
    assert_eq!(system["handshakes"], 1, "{system}");
    assert!(system["protected"].as_u64() > Some(1000), "{system}");
    assert!(system["retransmissions"].as_u64() > Some(0), "{system}");
    assert!(driver["frames"].as_u64() > Some(2000), "{driver}");
}

#[test]
fn the_split_proxy_terminates_and_relays_a_download() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("the_split_proxy_terminates_and_relays_a_download") {
        return;
    }
    let testbed = testbed(0.01, Vec::new());
    let daemon = Daemon::start(
        &router(&testbed),
        &[
            "{ kind = \"split\", controller = \"bbr\" }",
            "--iface",
            "eth0",
            "--iface",
            "eth1",
        ],
    );
    let report = download(&testbed, QuicConfig::new(Seed::new(1)), |c| c, |c| c);
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    assert_eq!(report.expect("the download completes").bytes, SIZE);
    let system = &stopped.stats["system"];
    assert_eq!(system["servers"], 1, "{system}");
    assert_eq!(system["connections"], 1, "{system}");
    assert!(system["down_bytes"].as_u64() >= Some(SIZE), "{system}");
}

#[test]
fn the_tcp_pep_splits_an_upload() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("the_tcp_pep_splits_an_upload") {
        return;
    }
    let testbed = testbed(0.0, Vec::new());
    let daemon = Daemon::start(
        &router(&testbed),
        &["{ kind = \"pep\", max_connections = 8 }"],
    );
    let server_addr = SocketAddr::new(SERVER.into(), 5001);
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        testbed
            .spawn_in(testbed.server(), "tcp-server", move || {
                TcpBulkServer::bind(TcpBulkServerConfig::new(server_addr))?.run(stop)
            })
            .unwrap()
    };
    std::thread::sleep(Duration::from_millis(200));
    let mut config = TcpBulkClientConfig::new(server_addr, BulkDirection::Upload, SIZE);
    config.bind = Some(SocketAddr::new(CLIENT.into(), 0));
    config.timeout = Duration::from_secs(60);
    let report = testbed
        .spawn_in(testbed.client(), "tcp-client", move || {
            TcpBulkClient::run(&config)
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let records = server.join().unwrap().unwrap().unwrap();
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    assert_eq!(report.expect("the upload completes").bytes, SIZE);
    // Transparent: the server sees the client's own address.
    assert_eq!(records[0].peer.ip(), std::net::IpAddr::from(CLIENT));
    let stats = &stopped.stats;
    assert_eq!(stats["pep_connections"], 1.0, "{stats}");
    assert!(
        stats["pep_bytes_client_to_server"].as_f64() >= Some(SIZE as f64),
        "{stats}"
    );
}

#[test]
fn the_tunnel_server_carries_a_tunnelled_download() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("the_tunnel_server_carries_a_tunnelled_download") {
        return;
    }
    let testbed = testbed(0.01, vec![(0, TUNNEL)]);
    let proxy = SocketAddr::new(TUNNEL.into(), 443);
    let target = SocketAddr::new(SERVER.into(), 4433);
    let daemon = Daemon::start(
        &router(&testbed),
        &[
            "{ kind = \"tecc\", mode = \"rmdt\" }",
            "--addr",
            &proxy.to_string(),
            "--allow",
            &target.to_string(),
        ],
    );
    let config = QuicConfig::new(Seed::new(1)).with_max_udp_payload(1200);
    let report = download(
        &testbed,
        config,
        |client| {
            let outer = tunnel::outer_config(QuicConfig::new(Seed::new(3)), 1350);
            let settings = TunnelSettings::new(Mode::RetransmittedDatagram);
            common::tunnel_client(client, outer, settings, proxy, target, &CLIENT.to_string())
        },
        |host| host.inner(),
    );
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{:?}", stopped.status);
    assert_eq!(report.expect("the download completes").bytes, SIZE);
    let system = &stopped.stats["system"];
    assert_eq!(system["tunnels"], 1, "{system}");
    assert_eq!(system["forbidden"], 0, "{system}");
    assert!(system["from_targets"].as_u64() > Some(2000), "{system}");
}
