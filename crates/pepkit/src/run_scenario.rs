//! `pepkit run FILE`: run a scenario's variants × trials and write the
//! results, then print the summary table.

use experiments::{Progress, RunOptions, RunResults, ScenarioFile};
use std::path::{Path, PathBuf};
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
    #[command(flatten)]
    common: Common,
    /// Run only the variants whose names contain this text.
    #[arg(long)]
    only: Option<String>,
}

/// Options shared by `pepkit run` and `pepkit reproduce`.
#[derive(clap::Args, Clone)]
pub(crate) struct Common {
    /// Replace the number of trials per variant.
    #[arg(long)]
    pub(crate) trials: Option<u32>,
    /// Threads to run trials on [default: all cores].
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Print nothing but errors while running.
    #[arg(long, short)]
    pub(crate) quiet: bool,
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
        trials: args.common.trials,
        jobs: args.common.jobs,
        only: args.only.clone(),
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&file.base.name));
    match run_and_write(&file, &options, args.common.quiet, &out) {
        Ok(_) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// Runs `file`, writes its results into `out` and prints its table, its
/// checks and where the results went. The error is the exit code to use.
pub(crate) fn run_and_write(
    file: &ScenarioFile,
    options: &RunOptions,
    quiet: bool,
    out: &Path,
) -> Result<RunResults, ExitCode> {
    let mut progress = if quiet {
        Progress::silent()
    } else {
        Progress::stderr()
    };
    let registry = quic::ControllerRegistry::builtin();
    let results = experiments::run(file, &registry, options, &mut progress).map_err(|error| {
        eprintln!("error: {error}");
        ExitCode::from(2)
    })?;
    let written = experiments::report::write(out, file, &results).map_err(|error| {
        eprintln!("error: writing results to {}: {error}", out.display());
        ExitCode::FAILURE
    })?;
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
        "results in {}: summary.md, summary.json, CSVs, {} trial files; plots {}\n",
        out.display(),
        results.trials.iter().map(Vec::len).sum::<usize>(),
        figures.join(", ")
    );
    Ok(results)
}
