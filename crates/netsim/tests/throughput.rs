//! A window-limited sender keeps a lossless 10 Mbit/s link busy.

mod common;
use common::*;
use netsim::testing::{Sink, WindowSender};
use netsim::*;

#[test]
fn saturated_lossless_link_reaches_link_rate() {
    let rate = Rate::from_mbps(10);
    let bottleneck = LinkConfig::constant(ms(10), rate).with_buffer(BufferLimit::Packets(100));
    let fast = LinkConfig::constant(ms(5), Rate::from_mbps(100));
    // RTT ≈ 2·(10+5) ms + serialisation ≈ 32 ms; BDP ≈ 27 packets of 1500 B.
    let sender = WindowSender::new(addr(SENDER), addr(RECEIVER), 1472, 60, ms(1000));
    let spec = two_hop_chain(
        sender,
        Sink::echoing(),
        MiddleSpec::forwarder("router"),
        HopConfig::new(fast.clone(), fast.clone()),
        HopConfig::new(bottleneck, fast),
    );
    let mut sim = Simulator::new(Seed::new(1));
    let chain = sim.add_chain(spec).unwrap();
    let outcome = sim.run_until(Time::from_secs(10));
    assert_eq!(outcome.reason, StopReason::TimeLimit);

    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    let window = sink.received_between(Time::from_secs(1), Time::from_secs(9));
    let seconds = 8;
    let achieved = window.bytes * 8 / seconds; // bit/s
    let fraction = achieved as f64 / rate.bits_per_sec() as f64;
    assert!(
        fraction >= 0.9,
        "achieved {achieved} bit/s = {fraction:.4} of link rate"
    );
    // Never more than the link can carry: at most one packet more than
    // rate × window, for the packet straddling the window's start.
    let capacity_bytes = rate.bits_per_sec() * seconds / 8;
    assert!(
        window.bytes <= capacity_bytes + 1500,
        "{} B in the window, capacity {capacity_bytes} B",
        window.bytes
    );
    let stats = sim.link_stats(chain.hops[1].forward);
    assert_eq!(stats.dropped_total().packets, 0, "lossless: {stats:?}");
    assert_eq!(sim.host::<WindowSender>(chain.sender).unwrap().lost(), 0);
    assert!(stats.offered.packets > 8000);
}
