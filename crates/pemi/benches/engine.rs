//! Per-packet cost of the PEMI engine.
//!
//! `cargo bench -p pepkit-pemi --bench engine`. One iteration is one
//! datagram through the engine the way the simulator and the daemon drive
//! it: clone a prepared datagram (the API takes it by value),
//! `handle_datagram`, drain `poll_transmit` (the forward and any
//! retransmission), `poll_timeout`, and `handle_timeout` when a timer is
//! due. Divan reports time per iteration: ns per packet.
//!
//! The traffic, per protected connection: the server sends flowlets of 20
//! packets of 1200 bytes, 100 µs apart, one flowlet every 5 ms; the client
//! acknowledges every second packet 2 ms later, and at once after a gap
//! (RFC 9000's out-of-order rule); 1% of the data packets are lost after
//! PEMI (never acknowledged), so PEMI infers and retransmits them. With
//! many connections their schedules are staggered and interleaved, and
//! each lookup hits a different one. Every connection first completes a
//! handshake and one period of traffic (steady state) before timing.
//!
//! * `protected`: that traffic (connection lookup, flowlet record, reply
//!   assignment and matching, inference, retransmission, timers);
//! * `fresh`: `protected` with each payload a fresh copy made before
//!   timing, as the daemon's in-path driver hands them over (a clone of
//!   such a `Bytes` allocates, and the engine frees it);
//! * `cold`: `fresh` with L1 and L2 evicted before each datagram (an 8 MiB
//!   read, untimed), one datagram per sample: the daemon's conditions,
//!   where packets arrive ~1 ms apart after a wake-up; `cold_nothing` is
//!   the same sample around nothing;
//! * `cold_data`: `cold` with the instructions warm (another engine takes
//!   a datagram after the sweep): what instruction misses add to `cold`;
//! * `cold_forward`: `cold` through an engine that only forwards
//!   ([`netsim::Forward`]): the floor any engine pays to take a datagram
//!   and give it back;
//! * `cold_l3`, `cold_l3_forward`: the same with L3 and the TLB evicted too
//!   (a 64 MiB read), beyond the daemon's conditions;
//! * `untracked`: UDP of no connection (a lookup miss and a header walk);
//! * `clone_datagram`: the clone and drop of the prepared datagram alone.
//!
//! A counting allocator ([`divan::AllocProfiler`]) reports allocations
//! per iteration beside the times.

mod feed;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use feed::{Driver, Feed, SERVER, SWEEP, SWEEP_L3, client, deliver, evict, short};
use netsim::{Datagram, Forward, Interface, Middlebox, Time};
use std::time::Duration;

fn main() {
    divan::main();
}

/// Counts allocations: divan reports them per iteration (per packet).
#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

#[divan::bench(args = [1, 100, 1000])]
fn protected(bencher: Bencher<'_, '_>, conns: u32) {
    let mut driver = Driver::new(conns, false);
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| driver.step());
    let stats = driver.pemi.stats();
    assert!(stats.retransmissions > 0, "{stats:?}");
}

/// `protected` with a fresh payload per datagram, made before timing.
#[divan::bench(args = [1, 100, 1000])]
fn fresh(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| feed.next())
        .bench_local_values(|input| deliver(&mut pemi, input));
    assert!(pemi.stats().retransmissions > 0, "{:?}", pemi.stats());
}

/// `fresh` with the caches evicted before each datagram (untimed): one
/// datagram per sample, the engine's data cold as in the daemon.
#[divan::bench(args = [1, 100, 1000], sample_size = 1, sample_count = 3000)]
fn cold(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    cold_samples(bencher, &mut pemi, &mut feed, SWEEP, None);
    assert!(pemi.stats().retransmissions > 0, "{:?}", pemi.stats());
}

/// `cold` with the code warm: after the sweep a second engine (its own
/// data) takes one datagram, which brings the instructions back to L1i
/// and the branch predictors up to date but leaves this engine's data
/// cold. The difference to `cold` is what instruction misses cost.
#[divan::bench(args = [1, 100, 1000], sample_size = 1, sample_count = 3000)]
fn cold_data(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    let mut warm = Driver::new(conns, true);
    cold_samples(bencher, &mut pemi, &mut feed, SWEEP, Some(&mut warm));
    assert!(pemi.stats().retransmissions > 0, "{:?}", pemi.stats());
}

/// `cold` with an engine that forwards every datagram and does nothing
/// else ([`netsim::Forward`]): the floor any engine pays for taking a
/// datagram and giving it back with its data cold.
#[divan::bench(sample_size = 1, sample_count = 3000)]
fn cold_forward(bencher: Bencher<'_, '_>) {
    let Driver { mut feed, .. } = Driver::new(1, true);
    cold_samples(bencher, &mut Forward::default(), &mut feed, SWEEP, None);
}

/// `cold` with the 32 MiB L3 evicted too (a 64 MiB read, which also
/// empties the TLB): the bound beyond the daemon's conditions, where some
/// of the engine's lines stay in L3 between packets.
#[divan::bench(args = [1], sample_size = 1, sample_count = 400)]
fn cold_l3(bencher: Bencher<'_, '_>, conns: u32) {
    let Driver { mut pemi, mut feed } = Driver::new(conns, true);
    cold_samples(bencher, &mut pemi, &mut feed, SWEEP_L3, None);
}

/// `cold_l3` through the forwarder.
#[divan::bench(sample_size = 1, sample_count = 400)]
fn cold_l3_forward(bencher: Bencher<'_, '_>) {
    let Driver { mut feed, .. } = Driver::new(1, true);
    cold_samples(bencher, &mut Forward::default(), &mut feed, SWEEP_L3, None);
}

/// One datagram of `feed` per sample through `engine`, the caches evicted
/// first by reading `sweep` bytes (untimed); `warm`, if given, then takes
/// a datagram of its own to bring the instructions back.
fn cold_samples(
    bencher: Bencher<'_, '_>,
    engine: &mut impl Middlebox,
    feed: &mut Feed,
    sweep: usize,
    mut warm: Option<&mut Driver>,
) {
    let sweep = vec![1u8; sweep];
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            let input = feed.next();
            evict(&sweep);
            if let Some(warm) = warm.as_deref_mut() {
                warm.step();
            }
            input
        })
        .bench_local_values(|input| deliver(engine, input));
}

/// What `cold` measures around nothing: the floor of one cold sample.
#[divan::bench(sample_size = 1, sample_count = 3000)]
fn cold_nothing(bencher: Bencher<'_, '_>) {
    let sweep = vec![1u8; SWEEP];
    bencher
        .with_inputs(|| evict(&sweep))
        .bench_local_values(black_box);
}

#[divan::bench]
fn untracked(bencher: Bencher<'_, '_>) {
    let mut driver = Driver::new(100, false);
    let stranger = Datagram::new(client(5000), SERVER, short(false, 7, 1200));
    let mut now = Time::from_secs(100);
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        now += Duration::from_micros(1);
        driver
            .pemi
            .handle_datagram(now, Interface(0), stranger.clone());
        while let Some(t) = driver.pemi.poll_transmit(now) {
            black_box(t);
        }
    });
}

#[divan::bench]
fn clone_datagram(bencher: Bencher<'_, '_>) {
    let d = Datagram::new(client(1), SERVER, short(false, 7, 1200));
    bencher
        .counter(ItemsCount::new(1usize))
        .bench_local(|| black_box(d.clone()));
}
