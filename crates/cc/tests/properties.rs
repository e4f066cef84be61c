//! Property tests: no controller of this crate panics, or reports a zero,
//! absurd or non-finite window or pacing rate, whatever sequence of sends,
//! ACKs (in order or not, with any RTT, zero included), losses,
//! congestion events, MTU changes and packet-number resets (the spaces of
//! the handshake) it is fed.

use cc::pcc::utility::{Utility, UtilityHandle};
use cc::{Bbr, CongestionEngine, Copa, CopaSettings, Ledbat, LedbatSettings, Pcc, PccConfig};
use netsim::{Rate, Seed};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
enum Op {
    Send { count: u8, gap_us: u16 },
    Ack { count: u8, rtt_ms: u16 },
    AckOne { index: u8, rtt_ms: u16 },
    Lose { count: u8, persistent: bool },
    Wait { ms: u16 },
    Mtu { mtu: u16 },
    ResetPn,
    SetUtility { mode: u8, threshold_mbps: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..60, 0u16..5000).prop_map(|(count, gap_us)| Op::Send { count, gap_us }),
        4 => (0u8..60, 0u16..1500).prop_map(|(count, rtt_ms)| Op::Ack { count, rtt_ms }),
        1 => (any::<u8>(), 0u16..1500).prop_map(|(index, rtt_ms)| Op::AckOne { index, rtt_ms }),
        1 => (0u8..20, any::<bool>()).prop_map(|(count, persistent)| Op::Lose { count, persistent }),
        1 => (0u16..20_000).prop_map(|ms| Op::Wait { ms }),
        1 => (1200u16..1500).prop_map(|mtu| Op::Mtu { mtu }),
        1 => Just(Op::ResetPn),
        1 => (0u8..4, any::<u8>()).prop_map(|(mode, threshold_mbps)| Op::SetUtility { mode, threshold_mbps }),
    ]
}

/// Feeds `ops` to `engine`, checking its outputs after each.
fn drive<E: CongestionEngine>(mut engine: E, ops: &[Op], handle: Option<&UtilityHandle>) {
    let t0 = Instant::now();
    let mut now = t0;
    let mut pn = 0u64;
    let mut in_flight: VecDeque<(u64, Instant, u16)> = VecDeque::new();
    let mut mtu = 1200u16;
    let check = |engine: &E| {
        let window = engine.poll_window();
        assert!(window > 0 && window < 1 << 50, "window {window}");
        if let Some(rate) = engine.poll_pacing_rate() {
            assert!(rate < 1 << 50, "pacing rate {rate}");
        }
    };
    for op in ops {
        match *op {
            Op::Send { count, gap_us } => {
                for _ in 0..count {
                    now += Duration::from_micros(u64::from(gap_us));
                    engine.handle_sent(now, mtu, pn);
                    in_flight.push_back((pn, now, mtu));
                    pn += 1;
                }
            }
            Op::Ack { count, rtt_ms } => {
                let mut acked = false;
                for _ in 0..count {
                    let Some((p, sent, bytes)) = in_flight.pop_front() else {
                        break;
                    };
                    now = now.max(sent + Duration::from_millis(u64::from(rtt_ms)));
                    engine.handle_ack(
                        now,
                        sent,
                        u64::from(bytes),
                        p,
                        Duration::from_millis(u64::from(rtt_ms).max(1)),
                    );
                    acked = true;
                }
                if acked {
                    let bytes = in_flight.iter().map(|p| u64::from(p.2)).sum();
                    engine.handle_end_acks(now, bytes, in_flight.is_empty());
                }
            }
            Op::AckOne { index, rtt_ms } => {
                if !in_flight.is_empty() {
                    let (p, sent, bytes) = in_flight
                        .remove(usize::from(index) % in_flight.len())
                        .unwrap();
                    now = now.max(sent + Duration::from_millis(u64::from(rtt_ms)));
                    engine.handle_ack(now, sent, u64::from(bytes), p, Duration::from_millis(30));
                    engine.handle_end_acks(now, 0, false);
                }
            }
            Op::Lose { count, persistent } => {
                let mut newest = None;
                for _ in 0..count {
                    let Some((p, sent, bytes)) = in_flight.pop_front() else {
                        break;
                    };
                    engine.handle_lost(now, bytes, p);
                    newest = Some(sent);
                }
                if let Some(sent) = newest {
                    engine.handle_congestion(now, sent, persistent);
                }
            }
            Op::Wait { ms } => now += Duration::from_millis(u64::from(ms)),
            Op::Mtu { mtu: m } => {
                mtu = m;
                engine.handle_mtu(m);
            }
            Op::ResetPn => pn = 0,
            Op::SetUtility {
                mode,
                threshold_mbps,
            } => {
                if let Some(handle) = handle {
                    let utility = [
                        Utility::Vivace,
                        Utility::Primary,
                        Utility::Scavenger,
                        Utility::Hybrid,
                    ][usize::from(mode) % 4];
                    handle.set_utility(utility);
                    handle.set_threshold(
                        (threshold_mbps > 0).then(|| Rate::from_mbps(u64::from(threshold_mbps))),
                    );
                }
            }
        }
        check(&engine);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn pcc_never_breaks(ops in prop::collection::vec(op(), 1..120), mode in 0u8..4) {
        let config = match mode {
            0 => PccConfig::vivace(),
            1 => PccConfig::proteus(Utility::Primary),
            2 => PccConfig::proteus(Utility::Scavenger),
            _ => PccConfig::proteus(Utility::Hybrid),
        };
        let handle = UtilityHandle::new(config.utility);
        let pcc = Pcc::new(Arc::new(config), handle.clone(), Seed::new(1).rng("p"), 1200);
        drive(pcc, &ops, Some(&handle));
    }

    #[test]
    fn copa_never_breaks(ops in prop::collection::vec(op(), 1..120), competitive in any::<bool>()) {
        let settings = CopaSettings { competitive, ..CopaSettings::default() };
        drive(Copa::new(settings, 1200), &ops, None);
    }

    #[test]
    fn ledbat_never_breaks(ops in prop::collection::vec(op(), 1..120), short in any::<bool>()) {
        let target = Duration::from_millis(if short { 25 } else { 100 });
        drive(Ledbat::new(&LedbatSettings { target, ..LedbatSettings::default() }, 1200), &ops, None);
    }

    #[test]
    fn bbr_never_breaks(ops in prop::collection::vec(op(), 1..120), scavenger in any::<bool>()) {
        drive(Bbr::new(scavenger, Seed::new(2).rng("b"), 1200), &ops, None);
    }
}
