//! The scenario's claims evaluated on a run: each [`Check`]'s bound on a
//! median, or on a ratio of medians, and whether it held.

use super::Summary;
use crate::scenario::{Check, Statistic};
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
            if check.over_series() {
                return over_series(check, summary, name);
            }
            summary
                .variants
                .iter()
                .find(|v| v.name == name)
                .and_then(|v| v.metrics.get(&check.metric))
                .map(|spread| statistic(check.statistic, spread))
        };
        let value = match (check.baseline(), median(&check.variant)) {
            (None, value) => value,
            (Some(other), Some(value)) if check.minus.is_some() => {
                median(other).map(|base| value - base)
            }
            (Some(other), Some(value)) => median(other)
                .filter(|base| *base != 0.0)
                .map(|base| value / base),
            (Some(_), None) => None,
        };
        let passed = value.is_some_and(|v| {
            check.at_least.is_none_or(|low| v >= low) && check.at_most.is_none_or(|high| v <= high)
        });
        let interrupted = |name: &str| {
            summary.variants.iter().any(|v| {
                let named = v.name == name
                    || v.sweep
                        .as_ref()
                        .is_some_and(|p| check.over_series() && p.series == name);
                named && v.interrupted > 0
            })
        };
        let not_run = value.is_none()
            && (interrupted(&check.variant) || check.baseline().is_some_and(interrupted));
        CheckResult {
            check: check.clone(),
            value,
            passed,
            not_run,
        }
    }
}

/// A check's value over the points of series `name`: a statistic of
/// their medians, or the smallest swept value whose median reaches the
/// check's crossing.
fn over_series(check: &Check, summary: &Summary, name: &str) -> Option<f64> {
    let mut points: Vec<(f64, f64)> = summary
        .variants
        .iter()
        .filter_map(|v| {
            let point = v.sweep.as_ref().filter(|p| p.series == name)?;
            Some((point.x, v.metrics.get(&check.metric)?.median))
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(level) = check.crossing {
        return points.iter().find(|(_, m)| *m >= level).map(|(x, _)| *x);
    }
    let mut medians: Vec<f64> = points.iter().map(|(_, m)| *m).collect();
    medians.sort_by(f64::total_cmp);
    match check.across? {
        Statistic::Min => medians.first().copied(),
        Statistic::Max => medians.last().copied(),
        Statistic::Median => Some(super::quantile(&medians, 0.5)),
    }
}

/// `which` value of a spread.
fn statistic(which: Statistic, spread: &super::Spread) -> f64 {
    match which {
        Statistic::Median => spread.median,
        Statistic::Min => spread.min,
        Statistic::Max => spread.max,
    }
}

/// The checks as a Markdown table.
pub fn table(results: &[CheckResult]) -> String {
    let mut md = String::from("| claim | measured | bound | result |\n|---|---|---|---|\n");
    for result in results {
        let check = &result.check;
        let value = match (result.value, check.crossing) {
            (Some(v), Some(level)) => crossing(v, check, level),
            (value, _) => value_of(value, check),
        };
        let verdict = match (result.passed, result.not_run, &check.gap) {
            (true, ..) => "✓ holds".to_string(),
            (false, true, _) => "– not run (interrupted)".to_string(),
            (false, false, None) => "✗ fails".to_string(),
            (false, false, Some(gap)) => format!("✗ fails (why: `{gap}`)"),
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

/// A measured value as the table shows it, with the metric it is of.
fn value_of(value: Option<f64>, check: &Check) -> String {
    match value {
        Some(v) if check.ratio_to.is_some() => format!("{v:.2}× ({})", check.metric),
        Some(v) if check.minus.is_some() => format!("{v:+.3} ({})", check.metric),
        Some(v) => format!("{v:.3} ({})", check.metric),
        None => "no value".into(),
    }
}

/// A crossing check's value: a swept value (a buffer size, a rate), or
/// the ratio of two, not a value of the metric.
fn crossing(value: f64, check: &Check, level: f64) -> String {
    let metric = &check.metric;
    if check.ratio_to.is_some() {
        format!("{value:.2}× (of the swept values where {metric} first reaches {level})")
    } else {
        format!("{value} (the swept value where {metric} first reaches {level})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(check: &str, value: f64) -> CheckResult {
        CheckResult {
            check: toml::from_str(check).unwrap(),
            value: Some(value),
            passed: true,
            not_run: false,
        }
    }

    #[test]
    fn a_crossing_is_shown_as_the_swept_value_not_as_the_metric() {
        let base = "claim = \"c\"\nmetric = \"throughput_mbps\"\nvariant = \"P\"\n\
                    crossing = 45.0\nat_most = 4500.0\n";
        let md = table(&[result(base, 3000.0)]);
        assert!(
            md.contains("| 3000 (the swept value where throughput_mbps first reaches 45) |"),
            "{md}"
        );
        let ratio = base.replace("at_most = 4500.0", "ratio_to = \"L\"\nat_least = 10.0");
        let md = table(&[result(&ratio, 125.0)]);
        assert!(
            md.contains("| 125.00× (of the swept values where throughput_mbps"),
            "{md}"
        );
        let plain = "claim = \"c\"\nmetric = \"goodput_mbps\"\nvariant = \"P\"\nat_least = 1.0\n";
        assert!(table(&[result(plain, 2.0)]).contains("| 2.000 (goodput_mbps) |"));
    }
}
