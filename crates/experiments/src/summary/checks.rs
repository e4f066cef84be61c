//! The scenario's claims evaluated on a run: each [`Check`]'s bound on a
//! median, or on a ratio of medians, and whether it held.

use super::Summary;
use crate::scenario::Check;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// A claim with the value this run measured.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct CheckResult {
    /// The claim.
    pub check: Check,
    /// The median (or ratio of medians); absent if a variant had no value
    /// (e.g. no trial finished), which fails the check.
    pub value: Option<f64>,
    /// Whether the value is within the bounds.
    pub passed: bool,
    /// The run was interrupted before a variant it reads had a value: the
    /// claim was not tested (absent when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_run: bool,
}

impl CheckResult {
    /// Evaluates `check` on a run's summary.
    pub fn evaluate(check: &Check, summary: &Summary) -> CheckResult {
        let median = |name: &str| {
            summary
                .variants
                .iter()
                .find(|v| v.name == name)
                .and_then(|v| v.metrics.get(&check.metric))
                .map(|spread| check.statistic.of(spread))
        };
        let value = match (&check.ratio_to, median(&check.variant)) {
            (None, value) => value,
            (Some(other), Some(value)) => median(other)
                .filter(|base| *base != 0.0)
                .map(|base| value / base),
            (Some(_), None) => None,
        };
        let passed = value.is_some_and(|v| {
            check.at_least.is_none_or(|low| v >= low) && check.at_most.is_none_or(|high| v <= high)
        });
        let interrupted = |name: &str| {
            summary
                .variants
                .iter()
                .any(|v| v.name == name && v.interrupted > 0)
        };
        let not_run = value.is_none()
            && (interrupted(&check.variant) || check.ratio_to.as_deref().is_some_and(interrupted));
        CheckResult {
            check: check.clone(),
            value,
            passed,
            not_run,
        }
    }
}

/// The checks as a Markdown table.
pub fn table(results: &[CheckResult]) -> String {
    let mut md = String::from("| claim | measured | bound | result |\n|---|---|---|---|\n");
    for result in results {
        let check = &result.check;
        let value = match result.value {
            Some(v) if check.ratio_to.is_some() => format!("{v:.2}× ({})", check.metric),
            Some(v) => format!("{v:.3} ({})", check.metric),
            None => "no value".into(),
        };
        let verdict = match (result.passed, result.not_run) {
            (true, _) => "✓ holds",
            (false, true) => "– not run (interrupted)",
            (false, false) => "✗ fails",
        };
        writeln!(
            md,
            "| {} | {value} | {} | {verdict} |",
            check.claim,
            check.bound()
        )
        .expect("writing to a String");
    }
    md
}
