//! A check bounds a variant's median, its ratio to another variant's
//! (`ratio_to`) or what it adds to another's (`minus`); the user-space
//! router that PEMI's Figure 13 takes as its baseline (`middle =
//! "forward"`) is a plain router in the simulator.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

const SCENARIO: &str = r#"
name = "baselines"
title = "baselines"
trials = 2
path = ["near", "far"]
[hops.near]
delay = "1ms"
rate = "20Mbit/s"
loss = 0.01
[hops.far]
delay = "10ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "download"
size = "300kB"
[[variant]]
name = "router"
[[variant]]
name = "forwarder"
middle = "forward"
[[variant]]
name = "slow"
hops.far.rate = "5Mbit/s"
"#;

fn check(metric: &str, relation: &str, bound: &str) -> String {
    format!(
        "[[check]]\nclaim = \"c\"\nmetric = \"{metric}\"\nvariant = \"router\"\n{relation}\n{bound}\n"
    )
}

#[test]
fn a_check_bounds_a_difference_of_medians() {
    let checks = [
        check("goodput_mbps", "minus = \"slow\"", "at_least = 0.5"),
        check("goodput_mbps", "minus = \"slow\"", "at_most = 0.5"),
        check("goodput_mbps", "ratio_to = \"slow\"", "at_least = 1.2"),
    ];
    let text = format!("{SCENARIO}{}", checks.concat());
    let file = ScenarioFile::parse(&text, PathBuf::from("b.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let median = |name: &str| {
        let variant = results.summary.variants.iter().find(|v| v.name == name);
        variant.expect("variant").metrics["goodput_mbps"].median
    };
    let (router, slow) = (median("router"), median("slow"));
    assert!(router > slow + 0.5, "router {router}, slow {slow}");
    let [more, less, ratio] = &results.summary.checks[..] else {
        panic!("three checks: {:?}", results.summary.checks)
    };
    assert_eq!(more.value, Some(router - slow));
    assert!(more.passed && !less.passed, "{more:?} {less:?}");
    assert_eq!(ratio.value, Some(router / slow));
    let table = experiments::summary::checks_table(&results.summary.checks);
    assert!(table.contains("≥ 0.5 above slow"), "{table}");
    // The forwarder changes nothing in the simulator: the same trials
    // (the simulator counts one more event, the engine's first timer poll).
    let trials = |name: &str| {
        let at = results.summary.variants.iter().position(|v| v.name == name);
        results.trials[at.expect("variant")]
            .iter()
            .map(|t| (t.end_s, t.metrics.clone(), t.series.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(trials("forwarder"), trials("router"));
}
