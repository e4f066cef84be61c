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
    // Buffer: 100 packets, about three BDPs (10 Mbit/s × 40 ms = 50 kB).
    let access = LinkConfig::constant(s.delay, Rate::from_mbps(s.rate_mbps))
        .with_buffer(BufferLimit::Packets(100));
    // Random loss, if any, on the second hop only (both directions).
    let mut bottleneck = access.clone();
    if let Some(loss) = s.loss {
        bottleneck = bottleneck.with_loss(loss);
    }
    let spec = ChainSpec::new(
        HostSpec::new("client", client_addr.ip(), client),
        HostSpec::new("server", server_addr.ip(), server),
    )
    .hop(HopConfig::symmetric(access))
    .middle(MiddleSpec::forwarder("router"))
    .hop(HopConfig::symmetric(bottleneck));
    let mut sim = Simulator::new(Seed::new(s.seed));
    let chain = sim.add_chain(spec).unwrap();
    let pcap = sim.capture(chain.hops[0].reverse, CapturePoint::Delivered);
    let pcap_up = sim.capture(chain.hops[0].forward, CapturePoint::Delivered);
    let outcome = sim.run_until(Time::from_secs(120));
    let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
    let server = sim
        .host::<QuicServer<BulkServerFactory>>(chain.receiver)
        .unwrap();
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
