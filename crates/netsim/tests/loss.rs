//! The loss models match their parameters (fixed seeds, enough samples for
//! tight tolerances).

mod common;
use netsim::*;

/// Drives a lossy link with unlimited capacity and returns the loss pattern.
fn pattern(loss: LossModel, n: usize, seed: u64) -> Vec<bool> {
    let mut link = Link::new(
        LinkConfig::delay_only(std::time::Duration::ZERO).with_loss(loss),
        Seed::new(seed),
    )
    .unwrap();
    let out: Vec<bool> = (0..n)
        .map(|i| {
            let fate = link.offer(Time::from_micros(i as u64), 1200);
            fate == Fate::Dropped(DropCause::Loss)
        })
        .collect();
    let stats = link.stats();
    assert_eq!(
        stats.offered.packets,
        stats.delivered.packets + stats.dropped_loss.packets
    );
    out
}

fn loss_rate(p: &[bool]) -> f64 {
    p.iter().filter(|&&l| l).count() as f64 / p.len() as f64
}

/// Lengths of maximal runs of consecutive losses.
fn bursts(p: &[bool]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut run = 0;
    for &lost in p {
        if lost {
            run += 1;
        } else if run > 0 {
            out.push(run);
            run = 0;
        }
    }
    if run > 0 {
        out.push(run);
    }
    out
}

fn prob(p: f64) -> Probability {
    Probability::new(p).unwrap()
}

#[test]
fn bernoulli_rate_matches() {
    let n = 1_000_000;
    for (p, seed) in [(0.01, 1), (0.05, 2), (0.2, 3)] {
        let rate = loss_rate(&pattern(LossModel::Bernoulli(prob(p)), n, seed));
        // 5 standard deviations.
        let tol = 5.0 * (p * (1.0 - p) / n as f64).sqrt();
        assert!((rate - p).abs() < tol, "p={p}: measured {rate}, tol {tol}");
        // Independent losses: mean burst length 1/(1-p).
        let b = bursts(&pattern(LossModel::Bernoulli(prob(p)), n, seed + 10));
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!(
            (mean - 1.0 / (1.0 - p)).abs() < 0.02,
            "p={p}: mean burst {mean}"
        );
    }
}

#[test]
fn gilbert_rate_and_burst_length_match() {
    // Simple Gilbert: mean loss p/(p+r), mean burst 1/r.
    let (p, r) = (0.01, 0.25);
    let ge = GilbertElliott::gilbert(prob(p), prob(r));
    let losses = pattern(LossModel::GilbertElliott(ge), 2_000_000, 7);
    let rate = loss_rate(&losses);
    let expected = p / (p + r);
    assert!(
        (rate - expected).abs() / expected < 0.03,
        "rate {rate} vs {expected}"
    );
    let b = bursts(&losses);
    let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
    assert!(
        (mean - 1.0 / r).abs() / (1.0 / r) < 0.03,
        "mean burst {mean}"
    );
}

#[test]
fn gilbert_elliott_rate_matches() {
    let ge = GilbertElliott {
        p: prob(0.02),
        r: prob(0.1),
        loss_good: prob(0.001),
        loss_bad: prob(0.5),
    };
    let expected = ge.mean_loss_rate();
    assert!((expected - (0.1 * 0.001 + 0.02 * 0.5) / 0.12).abs() < 1e-12);
    let rate = loss_rate(&pattern(LossModel::GilbertElliott(ge), 2_000_000, 11));
    assert!(
        (rate - expected).abs() / expected < 0.03,
        "rate {rate} vs {expected}"
    );
}

#[test]
fn loss_is_seeded() {
    let m = LossModel::Bernoulli(prob(0.1));
    assert_eq!(pattern(m, 10_000, 5), pattern(m, 10_000, 5));
    assert_ne!(pattern(m, 10_000, 5), pattern(m, 10_000, 6));
}

/// A recorded link's fates agree with its counters and with what arrived.
#[test]
fn recorded_fates_are_the_links_truth() {
    use common::*;
    use netsim::testing::{CbrSource, Sink};
    let lossy = LinkConfig::delay_only(ms(4))
        .with_loss(LossModel::Bernoulli(Probability::new(0.05).unwrap()));
    let spec = two_hop_chain(
        CbrSource::new(addr(SENDER), addr(RECEIVER), 200, ms(1), 2000),
        Sink::new(),
        MiddleSpec::forwarder("router"),
        HopConfig::symmetric(LinkConfig::delay_only(ms(1))),
        HopConfig::new(lossy, LinkConfig::delay_only(ms(4))),
    );
    let mut sim = Simulator::new(Seed::new(9));
    let chain = sim.add_chain(spec).unwrap();
    let link = chain.hops[1].forward;
    assert!(sim.fates(link).is_empty());
    sim.record_fates(link);
    sim.run_until(Time::from_secs(10));
    let fates = sim.fates(link);
    let stats = sim.link_stats(link);
    assert_eq!(fates.len() as u64, stats.offered.packets);
    let dropped = fates
        .iter()
        .filter(|f| f.fate == Fate::Dropped(DropCause::Loss))
        .count() as u64;
    assert_eq!(dropped, stats.dropped_loss.packets);
    assert!(dropped > 50);
    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    let mut arrived: Vec<Time> = sink.arrivals().iter().map(|a| a.at).collect();
    let mut delivered: Vec<Time> = fates
        .iter()
        .filter_map(|f| match f.fate {
            Fate::Deliver { at } => Some(at),
            Fate::Dropped(_) => None,
        })
        .collect();
    arrived.sort();
    delivered.sort();
    assert_eq!(arrived, delivered);
    for f in fates {
        if let Fate::Deliver { at } = f.fate {
            assert_eq!(at - f.offered, ms(4));
        }
    }
}
