//! Writes a run's results: trial files, `summary.json`, CSVs, plots and
//! `summary.md`. Everything written is a function of the results alone (no
//! wall-clock times, no host names), so a seed gives identical files.

mod plot;

pub use plot::{
    ComparisonBar, ComparisonFigure, LinePoint, SweepFigure, draw_comparison, draw_sweep,
};

use crate::outcome::{Mode, slug};
use crate::run::RunResults;
use crate::scenario::ScenarioFile;
use crate::summary::{Spread, Summary, metric_label};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Writes everything under `dir` and returns the paths written, in order.
pub fn write(
    dir: &Path,
    file: &ScenarioFile,
    results: &RunResults,
) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut put = |name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
        written.push(path);
        Ok(())
    };
    let mut figures = Vec::new();
    for trials in &results.trials {
        for trial in trials {
            let name = format!("trials/{}/{}.json", slug(&trial.variant), trial.trial);
            put(&name, &json(trial))?;
        }
    }
    put("summary.json", &json(&results.summary))?;
    put("trials.csv", trials_csv(results).as_bytes())?;
    put("summary.csv", summary_csv(&results.summary).as_bytes())?;
    for (name, csv) in distribution_csvs(results) {
        put(&name, csv.as_bytes())?;
    }
    put("summary.md", markdown(&results.summary).as_bytes())?;
    for (index, figure) in file.base.figures().iter().enumerate() {
        let stem = figure.stem(index);
        let title = figure.title().unwrap_or(&file.base.title).to_string();
        for extension in ["svg", "png"] {
            let path = dir.join(format!("{stem}.{extension}"));
            plot::draw(&path, figure, &title, results)
                .map_err(|error| std::io::Error::other(format!("{}: {error}", path.display())))?;
            figures.push(path);
        }
    }
    written.extend(figures);
    Ok(written)
}

/// Writes a shard's trial files and its manifest under `dir` (the merge
/// writes the rest), and returns the paths written: see
/// [`run::write_shard`](crate::run::write_shard).
pub fn write_shard(
    dir: &Path,
    results: &RunResults,
    manifest: &crate::run::Manifest,
) -> std::io::Result<Vec<PathBuf>> {
    crate::run::write_shard(dir, results, manifest)
}

fn json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("results serialise");
    bytes.push(b'\n');
    bytes
}

/// Quotes a CSV field if it needs it.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// One row per trial: variant, trial, seed, completed, then every metric.
fn trials_csv(results: &RunResults) -> String {
    let metrics: BTreeSet<&str> = results
        .trials
        .iter()
        .flatten()
        .flat_map(|t| t.metrics.keys().map(String::as_str))
        .collect();
    let mut csv = String::from("variant,trial,seed,completed");
    for metric in &metrics {
        write!(csv, ",{metric}").unwrap();
    }
    csv.push('\n');
    for trial in results.trials.iter().flatten() {
        write!(
            csv,
            "{},{},{},{}",
            csv_field(&trial.variant),
            trial.trial,
            trial.seed,
            trial.completed
        )
        .unwrap();
        for metric in &metrics {
            match trial.metrics.get(*metric) {
                Some(value) => write!(csv, ",{value}").unwrap(),
                None => csv.push(','),
            }
        }
        csv.push('\n');
    }
    csv
}

/// One row per variant and metric; a point of a sweep also gives its
/// swept variant (`series`) and the swept value (`x`), so that a sweep's
/// lines can be drawn from the file.
fn summary_csv(summary: &Summary) -> String {
    let mut csv = String::from("variant,metric,median,p25,p75,min,max,n,paper,series,x\n");
    for variant in &summary.variants {
        let (series, x) = variant
            .sweep
            .as_ref()
            .map_or((String::new(), String::new()), |p| {
                (csv_field(&p.series), p.x.to_string())
            });
        for (metric, s) in &variant.metrics {
            let paper = variant
                .paper
                .get(metric)
                .map_or(String::new(), f64::to_string);
            writeln!(
                csv,
                "{},{metric},{},{},{},{},{},{},{paper},{series},{x}",
                csv_field(&variant.name),
                s.median,
                s.p25,
                s.p75,
                s.min,
                s.max,
                s.n
            )
            .unwrap();
        }
    }
    csv
}

/// `<distribution>.csv` with one row per value: variant, trial, value.
fn distribution_csvs(results: &RunResults) -> Vec<(String, String)> {
    let names: BTreeSet<&str> = results
        .trials
        .iter()
        .flatten()
        .flat_map(|t| t.distributions.keys().map(String::as_str))
        .collect();
    names
        .into_iter()
        .map(|name| {
            let mut csv = String::from("variant,trial,value\n");
            for trial in results.trials.iter().flatten() {
                for value in trial.distributions.get(name).into_iter().flatten() {
                    writeln!(csv, "{},{},{value}", csv_field(&trial.variant), trial.trial).unwrap();
                }
            }
            (format!("{name}.csv"), csv)
        })
        .collect()
}

/// A number with three significant digits, as tables show it.
fn short(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 || value == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// The run's table: per variant, each headline metric's median and IQR,
/// with the paper's value beside it where the scenario names one.
pub fn table(summary: &Summary) -> String {
    let with_paper: BTreeSet<&str> = summary
        .variants
        .iter()
        .flat_map(|v| v.paper.keys().map(String::as_str))
        .collect();
    let mut header = vec!["variant".to_string(), "trials".to_string()];
    for metric in &summary.headline {
        header.push(format!("{}: median [p25–p75]", metric_label(metric)));
        if with_paper.contains(metric.as_str()) {
            header.push("paper".to_string());
        }
    }
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for variant in &summary.variants {
        let unfinished = (variant.trials - variant.completed)
            .saturating_sub(variant.interrupted + variant.failed);
        let mut trials = variant.trials.to_string();
        if unfinished > 0 {
            trials += &format!(" ({unfinished} unfinished)");
        }
        if variant.interrupted > 0 {
            trials += &format!(" ({} not run: interrupted)", variant.interrupted);
        }
        if variant.failed > 0 {
            trials += &format!(" ({} with errors, left out)", variant.failed);
        }
        let mut row = vec![variant.name.clone(), trials];
        for metric in &summary.headline {
            row.push(match variant.metrics.get(metric) {
                Some(s) => format!("{} [{}–{}]", short(s.median), short(s.p25), short(s.p75)),
                None => "–".to_string(),
            });
            if with_paper.contains(metric.as_str()) {
                row.push(
                    variant
                        .paper
                        .get(metric)
                        .map_or("–".to_string(), |v| short(*v)),
                );
            }
        }
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// `summary.md`: the title, the source, the table and where the rest is.
pub fn markdown(summary: &Summary) -> String {
    let mut md = format!("# {}\n\n", summary.title);
    if summary.mode == Mode::Real {
        md.push_str(
            "Real mode: network namespaces joined through the user-space link emulator, \
             the endpoints on UDP/TCP sockets in real time.\n\n",
        );
    }
    if let Some(source) = &summary.source {
        writeln!(md, "Reproduces: {source}.\n").unwrap();
    }
    writeln!(
        md,
        "Scenario `{}`, seed {}, {} trials per variant. Medians across trials, \
         with the interquartile range in brackets.\n",
        summary.scenario, summary.seed, summary.trials
    )
    .unwrap();
    if !summary.overrides.is_empty() {
        let sets: Vec<String> = summary
            .overrides
            .iter()
            .map(|set| format!("`--set '{set}'`"))
            .collect();
        writeln!(
            md,
            "The scenario file was edited before the run with {}.\n",
            sets.join(" ")
        )
        .unwrap();
    }
    md.push_str(&table(summary));
    if !summary.checks.is_empty() {
        md.push_str("\n## The paper's claims, checked on this run\n\n");
        md.push_str(&crate::summary::checks_table(&summary.checks));
    }
    md.push_str(
        "\nEvery metric of every variant is in `summary.json` and `summary.csv`; \
         each trial's metrics, distributions and link counters are in `trials/`.\n",
    );
    md
}

/// The gap between the simulator and real mode above which the comparison
/// asks for an explanation.
pub const NOTABLE_GAP: f64 = 0.15;

/// The headline metrics of the variants both summaries have, side by side:
/// simulator median, real median and the relative gap (flagged over
/// [`NOTABLE_GAP`]).
pub fn comparison(simulator: &Summary, real: &Summary) -> String {
    let mut out = String::from(
        "| variant | metric | simulator: median [p25–p75] | real: median [p25–p75] | real / simulator |\n\
         |---|---|---|---|---|\n",
    );
    let spread = |s: &Spread| format!("{} [{}–{}]", short(s.median), short(s.p25), short(s.p75));
    for sim in &simulator.variants {
        let Some(live) = real.variants.iter().find(|v| v.name == sim.name) else {
            continue;
        };
        for metric in &simulator.headline {
            let (Some(a), Some(b)) = (sim.metrics.get(metric), live.metrics.get(metric)) else {
                continue;
            };
            // A ratio to zero says nothing (medians of 0 ms, say).
            let ratio = match (a.median, b.median) {
                (x, y) if x == y => "1.00×".to_string(),
                (0.0, _) => "–".to_string(),
                (x, y) if (y / x - 1.0).abs() > NOTABLE_GAP => {
                    format!("{:.2}× ⚠ gap over 15%", y / x)
                }
                (x, y) => format!("{:.2}×", y / x),
            };
            writeln!(
                out,
                "| {} | {} | {} | {} | {ratio} |",
                sim.name,
                metric_label(metric),
                spread(a),
                spread(b),
            )
            .unwrap();
        }
    }
    out
}

/// If both `sim_dir` and `real_dir` hold a `summary.json`, rewrites both
/// `summary.md` files with a section comparing the two modes and returns
/// the comparison table; `None` if one of them has not run or they ran
/// with different `--set` overrides.
pub fn compare_modes(sim_dir: &Path, real_dir: &Path) -> std::io::Result<Option<String>> {
    let read = |dir: &Path| -> std::io::Result<Option<Summary>> {
        match std::fs::read(dir.join("summary.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(std::io::Error::other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    let (Some(sim), Some(real)) = (read(sim_dir)?, read(real_dir)?) else {
        return Ok(None);
    };
    // Runs of differently edited files (`--set`) are not the same scenario.
    if sim.overrides != real.overrides {
        return Ok(None);
    }
    let table = comparison(&sim, &real);
    let section = format!(
        "\n## Simulator and real mode side by side\n\n\
         The simulator's results (`{}`) beside real mode's (`{}`, a testbed of \
         network namespaces with the user-space link emulator). Gaps over 15% are \
         flagged; docs/results/ explains the known ones.\n\n{table}",
        sim_dir.display(),
        real_dir.display()
    );
    for (dir, summary) in [(sim_dir, &sim), (real_dir, &real)] {
        std::fs::write(dir.join("summary.md"), markdown(summary) + &section)?;
    }
    Ok(Some(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_three_digits() {
        assert_eq!(short(9.4123), "9.41");
        assert_eq!(short(52.34), "52.3");
        assert_eq!(short(123.4), "123");
        assert_eq!(short(0.4312), "0.431");
    }

    #[test]
    fn summary_csv_gives_a_sweep_point_its_series_and_x() {
        let spread = r#"{ "median": 2, "p25": 1, "p75": 3, "min": 0, "max": 4, "n": 3 }"#;
        let json = format!(
            r#"{{ "schema": "pepkit.summary/1", "scenario": "s", "title": "t", "source": null,
                "seed": 1, "trials": 3, "headline": [],
                "variants": [
                  {{ "name": "A", "trials": 3, "completed": 3,
                     "metrics": {{ "goodput_mbps": {spread} }}, "paper": {{}} }},
                  {{ "name": "B, loss = 0.01", "trials": 3, "completed": 3,
                     "metrics": {{ "goodput_mbps": {spread} }}, "paper": {{}},
                     "sweep": {{ "series": "B", "field": "hops.near.loss", "x": 0.01 }} }}
                ] }}"#
        );
        let summary: Summary = serde_json::from_str(&json).unwrap();
        let csv = summary_csv(&summary);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines,
            [
                "variant,metric,median,p25,p75,min,max,n,paper,series,x",
                "A,goodput_mbps,2,1,3,0,4,3,,,",
                "\"B, loss = 0.01\",goodput_mbps,2,1,3,0,4,3,,B,0.01",
            ]
        );
    }
}
