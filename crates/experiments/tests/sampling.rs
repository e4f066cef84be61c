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
        // Everything but the series: metrics (the FCT among them), distributions, links,
        // the number of simulator events.
        plain.as_object_mut().unwrap().remove("series");
        sampled.as_object_mut().unwrap().remove("series");
        assert!(plain["metrics"]["completion_s"].as_f64().unwrap() > 0.0);
        assert_eq!(plain, sampled, "{variant}: sampling changed the run");
    }
}
