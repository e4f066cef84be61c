//! A receiver keeps every gap a lossy, large window leaves in a stream:
//! noq-proto as published closes the connection ("too many gaps in stream
//! buffer") once a stream holds more than 1024 separate pieces; pepkit's
//! copy (third_party/noq-proto) allows as many as a 64 MiB window can make.

mod common;

use common::FixedWindow;
use netsim::*;
use quic::{BulkClient, BulkReport, BulkServerFactory, Direction};
use quic::{QuicClient, QuicConfig, QuicServer};
use std::sync::Arc;
use std::time::Duration;

/// A window of 6000 full packets, which loss never shrinks.
const WINDOW: u64 = 6000 * 1200;

#[test]
fn a_stream_with_thousands_of_gaps_completes() {
    let config = QuicConfig::new(Seed::new(3))
        .with_controller(Arc::new(FixedWindow(WINDOW)))
        .with_max_udp_payload(1200)
        .with_receive_window(64 << 20)
        .with_send_window(64 << 20);
    let (a, b) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.1.1:4433".parse().unwrap(),
    );
    let client = QuicClient::new(
        config.clone(),
        a,
        b,
        BulkClient::new(Direction::Download, 30_000_000),
    );
    let server = QuicServer::new(config, b, BulkServerFactory);
    // 30 % of the data (towards the client) is lost: a window of 6000 packets leaves about
    // 6000 · 0.3 · 0.7 ≈ 1260 gaps at the receiver.
    let link = LinkConfig::constant(Duration::from_millis(20), Rate::from_mbps(200));
    let spec = ChainSpec::new(
        HostSpec::new("c", a.ip(), client),
        HostSpec::new("s", b.ip(), server),
    )
    .hop(HopConfig::new(
        link.clone(),
        link.with_loss(LossModel::Bernoulli(Probability::new(0.3).unwrap())),
    ));
    let mut sim = Simulator::new(Seed::new(3));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(120));
    let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
    let server = sim
        .host::<QuicServer<BulkServerFactory>>(chain.receiver)
        .unwrap();
    let record = client.record().cloned().unwrap_or_default();
    assert!(record.error.is_none(), "{:?}", record.error);
    let report = BulkReport::from_hosts(client, server).expect("completed");
    assert_eq!(report.bytes, 30_000_000);
}
