//! Runs every variant × trial of a scenario on a pool of threads, or, in
//! real mode, one after the other on testbeds.
//!
//! Each simulated trial is an independent simulation with its own seed, so
//! trials run in any order on any thread and the results, put back in
//! (variant, trial) order, are the same for any `--jobs`. Real-mode trials
//! measure the machine, so they run one at a time. Variants that cannot run
//! in the chosen mode (TCP in the simulator, the split QUIC proxy in real
//! mode) are skipped and listed with the reason.

mod merge;
mod progress;
mod shard;
mod warnings;

pub use merge::{MAX_FILE_BYTES, merge, write_shard};
pub use progress::Progress;
pub use shard::{MANIFEST, Manifest, Shard, ShardSpec, VERSION};
pub(crate) use warnings::mean_loss;
pub use warnings::{unseen_traffic, upstream_loss};

use crate::outcome::{Mode, TrialResult};
use crate::scenario::{MAX_TRIALS, ScenarioError, ScenarioFile, Variant};
use crate::summary::{CheckResult, SCHEMA, Summary, VariantSummary};
use crate::trial::{AloneRuns, Prepared};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// What to change from the scenario file, and how to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Replace the scenario's base seed.
    pub seed: Option<u64>,
    /// Replace the number of trials per variant.
    pub trials: Option<u32>,
    /// Worker threads (default: the machine's parallelism).
    pub jobs: Option<usize>,
    /// Run only the variants whose names contain this text.
    pub only: Option<String>,
    /// Run only these variants (or swept variants, all their points), by
    /// name (default: all).
    pub variants: Vec<String>,
    /// In the simulator (default) or on real testbeds (network namespaces;
    /// needs root).
    pub mode: Mode,
    /// Run only this shard of the trials (`--shard K/N`).
    pub shard: Option<Shard>,
    /// In real mode, the CPU a middle node's engine runs on alone: the
    /// trial's other threads and processes are kept off it
    /// ([`crate::trial::keep_middle_cpu`] checks it).
    pub middle_cpu: Option<usize>,
    /// Capture these trials: pcapng files at the chosen hops and each of
    /// our endpoints' qlog (`--capture`; [`crate::capture`]).
    pub capture: Option<crate::capture::Captures>,
}

/// The results of a run, before they are written anywhere.
#[derive(Clone, Debug)]
pub struct RunResults {
    /// The summary.
    pub summary: Summary,
    /// Every trial, per variant in file order, then by trial index.
    pub trials: Vec<Vec<TrialResult>>,
    /// Variants not run in this mode, and why.
    pub skipped: Vec<(String, String)>,
}

/// A variant ready to run.
pub(crate) type Ready<'a> = (&'a Variant, Prepared);

/// Variants skipped in this mode, with why.
type Skipped = Vec<(String, String)>;

/// Runs `file`'s variants, reporting progress to `progress`.
pub fn run(
    file: &ScenarioFile,
    options: &RunOptions,
    progress: &mut Progress,
) -> Result<RunResults, ScenarioError> {
    run_recording(file, options, false, progress)
}

/// [`run`], and with `middle_stats` each trial also records what the
/// middle engine counted ([`TrialResult::middle`]).
pub(crate) fn run_recording(
    file: &ScenarioFile,
    options: &RunOptions,
    middle_stats: bool,
    progress: &mut Progress,
) -> Result<RunResults, ScenarioError> {
    let (mut variants, skipped) = prepare(file, options)?;
    for (_, prepared) in &mut variants {
        prepared.middle_stats = middle_stats;
    }
    let trials = execute(&variants, options, progress);
    let summary = summarize(file, options.mode, &variants, &trials);
    Ok(RunResults {
        summary,
        trials,
        skipped,
    })
}

/// The variants that run in this mode (and match `--only`), prepared with
/// the options' seed and trial count; the ones skipped, with why.
pub(crate) fn prepare<'a>(
    file: &'a ScenarioFile,
    options: &RunOptions,
) -> Result<(Vec<Ready<'a>>, Skipped), ScenarioError> {
    let mode = options.mode;
    let fail = |field: &str, message: String| ScenarioError::Field {
        path: file.path.clone(),
        context: String::new(),
        field: field.into(),
        message,
    };
    if let Some(trials) = options.trials.filter(|&t| t == 0 || t > MAX_TRIALS) {
        return Err(fail(
            "trials",
            format!("--trials {trials} is outside 1..={MAX_TRIALS}"),
        ));
    }
    if let Some(capture) = &options.capture {
        let names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
        capture
            .check_variants(&names)
            .map_err(|message| fail("capture", message))?;
    }
    let mut variants = Vec::new();
    let mut skipped = Vec::new();
    for (index, variant) in file.variants.iter().enumerate() {
        let named = options.variants.is_empty() || variant.is_named_by(&options.variants);
        let matches = options
            .only
            .as_ref()
            .is_none_or(|only| variant.name.contains(only.as_str()));
        if !(named && matches) {
            continue;
        }
        if let Some(reason) = variant.scenario.unsupported_in(mode) {
            skipped.push((variant.name.clone(), reason.to_string()));
            continue;
        }
        let mut scenario = variant.scenario.clone();
        if let Some(seed) = options.seed {
            scenario.seed = seed;
        }
        if let Some(trials) = options.trials {
            scenario.trials = trials;
        }
        let context = format!("variant \"{}\": ", variant.name);
        let mut prepared = Prepared::new(&scenario, &file.path, &context, mode)?;
        prepared.middle_cpu = options.middle_cpu.filter(|_| mode == Mode::Real);
        if let Some(capture) = &options.capture {
            prepared.capture = capture
                .for_variant(index + 1, &variant.name, &scenario)
                .map_err(|message| fail("capture", message))?;
        }
        variants.push((variant, prepared));
    }
    if variants.is_empty() && !skipped.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .map(|(name, why)| format!("{name:?}: {why}"))
            .collect();
        let message = format!("no variant runs in {}: {}", mode.describe(), why.join("; "));
        return Err(fail("variant", message));
    }
    if variants.is_empty() {
        let names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
        let only = options.only.as_deref().unwrap_or("");
        let message = format!("no variant's name contains {only:?}; the variants are {names:?}");
        return Err(fail("variant", message));
    }
    Ok((variants, skipped))
}

/// Runs every trial of every variant: on a pool of threads in the
/// simulator (each trial on its own, so the results do not depend on the
/// pool), one at a time in real mode. Results per variant, by trial.
fn execute(
    variants: &[Ready<'_>],
    options: &RunOptions,
    progress: &mut Progress,
) -> Vec<Vec<TrialResult>> {
    // Trial `t` of variant `v` is task `starts[v] + t`: no list of tasks.
    // A shard runs the tasks `index − 1`, `index − 1 + count`, …
    let mut starts = Vec::with_capacity(variants.len() + 1);
    let mut all = 0usize;
    for (_, prepared) in variants {
        starts.push(all);
        all += prepared.scenario().trials as usize;
    }
    let (first, step) = options
        .shard
        .map_or((0, 1), |s| ((s.index - 1) as usize, s.count as usize));
    let total = all.saturating_sub(first).div_ceil(step);
    let jobs = match options.mode {
        // Real trials measure the machine: one at a time.
        Mode::Real => 1,
        Mode::Simulator => options
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, total.max(1)),
    };
    progress.start(total, jobs);
    let mut results: Vec<Vec<TrialResult>> = variants.iter().map(|_| Vec::new()).collect();
    let next = AtomicUsize::new(0);
    let alone_runs = AloneRuns::default();
    let (sender, receiver) = mpsc::channel::<(usize, TrialResult)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let sender = sender.clone();
            let (next, starts, alone_runs) = (&next, &starts, &alone_runs);
            scope.spawn(move || {
                loop {
                    let ordinal = next.fetch_add(1, Ordering::Relaxed);
                    if ordinal >= total {
                        return;
                    }
                    let task = first + ordinal * step;
                    let v = starts.partition_point(|&start| start <= task) - 1;
                    let (variant, prepared) = &variants[v];
                    let trial = (task - starts[v]) as u32;
                    let result = prepared.run(&variant.name, trial, options.mode, alone_runs);
                    if sender.send((v, result)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(sender);
        for (v, result) in receiver {
            progress.trial_done(&result);
            results[v].push(result);
        }
    });
    progress.finish();
    for trials in &mut results {
        trials.sort_by_key(|trial| trial.trial);
    }
    results
}

/// Each variant's summary, and the claims that can be checked on what ran.
pub(crate) fn summarize(
    file: &ScenarioFile,
    mode: Mode,
    variants: &[Ready<'_>],
    trials: &[Vec<TrialResult>],
) -> Summary {
    let first = variants[0].1.scenario();
    let summary = Summary {
        schema: SCHEMA.to_string(),
        mode,
        scenario: file.base.name.clone(),
        title: file.base.title.clone(),
        source: file.base.source.clone(),
        seed: first.seed,
        trials: first.trials,
        overrides: file.overrides.iter().map(ToString::to_string).collect(),
        middle_cpu: variants[0].1.middle_cpu,
        headline: first.headline(),
        variants: variants
            .iter()
            .zip(trials)
            .map(|((variant, _), results)| VariantSummary::new(variant, results))
            .collect(),
        checks: Vec::new(),
    };
    // A run of some variants (`--only`) checks only what it can.
    let ran = |name: &Option<String>, series: bool| {
        name.as_ref().is_none_or(|name| {
            summary.variants.iter().any(|v| {
                &v.name == name || (series && v.sweep.as_ref().is_some_and(|p| &p.series == name))
            })
        })
    };
    let checks = file
        .checks
        .iter()
        .filter(|c| c.mode.is_none_or(|m| m == mode))
        .filter(|c| {
            ran(&Some(c.variant.clone()), c.over_series())
                && ran(&c.baseline().map(String::from), c.over_series())
        })
        .map(|check| CheckResult::evaluate(check, &summary))
        .collect();
    Summary { checks, ..summary }
}
