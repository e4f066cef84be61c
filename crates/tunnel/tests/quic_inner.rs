//! Real QUIC through the tunnel: an end-to-end QUIC bulk download (the
//! inner connection, 1200-byte payloads) through each mode, the outer
//! packet size it needs, and a target the server does not allow.

mod common;

use common::*;
use netsim::{Seed, Time};
use quic::{
    BulkClient, BulkReport, BulkServerFactory, Direction, QuicClient, QuicConfig, QuicServer,
};
use tunnel::{Mode, TunnelClientHost, TunnelServer, TunnelSettings, TunnelState};

type Client = TunnelClientHost<QuicClient<BulkClient>>;

fn inner(seed: Seed) -> QuicConfig {
    QuicConfig::new(seed).with_max_udp_payload(1200)
}

/// A 500 kB download through the tunnel; the finished simulator.
fn download(
    settings: &TunnelSettings,
    outer_payload: u16,
    allow_server: bool,
) -> (netsim::Simulator, netsim::Chain) {
    let seed = Seed::new(5);
    let cids = quic::CidLog::default();
    let client = QuicClient::new(
        inner(seed).with_cid_log(cids.clone()),
        addr(CLIENT),
        addr(SERVER),
        BulkClient::new(Direction::Download, 500_000),
    );
    let mut config = client_config(seed, settings);
    config.quic = outer(seed).with_max_udp_payload(outer_payload);
    config.client_cids = Some(cids);
    let wrapped = TunnelClientHost::new(client, config);
    let server_host = QuicServer::new(inner(seed), addr(SERVER), BulkServerFactory);
    let mut middle_settings = settings.clone();
    middle_settings.record_losses = false;
    let middle = if allow_server {
        server(seed, &middle_settings)
    } else {
        let mut config = tunnel::TunnelServerConfig {
            addr: addr(PROXY),
            quic: outer(seed),
            shared: tunnel::ServerShared {
                settings: middle_settings,
                template: tunnel::UriTemplate::default(),
                allow: std::sync::Arc::new(tunnel::AllowList::default()),
                sample_interval: None,
                limits: tunnel::ServerLimits::default(),
            },
            first_port: 20_000,
        };
        config.shared.allow = std::sync::Arc::new(
            tunnel::AllowList::default().allow("10.0.1.99".parse().unwrap(), 1..=65535),
        );
        TunnelServer::new(config)
    };
    let (mut sim, chain) = chain(
        seed,
        Box::new(wrapped),
        Box::new(server_host),
        middle,
        link(10, 20),
        link(25, 100),
    );
    sim.run_until(Time::from_secs(60));
    (sim, chain)
}

#[test]
fn quic_downloads_through_every_mode() {
    for mode in [
        Mode::Stream,
        Mode::StreamGroup(3),
        Mode::Datagram,
        Mode::RetransmittedDatagram,
        Mode::Forwarding,
    ] {
        let (sim, chain) = download(&TunnelSettings::new(mode), 1350, true);
        let client = sim.host::<Client>(chain.sender).unwrap();
        let server = sim
            .host::<QuicServer<BulkServerFactory>>(chain.receiver)
            .unwrap();
        let report = BulkReport::from_hosts(client.inner(), server)
            .unwrap_or_else(|| panic!("{mode:?}: no report; {:?}", client.stats()));
        assert_eq!(report.bytes, 500_000, "{mode:?}");
        let times = client.setup_times();
        assert!(times.opened > times.connected, "{mode:?}: {times:?}");
        if mode == Mode::Forwarding {
            let (out, back) = client.stats().forwarded;
            assert!(
                out > 10 && back > 100,
                "short headers forwarded: {out} {back}"
            );
        }
    }
}

/// Whether the inner QUIC connection completed its handshake.
fn inner_connected(client: &Client) -> bool {
    client
        .inner()
        .record()
        .and_then(|r| r.connected_at)
        .is_some()
}

#[test]
fn an_inner_initial_needs_the_larger_outer_packet() {
    // 1200 bytes of inner Initial plus the outer header, frame and HTTP
    // datagram prefix do not fit a 1200-byte outer packet...
    let settings = TunnelSettings::new(Mode::Datagram);
    let (sim, chain) = download(&settings, 1200, true);
    let client = sim.host::<Client>(chain.sender).unwrap();
    assert!(!inner_connected(client));
    assert!(client.stats().sender.dropped > 0, "{:?}", client.stats());
    // ...and do fit 1350 bytes.
    let (sim, chain) = download(&settings, 1350, true);
    let client = sim.host::<Client>(chain.sender).unwrap();
    assert!(inner_connected(client));
    assert_eq!(client.stats().sender.dropped, 0);
}

#[test]
fn a_target_off_the_allow_list_is_refused_with_403() {
    let (sim, chain) = download(&TunnelSettings::new(Mode::Datagram), 1350, false);
    let client = sim.host::<Client>(chain.sender).unwrap();
    let state = client.app_ref().unwrap().state(addr(SERVER));
    assert_eq!(state, Some(TunnelState::Refused(403)));
    let middle = sim.middlebox::<TunnelServer>(chain.middles[0]).unwrap();
    let stats = middle.stats();
    assert_eq!((stats[0].forbidden, stats[0].to_targets), (1, 0));
}
