//! `pepkit run FILE`: run a scenario's variants × trials and write the
//! results, then print the summary table.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `pepkit run`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The scenario file (TOML), e.g. scenarios/sidekick/scenario2.toml.
    file: PathBuf,
    /// Where to write the results [default: results/<scenario name>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace the scenario's base seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Replace the number of trials per variant.
    #[arg(long)]
    trials: Option<u32>,
    /// Threads to run trials on [default: all cores].
    #[arg(long)]
    jobs: Option<usize>,
    /// Run only the variants whose names contain this text.
    #[arg(long)]
    only: Option<String>,
    /// Print nothing but errors while running.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let file = match ScenarioFile::load(&args.file) {
        Ok(file) => file,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let options = RunOptions {
        seed: args.seed,
        trials: args.trials,
        jobs: args.jobs,
        only: args.only.clone(),
    };
    let mut progress = if args.quiet {
        Progress::silent()
    } else {
        Progress::stderr()
    };
    let registry = quic::ControllerRegistry::builtin();
    let results = match experiments::run(&file, &registry, &options, &mut progress) {
        Ok(results) => results,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&file.base.name));
    let written = match experiments::report::write(&out, &file, &results) {
        Ok(written) => written,
        Err(error) => {
            eprintln!("error: writing results to {}: {error}", out.display());
            return ExitCode::FAILURE;
        }
    };
    println!("{}\n", results.summary.title);
    println!("{}", experiments::report::table(&results.summary));
    if !results.summary.checks.is_empty() {
        println!("{}", experiments::check::table(&results.summary.checks));
    }
    let figures: Vec<String> = written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .map(|p| p.display().to_string())
        .collect();
    println!(
        "results in {}: summary.md, summary.json, CSVs, {} trial files; plots {}",
        out.display(),
        results.trials.iter().map(Vec::len).sum::<usize>(),
        figures.join(", ")
    );
    ExitCode::SUCCESS
}
