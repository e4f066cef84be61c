//! `pepkit tunnel-server` on real sockets (loopback): our tunnel client,
//! beside our QUIC client, downloads through the daemon from a QUIC server
//! it allows, in datagram mode and with TECC; a target it does not allow
//! is refused with 403; SIGTERM stops it cleanly with its counters. The
//! engines are the simulator's, driven in real time (`emu::HostDriver`).
//! Real mode: skips without root (fails with `PEPKIT_REQUIRE_REAL=1`).

use emu::{HostDriver, RealClock, RunUntil};
use netsim::{Seed, Time};
use quic::{
    BulkClient, BulkReport, BulkServerFactory, Direction, QuicClient, QuicConfig, QuicServer,
};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tunnel::{
    Mode, TunnelClientConfig, TunnelClientHost, TunnelSettings, TunnelState, UriTemplate,
};

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn daemon(listen: &str, allow: &str, mode: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args([
            "tunnel-server",
            "--listen",
            listen,
            "--allow",
            allow,
            "--mode",
            mode,
        ])
        .args(["--seed", "1", "--seconds", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) -> String {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    out
}

/// A 2 MB download from `server` through the tunnel server at `proxy`.
fn download(
    proxy: &str,
    server: &str,
    client_ip: &str,
    tecc: bool,
    seconds: u64,
) -> (Option<BulkReport>, Option<TunnelState>) {
    let seed = Seed::new(2);
    let (proxy, server) = (addr(proxy), addr(server));
    let stop = Arc::new(AtomicBool::new(false));
    let server_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let host = QuicServer::new(
                QuicConfig::new(seed).with_max_udp_payload(1200),
                server,
                BulkServerFactory,
            );
            let driver = HostDriver::bind(host, &[server]).unwrap();
            driver
                .run(RealClock::start(), RunUntil::Stopped, Time::MAX, &stop)
                .unwrap()
                .host
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let inner = QuicClient::new(
        QuicConfig::new(seed).with_max_udp_payload(1200),
        addr(&format!("{client_ip}:5000")),
        server,
        BulkClient::new(Direction::Download, 2_000_000),
    );
    let mut settings = TunnelSettings::new(if tecc {
        Mode::RetransmittedDatagram
    } else {
        Mode::Datagram
    });
    settings.feedback = tecc;
    let outer = tunnel::outer_config(QuicConfig::new(seed), 1350);
    let client = TunnelClientHost::new(
        inner,
        TunnelClientConfig {
            settings,
            quic: outer,
            proxy,
            local: addr(&format!("{client_ip}:5443")),
            template: UriTemplate::default(),
            targets: vec![server],
            feedback: None,
            client_cids: None,
        },
    );
    let driver = HostDriver::bind(client, &[]).unwrap();
    let deadline = Time::ZERO + Duration::from_secs(seconds);
    let run = driver
        .run(
            RealClock::start(),
            RunUntil::Finished,
            deadline,
            &AtomicBool::new(false),
        )
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let server_host = server_thread.join().unwrap();
    let state = run.host.app_ref().and_then(|app| app.state(server));
    (
        BulkReport::from_hosts(run.host.inner(), &server_host),
        state,
    )
}

#[test]
fn downloads_through_the_daemon_and_refuses_other_targets() {
    if !emu::require_real_or_skip("tunnel_server::downloads_through_the_daemon") {
        return;
    }
    for (mode, port) in [("datagram", 24431), ("tecc", 24432)] {
        let listen = format!("127.0.0.1:{port}");
        let child = daemon(&listen, "127.0.0.2:4433", mode);
        std::thread::sleep(Duration::from_millis(300));
        let (report, state) = download(&listen, "127.0.0.2:4433", "127.0.0.3", mode == "tecc", 20);
        let report = report.unwrap_or_else(|| panic!("{mode}: no transfer ({state:?})"));
        assert_eq!(report.bytes, 2_000_000, "{mode}");
        // Not allowed: refused with 403, nothing forwarded.
        let (report, state) = download(&listen, "127.0.0.4:4433", "127.0.0.5", false, 2);
        assert!(report.is_none());
        assert_eq!(state, Some(TunnelState::Refused(403)));
        let counters = stop(child);
        assert!(
            counters.contains("\"tunnels\":1") && counters.contains("\"forbidden\":1"),
            "{counters}"
        );
    }
}
