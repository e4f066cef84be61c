//! A trace-driven link delivers exactly what the trace allows.

mod common;
use common::*;
use netsim::testing::{CbrSource, Sink};
use netsim::*;
use std::sync::Arc;

fn trace_link(trace: &Arc<CapacityTrace>, delay_ms: u64) -> Link {
    Link::new(
        LinkConfig::trace(ms(delay_ms), Arc::clone(trace)),
        Seed::new(0),
    )
    .unwrap()
}

#[test]
fn departures_are_the_opportunities() {
    let trace = Arc::new(CapacityTrace::parse("0\n0\n5\n10\n").unwrap());
    let mut link = trace_link(&trace, 3);
    let at: Vec<u64> = (0..8)
        .map(|_| match link.offer(Time::ZERO, 1500) {
            Fate::Deliver { at } => at.as_nanos() / 1_000_000,
            Fate::Dropped(c) => panic!("dropped: {c:?}"),
        })
        .collect();
    // Opportunities 0,0,5,10 | 10,10,15,20 | 20,20 (period 10 ms), plus
    // 3 ms delay. The two at 0 ms pass before packets arriving at 0 ms are
    // queued (see below).
    assert_eq!(at, [8, 13, 13, 13, 18, 23, 23, 23]);
}

#[test]
fn small_packets_share_an_opportunity_and_large_ones_span_several() {
    let trace = Arc::new(CapacityTrace::parse("1\n2\n3\n4\n").unwrap());
    let mut link = trace_link(&trace, 0);
    let t = |f: Fate| match f {
        Fate::Deliver { at } => at.as_nanos() / 1_000_000,
        Fate::Dropped(c) => panic!("dropped: {c:?}"),
    };
    assert_eq!(t(link.offer(Time::ZERO, 700)), 1);
    assert_eq!(t(link.offer(Time::ZERO, 800)), 1); // 1500 B fit in one
    assert_eq!(t(link.offer(Time::ZERO, 100)), 2);
    assert_eq!(t(link.offer(Time::ZERO, 3000)), 4); // 1400 + 1500 + 100
    // 1400 B are left in the 4 ms opportunity: a packet queued by then uses
    // them; once that opportunity has passed they are wasted.
    assert_eq!(t(link.offer(Time::from_micros(3999), 1400)), 4);
    assert_eq!(t(link.offer(Time::from_micros(4500), 100)), 5);
    assert_eq!(t(link.offer(Time::from_micros(5500), 100)), 6);
}

#[test]
fn a_packet_arriving_at_an_opportunity_misses_it() {
    // mahimahi's LinkQueue::read_packet serves every opportunity up to the
    // current millisecond before it queues the arriving packet: a packet
    // never leaves in an opportunity of the millisecond it arrived in, nor
    // in what an earlier packet left of one. The simulator's events fall
    // exactly on trace milliseconds (integer-millisecond delays, a sender
    // answering an ACK the instant it arrives), so this tie is common
    // there; in real time it never happens.
    let trace = Arc::new(CapacityTrace::parse("1\n2\n3\n4\n").unwrap());
    let t = |f: Fate| match f {
        Fate::Deliver { at } => at.as_nanos(),
        Fate::Dropped(c) => panic!("dropped: {c:?}"),
    };
    let mut link = trace_link(&trace, 0);
    // Idle link: arriving at 2 ms, it leaves at 3 ms; a nanosecond earlier
    // it would have taken the 2 ms opportunity.
    assert_eq!(t(link.offer(Time::from_millis(2), 100)), 3_000_000);
    let mut early = trace_link(&trace, 0);
    assert_eq!(t(early.offer(Time::from_nanos(1_999_999), 100)), 2_000_000);
    // What the first packet left of the 3 ms opportunity serves a packet
    // queued before 3 ms, not one arriving at 3 ms.
    let mut before = link.clone();
    assert_eq!(
        t(before.offer(Time::from_nanos(2_999_999), 1400)),
        3_000_000
    );
    assert_eq!(t(link.offer(Time::from_millis(3), 1400)), 4_000_000);
}

#[test]
fn real_trace_backlogged_link_delivers_exactly_the_trace() {
    let text = bundled_trace("TMobile-LTE-short.up");
    let trace = Arc::new(CapacityTrace::parse(&text).unwrap());
    let window = Time::from_secs(10);
    let allowed = trace.opportunities_between(Time::ZERO, window);
    // Keep the link backlogged: offer more packets than the window allows.
    let mut link = trace_link(&trace, 0);
    let mut in_window = 0u64;
    for _ in 0..allowed + 5000 {
        if let Fate::Deliver { at } = link.offer(Time::ZERO, 1500)
            && at < window
        {
            in_window += 1;
        }
    }
    assert_eq!(in_window, allowed);
    // Against the file itself: lines with a timestamp below 10 000 ms.
    let lines = text
        .lines()
        .filter(|l| l.trim().parse::<u64>().is_ok_and(|ms| ms < 10_000))
        .count() as u64;
    assert_eq!(allowed, lines);
    // And the mean rate is what the README says (13.3 Mbit/s up).
    let mbps = trace.mean_rate().bits_per_sec() as f64 / 1e6;
    assert!((13.0..13.6).contains(&mbps), "{mbps}");
}

#[test]
fn bundled_gzip_file_reads_like_the_embedded_trace() {
    // The `.gz` file in the repository, as a scenario file names it.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces/cellular/TMobile-LTE-short.up.gz");
    let from_file = CapacityTrace::from_file(&path).unwrap();
    let embedded = traces::compressed("cellular/TMobile-LTE-short.up").unwrap();
    assert_eq!(from_file, CapacityTrace::from_bytes(embedded).unwrap());
    let text = bundled_trace("TMobile-LTE-short.up");
    assert_eq!(from_file, CapacityTrace::parse(&text).unwrap());
    assert_eq!(from_file.opportunities_per_period(), 155_381);
    assert_eq!(from_file.period(), std::time::Duration::from_secs(140));
}

#[test]
fn simulated_flow_over_trace_link_counts_opportunities() {
    // 2 opportunities per ms = 24 Mbit/s of 1500-byte packets; offer 36.
    let trace = Arc::new(CapacityTrace::from_millis(vec![1, 1, 2, 2, 3, 3, 4, 4, 5, 5]).unwrap());
    let link = LinkConfig::trace(ms(5), Arc::clone(&trace)).with_buffer(BufferLimit::Packets(50));
    let source = CbrSource::new(
        addr(SENDER),
        addr(RECEIVER),
        1472,
        std::time::Duration::from_nanos(333_333),
        30_000,
    );
    let spec = ChainSpec::new(
        HostSpec::new("sender", addr(SENDER).ip(), source),
        HostSpec::new("receiver", addr(RECEIVER).ip(), Sink::new()),
    )
    .hop(HopConfig::new(link, LinkConfig::delay_only(ms(5))));
    let mut sim = Simulator::new(Seed::new(3));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(5));
    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    // Over [1 s, 4 s) of departures (arrivals shifted by 5 ms) the link is
    // backlogged and delivers one packet per opportunity.
    let from = Time::from_secs(1);
    let to = Time::from_secs(4);
    let got = sink.received_between(from + ms(5), to + ms(5)).packets;
    assert_eq!(got, trace.opportunities_between(from, to));
    assert_eq!(got, 6000);
}
