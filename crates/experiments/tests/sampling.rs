//! Observing a run does not change it: a tunnel scenario gives the same
//! per-flow results, byte for byte, with and without `sample_interval`
//! (the endpoints and the tunnel server record their time series without
//! being woken for it).

mod common;

use common::write_and_read;
use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::{Path, PathBuf};

const SCENARIO: &str = r#"
name = "sampling"
title = "Tunnel runs with and without sampling"
seed = 3
trials = 1
max_udp_payload = 1200
path = ["access", "far"]
[client]
addr = "10.0.2.10"
controller = "bbr"
[server]
addr = "10.0.1.10"
controller = "bbr"
[hops.access]
delay = "20ms"
rate = "10Mbit/s"
loss = 0.01
buffer = { kind = "drop_tail", packets = 100 }
[hops.far]
delay = "50ms"
rate = "100Mbit/s"
[workload]
kind = "bulk"
direction = "download"
size = "3MB"
[[variant]]
name = "MFT"
middle = { kind = "tecc", mode = "mft" }
[[variant]]
name = "RMDT"
middle = { kind = "tecc", mode = "rmdt", tunnel_cc = "bbr" }
[[variant]]
name = "TECC"
middle = { kind = "tecc", mode = "tecc" }
server.controller = "tecc"
"#;

/// Every trial file of the run, as JSON, by variant.
fn trials(sample: Option<&str>) -> Vec<serde_json::Value> {
    let text = match sample {
        Some(interval) => {
            let series = "\n[[plots]]\nkind = \"series\"\nfield = \"tunnel_queue_kb\"\n";
            SCENARIO.replacen(
                "max_udp_payload",
                &format!("sample_interval = \"{interval}\"\nmax_udp_payload"),
                1,
            ) + series
        }
        None => SCENARIO.to_string(),
    };
    let file = ScenarioFile::parse(&text, PathBuf::from("sampling.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = write_and_read(dir.path(), &file, &results);
    ["MFT", "RMDT", "TECC"]
        .iter()
        .map(|variant| {
            let path = Path::new("trials")
                .join(variant.to_lowercase())
                .join("0.json");
            let bytes = files
                .get(&path)
                .unwrap_or_else(|| panic!("{} not written", path.display()));
            serde_json::from_slice(bytes).unwrap()
        })
        .collect()
}

#[test]
fn sampling_a_tunnel_run_does_not_change_it() {
    let plain = trials(None);
    let sampled = trials(Some("100ms"));
    for (mut plain, mut sampled) in plain.into_iter().zip(sampled) {
        let variant = plain["variant"].clone();
        let series = &sampled["series"];
        for field in ["t_s", "tunnel_queue_kb", "tunnel_srtt_ms", "cwnd_bytes"] {
            let samples = series[field].as_array().map_or(0, Vec::len);
            assert!(samples > 20, "{variant}: {samples} samples of {field}");
        }
        if variant != "MFT" {
            // The outer connection's window and flight (MFT's runs none).
            let largest = |field: &str| {
                series[field]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .fold(0.0, f64::max)
            };
            let (cwnd, flight) = (largest("tunnel_cwnd_kb"), largest("tunnel_in_flight_kb"));
            assert!(flight > 1.0, "{variant}: tunnel flight {flight} kB");
            assert!(
                cwnd >= flight / 2.0,
                "{variant}: window {cwnd} kB, flight {flight} kB"
            );
        }
        // Everything but the series: metrics (the FCT among them), distributions, links,
        // the number of simulator events.
        plain.as_object_mut().unwrap().remove("series");
        sampled.as_object_mut().unwrap().remove("series");
        assert!(plain["metrics"]["completion_s"].as_f64().unwrap() > 0.0);
        assert_eq!(plain, sampled, "{variant}: sampling changed the run");
    }
}

/// Two flows through one tunnel server, a near and a far client.
const TWO_FLOWS: &str = r#"
name = "two-flows"
title = "Two flows through one tunnel"
trials = 1
time_limit = "60s"
max_udp_payload = 1200
sample_interval = "100ms"
path = ["access", "tunnel"]
middle_after = "tunnel"
middle = { kind = "tecc", mode = "tecc" }
[client]
addr = "10.0.2.10"
controller = "bbr"
[server]
addr = "10.0.1.10"
controller = "tecc"
[hops.access]
delay = "5ms"
rate = "100Mbit/s"
[hops.tunnel]
delay = "5ms"
rate = "10Mbit/s"
buffer = { kind = "drop_tail", packets = 100 }
[workload]
kind = "bulk"
direction = "download"
size = "1MB"
[[flows]]
name = "near"
middle = true
client_delay = "5ms"
server_delay = "10ms"
[[flows]]
name = "far"
middle = true
client_delay = "60ms"
server_delay = "10ms"
"#;

/// The one trial of `text`.
fn only_trial(text: &str) -> experiments::TrialResult {
    let file = ScenarioFile::parse(text, PathBuf::from("two-flows.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    results.trials.into_iter().flatten().next().unwrap()
}

/// The median (`pick` 0) or the smallest value (`pick` 1) of a series
/// column.
fn statistic(trial: &experiments::TrialResult, field: &str, pick: usize) -> f64 {
    let mut values = trial.series[field].clone();
    assert!(values.len() > 5, "{field}: {} samples", values.len());
    values.sort_by(f64::total_cmp);
    [values[values.len() / 2], values[0]][pick]
}

#[test]
fn sample_flow_records_the_named_flows_series_and_changes_nothing_else() {
    let near = only_trial(TWO_FLOWS);
    let far = only_trial(&TWO_FLOWS.replace(
        "sample_interval = \"100ms\"",
        "sample_interval = \"100ms\"\nsample_flow = \"far\"",
    ));
    // The far client is 110 ms of round trip further from the tunnel
    // server and from the server: both connections' RTTs say whose they
    // are (the tunnel's by its median; the end-to-end one, which also
    // waits in the tunnel's queue, by its smallest).
    for (field, pick, near_below, far_above) in [
        ("tunnel_srtt_ms", 0, 80.0, 120.0),
        ("srtt_ms", 1, 120.0, 150.0),
    ] {
        let (near, far) = (statistic(&near, field, pick), statistic(&far, field, pick));
        assert!(
            near < near_below && far > far_above,
            "{field}: near {near}, far {far}"
        );
    }
    assert!(far.metrics["completion_s_far"] > 0.0);
    assert_eq!(
        near.metrics, far.metrics,
        "which flow is sampled changed the run"
    );
    assert_eq!(near.links, far.links);
}

#[test]
fn sample_flow_names_a_flow_that_exists() {
    let parse = |text: &str| ScenarioFile::parse(text, PathBuf::from("two-flows.toml"));
    let sampling = |name: &str| {
        TWO_FLOWS.replace(
            "sample_interval = \"100ms\"",
            &format!("sample_interval = \"100ms\"\nsample_flow = \"{name}\""),
        )
    };
    assert_eq!(parse(&sampling("far")).unwrap().base.sample_flow, 1);
    let without_interval = sampling("far").replace("sample_interval = \"100ms\"\n", "");
    // A chain: its one flow has no name, its middle node after the first
    // hop.
    let without_flows = sampling("near")
        .split("[[flows]]")
        .next()
        .unwrap()
        .replace("middle_after = \"tunnel\"\n", "");
    for (text, parts) in [
        (without_interval, &["`sample_flow`", "sample_interval"][..]),
        (
            sampling("mid"),
            &["`sample_flow`", "\"mid\"", "\"near\", \"far\""],
        ),
        (without_flows, &["`sample_flow`", "[[flows]]"]),
    ] {
        let message = parse(&text).expect_err("refused").to_string();
        for part in parts {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }
}
