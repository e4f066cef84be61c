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
    /// Each metric's spread over the trials that reported it.
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
        for trial in trials {
            for (metric, value) in &trial.metrics {
                values.entry(metric).or_default().push(*value);
            }
        }
        VariantSummary {
            name: variant.name.clone(),
            trials: trials.len(),
            completed: trials.iter().filter(|t| t.completed).count(),
            interrupted: trials.iter().filter(|t| t.interrupted_run()).count(),
            metrics: values
                .into_iter()
                .filter_map(|(metric, values)| Some((metric.to_string(), Spread::of(&values)?)))
                .collect(),
            paper: variant.paper.clone(),
            sweep: variant.sweep.clone(),
        }
    }
}
