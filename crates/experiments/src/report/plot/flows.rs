//! Each flow's throughput over time (the `throughput_mbps<suffix>`
//! series of a trial with a measurement window), a panel per variant with
//! a line per flow (like Proteus's Figures 14 and 18).

use super::style::{colour, legend};
use super::{DrawResult, panel_grid, time_chart, with_legend};
use crate::figure::Plot;
use crate::run::RunResults;

use plotters::coord::Shift;
use plotters::prelude::*;

/// One panel: a variant and its flows' (name, throughput per bin).
pub(super) type Panel<'a> = (&'a str, Vec<(String, &'a [f64])>);

/// The panels of a `flows` figure.
pub(super) fn panels<'a>(figure: &Plot, results: &'a RunResults) -> Vec<Panel<'a>> {
    let Plot::Flows {
        trial,
        variants: only,
        ..
    } = figure
    else {
        return Vec::new();
    };
    super::chosen_trials(results, only, *trial)
        .into_iter()
        .filter_map(|(name, trial)| {
            let flows: Vec<(String, &[f64])> = trial
                .series
                .iter()
                .filter_map(|(key, values)| {
                    let flow = key.strip_prefix("throughput_mbps")?;
                    let name = flow.trim_start_matches('_');
                    let name = if name.is_empty() { "flow" } else { name };
                    Some((name.to_string(), values.as_slice()))
                })
                .collect();
            (!flows.is_empty()).then_some((name, flows))
        })
        .collect()
}

/// Draws the panels on shared axes.
pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    trial: u32,
    panels: Vec<Panel<'_>>,
    title: &str,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let bin = quic::DELIVERY_BIN.as_secs_f64();
    let right = panels
        .iter()
        .flat_map(|(_, flows)| flows.iter().map(|(_, v)| v.len() as f64 * bin))
        .fold(1e-9_f64, f64::max);
    // The axis fits the lines drawn (one-second means), not the 100 ms
    // bins, whose bursts would squash the lines to the bottom.
    let per_second = (1.0 / bin).round().max(1.0) as usize;
    let top = panels
        .iter()
        .flat_map(|(_, flows)| flows.iter().flat_map(|(_, v)| seconds(v, per_second, bin)))
        .map(|(_, y)| y)
        .fold(1e-9_f64, f64::max)
        * 1.1;
    let title = format!("{title} (trial {trial})");
    let area = root.titled(&title, ("sans-serif", 20))?;
    let cells = panel_grid(&area, panels.len());
    for ((variant, flows), cell) in panels.into_iter().zip(&cells) {
        let names: Vec<&str> = flows.iter().map(|(name, _)| name.as_str()).collect();
        let (plot_area, legend_area) = with_legend(cell, &names);
        let mut chart = time_chart(&plot_area, variant, (right, top), "throughput (Mbit/s)")?;
        for (index, (_, values)) in flows.iter().enumerate() {
            let points = seconds(values, per_second, bin);
            chart.draw_series(LineSeries::new(points, colour(index).stroke_width(2)))?;
        }
        if let Some(legend_area) = legend_area {
            legend(&legend_area, &names)?;
        }
    }
    Ok(())
}

/// One-second means of 100 ms bins (`per_second` bins of `bin` seconds),
/// at the middle of each second, so that the bins do not blur the lines.
fn seconds(values: &[f64], per_second: usize, bin: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
    values
        .chunks(per_second)
        .enumerate()
        .map(move |(i, chunk)| {
            let t = (i as f64 + 0.5) * per_second as f64 * bin;
            (t, chunk.iter().sum::<f64>() / chunk.len() as f64)
        })
}
