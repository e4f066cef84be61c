//! Two QUIC flows with different controllers share one bottleneck.

mod common;
use common::noq;

use netsim::*;
use quic::*;
use std::net::SocketAddr;
use std::time::Duration;

/// Runs two 3 MB downloads (the second starting at 1 s) through a
/// 10 Mbit/s, 20 ms bottleneck; returns both reports.
fn run(seed: u64) -> Vec<BulkReport> {
    let access = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100));
    let bottleneck = LinkConfig::constant(Duration::from_millis(20), Rate::from_mbps(10))
        .with_buffer(BufferLimit::Packets(100));
    let mut spec = DumbbellSpec::new(HopConfig::symmetric(bottleneck));
    for (i, congestion) in ["cubic", "newreno"].into_iter().enumerate() {
        let server: SocketAddr = format!("10.0.{i}.1:4433").parse().unwrap();
        let client: SocketAddr = format!("10.1.{i}.1:5000").parse().unwrap();
        let config = QuicConfig::new(Seed::new(seed)).with_controller(noq(congestion));
        let bulk = BulkClient::new(Direction::Download, 3_000_000);
        let start = Time::from_secs(i as u64);
        spec = spec.pair(FlowPair {
            sender: HostSpec::new(
                "server",
                server.ip(),
                QuicServer::new(config.clone(), server, BulkServerFactory),
            ),
            receiver: HostSpec::new(
                "client",
                client.ip(),
                QuicClient::new(config, client, server, bulk),
            )
            .starting_at(start),
            sender_access: HopConfig::symmetric(access.clone()),
            receiver_access: HopConfig::symmetric(access.clone()),
        });
    }
    let mut sim = Simulator::new(Seed::new(seed));
    let dumbbell = sim.add_dumbbell(spec).unwrap();
    let outcome = sim.run_until(Time::from_secs(60));
    assert_eq!(outcome.reason, StopReason::AllFinished);
    dumbbell
        .pairs
        .iter()
        .map(|pair| {
            let client = sim.host::<QuicClient<BulkClient>>(pair.receiver).unwrap();
            let server = sim
                .host::<QuicServer<BulkServerFactory>>(pair.sender)
                .unwrap();
            BulkReport::from_hosts(client, server).expect("flow completed")
        })
        .collect()
}

#[test]
fn two_flows_share_a_bottleneck_deterministically() {
    let reports = run(3);
    assert_eq!(reports.len(), 2);
    assert!(reports[1].start >= Time::from_secs(1));
    // They overlap, so neither gets the whole link for its whole life.
    assert!(reports[0].end > reports[1].start);
    for report in &reports {
        assert!(report.goodput.bits_per_sec() < 10_000_000, "{report:?}");
        assert!(report.goodput.bits_per_sec() > 1_000_000, "{report:?}");
    }
    assert_eq!(reports, run(3));
}
