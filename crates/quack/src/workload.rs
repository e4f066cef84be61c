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

/// A straightforward scalar implementation we wrote (one power chain per
/// packet, `%` reduction, Horner per candidate, the structure of the
/// authors' code but NOT their implementation): a yardstick to measure in
/// the same run as the real encoder and decoder, so that the speed-up
/// survives a noisy machine. It is slower than the authors' own library, so
/// the speed-up over it overstates the gain over their code. 32-bit
/// identifiers only.
pub mod textbook {
    const P: u64 = 4_294_967_291;

    /// Power sums `p_1 ..= p_t` of `ids`, one identifier at a time.
    pub fn encode(ids: &[u32], t: usize) -> Vec<u64> {
        let mut sums = vec![0u64; t];
        for &id in ids {
            let x = id as u64 % P;
            let mut y = x;
            for s in sums.iter_mut() {
                *s = (*s + y) % P;
                y = y * x % P;
            }
        }
        sums
    }

    /// The candidates that are roots of the polynomial with power sums `d`
    /// (Newton's identities with Fermat inverses, then Horner per candidate).
    pub fn decode(d: &[u64], candidates: &[u32]) -> Vec<u32> {
        let m = d.len();
        let mut c = vec![0u64; m];
        for k in 1..=m {
            let mut acc = d[k - 1];
            for i in 1..k {
                acc = (acc + c[k - i - 1] * d[i - 1] % P) % P;
            }
            c[k - 1] = (P - acc * inverse(k as u64) % P) % P;
        }
        candidates
            .iter()
            .copied()
            .filter(|&id| {
                let x = id as u64 % P;
                c.iter().fold(1u64, |r, &ci| (r * x % P + ci) % P) == 0
            })
            .collect()
    }

    fn inverse(k: u64) -> u64 {
        let (mut result, mut base, mut exp) = (1u64, k % P, P - 2);
        while exp > 0 {
            if exp & 1 == 1 {
                result = result * base % P;
            }
            base = base * base % P;
            exp >>= 1;
        }
        result
    }

    #[cfg(test)]
    mod tests {
        use crate::F32;
        use crate::workload::{difference, pseudorandom_ids};

        #[test]
        fn agrees_with_the_real_implementation() {
            let ids = pseudorandom_ids::<F32>(100, 3);
            let mut sums = crate::PowerSums::<F32>::new(10).unwrap();
            ids.iter().for_each(|&id| sums.insert(id));
            let want: Vec<u64> = sums.quack().power_sums().map(u64::from).collect();
            assert_eq!(super::encode(&ids, 10), want);

            let (diff, sent) = difference::<F32>(25, 10);
            let d: Vec<u64> = diff.power_sums().map(u64::from).collect();
            assert_eq!(super::decode(&d, &sent), diff.decode(&sent).unwrap());
        }
    }
}
