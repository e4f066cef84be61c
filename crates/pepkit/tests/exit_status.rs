//! `pepkit run` tells a claim that did not hold (exit 1) from a run that
//! did not happen (exit 2): CI tolerates the first for papers whose claims
//! are still open, never the second.

mod common;

use common::{pepkit_run, two_hop_upload};
use std::path::Path;

/// A one-trial, 200 kB upload over two hops, with `check` appended.
fn scenario(dir: &Path, name: &str, check: &str) -> std::path::PathBuf {
    let text = format!(
        "{}\n[[variant]]\nname = \"only\"\n{check}\n",
        two_hop_upload(name, "exit status")
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn run(file: &Path, out: &Path) -> Option<i32> {
    pepkit_run(file, out).output().unwrap().status.code()
}

#[test]
fn claims_exit_1_and_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let claim = |bound: &str| {
        format!(
            "[[check]]\nclaim = \"goodput {bound}\"\nmetric = \"goodput_mbps\"\n\
             variant = \"only\"\n{bound}\n"
        )
    };
    let holds = scenario(dir.path(), "holds", &claim("at_least = 0.1"));
    assert_eq!(run(&holds, &dir.path().join("a")), Some(0));
    let fails = scenario(dir.path(), "fails", &claim("at_least = 1000.0"));
    assert_eq!(run(&fails, &dir.path().join("b")), Some(1));
    let bad = scenario(dir.path(), "bad", "[[check]]\nmetrc = \"goodput_mbps\"\n");
    assert_eq!(run(&bad, &dir.path().join("c")), Some(2));
    // Results that cannot be written: the output directory is a file.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, "").unwrap();
    assert_eq!(run(&holds, &blocked), Some(2));
    // A CPU for the middle node needs real mode.
    let pinned = pepkit_run(&holds, &dir.path().join("d"))
        .args(["--pin-middle", "0"])
        .output()
        .unwrap();
    assert_eq!(pinned.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&pinned.stderr);
    assert!(stderr.contains("--pin-middle 0 needs --real"), "{stderr}");
}
