//! Inputs for measuring the quACK: pseudorandom identifiers and differences
//! with a chosen number missing. The divan benchmarks and `pepkit bench
//! quack` both use these, so their numbers describe the same work.

use crate::field::Field;
use crate::power_sum::{PowerSums, Quack};

/// `n` pseudorandom identifiers (SplitMix64 from `seed`), as a QUIC
/// proxy would read from encrypted packets.
pub fn pseudorandom_ids<F: Field>(n: usize, seed: u64) -> Vec<F::Id> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            F::truncate(z ^ (z >> 31))
        })
        .collect()
}

/// A difference with `m` of `n` sent identifiers missing (spread evenly),
/// at threshold `max(m, 10)`, and the sent identifiers (the candidates).
pub fn difference<F: Field>(n: usize, m: usize) -> (Quack<F>, Vec<F::Id>) {
    assert!(m <= n, "{m} missing of {n}");
    let t = m.max(10);
    let sent = pseudorandom_ids::<F>(n, 7);
    let mut sender = PowerSums::<F>::new(t).expect("threshold");
    let mut receiver = PowerSums::<F>::new(t).expect("threshold");
    let stride = n.checked_div(m).unwrap_or(1);
    for (i, &id) in sent.iter().enumerate() {
        sender.insert(id);
        if m == 0 || i % stride != 0 || i / stride >= m {
            receiver.insert(id);
        }
    }
    (&sender - &receiver, sent)
}
