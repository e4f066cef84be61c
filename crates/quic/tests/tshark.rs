//! An independent dissector decrypts a simulated transfer: tshark, given
//! the TLS key log, finds the QUIC STREAM frames in the netsim captures (and
//! finds none without the keys). tshark and mergecap come from
//! `scripts/setup`; without them the test skips, except under CI.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Scenario, run};

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// Packets in which tshark sees a STREAM frame.
fn stream_packets(pcap: &Path, keys: Option<&Path>) -> usize {
    let mut tshark = Command::new("tshark");
    if let Some(keys) = keys {
        tshark
            .arg("-o")
            .arg(format!("tls.keylog_file:{}", keys.display()));
    }
    let out = tshark
        .arg("-r")
        .arg(pcap)
        .args([
            "-Y",
            "quic.stream.stream_id",
            "-T",
            "fields",
            "-e",
            "quic.stream.stream_id",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn tshark_decrypts_a_simulated_transfer() {
    if !have("tshark") || !have("mergecap") {
        assert!(
            std::env::var_os("CI").is_none(),
            "tshark or mergecap is missing under CI: scripts/setup installs them"
        );
        eprintln!("skipped: tshark and mergecap not installed (run scripts/setup)");
        return;
    }
    let out = run(&Scenario {
        keylog: true,
        ..Scenario::new(200_000)
    });
    let dir = std::env::temp_dir().join(format!("pepkit-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (down, up, both, keys) = (
        dir.join("down.pcap"),
        dir.join("up.pcap"),
        dir.join("both.pcap"),
        dir.join("keys.log"),
    );
    std::fs::write(&down, &out.pcap).unwrap();
    std::fs::write(&up, &out.pcap_up).unwrap();
    std::fs::write(&keys, &out.keylog).unwrap();
    // tshark needs both directions (the client's Initial and ClientHello).
    let merged = Command::new("mergecap")
        .arg("-w")
        .arg(&both)
        .arg(&up)
        .arg(&down)
        .status()
        .expect("run mergecap");
    assert!(merged.success());

    let decrypted = stream_packets(&both, Some(&keys));
    let opaque = stream_packets(&both, None);
    std::fs::remove_dir_all(&dir).ok();
    // 200 kB in ~1200-byte packets: well over a hundred STREAM frames.
    assert!(decrypted > 100, "tshark found {decrypted} STREAM packets");
    assert_eq!(opaque, 0, "without the keys the payload is opaque");
}
