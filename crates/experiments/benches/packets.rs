//! The simulator's cost per delivered packet, as the Proteus scenarios pay
//! it: one bulk upload over our QUIC endpoints (noq-proto, the controller,
//! pacing) through Figure 6's path, 1 ms + 14 ms each way, at 50 and
//! 500 Mbit/s, for 4 simulated seconds. The bottleneck's buffer is
//! unlimited: with a 2-BDP drop-tail buffer at 500 Mbit/s, both CUBIC's
//! and Proteus-P's start-up overshoot lose so many packets that
//! noq-proto's receiver aborts the connection ("too many gaps in stream
//! buffer", its limit of 1024 gaps), and a broken run measures nothing. The
//! item count is the data packets the bottleneck forwarded, so divan's
//! throughput is delivered packets per second of wall time, and its time
//! per item the cost of one packet: its trip through both hops, the
//! receiver's stack, its ACK's trip back and the sender's stack and
//! controller.
//!
//! Run with `cargo bench -p pepkit-experiments --bench packets`.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

fn main() {
    divan::main();
}

/// One flow of `controller` at `mbps` for 4 s, 30 ms RTT.
fn scenario(mbps: u64, controller: &str) -> ScenarioFile {
    let text = format!(
        r#"
name = "packets"
title = "cost per packet"
trials = 1
time_limit = "4s"
path = ["access", "bottleneck"]
[client]
addr = "10.0.0.1"
controller = "{controller}"
[server]
addr = "10.0.1.1"
[hops.access]
delay = "1ms"
rate = "10Gbit/s"
[hops.bottleneck]
delay = "14ms"
rate = "{mbps}Mbit/s"
buffer = {{ kind = "unlimited" }}
[workload]
kind = "bulk"
direction = "upload"
duration = "4s"
"#
    );
    ScenarioFile::parse(&text, PathBuf::from("packets.toml")).expect("the bench's scenario")
}

/// Runs the scenario once (its parse excluded, the run's setup and summary
/// included); the data packets the bottleneck forwarded.
fn run(file: &ScenarioFile) -> u64 {
    let options = RunOptions {
        jobs: Some(1),
        ..RunOptions::default()
    };
    let results = experiments::run(file, &options, &mut Progress::silent()).expect("a run");
    let trial = &results.trials[0][0];
    assert!(trial.errors.is_empty(), "{:?}", trial.errors);
    trial.metrics["link_bottleneck_forward_packets"] as u64
}

#[divan::bench(args = [50, 500], sample_count = 5)]
fn proteus_p(bencher: divan::Bencher<'_, '_>, mbps: u64) {
    let file = scenario(mbps, "proteus-p");
    let packets = run(&file);
    bencher
        .counter(divan::counter::ItemsCount::new(packets))
        .bench_local(|| run(&file));
}

#[divan::bench(args = [50, 500], sample_count = 5)]
fn cubic(bencher: divan::Bencher<'_, '_>, mbps: u64) {
    let file = scenario(mbps, "cubic");
    let packets = run(&file);
    bencher
        .counter(divan::counter::ItemsCount::new(packets))
        .bench_local(|| run(&file));
}
