//! `pepkit bench sidekick-proxy`: how many packets per second the Sidekick
//! proxy daemon sustains on one core while quACKing every flow, against
//! the same capture loop doing nothing (`capacity/`).
//!
//! Needs root: it builds two network namespaces joined by a veth pair,
//! offers the load inside them and removes them at the end.

use std::process::ExitCode;
use std::time::Duration;

mod capacity;

use capacity::{CapacityConfig, CapacityReport, run as measure};

/// Options of `pepkit bench sidekick-proxy`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Flows, each configured for quACKs with the real protocol.
    #[arg(long, value_name = "N", default_value_t = 64)]
    flows: usize,
    /// Each flow asks for a quACK every this many packets.
    #[arg(long, value_name = "N", default_value_t = 32)]
    every: u32,
    /// The quACK threshold t.
    #[arg(long, value_name = "T", default_value_t = 10)]
    threshold: u8,
    /// The offered load in packets per second (keep it at most ~100k on a
    /// small machine).
    #[arg(long, value_name = "PPS", default_value_t = 50_000)]
    rate: u32,
    /// UDP payload bytes per packet.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    payload: usize,
    /// Seconds per phase.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.5)]
    phase: f64,
    /// Rounds, each one null and one full phase.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    if !(args.phase.is_finite() && (0.1..=60.0).contains(&args.phase)) {
        eprintln!("error: --phase must be 0.1..=60 seconds");
        return ExitCode::from(2);
    }
    let config = CapacityConfig {
        flows: args.flows,
        interval_packets: args.every,
        threshold: args.threshold,
        rate: args.rate,
        payload_len: args.payload,
        phase: Duration::from_secs_f64(args.phase),
        rounds: args.rounds,
    };
    emu::sys::interrupt::install();
    let report = match measure(&config) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serialisable")
        );
    } else {
        print_table(&report);
    }
    ExitCode::SUCCESS
}

fn print_table(r: &CapacityReport) {
    let c = &r.config;
    println!(
        "Sidekick proxy daemon, one core: {} flows quACKed every {} packets (t = {}), \
         {:.0} packets/s offered ({} B payloads), {} rounds of {:.1} s phases\n",
        r.configured_flows,
        c.interval_packets,
        c.threshold,
        r.offered_pps,
        c.payload_len,
        c.rounds,
        c.phase.as_secs_f64()
    );
    println!(
        "| mode | packets | CPU ns/packet | sustained packets/s | core used | packets/wake-up | quACKs | kernel drops |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (label, m) in [
        ("null (capture + parse)", &r.null),
        ("full (engine + quACKs)", &r.full),
    ] {
        println!(
            "| {label} | {} | {:.0} | {:.0} | {:.1}% | {:.1} | {} | {} |",
            m.packets,
            m.cpu_ns_per_packet,
            m.sustained_pps,
            100.0 * m.core_share,
            m.packets_per_turn,
            m.quacks,
            m.kernel_drops
        );
    }
    println!(
        "\nratio full / null: {:.1}% (target ≥ 80%); the engine adds {:.0} ns per packet",
        100.0 * r.ratio,
        r.full.cpu_ns_per_packet - r.null.cpu_ns_per_packet
    );
}
