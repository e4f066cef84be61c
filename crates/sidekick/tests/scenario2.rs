//! Sidekick's scenario 2 in the simulator: a 10 MB QUIC upload from
//! 10.0.2.10 to 10.0.1.10:4433 over a lossy near hop (1 ms, 100 Mbit/s,
//! Bernoulli loss both ways) and a far bottleneck hop (25 ms, 10 Mbit/s),
//! RED queues (260 000 B, adaptive) on both, 1200-byte QUIC payloads.
//!
//! Variants: end-to-end QUIC with noq-proto's CUBIC, and QUIC with a
//! sidekick (quACK every 30 ms, t = 10; the proxy on the middle node) and
//! PACUBIC with r estimated from RTTs. The paper's targets: at 1 % near
//! loss the sidekick's goodput is at least 3× end-to-end QUIC's and at
//! least 90 % of its own loss-free goodput; without loss it changes
//! goodput by less than 5 %.
//!
//! Each run takes well under a second in the test profile, so nothing is
//! ignored; print the table with
//! `cargo test -p pepkit-sidekick --test scenario2 -- --nocapture --test-threads 1`.

use cc::{CubicConfig, PacubicConfig, PacubicFactory, PacubicStats, Signals};
use netsim::*;
use quack::F32;
use quic::{
    BulkClient, BulkReport, BulkServerFactory, Direction, QuicClient, QuicConfig, QuicServer,
    SimClock,
};
use sidekick::wire::Interval;
use sidekick::{ProxyConfig, SenderConfig, SenderStats, SidekickHost, SidekickProxy};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const CLIENT: &str = "10.0.2.10:5000";
const SERVER: &str = "10.0.1.10:4433";
const PROXY: &str = "10.0.2.1:1234";
const BYTES: u64 = 10_000_000;

/// One way to send the upload.
#[derive(Clone, Copy, Debug)]
struct Variant {
    /// A sidekick engine beside the client and the quACK proxy in the
    /// middle (else a plain router).
    sidekick: bool,
    /// The client's controller: noq-proto's `"cubic"`, our `"our-cubic"`
    /// or `"pacubic"`.
    cc: &'static str,
    /// PACUBIC with this fixed r instead of the estimate.
    fixed_ratio: Option<f64>,
    /// PACUBIC counting quACKed bytes as acknowledged.
    quack_acks: bool,
}

/// End-to-end QUIC with noq-proto's CUBIC.
const E2E: Variant = Variant {
    sidekick: false,
    cc: "cubic",
    fixed_ratio: None,
    quack_acks: false,
};

/// End-to-end QUIC with our CUBIC.
const E2E_OURS: Variant = Variant {
    cc: "our-cubic",
    ..E2E
};

/// QUIC with a sidekick and PACUBIC, r estimated.
const SIDEKICK: Variant = Variant {
    sidekick: true,
    cc: "pacubic",
    fixed_ratio: None,
    quack_acks: false,
};

struct Outcome {
    report: BulkReport,
    pacubic: PacubicStats,
    sender: SenderStats,
}

impl Outcome {
    fn mbps(&self) -> f64 {
        BYTES as f64 * 8.0 / self.report.completion.as_secs_f64() / 1e6
    }
}

type SidekickClient = SidekickHost<QuicClient<BulkClient>, F32>;

fn run(seed: u64, loss: f64, variant: Variant) -> Outcome {
    let (c, s, p): (SocketAddr, SocketAddr, SocketAddr) = (
        CLIENT.parse().unwrap(),
        SERVER.parse().unwrap(),
        PROXY.parse().unwrap(),
    );
    let clock = SimClock::new();
    let signals = Signals::default();
    let mut pacubic = PacubicConfig::new(clock).with_quack_acks(variant.quack_acks);
    pacubic.fixed_ratio = variant.fixed_ratio;
    let factory = Arc::new(PacubicFactory::new(signals.clone(), pacubic));
    let base = QuicConfig::new(Seed::new(seed)).with_max_udp_payload(1200);
    // Only the data sender runs PACUBIC: every controller of the factory
    // drains the same queue.
    let client_config = base
        .clone()
        .with_controller(match variant.cc {
            "pacubic" => factory.clone(),
            "our-cubic" => Arc::new(CubicConfig::default()),
            _ => Arc::new(quic::congestion::CubicConfig::default()),
        })
        .with_clock(clock);
    let client = QuicClient::new(
        client_config,
        c,
        s,
        BulkClient::new(Direction::Upload, BYTES),
    );
    let server = QuicServer::new(base, s, BulkServerFactory);

    let red = |rate| RedConfig::new(260_000, rate).with_adaptive(true);
    let mut near = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
        .with_red(red(Rate::from_mbps(100)));
    if loss > 0.0 {
        near = near.with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
    }
    let far = LinkConfig::constant(Duration::from_millis(25), Rate::from_mbps(10))
        .with_red(red(Rate::from_mbps(10)));
    let (sender, middle) = match variant.sidekick {
        false => (
            HostSpec::new("client", c.ip(), client),
            MiddleSpec::forwarder("router"),
        ),
        true => {
            let host = SidekickClient::new(
                client,
                SenderConfig::new(Interval::Millis(30), 10),
                Seed::new(seed),
            )
            .with_signals(signals);
            let proxy = SidekickProxy::new(ProxyConfig::new(p, Seed::new(seed)));
            (
                HostSpec::new("client", c.ip(), host),
                MiddleSpec::with_middlebox("proxy", proxy).with_addr(p.ip()),
            )
        }
    };
    let spec = ChainSpec::new(sender, HostSpec::new("server", s.ip(), server))
        .hop(HopConfig::symmetric(near))
        .middle(middle)
        .hop(HopConfig::symmetric(far));
    let mut sim = Simulator::new(Seed::new(seed));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(300));
    let server = sim
        .host::<QuicServer<BulkServerFactory>>(chain.receiver)
        .unwrap();
    let (client, sender) = match variant.sidekick {
        false => (
            sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap(),
            SenderStats::default(),
        ),
        true => {
            let host = sim.host::<SidekickClient>(chain.sender).unwrap();
            (host.inner(), host.stats())
        }
    };
    let report = BulkReport::from_hosts(client, server)
        .unwrap_or_else(|| panic!("seed {seed}, loss {loss}, {variant:?}: upload incomplete"));
    Outcome {
        report,
        pacubic: factory.stats(),
        sender,
    }
}

/// The four variants of one seed, printed.
struct Row {
    e2e_0: Outcome,
    e2e_1: Outcome,
    side_0: Outcome,
    side_1: Outcome,
}

fn row(seed: u64) -> Row {
    let row = Row {
        e2e_0: run(seed, 0.0, E2E),
        e2e_1: run(seed, 0.01, E2E),
        side_0: run(seed, 0.0, SIDEKICK),
        side_1: run(seed, 0.01, SIDEKICK),
    };
    eprintln!(
        "seed {seed}: goodput Mbit/s  e2e cubic 0%: {:.2}  1%: {:.2}   sidekick+pacubic 0%: {:.2}  1%: {:.2}",
        row.e2e_0.mbps(),
        row.e2e_1.mbps(),
        row.side_0.mbps(),
        row.side_1.mbps()
    );
    eprintln!("  pacubic 1%: {:?}", row.side_1.pacubic);
    eprintln!("  sender 1%:  {:?}", row.side_1.sender);
    eprintln!("  pacubic 0%: {:?}", row.side_0.pacubic);
    row
}

fn check(seed: u64, row: &Row) {
    let (e2e_0, e2e_1) = (row.e2e_0.mbps(), row.e2e_1.mbps());
    let (side_0, side_1) = (row.side_0.mbps(), row.side_1.mbps());
    assert!(
        side_1 >= 3.0 * e2e_1,
        "seed {seed}: 1% loss, sidekick {side_1:.2} vs e2e {e2e_1:.2} Mbit/s"
    );
    assert!(
        side_1 >= 0.9 * side_0,
        "seed {seed}: sidekick 1% {side_1:.2} vs 0% {side_0:.2} Mbit/s"
    );
    assert!(
        (side_0 - e2e_0).abs() < 0.05 * e2e_0,
        "seed {seed}: 0% loss, sidekick {side_0:.2} vs e2e {e2e_0:.2} Mbit/s"
    );
    // The quACKs did the work: near losses were found and answered with
    // small cuts, and QUIC's own detection of them was not answered again.
    let p = row.side_1.pacubic;
    assert!(p.quack_reductions > 0, "{p:?}");
    assert!(
        row.side_1.sender.retransmitted > 0,
        "{:?}",
        row.side_1.sender
    );
    assert!(p.e2e_reductions < p.quack_reductions, "{p:?}");
    assert_eq!(p.spurious_rollbacks, 0, "{p:?}");
    // r was measured: near ≈ 2 ms, end to end ≈ 52 ms.
    let ppm = p.ratio_ppm;
    assert!((20_000..=80_000).contains(&ppm), "r = {ppm} ppm: {p:?}");
}

/// The targets, for seeds 1 to 3 (each run takes well under a
/// second, even in the test profile).
#[test]
fn pacubic_with_sidekick_beats_end_to_end_cubic_under_near_loss() {
    for seed in 1..=3 {
        let row = row(seed);
        check(seed, &row);
    }
}

/// Our CUBIC behaves like noq-proto's end to end: the same goodput
/// without loss, and the same collapse with 1 % near loss.
#[test]
fn our_cubic_matches_noq_cubic_end_to_end() {
    for seed in 1..=3 {
        let theirs = [run(seed, 0.0, E2E).mbps(), run(seed, 0.01, E2E).mbps()];
        let ours = [
            run(seed, 0.0, E2E_OURS).mbps(),
            run(seed, 0.01, E2E_OURS).mbps(),
        ];
        eprintln!(
            "seed {seed}: e2e Mbit/s  noq cubic 0%: {:.2} 1%: {:.2}   our cubic 0%: {:.2} 1%: {:.2}",
            theirs[0], theirs[1], ours[0], ours[1]
        );
        assert!((ours[0] - theirs[0]).abs() < 0.05 * theirs[0]);
        assert!(ours[1] < 0.5 * ours[0], "near loss hurts end-to-end CUBIC");
        assert!((ours[1] - theirs[1]).abs() < 0.35 * theirs[1]);
    }
}

/// The paper's fixed r = 1/26 reaches the same targets. The quACK ACKs
/// (the paper's `mark_acked`) are meant for a near-segment bottleneck
/// (the ACK-reduction scenario, Fig. 4c): here the bottleneck is the far
/// hop, and quACKed bytes leave the window as soon as they pass the proxy,
/// so only end-to-end losses bound what sits in the far queue. They still
/// beat end-to-end QUIC by far under near loss, at the price of many
/// more retransmissions (printed); we check that much.
#[test]
fn fixed_ratio_and_quack_acks_variants() {
    for seed in 1..=3 {
        let e2e = run(seed, 0.01, E2E).mbps();
        let fixed = Variant {
            fixed_ratio: Some(1.0 / 26.0),
            ..SIDEKICK
        };
        let acks = Variant {
            quack_acks: true,
            ..SIDEKICK
        };
        let (fixed_0, fixed_1) = (run(seed, 0.0, fixed), run(seed, 0.01, fixed));
        let (acks_0, acks_1) = (run(seed, 0.0, acks), run(seed, 0.01, acks));
        eprintln!(
            "seed {seed}: sidekick Mbit/s  r = 1/26 0%: {:.2} 1%: {:.2}   quack_acks 0%: {:.2} 1%: {:.2}",
            fixed_0.mbps(),
            fixed_1.mbps(),
            acks_0.mbps(),
            acks_1.mbps()
        );
        eprintln!(
            "  quack_acks 1%: {:?}; datagrams logged {}",
            acks_1.pacubic, acks_1.sender.logged
        );
        assert!(fixed_1.mbps() >= 3.0 * e2e);
        assert!(fixed_1.mbps() >= 0.9 * fixed_0.mbps());
        assert_eq!(fixed_1.pacubic.ratio_ppm, 38_462);
        assert!(acks_1.mbps() >= 3.0 * e2e);
        assert!(acks_1.pacubic.quacked_bytes >= BYTES);
    }
}
