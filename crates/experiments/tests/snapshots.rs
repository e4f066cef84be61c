//! Whole runs as reviewed snapshots: a handful of scenarios at small
//! trial counts, every metric of every trial printed as an integer (in
//! thousandths), so that any change to simulated behaviour shows up as a
//! snapshot diff to review (`cargo insta review`) instead of silently.
//!
//! Floats are not compared: each value is rounded to an integer number of
//! thousandths of its unit (kbit/s for `_mbps`, ms for `_s`, µs for `_ms`,
//! thousandths of a packet count), which is exact for counts and far below
//! any difference that matters, and stable across machines (Rust does not
//! contract floating-point operations).

use experiments::{Progress, RunOptions, ScenarioFile};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Every trial of `file` (only the variants whose names contain `only`)
/// as integer lines.
fn snapshot(file: &ScenarioFile, trials: u32, only: Option<&str>) -> String {
    let options = RunOptions {
        trials: Some(trials),
        only: only.map(str::to_string),
        ..RunOptions::default()
    };
    let results = experiments::run(file, &options, &mut Progress::silent()).unwrap();
    let mut out = String::new();
    for trial in results.trials.iter().flatten() {
        writeln!(
            out,
            "{} #{}: {} completed={} end={}ms events={}",
            trial.variant,
            trial.trial,
            trial.stop,
            trial.completed,
            (trial.end_s * 1e3).round(),
            trial.events
        )
        .unwrap();
        for (metric, value) in &trial.metrics {
            writeln!(out, "  {metric} {}", (value * 1e3).round() as i64).unwrap();
        }
        for error in &trial.errors {
            writeln!(out, "  error: {error}").unwrap();
        }
    }
    for check in &results.summary.checks {
        let verdict = if check.passed { "holds" } else { "fails" };
        writeln!(out, "claim {verdict}: {}", check.check.claim).unwrap();
    }
    out
}

fn shipped(path: &str) -> ScenarioFile {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    ScenarioFile::load(root.join(path)).unwrap()
}

#[test]
fn sidekick_scenario2() {
    let file = shipped("sidekick/scenario2.toml");
    insta::assert_snapshot!(snapshot(&file, 2, None));
}

#[test]
fn sidekick_scenario1_media() {
    let file = shipped("sidekick/scenario1.toml");
    insta::assert_snapshot!(snapshot(&file, 1, None));
}

#[test]
fn sidekick_strawmen_and_ack_reduction() {
    let file = shipped("sidekick/fig7b-overheads.toml");
    insta::assert_snapshot!(snapshot(&file, 1, None));
}

#[test]
fn sidekick_fairness_flows() {
    let file = shipped("sidekick/fairness.toml");
    insta::assert_snapshot!(snapshot(&file, 1, None));
}

#[test]
fn pemi_rtc_frames() {
    let file = shipped("pemi/table4-rtc.toml");
    insta::assert_snapshot!(snapshot(&file, 1, None));
}

#[test]
fn short_flows_poisson() {
    let text = r#"
name = "short-flows"
title = "short flows at Poisson times"
seed = 3
path = ["near", "far"]
[client]
addr = "10.0.0.1"
[server]
addr = "10.0.1.1"
[hops.near]
delay = "5ms"
rate = "20Mbit/s"
loss = 0.01
[hops.far]
delay = "20ms"
rate = "10Mbit/s"
buffer = { kind = "drop_tail", bytes = "100kB" }
[workload]
kind = "short_flows"
count = 20
response = "50kB"
arrivals = "poisson"
mean_gap = "100ms"
[[variant]]
name = "e2e"
[[variant]]
name = "split"
middle = { kind = "split", controller = "newreno" }
"#;
    let file = ScenarioFile::parse(text, PathBuf::from("short-flows.toml")).unwrap();
    insta::assert_snapshot!(snapshot(&file, 2, None));
}

#[test]
fn tecc_modes_with_loss() {
    // Figure 2's four MASQUE modes at 100 kB through 10% tunnel loss.
    let file = shipped("tecc/fig2-modes.toml");
    insta::assert_snapshot!(snapshot(&file, 1, Some("response = 100kB")));
}

#[test]
fn tecc_against_forwarding() {
    // Figure 10's MFT, MDT, RMDT and TECC at 1 MB (TECC's feedback and
    // controller, QUIC-aware forwarding).
    let file = shipped("tecc/fig10-sizes.toml");
    insta::assert_snapshot!(snapshot(&file, 1, Some("response = 1000kB")));
}
