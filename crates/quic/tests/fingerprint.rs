//! Prints a fingerprint of a few runs, to compare across processes and
//! machines by hand: `cargo test -p pepkit-quic --test fingerprint -- --ignored --nocapture`.

mod common;

use common::{Scenario, run};
use std::hash::{DefaultHasher, Hash, Hasher};

#[test]
#[ignore = "prints fingerprints for comparison across processes"]
fn print_fingerprints() {
    for congestion in ["cubic", "newreno", "bbr"] {
        let start = std::time::Instant::now();
        let out = run(&Scenario {
            congestion,
            ..Scenario::new(10_000_000)
        });
        let mut hasher = DefaultHasher::new();
        out.pcap.hash(&mut hasher);
        out.pcap_up.hash(&mut hasher);
        let report = out.report.expect("completed");
        println!(
            "{congestion}: pcap {:016x} goodput {} completion {:?} lost {} wall {:?}",
            hasher.finish(),
            report.goodput,
            report.completion,
            out.server.stats.lost_packets,
            start.elapsed()
        );
    }
    let out = run(&Scenario {
        loss: Some(netsim::LossModel::Bernoulli(
            netsim::Probability::new(0.01).unwrap(),
        )),
        ..Scenario::new(10_000_000)
    });
    println!(
        "cubic, 1 % loss: {:?} {:?}",
        out.report.map(|r| r.goodput.to_string()),
        out.server.stats
    );
    let out = run(&Scenario {
        direction: quic::Direction::Upload,
        ..Scenario::new(10_000_000)
    });
    println!(
        "cubic upload: {:?}",
        out.report.map(|r| r.goodput.to_string())
    );
}

/// Writes `run.pcap` and `keys.log` of a 200 kB download into the
/// directory named by `PEPKIT_CAPTURE_DIR`, for
/// `tshark -o tls.keylog_file:keys.log -r run.pcap`.
#[test]
#[ignore = "writes files for a manual tshark check"]
fn write_capture_for_tshark() {
    let dir = std::env::var("PEPKIT_CAPTURE_DIR").expect("set PEPKIT_CAPTURE_DIR");
    let out = run(&Scenario {
        keylog: true,
        ..Scenario::new(200_000)
    });
    let dir = std::path::Path::new(&dir);
    std::fs::write(dir.join("run.pcap"), &out.pcap).unwrap();
    std::fs::write(dir.join("run-up.pcap"), &out.pcap_up).unwrap();
    std::fs::write(dir.join("keys.log"), &out.keylog).unwrap();
}
