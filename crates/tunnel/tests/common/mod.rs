//! A chain for tunnel tests: client (with the tunnel client beside it) —
//! access hop — tunnel server — far hop — server.

#![allow(dead_code)]

use netsim::{ChainSpec, HopConfig, Host, HostSpec, LinkConfig, MiddleSpec, Rate, Seed, Simulator};
use quic::QuicConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tunnel::{
    AllowList, ServerLimits, ServerShared, TunnelClientConfig, TunnelClientHost, TunnelServer,
    TunnelServerConfig, TunnelSettings, UriTemplate,
};

pub(crate) const CLIENT: &str = "10.0.0.1:5000";
pub(crate) const TUNNEL_CLIENT: &str = "10.0.0.1:5001";
pub(crate) const PROXY: &str = "10.0.9.1:443";
pub(crate) const SERVER: &str = "10.0.1.1:4433";

pub(crate) fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// The outer connection's configuration (1350-byte payloads, h3, no
/// congestion control).
pub(crate) fn outer(seed: Seed) -> QuicConfig {
    tunnel::outer_config(
        QuicConfig::new(seed).with_controller(Arc::new(cc::Unlimited)),
        1350,
    )
}

/// The tunnel client config for one target.
pub(crate) fn client_config(seed: Seed, settings: &TunnelSettings) -> TunnelClientConfig {
    TunnelClientConfig {
        settings: settings.clone(),
        quic: outer(seed),
        proxy: addr(PROXY),
        local: addr(TUNNEL_CLIENT),
        template: UriTemplate::default(),
        targets: vec![addr(SERVER)],
        feedback: None,
        client_cids: None,
    }
}

/// The tunnel server, allowing the server only.
pub(crate) fn server(seed: Seed, settings: &TunnelSettings) -> TunnelServer {
    server_with(seed, settings, ServerLimits::default(), 1)
}

/// The tunnel server with `limits`, allowing `ports` ports of the server
/// from its port.
pub(crate) fn server_with(
    seed: Seed,
    settings: &TunnelSettings,
    limits: ServerLimits,
    ports: u16,
) -> TunnelServer {
    let target = addr(SERVER);
    let last = target.port() + ports - 1;
    TunnelServer::new(TunnelServerConfig {
        addr: addr(PROXY),
        quic: outer(seed),
        shared: ServerShared {
            settings: settings.clone(),
            template: UriTemplate::default(),
            allow: Arc::new(AllowList::default().allow(target.ip(), target.port()..=last)),
            sample_interval: None,
            limits,
        },
        first_port: 20_000,
    })
}

/// Builds the chain and returns the simulator and the nodes.
pub(crate) fn chain(
    seed: Seed,
    client: Box<dyn Host>,
    server_host: Box<dyn Host>,
    middle: TunnelServer,
    access: LinkConfig,
    far: LinkConfig,
) -> (Simulator, netsim::Chain) {
    let spec = ChainSpec::new(
        HostSpec::boxed("client", addr(CLIENT).ip(), client),
        HostSpec::boxed("server", addr(SERVER).ip(), server_host),
    )
    .hop(HopConfig::symmetric(access))
    .middle(MiddleSpec::with_boxed("tunnel", Box::new(middle)).with_addr(addr(PROXY).ip()))
    .hop(HopConfig::symmetric(far));
    let mut sim = Simulator::new(seed);
    let chain = sim.add_chain(spec).unwrap();
    (sim, chain)
}

/// A link.
pub(crate) fn link(ms: u64, mbps: u64) -> LinkConfig {
    LinkConfig::constant(Duration::from_millis(ms), Rate::from_mbps(mbps))
}

/// Wraps a host in the tunnel client.
pub(crate) fn wrap<H: Host>(
    inner: H,
    seed: Seed,
    settings: &TunnelSettings,
) -> TunnelClientHost<H> {
    TunnelClientHost::new(inner, client_config(seed, settings))
}
