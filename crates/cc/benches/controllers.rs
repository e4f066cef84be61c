//! The controllers' own cost: each engine sends for 10 simulated seconds
//! over a 50 Mbit/s, 30 ms bottleneck with a 375 kB drop-tail queue,
//! modelled here in a few lines (no simulator, no QUIC), so the time is
//! the controller's callbacks and this loop's bookkeeping.
//!
//! Run with `cargo bench -p pepkit-cc`. divan reports the time per run and,
//! through the item counter, per ACK; the `pcc_per_mi` benches count
//! monitor intervals instead, for the cost per MI.

use cc::pcc::utility::{Utility, UtilityHandle};
use cc::{Bbr, CongestionEngine, Copa, CopaSettings, Ledbat, LedbatSettings, Pcc, PccConfig};
use netsim::Seed;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    divan::main();
}

const MTU: u16 = 1200;
const RATE_BPS: f64 = 50e6;
const BASE_RTT: Duration = Duration::from_millis(30);
const QUEUE_BYTES: f64 = 375_000.0;
const RUN: Duration = Duration::from_secs(10);
const TICK: Duration = Duration::from_micros(100);

/// Runs `engine` for [`RUN`]; returns it and the number of ACKs it got.
fn run<E: CongestionEngine>(mut engine: E) -> (E, u64) {
    let t0 = Instant::now();
    let serialise = Duration::from_secs_f64(f64::from(MTU) * 8.0 / RATE_BPS);
    // Packets in flight: (pn, sent, when its ACK arrives).
    let mut flight: VecDeque<(u64, Instant, Instant)> = VecDeque::new();
    let mut link_free = t0;
    let mut next_send = t0;
    let mut pn = 0;
    let mut acks = 0;
    let mut now = t0;
    while now < t0 + RUN {
        now += TICK;
        let mut acked = false;
        while flight.front().is_some_and(|&(_, _, at)| at <= now) {
            let (p, sent, at) = flight.pop_front().expect("front");
            engine.handle_ack(at, sent, u64::from(MTU), p, at - sent);
            acks += 1;
            acked = true;
        }
        if acked {
            let in_flight = flight.len() as u64 * u64::from(MTU);
            engine.handle_end_acks(now, in_flight, false);
        }
        loop {
            let in_flight = flight.len() as u64 * u64::from(MTU);
            if in_flight + u64::from(MTU) > engine.poll_window() || next_send > now {
                break;
            }
            engine.handle_sent(now, MTU, pn);
            let start = link_free.max(now);
            let queued = (start - now).as_secs_f64() * RATE_BPS / 8.0;
            if queued + f64::from(MTU) > QUEUE_BYTES {
                engine.handle_lost(now + BASE_RTT, MTU, pn);
                engine.handle_congestion(now + BASE_RTT, now, false);
            } else {
                link_free = start + serialise;
                flight.push_back((pn, now, link_free + BASE_RTT));
            }
            pn += 1;
            let gap = engine.poll_pacing_rate().map_or(Duration::ZERO, |rate| {
                Duration::from_secs_f64(f64::from(MTU) / rate.max(1) as f64)
            });
            next_send = next_send.max(now - TICK) + gap;
        }
    }
    (engine, acks)
}

fn pcc(utility: Utility) -> Pcc {
    let config = if utility == Utility::Vivace {
        PccConfig::vivace()
    } else {
        PccConfig::proteus(utility)
    };
    let handle = UtilityHandle::new(config.utility);
    Pcc::new(Arc::new(config), handle, Seed::new(1).rng("bench"), MTU)
}

fn per_ack<E: CongestionEngine>(bencher: divan::Bencher<'_, '_>, make: impl Fn() -> E + Sync) {
    let (_, acks) = run(make());
    bencher
        .counter(divan::counter::ItemsCount::new(acks))
        .bench(|| run(make()));
}

#[divan::bench(sample_count = 10)]
fn vivace_per_ack(bencher: divan::Bencher<'_, '_>) {
    per_ack(bencher, || pcc(Utility::Vivace));
}

#[divan::bench(sample_count = 10)]
fn proteus_p_per_ack(bencher: divan::Bencher<'_, '_>) {
    per_ack(bencher, || pcc(Utility::Primary));
}

#[divan::bench(sample_count = 10)]
fn proteus_s_per_ack(bencher: divan::Bencher<'_, '_>) {
    per_ack(bencher, || pcc(Utility::Scavenger));
}

#[divan::bench(sample_count = 10)]
fn copa_per_ack(bencher: divan::Bencher<'_, '_>) {
    per_ack(bencher, || Copa::new(CopaSettings::default(), MTU));
}

#[divan::bench(sample_count = 10)]
fn ledbat_per_ack(bencher: divan::Bencher<'_, '_>) {
    per_ack(bencher, || Ledbat::new(&LedbatSettings::default(), MTU));
}

#[divan::bench(sample_count = 10)]
fn bbr_per_ack(bencher: divan::Bencher<'_, '_>) {
    per_ack(bencher, || Bbr::new(false, Seed::new(1).rng("bench"), MTU));
}

/// Proteus-S's cost per monitor interval (the same runs, counted in MIs).
#[divan::bench(sample_count = 10)]
fn proteus_s_per_mi(bencher: divan::Bencher<'_, '_>) {
    let (engine, _) = run(pcc(Utility::Scavenger));
    bencher
        .counter(divan::counter::ItemsCount::new(engine.stats().mis))
        .bench(|| run(pcc(Utility::Scavenger)));
}
