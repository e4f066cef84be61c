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
        let manifest = Manifest::new(&file, &options, shard).unwrap();
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
        let manifest = Manifest::new(file, &options, shard).unwrap();
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

/// Runs `file` with `options` as `count` shards into `dir/<prefix>-K`.
fn run_shards(
    file: &ScenarioFile,
    options: &RunOptions,
    count: u32,
    dir: &std::path::Path,
    prefix: &str,
) -> Vec<std::path::PathBuf> {
    (1..=count)
        .map(|index| {
            let shard = Shard { index, count };
            let options = RunOptions {
                shard: Some(shard),
                ..options.clone()
            };
            let results = experiments::run(file, &options, &mut Progress::silent()).unwrap();
            let out = dir.join(format!("{prefix}-{index}"));
            let manifest = Manifest::new(file, &options, shard).unwrap();
            experiments::report::write_shard(&out, &results, &manifest).unwrap();
            out
        })
        .collect()
}

fn small() -> RunOptions {
    RunOptions {
        only: Some("S".into()),
        trials: Some(2),
        ..RunOptions::default()
    }
}

#[test]
fn shards_of_another_scenario_seed_or_file_do_not_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shards.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let other = tmp.path().join("other.toml");
    std::fs::write(
        &other,
        SCENARIO.replace("name = \"shards\"", "name = \"other\""),
    )
    .unwrap();
    let file = ScenarioFile::load(&scenario).unwrap();
    let options = small();
    let ours = run_shards(&file, &options, 2, tmp.path(), "ours");
    let merge =
        |dirs: &[std::path::PathBuf]| experiments::run::merge(&file, &options, dirs).unwrap_err();

    let theirs = run_shards(
        &ScenarioFile::load(&other).unwrap(),
        &options,
        2,
        tmp.path(),
        "other",
    );
    let error = merge(&[ours[0].clone(), theirs[1].clone()]);
    assert!(
        error.contains("its scenario name is \"other\", the run's \"shards\""),
        "{error}"
    );
    let seeded = RunOptions {
        seed: Some(7),
        ..small()
    };
    let seeded = run_shards(&file, &seeded, 2, tmp.path(), "seeded");
    let error = merge(&[ours[0].clone(), seeded[1].clone()]);
    assert!(
        error.contains("its --seed is 7, the run's not given"),
        "{error}"
    );
    // The file edited after the shards ran: same name, other bytes.
    std::fs::write(&scenario, format!("{SCENARIO}# edited\n")).unwrap();
    let error = merge(&ours);
    assert!(error.contains("its scenario file's SHA-256 is"), "{error}");
}

#[test]
fn merge_names_what_is_missing_and_a_rerun_replaces_its_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shards.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let file = ScenarioFile::load(&scenario).unwrap();
    let options = RunOptions {
        trials: Some(3),
        ..small()
    };
    let dirs = run_shards(&file, &options, 3, tmp.path(), "s");
    let error = experiments::run::merge(&file, &options, &dirs[..1]).unwrap_err();
    assert!(error.contains("shards 2/3, 3/3 are missing"), "{error}");
    // A task killed before it finished leaves no manifest: the merge names it.
    std::fs::remove_file(dirs[1].join("shard.json")).unwrap();
    let error = experiments::run::merge(&file, &options, &dirs).unwrap_err();
    assert!(error.contains("s-2/shard.json"), "{error}");
    // Its rerun writes the shard again; a stale trial file there goes.
    let stale = dirs[1].join("trials/s/7.json");
    std::fs::write(&stale, "{").unwrap();
    let again = run_shards(&file, &options, 3, tmp.path(), "s");
    assert!(!stale.exists());
    let names: Vec<String> = std::fs::read_dir(dirs[1].join("trials/s"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["1.json"]);
    experiments::run::merge(&file, &options, &again).unwrap();
    std::fs::remove_file(dirs[2].join("trials/s/2.json")).unwrap();
    let error = experiments::run::merge(&file, &options, &dirs).unwrap_err();
    assert!(
        error.contains("trial files missing: trials/s/2.json (shard 3/3"),
        "{error}"
    );
}

#[test]
fn merge_reads_only_small_regular_files_inside_the_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shards.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let file = ScenarioFile::load(&scenario).unwrap();
    let options = small();
    let dirs = run_shards(&file, &options, 2, tmp.path(), "s");
    let trial = dirs[1].join("trials/s/1.json");
    let kept = std::fs::read(&trial).unwrap();
    // Each merge runs on a thread with a deadline: a FIFO must not hang it.
    let merge = || {
        let (file, options, dirs) = (file.clone(), options.clone(), dirs.clone());
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(experiments::run::merge(&file, &options, &dirs).map(|_| ()));
        });
        let result = receive.recv_timeout(std::time::Duration::from_secs(30));
        result.expect("the merge returns").unwrap_err()
    };
    let reset = || {
        let _ = std::fs::remove_file(&trial);
        let _ = std::fs::remove_dir_all(&trial);
    };

    reset();
    std::os::unix::fs::symlink("/dev/zero", &trial).unwrap();
    let error = merge();
    assert!(error.contains("1.json is a symbolic link"), "{error}");

    reset();
    let made = std::process::Command::new("mkfifo").arg(&trial).status();
    assert!(made.unwrap().success());
    let error = merge();
    assert!(error.contains("1.json is not a regular file"), "{error}");

    reset();
    let big = std::fs::File::create(&trial).unwrap();
    big.set_len(experiments::run::MAX_FILE_BYTES + 1).unwrap();
    let error = merge();
    assert!(error.contains("over the cap of 67108864"), "{error}");

    // A trials directory linked elsewhere is not followed either.
    reset();
    std::fs::write(&trial, &kept).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::rename(dirs[1].join("trials"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, dirs[1].join("trials")).unwrap();
    let error = merge();
    assert!(error.contains("trials is a symbolic link"), "{error}");
    std::fs::remove_file(dirs[1].join("trials")).unwrap();
    std::fs::rename(&outside, dirs[1].join("trials")).unwrap();
    let manifest = dirs[0].join("shard.json");
    std::fs::rename(&manifest, tmp.path().join("m.json")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("m.json"), &manifest).unwrap();
    let error = merge();
    assert!(error.contains("shard.json is a symbolic link"), "{error}");
    std::fs::remove_file(&manifest).unwrap();
    std::fs::rename(tmp.path().join("m.json"), &manifest).unwrap();
    experiments::run::merge(&file, &options, &dirs).unwrap();
}
