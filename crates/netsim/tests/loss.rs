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
