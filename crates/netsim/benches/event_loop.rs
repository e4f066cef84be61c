//! Event-loop throughput: events processed per second of wall time for a
//! busy scenario (a window-limited sender saturating a 100 Mbit/s
//! bottleneck in a two-hop chain, with ACKs coming back).
//!
//! Run with `cargo bench -p pepkit-netsim`; divan reports the time per run
//! and, through the item counter, events per second.

use netsim::testing::{Sink, WindowSender};
use netsim::*;
use std::time::Duration;

fn main() {
    divan::main();
}

/// Builds and runs one scenario; returns the number of events processed.
fn saturated_chain(sim_secs: u64) -> u64 {
    let a: std::net::SocketAddr = "10.0.0.1:4000".parse().unwrap();
    let b: std::net::SocketAddr = "10.0.1.1:5000".parse().unwrap();
    let bottleneck = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(100))
        .with_buffer(BufferLimit::Packets(300));
    let access = LinkConfig::constant(Duration::from_millis(2), Rate::from_gbps(1));
    let sender = WindowSender::new(a, b, 1472, 400, Duration::from_secs(1));
    let spec = ChainSpec::new(
        HostSpec::new("sender", a.ip(), sender),
        HostSpec::new("receiver", b.ip(), Sink::echoing()),
    )
    .hop(HopConfig::symmetric(access.clone()))
    .middle(MiddleSpec::forwarder("router"))
    .hop(HopConfig::new(bottleneck, access));
    let mut sim = Simulator::new(Seed::new(1));
    sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(sim_secs));
    sim.stats().events
}

/// One simulated second at 100 Mbit/s (about 8 300 data packets and as many
/// ACKs, each crossing two links).
#[divan::bench(sample_count = 20)]
fn saturated_100mbit_1s(bencher: divan::Bencher<'_, '_>) {
    let events = saturated_chain(1);
    bencher
        .counter(divan::counter::ItemsCount::new(events))
        .bench_local(|| saturated_chain(1));
}
