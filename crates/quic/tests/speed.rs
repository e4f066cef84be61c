//! How much faster than real time the simulator runs a Sidekick
//! scenario-2 style trial: a 10 MB CUBIC upload over
//! client —[1 ms, 100 Mbit/s, random loss]— router —[25 ms, 10 Mbit/s]— server.
//!
//! Run in release, where the figures mean something:
//!
//! ```text
//! cargo test --release -p pepkit-quic --test speed -- --ignored --nocapture
//! ```
//!
//! Each line gives the virtual time of the run, the wall time (setup
//! included), their ratio, the number of simulator events and a digest of
//! the outcome (completion time, packets sent and lost, events), which must
//! not change when the code gets faster. Set `PEPKIT_SPEED_REPEAT` to repeat
//! each trial (the host is shared and noisy: look at the best and the range).
//!
//! On Linux each line also gives the time the thread spent on a CPU and
//! waiting for one (from `/proc/thread-self/schedstat`): when other work
//! competes for the cores the wall time grows by the wait, while the on-CPU
//! time, and the ratio computed from it, stay comparable between runs.

mod common;
use common::{bulk_ends, bulk_pair, near_and_far};

use netsim::*;
use quic::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const CLIENT: &str = "10.0.0.1:5000";
const SERVER: &str = "10.0.1.1:4433";
const BYTES: u64 = 10_000_000;

/// What one trial produced.
struct Trial {
    virtual_time: Time,
    wall: Duration,
    /// Time on a CPU and time waiting for one, if the OS tells.
    sched: Option<(Duration, Duration)>,
    events: u64,
    report: BulkReport,
    client: ConnStats,
}

/// One 10 MB upload through a plain router with `loss` on the near hop.
fn trial(seed: u64, loss: f64) -> Trial {
    let sched_before = thread_sched();
    let started = Instant::now();
    let client_addr: SocketAddr = CLIENT.parse().unwrap();
    let server_addr: SocketAddr = SERVER.parse().unwrap();
    let config = QuicConfig::new(Seed::new(seed));
    let (client, server) = bulk_pair(config, client_addr, server_addr, Direction::Upload, BYTES);
    let (near, far) = near_and_far(loss);
    let spec = ChainSpec::new(
        HostSpec::new("client", client_addr.ip(), client),
        HostSpec::new("server", server_addr.ip(), server),
    )
    .hop(HopConfig::symmetric(near))
    .middle(MiddleSpec::forwarder("router"))
    .hop(HopConfig::symmetric(far));
    let mut sim = Simulator::new(Seed::new(seed));
    let chain = sim.add_chain(spec).unwrap();
    let outcome = sim.run_until(Time::from_secs(300));
    let wall = started.elapsed();
    let sched = thread_sched()
        .zip(sched_before)
        .map(|((cpu, wait), (cpu0, wait0))| (cpu - cpu0, wait - wait0));
    assert_eq!(outcome.reason, StopReason::AllFinished);
    let (client, server) = bulk_ends(&sim, &chain);
    let report = BulkReport::from_hosts(client, server).expect("transfer completed");
    Trial {
        virtual_time: outcome.end,
        wall,
        sched,
        events: sim.stats().events,
        report,
        client: client.record().unwrap().stats.clone(),
    }
}

/// This thread's time on a CPU and time runnable but waiting for one, from
/// Linux's `/proc/thread-self/schedstat`; `None` elsewhere.
fn thread_sched() -> Option<(Duration, Duration)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let cpu = fields.next()??;
    let wait = fields.next()??;
    Some((Duration::from_nanos(cpu), Duration::from_nanos(wait)))
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn scenario2_10mb_speed() {
    let repeat: usize = std::env::var("PEPKIT_SPEED_REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    for loss in [0.0, 0.01] {
        let mut ratios = Vec::new();
        let mut cpu_ratios = Vec::new();
        for _ in 0..repeat {
            let t = trial(1, loss);
            let virtual_secs = t.virtual_time.as_secs_f64();
            let ratio = virtual_secs / t.wall.as_secs_f64();
            ratios.push(ratio);
            let sched = match t.sched {
                Some((cpu, wait)) => {
                    cpu_ratios.push(virtual_secs / cpu.as_secs_f64());
                    format!(
                        " (on CPU {:.1} ms: {:.0}x; waited {:.1} ms)",
                        cpu.as_secs_f64() * 1e3,
                        virtual_secs / cpu.as_secs_f64(),
                        wait.as_secs_f64() * 1e3
                    )
                }
                None => String::new(),
            };
            println!(
                "loss {:>4.1}%: virtual {:.3} s, wall {:>6.1} ms, {:>4.0}x real time{sched}, \
                 {} events ({:.2} M/s); digest: completion {:?}, sent {}, lost {}",
                loss * 100.0,
                virtual_secs,
                t.wall.as_secs_f64() * 1e3,
                ratio,
                t.events,
                t.events as f64 / t.wall.as_secs_f64() / 1e6,
                t.report.completion,
                t.client.sent_packets,
                t.client.lost_packets,
            );
        }
        let summary = |ratios: &mut Vec<f64>| {
            ratios.sort_by(f64::total_cmp);
            format!(
                "min {:.0}x, median {:.0}x, max {:.0}x",
                ratios[0],
                ratios[ratios.len() / 2],
                ratios[ratios.len() - 1]
            )
        };
        let on_cpu = if cpu_ratios.is_empty() {
            String::new()
        } else {
            format!("; on CPU: {}", summary(&mut cpu_ratios))
        };
        println!(
            "loss {:>4.1}%, {} runs: wall: {}{on_cpu}",
            loss * 100.0,
            ratios.len(),
            summary(&mut ratios),
        );
    }
}
