//! A crate outside this one adds its own congestion controller by name.

mod common;

use common::FixedWindow;
use netsim::*;
use quic::{BulkClient, BulkReport, BulkServerFactory, Direction};
use quic::{QuicClient, QuicConfig, QuicServer};
use std::sync::Arc;

/// A constant window of 20 full packets.
const WINDOW: u64 = 20 * 1200;

#[test]
fn a_custom_controller_is_used() {
    let config = QuicConfig::new(Seed::new(5))
        .with_controller(Arc::new(FixedWindow(WINDOW)))
        .with_sampling(std::time::Duration::from_millis(100));
    let (a, b) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.1.1:4433".parse().unwrap(),
    );
    let client = QuicClient::new(
        config.clone(),
        a,
        b,
        BulkClient::new(Direction::Download, 500_000),
    );
    let server = QuicServer::new(config, b, BulkServerFactory);
    let link = LinkConfig::constant(std::time::Duration::from_millis(10), Rate::from_mbps(10));
    let spec = ChainSpec::new(
        HostSpec::new("c", a.ip(), client),
        HostSpec::new("s", b.ip(), server),
    )
    .hop(HopConfig::symmetric(link));
    let mut sim = Simulator::new(Seed::new(5));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(60));
    let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
    let server = sim
        .host::<QuicServer<BulkServerFactory>>(chain.receiver)
        .unwrap();
    let report = BulkReport::from_hosts(client, server).expect("completed");
    assert_eq!(report.bytes, 500_000);
    let samples = &server.records().next().unwrap().samples;
    assert!(!samples.is_empty());
    assert!(samples.iter().all(|s| s.cwnd_bytes == WINDOW));
    assert!(samples.iter().all(|s| s.bytes_in_flight <= WINDOW));
}
