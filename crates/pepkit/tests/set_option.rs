//! `pepkit run FILE --set PATH=VALUE`: a malformed override or one that
//! makes the scenario invalid is exit 2 with a message naming it; one that
//! a variant's own setting keeps out is a warning naming the variant; the
//! results record the overrides, and `pepkit merge` refuses shards run
//! with other ones.

mod common;

use common::{pepkit_run, two_hop_upload};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A one-trial, 200 kB upload over two hops; one variant sets the far
/// hop's delay itself.
fn scenario(dir: &Path) -> PathBuf {
    let text = two_hop_upload("set", "set option")
        + r#"
[[variant]]
name = "base"

[[variant]]
name = "own delay"
hops.far.delay = "20ms"
"#;
    let path = dir.join("set.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(file: &Path, out: &Path, args: &[&str]) -> Output {
    pepkit_run(file, out).args(args).output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn malformed_and_invalid_overrides_exit_2_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path());
    let out = dir.path().join("out");
    for (set, says) in [
        ("hops.far.delay", "has no `=`"),
        ("=1", "no field before `=`"),
        ("hops.far.delay=", "no value after `=`"),
        ("hops.far.delay=two words", "is not a TOML value"),
    ] {
        let output = run(&file, &out, &["--set", set]);
        assert_eq!(output.status.code(), Some(2), "{set}");
        let message = stderr(&output);
        assert!(message.contains("--set"), "{set}: {message}");
        assert!(message.contains(says), "{set}: {message}");
    }
    let output = run(&file, &out, &["--set", "hops.far.loss=2"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("set.toml: `hops.far.loss`: 2 is not a probability"),
        "{message}"
    );
    assert!(
        message.contains("(from --set hops.far.loss=2)"),
        "{message}"
    );
    let output = run(&file, &out, &["--set", "hops.far.delay.ms=5"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("`hops.far.delay` is string"), "{message}");
    // A run's own error (here --only matching nothing) does not blame them.
    let output = run(&file, &out, &["--set", "trials=2", "--only", "nothing"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("no variant's name contains"), "{message}");
    assert!(!message.contains("--set"), "{message}");
    assert!(!out.exists(), "an error wrote results");
}

#[test]
fn overrides_are_recorded_and_variants_that_keep_their_own_value_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path());
    let out = dir.path().join("out");
    let output = run(
        &file,
        &out,
        &[
            "--set",
            "hops.far.delay=10ms",
            "--set",
            "workload.size = 100kB",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(
            "warning: --set hops.far.delay=\"10ms\" does not reach variant \"own delay\""
        ),
        "{message}"
    );
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(
        summary["overrides"],
        serde_json::json!(["hops.far.delay=\"10ms\"", "workload.size=\"100kB\""])
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains("--set 'workload.size=\"100kB\"'"),
        "{markdown}"
    );
}

#[test]
fn shards_run_with_other_overrides_do_not_merge() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path());
    let shard = |index: &str, sets: &[&str]| {
        let out = dir.path().join(format!("shard-{index}-{}", sets.len()));
        let mut args = vec!["--shard", index];
        for set in sets {
            args.extend(["--set", set]);
        }
        let output = run(&file, &out, &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        out
    };
    let first = shard("1/2", &["workload.size=100kB"]);
    let plain = shard("2/2", &[]);
    let second = shard("2/2", &["workload.size=100kB"]);
    let merge = |dirs: &[&PathBuf], out: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pepkit"))
            .arg("merge")
            .args(dirs)
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap()
    };
    let refused = merge(&[&first, &plain], "bad");
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("its --set overrides are none"));
    let merged = merge(&[&first, &second], "merged");
    assert_eq!(merged.status.code(), Some(0), "{}", stderr(&merged));
    let summary = std::fs::read_to_string(dir.path().join("merged/summary.json")).unwrap();
    assert!(summary.contains("workload.size=\\\"100kB\\\""), "{summary}");
}
