//! Table 1 of the paper: the probability that an identifier collides with
//! another among n = 25, by identifier width.

use quack::collision_probability;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn formula_matches_the_table() {
    // Table 1 as printed: 0.090, 0.0004, 5.6e-09, ~0.
    let p = |b| collision_probability(b, 25);
    assert_eq!(format!("{:.3}", p(1)), "0.090");
    assert_eq!(format!("{:.4}", p(2)), "0.0004");
    assert_eq!(format!("{:.1e}", p(4)), "5.6e-9");
    assert!(p(8) < 1e-17);
}

/// The formula agrees with sampling: draw 25 uniform identifiers and ask
/// whether the first equals any other.
#[test]
fn sampling_matches_the_formula() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (bytes, trials) in [(1u32, 200_000u32), (2, 1_000_000)] {
        let mask = (1u64 << (8 * bytes)) - 1;
        let mut hits = 0u32;
        for _ in 0..trials {
            let first = rng.random::<u64>() & mask;
            hits += (0..24).any(|_| rng.random::<u64>() & mask == first) as u32;
        }
        let measured = hits as f64 / trials as f64;
        let expected = collision_probability(bytes, 25);
        // Four standard deviations of a binomial proportion.
        let sd = (expected * (1.0 - expected) / trials as f64).sqrt();
        assert!(
            (measured - expected).abs() < 4.0 * sd,
            "{bytes} bytes: measured {measured}, expected {expected}"
        );
    }
}
