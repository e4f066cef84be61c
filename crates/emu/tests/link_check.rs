//! The emulated link matches its configuration (needs root and network
//! namespaces; skips with a message otherwise, fails with
//! `PEPKIT_REQUIRE_REAL=1`).

use emu::link::check::{LinkCheckConfig, run};
use std::time::Duration;

#[test]
fn the_emulated_link_matches_its_configuration() {
    if !emu::require_real_or_skip("the_emulated_link_matches_its_configuration") {
        return;
    }
    let config = LinkCheckConfig {
        duration: Duration::from_secs(4),
        ..LinkCheckConfig::default()
    };
    // The check measures wall-clock delays on a shared VM: a scheduler
    // hiccup of a few ms in 1% of the probes moves the p99 past its 2 ms
    // tolerance (one of four fresh-clone CI runs on 2026-11-25). One more run is
    // allowed; an emulator that is really off fails both.
    let mut reports = Vec::new();
    for attempt in 1..=2 {
        let report = run(&config).expect("the check runs");
        for c in &report.comparisons {
            eprintln!(
                "attempt {attempt}: {}: configured {} measured {:.4} (±{:.4} {}) {}",
                c.quantity, c.configured, c.measured, c.tolerance, c.unit, c.ok
            );
        }
        eprintln!("{report:?}");
        // 1000 probes/s for 4 s, 1% loss: about 3960 arrive.
        let passed = report.probes_received > 3800 && report.ok();
        reports.push(report);
        if passed {
            return;
        }
    }
    panic!("the link check failed twice: {reports:#?}");
}
