//! Same seed ⇒ byte-identical captures and counters; another seed differs.

mod common;
use common::*;
use netsim::testing::{Sink, WindowSender};
use netsim::*;

struct RunResult {
    pcap_delivered: Vec<u8>,
    pcap_offered: Vec<u8>,
    links: Vec<LinkStats>,
    sim: SimStats,
    end: Time,
}

fn run(seed: u64) -> RunResult {
    let lossy = LinkConfig::constant(ms(10), Rate::from_mbps(10))
        .with_buffer(BufferLimit::Packets(30))
        .with_loss(LossModel::Bernoulli(Probability::new(0.02).unwrap()));
    let ge = LossModel::GilbertElliott(GilbertElliott::gilbert(
        Probability::new(0.01).unwrap(),
        Probability::new(0.3).unwrap(),
    ));
    let reverse = LinkConfig::constant(ms(10), Rate::from_mbps(10)).with_loss(ge);
    let sender =
        WindowSender::new(addr(SENDER), addr(RECEIVER), 1200, 50, ms(300)).with_total(3000);
    let spec = two_hop_chain(
        sender,
        Sink::echoing(),
        MiddleSpec::forwarder("router"),
        HopConfig::new(lossy, reverse.clone()),
        HopConfig::new(LinkConfig::constant(ms(5), Rate::from_mbps(50)), reverse),
    );
    let mut sim = Simulator::new(Seed::new(seed));
    let chain = sim.add_chain(spec).unwrap();
    let delivered = sim.capture(chain.hops[1].forward, CapturePoint::Delivered);
    let offered = sim.capture(chain.hops[0].forward, CapturePoint::Offered);
    let outcome = sim.run_until(Time::from_secs(60));
    assert_eq!(outcome.reason, StopReason::AllFinished);
    RunResult {
        pcap_delivered: sim.take_capture(delivered).unwrap(),
        pcap_offered: sim.take_capture(offered).unwrap(),
        links: sim.links().map(|(_, l)| *l.stats()).collect(),
        sim: *sim.stats(),
        end: outcome.end,
    }
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let a = run(42);
    let b = run(42);
    let c = run(43);
    assert!(a.pcap_delivered.len() > 1_000_000);
    assert!(
        a.pcap_delivered == b.pcap_delivered,
        "delivered captures differ"
    );
    assert!(a.pcap_offered == b.pcap_offered, "offered captures differ");
    assert_eq!(a.links, b.links);
    assert_eq!(a.sim, b.sim);
    assert_eq!(a.end, b.end);
    assert!(a.links[0].dropped_loss.packets > 0);

    assert!(a.pcap_delivered != c.pcap_delivered);
    assert_ne!(a.links, c.links);
}

#[test]
fn counters_add_up() {
    let r = run(7);
    for s in &r.links {
        assert_eq!(
            s.offered,
            PacketCount {
                packets: s.delivered.packets + s.dropped_total().packets,
                bytes: s.delivered.bytes + s.dropped_total().bytes,
            }
        );
    }
}
