//! Runs every variant × trial of a scenario on a pool of threads, or, in
//! real mode, one after the other on testbeds.
//!
//! Each simulated trial is an independent simulation with its own seed, so
//! trials run in any order on any thread and the results, put back in
//! (variant, trial) order, are the same for any `--jobs`. Real-mode trials
//! measure the machine, so they run one at a time. Variants that cannot run
//! in the chosen mode (TCP in the simulator, the split QUIC proxy in real
//! mode) are skipped and listed with the reason.

mod progress;

pub use progress::Progress;

use crate::outcome::{Mode, TrialResult};
use crate::scenario::{ScenarioError, ScenarioFile};
use crate::summary::{CheckResult, SCHEMA, Summary, VariantSummary};
use crate::trial::Prepared;
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
    /// In the simulator (default) or on real testbeds (network namespaces;
    /// needs root).
    pub mode: Mode,
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

/// Runs `file`'s variants, reporting progress to `progress`.
pub fn run(
    file: &ScenarioFile,
    options: &RunOptions,
    progress: &mut Progress,
) -> Result<RunResults, ScenarioError> {
    let mode = options.mode;
    let mut variants = Vec::new();
    let mut skipped = Vec::new();
    for variant in &file.variants {
        if let Some(only) = &options.only
            && !variant.name.contains(only.as_str())
        {
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
            scenario.trials = trials.max(1);
        }
        let context = format!("variant \"{}\": ", variant.name);
        let prepared = Prepared::new(&scenario, &file.path, &context, mode)?;
        variants.push((variant, prepared));
    }
    if variants.is_empty() && !skipped.is_empty() {
        return Err(ScenarioError::Field {
            path: file.path.clone(),
            context: String::new(),
            field: "variant".into(),
            message: format!(
                "no variant runs in {}: {}",
                mode.describe(),
                skipped
                    .iter()
                    .map(|(name, why)| format!("{name:?}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    if variants.is_empty() {
        return Err(ScenarioError::Field {
            path: file.path.clone(),
            context: String::new(),
            field: "variant".into(),
            message: format!(
                "no variant's name contains {:?}; the variants are {:?}",
                options.only.as_deref().unwrap_or(""),
                file.variants
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
            ),
        });
    }
    let tasks: Vec<(usize, u32)> = variants
        .iter()
        .enumerate()
        .flat_map(|(v, (_, prepared))| (0..prepared.scenario().trials).map(move |t| (v, t)))
        .collect();
    let jobs = match mode {
        // Real trials measure the machine: one at a time.
        Mode::Real => 1,
        Mode::Simulator => options
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, tasks.len()),
    };
    progress.start(tasks.len(), jobs);

    let mut slots: Vec<Vec<Option<TrialResult>>> = variants
        .iter()
        .map(|(_, prepared)| vec![None; prepared.scenario().trials as usize])
        .collect();
    let next = AtomicUsize::new(0);
    let (sender, receiver) = mpsc::channel::<TrialResult>();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let sender = sender.clone();
            let (next, tasks, variants) = (&next, &tasks, &variants);
            scope.spawn(move || {
                while let Some(&(v, trial)) = tasks.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (variant, prepared) = &variants[v];
                    let result = prepared.run(&variant.name, trial, mode);
                    if sender.send(result).is_err() {
                        return;
                    }
                }
            });
        }
        drop(sender);
        for result in receiver {
            let v = variants
                .iter()
                .position(|(variant, _)| variant.name == result.variant)
                .expect("results come from these variants");
            progress.trial_done(&result);
            let trial = result.trial as usize;
            slots[v][trial] = Some(result);
        }
    });
    progress.finish();

    let trials: Vec<Vec<TrialResult>> = slots
        .into_iter()
        .map(|slot| {
            slot.into_iter()
                .map(|t| t.expect("every trial ran"))
                .collect()
        })
        .collect();
    let first = variants[0].1.scenario();
    let summary = Summary {
        schema: SCHEMA.to_string(),
        mode,
        scenario: file.base.name.clone(),
        title: file.base.title.clone(),
        source: file.base.source.clone(),
        seed: first.seed,
        trials: first.trials,
        headline: first.headline(),
        variants: variants
            .iter()
            .zip(&trials)
            .map(|((variant, _), results)| VariantSummary::new(variant, results))
            .collect(),
        checks: Vec::new(),
    };
    // A run of some variants (`--only`) checks only what it can.
    let ran = |name: &Option<String>| {
        name.as_ref()
            .is_none_or(|name| summary.variants.iter().any(|v| &v.name == name))
    };
    let checks = file
        .checks
        .iter()
        .filter(|c| c.mode.is_none_or(|m| m == mode))
        .filter(|c| ran(&Some(c.variant.clone())) && ran(&c.ratio_to))
        .map(|check| CheckResult::evaluate(check, &summary))
        .collect();
    let summary = Summary { checks, ..summary };
    Ok(RunResults {
        summary,
        trials,
        skipped,
    })
}
