//! Whole runs of the short-flows workload over a netsim chain
//! (client — 10 Mbit/s, 10 ms — router — 10 Mbit/s, 10 ms — server).

mod common;
use common::noq;

use netsim::*;
use quic::*;
use std::net::SocketAddr;
use std::time::Duration;

const RATE_MBPS: u64 = 10;
const HOP_DELAY: Duration = Duration::from_millis(10);

/// Runs `client` against a short-flows server; returns the report (if every
/// flow completed) and how the run stopped.
fn run<H: Host>(
    seed: u64,
    client: impl FnOnce(QuicConfig, SocketAddr, SocketAddr) -> H,
    report: impl Fn(&H) -> Option<ShortFlowsReport>,
) -> (Option<ShortFlowsReport>, StopReason) {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let server_addr: SocketAddr = "10.0.1.1:4433".parse().unwrap();
    let config = QuicConfig::new(Seed::new(seed)).with_controller(noq("cubic"));
    let client = client(config.clone(), client_addr, server_addr);
    let server = QuicServer::new(config, server_addr, ShortFlowsServerFactory);
    let link = LinkConfig::constant(HOP_DELAY, Rate::from_mbps(RATE_MBPS))
        .with_buffer(BufferLimit::Packets(100));
    let spec = ChainSpec::new(
        HostSpec::new("client", client_addr.ip(), client),
        HostSpec::new("server", server_addr.ip(), server),
    )
    .hop(HopConfig::symmetric(link.clone()))
    .middle(MiddleSpec::forwarder("router"))
    .hop(HopConfig::symmetric(link));
    let mut sim = Simulator::new(Seed::new(seed));
    let chain = sim.add_chain(spec).unwrap();
    let outcome = sim.run_until(Time::from_secs(60));
    let client = sim.host::<H>(chain.sender).unwrap();
    (report(client), outcome.reason)
}

/// 20 requests of 100 B answered by 100 kB, one after another: all
/// complete, and every FCT is above the lower bound of one round trip
/// (4 × 10 ms of propagation) plus the response's transmission time at
/// 10 Mbit/s (100 kB · 8 / 10 Mbit/s = 80 ms), so above 120 ms.
#[test]
fn sequential_requests_complete_above_lower_bound() {
    let (report, stop) = run(
        1,
        |config, c, s| {
            QuicClient::new(config, c, s, ShortFlowsClient::sequential(20, 100, 100_000))
        },
        ShortFlowsReport::from_client,
    );
    assert_eq!(stop, StopReason::AllFinished);
    let report = report.expect("all flows completed");
    assert_eq!(report.fcts.len(), 20);
    let rtt = HOP_DELAY * 4;
    let transmission = Duration::from_millis(100_000 * 8 / (RATE_MBPS * 1000));
    let bound = rtt + transmission;
    for (i, flow) in report.flows.iter().enumerate() {
        assert_eq!(flow.index, i);
        assert_eq!(flow.response_bytes, 100_000);
        assert!(
            flow.fct() > bound,
            "flow {i}: {:?} <= {bound:?}",
            flow.fct()
        );
    }
    // Sequential: each request is issued when the previous one completes.
    for pair in report.flows.windows(2) {
        assert_eq!(pair[1].issued, pair[0].completed);
    }
    assert!(report.p50 <= report.p95 && report.p95 <= report.p99 && report.p99 <= report.max);
    // Once the window has grown, a flow takes well under three bounds.
    assert!(report.p50 < bound * 3, "{report:?}");
    println!(
        "sequential FCTs: mean {:?} p50 {:?} p95 {:?} p99 {:?} max {:?}; all {:?}",
        report.mean, report.p50, report.p95, report.p99, report.max, report.fcts
    );
}

fn poisson_run(seed: u64) -> ShortFlowsReport {
    let (report, stop) = run(
        seed,
        |config, c, s| {
            let mut rng = Seed::new(seed).rng("short-flows/arrivals");
            let app =
                ShortFlowsClient::poisson(30, Duration::from_millis(50), &mut rng, 100, 20_000);
            Timed::new(QuicClient::new(config, c, s, app))
        },
        |host: &Timed<QuicClient<ShortFlowsClient>>| ShortFlowsReport::from_client(host.inner()),
    );
    assert_eq!(stop, StopReason::AllFinished);
    report.expect("all flows completed")
}

/// Poisson arrivals: every flow completes, requests are issued at their
/// arrival times (so some overlap), and the same seed gives the same
/// report while another seed gives other arrivals.
#[test]
fn poisson_arrivals_are_deterministic() {
    let a = poisson_run(3);
    let b = poisson_run(3);
    assert_eq!(a, b);
    assert_eq!(a.fcts.len(), 30);
    let connected = a.flows[0].issued;
    for pair in a.flows.windows(2) {
        assert!(pair[1].issued >= pair[0].issued);
    }
    assert!(a.flows.iter().all(|f| f.issued >= connected));
    // 20 kB at 10 Mbit/s is 16 ms; one round trip is 40 ms.
    assert!(
        a.fcts.iter().all(|&fct| fct > Duration::from_millis(56)),
        "{a:?}"
    );
    let c = poisson_run(4);
    let offsets = |r: &ShortFlowsReport| -> Vec<Duration> {
        r.flows
            .iter()
            .map(|f| f.issued - r.flows[0].issued)
            .collect()
    };
    assert_ne!(offsets(&a), offsets(&c));
    println!(
        "poisson FCTs: mean {:?} p50 {:?} p95 {:?} p99 {:?} max {:?}",
        a.mean, a.p50, a.p95, a.p99, a.max
    );
}

/// The arrival offsets are exponential gaps with about the asked mean.
#[test]
fn poisson_offsets_have_the_asked_mean() {
    let mut rng = Seed::new(9).rng("short-flows/arrivals");
    let Arrivals::Poisson { offsets } =
        Arrivals::poisson(2000, Duration::from_millis(50), &mut rng)
    else {
        panic!("not poisson");
    };
    let mean = *offsets.last().unwrap() / 2000;
    assert!(
        mean > Duration::from_millis(45) && mean < Duration::from_millis(55),
        "{mean:?}"
    );
    let mut rng = Seed::new(9).rng("short-flows/arrivals");
    assert_eq!(
        Arrivals::poisson(2000, Duration::from_millis(50), &mut rng),
        Arrivals::Poisson { offsets }
    );
}

/// One connection per flow: every flow completes on a connection of its
/// own, each paying a handshake and starting in slow start, so a flow of
/// 100 kB takes at least the handshake's round trip, the request's and
/// the response's transmission (120 ms + 40 ms); flows of the same size
/// that do not overlap take about the same time (a fresh controller each).
#[test]
fn each_flow_on_its_own_connection_starts_afresh() {
    let flows: Vec<Arrival> = (0..6)
        .map(|i| Arrival {
            offset: Duration::from_secs(i),
            response_bytes: if i % 2 == 0 { 100_000 } else { 20_000 },
        })
        .collect();
    let expected = flows.clone();
    let fcts = std::cell::RefCell::new(Vec::new());
    let (_, stop) = run(
        5,
        move |config, c, s| ConnectionArrivals::new(config, c, s, 100, flows),
        |host: &ConnectionArrivals| {
            assert!(host.first_error().is_none());
            *fcts.borrow_mut() = host.completion_times();
            None
        },
    );
    let fcts = fcts.into_inner();
    assert_eq!(stop, StopReason::AllFinished);
    assert_eq!(fcts.len(), expected.len(), "{fcts:?}");
    let rtt = HOP_DELAY * 4;
    for &(index, fct) in &fcts {
        let bytes = expected[index].response_bytes;
        let bound = rtt * 2 + Duration::from_micros(bytes * 8 / RATE_MBPS);
        assert!(fct > bound, "flow {index}: {fct:?} <= {bound:?}");
    }
    // Flows a second apart do not overlap: same size, about the same time
    // (within 5 ms; a connection that reused a warm window would save
    // round trips of 40 ms).
    let close = |a: Duration, b: Duration| a.abs_diff(b) < Duration::from_millis(5);
    assert!(
        close(fcts[0].1, fcts[2].1) && close(fcts[0].1, fcts[4].1),
        "{fcts:?}"
    );
    assert!(
        close(fcts[1].1, fcts[3].1) && close(fcts[1].1, fcts[5].1),
        "{fcts:?}"
    );
    assert!(fcts[0].1 > fcts[1].1);
}
