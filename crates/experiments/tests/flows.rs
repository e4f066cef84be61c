//! Competing flows (`[[flows]]`) on a dumbbell: every flow finishes, the
//! shares add up, and the split proxy and the sidekick serve only the flows
//! that ask for them.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

const SCENARIO: &str = r#"
name = "flows"
title = "two flows"
trials = 2
max_udp_payload = 1200
sample_interval = "100ms"
path = ["near", "far"]
[client]
addr = "10.0.2.10"
[server]
addr = "10.0.1.10"
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
loss = 0.05
[hops.far]
delay = "25ms"
rate = "10Mbit/s"
buffer = { kind = "red", limit = "260000B" }
[workload]
kind = "bulk"
direction = "upload"
size = "1MB"
[[flows]]
name = "A"
[[flows]]
name = "B"
start = "500ms"
size = "500kB"

[[variant]]
name = "e2e"

[[variant]]
name = "split"
middle = "split"
flows = [{ name = "A", middle = true }, { name = "B", start = "500ms", size = "500kB" }]

[[variant]]
name = "sidekick"
middle = { kind = "sidekick", interval = "30ms", threshold = 10 }
flows = [{ name = "A", middle = true }, { name = "B", start = "500ms", size = "500kB" }]
"#;

#[test]
fn competing_flows_finish_and_report_shares() {
    let file = ScenarioFile::parse(SCENARIO, PathBuf::from("flows.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    assert_eq!(
        results.summary.headline,
        ["goodput_mbps", "share_a", "share_b", "jain_index"]
    );
    for trials in &results.trials {
        for trial in trials {
            let name = format!("{} #{}", trial.variant, trial.trial);
            assert!(trial.completed, "{name}: {trial:?}");
            assert!(trial.errors.is_empty(), "{name}: {:?}", trial.errors);
            let m = &trial.metrics;
            let (a, b) = (m["goodput_mbps_a"], m["goodput_mbps_b"]);
            assert!(a > 0.1 && b > 0.1, "{name}: {a} {b}");
            assert!((m["goodput_mbps"] - (a + b)).abs() < 1e-9);
            assert!((m["share_a"] + m["share_b"] - 1.0).abs() < 1e-9);
            assert!((0.5..=1.0).contains(&m["jain_index"]), "{name}");
            assert!(!trial.series["cwnd_bytes"].is_empty(), "{name}");
            // B starts half a second late: its transfer is measured from
            // its own first packet, and it takes at least that long to end.
            assert!(trial.end_s > 0.5);
            let sidekick = m.contains_key("sidekick_quacks_a");
            assert_eq!(sidekick, trial.variant == "sidekick", "{name}");
            assert!(!m.contains_key("sidekick_quacks_b"), "{name}");
            assert!(m.contains_key("link_near-a_forward_packets"), "{name}");
            assert!(m.contains_key("link_far_forward_packets"), "{name}");
        }
    }
    // The split flow's data crosses the bottleneck on the proxy's leg,
    // which does not see the 5% near loss.
    let split = &results.trials[1][0].metrics;
    let e2e = &results.trials[0][0].metrics;
    assert!(
        split["goodput_mbps_a"] > e2e["goodput_mbps_a"],
        "split {} vs e2e {}",
        split["goodput_mbps_a"],
        e2e["goodput_mbps_a"]
    );
}

/// Flows bounded by time, measured over a window, one variant swept.
const TIMED: &str = r#"
name = "timed"
title = "two timed flows"
trials = 1
time_limit = "4s"
measure = { from = "1s", until = "4s" }
path = ["near", "far"]
[client]
addr = "10.0.2.10"
[server]
addr = "10.0.1.10"
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "10ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
duration = "4s"
[[flows]]
name = "A"
[[flows]]
name = "B"

[[variant]]
name = "plain"

[[variant]]
name = "delays"
sweep = { field = "hops.far.delay", values = [5, 20], unit = "ms" }
"#;

/// A flow bounded by time is complete when the trial ran to its end (it
/// was "unfinished" before); the headline is what the window measured; a
/// swept variant is selected by its name.
#[test]
fn timed_flows_complete_and_lead_with_window_metrics() {
    let file = ScenarioFile::parse(TIMED, PathBuf::from("timed.toml")).unwrap();
    let options = RunOptions {
        variants: vec!["delays".into()],
        ..RunOptions::default()
    };
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    assert_eq!(
        results.summary.headline,
        [
            "throughput_mbps_a",
            "throughput_mbps_b",
            "jain_index_window",
            "utilization"
        ]
    );
    let trials: Vec<_> = results.trials.iter().flatten().collect();
    assert_eq!(
        trials.len(),
        2,
        "both points of the swept variant, not `plain`"
    );
    for trial in trials {
        assert!(trial.completed, "{}: {trial:?}", trial.variant);
        assert!(
            trial.metrics["throughput_mbps_a"] > 0.5,
            "{}",
            trial.variant
        );
    }
    let selected: Vec<_> = file
        .variants
        .iter()
        .filter(|v| v.is_named_by(&["delays".to_string()]))
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(selected.len(), 2, "{selected:?}");
}

/// A flow's throughput series covers the whole trial, not only the
/// measurement window: a figure shows flows arriving and leaving outside
/// it (TECC's Figure 15). B leaves at 3 s; the window ends at 2 s.
/// (Downloads: an upload stops writing at its deadline, and what it
/// buffered before still drains.)
#[test]
fn throughput_series_run_to_the_time_limit() {
    let text = TIMED
        .replace(r#"direction = "upload""#, r#"direction = "download""#)
        .replace(
            r#"measure = { from = "1s", until = "4s" }"#,
            r#"measure = { from = "1s", until = "2s" }"#,
        )
        .replace(
            "[[flows]]\nname = \"B\"",
            "[[flows]]\nname = \"B\"\nduration = \"3s\"",
        );
    let file = ScenarioFile::parse(&text, PathBuf::from("timed.toml")).unwrap();
    let options = RunOptions {
        variants: vec!["plain".into()],
        ..RunOptions::default()
    };
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    let trial = &results.trials[0][0];
    let a = &trial.series["throughput_mbps_a"];
    let b = &trial.series["throughput_mbps_b"];
    // 100 ms bins up to the 4 s time limit.
    assert_eq!(a.len(), 40, "{a:?}");
    assert_eq!(b.len(), 40, "{b:?}");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(mean(&a[20..30]) > 1.0, "A runs after the window: {a:?}");
    assert!(mean(&b[20..29]) > 1.0, "B runs until it leaves: {b:?}");
    assert!(mean(&b[32..]) < 0.1, "B has left: {b:?}");
    assert!(mean(&a[32..]) > 1.0, "A goes on after B left: {a:?}");
}

/// Two timed flows, B from 2 s, measured over 1–4 s in two phases.
const PHASED: &str = r#"
name = "phased"
title = "two timed flows in phases"
trials = 1
time_limit = "6s"
path = ["near", "far"]
[measure]
from = "1s"
until = "6s"
phases = [{ name = "first", from = "1s", until = "2s" }, { name = "second", from = "2s", until = "6s" }]
[client]
addr = "10.0.2.10"
[server]
addr = "10.0.1.10"
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "10ms"
rate = "10Mbit/s"
buffer = { kind = "drop_tail", bytes = "30kB" }
[workload]
kind = "bulk"
direction = "upload"
duration = "6s"
[[flows]]
name = "A"
alone = true
[[flows]]
name = "B"
start = "2s"
duration = "4s"
"#;

/// Each phase of the window has each flow's throughput, Jain's index, the
/// utilisation and the ratio to running alone; the phases that tile the
/// window average to the window's throughput.
#[test]
fn phases_measure_each_flow_in_each_part_of_the_window() {
    let file = ScenarioFile::parse(PHASED, PathBuf::from("phased.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let trial = &results.trials[0][0];
    let m = &trial.metrics;
    assert_eq!(m["throughput_mbps_first_b"], 0.0, "B starts at 2 s");
    assert!(m["throughput_mbps_first_a"] > 8.0, "{m:?}");
    assert!(
        m["throughput_mbps_second_a"] < 0.8 * m["throughput_mbps_first_a"],
        "A shares with B in the second phase: {m:?}"
    );
    assert!(m["throughput_mbps_second_b"] > 1.0, "{m:?}");
    for flow in ["a", "b"] {
        let tiled = (m[&format!("throughput_mbps_first_{flow}")]
            + 4.0 * m[&format!("throughput_mbps_second_{flow}")])
            / 5.0;
        let window = m[&format!("throughput_mbps_{flow}")];
        assert!((tiled - window).abs() < 1e-9, "{flow}: {tiled} vs {window}");
    }
    assert!((m["jain_index_first"] - 0.5).abs() < 1e-9, "{m:?}");
    assert!(m["jain_index_second"] > m["jain_index_first"], "{m:?}");
    assert!(m["utilization_first"] > 0.8, "{m:?}");
    // Before B starts, A runs as it does alone.
    assert!((m["throughput_ratio_first_a"] - 1.0).abs() < 0.02, "{m:?}");
    assert!(m["throughput_ratio_second_a"] < 0.8, "{m:?}");
    assert!(
        !m.contains_key("throughput_ratio_first_b"),
        "B is not `alone`"
    );
}

/// Variants that differ only in the flows left out of the alone run share
/// that run, and sharing it changes nothing: a variant's alone metrics are
/// the same run with its neighbour as run by itself.
#[test]
fn variants_share_an_alone_run_without_changing_it() {
    let text = PHASED.replace(
        "[[flows]]\nname = \"A\"\nalone = true\n[[flows]]\nname = \"B\"\nstart = \"2s\"\nduration = \"4s\"\n",
        r#"[[variant]]
name = "B CUBIC"
flows = [{ name = "A", alone = true }, { name = "B", start = "2s", duration = "4s" }]
[[variant]]
name = "B LEDBAT"
flows = [{ name = "A", alone = true }, { name = "B", controller = "ledbat", start = "2s", duration = "4s" }]
"#,
    );
    let file = ScenarioFile::parse(&text, PathBuf::from("shared.toml")).unwrap();
    let alone = |trial: &experiments::TrialResult| -> Vec<(String, f64)> {
        let metrics = trial.metrics.iter().filter(|(k, _)| k.contains("_alone"));
        metrics.map(|(k, &v)| (k.clone(), v)).collect()
    };
    let both = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let (cubic, ledbat) = (&both.trials[0][0], &both.trials[1][0]);
    assert!(!alone(cubic).is_empty(), "{:?}", cubic.metrics);
    assert_eq!(alone(cubic), alone(ledbat));
    assert_ne!(
        cubic.metrics["throughput_mbps_b"],
        ledbat.metrics["throughput_mbps_b"]
    );
    let options = RunOptions {
        only: Some("LEDBAT".into()),
        ..RunOptions::default()
    };
    let by_itself = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    assert_eq!(by_itself.trials[0][0], *ledbat);
}

/// On a trace-driven bottleneck the utilisation is the flows' throughput
/// over the capacity the trace offers in the window: here 1 packet a
/// millisecond for the first second of each 2-second period, 2 for the
/// second, so the window 1-2 s offers 1 + 999 · 2 opportunities.
#[test]
fn utilization_over_a_trace_is_over_its_capacity_in_the_window() {
    let dir = std::env::temp_dir().join(format!("pepkit-trace-util-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut trace = String::new();
    for ms in 1..=2000u32 {
        let per_ms = if ms <= 1000 { 1 } else { 2 };
        for _ in 0..per_ms {
            trace.push_str(&format!("{ms}\n"));
        }
    }
    std::fs::write(dir.join("step.trace"), trace).unwrap();
    let text = r#"
name = "trace-utilization"
title = "one flow on a trace"
trials = 1
time_limit = "2s"
measure = { from = "1s", until = "2s" }
path = ["near", "cell"]
[client]
addr = "10.0.2.10"
[server]
addr = "10.0.1.10"
[hops.near]
delay = "1ms"
rate = "1Gbit/s"
[hops.cell]
delay = "5ms"
trace = "step.trace"
rate = "1Gbit/s"
buffer = { kind = "drop_tail", packets = 100 }
[workload]
kind = "bulk"
direction = "upload"
duration = "2s"
[[flows]]
name = "A"
"#;
    let file = ScenarioFile::parse(text, dir.join("scenario.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let m = &results.trials[0][0].metrics;
    let capacity_mbps = (1.0 + 999.0 * 2.0) * 1500.0 * 8.0 / 1e6;
    let throughput = m["throughput_mbps_a"];
    assert!(throughput > 5.0, "{m:?}");
    assert!(
        (m["utilization"] * capacity_mbps - throughput).abs() < 1e-9,
        "{} × {capacity_mbps} vs {throughput}",
        m["utilization"]
    );
}
