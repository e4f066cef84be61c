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

/// At 500 Mbit/s (a 10 ms link, no loss) the emulator delivers the rate
/// within 5% and adds the delay within 1 ms at the 99th percentile: the
/// batched relay's figure that CI holds it to (`docs/performance.md`,
/// "Link emulator", has the 1 Gbit/s command).
#[test]
fn the_emulated_link_carries_500_mbits() {
    if !emu::require_real_or_skip("the_emulated_link_carries_500_mbits") {
        return;
    }
    let config = LinkCheckConfig {
        delay: Duration::from_millis(10),
        rate: netsim::Rate::from_mbps(500),
        loss: 0.0,
        duration: Duration::from_secs(2),
        ..LinkCheckConfig::default()
    };
    // As above: one more run for a scheduler hiccup on a shared VM.
    let mut reports = Vec::new();
    for attempt in 1..=2 {
        let report = run(&config).expect("the check runs");
        let rate = &report.comparisons[0];
        let p99_error = (report.added_delay.p99_ms - 10.0).abs();
        eprintln!(
            "attempt {attempt}: rate {:.1} Mbit/s, p99 added delay {:.3} ms, path {:?}, limit {:?}",
            rate.measured, report.added_delay.p99_ms, report.rate_path, report.rate_limit
        );
        let passed = rate.ok && p99_error <= 1.0 && report.probes_received == report.probes_sent;
        reports.push(report);
        if passed {
            return;
        }
    }
    panic!("the 500 Mbit/s link check failed twice: {reports:#?}");
}
