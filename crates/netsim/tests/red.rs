//! RED drops early under sustained overload and adaptive RED keeps the
//! average queue in its target band.

use netsim::*;
use rand::Rng;
use std::time::Duration;

#[test]
fn adaptive_red_drops_early_and_holds_the_target_band() {
    let rate = Rate::from_mbps(10);
    // tc qdisc … red limit 400000 avpkt 1000 adaptive harddrop bandwidth 10Mbit
    let red = RedConfig::new(400_000, rate);
    let mut link = Link::new(
        LinkConfig::constant(Duration::from_millis(10), rate)
            .with_red(red)
            .with_sampling(Duration::from_millis(10), 100_000),
        Seed::new(9),
    )
    .unwrap();
    let params = link.red_params().unwrap().clone();
    assert_eq!((params.qth_min, params.qth_max), (33_333, 100_000));

    // Poisson arrivals of 1000-byte packets at 12 Mbit/s: 20% overload,
    // unresponsive, for 60 s.
    let mut rng = Seed::new(1).rng("arrivals");
    let mean_gap_ns = 1000.0 * 8.0 / 12e6 * 1e9;
    let mut t = 0.0_f64;
    let end = 60e9;
    let mut first_drop_queue = None;
    while t < end {
        let u: f64 = rng.random();
        t += -mean_gap_ns * (1.0 - u).ln();
        let now = Time::from_nanos(t as u64);
        let queue = link.occupancy(now).bytes;
        if let Fate::Dropped(cause) = link.offer(now, 1000) {
            assert_ne!(cause, DropCause::BufferFull, "hard limit reached");
            first_drop_queue.get_or_insert(queue);
        }
    }
    let stats = *link.stats();
    // Early: RED dropped, the hard limit never did, and the first drop came
    // with the queue far below the limit.
    assert!(stats.dropped_red_early.packets > 1000, "{stats:?}");
    assert_eq!(stats.dropped_buffer.packets, 0);
    assert!(first_drop_queue.unwrap() < params.limit / 2);
    assert!(stats.max_queue_bytes < params.limit);
    // The link stays busy: what it accepts is about its capacity.
    let offered_rate = stats.offered.bytes * 8 / 60;
    let accepted_rate = stats.delivered.bytes * 8 / 60;
    assert!(accepted_rate as f64 > 0.97 * rate.bits_per_sec() as f64);
    assert!(accepted_rate < offered_rate);

    // Average queue over the last 30 s (after adaptation settled) is in
    // [min + 0.4 (max − min), min + 0.6 (max − min)].
    let late: Vec<u64> = link
        .queue_samples()
        .iter()
        .filter(|s| s.at >= Time::from_secs(30))
        .map(|s| s.red_average_bytes.unwrap())
        .collect();
    let mean = late.iter().sum::<u64>() / late.len() as u64;
    assert!(
        (params.target_min..=params.target_max).contains(&mean),
        "mean average queue {mean} B outside [{}, {}]",
        params.target_min,
        params.target_max
    );
    // max_p adapted upwards from 2%.
    let max_p = link.red_status().unwrap().max_p.as_f64();
    assert!(max_p > 0.05, "max_p {max_p}");
}

/// A 10 Mbit/s link with a 400 kB RED queue whose max_p stays at 2%.
fn non_adaptive_red_link() -> Link {
    let rate = Rate::from_mbps(10);
    Link::new(
        LinkConfig::constant(Duration::ZERO, rate)
            .with_red(RedConfig::new(400_000, rate).with_adaptive(false)),
        Seed::new(1),
    )
    .unwrap()
}

#[test]
fn non_adaptive_red_below_min_never_drops() {
    let mut link = non_adaptive_red_link();
    // 8 Mbit/s of 1000 B packets, evenly spaced: the queue never builds.
    for i in 0..100_000u64 {
        let fate = link.offer(Time::from_micros(i * 1000), 1000);
        assert!(matches!(fate, Fate::Deliver { .. }));
    }
    assert_eq!(link.red_status().unwrap().average_bytes, 0);
}

#[test]
fn average_decays_over_idle_periods() {
    let mut link = non_adaptive_red_link();
    // A burst of 30 packets at t = 0 builds the average (the backlog stays
    // below the minimum threshold, so none is dropped).
    for _ in 0..30 {
        assert!(matches!(link.offer(Time::ZERO, 1000), Fate::Deliver { .. }));
    }
    let built = link.red_status().unwrap().average_bytes;
    assert!(built > 5_000, "{built}");
    // The queue drains at 24 ms; after a further 100 avpkt times (80 ms) of
    // idleness the average is built·(31/32)^100 ≈ 4% of what it was.
    link.offer(Time::from_millis(104), 1000);
    let decayed = link.red_status().unwrap().average_bytes;
    let expected = built as f64 * (31.0f64 / 32.0).powi(100);
    assert!(
        (decayed as f64 - expected).abs() <= expected * 0.02 + 1.0,
        "{decayed} vs {expected}"
    );
}
