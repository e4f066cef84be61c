//! `--capture`: the pcapng files decrypt with no other file and show the
//! middle systems' own packets (tshark), every qlog record has the fields
//! the qlog main schema requires (`src/capture/qlog-required.json`), and
//! capturing changes no result and gives the same bytes twice.
//!
//! tshark comes from `scripts/setup`; without it the tshark tests skip,
//! except under CI (`CI` or `PEPKIT_REQUIRE_REAL=1` set), where they fail.
//! The real-mode test needs root and namespaces
//! (`emu::require_real_or_skip`).

mod common;

use common::write_and_read;
use experiments::capture::{CaptureRequest, Captures, QLOG_REQUIRED, check_record, records};
use experiments::{Progress, RunOptions, ScenarioFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIO: &str = r#"
name = "capture"
title = "200 kB uploads through a sidekick, PEMI and a split proxy"
seed = 3
trials = 2
max_udp_payload = 1200
path = ["near", "far"]
[hops.near]
delay = "2ms"
rate = "50Mbit/s"
loss = 0.02
[hops.far]
delay = "10ms"
rate = "10Mbit/s"
loss = 0.02
buffer = { kind = "drop_tail", packets = 100 }
[workload]
kind = "bulk"
direction = "upload"
size = "200kB"
[[variant]]
name = "e2e"
[[variant]]
name = "sidekick"
middle = { kind = "sidekick", interval = "20ms", threshold = 10 }
client.controller = "pacubic"
[[variant]]
name = "pemi"
middle = { kind = "pemi" }
[[variant]]
name = "split"
middle = "split"
"#;

fn file() -> ScenarioFile {
    ScenarioFile::parse(SCENARIO, PathBuf::from("capture.toml")).unwrap()
}

/// Runs the scenario, capturing what `requests` ask for under
/// `dir/captures`, and returns every file written under `dir`.
fn run(dir: &Path, requests: &[&str]) -> BTreeMap<PathBuf, Vec<u8>> {
    let file = file();
    let requests: Vec<CaptureRequest> = requests.iter().map(|r| r.parse().unwrap()).collect();
    let options = RunOptions {
        capture: (!requests.is_empty()).then(|| Captures {
            requests,
            dir: dir.join("captures"),
        }),
        ..RunOptions::default()
    };
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    write_and_read(dir, &file, &results)
}

/// Files under `captures/`, and the others.
fn split(
    files: BTreeMap<PathBuf, Vec<u8>>,
) -> (BTreeMap<PathBuf, Vec<u8>>, BTreeMap<PathBuf, Vec<u8>>) {
    files
        .into_iter()
        .partition(|(path, _)| path.starts_with("captures"))
}

#[test]
fn capturing_changes_no_result_and_repeats_byte_for_byte() {
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let everything = ["trials=0,1"];
    let (plain_captures, plain) = split(run(a.path(), &[]));
    let (captures, results) = split(run(b.path(), &everything));
    assert!(plain_captures.is_empty());
    assert_eq!(plain, results, "capturing changed a result file");
    // Every variant and trial, both hops, a qlog per endpoint.
    for variant in ["e2e", "sidekick", "pemi", "split"] {
        for trial in 0..2 {
            for name in [
                "hop-near.pcapng",
                "hop-far.pcapng",
                "client.sqlog",
                "server.sqlog",
            ] {
                let path = PathBuf::from(format!("captures/{variant}/trial-{trial}/{name}"));
                assert!(
                    captures.contains_key(&path),
                    "{} is missing",
                    path.display()
                );
            }
        }
    }
    let split_proxy = Path::new("captures/split/trial-0");
    assert!(captures.contains_key(&split_proxy.join("middle-client.sqlog")));
    assert!(captures.contains_key(&split_proxy.join("middle-server.sqlog")));
    let (again, _) = split(run(c.path(), &everything));
    assert_eq!(captures, again, "the same run captured different bytes");
}

#[test]
fn only_what_was_asked_is_captured() {
    let dir = tempfile::tempdir().unwrap();
    let (captures, _) = split(run(
        dir.path(),
        &["hops=far;variant=3;trials=1", "variant=e2e"],
    ));
    let names: Vec<String> = captures
        .keys()
        .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "captures/e2e/trial-0/hop-far.pcapng",
            "captures/e2e/trial-0/hop-near.pcapng",
            "captures/pemi/trial-1/hop-far.pcapng",
        ]
    );
}

#[test]
fn requests_that_do_not_fit_the_file_are_errors() {
    let file = file();
    let error = |request: &str| {
        let options = RunOptions {
            capture: Some(Captures {
                requests: vec![request.parse().unwrap()],
                dir: PathBuf::from("unused"),
            }),
            ..RunOptions::default()
        };
        experiments::run(&file, &options, &mut Progress::silent())
            .unwrap_err()
            .to_string()
    };
    let message = error("variant=quic");
    assert!(
        message.contains("no such variant") && message.contains(r#"4 "split""#),
        "{message}"
    );
    assert!(error("variant=5").contains("no such variant"));
    let message = error("hops=middle");
    assert!(
        message.contains("no hop `middle`") && message.contains(r#"["near", "far"]"#),
        "{message}"
    );
}

#[test]
fn every_qlog_record_has_the_required_fields() {
    let required: serde_json::Value = serde_json::from_str(QLOG_REQUIRED).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (captures, _) = split(run(dir.path(), &["variant=split", "variant=sidekick"]));
    let mut checked = 0;
    for (path, bytes) in &captures {
        if path.extension().is_none_or(|e| e != "sqlog") {
            continue;
        }
        assert_eq!(
            bytes.first(),
            Some(&0x1E),
            "{}: not JSON-SEQ",
            path.display()
        );
        assert_eq!(bytes.last(), Some(&b'\n'));
        // qvis finds what the file is in its first kilobyte.
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]);
        assert!(
            head.contains(r#""qlog_version":"#) && head.contains(r#""qlog_format":"JSON-SEQ""#)
        );
        let records = records(bytes).unwrap();
        let (header, events) = records.split_first().unwrap();
        check_record(header, true, &required).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for event in events {
            check_record(event, false, &required)
                .unwrap_or_else(|e| panic!("{}: {e}\n{event}", path.display()));
        }
        let named = |name: &str| events.iter().filter(|e| e["name"] == name).count();
        assert!(named("quic:packet_sent") > 10, "{}", path.display());
        assert!(named("quic:packet_received") > 10, "{}", path.display());
        checked += 1;
    }
    // Sidekick: client and server; split: those and the proxy's two legs.
    assert_eq!(checked, 6);
}

/// Whether a test that needs a tool must fail rather than skip.
fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var("PEPKIT_REQUIRE_REAL").is_ok_and(|v| v == "1")
}

/// tshark's fields `fields` of the packets of `pcap` that match `filter`.
fn tshark(pcap: &Path, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut command = Command::new("tshark");
    command
        .arg("-r")
        .arg(pcap)
        .args(["-Y", filter, "-T", "fields"]);
    for field in fields {
        command.args(["-e", field]);
    }
    let out = command.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether tshark is there; under CI its absence fails the test.
fn have_tshark() -> bool {
    if Command::new("tshark").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        !required(),
        "tshark is missing under CI: scripts/setup installs it"
    );
    eprintln!("skipping: tshark is not installed (scripts/setup installs it)");
    false
}

/// Runs the variants whose names contain `only` in `mode`, capturing the
/// first trial of each at every hop under `dir/captures`.
fn run_captured(dir: &Path, only: &str, mode: experiments::Mode) -> experiments::RunResults {
    let options = RunOptions {
        only: Some(only.into()),
        mode,
        trials: Some(1),
        capture: Some(Captures {
            requests: vec!["".parse().unwrap()],
            dir: dir.join("captures"),
        }),
        ..RunOptions::default()
    };
    experiments::run(&file(), &options, &mut Progress::silent()).unwrap()
}

/// The sidekick's capture: STREAM frames decrypted with the secrets
/// inside the file (no key log given), and the proxy's quACKs to the
/// client on the near hop, from its own address.
fn check_sidekick(captured: &Path) {
    let near = captured.join("sidekick/trial-0/hop-near.pcapng");
    let streams = tshark(&near, "quic.stream.stream_id", &["quic.stream.offset"]);
    assert!(streams.len() > 100, "{} STREAM packets", streams.len());
    let quacks = tshark(
        &near,
        "!icmp && ip.src == 10.255.255.1 && udp.srcport == 1234",
        &["frame.interface_name", "ip.dst"],
    );
    assert!(quacks.len() > 5, "{} quACKs", quacks.len());
    assert!(
        quacks.iter().all(|q| q == "near reverse\t10.0.2.10"),
        "{quacks:?}"
    );
}

#[test]
fn a_real_trial_is_captured_too() {
    if !emu::require_real_or_skip("a_real_trial_is_captured_too") || !have_tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let results = run_captured(dir.path(), "sidekick", experiments::Mode::Real);
    assert!(
        results.trials[0][0].errors.is_empty(),
        "{:?}",
        results.trials[0][0].errors
    );
    let captured = dir.path().join("captures");
    check_sidekick(&captured);
    let required: serde_json::Value = serde_json::from_str(QLOG_REQUIRED).unwrap();
    for endpoint in ["client", "server"] {
        let path = captured.join(format!("sidekick/trial-0/{endpoint}.sqlog"));
        let records = records(&std::fs::read(&path).unwrap()).unwrap();
        check_record(&records[0], true, &required).unwrap();
        for event in &records[1..] {
            check_record(event, false, &required).unwrap();
        }
    }
}

#[test]
fn tshark_decrypts_a_capture_alone_and_sees_the_middle_systems_packets() {
    if !have_tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let results = run_captured(dir.path(), "i", experiments::Mode::Simulator);
    let captured = dir.path().join("captures");
    check_sidekick(&captured);

    // PEMI: its retransmissions are copies of datagrams it already
    // forwarded, on the far hop toward the server, as many as it counts;
    // its ICMP echo probes to the server are there too.
    let far = captured.join("pemi/trial-0/hop-far.pcapng");
    let pemi = &results.trials[1][0];
    let probes = tshark(&far, "icmp.type == 8", &["ip.dst"]);
    assert_eq!(probes.len() as f64, pemi.metrics["pemi_probes"]);
    assert!(probes.iter().all(|to| to == "10.0.1.10"), "{probes:?}");
    let payloads = tshark(
        &far,
        "udp && frame.interface_name == \"far forward\"",
        &["udp.payload"],
    );
    let mut seen = std::collections::BTreeSet::new();
    let copies = payloads.iter().filter(|p| !seen.insert(*p)).count();
    let resent = pemi.metrics["pemi_retransmissions"];
    assert!(resent >= 1.0, "PEMI resent nothing: choose a lossier path");
    assert_eq!(
        copies as f64, resent,
        "copies on the far hop against PEMI's count"
    );
    let decrypted = tshark(&far, "quic.stream.stream_id", &["quic.stream.offset"]);
    assert!(decrypted.len() > 100, "{} STREAM packets", decrypted.len());
}
