//! The probability distribution of a distribution pooled over each
//! variant's trials, as a histogram drawn as a line per variant (like the
//! Proteus paper's Figure 2), optionally with a baseline distribution
//! pooled over every variant's trials as a line of its own.

use super::style::{legend, tick};
use super::{DrawResult, line, with_legend};
use crate::run::RunResults;
use crate::summary::{metric_label, quantile};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Bins of the histogram.
const BINS: usize = 60;

/// What to draw.
pub(super) struct Pdf<'a> {
    /// The distribution, a line per variant.
    pub distribution: &'a str,
    /// Another distribution, pooled over all variants, and its name.
    pub baseline: Option<(&'a str, &'a str)>,
}

fn pooled(results: &RunResults, distribution: &str, variant: Option<usize>) -> Vec<f64> {
    let mut values: Vec<f64> = results
        .trials
        .iter()
        .enumerate()
        .filter(|(i, _)| variant.is_none_or(|v| v == *i))
        .flat_map(|(_, trials)| trials.iter())
        .flat_map(|t| t.distributions.get(distribution).into_iter().flatten())
        .copied()
        .collect();
    values.sort_by(f64::total_cmp);
    values
}

/// Draws the figure.
pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    pdf: &Pdf<'_>,
    title: &str,
    results: &RunResults,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let mut curves: Vec<(String, Vec<f64>)> = Vec::new();
    if let Some((baseline, label)) = pdf.baseline {
        curves.push((label.to_string(), pooled(results, baseline, None)));
    }
    for (i, variant) in results.summary.variants.iter().enumerate() {
        curves.push((
            variant.name.clone(),
            pooled(results, pdf.distribution, Some(i)),
        ));
    }
    curves.retain(|(_, values)| !values.is_empty());
    // From the smallest value to the largest 99.5th percentile, so one
    // outlier does not squash every curve.
    let left = curves
        .iter()
        .filter_map(|(_, v)| v.first().copied())
        .fold(f64::INFINITY, f64::min);
    let right = curves
        .iter()
        .map(|(_, v)| quantile(v, 0.995))
        .fold(f64::NEG_INFINITY, f64::max);
    let (left, right) = if left.is_finite() && right > left {
        (left, right)
    } else {
        (0.0, 1.0)
    };
    let lines: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|(_, values)| histogram(values, left, right, BINS))
        .collect();
    let top = lines
        .iter()
        .flatten()
        .map(|&(_, y)| y)
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.05;
    let names: Vec<&str> = curves.iter().map(|(name, _)| name.as_str()).collect();
    let (area, legend_area) = with_legend(root, &names);
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(left..right, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc(metric_label(pdf.distribution))
        .y_desc(format!("share of samples per bin ({BINS} bins)"))
        .x_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .draw()?;
    for (index, points) in lines.into_iter().enumerate() {
        line(&mut chart, index, points)?;
    }
    if let Some(legend_area) = legend_area {
        legend(&legend_area, &names)?;
    }
    Ok(())
}

/// The share of `values` in each of `bins` equal bins from `left` to
/// `right` (values beyond fall in the end bins), as a staircase.
pub(super) fn histogram(values: &[f64], left: f64, right: f64, bins: usize) -> Vec<(f64, f64)> {
    if values.is_empty() || bins == 0 || right <= left {
        return Vec::new();
    }
    let width = (right - left) / bins as f64;
    let mut counts = vec![0usize; bins];
    for &v in values {
        let k = ((v - left) / width).floor().clamp(0.0, (bins - 1) as f64) as usize;
        counts[k] += 1;
    }
    let n = values.len() as f64;
    let mut points = Vec::with_capacity(2 * bins);
    for (k, &count) in counts.iter().enumerate() {
        let share = count as f64 / n;
        points.push((left + k as f64 * width, share));
        points.push((left + (k + 1) as f64 * width, share));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::histogram;

    #[test]
    fn a_histogram_gives_each_bin_its_share() {
        // Bins [0, 1), [1, 2), [2, 3]: 1 value, 2 values, 1 value (3.0 and
        // 9.0 beyond the end fall in the last bin).
        let points = histogram(&[0.5, 1.2, 1.8, 9.0], 0.0, 3.0, 3);
        assert_eq!(points.len(), 6);
        assert_eq!(points[0], (0.0, 0.25));
        assert_eq!(points[2], (1.0, 0.5));
        assert_eq!(points[5], (3.0, 0.25));
        let total: f64 = points.iter().step_by(2).map(|&(_, y)| y).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }
}
