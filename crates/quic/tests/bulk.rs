//! Whole runs of the bulk workload over a netsim chain
//! (client — 10 Mbit/s, 10 ms — router — 10 Mbit/s, 10 ms — server).

mod common;

use common::{Scenario, run};
use netsim::{LossModel, Probability, Rate, StopReason};
use quic::{AckFrequency, Direction};
use std::time::Duration;

const LINK: Rate = Rate::from_mbps(10);

/// A 10 MB download gets 80–100 % of the link rate as goodput (handshake
/// included; the payload is ~95 % of the IP bytes, so ~9.4 Mbit/s is the
/// practical ceiling).
#[test]
fn bulk_download_reaches_link_rate() {
    let out = run(&Scenario::new(10_000_000));
    assert_eq!(out.stop, StopReason::AllFinished);
    let report = out.report.expect("transfer completed");
    let goodput = report.goodput.bits_per_sec();
    assert!(
        goodput >= LINK.bits_per_sec() * 8 / 10 && goodput <= LINK.bits_per_sec(),
        "goodput {} over {:?}",
        report.goodput,
        report.completion
    );
    assert!(out.client.connected_at.is_some());
    assert!(out.client.error.is_none(), "{:?}", out.client.error);
}

/// An upload completes, and the report times the server's last byte.
#[test]
fn bulk_upload_completes() {
    let out = run(&Scenario {
        direction: Direction::Upload,
        ..Scenario::new(2_000_000)
    });
    let report = out.report.expect("transfer completed");
    assert_eq!(report.bytes, 2_000_000);
    assert!(
        report.goodput.bits_per_sec() > LINK.bits_per_sec() / 2,
        "{report:?}"
    );
    assert!(out.client.stats.udp_tx_bytes > 2_000_000);
}

/// A client that asks the server to acknowledge every 17th packet of an
/// upload gets far fewer acknowledgements and (on this short path) the
/// same goodput.
#[test]
fn ack_frequency_thins_the_receivers_acks() {
    let upload = |ack_frequency| {
        let out = run(&Scenario {
            direction: Direction::Upload,
            ack_frequency,
            ..Scenario::new(2_000_000)
        });
        let report = out.report.expect("transfer completed");
        (
            out.server.stats.udp_tx_datagrams,
            report.goodput.bits_per_sec(),
        )
    };
    let (default_acks, default_goodput) = upload(None);
    let (thin_acks, thin_goodput) = upload(Some(AckFrequency {
        threshold: 16,
        max_delay: Some(Duration::from_millis(40)),
    }));
    assert!(
        thin_acks * 4 < default_acks,
        "{thin_acks} acknowledging datagrams against {default_acks} by default"
    );
    assert!(
        thin_goodput * 10 > default_goodput * 9,
        "{thin_goodput} vs {default_goodput}"
    );
}

/// Sampling observes a run without changing it: the same datagrams with
/// and without a time series, and the series has one sample per interval.
#[test]
fn sampling_does_not_change_the_run() {
    let plain = Scenario {
        direction: Direction::Upload,
        loss: Some(LossModel::Bernoulli(Probability::new(0.01).unwrap())),
        ..Scenario::new(1_000_000)
    };
    let sampled = Scenario {
        sampling: Some(Duration::from_millis(10)),
        ..plain.clone()
    };
    let (a, b) = (run(&plain), run(&sampled));
    assert!(a.client.samples.is_empty());
    assert!(
        a.pcap_up == b.pcap_up,
        "sampling changed the upload's datagrams"
    );
    let samples = &b.client.samples;
    assert!(samples.len() > 50, "{} samples", samples.len());
    assert!(
        samples
            .windows(2)
            .all(|w| w[1].at - w[0].at == Duration::from_millis(10))
    );
}

/// Same seed: byte-identical capture, key log and metrics. Another seed:
/// a different capture.
#[test]
fn runs_are_deterministic() {
    let scenario = Scenario {
        sampling: Some(Duration::from_millis(50)),
        keylog: true,
        ..Scenario::new(1_000_000)
    };
    let a = run(&scenario);
    let b = run(&scenario);
    assert!(a.report.is_some());
    assert!(a.pcap.len() > 1_000_000);
    assert!(a.pcap == b.pcap, "captures differ");
    assert!(a.pcap_up == b.pcap_up, "captures differ");
    assert_eq!(a.keylog, b.keylog);
    assert_eq!(a.report, b.report);
    assert_eq!(a.server.stats, b.server.stats);
    assert_eq!(a.server.samples, b.server.samples);
    assert_eq!(a.client.samples, b.client.samples);

    let c = run(&Scenario {
        seed: 2,
        ..scenario
    });
    assert!(c.report.is_some());
    assert!(a.pcap != c.pcap, "another seed gave the same capture");
    assert_ne!(a.keylog, c.keylog);
}

/// Each built-in controller completes a transfer.
#[test]
fn every_builtin_controller_completes() {
    for congestion in ["cubic", "newreno", "bbr"] {
        let out = run(&Scenario {
            congestion,
            sampling: Some(Duration::from_millis(100)),
            ..Scenario::new(2_000_000)
        });
        // Only BBR sets a pacing rate of its own.
        let paced = out.server.samples.iter().any(|s| s.pacing_rate.is_some());
        assert_eq!(paced, congestion == "bbr", "{congestion}");
        let report = out
            .report
            .unwrap_or_else(|| panic!("{congestion} did not complete"));
        assert!(
            report.goodput.bits_per_sec() > LINK.bits_per_sec() / 2,
            "{congestion}: {report:?}"
        );
    }
}

/// With 1 % random loss on every link the transfer still completes and
/// the sender's statistics show the losses.
#[test]
fn lossy_link_completes_and_counts_losses() {
    let out = run(&Scenario {
        loss: Some(LossModel::Bernoulli(Probability::new(0.01).unwrap())),
        sampling: Some(Duration::from_millis(100)),
        ..Scenario::new(2_000_000)
    });
    assert!(out.report.is_some(), "transfer did not complete");
    assert!(out.server.stats.lost_packets > 0, "{:?}", out.server.stats);
    let last = out.server.samples.last().expect("samples");
    assert!(last.lost_packets > 0);
}

/// The time series is sampled at exact multiples of the interval, with the
/// controller's state, and the key log has the TLS 1.3 secrets.
#[test]
fn samples_and_keylog() {
    let interval = Duration::from_millis(100);
    let out = run(&Scenario {
        sampling: Some(interval),
        keylog: true,
        ..Scenario::new(1_000_000)
    });
    let samples = &out.server.samples;
    assert!(samples.len() >= 5, "{} samples", samples.len());
    assert!(samples.iter().all(|s| s.at.as_nanos() % 100_000_000 == 0));
    for pair in samples.windows(2) {
        assert_eq!(pair[1].at - pair[0].at, interval);
    }
    assert!(samples.iter().any(|s| s.bytes_in_flight > 0));
    assert!(samples.iter().any(|s| s.cwnd_bytes > 12_000));
    assert!(
        samples
            .iter()
            .all(|s| s.smoothed_rtt >= Duration::from_millis(40))
    );
    for label in [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
    ] {
        // Both endpoints log each secret.
        let lines: Vec<_> = out
            .keylog
            .lines()
            .filter(|l| l.starts_with(label))
            .collect();
        assert_eq!(lines.len(), 2, "{label}: {:?}", out.keylog);
        assert_eq!(lines[0], lines[1]);
        assert_eq!(lines[0].split(' ').nth(1).unwrap().len(), 64);
    }
}
