//! Property tests: random multisets with up to `t` missing decode exactly,
//! in every field, with duplicates and any arrival order.

use proptest::prelude::*;
use quack::{DecodeError, F16, F32, F64, Field, PowerSums};

/// Sent identifiers (possibly repeated), the positions lost, the threshold.
fn scenario() -> impl Strategy<Value = (Vec<u64>, Vec<usize>, usize)> {
    (1usize..=64, 1usize..3000, any::<bool>()).prop_flat_map(|(t, n, dense)| {
        // A small range forces repeated identifiers.
        let range = if dense {
            1..(n as u64 / 2 + 2)
        } else {
            0..u64::MAX
        };
        (
            prop::collection::vec(range, n),
            prop::collection::btree_set(0..n, 0..=t.min(n)),
            Just(t),
        )
            .prop_map(|(ids, lost, t)| (ids, lost.into_iter().collect(), t))
    })
}

fn check<F: Field>(ids: &[u64], lost: &[usize], t: usize, rotate: usize) {
    let sent: Vec<F::Id> = ids.iter().map(|&x| F::truncate(x)).collect();
    let mut sender = PowerSums::<F>::new(t).unwrap();
    let mut proxy = PowerSums::<F>::new(t).unwrap();
    sent.iter().for_each(|&id| sender.insert(id));
    // The proxy sees the survivors in another order (reordering).
    let mut received: Vec<F::Id> = sent
        .iter()
        .enumerate()
        .filter(|(i, _)| lost.binary_search(i).is_err())
        .map(|(_, &id)| id)
        .collect();
    if !received.is_empty() {
        let k = rotate % received.len();
        received.rotate_left(k);
    }
    received.iter().for_each(|&id| proxy.insert(id));

    let diff = &sender - &proxy;
    assert_eq!(diff.count() as usize, lost.len());
    let mut got: Vec<u64> = diff
        .decode(&sent)
        .unwrap()
        .iter()
        .map(|&id| F::element(id))
        .collect();
    let mut want: Vec<u64> = lost.iter().map(|&i| F::element(sent[i])).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "missing multiset ({} bits)", F::BITS);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn decodes_exactly_in_every_field((ids, lost, t) in scenario(), rotate in any::<usize>()) {
        check::<F16>(&ids, &lost, t, rotate);
        check::<F32>(&ids, &lost, t, rotate);
        check::<F64>(&ids, &lost, t, rotate);
    }

    #[test]
    fn one_more_than_the_threshold_is_an_error(t in 1usize..=20, extra in 1usize..5) {
        let sent: Vec<u32> = (1..=100).collect();
        let mut sender = PowerSums::<F32>::new(t).unwrap();
        let mut proxy = PowerSums::<F32>::new(t).unwrap();
        sent.iter().for_each(|&id| sender.insert(id));
        sent[t + extra..].iter().for_each(|&id| proxy.insert(id));
        prop_assert_eq!(
            (&sender - &proxy).decode(&sent),
            Err(DecodeError::TooManyMissing { missing: (t + extra) as u32, sums: t })
        );
    }
}
