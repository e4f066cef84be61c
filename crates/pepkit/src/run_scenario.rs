//! `pepkit run FILE [--real]`: run a scenario's variants × trials in the
//! simulator or on a real testbed, write the results, then print the
//! summary table (and, once both modes have run, the two side by side).

use experiments::scenario::Override;
use experiments::{Mode, Progress, RunOptions, RunResults, ScenarioFile};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pepkit run`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The scenario file (TOML), e.g. scenarios/sidekick/scenario2.toml.
    file: PathBuf,
    /// Where to write the results [default: results/<scenario name>, and
    /// its `real/` folder with --real].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run on a real testbed (network namespaces joined through the user-space
    /// link emulator; needs root) instead of the simulator. Trials run one at
    /// a time in real time.
    #[arg(long)]
    real: bool,
    /// Replace the scenario's base seed.
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    common: Common,
    /// Run only the variants whose names contain this text.
    #[arg(long)]
    only: Option<String>,
    /// Run only shard K of N of the trials (every N-th, from the K-th; K
    /// counts from 1) and write their trial files [default out:
    /// results/<name>/shard-K-of-N]; `pepkit merge` builds the summary,
    /// tables and plots from the shards. `auto` takes K and N from a Slurm
    /// job array (SLURM_ARRAY_TASK_ID, from 0, and SLURM_ARRAY_TASK_COUNT);
    /// `auto/N` from a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, from
    /// 0, of N completions). See docs/experiments.md.
    #[arg(long, value_name = "K/N|auto|auto/N")]
    shard: Option<experiments::run::ShardSpec>,
    /// Edit the scenario before reading it, as if the file said PATH =
    /// VALUE (repeatable, in order): PATH a dotted field such as
    /// hops.near.loss or variant."MFT, C1".server.controller, VALUE a TOML
    /// value (0.02, "10MB", { packet_threshold = 300 }) or one word taken
    /// as a string (10MB, aioquic). A variant that sets the field itself
    /// keeps its own value (a warning names it). Recorded in summary.json.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<Override>,
    /// With --real: run the middle node's engine alone on CPU N, and every
    /// other thread and process of the trials (endpoints, link emulator,
    /// peers) on the other CPUs, as a router with a core of its own (for
    /// measuring a middlebox's CPU, e.g. scenarios/pemi/fig13-cpu.toml).
    /// Recorded in summary.json.
    #[arg(long, value_name = "N")]
    pin_middle: Option<usize>,
    #[command(flatten)]
    capture: CaptureArgs,
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
    /// No progress while running: only errors, then the results table,
    /// the claims and where the files are.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// `--capture [SPEC]…`, for every command that runs trials (`run`,
/// `compare`): flatten it into the command's arguments, then give the
/// run's options `capture.captures(&out)`.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct CaptureArgs {
    /// Capture trials into OUT/captures/<variant>/trial-<i>/: a pcapng per
    /// hop (both directions, the middle system's own packets included,
    /// the TLS secrets inside: Wireshark decrypts it alone) and a qlog
    /// per QUIC endpoint of ours. Alone: the first trial (0) of every
    /// variant at every hop. SPEC narrows it:
    /// 'hops=near,far;variant=NAME|N;trials=0,3-5' (each part optional;
    /// N counts variants from 1). Repeat the flag to add more. See
    /// docs/capture.md.
    #[arg(long, value_name = "SPEC", num_args = 0..=1, default_missing_value = "")]
    pub(crate) capture: Vec<experiments::capture::CaptureRequest>,
}

impl CaptureArgs {
    /// The captures asked for, written under `out/captures` (`None`
    /// without `--capture`).
    pub(crate) fn captures(&self, out: &Path) -> Option<experiments::capture::Captures> {
        (!self.capture.is_empty()).then(|| experiments::capture::Captures {
            requests: self.capture.clone(),
            dir: out.join("captures"),
        })
    }
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let file = match ScenarioFile::load_with(&args.file, &args.set) {
        Ok(file) => file,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    warn_shadowed(&file);
    let mode = if args.real {
        if let Err(error) = real_mode() {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
        Mode::Real
    } else {
        Mode::Simulator
    };
    if let Some(cpu) = args.pin_middle {
        let checked = match mode {
            Mode::Real => experiments::trial::keep_middle_cpu(cpu),
            Mode::Simulator => Err(format!(
                "--pin-middle {cpu} needs --real (the simulator has no CPUs to give)"
            )),
        };
        if let Err(error) = checked {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    }
    let shard = match args
        .shard
        .map(|spec| spec.resolve(|name| std::env::var(name).ok()))
    {
        None => None,
        Some(Ok(shard)) => Some(shard),
        Some(Err(error)) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut options = RunOptions {
        seed: args.seed,
        trials: args.common.trials,
        jobs: args.common.jobs,
        only: args.only.clone(),
        variants: Vec::new(),
        mode,
        shard,
        middle_cpu: args.pin_middle,
        capture: None,
    };
    let base = PathBuf::from("results").join(&file.base.name);
    if let Some(shard) = shard {
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| base.join(format!("shard-{}-of-{}", shard.index, shard.count)));
        options.capture = args.capture.captures(&out);
        return run_shard(&file, &options, shard, args.common.quiet, &out);
    }
    let out = args.out.clone().unwrap_or_else(|| match options.mode {
        Mode::Simulator => base.clone(),
        Mode::Real => base.join("real"),
    });
    options.capture = args.capture.captures(&out);
    let results = match run_and_write(&file, &options, args.common.quiet, &out) {
        Ok(results) => results,
        Err(code) => return code,
    };
    // With the default layout, put the two modes side by side once both ran.
    if args.out.is_none() {
        match experiments::report::compare_modes(&base, &base.join("real")) {
            Ok(Some(table)) => println!("simulator and real mode, side by side:\n\n{table}"),
            Ok(None) => {}
            Err(error) => eprintln!("warning: comparing with the other mode: {error}"),
        }
    }
    if emu::sys::interrupt::requested() {
        eprintln!("interrupted: the results above are of the trials that ran");
        return ExitCode::from(130);
    }
    // A claim of the paper that did not hold is a failed run.
    if results.summary.checks.iter().all(|check| check.passed) {
        ExitCode::SUCCESS
    } else {
        eprintln!("a claim did not hold (see the table above)");
        ExitCode::FAILURE
    }
}

/// Runs one shard and writes its trials and manifest into `out`.
fn run_shard(
    file: &ScenarioFile,
    options: &RunOptions,
    shard: experiments::run::Shard,
    quiet: bool,
    out: &Path,
) -> ExitCode {
    let mut progress = if quiet {
        Progress::silent()
    } else {
        Progress::stderr()
    };
    let results = match experiments::run(file, options, &mut progress) {
        Ok(results) => results,
        Err(error) => {
            eprintln!("error: {}", file.note_overrides(error));
            return ExitCode::from(2);
        }
    };
    let manifest = match experiments::run::Manifest::new(file, options, shard) {
        Ok(manifest) => manifest,
        Err(error) => {
            eprintln!("error: {}: {error}", file.path.display());
            return ExitCode::from(2);
        }
    };
    match experiments::report::write_shard(out, &results, &manifest) {
        Ok(written) => {
            println!(
                "shard {}/{}: {} trial files in {}; merge the shards with pepkit merge",
                shard.index,
                shard.count,
                written.len() - 1,
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: writing results to {}: {error}", out.display());
            ExitCode::FAILURE
        }
    }
}

/// Warns of the `--set` overrides some variants do not see: they set the
/// field themselves, and a variant's own value wins over the base's.
fn warn_shadowed(file: &ScenarioFile) {
    for shadowed in &file.shadowed {
        let names: Vec<String> = shadowed.variants.iter().map(|n| format!("{n:?}")).collect();
        let (variants, set, itself) = match names.len() {
            1 => ("variant", "it sets", "itself"),
            _ => ("variants", "they set", "themselves"),
        };
        eprintln!(
            "warning: --set {} does not reach {variants} {}: {set} `{}` (or a table above \
             it) {itself}, and a variant's own value wins (--set 'variant.\"NAME\".{}=…' \
             sets it in one)",
            shadowed.set,
            names.join(", "),
            shadowed.set.path(),
            shadowed.set.path(),
        );
    }
}

/// Real mode: root and namespaces checked up front, Ctrl-C handled.
fn real_mode() -> Result<(), String> {
    emu::available().map_err(|reason| format!("real mode {reason}"))?;
    emu::sys::interrupt::install();
    Ok(())
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
    let results = experiments::run(file, options, &mut progress).map_err(|error| {
        eprintln!("error: {}", file.note_overrides(error));
        ExitCode::from(2)
    })?;
    let written = experiments::report::write(out, file, &results).map_err(|error| {
        eprintln!("error: writing results to {}: {error}", out.display());
        ExitCode::from(2)
    })?;
    print_results(&results, options, &written, out);
    Ok(results)
}

/// Prints a run's title, what it skipped, its table, its claims and where
/// its files are.
pub(crate) fn print_results(
    results: &RunResults,
    options: &RunOptions,
    written: &[PathBuf],
    out: &Path,
) {
    println!("{}\n", results.summary.title);
    // One line per reason: "skipped in the simulator (why): A, B".
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, why) in &results.skipped {
        match reasons.iter_mut().find(|(reason, _)| reason == why) {
            Some((_, names)) => names.push(name),
            None => reasons.push((why, vec![name])),
        }
    }
    for (why, names) in &reasons {
        println!(
            "skipped in {} ({why}): {}",
            options.mode.describe(),
            names.join(", ")
        );
    }
    if !reasons.is_empty() {
        println!();
    }
    println!("{}", experiments::report::table(&results.summary));
    if !results.summary.checks.is_empty() {
        println!(
            "{}",
            experiments::summary::checks_table(&results.summary.checks)
        );
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
}
