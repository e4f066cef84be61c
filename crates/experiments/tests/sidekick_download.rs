//! Sidekick for a download: the proxy's node resends the server's
//! datagrams from the client's quACKs (`sidekick::relay`), and the
//! download beats end-to-end QUIC over the lossy near hop.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

const SCENARIO: &str = r#"
name = "download"
title = "a download through the sidekick"
trials = 1
max_udp_payload = 1200
path = ["near", "far"]
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
loss = 0.01
buffer = { kind = "red", limit = "260000B" }
[hops.far]
delay = "25ms"
rate = "10Mbit/s"
buffer = { kind = "red", limit = "260000B" }
[workload]
kind = "bulk"
direction = "download"
size = "3MB"

[[variant]]
name = "e2e"

[[variant]]
name = "sidekick"
middle = { kind = "sidekick", interval = "30ms", threshold = 10 }
"#;

#[test]
fn a_download_is_resent_from_the_clients_quacks_and_beats_end_to_end() {
    let file = ScenarioFile::parse(SCENARIO, PathBuf::from("download.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let trial = |variant: usize| &results.trials[variant][0];
    let (e2e, sidekick) = (trial(0), trial(1));
    for trial in [e2e, sidekick] {
        assert!(trial.completed, "{trial:?}");
        assert!(trial.errors.is_empty(), "{:?}", trial.errors);
    }
    let m = &sidekick.metrics;
    // The client quACKed (about one per 30 ms of the transfer) and the
    // node applied them; 3 MB at 1% loss is some 25 losses, resent.
    assert!(m["receiver_quacks"] > 20.0, "{m:?}");
    assert!(m["proxy_received_quacks"] > 20.0, "{m:?}");
    assert!(m["proxy_retransmitted"] >= 10.0, "{m:?}");
    // The server's losses were spurious: the copies arrived.
    assert!(m["sender_spurious_losses"] >= 10.0, "{m:?}");
    // No sender engine at the server or the client.
    assert!(!m.contains_key("sidekick_quacks"), "{m:?}");
    assert!(!e2e.metrics.contains_key("proxy_retransmitted"));
    let goodput = |trial: &experiments::TrialResult| trial.metrics["goodput_mbps"];
    assert!(
        goodput(sidekick) > 1.5 * goodput(e2e),
        "{} vs {}",
        goodput(sidekick),
        goodput(e2e)
    );
}
