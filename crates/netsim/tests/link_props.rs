//! Model-based properties of the link for random configurations and
//! arrival sequences.

use netsim::*;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

fn capacity() -> impl Strategy<Value = Capacity> {
    prop_oneof![
        Just(Capacity::Unlimited),
        (1u64..1_000).prop_map(|mbps| Capacity::Constant(Rate::from_mbps(mbps))),
        proptest::collection::vec(0u64..5, 1..20).prop_map(|gaps| {
            let mut t = 0;
            let mut times: Vec<u64> = gaps
                .iter()
                .map(|g| {
                    t += g;
                    t
                })
                .collect();
            times.push(t + 1);
            Capacity::Trace(Arc::new(CapacityTrace::from_millis(times).unwrap()))
        }),
    ]
}

fn buffer() -> impl Strategy<Value = BufferLimit> {
    prop_oneof![
        Just(BufferLimit::Unlimited),
        (1500u64..100_000).prop_map(BufferLimit::Bytes),
        (1u64..100).prop_map(BufferLimit::Packets),
    ]
}

proptest! {
    #[test]
    fn fifo_bounded_and_counted(
        capacity in capacity(),
        limit in buffer(),
        loss in 0.0f64..0.3,
        delay_us in 0u64..50_000,
        arrivals in proptest::collection::vec((0u64..2_000_000, 40usize..=1500), 1..400),
        seed in any::<u64>(),
    ) {
        let delay = Duration::from_micros(delay_us);
        let config = LinkConfig::new(delay, capacity.clone())
            .with_buffer(limit)
            .with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
        let mut link = Link::new(config, Seed::new(seed)).unwrap();
        let mut now = Time::ZERO;
        let mut last_delivery = Time::ZERO;
        let mut prev_departure = Time::ZERO;
        for (gap_ns, len) in arrivals {
            now += Duration::from_nanos(gap_ns);
            let before = link.occupancy(now);
            match link.offer(now, len) {
                Fate::Deliver { at } => {
                    prop_assert!(at >= now + delay);
                    prop_assert!(at >= last_delivery, "FIFO violated");
                    last_delivery = at;
                    let departure = at - delay;
                    if let Capacity::Constant(rate) = &capacity {
                        // Work-conserving: starts when the link is free.
                        let start = now.max(prev_departure);
                        let tx = rate.transmit_time(len as u64);
                        let exact = start + tx;
                        prop_assert!(departure <= exact && departure + Duration::from_nanos(1) >= exact);
                    }
                    prev_departure = departure;
                    match limit {
                        BufferLimit::Bytes(max) => prop_assert!(before.bytes + len as u64 <= max),
                        BufferLimit::Packets(max) => prop_assert!(before.packets < max),
                        BufferLimit::Unlimited => {}
                    }
                }
                Fate::Dropped(DropCause::BufferFull) => {
                    prop_assert!(!matches!(limit, BufferLimit::Unlimited));
                }
                Fate::Dropped(DropCause::Loss) => {}
                Fate::Dropped(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        let s = link.stats();
        prop_assert_eq!(s.offered.packets, s.delivered.packets + s.dropped_total().packets);
        prop_assert_eq!(s.offered.bytes, s.delivered.bytes + s.dropped_total().bytes);
    }
}

/// Jitter spreads each packet's delay over `[delay, delay + jitter]`,
/// keeps the packets in order, and without jitter nothing changes.
#[test]
fn jitter_spreads_delays_without_reordering() {
    use std::time::Duration;
    let base = LinkConfig::constant(Duration::from_millis(5), Rate::from_mbps(100));
    let offer_all = |config: LinkConfig| {
        let mut link = Link::new(config, Seed::new(3)).unwrap();
        (0..5000u64)
            .map(|i| match link.offer(Time::from_micros(i * 50), 1000) {
                Fate::Deliver { at } => at,
                Fate::Dropped(cause) => panic!("{cause:?}"),
            })
            .collect::<Vec<Time>>()
    };
    let plain = offer_all(base.clone());
    let jittered = offer_all(base.clone().with_jitter(Duration::from_millis(2)));
    assert_eq!(offer_all(base.clone().with_jitter(Duration::ZERO)), plain);
    assert!(jittered.windows(2).all(|w| w[0] <= w[1]));
    let extra: Vec<Duration> = plain.iter().zip(&jittered).map(|(p, j)| *j - *p).collect();
    assert!(
        extra
            .iter()
            .all(|e| *e <= Duration::from_millis(2) + Duration::from_micros(50))
    );
    // Packets 50 µs apart keep their order, so a packet waits for the
    // latest of its predecessors' draws: the mean rises above 1 ms.
    let mean = extra.iter().sum::<Duration>() / extra.len() as u32;
    assert!(
        mean > Duration::from_micros(700) && mean < Duration::from_micros(1900),
        "{mean:?}"
    );
}
