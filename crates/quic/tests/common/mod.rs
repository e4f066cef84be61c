//! Shared scenario for the whole-run tests: a client and a server joined by
//! a two-hop chain through one router.

#![allow(dead_code)]

use netsim::*;
use quic::*;
use std::net::SocketAddr;
use std::time::Duration;

/// A controller from outside the crate: a constant window of `.0` bytes
/// that neither loss nor delay changes (its own factory).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FixedWindow(pub(crate) u64);

impl congestion::Controller for FixedWindow {
    fn on_congestion_event(
        &mut self,
        _: std::time::Instant,
        _: std::time::Instant,
        _: bool,
        _: bool,
        _: u64,
        _: u64,
    ) {
    }
    fn on_mtu_update(&mut self, _: u16) {}
    fn window(&self) -> u64 {
        self.0
    }
    fn clone_box(&self) -> Box<dyn congestion::Controller> {
        Box::new(*self)
    }
    fn initial_window(&self) -> u64 {
        self.0
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl congestion::ControllerFactory for FixedWindow {
    fn build(
        self: std::sync::Arc<Self>,
        _: std::time::Instant,
        _: u16,
    ) -> Box<dyn congestion::Controller> {
        Box::new(*self)
    }
}

/// noq-proto's controller called `name` (`cubic`, `newreno`, `bbr`).
pub(crate) fn noq(name: &str) -> SharedFactory {
    use quic::congestion::{Bbr3Config, CubicConfig, NewRenoConfig};
    match name {
        "cubic" => std::sync::Arc::new(CubicConfig::default()),
        "newreno" => std::sync::Arc::new(NewRenoConfig::default()),
        "bbr" => std::sync::Arc::new(Bbr3Config::default()),
        other => panic!("no noq-proto controller {other:?}"),
    }
}

/// One scenario's knobs.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    pub(crate) seed: u64,
    pub(crate) congestion: &'static str,
    pub(crate) direction: Direction,
    pub(crate) bytes: u64,
    pub(crate) rate_mbps: u64,
    pub(crate) delay: Duration,
    pub(crate) loss: Option<LossModel>,
    pub(crate) sampling: Option<Duration>,
    pub(crate) keylog: bool,
    /// What the client asks of the server's acknowledgements.
    pub(crate) ack_frequency: Option<AckFrequency>,
}

impl Scenario {
    pub(crate) fn new(bytes: u64) -> Scenario {
        Scenario {
            seed: 1,
            congestion: "cubic",
            direction: Direction::Download,
            bytes,
            rate_mbps: 10,
            delay: Duration::from_millis(10),
            loss: None,
            sampling: None,
            keylog: false,
            ack_frequency: None,
        }
    }
}

/// What a run produced.
pub(crate) struct Outcome {
    pub(crate) report: Option<BulkReport>,
    pub(crate) client: ConnRecord,
    pub(crate) server: ConnRecord,
    /// Client's access link, towards the client (downloads' data).
    pub(crate) pcap: Vec<u8>,
    /// Client's access link, towards the server (acks, uploads' data).
    pub(crate) pcap_up: Vec<u8>,
    pub(crate) keylog: String,
    pub(crate) stop: StopReason,
    pub(crate) end: Time,
}

pub(crate) fn run(s: &Scenario) -> Outcome {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let server_addr: SocketAddr = "10.0.1.1:4433".parse().unwrap();
    let keylog = KeyLog::new();
    let mut config = QuicConfig::new(Seed::new(s.seed)).with_controller(noq(s.congestion));
    if let Some(interval) = s.sampling {
        config = config.with_sampling(interval);
    }
    if s.keylog {
        config = config.with_keylog(keylog.clone());
    }
    let client_config = match s.ack_frequency {
        Some(frequency) => config.clone().with_ack_frequency(frequency),
        None => config.clone(),
    };
    let client = QuicClient::new(
        client_config,
        client_addr,
        server_addr,
        BulkClient::new(s.direction, s.bytes),
    );
    let server = QuicServer::new(config, server_addr, BulkServerFactory);
    let spec = through_router(
        HostSpec::new("client", client_addr.ip(), client),
        HostSpec::new("server", server_addr.ip(), server),
        s.delay,
        s.rate_mbps,
        s.loss,
    );
    let mut sim = Simulator::new(Seed::new(s.seed));
    let chain = sim.add_chain(spec).unwrap();
    let pcap = sim.capture(chain.hops[0].reverse, CapturePoint::Delivered);
    let pcap_up = sim.capture(chain.hops[0].forward, CapturePoint::Delivered);
    let outcome = sim.run_until(Time::from_secs(120));
    let (client, server) = bulk_ends(&sim, &chain);
    let report = BulkReport::from_hosts(client, server);
    let client = client.record().cloned().unwrap_or_default();
    let server = server.records().next().cloned().unwrap_or_default();
    Outcome {
        report,
        client,
        server,
        pcap: sim.take_capture(pcap).unwrap(),
        pcap_up: sim.take_capture(pcap_up).unwrap(),
        keylog: keylog.contents(),
        stop: outcome.reason,
        end: sim.now(),
    }
}

/// `client` and `server` joined through one router by two hops of `delay`
/// and `rate_mbps` with 100-packet buffers (about three BDPs at 10 Mbit/s
/// and 40 ms), random `loss`, if any, on the second hop only (both
/// directions).
pub(crate) fn through_router(
    client: HostSpec,
    server: HostSpec,
    delay: Duration,
    rate_mbps: u64,
    loss: Option<LossModel>,
) -> ChainSpec {
    let access = LinkConfig::constant(delay, Rate::from_mbps(rate_mbps))
        .with_buffer(BufferLimit::Packets(100));
    let mut bottleneck = access.clone();
    if let Some(loss) = loss {
        bottleneck = bottleneck.with_loss(loss);
    }
    ChainSpec::new(client, server)
        .hop(HopConfig::symmetric(access))
        .middle(MiddleSpec::forwarder("router"))
        .hop(HopConfig::symmetric(bottleneck))
}

/// Sidekick scenario 2's two hops: near (1 ms, 100 Mbit/s, random `loss`
/// if above zero) and far (25 ms, 10 Mbit/s), each with a 100-packet
/// buffer (about 2.4 BDPs of the far hop).
pub(crate) fn near_and_far(loss: f64) -> (LinkConfig, LinkConfig) {
    let mut near = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
        .with_buffer(BufferLimit::Packets(100));
    if loss > 0.0 {
        near = near.with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
    }
    let far = LinkConfig::constant(Duration::from_millis(25), Rate::from_mbps(10))
        .with_buffer(BufferLimit::Packets(100));
    (near, far)
}

/// The ends of a download of `bytes` by our QUIC client at 10.0.0.1:5000
/// ("c") from our QUIC server at 10.0.1.1:4433 ("s"), both on `config`;
/// the caller adds the hops between them.
pub(crate) fn download_ends(config: QuicConfig, bytes: u64) -> ChainSpec {
    let (a, b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.1.1:4433".parse().unwrap(),
    );
    let (client, server) = bulk_pair(config, a, b, Direction::Download, bytes);
    ChainSpec::new(
        HostSpec::new("c", a.ip(), client),
        HostSpec::new("s", b.ip(), server),
    )
}

/// Our QUIC client at `client` moving `bytes` in `direction` with our QUIC
/// server at `server`, both on `config`.
pub(crate) fn bulk_pair(
    config: QuicConfig,
    client: SocketAddr,
    server: SocketAddr,
    direction: Direction,
    bytes: u64,
) -> (QuicClient<BulkClient>, QuicServer<BulkServerFactory>) {
    let quic_client = QuicClient::new(
        config.clone(),
        client,
        server,
        BulkClient::new(direction, bytes),
    );
    (
        quic_client,
        QuicServer::new(config, server, BulkServerFactory),
    )
}

/// The bulk client and server at the ends of `chain`.
pub(crate) fn bulk_ends<'a>(
    sim: &'a Simulator,
    chain: &Chain,
) -> (
    &'a QuicClient<BulkClient>,
    &'a QuicServer<BulkServerFactory>,
) {
    let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
    let server = sim
        .host::<QuicServer<BulkServerFactory>>(chain.receiver)
        .unwrap();
    (client, server)
}
