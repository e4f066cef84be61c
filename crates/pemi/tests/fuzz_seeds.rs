//! The pemi_wire fuzz target's committed inputs go through its checks on
//! every `cargo test`: the seeds (`fuzz/seeds/pemi_wire/`, valid QUIC
//! datagrams libFuzzer starts from) must parse, and every input that once
//! made the target fail (`fuzz/reproducers/pemi_wire/`, kept when the bug
//! is fixed) must pass the checks again. The checks are the target's own
//! (`fuzz/checks/pemi_wire.rs`).

use std::path::{Path, PathBuf};

include!("../../../fuzz/checks/pemi_wire.rs");

fn inputs(kind: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join("pemi_wire");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, Vec<u8>)> = entries
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_seed_parses_and_passes_the_checks() {
    let seeds = inputs("seeds");
    assert!(
        seeds.len() >= 4,
        "fuzz/seeds/pemi_wire has {} files",
        seeds.len()
    );
    for (path, bytes) in seeds {
        assert!(check_pemi_wire(&bytes), "{} does not parse", path.display());
    }
}

#[test]
fn every_reproducer_passes_the_checks() {
    // None yet: no run has made the target fail.
    for (path, bytes) in inputs("reproducers") {
        let result = std::panic::catch_unwind(|| check_pemi_wire(&bytes));
        assert!(result.is_ok(), "{} fails the checks again", path.display());
    }
}
