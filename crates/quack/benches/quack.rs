//! Encode and decode speed of the power-sum quACK (paper Table 3, Figure 2).
//!
//! `cargo bench -p pepkit-quack`. Encode: 1000 identifiers inserted into a
//! fresh quACK, then one quACK taken and serialised (items = packets).
//! Decode: a difference with `m` missing among `n` candidates.

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use quack::{Decoder, F16, F32, F64, Field, Missing, PowerSums, Quack};

fn main() {
    divan::main();
}

const PACKETS: usize = 1000;

/// Deterministic pseudorandom identifiers (SplitMix64).
fn ids<F: Field>(n: usize, seed: u64) -> Vec<F::Id> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            F::truncate(z ^ (z >> 31))
        })
        .collect()
}

fn encode<F: Field>(bencher: Bencher<'_, '_>, t: usize) {
    let ids = ids::<F>(PACKETS, 1);
    let mut out = Vec::with_capacity(2048);
    bencher.counter(ItemsCount::new(PACKETS)).bench_local(|| {
        let mut sums = PowerSums::<F>::new(t).unwrap();
        for &id in black_box(&ids) {
            sums.insert(id);
        }
        out.clear();
        sums.quack().encode(&mut out);
        black_box(&out);
    });
}

#[divan::bench(args = [5, 10, 20, 40])]
fn encode_16(bencher: Bencher<'_, '_>, t: usize) {
    encode::<F16>(bencher, t);
}

#[divan::bench(args = [5, 10, 20, 40])]
fn encode_32(bencher: Bencher<'_, '_>, t: usize) {
    encode::<F32>(bencher, t);
}

#[divan::bench(args = [5, 10, 20, 40])]
fn encode_64(bencher: Bencher<'_, '_>, t: usize) {
    encode::<F64>(bencher, t);
}

/// A difference with `m` of `n` candidates missing (spread evenly).
fn difference(n: usize, m: usize) -> (Quack<F32>, Vec<u32>) {
    let t = m.max(10);
    let sent = ids::<F32>(n, 7);
    let mut s = PowerSums::<F32>::new(t).unwrap();
    let mut r = PowerSums::<F32>::new(t).unwrap();
    for (i, &id) in sent.iter().enumerate() {
        s.insert(id);
        if m == 0 || i % (n / m) != 0 || i / (n / m) >= m {
            r.insert(id);
        }
    }
    let diff = &s - &r;
    assert_eq!(diff.count() as usize, m);
    (diff, sent)
}

#[divan::bench(consts = [25, 100, 300, 1000], args = [0, 1, 5, 10, 20])]
fn decode_32<const N: usize>(bencher: Bencher<'_, '_>, m: usize) {
    let (diff, sent) = difference(N, m);
    let mut decoder = Decoder::new();
    let mut missing = Missing::default();
    bencher.bench_local(|| {
        decoder
            .decode(black_box(&diff), black_box(&sent), &mut missing)
            .unwrap();
        black_box(&missing);
    });
}
