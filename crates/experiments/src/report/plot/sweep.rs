//! Figures across the points of sweeps: a metric against the swept value
//! (a line per swept variant), and the distribution of a metric over a
//! swept variant's points.

use super::style::{colour, headroom, hollow, legend_with, log_tick, marker_shape, padded, tick};
use super::{DrawResult, line, with_legend};
use crate::run::RunResults;
use crate::summary::metric_label;
use plotters::coord::Shift;
use plotters::prelude::*;

/// How the x axis of a `lines` figure is drawn.
pub(super) struct Axis<'a> {
    /// Its label (default: the swept field).
    pub label: Option<&'a str>,
    /// The factor x values are shown times.
    pub scale: f64,
    /// Logarithmic.
    pub log: bool,
}

/// Per point: (x, p25, median, p75).
type Points = Vec<(f64, f64, f64, f64)>;

/// The sweep's lines: per swept variant and values of its other
/// dimensions, its points in file order.
fn groups<'a>(
    results: &'a RunResults,
    metric: &str,
    scale: f64,
) -> (Vec<(String, Points)>, &'a str) {
    let mut groups: Vec<(String, Points)> = Vec::new();
    let mut field = "";
    for variant in &results.summary.variants {
        let (Some(point), Some(spread)) = (&variant.sweep, variant.metrics.get(metric)) else {
            continue;
        };
        field = &point.field;
        let name = if point.rest.is_empty() {
            point.series.clone()
        } else {
            format!("{}, {}", point.series, point.rest)
        };
        let value = (point.x * scale, spread.p25, spread.median, spread.p75);
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, points)) => points.push(value),
            None => groups.push((name, vec![value])),
        }
    }
    (groups, field)
}

/// A metric against a swept field: a line per swept variant through the
/// medians, with p25–p75 error bars (like Sidekick's Figure 6 and
/// Proteus's Figures 3–5).
pub(super) fn lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    metric: &str,
    axis: Axis<'_>,
    title: &str,
    results: &RunResults,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (groups, field) = groups(results, metric, axis.scale);
    // On a log axis, x is drawn as log10(x) (points at x ≤ 0 are left out).
    let to_axis = |x: f64| if axis.log { x.log10() } else { x };
    let xs = groups
        .iter()
        .flat_map(|(_, p)| p.iter().map(|v| v.0))
        .filter(|&x| !axis.log || x > 0.0)
        .map(to_axis);
    let (left, right) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (left, right) = if left <= right {
        (left, right)
    } else {
        (0.0, 1.0)
    };
    let (low, high) = padded(left, right);
    let top = headroom(
        groups
            .iter()
            .flat_map(|(_, p)| p.iter().map(|v| v.3))
            .fold(0.0_f64, f64::max),
    );
    let names: Vec<&str> = groups.iter().map(|(name, _)| name.as_str()).collect();
    let (area, legend_area) = with_legend(root, &names);
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(low..high, 0.0..top)?;
    let x_format: &dyn Fn(&f64) -> String = if axis.log { &log_tick } else { &tick };
    // On a log axis, about one label a decade, so that they fall on
    // powers of ten.
    let x_labels = if axis.log {
        ((high.ceil() - low.floor()) as usize + 1).clamp(2, 10)
    } else {
        10
    };
    let x_desc = match (axis.label, axis.log) {
        (Some(label), _) => label.to_string(),
        (None, true) => format!("{field} (log scale)"),
        (None, false) => field.to_string(),
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(metric_label(metric))
        .x_label_formatter(x_format)
        .x_labels(x_labels)
        .y_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .draw()?;
    for (index, (_, points)) in groups.iter().enumerate() {
        let points: Points = points
            .iter()
            .copied()
            .filter(|p| !axis.log || p.0 > 0.0)
            .map(|(x, a, b, c)| (to_axis(x), a, b, c))
            .collect();
        let style = colour(index).stroke_width(1);
        chart.draw_series(
            points.iter().map(|&(x, p25, median, p75)| {
                ErrorBar::new_vertical(x, p25, median, p75, style, 6)
            }),
        )?;
        let medians: Vec<(f64, f64)> = points.iter().map(|&(x, _, m, _)| (x, m)).collect();
        line(&mut chart, index, medians.clone())?;
        // Each series' marker on its medians: lines that coincide still
        // show both.
        let shape = marker_shape(index);
        if !hollow(index) {
            chart.draw_series(medians.into_iter().map(|point| {
                EmptyElement::at(point) + Polygon::new(shape.clone(), colour(index).filled())
            }))?;
        } else {
            let mut closed = shape.clone();
            closed.push(shape[0]);
            chart.draw_series(medians.into_iter().map(|point| {
                EmptyElement::at(point)
                    + PathElement::new(closed.clone(), colour(index).stroke_width(2))
            }))?;
        }
    }
    if let Some(legend_area) = legend_area {
        legend_with(&legend_area, &names, true)?;
    }
    Ok(())
}

/// Per swept variant, the empirical CDF of the metric's medians over its
/// points (every configuration of a sweep one sample).
pub(super) fn cdf<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    metric: &str,
    title: &str,
    results: &RunResults,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let mut series: Vec<(&str, Vec<f64>)> = Vec::new();
    for variant in &results.summary.variants {
        let (Some(point), Some(spread)) = (&variant.sweep, variant.metrics.get(metric)) else {
            continue;
        };
        match series.iter_mut().find(|(n, _)| *n == point.series) {
            Some((_, values)) => values.push(spread.median),
            None => series.push((&point.series, vec![spread.median])),
        }
    }
    for (_, values) in &mut series {
        values.sort_by(f64::total_cmp);
    }
    let right = series
        .iter()
        .flat_map(|(_, v)| v.last().copied())
        .fold(1e-9_f64, f64::max)
        * 1.05;
    super::cdf_chart(
        root,
        title,
        (&metric_label(metric), "CDF over the sweep's points"),
        &series,
        right,
        0.0,
    )
}
