//! A comparison's table (median [IQR], the ratio to the baseline row, the
//! best marked) and the data of its figures.

use super::approaches::{self, Approach, Group};
use super::plan::{Part, Status};
use crate::outcome::slug;
use crate::report::{ComparisonBar, ComparisonFigure, LinePoint, SweepFigure};
use crate::run::RunResults;
use crate::summary::{Spread, VariantSummary, metric_label};
use std::fmt::Write as _;

/// The metric of `approach`'s row: its measured flow's, if it names one.
fn metric_of(approach: &Approach, metric: &str) -> String {
    match approach.measured {
        Some(flow) => format!("{metric}_{}", slug(flow)),
        None => metric.to_string(),
    }
}

/// A metric's label as compare shows it.
fn label(metric: &str) -> String {
    match metric {
        "rtt_p95_ms" => "p95 RTT (ms)".into(),
        other => metric_label(other),
    }
}

/// Whether less of `metric` is better (times and delays).
fn lower_is_better(metric: &str) -> bool {
    metric.ends_with("_ms") || metric.ends_with("_s") || metric.contains("rebuffer")
}

/// A number with three significant digits.
fn short(value: f64) -> String {
    match value.abs() {
        m if m >= 100.0 || value == 0.0 => format!("{value:.0}"),
        m if m >= 10.0 => format!("{value:.1}"),
        m if m >= 1.0 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}

fn spread_text(spread: Option<&Spread>) -> String {
    spread.map_or("–".into(), |s| {
        format!("{} [{}–{}]", short(s.median), short(s.p25), short(s.p75))
    })
}

/// The baseline row's name in `group`.
fn baseline(group: Group) -> &'static str {
    match group {
        Group::Approaches => approaches::BASELINE,
        Group::Controllers => approaches::CONTROLLER_BASELINE,
    }
}

/// One line of a table: an approach's variant (one per sweep point).
struct Line<'a> {
    approach: &'static Approach,
    name: String,
    variant: Option<&'a VariantSummary>,
    note: String,
}

/// The lines of `part`: every row, a line per sweep point of those that
/// ran.
fn lines<'a>(part: &Part, results: Option<&'a RunResults>) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    for row in &part.rows {
        let name = row.approach.name;
        let ran: Vec<&VariantSummary> = results
            .into_iter()
            .flat_map(|r| &r.summary.variants)
            .filter(|v| v.name == name || v.sweep.as_ref().is_some_and(|p| p.series == name))
            .collect();
        match (&row.status, ran.is_empty()) {
            (Status::NotApplicable(why), _) => lines.push(Line {
                approach: row.approach,
                name: name.into(),
                variant: None,
                note: format!("n/a: {why}"),
            }),
            (Status::Runs, true) => lines.push(Line {
                approach: row.approach,
                name: name.into(),
                variant: None,
                note: "not run".into(),
            }),
            (Status::Runs, false) => lines.extend(ran.into_iter().map(|variant| Line {
                approach: row.approach,
                name: variant.name.clone(),
                variant: Some(variant),
                note: String::new(),
            })),
        }
    }
    lines
}

/// The sweep point a variant stands at (`None` without a sweep).
fn point(variant: &VariantSummary) -> Option<String> {
    variant.sweep.as_ref().map(|p| format!("{}{}", p.x, p.rest))
}

/// For each line, whether it is the best at its sweep point (among the
/// lines compared, not those measured beside a primary).
fn best(lines: &[Line<'_>], metric: &str) -> Vec<bool> {
    let value = |line: &Line<'_>| {
        line.approach.beside.is_none().then_some(())?;
        Some(
            line.variant?
                .metrics
                .get(&metric_of(line.approach, metric))?
                .median,
        )
    };
    let lower = lower_is_better(metric);
    lines
        .iter()
        .map(|line| {
            let Some(mine) = value(line) else {
                return false;
            };
            let at = line.variant.and_then(point);
            lines
                .iter()
                .filter(|other| other.variant.and_then(point) == at)
                .filter_map(value)
                .all(|other| if lower { mine <= other } else { mine >= other })
        })
        .collect()
}

/// `part`'s table in markdown: per approach (and sweep point) the trials,
/// each headline metric's median [p25–p75], the first's ratio to the
/// baseline row, and why an approach did not run. ★ marks the best.
pub fn table(part: &Part, results: Option<&RunResults>) -> String {
    let Some(first) = part.headline.first() else {
        return String::new();
    };
    let base = baseline(part.group);
    let lines = lines(part, results);
    let best = best(&lines, first);
    let mut header = vec!["approach".to_string(), "trials".to_string()];
    header.push(format!("{}: median [p25–p75]", label(first)));
    header.push(format!("× {base}"));
    for metric in &part.headline[1..] {
        header.push(format!("{}: median [p25–p75]", label(metric)));
    }
    header.push("note".into());
    let mut out = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for (line, best) in lines.iter().zip(best) {
        let mut name = line.name.clone();
        if best {
            name += " ★";
        }
        let Some(variant) = line.variant else {
            let dashes = vec!["–"; header.len() - 2].join(" | ");
            writeln!(out, "| {name} | {dashes} | {} |", line.note).unwrap();
            continue;
        };
        let spread = |metric: &str| variant.metrics.get(&metric_of(line.approach, metric));
        let mut row = vec![name, variant.trials.to_string()];
        row.push(spread_text(spread(first)));
        let baseline = lines
            .iter()
            .find(|l| l.approach.name == base && l.variant.and_then(point) == point(variant));
        let reference = baseline
            .and_then(|l| l.variant?.metrics.get(first))
            .map(|s| s.median);
        row.push(match (spread(first), reference, line.approach.beside) {
            (Some(s), Some(r), None) if r != 0.0 => format!("{:.2}×", s.median / r),
            _ => "–".into(),
        });
        for metric in &part.headline[1..] {
            row.push(spread_text(spread(metric)));
        }
        let mut notes = Vec::new();
        let unfinished = variant.trials - variant.completed;
        if unfinished > 0 {
            notes.push(format!("{unfinished} unfinished"));
        }
        if variant.failed > 0 {
            notes.push(format!("{} with errors, left out", variant.failed));
        }
        if let Some(other) = line.approach.beside {
            let beside = variant.metrics.get(&format!("{first}_{}", slug(other)));
            notes.push(format!("{other} alongside: {}", spread_text(beside)));
        }
        row.push(notes.join("; "));
        writeln!(out, "| {} |", row.join(" | ")).unwrap();
    }
    out
}

/// The data of `part`'s figure: a bar per approach (n/a ones with their
/// reason) and, where trials have a delay, each trial's delay and metric.
pub fn figure(part: &Part, results: Option<&RunResults>, title: &str) -> ComparisonFigure {
    let metric = part.headline.first().cloned().unwrap_or_default();
    let delay = part
        .headline
        .iter()
        .find(|m| m.starts_with("rtt_"))
        .cloned();
    let lines = lines(part, results);
    let best = best(&lines, &metric);
    let trials_of = |line: &Line<'_>| -> Vec<(f64, f64)> {
        let (Some(results), Some(delay)) = (results, &delay) else {
            return Vec::new();
        };
        let (x, y) = (
            metric_of(line.approach, delay),
            metric_of(line.approach, &metric),
        );
        results
            .trials
            .iter()
            .flatten()
            .filter(|t| t.variant == line.name && t.errors.is_empty())
            .filter_map(|t| Some((*t.metrics.get(&x)?, *t.metrics.get(&y)?)))
            .collect()
    };
    let bars = lines
        .iter()
        .zip(best)
        .map(|(line, best)| {
            let spread = line
                .variant
                .and_then(|v| v.metrics.get(&metric_of(line.approach, &metric)));
            let beside = line
                .approach
                .beside
                .zip(line.variant)
                .map(|(other, variant)| {
                    let metric = format!("{metric}_{}", slug(other));
                    format!(
                        "{other} alongside: {}",
                        spread_text(variant.metrics.get(&metric))
                    )
                });
            ComparisonBar {
                name: line.name.clone(),
                spread: spread.map(|s| (s.p25, s.median, s.p75)),
                note: beside.unwrap_or_else(|| line.note.clone()),
                best,
                trials: trials_of(line),
            }
        })
        .collect();
    ComparisonFigure {
        title: title.to_string(),
        metric: label(&metric),
        lower_is_better: lower_is_better(&metric),
        delay: delay.map(|d| label(&d)),
        bars,
    }
}

/// With a sweep: a line per approach through its medians (with p25–p75
/// bars) against the swept value.
pub fn sweep_figure(part: &Part, results: &RunResults, title: &str) -> SweepFigure {
    let metric = part.headline.first().cloned().unwrap_or_default();
    let mut lines: Vec<(String, Vec<LinePoint>)> = Vec::new();
    let mut field = String::new();
    for line in self::lines(part, Some(results)) {
        let Some(variant) = line.variant else {
            continue;
        };
        let (Some(point), Some(s)) = (
            &variant.sweep,
            variant.metrics.get(&metric_of(line.approach, &metric)),
        ) else {
            continue;
        };
        field = point.field.clone();
        let value = (point.x, s.p25, s.median, s.p75);
        match lines
            .iter_mut()
            .find(|(name, _)| name == line.approach.name)
        {
            Some((_, points)) => points.push(value),
            None => lines.push((line.approach.name.to_string(), vec![value])),
        }
    }
    SweepFigure {
        title: title.to_string(),
        x_label: field,
        y_label: label(&metric),
        lines,
    }
}
