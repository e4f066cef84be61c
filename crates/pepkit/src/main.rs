//! `pepkit`: performance-enhancing proxies for encrypted transports.
//!
//! The command-line front end over the engines. Each subcommand lives in a
//! file of its own.

mod bench_quack;
mod bench_sidekick_proxy;
mod daemon;
mod merge;
mod pemi_daemon;
mod reproduce;
mod run_scenario;
mod sidekick_proxy;
mod tcp_pep;
mod testbed;
mod tunnel_server;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// pepkit: performance-enhancing proxies for encrypted transports such as QUIC.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file's variants × trials in the simulator (or, with
    /// --real, on a namespace testbed) and write trial files, summary.json,
    /// CSVs, plots and summary.md. Exits 1 if a claim of the scenario does
    /// not hold, 2 on an error (a bad scenario file, results not written).
    Run(run_scenario::Args),
    /// Merge the shards of one run (pepkit run FILE --shard K/N, one
    /// directory each) into the files the whole run writes.
    Merge(merge::Args),
    /// Run every scenario of one paper (scenarios/PAPER/*.toml) and write
    /// an index of the results with the paper's claims checked. Exits 1 if
    /// a claim does not hold, 2 on an error.
    Reproduce(reproduce::Args),
    /// Run the Sidekick proxy on a real router's interface: answer
    /// sidekick requests and send quACKs to the senders that asked, while
    /// the kernel forwards their traffic.
    SidekickProxy(sidekick_proxy::Args),
    /// Run the transparent split-connection TCP PEP on a real router
    /// (nftables tproxy), the papers' "TCP + PEP" baseline.
    TcpPep(tcp_pep::Args),
    /// Run PEMI in a real router's path: infer the losses of unmodified
    /// QUIC connections from the timing of their replies and resend them,
    /// transparently.
    Pemi(pemi_daemon::Args),
    /// Run the TECC / MASQUE tunnel server (HTTP/3 CONNECT-UDP) on UDP
    /// sockets of this host, forwarding to the targets --allow names.
    TunnelServer(tunnel_server::Args),
    /// Real-mode testbeds: check the link emulator, bring one up to work
    /// in, clean up after crashed runs.
    Testbed {
        #[command(subcommand)]
        command: testbed::Command,
    },
    /// Measure the speed of pepkit's hot paths on this machine.
    Bench {
        #[command(subcommand)]
        target: BenchTarget,
    },
}

#[derive(Subcommand)]
enum BenchTarget {
    /// Power-sum quACK encode (ns per packet) and decode (µs per quACK).
    Quack(bench_quack::Args),
    /// Packets per second the Sidekick proxy daemon sustains on one core,
    /// against its capture loop alone (needs root: builds two namespaces).
    SidekickProxy(bench_sidekick_proxy::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run_scenario::run(&args),
        Command::Merge(args) => merge::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::SidekickProxy(args) => sidekick_proxy::run(&args),
        Command::TcpPep(args) => tcp_pep::run(&args),
        Command::Pemi(args) => pemi_daemon::run(&args),
        Command::TunnelServer(args) => tunnel_server::run(&args),
        Command::Testbed { command } => testbed::run(&command),
        Command::Bench {
            target: BenchTarget::Quack(args),
        } => bench_quack::run(&args),
        Command::Bench {
            target: BenchTarget::SidekickProxy(args),
        } => bench_sidekick_proxy::run(&args),
    }
}
