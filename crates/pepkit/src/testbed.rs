//! `pepkit testbed`: check the link emulator against its configuration,
//! bring up a scenario's testbed to work in by hand, and clean up after
//! runs that died.

use emu::link::check::{LinkCheckConfig, LinkCheckReport, RateLimit};
use experiments::ScenarioFile;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `pepkit testbed` subcommands.
#[derive(clap::Subcommand)]
pub(crate) enum Command {
    /// Measure how closely the emulated link matches its configuration:
    /// rate (full-size datagrams offered at 1.25× the rate), added one-way
    /// delay percentiles (probes at --probe-rate) and loss. Exits 1 if a
    /// value is outside its tolerance (rate ±5%, p99 delay ±2 ms, loss
    /// within four standard deviations).
    Check(CheckArgs),
    /// Build the testbed of a scenario's variant and keep it up until
    /// Ctrl-C, printing its namespaces and addresses, so that you can run
    /// endpoints and daemons in it with `ip netns exec`.
    Up(UpArgs),
    /// Remove what testbeds of pepkit processes that are gone left behind:
    /// kill the processes still running in their namespaces, then delete
    /// the namespaces (their interfaces, routes and nftables tables go
    /// with them).
    Clean,
}

/// Arguments of `pepkit testbed check`.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The link's one-way delay, in ms.
    #[arg(long, default_value_t = 25.0)]
    delay_ms: f64,
    /// Its rate, in Mbit/s.
    #[arg(long, default_value_t = 10.0)]
    rate_mbps: f64,
    /// Its random (Bernoulli) loss probability.
    #[arg(long, default_value_t = 0.01)]
    loss: f64,
    /// Probes per second in the delay and loss phase.
    #[arg(long, default_value_t = 1000)]
    probe_rate: u32,
    /// Seconds each of the two phases sends.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `pepkit testbed up`.
#[derive(clap::Args)]
pub(crate) struct UpArgs {
    /// The scenario file.
    file: PathBuf,
    /// The variant whose path to build (a part of its name) [default: the
    /// first].
    #[arg(long)]
    variant: Option<String>,
    /// Tear it down after this many seconds even without Ctrl-C.
    #[arg(long, default_value_t = 3600)]
    seconds: u64,
}

pub(crate) fn run(command: &Command) -> ExitCode {
    let result = match command {
        Command::Check(args) => check(args),
        Command::Up(args) => up(args),
        Command::Clean => {
            let swept = emu::sweep_stale();
            println!(
                "killed {} processes left in dead runs' namespaces, removed {} namespaces \
                 (with their interfaces, routes and nftables tables){}",
                swept.processes.len(),
                swept.namespaces.len(),
                match swept.namespaces.as_slice() {
                    [] => String::new(),
                    names => format!(": {}", names.join(", ")),
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|message| {
        eprintln!("error: {message}");
        ExitCode::from(2)
    })
}

fn check(args: &CheckArgs) -> Result<ExitCode, String> {
    emu::available().map_err(|reason| format!("the testbed {reason}"))?;
    if !(args.rate_mbps > 0.0 && args.delay_ms >= 0.0 && args.seconds > 0.0) {
        return Err("--rate-mbps and --seconds must be positive, --delay-ms not negative".into());
    }
    emu::sys::interrupt::install();
    let config = LinkCheckConfig {
        delay: Duration::from_secs_f64(args.delay_ms / 1e3),
        rate: netsim::Rate::from_bps((args.rate_mbps * 1e6) as u64),
        loss: args.loss,
        probe_rate: args.probe_rate.max(1),
        duration: Duration::from_secs_f64(args.seconds),
        ..LinkCheckConfig::default()
    };
    eprintln!(
        "checking the emulated link: {} ms, {} Mbit/s, loss {} ({} s per phase)…",
        args.delay_ms, args.rate_mbps, args.loss, args.seconds
    );
    let report = emu::link::check::run(&config).map_err(|e| e.to_string())?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", table(&report));
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn table(report: &LinkCheckReport) -> String {
    let mut out = String::from(
        "| quantity | configured | measured | tolerance | result |\n|---|---|---|---|---|\n",
    );
    for c in &report.comparisons {
        out.push_str(&format!(
            "| {} | {} {} | {:.4} {} | ±{:.4} | {} |\n",
            c.quantity,
            c.configured,
            c.unit,
            c.measured,
            c.unit,
            c.tolerance,
            if c.ok { "✓ within" } else { "✗ outside" }
        ));
    }
    let d = &report.added_delay;
    out.push_str(&format!(
        "\nadded one-way delay (ms): p50 {:.3}, p90 {:.3}, p99 {:.3}, max {:.3}; \
         probes {} sent, {} received\nrelay punctuality: {} frames, {} over 100 µs late, \
         {} over 1 ms, latest {} µs\n",
        d.p50_ms,
        d.p90_ms,
        d.p99_ms,
        d.max_ms,
        report.probes_sent,
        report.probes_received,
        report.lateness.frames,
        report.lateness.over_100us,
        report.lateness.over_1ms,
        report.lateness.max_us
    ));
    let p = &report.rate_path;
    out.push_str(&format!(
        "rate phase: source offered {:.1} Mbit/s ({} sent, {} refused); relay: {} kernel drops, \
         {} offered to the link, {} dropped from its full buffer, {} refused on send, \
         {} over 1 ms late (latest {} µs); sink received {}\n",
        p.offered_bps / 1e6,
        p.sent,
        p.send_errors,
        p.relay_kernel_drops,
        p.link_offered,
        p.link_dropped_buffer,
        p.relay_send_failures,
        p.lateness.over_1ms,
        p.lateness.max_us,
        p.received
    ));
    match report.rate_limit {
        Some(RateLimit::Relay { delivered_mbps }) => out.push_str(&format!(
            "capacity: the configured rate is beyond the emulator's capacity on this host; it \
             delivers its maximum, {delivered_mbps:.1} Mbit/s (frames leave late: see the rate \
             phase's relay)\n"
        )),
        Some(RateLimit::Source { offered_mbps }) => out.push_str(&format!(
            "capacity: the probe's source offered only {offered_mbps:.1} Mbit/s, under 1.1× the \
             rate: the instrument set the measured rate, a lower bound on the emulator's \
             capacity\n"
        )),
        Some(RateLimit::Sink { missed }) => out.push_str(&format!(
            "capacity: the probe's sink missed {missed} datagrams the link delivered: the \
             instrument set the measured rate, a lower bound on the emulator's capacity\n"
        )),
        None => {}
    }
    out
}

fn up(args: &UpArgs) -> Result<ExitCode, String> {
    emu::available().map_err(|reason| format!("the testbed {reason}"))?;
    let file = ScenarioFile::load(&args.file).map_err(|e| e.to_string())?;
    let variant = match &args.variant {
        Some(part) => file
            .variants
            .iter()
            .find(|v| v.name.contains(part.as_str()))
            .ok_or_else(|| format!("no variant's name contains {part:?}"))?,
        None => &file.variants[0],
    };
    let prepared =
        experiments::Prepared::new(&variant.scenario, &file.path, "", experiments::Mode::Real)
            .map_err(|e| e.to_string())?;
    let spec = experiments::trial::testbed_spec(&prepared, 0)?;
    emu::sys::interrupt::install();
    let testbed = emu::Testbed::build(&spec, emu::RealClock::start()).map_err(|e| e.to_string())?;
    println!("testbed of {:?} is up:", variant.name);
    for node in testbed.nodes() {
        let interfaces: Vec<String> = node
            .interfaces
            .iter()
            .map(|i| format!("{} {} (peer {})", i.name, i.addr, i.peer))
            .collect();
        println!(
            "  {:8} ip netns exec {}   {}{}",
            node.role,
            node.netns,
            interfaces.join(", "),
            if node.extra.is_empty() {
                String::new()
            } else {
                format!(", lo {:?}", node.extra)
            }
        );
    }
    println!("Ctrl-C tears it down (or after {} s).", args.seconds);
    let deadline = std::time::Instant::now() + Duration::from_secs(args.seconds);
    while !emu::sys::interrupt::requested() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(testbed);
    println!("torn down");
    Ok(ExitCode::SUCCESS)
}
