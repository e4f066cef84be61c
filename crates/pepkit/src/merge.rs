//! `pepkit merge DIRS… --out DIR`: the shards of one run (`pepkit run FILE
//! --shard K/N`, one directory each) merged into the files the whole run
//! writes (trial files, summary.json, CSVs, plots, summary.md), reading
//! the scenario file with the shards' `--set` overrides, then the table and
//! the claims as `pepkit run` prints them. Exits 1 if a claim
//! does not hold, 2 if the shards do not make up one run (a shard of
//! another run, named with the field that differs; shards or trial files
//! missing; a file in a shard that is not a regular file of at most
//! 64 MiB).

use crate::run_scenario::print_results;
use experiments::ScenarioFile;
use experiments::run::Manifest;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `pepkit merge`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The shards' directories (every shard of the run, once each). A
    /// shard of another run (scenario, its file, --seed, --trials, --only,
    /// --set, mode or pepkit version) is refused, naming the difference;
    /// only regular files of at most 64 MiB inside a shard are read.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged results.
    #[arg(long)]
    out: PathBuf,
    /// The scenario file [default: the one the shards' manifests name].
    #[arg(long)]
    scenario: Option<PathBuf>,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let manifest = match Manifest::read(&args.dirs[0]) {
        Ok(manifest) => manifest,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let path = args.scenario.clone().unwrap_or(manifest.scenario.clone());
    // The shards' file as they read it: with their --set overrides.
    let overrides = match manifest.overrides() {
        Ok(overrides) => overrides,
        Err(error) => {
            eprintln!("error: {}: {error}", args.dirs[0].display());
            return ExitCode::from(2);
        }
    };
    let file = match ScenarioFile::load_with(&path, &overrides) {
        Ok(file) if file.base.name == manifest.name => file,
        Ok(file) => {
            eprintln!(
                "error: {} is scenario {:?}, the shards are of {:?}",
                path.display(),
                file.base.name,
                manifest.name
            );
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let options = manifest.options();
    let results = match experiments::run::merge(&file, &options, &args.dirs) {
        Ok(results) => results,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let written = match experiments::report::write(&args.out, &file, &results) {
        Ok(written) => written,
        Err(error) => {
            eprintln!("error: writing results to {}: {error}", args.out.display());
            return ExitCode::FAILURE;
        }
    };
    print_results(&results, &options, &written, &args.out);
    if results.summary.checks.iter().all(|check| check.passed) {
        ExitCode::SUCCESS
    } else {
        eprintln!("a claim did not hold (see the table above)");
        ExitCode::FAILURE
    }
}
