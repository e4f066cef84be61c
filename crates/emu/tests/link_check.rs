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
    let report = run(&config).expect("the check runs");
    for c in &report.comparisons {
        eprintln!(
            "{}: configured {} measured {:.4} (±{:.4} {}) {}",
            c.quantity, c.configured, c.measured, c.tolerance, c.unit, c.ok
        );
    }
    eprintln!("{report:?}");
    // 1000 probes/s for 4 s, 1% loss: about 3960 arrive.
    assert!(report.probes_received > 3800, "{report:?}");
    assert!(report.ok(), "{report:?}");
}
