//! `pepkit compare`: a wrong hop is an error before anything runs; the
//! command prints both tables with every approach and writes its files;
//! and it runs in real mode (needs root and network namespaces; skips
//! with the reason otherwise, fails with `PEPKIT_REQUIRE_REAL=1`).

use std::process::Command;

fn compare(out: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pepkit"));
    command.args(["compare", "--quiet", "--out"]).arg(out);
    command
}

const HOPS: [&str; 4] = [
    "--hop",
    "rate=20Mbit/s,delay=20ms,loss=2%",
    "--hop",
    "rate=100Mbit/s,delay=5ms",
];

#[test]
fn a_wrong_hop_stops_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = compare(&out)
        .args(["--hop", "rate=20Mbit/s,delay=20"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--hop 1") && stderr.contains("not a time"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn both_tables_name_every_approach() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = compare(&out)
        .args(HOPS)
        .args(["--size", "300kB", "--trials", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for name in [
        "QUIC CUBIC (e2e)",
        "QUIC + PEMI",
        "TECC tunnel, RMDT",
        "TCP + PEP",
        "Copa",
    ] {
        assert!(stdout.contains(&format!("| {name}")), "{name}: {stdout}");
    }
    // An approach that cannot run here is a row saying why; the sidekick
    // serves a download (its relay) and runs.
    assert!(
        stdout.contains("n/a: TCP runs in real mode only"),
        "{stdout}"
    );
    assert!(stdout.contains("| QUIC + Sidekick | 2 |"), "{stdout}");
    assert_eq!(
        stdout.matches(" ★ |").count(),
        2,
        "one best per table: {stdout}"
    );
    assert!(stdout.contains("wall time:"), "{stdout}");
    for file in [
        "compare.md",
        "compare.json",
        "compare.png",
        "compare.svg",
        "controllers.png",
        "approaches/summary.json",
        "controllers/trials.csv",
    ] {
        assert!(out.join(file).is_file(), "{file} is missing");
    }
}

#[test]
fn real_mode_runs_tcp_and_the_pep_too() {
    if !emu::require_real_or_skip("real_mode_runs_tcp_and_the_pep_too") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = compare(&out)
        .args(HOPS)
        .args(["--size", "200kB", "--trials", "1", "--real"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("wall time:") && stdout.contains("real mode"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    let runs = |name: &str| {
        json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["approach"] == name && row["status"] == "runs")
    };
    assert!(runs("TCP CUBIC (e2e)") && runs("TCP + PEP"), "{json}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("approaches/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["mode"], "real");
}
