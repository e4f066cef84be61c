//! qlog traces in virtual time (feature `qlog`).
#![cfg(feature = "qlog")]

use netsim::*;
use quic::*;
use std::time::Duration;

fn run(seed: u64) -> Vec<(String, Vec<u8>)> {
    let qlog = QlogSet::new();
    let (c, s) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.1.1:4433".parse().unwrap(),
    );
    let config = QuicConfig::new(Seed::new(seed)).with_qlog(qlog.clone());
    let bulk = BulkClient::new(Direction::Download, 100_000);
    let client = QuicClient::new(config.clone(), c, s, bulk);
    let server = QuicServer::new(config, s, BulkServerFactory);
    let link = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(10));
    let spec = ChainSpec::new(
        HostSpec::new("client", c.ip(), client),
        HostSpec::new("server", s.ip(), server),
    )
    .hop(HopConfig::symmetric(link));
    let mut sim = Simulator::new(Seed::new(seed));
    sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(60));
    qlog.traces()
}

#[test]
fn qlog_traces_are_deterministic_and_in_virtual_time() {
    let a = run(1);
    assert_eq!(
        a.len(),
        2,
        "{:?}",
        a.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    assert!(a[0].0.starts_with("client-") && a[1].0.starts_with("server-"));
    for (_, trace) in &a {
        let text = String::from_utf8(trace.clone()).unwrap();
        assert!(
            text.contains("\"time\":"),
            "{}",
            &text[..text.len().min(500)]
        );
        assert!(text.contains("packet_sent"));
    }
    assert_eq!(a, run(1));
}

#[test]
#[ignore = "prints the start of a trace"]
fn print_trace_head() {
    let traces = run(1);
    let text = String::from_utf8_lossy(&traces[0].1);
    println!("{}", &text[..text.len().min(1500)]);
}
