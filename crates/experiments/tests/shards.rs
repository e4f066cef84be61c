//! A run split into shards (`--shard K/N`) and merged writes the same
//! files, byte for byte, as the whole run; a merge refuses shards that are
//! missing or given twice.

mod common;

use common::write_and_read;
use experiments::run::{Manifest, Shard};
use experiments::{Progress, RunOptions, ScenarioFile};

const SCENARIO: &str = r#"
name = "shards"
title = "shards"
trials = 3
time_limit = "20s"
measure = { from = "1s", until = "4s" }
path = ["near", "far"]
[client]
controller = "proteus-p"
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "10ms"
rate = "10Mbit/s"
buffer = { kind = "drop_tail", bytes = "50kB" }
[workload]
kind = "bulk"
direction = "upload"
duration = "4s"
[[variant]]
name = "P"
sweep = { field = "hops.far.buffer.bytes", values = [20000, 50000], unit = "B" }
[[variant]]
name = "S"
client.controller = "proteus-s"
"#;

#[test]
fn merged_shards_write_what_the_whole_run_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shards.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let file = ScenarioFile::load(&scenario).unwrap();
    let whole = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let a = write_and_read(&tmp.path().join("whole"), &file, &whole);

    let mut shard_dirs = Vec::new();
    for index in 1..=4 {
        let shard = Shard { index, count: 4 };
        let options = RunOptions {
            shard: Some(shard),
            ..RunOptions::default()
        };
        let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
        let dir = tmp.path().join(format!("shard-{index}"));
        let manifest = Manifest::new(&file, &options, shard);
        experiments::report::write_shard(&dir, &results, &manifest).unwrap();
        shard_dirs.push(dir);
    }
    let merged = experiments::run::merge(&file, &RunOptions::default(), &shard_dirs).unwrap();
    let b = write_and_read(&tmp.path().join("merged"), &file, &merged);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, bytes) in &a {
        if bytes != &b[name] {
            let (x, y) = (
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&b[name]),
            );
            for (l, r) in x.lines().zip(y.lines()).filter(|(l, r)| l != r).take(3) {
                eprintln!("- {l}\n+ {r}");
            }
            panic!("{} differs", name.display());
        }
    }

    let missing = experiments::run::merge(&file, &RunOptions::default(), &shard_dirs[..3]);
    assert!(missing.unwrap_err().contains("shard 4/4 is missing"));
    let twice = [shard_dirs[0].clone(), shard_dirs[0].clone()];
    let error = experiments::run::merge(&file, &RunOptions::default(), &twice).unwrap_err();
    assert!(error.contains("given twice"), "{error}");
}

#[test]
fn shards_of_a_file_edited_otherwise_do_not_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shards.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let sets = vec!["hops.far.delay=20ms".parse().unwrap()];
    let edited = ScenarioFile::load_with(&scenario, &sets).unwrap();
    let plain = ScenarioFile::load(&scenario).unwrap();
    let options = RunOptions {
        only: Some("S".into()),
        trials: Some(2),
        ..RunOptions::default()
    };
    let shard = |file: &ScenarioFile, index: u32, name: &str| {
        let shard = Shard { index, count: 2 };
        let options = RunOptions {
            shard: Some(shard),
            ..options.clone()
        };
        let results = experiments::run(file, &options, &mut Progress::silent()).unwrap();
        let dir = tmp.path().join(name);
        let manifest = Manifest::new(file, &options, shard);
        experiments::report::write_shard(&dir, &results, &manifest).unwrap();
        dir
    };
    let first = shard(&edited, 1, "edited-1");
    let second = shard(&edited, 2, "edited-2");
    let other = shard(&plain, 2, "plain-2");
    // The manifest records the overrides, which read back as given.
    let manifest = Manifest::read(&first).unwrap();
    assert_eq!(manifest.overrides, ["hops.far.delay=\"20ms\""]);
    assert_eq!(manifest.overrides().unwrap(), sets);
    let error = experiments::run::merge(&edited, &options, &[first.clone(), other]).unwrap_err();
    assert!(
        error.contains("its --set overrides are none, the run's hops.far.delay=\"20ms\""),
        "{error}"
    );
    let error =
        experiments::run::merge(&plain, &options, &[first.clone(), second.clone()]).unwrap_err();
    assert!(error.contains("a shard of another run"), "{error}");
    let merged = experiments::run::merge(&edited, &options, &[first, second]).unwrap();
    assert_eq!(merged.summary.overrides, ["hops.far.delay=\"20ms\""]);
}
