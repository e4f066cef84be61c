//! With a full drop-tail buffer of B bytes at rate R, one-way delay is
//! propagation + B/R.

mod common;
use common::*;
use netsim::testing::{CbrSource, Sink};
use netsim::*;

#[test]
fn full_drop_tail_buffer_adds_b_over_r() {
    let rate = Rate::from_mbps(10);
    let buffer = 30_000u64; // 20 packets of 1500 B
    let prop = ms(20);
    let bottleneck = LinkConfig::constant(prop, rate).with_buffer(BufferLimit::Bytes(buffer));
    // 1500-byte IP packets every 0.6 ms = 20 Mbit/s: twice the link rate.
    let source = CbrSource::new(
        addr(SENDER),
        addr(RECEIVER),
        1472,
        std::time::Duration::from_micros(600),
        5000,
    );
    let spec = ChainSpec::new(
        HostSpec::new("sender", addr(SENDER).ip(), source),
        HostSpec::new("receiver", addr(RECEIVER).ip(), Sink::new()),
    )
    .hop(HopConfig::new(bottleneck, LinkConfig::delay_only(prop)));
    let mut sim = Simulator::new(Seed::new(2));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(10));

    let expected = prop + rate.transmit_time(buffer);
    let packet_time = rate.transmit_time(1500);
    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    // The buffer is full after about 20 packets (12 ms at 2x overload); skip
    // the first 100 ms.
    let steady: Vec<_> = sink
        .arrivals()
        .iter()
        .filter(|a| a.probe.unwrap().sent_at >= Time::from_millis(100))
        .map(|a| a.one_way_delay().unwrap())
        .collect();
    assert!(steady.len() > 2000);
    for d in &steady {
        let err = d.abs_diff(expected);
        assert!(
            err <= packet_time,
            "delay {d:?} vs expected {expected:?} (±{packet_time:?})"
        );
    }
    let stats = sim.link_stats(chain.hops[0].forward);
    // Half the packets cannot fit.
    let drop_share = stats.dropped_buffer.packets as f64 / stats.offered.packets as f64;
    assert!((0.45..0.55).contains(&drop_share), "{stats:?}");
    assert!(stats.max_queue_bytes <= buffer);
}

#[test]
fn packet_limit_counts_packets() {
    let mut link = Link::new(
        LinkConfig::constant(ms(0), Rate::from_mbps(1)).with_buffer(BufferLimit::Packets(3)),
        Seed::new(0),
    )
    .unwrap();
    let fates: Vec<_> = (0..5).map(|_| link.offer(Time::ZERO, 100)).collect();
    assert!(matches!(fates[2], Fate::Deliver { .. }));
    assert_eq!(fates[3], Fate::Dropped(DropCause::BufferFull));
    assert_eq!(link.occupancy(Time::ZERO).packets, 3);
    // 100 B at 1 Mbit/s = 800 µs: after the first departs, one slot frees.
    assert!(matches!(
        link.offer(Time::from_micros(800), 100),
        Fate::Deliver { .. }
    ));
}
