//! An endpoint's `loss_detection` reaches its QUIC connection: behind a
//! tunnel that repairs its segment's losses (RMDT), a server with RFC
//! 9002's thresholds resends much of what the tunnel repairs, and one that
//! tolerates the repairs' reordering does not.

use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;

const SCENARIO: &str = r#"
name = "loss-detection"
title = "RMDT at 10% tunnel loss, two servers"
trials = 1
max_udp_payload = 1200
path = ["tunnel", "far"]
[client]
addr = "10.0.2.10"
controller = "bbr"
[server]
addr = "10.0.1.10"
controller = "bbr"
[hops.tunnel]
delay = "50ms"
rate = "10Mbit/s"
loss = 0.1
buffer = { kind = "drop_tail", packets = 200 }
[hops.far]
delay = "50ms"
rate = "100Mbit/s"
[workload]
kind = "short_flows"
count = 1
response = "1MB"
[[variant]]
name = "RFC 9002"
middle = { kind = "tecc", mode = "rmdt" }
[[variant]]
name = "tolerant"
middle = { kind = "tecc", mode = "rmdt" }
server.loss_detection = { packet_threshold = 300, time_threshold = 2.0 }
"#;

#[test]
fn a_reordering_tolerant_server_does_not_resend_what_the_tunnel_repaired() {
    let file = ScenarioFile::parse(SCENARIO, PathBuf::from("loss.toml")).unwrap();
    let results = experiments::run(&file, &RunOptions::default(), &mut Progress::silent()).unwrap();
    let metric = |variant: usize, name: &str| {
        let trial = &results.trials[variant][0];
        assert!(trial.completed, "{trial:?}");
        trial.metrics[name]
    };
    let (rfc, tolerant) = (
        metric(0, "sender_spurious_losses"),
        metric(1, "sender_spurious_losses"),
    );
    let repaired = metric(0, "tunnel_server_retransmitted");
    // Most of what the tunnel repairs arrives after RFC 9002's thresholds.
    assert!(rfc > repaired / 4.0, "{rfc} of {repaired}");
    assert!(tolerant < rfc / 10.0, "{tolerant} against {rfc}");
    assert!(
        metric(1, "sender_lost_packets") < metric(0, "sender_lost_packets"),
        "the tolerant server declares fewer losses"
    );
}
