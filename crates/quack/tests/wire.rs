//! The wire format: round trips, canonical parsing of arbitrary bytes, and
//! a distinct error for each kind of malformed input.

use proptest::prelude::*;
use quack::{F16, F32, F64, Field, Message, PowerSums, Quack, WireError};

fn quack_strategy() -> impl Strategy<Value = (usize, Vec<u64>, usize)> {
    (
        1usize..=255,
        prop::collection::vec(any::<u64>(), 0..300),
        0usize..=255,
    )
}

fn round_trip<F: Field>(t: usize, ids: &[u64], keep: usize) {
    let mut sums = PowerSums::<F>::new(t).unwrap();
    ids.iter().for_each(|&x| sums.insert(F::truncate(x)));
    let mut quack = sums.quack();
    quack.truncate(keep);
    let bytes = Message::PowerSum(quack.clone()).to_bytes();
    assert_eq!(
        bytes.len(),
        8 + F::ID_BYTES * (ids.len().min(1) + keep.min(t))
    );
    assert_eq!(Quack::<F>::parse(&bytes), Ok(quack.clone()));
    let mut direct = Vec::new();
    quack.encode(&mut direct);
    assert_eq!(direct, bytes);
}

proptest! {
    #[test]
    fn power_sums_round_trip((t, ids, keep) in quack_strategy()) {
        round_trip::<F16>(t, &ids, keep);
        round_trip::<F32>(t, &ids, keep);
        round_trip::<F64>(t, &ids, keep);
    }

    #[test]
    fn strawmen_round_trip(ids in prop::collection::vec(any::<u32>(), 1..=255), count: u32, digest: [u8; 32]) {
        for m in [
            Message::<F32>::Echo(ids[0]),
            Message::Window(ids.clone()),
            Message::SortedHash { count, digest },
        ] {
            prop_assert_eq!(Message::<F32>::parse(&m.to_bytes()), Ok(m));
        }
    }

    /// Arbitrary bytes never panic, and whatever parses is canonical.
    #[test]
    fn arbitrary_bytes_parse_canonically(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(m) = Message::<F32>::parse(&bytes) {
            prop_assert_eq!(m.to_bytes(), bytes.clone());
        }
        if let Ok(m) = Message::<F16>::parse(&bytes) {
            prop_assert_eq!(m.to_bytes(), bytes.clone());
        }
        if let Ok(m) = Message::<F64>::parse(&bytes) {
            prop_assert_eq!(m.to_bytes(), bytes);
        }
    }
}

fn example() -> Vec<u8> {
    let mut sums = PowerSums::<F32>::new(2).unwrap();
    sums.insert(1);
    sums.insert(2);
    Message::PowerSum(sums.quack()).to_bytes()
}

#[test]
fn documented_layout() {
    // t = 2 after inserting 1 and 2: sums 3 and 5, count 2, last 2.
    assert_eq!(
        example(),
        [
            0x10, 0x84, 2, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 5
        ]
    );
}

#[test]
fn each_malformation_has_its_error() {
    let good = example();
    let parse = |b: &[u8]| Message::<F32>::parse(b);
    assert_eq!(parse(&[]), Err(WireError::Truncated { needed: 1, got: 0 }));
    assert_eq!(
        parse(&good[..good.len() - 1]),
        Err(WireError::Truncated {
            needed: 20,
            got: 19
        })
    );
    let mut b = good.clone();
    b[0] = 0x20;
    assert_eq!(parse(&b), Err(WireError::UnsupportedVersion(2)));
    b = good.clone();
    b[0] = 0x17;
    assert_eq!(parse(&b), Err(WireError::UnknownKind(7)));
    assert_eq!(
        Message::<F16>::parse(&good),
        Err(WireError::WidthMismatch {
            expected: 2,
            got: 4
        })
    );
    b = good.clone();
    b[2] = 0;
    assert_eq!(parse(&b), Err(WireError::ZeroThreshold));
    b = good.clone();
    b[2] = 1;
    assert_eq!(
        parse(&b),
        Err(WireError::TooManySums {
            sums: 2,
            threshold: 1
        })
    );
    b = good.clone();
    b[16..20].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(parse(&b), Err(WireError::NotReduced { index: 1 }));
    b = good.clone();
    b.push(0);
    assert_eq!(parse(&b), Err(WireError::TrailingBytes(1)));
    assert_eq!(
        parse(&[0x11, 0x84, 0, 0, 0, 1]),
        Err(WireError::ReservedBits)
    );
    assert!(matches!(
        Quack::<F32>::parse(&Message::<F32>::Echo(1).to_bytes()),
        Err(WireError::UnknownKind(1))
    ));
}

#[test]
fn identifiers_above_the_prime_travel_unreduced() {
    let mut sums = PowerSums::<F32>::new(1).unwrap();
    sums.insert(u32::MAX);
    let quack = Quack::<F32>::parse(&Message::PowerSum(sums.quack()).to_bytes()).unwrap();
    assert_eq!(quack.last(), Some(u32::MAX));
    assert_eq!(quack.power_sums().collect::<Vec<_>>(), vec![4]);
}
