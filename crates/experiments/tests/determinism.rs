//! The same scenario and seed give byte-identical result files, whatever
//! the number of threads.

mod common;

use common::write_and_read;
use experiments::{Progress, RunOptions, ScenarioFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SCENARIO: &str = r#"
name = "determinism"
title = "1 MB uploads and short flows over a lossy near hop"
seed = 7
trials = 2
max_udp_payload = 1200
sample_interval = "50ms"
path = ["near", "far"]
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
loss = 0.01
buffer = { kind = "red", limit = "260000B" }
[hops.far]
delay = "25ms"
rate = "10Mbit/s"
buffer = { kind = "drop_tail", packets = 100 }
[workload]
kind = "bulk"
direction = "upload"
size = "1MB"
[[plots]]
kind = "bars"
metric = "goodput_mbps"
[[plots]]
kind = "series"
field = "cwnd_bytes"
[[variant]]
name = "e2e"
paper = { goodput_mbps = 2.5 }
[[variant]]
name = "split"
middle = "split"
"#;

fn run_into(dir: &Path, jobs: usize, seed: Option<u64>) -> BTreeMap<PathBuf, Vec<u8>> {
    let file = ScenarioFile::parse(SCENARIO, PathBuf::from("determinism.toml")).unwrap();
    let options = RunOptions {
        jobs: Some(jobs),
        seed,
        ..RunOptions::default()
    };
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    write_and_read(dir, &file, &results)
}

#[test]
fn same_seed_same_bytes_with_any_number_of_threads() {
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let one_thread = run_into(a.path(), 1, None);
    let two_threads = run_into(b.path(), 2, None);
    let names: Vec<_> = one_thread.keys().map(|p| p.display().to_string()).collect();
    for expected in [
        "summary.json",
        "summary.md",
        "summary.csv",
        "trials.csv",
        "trials/e2e/0.json",
        "trials/split/1.json",
        "0-goodput_mbps.svg",
        "0-goodput_mbps.png",
        "1-cwnd_bytes-trial0.svg",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    assert_eq!(one_thread.len(), two_threads.len());
    for (path, bytes) in &one_thread {
        assert!(
            two_threads[path] == *bytes,
            "{} differs between runs",
            path.display()
        );
    }

    // A different seed changes the trials (the loss pattern differs).
    let other = run_into(c.path(), 2, Some(8));
    let trial = Path::new("trials/e2e/0.json");
    assert_ne!(other[trial], one_thread[trial]);

    // The summary says what the schema promises.
    let summary: serde_json::Value =
        serde_json::from_slice(&one_thread[Path::new("summary.json")]).unwrap();
    assert_eq!(summary["schema"], experiments::SCHEMA);
    let e2e = &summary["variants"][0];
    assert_eq!(e2e["name"], "e2e");
    assert_eq!(e2e["trials"], 2);
    assert_eq!(e2e["paper"]["goodput_mbps"], 2.5);
    let goodput = &e2e["metrics"]["goodput_mbps"];
    for key in ["median", "p25", "p75", "min", "max"] {
        let value = goodput[key].as_f64().unwrap();
        assert!(value > 0.5 && value < 10.0, "{key} = {value}");
    }
    assert_eq!(goodput["n"], 2);

    // The sender's samples are in the trial file, one column per variable.
    let trial: serde_json::Value = serde_json::from_slice(&one_thread[trial]).unwrap();
    let times = trial["series"]["t_s"].as_array().unwrap();
    let cwnd = trial["series"]["cwnd_bytes"].as_array().unwrap();
    assert!(
        times.len() > 10 && times.len() == cwnd.len(),
        "{} samples",
        times.len()
    );
}
