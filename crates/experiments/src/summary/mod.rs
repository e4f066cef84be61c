//! `summary.json`: per variant, each metric's spread across trials.
//!
//! The schema is stable: scripts may rely on every field named here, and a
//! change to them bumps [`SCHEMA`]. See `docs/experiments.md`.

use crate::check::CheckResult;
use crate::scenario::{Scenario, SweepPoint, Variant, Workload};
use crate::stats::Spread;
use crate::trial::TrialResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema identifier written into every summary.
pub const SCHEMA: &str = "pepkit.summary/1";

/// The results of a whole run.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Summary {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Where the trials ran: `simulator` or `real`.
    #[serde(default)]
    pub mode: crate::scenario::Mode,
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
            metrics: values
                .into_iter()
                .filter_map(|(metric, values)| Some((metric.to_string(), Spread::of(&values)?)))
                .collect(),
            paper: variant.paper.clone(),
            sweep: variant.sweep.clone(),
        }
    }
}

/// The metrics a report leads with for a workload.
pub fn headline_metrics(scenario: &Scenario) -> Vec<String> {
    if !scenario.flows.is_empty() {
        // Competing flows: the total, each flow's share, the fairness.
        let mut names = vec!["goodput_mbps".to_string()];
        for flow in &scenario.flows {
            names.push(format!("share_{}", crate::report::slug(&flow.name)));
        }
        names.push("jain_index".to_string());
        return names;
    }
    let names: &[&str] = match scenario.workload {
        Workload::Bulk { .. } => &["goodput_mbps", "completion_s"],
        Workload::Media { .. } => &["dejitter_p50_ms", "dejitter_p95_ms", "dejitter_p99_ms"],
        Workload::Rtc { .. } => &[
            "frame_delay_p50_ms",
            "frame_delay_p90_ms",
            "frame_jitter_p50_ms",
            "frame_jitter_p90_ms",
        ],
        Workload::ShortFlows { .. } => &["fct_p50_ms", "fct_p90_ms", "fct_p99_ms"],
    };
    names.iter().map(|name| name.to_string()).collect()
}

/// A metric's label with its unit, for tables and axes.
pub fn metric_label(metric: &str) -> String {
    let known = [
        ("goodput_mbps", "goodput (Mbit/s)"),
        ("completion_s", "completion time (s)"),
        ("dejitter_ms", "de-jitter delay (ms)"),
        ("frame_delay_ms", "frame delay (ms)"),
        ("frame_jitter_ms", "frame-level jitter (ms)"),
        ("fct_ms", "flow completion time (ms)"),
        ("sender_lost_packets", "packets the sender declared lost"),
        ("sender_sent_packets", "packets sent"),
        ("played_fraction", "fraction of packets played"),
        ("frames_received_fraction", "fraction of frames received"),
        ("retransmissions", "retransmissions"),
        ("jain_index", "Jain's fairness index"),
    ];
    if let Some(flow) = metric.strip_prefix("goodput_mbps_") {
        return format!("goodput of {flow} (Mbit/s)");
    }
    if let Some(flow) = metric.strip_prefix("share_") {
        return format!("share of {flow}");
    }
    if let Some((_, label)) = known.iter().find(|(name, _)| *name == metric) {
        return label.to_string();
    }
    // `frame_delay_p90_ms` → "frame delay p90 (ms)".
    if let Some(stem) = metric.strip_suffix("_ms")
        && let Some((base, percentile)) = stem.rsplit_once('_')
    {
        let base = metric_label(&format!("{base}_ms"));
        if let Some(name) = base.strip_suffix(" (ms)") {
            return format!("{name}, {percentile} (ms)");
        }
    }
    metric.replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_unit() {
        assert_eq!(metric_label("goodput_mbps"), "goodput (Mbit/s)");
        assert_eq!(metric_label("frame_delay_p90_ms"), "frame delay, p90 (ms)");
        assert_eq!(metric_label("dejitter_p99_ms"), "de-jitter delay, p99 (ms)");
        assert_eq!(metric_label("something_else"), "something else");
    }
}
