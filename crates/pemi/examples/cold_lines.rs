//! Drives PEMI (or a forwarder) with the benchmark's traffic, evicting the
//! caches before every datagram, for a cache simulator to count the cache
//! lines each datagram makes the engine fetch: what it costs when packets
//! arrive ~1 ms apart and find the engine's data gone (PEMI's Figure 13).
//!
//! ```sh
//! RUSTFLAGS="-C target-cpu=x86-64-v3" CARGO_TARGET_DIR=target/cachegrind \
//!   cargo build --release -p pepkit-pemi --example cold_lines
//! for engine in pemi forward; do
//!   valgrind --tool=cachegrind --cache-sim=yes --LL=2097152,16,64 \
//!     --cachegrind-out-file=/tmp/cg.$engine \
//!     target/cachegrind/release/examples/cold_lines $engine 2000
//! done
//! ```
//!
//! Both runs do the same set-up, feed and sweeps; the difference of their
//! last-level misses (`LLd misses` in the summary, reads and writes) over
//! the datagrams is what PEMI fetches per datagram beyond taking it and
//! giving it back; `cg_diff` of the two output files says where. With
//! `--warm-stack` the stack below the caller is written after each sweep,
//! so that only the heap's lines count. The simulator's L1i is not
//! evicted by data: to count the code lines a datagram runs, add
//! `--I1=1024,2,64` (every line then misses L1i, and the swept last
//! level) and compare `LLi misses`. (The workspace builds
//! for the native CPU, whose AVX-512 valgrind 3.19 cannot decode, hence
//! the portable build in a directory of its own.)

#[path = "../benches/feed/mod.rs"]
mod feed;

use feed::{Driver, deliver, evict};
use netsim::{Datagram, Forward, Interface, Middlebox, Time};

/// A sweep larger than the simulated last level (2 MiB above).
const SWEEP: usize = 4 << 20;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let warm = args.iter().any(|a| a == "--warm-stack");
    args.retain(|a| a != "--warm-stack");
    let mut args = args.into_iter();
    let engine = args.next().unwrap_or_else(|| "pemi".into());
    let datagrams: usize = match args.next().map(|n| n.parse()) {
        None => 2000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("cold_lines: the count of datagrams: {e}");
            std::process::exit(2);
        }
    };
    if engine != "pemi" && engine != "forward" {
        eprintln!("usage: cold_lines [pemi|forward] [DATAGRAMS] [--warm-stack]");
        std::process::exit(2);
    }
    let Driver { mut pemi, mut feed } = Driver::new(1, true);
    let mut forward = Forward::default();
    let sweep = vec![1u8; SWEEP];
    for _ in 0..datagrams {
        // As in the daemon: the caches go cold between packets, then the
        // driver builds the datagram (its payload a fresh copy) and hands
        // it over.
        evict(&sweep);
        if warm {
            warm_stack();
        }
        let input = feed.next();
        if engine == "pemi" {
            through(&mut pemi, input);
        } else {
            through(&mut forward, input);
        }
    }
    println!(
        "{datagrams} datagrams through {engine}; PEMI retransmitted {}",
        pemi.stats().retransmissions
    );
}

/// One datagram through `engine`, in a function of its own (per engine
/// type) so that cachegrind's report names it.
#[inline(never)]
fn through(engine: &mut impl Middlebox, input: (Time, Interface, Datagram)) {
    deliver(engine, input);
}

/// Writes 32 KiB of stack below the caller's frame, where the engine's
/// frames will be.
#[inline(never)]
fn warm_stack() {
    let mut a = [0u8; 32768];
    std::hint::black_box(&mut a);
    for i in (0..a.len()).step_by(64) {
        a[i] = 1;
    }
    std::hint::black_box(&mut a);
}
