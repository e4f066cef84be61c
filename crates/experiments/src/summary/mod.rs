//! `summary.json`: per variant, each metric's spread across trials, and
//! the scenario's claims evaluated on them.
//!
//! The schema is stable: scripts may rely on every field named here, and a
//! change to them bumps [`SCHEMA`]. See `docs/experiments.md`.

mod checks;
mod labels;
mod stats;

pub use checks::{CheckResult, table as checks_table};
pub use labels::metric_label;
pub use stats::{Spread, quantile};

use crate::outcome::{Mode, TrialResult};
use crate::scenario::{SweepPoint, Variant};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The schema identifier written into every summary.
pub const SCHEMA: &str = "pepkit.summary/1";

/// The results of a whole run.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Summary {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Where the trials ran: `simulator` or `real`.
    #[serde(default)]
    pub mode: Mode,
    /// The scenario's name.
    pub scenario: String,
    /// Its title.
    pub title: String,
    /// What it reproduces.
    pub source: Option<String>,
    /// The base seed.
    pub seed: u64,
    /// Trials per variant.
    pub trials: u32,
    /// The `--set` overrides the scenario file was read with, as
    /// `PATH=VALUE` (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// In real mode, the CPU the middle node's engine ran on alone
    /// (`--pin-middle`; absent when it shared them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub middle_cpu: Option<usize>,
    /// The metrics the report leads with, in order.
    pub headline: Vec<String>,
    /// Per variant, in file order.
    pub variants: Vec<VariantSummary>,
    /// The scenario's claims and whether they held (absent if it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
}

/// One variant's results.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct VariantSummary {
    /// The variant's name.
    pub name: String,
    /// Trials run.
    pub trials: usize,
    /// Trials whose workload finished before the time limit.
    pub completed: usize,
    /// Trials an interruption stopped or kept from starting (absent when
    /// none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interrupted: usize,
    /// Trials that ended with an error (a connection aborted, a peer that
    /// failed): their metrics are left out of the spreads (absent when
    /// none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: usize,
    /// Each metric's spread over the trials without errors that reported
    /// it.
    pub metrics: BTreeMap<String, Spread>,
    /// The paper's values, where the scenario names them.
    pub paper: BTreeMap<String, f64>,
    /// For a point of a sweep: its line and x value (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepPoint>,
}

impl VariantSummary {
    /// Summarises one variant's trials.
    pub fn new(variant: &Variant, trials: &[TrialResult]) -> VariantSummary {
        let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        // A trial that ended with an error measured something else than
        // the scenario asks (an aborted transfer, a half-run workload):
        // no claim or table may rest on it.
        for trial in trials.iter().filter(|t| t.errors.is_empty()) {
            for (metric, value) in &trial.metrics {
                values.entry(metric).or_default().push(*value);
            }
        }
        VariantSummary {
            name: variant.name.clone(),
            trials: trials.len(),
            completed: trials.iter().filter(|t| t.completed).count(),
            interrupted: trials.iter().filter(|t| t.interrupted_run()).count(),
            failed: trials
                .iter()
                .filter(|t| !t.errors.is_empty() && !t.interrupted_run())
                .count(),
            metrics: values
                .into_iter()
                .filter_map(|(metric, values)| Some((metric.to_string(), Spread::of(&values)?)))
                .collect(),
            paper: variant.paper.clone(),
            sweep: variant.sweep.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::ScenarioFile;

    /// A trial that ended with an error is counted, and none of its
    /// metrics reach the spreads (so no claim rests on it).
    #[test]
    fn trials_with_errors_are_left_out() {
        let text = r#"
name = "t"
title = "t"
path = ["a"]
[client]
addr = "10.0.0.1"
[server]
addr = "10.0.1.1"
[hops.a]
delay = "1ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "1MB"
[[variant]]
name = "v"
"#;
        let file = ScenarioFile::parse(text, "t.toml".into()).unwrap();
        let seed = netsim::Seed::new(1);
        let trial = |i: u32, goodput: f64, error: Option<&str>| {
            let mut t = TrialResult::new("v", i, seed, "finished", netsim::Time::ZERO, 0);
            t.completed = error.is_none();
            t.set("goodput_mbps", goodput);
            t.errors.extend(error.map(str::to_string));
            t
        };
        let trials = [
            trial(0, 9.0, None),
            trial(1, 1.0, Some("client: too many gaps")),
            trial(2, 8.0, None),
        ];
        let summary = VariantSummary::new(&file.variants[0], &trials);
        assert_eq!(summary.failed, 1);
        let goodput = &summary.metrics["goodput_mbps"];
        assert_eq!((goodput.n, goodput.min, goodput.max), (2, 8.0, 9.0));
    }
}
