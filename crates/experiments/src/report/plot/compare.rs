//! `pepkit compare`'s figures: a bar per approach (median, p25–p75
//! whiskers, the best marked, the approaches that do not apply with their
//! reason) beside a throughput–delay scatter as Pantheon draws it; and,
//! with a sweep, a line per approach, each with its own colour, marker
//! and dash so that no line hides another.

use super::style::{colour, tick};
use super::{DrawResult, register_font};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// One approach in a comparison figure.
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonBar {
    /// Its name.
    pub name: String,
    /// Its metric's (p25, median, p75), if it ran.
    pub spread: Option<(f64, f64, f64)>,
    /// Why it did not run, or nothing.
    pub note: String,
    /// Whether it is the best.
    pub best: bool,
    /// Each trial's (delay, metric), for the scatter.
    pub trials: Vec<(f64, f64)>,
}

/// A comparison figure's data.
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonFigure {
    /// The title.
    pub title: String,
    /// The compared metric's label.
    pub metric: String,
    /// Whether less of it is better.
    pub lower_is_better: bool,
    /// The delay's label, if trials have one (then the scatter is drawn).
    pub delay: Option<String>,
    /// The approaches, in table order.
    pub bars: Vec<ComparisonBar>,
}

/// A point of a sweep line: (x, p25, median, p75).
pub type LinePoint = (f64, f64, f64, f64);

/// A sweep comparison's data.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepFigure {
    /// The title.
    pub title: String,
    /// The swept field.
    pub x_label: String,
    /// The metric's label.
    pub y_label: String,
    /// A line per approach.
    pub lines: Vec<(String, Vec<LinePoint>)>,
}

/// Draws `figure` into `path` (PNG or SVG by extension).
pub fn draw_comparison(path: &Path, figure: &ComparisonFigure) -> DrawResult {
    register_font();
    let rows = figure.bars.len().max(1) as u32;
    let size = (1400, (110 + 46 * rows).max(520));
    if path.extension().is_some_and(|e| e == "svg") {
        let root = SVGBackend::new(path, size).into_drawing_area();
        comparison(&root, figure)?;
        root.present()?;
    } else {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        comparison(&root, figure)?;
        root.present()?;
    }
    Ok(())
}

/// Draws `figure` into `path` (PNG or SVG by extension).
pub fn draw_sweep(path: &Path, figure: &SweepFigure) -> DrawResult {
    register_font();
    let size = (1100, 560);
    if path.extension().is_some_and(|e| e == "svg") {
        let root = SVGBackend::new(path, size).into_drawing_area();
        sweep(&root, figure)?;
        root.present()?;
    } else {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        sweep(&root, figure)?;
        root.present()?;
    }
    Ok(())
}

/// The shape of series `index`'s marker: five shapes against seven
/// colours, so the first 35 series all look different.
fn shape(index: usize, r: i32) -> Vec<(i32, i32)> {
    match index % 5 {
        0 => vec![(-r, -r), (r, -r), (r, r), (-r, r)],
        1 => vec![(0, -r), (r, r), (-r, r)],
        2 => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
        3 => vec![(0, r), (r, -r), (-r, -r)],
        _ => vec![
            (-r, -1),
            (-1, -1),
            (-1, -r),
            (1, -r),
            (1, -1),
            (r, -1),
            (r, 1),
            (1, 1),
            (1, r),
            (-1, r),
            (-1, 1),
            (-r, 1),
        ],
    }
}

/// Series `index`'s marker at `at` on `chart`, `r` pixels across from
/// the centre.
fn marker<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    at: (f64, f64),
    index: usize,
    r: i32,
    filled: bool,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let style = match filled {
        true => colour(index).filled(),
        false => colour(index).stroke_width(2),
    };
    let mut points = shape(index, r);
    if !filled {
        points.push(points[0]);
        let outline = EmptyElement::at(at) + PathElement::new(points, style);
        chart.draw_series(std::iter::once(outline))?;
    } else {
        let element = EmptyElement::at(at) + Polygon::new(points, style);
        chart.draw_series(std::iter::once(element))?;
    }
    Ok(())
}

/// Series `index`'s marker at pixel `(x, y)` of `area` (a legend).
fn legend_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    index: usize,
    filled: bool,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let mut points: Vec<(i32, i32)> = shape(index, 5)
        .iter()
        .map(|(a, b)| (x + a, y + b))
        .collect();
    if filled {
        area.draw(&Polygon::new(points, colour(index).filled()))?;
    } else {
        points.push(points[0]);
        area.draw(&PathElement::new(points, colour(index).stroke_width(2)))?;
    }
    Ok(())
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn comparison<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &ComparisonFigure,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let area = root.titled(&figure.title, ("sans-serif", 20))?;
    match &figure.delay {
        Some(delay) => {
            let (left, right) = area.split_horizontally(720);
            bars(&left, figure)?;
            scatter(&right, figure, delay)
        }
        None => bars(&area, figure),
    }
}

/// Horizontal bars, one row per approach, its name and numbers above it.
fn bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, figure: &ComparisonFigure) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = figure.bars.len().max(1);
    let top = figure
        .bars
        .iter()
        .filter_map(|b| b.spread.map(|s| s.2))
        .fold(f64::MIN_POSITIVE, f64::max)
        * 1.12;
    let better = if figure.lower_is_better {
        "lower"
    } else {
        "higher"
    };
    let caption = format!(
        "{}: bar = median, whiskers = p25–p75 of the trials; {better} is better, ★ best",
        figure.metric
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(8)
        .build_cartesian_2d(0.0..top, -0.6..(n as f64 - 0.4))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(figure.metric.as_str())
        .x_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, bar) in figure.bars.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        let (text, colour) = match bar.spread {
            Some((p25, median, p75)) => {
                let fill = if bar.best { colour(1) } else { colour(0) };
                let rect = Rectangle::new([(0.0, y - 0.32), (median, y + 0.02)], fill.filled());
                chart.draw_series(std::iter::once(rect))?;
                let whisker =
                    |points: Vec<(f64, f64)>| PathElement::new(points, BLACK.stroke_width(2));
                let (low, high) = (y - 0.25, y - 0.05);
                chart.draw_series([
                    whisker(vec![(p25, y - 0.15), (p75, y - 0.15)]),
                    whisker(vec![(p25, low), (p25, high)]),
                    whisker(vec![(p75, low), (p75, high)]),
                ])?;
                let star = if bar.best { "  ★ best" } else { "" };
                let note = match bar.note.is_empty() {
                    true => String::new(),
                    false => format!("  ({})", bar.note),
                };
                let (median, p25, p75) = (num(median), num(p25), num(p75));
                (
                    format!("{}: {median} [{p25}–{p75}]{star}{note}", bar.name),
                    BLACK,
                )
            }
            None => (
                format!("{} — {}", bar.name, bar.note),
                RGBColor(110, 110, 110),
            ),
        };
        let style = ("sans-serif", 13).into_font().color(&colour);
        chart.draw_series(std::iter::once(Text::new(text, (0.0, y + 0.42), style)))?;
    }
    Ok(())
}

/// Each approach's trials (small) and their median (large, labelled):
/// the metric against the delay, as Pantheon plots throughput against
/// delay.
fn scatter<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    figure: &ComparisonFigure,
    delay: &str,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let points = figure.bars.iter().flat_map(|b| b.trials.iter());
    let (right, top) = points.fold((f64::MIN_POSITIVE, f64::MIN_POSITIVE), |(x, y), p| {
        (x.max(p.0), y.max(p.1))
    });
    let better = match figure.lower_is_better {
        true => "down and to the left",
        false => "up and to the left",
    };
    let caption = format!("each trial (small) and the median (large); better is {better}");
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..right * 1.15, 0.0..top * 1.12)?;
    chart
        .configure_mesh()
        .light_line_style(RGBColor(238, 238, 238))
        .x_desc(delay)
        .y_desc(figure.metric.as_str())
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .draw()?;
    // Labels placed so far (pixels): a label that would cover one moves
    // down a line.
    let mut placed: Vec<(i32, i32)> = Vec::new();
    for (index, bar) in figure.bars.iter().enumerate() {
        if bar.trials.is_empty() {
            continue;
        }
        for &point in &bar.trials {
            marker(&mut chart, point, index, 3, false)?;
        }
        let median = |pick: fn(&(f64, f64)) -> f64| {
            let mut values: Vec<f64> = bar.trials.iter().map(pick).collect();
            values.sort_by(f64::total_cmp);
            crate::summary::quantile(&values, 0.5)
        };
        let at = (median(|p| p.0), median(|p| p.1));
        marker(&mut chart, at, index, 7, true)?;
        let style = ("sans-serif", 12).into_font().color(&colour(index));
        let (x, centre) = chart.backend_coord(&at);
        // The nearest free line, above or below.
        let free = |y: i32| {
            !placed
                .iter()
                .any(|&(px, py)| (px - x).abs() < 140 && (py - y).abs() < 14)
        };
        let y = [0, -14, 14, -28, 28, -42, 42, -56, 56]
            .iter()
            .map(|shift| centre - 6 + shift)
            .find(|&y| free(y))
            .unwrap_or(centre - 6);
        placed.push((x, y));
        let label = EmptyElement::at(at) + Text::new(bar.name.clone(), (10, y - centre), style);
        chart.draw_series(std::iter::once(label))?;
    }
    Ok(())
}

/// A line per approach against the swept value, with p25–p75 bars.
fn sweep<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, figure: &SweepFigure) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (chart_area, legend) = root.split_horizontally(820);
    let xs = figure.lines.iter().flat_map(|(_, p)| p.iter().map(|v| v.0));
    let (left, right) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (left, right) = if left < right {
        (left, right)
    } else {
        (left - 1.0, left + 1.0)
    };
    let pad = (right - left) * 0.04;
    let top = figure
        .lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|v| v.3))
        .fold(f64::MIN_POSITIVE, f64::max)
        * 1.12;
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(&figure.title, ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((left - pad)..(right + pad), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc(figure.x_label.as_str())
        .y_desc(format!("{}: median, p25–p75", figure.y_label))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style(("sans-serif", 13))
        .draw()?;
    for (index, (_, points)) in figure.lines.iter().enumerate() {
        let style = colour(index).stroke_width(2);
        let medians: Vec<(f64, f64)> = points.iter().map(|p| (p.0, p.2)).collect();
        match index % 4 {
            0 => chart.draw_series(LineSeries::new(medians, style))?,
            1 => chart.draw_series(DashedLineSeries::new(medians, 10, 6, style))?,
            2 => chart.draw_series(DashedLineSeries::new(medians, 3, 4, style))?,
            _ => chart.draw_series(DashedLineSeries::new(medians, 16, 4, style))?,
        };
        for &(x, p25, median, p75) in points {
            let bar = ErrorBar::new_vertical(x, p25, median, p75, colour(index).stroke_width(1), 8);
            chart.draw_series(std::iter::once(bar))?;
        }
        for &(x, _, median, _) in points {
            marker(&mut chart, (x, median), index, 5, index % 2 == 0)?;
        }
    }
    for (index, (name, _)) in figure.lines.iter().enumerate() {
        let y = 60 + 24 * index as i32;
        let style = colour(index).stroke_width(2);
        let dash: &[(i32, i32)] = match index % 4 {
            0 => &[(6, 40)],
            1 => &[(6, 16), (22, 32), (38, 40)],
            2 => &[(6, 9), (13, 16), (20, 23), (27, 30), (34, 37)],
            _ => &[(6, 22), (26, 40)],
        };
        for &(a, b) in dash {
            legend.draw(&PathElement::new(vec![(a, y), (b, y)], style))?;
        }
        legend_marker(&legend, (23, y), index, index % 2 == 0)?;
        let text = ("sans-serif", 13).into_font().color(&BLACK);
        legend.draw(&Text::new(name.clone(), (48, y - 7), text))?;
    }
    Ok(())
}

/// A number with three significant digits.
fn num(value: f64) -> String {
    match value.abs() {
        m if m >= 100.0 || value == 0.0 => format!("{value:.0}"),
        m if m >= 10.0 => format!("{value:.1}"),
        m if m >= 1.0 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}
