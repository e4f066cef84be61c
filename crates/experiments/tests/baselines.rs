//! The shipped Sidekick scenario 2 behaves like the paper's measurements:
//! end-to-end QUIC CUBIC reaches at least 8.5 Mbit/s without loss and falls
//! to 1.5–5 Mbit/s (median) with 1% near loss (the paper: about 8.8 and
//! 2.5); split QUIC stays at or above 8 Mbit/s at 1%.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

#[test]
fn sidekick_scenario2_baselines_match_the_paper() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/sidekick/scenario2.toml");
    let file = ScenarioFile::load(&path).unwrap();
    // All 20 trials per variant, as the paper ran them.
    let options = RunOptions::default();
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    println!("{}", experiments::report::table(&results.summary));
    let median = |name: &str| {
        let variant = results
            .summary
            .variants
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no variant {name}"));
        assert_eq!(
            variant.completed, variant.trials,
            "{name}: unfinished trials"
        );
        variant.metrics["goodput_mbps"].median
    };
    let e2e_lossless = median("QUIC e2e, 0% loss");
    let e2e_lossy = median("QUIC e2e, 1% loss");
    let split_lossy = median("split QUIC, 1% loss");
    assert!(e2e_lossless >= 8.5, "e2e, 0%: {e2e_lossless}");
    assert!((1.5..=5.0).contains(&e2e_lossy), "e2e, 1%: {e2e_lossy}");
    assert!(split_lossy >= 8.0, "split, 1%: {split_lossy}");
}
