//! A crate outside this one adds its own congestion controller by name.

mod common;

use common::{FixedWindow, bulk_ends, download_ends};
use netsim::*;
use quic::{BulkReport, QuicConfig};
use std::sync::Arc;

/// A constant window of 20 full packets.
const WINDOW: u64 = 20 * 1200;

#[test]
fn a_custom_controller_is_used() {
    let config = QuicConfig::new(Seed::new(5))
        .with_controller(Arc::new(FixedWindow(WINDOW)))
        .with_sampling(std::time::Duration::from_millis(100));
    let link = LinkConfig::constant(std::time::Duration::from_millis(10), Rate::from_mbps(10));
    let spec = download_ends(config, 500_000).hop(HopConfig::symmetric(link));
    let mut sim = Simulator::new(Seed::new(5));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(60));
    let (client, server) = bulk_ends(&sim, &chain);
    let report = BulkReport::from_hosts(client, server).expect("completed");
    assert_eq!(report.bytes, 500_000);
    let samples = &server.records().next().unwrap().samples;
    assert!(!samples.is_empty());
    assert!(samples.iter().all(|s| s.cwnd_bytes == WINDOW));
    assert!(samples.iter().all(|s| s.bytes_in_flight <= WINDOW));
}
