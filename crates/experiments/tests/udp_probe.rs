//! The constant-rate UDP probe (`udp_probe`) as a competing flow, as
//! Proteus's Figure 2 runs it: alone its RTT is the path's base RTT in
//! every sample, a bulk CUBIC download's queue shows in its intervals,
//! the same seed gives the same trial, and it refuses a controller.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

const SCENARIO: &str = r#"
name = "probe"
title = "a UDP probe, then a CUBIC download beside it"
trials = 1
time_limit = "8s"
measure = { from = "500ms", until = "6s", rtt_intervals = "90ms", rtt_resolution = "1us", phases = [{ name = "quiet", from = "500ms", until = "2500ms" }, { name = "load", from = "3500ms", until = "6s" }] }
path = ["access", "bottleneck"]
[client]
addr = "10.0.0.1"
[server]
addr = "10.0.1.1"
[hops.access]
delay = "1ms"
rate = "1Gbit/s"
[hops.bottleneck]
delay = "29ms"
rate = "100Mbit/s"
buffer = { kind = "drop_tail", bytes = "1500kB" }
[workload]
kind = "bulk"
direction = "download"
size = "20MB"
[[flows]]
name = "probe"
workload = { kind = "udp_probe", rate = "20Mbit/s", duration = "7s" }
[[flows]]
name = "cubic"
controller = "cubic"
start = "3s"
"#;

fn run() -> experiments::TrialResult {
    let file = ScenarioFile::parse(SCENARIO, PathBuf::from("probe.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    results.trials[0][0].clone()
}

#[test]
fn the_probe_sees_the_base_rtt_alone_and_the_queue_under_load() {
    let trial = run();
    assert!(trial.errors.is_empty(), "{:?}", trial.errors);
    let m = &trial.metrics;
    // 60 ms of propagation, a 1500 B packet out and a 44 B echo back
    // over each hop's rate: 60.157 ms.
    let base = m["rtt_min_ms_probe"];
    assert!((60.15..60.17).contains(&base), "{base}");
    // 7 s at 20 Mbit/s in 1500 B packets; CUBIC's slow start overflows
    // the buffer and drops a few of them.
    assert_eq!(m["probe_sent_probe"], 11_667.0);
    let echoed = m["probe_echoed_probe"];
    assert!((11_000.0..11_667.0).contains(&echoed), "{echoed}");
    let lost = m["probe_loss_fraction_probe"];
    assert!(lost > 0.0 && lost < 0.05, "{lost}");
    let quiet = &trial.distributions["rtt_deviation_ms_quiet_probe"];
    let load = &trial.distributions["rtt_deviation_ms_load_probe"];
    // 2 s of 90 ms intervals: 22, each with no deviation at all.
    assert_eq!(quiet.len(), 22);
    assert!(quiet.iter().all(|&d| d < 0.001), "{quiet:?}");
    // The download's queue moves the probe's RTT in most load intervals,
    // so the busy intervals are seldom below the quiet ones.
    let moved = load.iter().filter(|&&d| d > 0.01).count();
    assert!(moved * 2 > load.len(), "{load:?}");
    assert!(m["rtt_p95_ms_probe"] > base + 1.0, "{m:?}");
    assert!(m["rtt_confusion_deviation_pct_load_probe"] < 25.0, "{m:?}");
    assert!(m.contains_key("rtt_confusion_gradient_pct_load_probe"));
}

#[test]
fn the_same_seed_gives_the_same_trial() {
    assert_eq!(run(), run());
}

#[test]
fn a_probe_takes_no_controller() {
    let with = SCENARIO.replace(
        "name = \"probe\"\nworkload",
        "name = \"probe\"\ncontroller = \"cubic\"\nworkload",
    );
    let error = ScenarioFile::parse(&with, PathBuf::from("bad.toml"))
        .expect_err("refused")
        .to_string();
    assert!(error.contains("flows[0].controller"), "{error}");
    assert!(error.contains("without congestion control"), "{error}");
}
