//! `pepkit`: performance-enhancing proxies for encrypted transports.
//!
//! The command-line front end over the engines. Each subcommand lives in a
//! file of its own.

mod bench_quack;
mod reproduce;
mod run_scenario;

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
    /// Run a scenario file's variants × trials in the simulator and write
    /// trial files, summary.json, CSVs, plots and summary.md.
    Run(run_scenario::Args),
    /// Run every scenario of one paper (scenarios/PAPER/*.toml) and write
    /// an index of the results with the paper's claims checked.
    Reproduce(reproduce::Args),
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run_scenario::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::Bench {
            target: BenchTarget::Quack(args),
        } => bench_quack::run(&args),
    }
}
