//! `pepkit`: performance-enhancing proxies for encrypted transports.
//!
//! The command-line front end over the engines. Each subcommand lives in a
//! file of its own.

mod bench_quack;
mod bench_sidekick_proxy;
mod compare;
mod daemon;
mod list;
mod merge;
mod middle;
mod reproduce;
mod run_scenario;
mod testbed;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Run every approach on one path and workload (end-to-end QUIC, each
    /// middle system where it belongs, the TECC tunnel, TCP and a PEP in
    /// real mode) and the congestion controllers alone on it: two tables,
    /// a figure each, and each table's run as `run` writes it.
    Compare(compare::Args),
    /// Merge the shards of one run (pepkit run FILE --shard K/N, one
    /// directory each) into the files the whole run writes.
    Merge(merge::Args),
    /// Run every scenario of one paper (scenarios/PAPER/*.toml) and write
    /// an index of the results with the paper's claims checked. Exits 1 if
    /// a claim does not hold, 2 on an error.
    Reproduce(reproduce::Args),
    /// List the papers, and each paper's scenario files with what they
    /// reproduce and how many claims they check.
    List(list::Args),
    /// Run a middle system on a real router (the Sidekick proxy, PEMI, the
    /// split QUIC proxy, the TCP PEP, the TECC tunnel server), from the
    /// `middle` table a scenario variant writes.
    Middle(middle::Args),
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
    // `middle --help` lists every system's settings from their declaration.
    let command = Cli::command().mut_subcommand("middle", |middle| {
        middle.after_long_help(middle::settings_help())
    });
    let cli = Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Run(args) => run_scenario::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Merge(args) => merge::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::List(args) => list::run(&args),
        Command::Middle(args) => middle::run(&args),
        Command::Testbed { command } => testbed::run(&command),
        Command::Bench {
            target: BenchTarget::Quack(args),
        } => bench_quack::run(&args),
        Command::Bench {
            target: BenchTarget::SidekickProxy(args),
        } => bench_sidekick_proxy::run(&args),
    }
}
