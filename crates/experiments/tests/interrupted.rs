//! A run interrupted before its trials start says so: its trials are "not
//! run (interrupted)", not unfinished, and its claims are not tested, not
//! failed. (Its own test binary: the interrupt flag is process-wide.)

use experiments::{Mode, Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

const SCENARIO: &str = r#"
name = "interrupted"
title = "interrupted"
trials = 3
path = ["near"]
[hops.near]
delay = "1ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "100kB"
[[check]]
claim = "it is fast"
metric = "goodput_mbps"
variant = "interrupted"
at_least = 1
"#;

#[test]
fn an_interrupted_run_says_not_run() {
    let file = ScenarioFile::parse(SCENARIO, PathBuf::from("i.toml")).unwrap();
    // Real mode stops before building a testbed once interrupted, so this
    // needs no root.
    emu::sys::interrupt::request();
    let options = RunOptions {
        mode: Mode::Real,
        ..RunOptions::default()
    };
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    let variant = &results.summary.variants[0];
    assert_eq!(
        (variant.trials, variant.completed, variant.interrupted),
        (3, 0, 3)
    );
    assert!(results.trials[0].iter().all(|t| t.stop == "interrupted"));
    let table = experiments::report::table(&results.summary);
    assert!(table.contains("3 not run: interrupted"), "{table}");
    assert!(!table.contains("unfinished"), "{table}");
    let check = &results.summary.checks[0];
    assert!(!check.passed && check.not_run);
    let claims = experiments::summary::checks_table(&results.summary.checks);
    assert!(claims.contains("not run (interrupted)"), "{claims}");
    assert!(!claims.contains("fails"), "{claims}");
}
