//! Encode and decode speed of the power-sum quACK (paper Table 3, Figure 2).
//!
//! `cargo bench -p pepkit-quack`. Encode: 1000 identifiers inserted into a
//! fresh quACK, then one quACK taken and serialised (items = packets).
//! Decode: a difference with `m` missing among `n` candidates.

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use quack::workload::{difference, pseudorandom_ids};
use quack::{Decoder, F16, F32, F64, Field, Missing, PowerSums, Quack};

fn main() {
    divan::main();
}

const PACKETS: usize = 1000;

fn encode<F: Field>(bencher: Bencher<'_, '_>, t: usize) {
    let ids = pseudorandom_ids::<F>(PACKETS, 1);
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

#[divan::bench(consts = [25, 100, 300, 1000], args = [0, 1, 5, 10, 20])]
fn decode_32<const N: usize>(bencher: Bencher<'_, '_>, m: usize) {
    let (diff, sent) = difference::<F32>(N, m);
    let mut decoder = Decoder::new();
    let mut missing = Missing::default();
    bencher.bench_local(|| {
        decoder
            .decode(black_box(&diff), black_box(&sent), &mut missing)
            .unwrap();
        black_box(&missing);
    });
}

/// A small quACK's fixed cost (the Sidekick proxy's quACK every few
/// packets, t = 10): `n` identifiers into a fresh quACK, serialised.
#[divan::bench(args = [1, 2, 5, 10, 25])]
fn small_encode_32(bencher: Bencher<'_, '_>, n: usize) {
    let ids = pseudorandom_ids::<F32>(n, 1);
    let mut out = Vec::with_capacity(2048);
    bencher.bench_local(|| {
        let mut sums = PowerSums::<F32>::new(10).unwrap();
        for &id in black_box(&ids) {
            sums.insert(id);
        }
        out.clear();
        sums.encode_quack(&mut out);
        black_box(&out);
    });
}

/// The sender's side of a small quACK: the `n`-packet quACK's bytes
/// parsed, subtracted from the sender's over `n + 1` packets, the one
/// missing packet decoded.
#[divan::bench(args = [1, 2, 5, 10, 25])]
fn small_decode_32(bencher: Bencher<'_, '_>, n: usize) {
    let sent = pseudorandom_ids::<F32>(n + 1, 1);
    let (mut proxy, mut sender) = (
        PowerSums::<F32>::new(10).unwrap(),
        PowerSums::new(10).unwrap(),
    );
    for (i, &id) in sent.iter().enumerate() {
        sender.insert(id);
        if i < n {
            proxy.insert(id);
        }
    }
    let sender = sender.quack();
    let mut bytes = Vec::new();
    proxy.encode_quack(&mut bytes);
    let mut decoder = Decoder::new();
    let mut missing = Missing::default();
    bencher.bench_local(|| {
        let received = Quack::<F32>::parse(black_box(&bytes)).unwrap();
        decoder
            .decode(&(&sender - &received), black_box(&sent), &mut missing)
            .unwrap();
        black_box(&missing);
    });
}
