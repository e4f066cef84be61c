//! Several flows share a dumbbell's bottleneck; each starts at its own time.

mod common;
use common::*;
use netsim::testing::{Sink, WindowSender};
use netsim::*;
use std::net::SocketAddr;

#[test]
fn flows_start_on_time_and_share_the_bottleneck() {
    let rate = Rate::from_mbps(20);
    let bottleneck = HopConfig::new(
        LinkConfig::constant(ms(10), rate).with_buffer(BufferLimit::Packets(200)),
        LinkConfig::constant(ms(10), rate),
    );
    let access = HopConfig::symmetric(LinkConfig::constant(ms(2), Rate::from_mbps(100)));
    let mut spec = DumbbellSpec::new(bottleneck);
    let starts = [0u64, 2, 4];
    for (i, &start) in starts.iter().enumerate() {
        let s: SocketAddr = format!("10.0.0.{}:4000", i + 1).parse().unwrap();
        let r: SocketAddr = format!("10.0.1.{}:5000", i + 1).parse().unwrap();
        spec = spec.pair(FlowPair {
            sender: HostSpec::new(
                format!("s{i}"),
                s.ip(),
                WindowSender::new(s, r, 1472, 40, ms(500)),
            )
            .starting_at(Time::from_secs(start)),
            receiver: HostSpec::new(format!("r{i}"), r.ip(), Sink::echoing()),
            sender_access: access.clone(),
            receiver_access: access.clone(),
        });
    }
    let mut sim = Simulator::new(Seed::new(11));
    let d = sim.add_dumbbell(spec).unwrap();
    sim.run_until(Time::from_secs(8));

    for (pair, &start) in d.pairs.iter().zip(&starts) {
        let sink = sim.host::<Sink>(pair.receiver).unwrap();
        let first = sink.arrivals().first().unwrap().at;
        // First packet: start + 2 + 10 + 2 ms of propagation, plus
        // serialisation and at most a full bottleneck buffer (200 packets
        // at 20 Mbit/s = 120 ms) of queueing behind the earlier flows.
        let earliest = Time::from_secs(start) + ms(14);
        let latest = earliest + ms(2) + rate.transmit_time(200 * 1500);
        assert!(first >= earliest && first < latest, "{first}");
        if start == 0 {
            assert!(first < earliest + ms(2), "{first}");
        }
    }
    // From 5 s on all three share the 20 Mbit/s bottleneck, which stays full.
    let (from, to) = (Time::from_secs(5), Time::from_secs(8));
    let per_flow: Vec<u64> = d
        .pairs
        .iter()
        .map(|p| {
            sim.host::<Sink>(p.receiver)
                .unwrap()
                .received_between(from, to)
                .bytes
                * 8
                / 3
        })
        .collect();
    let total: u64 = per_flow.iter().sum();
    assert!(
        total as f64 > 0.95 * rate.bits_per_sec() as f64,
        "{per_flow:?}"
    );
    assert!(total <= rate.bits_per_sec(), "{per_flow:?}");
    for &f in &per_flow {
        assert!(f > rate.bits_per_sec() / 10, "{per_flow:?}");
    }
    assert_eq!(sim.stats().unroutable, 0);
}
