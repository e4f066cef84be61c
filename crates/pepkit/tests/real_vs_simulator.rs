//! The simulator and real mode agree on a trace-driven, lossy path: the
//! same scenario (a reduced `scenarios/compare/trace-loss.toml`: 3 MB
//! uploads over the TMobile LTE traces with 1% loss both ways, then a
//! 20 ms, 100 Mbit/s hop), run with `pepkit run` and `pepkit run --real`,
//! gives goodput medians within 10% of each other, end to end and with a
//! Sidekick. The two modes run the same link model and endpoints; a
//! trial's links draw the same random losses in both (`Seed::link`) and
//! meet the trace at the same phase (`Testbed::restart_clock`), so trial n
//! of one mode is trial n of the other. Needs root and network namespaces
//! (skips with the reason otherwise, fails then under
//! `PEPKIT_REQUIRE_REAL=1`); the traces are the bundled ones. Takes about a
//! minute.

mod common;

use common::pepkit_run;
use std::path::Path;
use std::time::Instant;

const VARIANTS: [&str; 2] = ["QUIC e2e, 1% loss", "QUIC + Sidekick, 1% loss"];

fn scenario() -> String {
    format!(
        r#"name = "real-vs-simulator-trace-loss"
title = "3 MB upload over TMobile-LTE-short (10 ms, 1% loss) + 20 ms, 100 Mbit/s"
seed = 7
trials = 3
time_limit = "60s"
path = ["cell", "wan"]
[client]
addr = "10.0.2.10"
[server]
addr = "10.0.1.10"
[hops.cell]
delay = "10ms"
trace = "cellular/TMobile-LTE-short.up"
reverse_trace = "cellular/TMobile-LTE-short.down"
loss = 0.01
[hops.wan]
delay = "20ms"
rate = "100Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "3MB"

[[variant]]
name = "{e2e}"

[[variant]]
name = "{sidekick}"
middle = {{ kind = "sidekick", interval = "30ms", threshold = 10 }}
client.controller = "pacubic"
"#,
        e2e = VARIANTS[0],
        sidekick = VARIANTS[1],
    )
}

/// Runs `file` (in real mode if `real`) into `out`; returns summary.json.
fn run(file: &Path, out: &Path, real: bool) -> serde_json::Value {
    let mut command = pepkit_run(file, out);
    if real {
        command.arg("--real");
    }
    let output = command.output().unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "pepkit run (real: {real}) failed");
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// The goodput median of variant `name`, and how many trials completed.
fn goodput(summary: &serde_json::Value, name: &str) -> (f64, u64) {
    let variant = summary["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no variant {name}"));
    let metric = &variant["metrics"]["goodput_mbps"];
    (
        metric["median"].as_f64().unwrap(),
        metric["n"].as_u64().unwrap(),
    )
}

#[test]
fn lossy_trace_path_goodput_agrees_within_10_percent() {
    if !emu::require_real_or_skip("lossy_trace_path_goodput_agrees_within_10_percent") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace-loss.toml");
    std::fs::write(&file, scenario()).unwrap();
    let started = Instant::now();
    let simulated = run(&file, &dir.path().join("sim"), false);
    let real = run(&file, &dir.path().join("real"), true);
    eprintln!("both modes in {:.0?}", started.elapsed());
    for name in VARIANTS {
        let (sim, sim_n) = goodput(&simulated, name);
        let (real, real_n) = goodput(&real, name);
        eprintln!(
            "{name}: simulator {sim:.3} Mbit/s, real mode {real:.3} Mbit/s ({:+.1}%)",
            (real / sim - 1.0) * 100.0
        );
        assert_eq!((sim_n, real_n), (3, 3), "{name}: every trial completes");
        assert!(
            (real / sim - 1.0).abs() <= 0.10,
            "{name}: real mode {real:.3} Mbit/s against the simulator's {sim:.3}"
        );
    }
}
