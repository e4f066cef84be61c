//! Round trips of every sidekick message, and a distinct error for each
//! kind of bad input; arbitrary bytes never panic.

use proptest::prelude::*;
use sidekick::wire::{Config, Control, Discovery, Interval, ParseError, REQUEST_LEN};
use std::net::SocketAddr;

fn addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![
            (1..=u32::MAX).prop_map(Interval::Millis),
            (1..=u32::MAX).prop_map(Interval::Packets)
        ],
        1..=u8::MAX,
        prop_oneof![Just(2u8), Just(4), Just(8)],
        any::<u16>(),
        any::<u32>(),
    )
        .prop_map(|(interval, threshold, id_bytes, id_offset, quota)| Config {
            interval,
            threshold,
            id_bytes,
            id_offset,
            quota,
        })
}

fn control() -> impl Strategy<Value = Control> {
    prop_oneof![
        (any::<u64>(), config())
            .prop_map(|(session, config)| Control::Configure { session, config }),
        (any::<u64>(), any::<u8>()).prop_map(|(session, epoch)| Control::Reset { session, epoch }),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u8>(),
            prop::collection::vec(any::<u8>(), 1..80)
        )
            .prop_map(|(next_session, quota_left, epoch, quack)| Control::Quack {
                next_session,
                quota_left,
                epoch,
                quack
            }),
    ]
}

proptest! {
    #[test]
    fn discovery_round_trips(nonce in any::<u64>(), session in any::<u64>(), proxy in addr()) {
        for message in [Discovery::Request { nonce }, Discovery::Reply { nonce, session, proxy }] {
            let bytes = message.to_bytes();
            prop_assert!(Discovery::is_discovery(&bytes));
            prop_assert_eq!(Discovery::parse(&bytes), Ok(message));
        }
    }

    #[test]
    fn control_round_trips(message in control()) {
        let bytes = message.to_bytes();
        prop_assert!(!Discovery::is_discovery(&bytes));
        prop_assert_eq!(Control::parse(&bytes), Ok(message));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Discovery::parse(&bytes);
        let _ = Control::parse(&bytes);
    }

    #[test]
    fn every_truncation_is_an_error(message in control(), cut in 0usize..22) {
        let bytes = message.to_bytes();
        let cut = cut.min(bytes.len() - 1);
        prop_assume!(!matches!(message, Control::Quack { .. }) || cut < 15);
        prop_assert!(Control::parse(&bytes[..cut]).is_err());
    }
}

#[test]
fn each_bad_input_has_its_own_error() {
    let request = Discovery::Request { nonce: 5 }.to_bytes();
    assert_eq!(
        Discovery::parse(&request[..100]),
        Err(ParseError::Truncated {
            needed: 128,
            got: 100
        })
    );
    let mut other = request.clone();
    other[50] ^= 1;
    assert_eq!(Discovery::parse(&other), Err(ParseError::NotDiscovery));
    let mut version = request.clone();
    version[128] = 1;
    assert_eq!(
        Discovery::parse(&version),
        Err(ParseError::UnsupportedVersion(1))
    );
    // Version 1's unpadded request.
    let mut v1 = request[..137].to_vec();
    v1[128] = 1;
    assert_eq!(
        Discovery::parse(&v1),
        Err(ParseError::UnsupportedVersion(1))
    );
    // The padding: complete, and zero.
    let mut short = request.clone();
    short.pop();
    assert!(matches!(
        Discovery::parse(&short),
        Err(ParseError::Truncated { .. })
    ));
    let mut padded = request.clone();
    padded[150] = 3;
    assert_eq!(
        Discovery::parse(&padded),
        Err(ParseError::InvalidField {
            field: "request padding",
            value: 3
        })
    );
    let mut long = request.clone();
    long.push(0);
    assert_eq!(Discovery::parse(&long), Err(ParseError::TrailingBytes(1)));
    assert_eq!(request.len(), REQUEST_LEN);

    let reply = Discovery::Reply {
        nonce: 1,
        session: 2,
        proxy: "10.0.0.1:9".parse().unwrap(),
    }
    .to_bytes();
    let mut family = reply.clone();
    family[145] = 5;
    assert_eq!(
        Discovery::parse(&family),
        Err(ParseError::InvalidField {
            field: "address family",
            value: 5
        })
    );

    let config = Config {
        interval: Interval::Packets(2),
        threshold: 8,
        id_bytes: 4,
        id_offset: 21,
        quota: 1,
    };
    let configure = Control::Configure { session: 1, config }.to_bytes();
    let with = |at: usize, value: u8| {
        let mut bytes = configure.clone();
        bytes[at] = value;
        Control::parse(&bytes)
    };
    assert_eq!(with(0, 0x11), Err(ParseError::UnsupportedVersion(1)));
    assert_eq!(with(0, 0x2f), Err(ParseError::UnknownKind(15)));
    assert_eq!(
        with(9, 7),
        Err(ParseError::InvalidField {
            field: "interval unit",
            value: 7
        })
    );
    assert_eq!(
        with(14, 0),
        Err(ParseError::InvalidField {
            field: "threshold",
            value: 0
        })
    );
    assert_eq!(
        with(15, 3),
        Err(ParseError::InvalidField {
            field: "identifier width",
            value: 3
        })
    );
    let mut zero_interval = configure.clone();
    zero_interval[10..14].copy_from_slice(&[0; 4]);
    assert_eq!(
        Control::parse(&zero_interval),
        Err(ParseError::InvalidField {
            field: "interval",
            value: 0
        })
    );
    let quack_without_body = Control::Quack {
        next_session: 1,
        quota_left: 1,
        epoch: 0,
        quack: vec![0],
    }
    .to_bytes();
    assert!(matches!(
        Control::parse(&quack_without_body[..14]),
        Err(ParseError::Truncated { .. })
    ));
}
