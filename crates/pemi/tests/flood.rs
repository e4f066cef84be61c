//! A million spoofed flows against the engine, on every `cargo test`: each
//! table keeps its bound (the handshakes at `max_handshakes`, nothing for
//! packets of unknown connections), the process grows by a bounded amount
//! once the tables are full, and the connection PEMI protected before the
//! flood is still protected after it (a lost packet is retransmitted).
//!
//! One test in this file, so that the resident set it reads is its own.

mod common;
use common::*;
use netsim::{Datagram, Middlebox, Time};
use pemi::PemiConfig;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The resident set of this process, in KiB (Linux; `VmRSS` of
/// /proc/self/status).
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The `k`th spoofed address (11.0.0.0 + `k`).
fn spoofed(k: u32) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + k)), 40_000)
}

/// `datagram` from the client's side at `at`, whatever PEMI sends
/// discarded (a million forwarded copies would not fit in the harness).
fn spoof(h: &mut Harness, at: Time, datagram: Datagram) {
    h.pemi.handle_datagram(at, CLIENT_SIDE, datagram);
    while h.pemi.poll_transmit(at).is_some() {}
}

#[test]
fn a_million_spoofed_flows_keep_every_table_bounded_and_the_real_connection_protected() {
    let config = PemiConfig::default();
    let bound = config.max_handshakes;
    let mut h = Harness::new(config);
    h.handshake();
    h.warm_up(100.0, 200, 0);
    let at = at_ms(500.0);
    let before = rss_kib();
    let mut at_100k = None;
    // A million client Initials, each from its own address.
    for k in 0..1_000_000u32 {
        let mut d = client_initial();
        d.src = spoofed(k);
        spoof(&mut h, at, d);
        if k == 99_999 {
            at_100k = rss_kib();
        }
    }
    let after = rss_kib();
    let stats = h.pemi.stats();
    println!(
        "1M spoofed Initials: tracked {}, evicted {}, RSS before {before:?} KiB, \
         after 100k {at_100k:?} KiB, after 1M {after:?} KiB",
        stats.tracked, stats.handshakes_evicted
    );
    assert_eq!(stats.tracked as usize, bound + 1, "{stats:?}");
    assert_eq!(stats.handshakes_evicted, 1_000_000 - bound as u64);
    if let (Some(at_100k), Some(after)) = (at_100k, after) {
        // The last 900,000 Initials replace handshakes, they do not add.
        assert!(
            after <= at_100k + 8 * 1024,
            "grew from {at_100k} to {after} KiB between 100k and 1M Initials"
        );
    }
    // A million 1-RTT packets of connections PEMI never saw (other
    // addresses than the Initials'): forwarded
    // untracked, no table grows.
    let untracked = stats.untracked;
    for k in 0..1_000_000u32 {
        let mut d = short(CLIENT, SERVER, false, k, 60);
        d.src = spoofed(2_000_000 + k);
        spoof(&mut h, at, d);
    }
    let stats = h.pemi.stats();
    assert_eq!(stats.tracked as usize, bound + 1, "{stats:?}");
    assert_eq!(stats.untracked - untracked, 1_000_000, "{stats:?}");
    // The real connection is still protected: a flowlet's lost packets
    // are retransmitted.
    let mut flowlet: Vec<Event> = Vec::new();
    for k in 0..10u32 {
        flowlet.push((at_ms(600.0 + f64::from(k)), SERVER_SIDE, data(5000 + k)));
        if k != 4 {
            flowlet.push((at_ms(610.5 + f64::from(k)), CLIENT_SIDE, ack(5000 + k)));
        }
    }
    h.play(flowlet);
    h.advance(at_ms(700.0));
    let ids: Vec<u32> = h.copies().iter().map(|(_, d)| id_of(d)).collect();
    assert_eq!(ids, vec![5004], "{:?}", h.pemi.stats());
}
