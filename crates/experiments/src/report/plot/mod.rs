//! Figures in PNG and SVG, drawn with plotters and the embedded DejaVu Sans
//! font (no system fonts needed). [`style`] keeps them readable: a
//! colour-blind-safe palette, legends beside the data, scaled units.

mod compare;
mod flows;
mod pdf;
mod style;
mod sweep;

use crate::figure::Plot;
use crate::run::RunResults;
use crate::summary::{metric_label, quantile};
pub use compare::{
    ComparisonBar, ComparisonFigure, LinePoint, SweepFigure, draw_comparison, draw_sweep,
};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;
use style::{Unit, colour, dashed, headroom, legend, legend_width, series_label, tick, wrap};

/// Registers the embedded font as plotters' "sans-serif", once.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_err()
        {
            panic!("the embedded DejaVu Sans font failed to load");
        }
    });
}

pub(super) type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Draws `figure` from `results` into `path` (PNG or SVG by extension).
pub(crate) fn draw(path: &Path, figure: &Plot, title: &str, results: &RunResults) -> DrawResult {
    register_font();
    let size = size(figure, results);
    if path.extension().is_some_and(|e| e == "svg") {
        let root = SVGBackend::new(path, size).into_drawing_area();
        render(&root, figure, title, results)?;
        root.present()?;
    } else {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        render(&root, figure, title, results)?;
        root.present()?;
    }
    Ok(())
}

/// The figure's size in pixels.
fn size(figure: &Plot, results: &RunResults) -> (u32, u32) {
    let variants = results.summary.variants.len() as u32;
    match figure {
        Plot::Bars { .. } => {
            let width = (185 * variants).clamp(640, 1850);
            let names: Vec<&str> = results
                .summary
                .variants
                .iter()
                .map(|v| v.name.as_str())
                .collect();
            (width, 424 + bar_labels(&names, width).1)
        }
        Plot::Series { .. } => {
            let panels = series_lines(figure, results).len().max(1) as u32;
            let cols = panels.min(3);
            let rows = panels.div_ceil(cols);
            (cols * 380 + 20, 50 + rows * 270)
        }
        Plot::Cdf { .. } | Plot::Pdf { .. } | Plot::Lines { .. } | Plot::SweepCdf { .. } => {
            (980, 480)
        }
        Plot::Flows { .. } => {
            let panels = flows::panels(figure, results).len().max(1) as u32;
            let cols = panels.min(3);
            let rows = panels.div_ceil(cols);
            (cols * 420 + 20, 50 + rows * 300)
        }
    }
}

fn render<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &Plot,
    title: &str,
    results: &RunResults,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    match figure {
        Plot::Bars { metric, .. } => bars(root, metric, title, results),
        Plot::Cdf {
            distribution,
            y_from,
            ..
        } => cdf(root, distribution, *y_from, title, results),
        Plot::Pdf {
            distribution,
            baseline,
            baseline_label,
            ..
        } => {
            let pdf = pdf::Pdf {
                distribution,
                baseline: baseline
                    .as_deref()
                    .map(|b| (b, baseline_label.as_deref().unwrap_or(b))),
            };
            pdf::draw(root, &pdf, title, results)
        }
        Plot::Series { field, trial, .. } => {
            series(root, field, *trial, series_lines(figure, results), title)
        }
        Plot::Lines {
            metric,
            x_label,
            x_scale,
            x_log,
            ..
        } => {
            let axis = sweep::Axis {
                label: x_label.as_deref(),
                scale: *x_scale,
                log: *x_log,
            };
            sweep::lines(root, metric, axis, title, results)
        }
        Plot::SweepCdf { metric, .. } => sweep::cdf(root, metric, title, results),
        Plot::Flows { trial, .. } => {
            flows::draw(root, *trial, flows::panels(figure, results), title)
        }
    }
}

/// The chart's area and, beside it, the legend's (when there are names).
pub(super) fn with_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    names: &[&str],
) -> (DrawingArea<DB, Shift>, Option<DrawingArea<DB, Shift>>) {
    let width = legend_width(names);
    if width == 0 {
        return (root.clone(), None);
    }
    let (chart, legend) = root.split_horizontally(root.dim_in_pixel().0.saturating_sub(width));
    (chart, Some(legend))
}

/// Medians as bars with p25–p75 error bars, and the paper's value as a
/// black diamond where the scenario gives one (like Sidekick's Figure 5).
fn bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    metric: &str,
    title: &str,
    results: &RunResults,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let variants = &results.summary.variants;
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    let top = variants
        .iter()
        .flat_map(|v| {
            let spread = v.metrics.get(metric).map(|s| s.p75);
            spread.into_iter().chain(v.paper.get(metric).copied())
        })
        .fold(0.0_f64, f64::max);
    // Room above the whiskers for the paper's diamonds.
    let top = headroom(top) * 1.15 / 1.1;
    let (labels, label_area) = bar_labels(&names, root.dim_in_pixel().0);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(label_area)
        .y_label_area_size(60)
        .build_cartesian_2d(segments(names.len()), 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(metric_label(metric))
        .y_label_formatter(&tick)
        .x_labels(names.len())
        .x_label_formatter(&|_| String::new())
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, name) in names.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i), 0.0));
        let font = ("sans-serif", 13).into_font().color(&BLACK);
        match &labels {
            Some(labels) => {
                for (row, text) in labels[i].iter().enumerate() {
                    let style = font.pos(Pos::new(HPos::Center, VPos::Top));
                    root.draw(&Text::new(
                        text.clone(),
                        (x, y + 7 + 15 * row as i32),
                        style,
                    ))?;
                }
            }
            None => {
                // Too many bars for their names across: each turned a
                // quarter, starting under its bar.
                let style = font
                    .transform(FontTransform::Rotate270)
                    .pos(Pos::new(HPos::Right, VPos::Center));
                root.draw(&Text::new(name.to_string(), (x, y + 7), style))?;
            }
        }
    }
    let fill = colour(0).mix(0.8).filled();
    for (i, variant) in variants.iter().enumerate() {
        let Some(spread) = variant.metrics.get(metric) else {
            continue;
        };
        let (left, right) = (SegmentValue::Exact(i), SegmentValue::Exact(i + 1));
        let mut bar = Rectangle::new([(left, 0.0), (right, spread.median)], fill);
        bar.set_margin(0, 0, 12, 12);
        chart.draw_series(std::iter::once(bar))?;
        chart.draw_series(std::iter::once(ErrorBar::new_vertical(
            SegmentValue::CenterOf(i),
            spread.p25,
            spread.median,
            spread.p75,
            BLACK.stroke_width(2),
            12,
        )))?;
        if let Some(&paper) = variant.paper.get(metric) {
            // A diamond in pixel offsets around the paper's value.
            let marker = EmptyElement::at((SegmentValue::CenterOf(i), paper))
                + Polygon::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0)], BLACK.filled());
            chart.draw_series(std::iter::once(marker))?;
        }
    }
    let with_paper = variants.iter().any(|v| v.paper.contains_key(metric));
    root.draw(&Text::new(
        bars_note(with_paper),
        (14, root.dim_in_pixel().1 as i32 - 16),
        ("sans-serif", 12),
    ))?;
    Ok(())
}

/// How a bar figure `width` pixels wide names its bars, and the height of
/// the area under the bars: each name wrapped to its bar's width (about 7
/// pixels a character) in at most three lines, or, where a name does not
/// fit so (many narrow bars), `None`: each name turned a quarter, along
/// its bar.
fn bar_labels(names: &[&str], width: u32) -> (Option<Vec<Vec<String>>>, u32) {
    let per_bar = width.saturating_sub(100) as usize / names.len().max(1);
    let chars = (per_bar / 7).max(1);
    let wrapped: Vec<Vec<String>> = names.iter().map(|name| wrap(name, chars)).collect();
    let fits = wrapped
        .iter()
        .all(|lines| lines.len() <= 3 && lines.iter().all(|l| l.chars().count() <= chars));
    if fits {
        let rows = wrapped.iter().map(Vec::len).max().unwrap_or(1) as u32;
        (Some(wrapped), 16 * rows + 16)
    } else {
        let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
        (None, (longest * 7).min(320) + 20)
    }
}

/// What a bar figure's marks mean; the paper's diamond only where some
/// bar has one.
fn bars_note(with_paper: bool) -> &'static str {
    if with_paper {
        "bars: median · whiskers: p25–p75 · ◆ paper"
    } else {
        "bars: median · whiskers: p25–p75"
    }
}

/// One segment per variant. (A segmented `0..n` has `n + 1` segments.)
fn segments(
    n: usize,
) -> plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize> {
    (0..n.saturating_sub(1).max(1)).into_segmented()
}

/// A series plot's lines: per variant it draws, one trial's samples of
/// the field, as (time, value).
fn series_lines<'a>(figure: &Plot, results: &'a RunResults) -> Vec<(&'a str, Vec<(f64, f64)>)> {
    let Plot::Series {
        field,
        trial,
        variants: only,
        ..
    } = figure
    else {
        return Vec::new();
    };
    chosen_trials(results, only, *trial)
        .into_iter()
        .filter_map(|(name, trial)| {
            let (times, values) = (trial.series.get("t_s")?, trial.series.get(field)?);
            let points = times.iter().copied().zip(values.iter().copied()).collect();
            Some((name, points))
        })
        .collect()
}

/// What a plot of one trial per variant draws: the variants it names (all
/// if none), each with its trial number `trial` where it ran.
pub(super) fn chosen_trials<'a>(
    results: &'a RunResults,
    only: &[String],
    trial: u32,
) -> Vec<(&'a str, &'a crate::outcome::TrialResult)> {
    results
        .summary
        .variants
        .iter()
        .zip(&results.trials)
        .filter(|(variant, _)| only.is_empty() || only.contains(&variant.name))
        .filter_map(|(variant, trials)| Some((variant.name.as_str(), trials.get(trial as usize)?)))
        .collect()
}

/// One sampled variable of one trial over time, as small multiples: a
/// panel per variant on shared axes (like Sidekick's Figure 9 of the
/// congestion window), so that no line hides another.
fn series<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    field: &str,
    trial: u32,
    lines: Vec<(&str, Vec<(f64, f64)>)>,
    title: &str,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let right = lines
        .iter()
        .flat_map(|(_, points)| points.last().map(|p| p.0))
        .fold(1e-9_f64, f64::max);
    let max = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(1e-9_f64, f64::max);
    let (label, Unit { scale, .. }) = series_label(field, max);
    let top = max / scale * 1.1;
    let title = if title.contains("trial") {
        title.to_string()
    } else {
        format!("{title} (trial {trial})")
    };
    let area = root.titled(&title, ("sans-serif", 20))?;
    let panels = panel_grid(&area, lines.len());
    for (index, ((name, points), panel)) in lines.into_iter().zip(&panels).enumerate() {
        let mut chart = time_chart(panel, name, (right, top), &label)?;
        let scaled = points.into_iter().map(|(t, v)| (t, v / scale));
        chart.draw_series(LineSeries::new(scaled, colour(index).stroke_width(2)))?;
    }
    Ok(())
}

/// `area` split into a grid of `count` equal panels, at most three a row
/// (the small multiples of [`series`] and the `flows` figure).
fn panel_grid<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    count: usize,
) -> Vec<DrawingArea<DB, Shift>> {
    let cols = count.clamp(1, 3);
    let rows = count.div_ceil(cols).max(1);
    area.split_evenly((rows, cols))
}

/// A chart on `panel` of a quantity over time: `caption` above, the x axis
/// from 0 to `right` seconds, the y axis from 0 to `top`, labelled `y_desc`.
fn time_chart<'a, DB: DrawingBackend>(
    panel: &'a DrawingArea<DB, Shift>,
    caption: &str,
    (right, top): (f64, f64),
    y_desc: &str,
) -> Result<
    ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    Box<dyn std::error::Error>,
>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(panel)
        .caption(caption, ("sans-serif", 14))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..right, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style(("sans-serif", 12))
        .draw()?;
    Ok(chart)
}

/// The empirical CDF of a distribution pooled over each variant's trials.
fn cdf<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    distribution: &str,
    y_from: f64,
    title: &str,
    results: &RunResults,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let pooled: Vec<(&str, Vec<f64>)> = results
        .summary
        .variants
        .iter()
        .zip(&results.trials)
        .map(|(variant, trials)| {
            let mut values: Vec<f64> = trials
                .iter()
                .flat_map(|t| t.distributions.get(distribution).into_iter().flatten())
                .copied()
                .collect();
            values.sort_by(f64::total_cmp);
            (variant.name.as_str(), values)
        })
        .filter(|(_, values)| !values.is_empty())
        .collect();
    // Show up to the largest 99.5th percentile, so one outlier does not
    // squash every curve against the axis.
    let right = pooled
        .iter()
        .map(|(_, values)| quantile(values, 0.995))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.05;
    cdf_chart(
        root,
        title,
        (&metric_label(distribution), "CDF"),
        &pooled,
        right,
        y_from,
    )
}

/// Empirical CDFs of sorted samples, a line per named curve, on one chart
/// showing x up to `right` and the CDF from `y_from` up: a staircase, of
/// every sample or, past 2000, of every k-th order statistic.
pub(super) fn cdf_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    curves: &[(&str, Vec<f64>)],
    right: f64,
    y_from: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let names: Vec<&str> = curves.iter().map(|(name, _)| *name).collect();
    let (area, legend_area) = with_legend(root, &names);
    let y_from = y_from.clamp(0.0, 0.99);
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..right, y_from..1.0)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .draw()?;
    for (index, (_, values)) in curves.iter().enumerate() {
        line(&mut chart, index, cdf_points(values, right, y_from))?;
    }
    if let Some(legend_area) = legend_area {
        legend(&legend_area, &names)?;
    }
    Ok(())
}

/// A sorted sample's CDF as a staircase: each drawn value raises it by
/// the share of samples it stands for (one, or k past 2000 samples).
fn cdf_points(values: &[f64], right: f64, y_from: f64) -> Vec<(f64, f64)> {
    let Some(&first) = values.first() else {
        return Vec::new();
    };
    let n = values.len() as f64;
    let step = (values.len() / 2000).max(1);
    let mut points = vec![(first.min(right), 0.0)];
    let mut below = 0.0;
    for (i, &v) in values.iter().enumerate().step_by(step) {
        let through = ((i + step).min(values.len())) as f64 / n;
        points.push((v.min(right), below));
        points.push((v.min(right), through));
        below = through;
    }
    points.retain(|&(_, y)| y >= y_from);
    points
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws series `index` as a line of its colour, dashed if its style is.
pub(super) fn line<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    index: usize,
    points: Vec<(f64, f64)>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let style = colour(index).stroke_width(2);
    if dashed(index) {
        chart.draw_series(DashedLineSeries::new(points, 8, 5, style))?;
    } else {
        chart.draw_series(LineSeries::new(points, style))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{bar_labels, bars_note, cdf_points};

    #[test]
    fn bar_names_wrap_where_they_fit_and_turn_where_they_do_not() {
        let names = ["QUIC e2e, 0% loss", "QUIC e2e, 1% loss, ACK every packet"];
        let (labels, area) = bar_labels(&names, 640);
        let labels = labels.expect("two bars have room");
        assert!(labels.iter().all(|lines| lines.len() <= 3));
        assert_eq!(
            area,
            16 * labels.iter().map(Vec::len).max().unwrap() as u32 + 16
        );
        let many = ["CUBIC + LEDBAT-100, rate = 20Mbit/s"; 40];
        let (labels, area) = bar_labels(&many, 1850);
        assert!(
            labels.is_none(),
            "44 pixels a bar: upright names would overlap"
        );
        assert_eq!(area, 35 * 7 + 20);
    }

    #[test]
    fn the_paper_diamond_is_explained_only_where_one_is_drawn() {
        assert!(bars_note(true).contains("◆ paper"));
        assert!(!bars_note(false).contains("paper"));
    }

    #[test]
    fn a_cdf_is_a_staircase_through_every_sample() {
        let points = cdf_points(&[1.0, 2.0, 4.0, 8.0], 5.0, 0.0);
        let expected = [
            (1.0, 0.0),
            (1.0, 0.0),
            (1.0, 0.25),
            (2.0, 0.25),
            (2.0, 0.5),
            (4.0, 0.5),
            (4.0, 0.75),
            (5.0, 0.75),
            (5.0, 1.0),
        ];
        assert_eq!(points, expected, "x capped at `right`");
        // From y_from up only; past 2000 samples, every k-th, still to 1.
        assert!(
            cdf_points(&[1.0, 2.0], 9.0, 0.6)
                .iter()
                .all(|&(_, y)| y >= 0.6)
        );
        let many: Vec<f64> = (0..10_000).map(f64::from).collect();
        let points = cdf_points(&many, 1e9, 0.0);
        assert!(points.len() <= 2 * 2000 + 1, "{}", points.len());
        assert_eq!(points.last(), Some(&(9995.0, 1.0)));
    }
}
