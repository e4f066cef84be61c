//! Properties of the engine under arbitrary traffic (STYLE P9: operations
//! applied to the engine, then invariants checked):
//!
//! * it never panics;
//! * every datagram that leaves is one that arrived, byte for byte —
//!   forwarded exactly once, plus at most one retransmission of a
//!   protected one — or one of its own ICMP probes;
//! * what it cannot track (not QUIC, no connection) leaves at the instant
//!   it arrived;
//! * retransmissions stay within 10% of a connection's protected packets;
//! * it keeps no buffered bytes and no connection beyond its bounds;
//! * a timer handled late (real mode's timers are) leaves nothing due at
//!   or before the time it was handled, so the next wake is in the future.

mod common;
use common::*;
use netsim::{Datagram, Interface, Middlebox, Protocol, Time};
use pemi::{Enforcement, PemiConfig};
use proptest::prelude::*;
use std::collections::HashMap;
use std::net::SocketAddr;

/// One step of the traffic.
#[derive(Clone, Debug)]
enum Op {
    /// Time passes (µs).
    Wait(u32),
    /// Connection `conn` does its handshake step `step` (0–2).
    Handshake { conn: u8, step: u8 },
    /// A short-header packet of connection `conn`.
    Short {
        conn: u8,
        from_server: bool,
        spin: bool,
        len: u16,
    },
    /// Arbitrary bytes between the connection's addresses.
    Garbage {
        conn: u8,
        from_server: bool,
        bytes: Vec<u8>,
    },
    /// Arbitrary bytes between unrelated addresses.
    Stranger { bytes: Vec<u8> },
    /// An ICMP echo reply that may or may not answer a probe.
    Echo { conn: u8, seq: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u32..3_000).prop_map(Op::Wait),
        2 => (0u8..3, 0u8..3).prop_map(|(conn, step)| Op::Handshake { conn, step }),
        8 => (0u8..3, any::<bool>(), any::<bool>(), 20u16..1400)
            .prop_map(|(conn, from_server, spin, len)| Op::Short { conn, from_server, spin, len }),
        1 => (0u8..3, any::<bool>(), proptest::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(conn, from_server, bytes)| Op::Garbage { conn, from_server, bytes }),
        1 => proptest::collection::vec(any::<u8>(), 0..80).prop_map(|bytes| Op::Stranger { bytes }),
        1 => (0u8..3, 0u16..8).prop_map(|(conn, seq)| Op::Echo { conn, seq }),
    ]
}

fn client(conn: u8) -> SocketAddr {
    format!("10.0.2.{}:5000", 10 + conn).parse().unwrap()
}

fn server() -> SocketAddr {
    addr(SERVER)
}

/// The datagram of `op`, its side, and whether PEMI may track it.
fn datagram(op: &Op, id: u32) -> Option<(Datagram, Interface)> {
    let pair = |conn: u8, from_server: bool, payload: Vec<u8>| {
        let (src, dst, side) = if from_server {
            (server(), client(conn), SERVER_SIDE)
        } else {
            (client(conn), server(), CLIENT_SIDE)
        };
        (Datagram::new(src, dst, payload), side)
    };
    Some(match op {
        Op::Wait(_) => return None,
        Op::Handshake { conn, step } => {
            let template = match step {
                0 => client_initial(),
                1 => server_flight(),
                _ => client_finished(),
            };
            pair(*conn, *step == 1, template.payload.to_vec())
        }
        Op::Short {
            conn,
            from_server,
            spin,
            len,
        } => {
            let d = short(SERVER, CLIENT, *spin, id, usize::from(*len));
            pair(*conn, *from_server, d.payload.to_vec())
        }
        Op::Garbage {
            conn,
            from_server,
            bytes,
        } => pair(*conn, *from_server, bytes.clone()),
        Op::Stranger { bytes } => (
            Datagram::new(addr("10.9.9.9:1"), addr("10.8.8.8:2"), bytes.clone()),
            CLIENT_SIDE,
        ),
        Op::Echo { conn, seq } => (
            Datagram {
                protocol: Protocol::EchoReply {
                    id: 0x5045,
                    seq: *seq,
                },
                ..Datagram::echo_request(
                    client(*conn).ip(),
                    "10.255.255.2".parse().unwrap(),
                    0,
                    0,
                    vec![0; 56],
                )
            },
            CLIENT_SIDE,
        ),
    })
}

fn config(enforcement: Enforcement, tiny_buffers: bool) -> PemiConfig {
    PemiConfig {
        probe_addr: Some("10.255.255.2".parse().unwrap()),
        enforcement,
        buffer_per_connection: if tiny_buffers { 3000 } else { 1 << 20 },
        buffer_total: if tiny_buffers { 5000 } else { 64 << 20 },
        max_handshakes: 2,
        max_connections: 3,
        ..PemiConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn forwards_unaltered_and_never_panics(
        ops in proptest::collection::vec(op(), 1..400),
        enforcement in prop_oneof![
            Just(Enforcement::Off), Just(Enforcement::Delay),
            Just(Enforcement::Reorder), Just(Enforcement::Both)
        ],
        tiny_buffers in any::<bool>(),
        late_us in prop_oneof![Just(0u32), 1u32..20_000],
    ) {
        // Connection 0 completes its handshake (PEMI 5 ms from the server,
        // 1 ms from the client), so the rest can be protected.
        let prefix = [
            Op::Handshake { conn: 0, step: 0 },
            Op::Wait(5_000),
            Op::Handshake { conn: 0, step: 1 },
            Op::Wait(1_000),
            Op::Handshake { conn: 0, step: 2 },
        ];
        let ops: Vec<Op> = prefix.into_iter().chain(ops).collect();
        let config = config(enforcement, tiny_buffers);
        let mut pemi = pemi::Pemi::new(config.clone());
        let mut now = Time::ZERO;
        // Arrivals per fingerprint, and departures.
        let mut arrived: HashMap<u64, (usize, Time, bool)> = HashMap::new();
        let mut left: HashMap<u64, usize> = HashMap::new();
        let drain = |pemi: &mut pemi::Pemi, now: Time, left: &mut HashMap<u64, usize>,
                         arrived: &HashMap<u64, (usize, Time, bool)>| {
            while let Some(t) = pemi.poll_transmit(now) {
                let d = &t.datagram;
                if matches!(d.protocol, Protocol::EchoRequest { .. }) {
                    assert_eq!(Some(d.src.ip()), config.probe_addr);
                    continue;
                }
                let fp = d.fingerprint();
                let Some(&(_, at, trackable)) = arrived.get(&fp) else {
                    panic!("a datagram that never arrived left: {d:?}");
                };
                if !trackable {
                    assert_eq!(t.at, at, "untrackable traffic was delayed");
                }
                assert!(t.at >= now.min(at));
                *left.entry(fp).or_default() += 1;
            }
        };
        let late = std::time::Duration::from_micros(u64::from(late_us));
        for (id, op) in ops.iter().enumerate() {
            if let Op::Wait(us) = op {
                let until = now + std::time::Duration::from_micros(u64::from(*us));
                while let Some(wake) = pemi.poll_timeout() {
                    if wake > until {
                        break;
                    }
                    now = now.max((wake + late).min(until));
                    pemi.handle_timeout(now);
                    drain(&mut pemi, now, &mut left, &arrived);
                    let next = pemi.poll_timeout();
                    prop_assert!(next.is_none_or(|next| next > now), "due again at {next:?}, handled at {now:?}");
                }
                now = until;
                continue;
            }
            let Some((d, side)) = datagram(op, id as u32) else { continue };
            let trackable = matches!(op, Op::Handshake { .. } | Op::Short { .. } | Op::Garbage { .. });
            // Identical datagrams may arrive again: the latest arrival is the
            // one an immediate forward belongs to.
            let entry = arrived.entry(d.fingerprint()).or_insert((0, now, trackable));
            entry.0 += 1;
            entry.1 = now;
            entry.2 &= trackable;
            pemi.handle_datagram(now, side, d);
            drain(&mut pemi, now, &mut left, &arrived);
        }
        // Let every timer run out.
        for _ in 0..10_000 {
            let Some(wake) = pemi.poll_timeout() else { break };
            now = now.max(wake + late);
            pemi.handle_timeout(now);
            drain(&mut pemi, now, &mut left, &arrived);
            let next = pemi.poll_timeout();
            prop_assert!(next.is_none_or(|next| next > now), "due again at {next:?}, handled at {now:?}");
        }
        let stats = *pemi.stats();
        if std::env::var_os("PEMI_PROPERTY_STATS").is_some() {
            eprintln!("{}", serde_json::to_string(&stats).unwrap());
        }
        for (fp, (count, _, _)) in &arrived {
            let out = left.get(fp).copied().unwrap_or(0);
            // An echo reply to a probe is consumed; everything else leaves,
            // once, or once more as a retransmission.
            prop_assert!(out <= 2 * count, "{out} copies of {count}");
        }
        // Echo replies to PEMI's address with its identifier are its own.
        let echoes = ops.iter().filter(|op| matches!(op, Op::Echo { .. })).count() as u64;
        let forwarded = left.values().sum::<usize>() as u64;
        let arrivals = arrived.values().map(|(c, _, _)| c).sum::<usize>() as u64;
        prop_assert_eq!(forwarded, arrivals - echoes + stats.retransmissions);
        prop_assert!(stats.retransmissions * 10 <= stats.protected);
        prop_assert!(stats.buffered_peak <= config.buffer_total as u64);
        prop_assert!(stats.tracked <= config.max_connections as u64);
    }
}
