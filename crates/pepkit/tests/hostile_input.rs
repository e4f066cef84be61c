//! `pepkit run` with hostile or careless input writes only under its
//! output directory, echoes no file that is not a trace, and its warnings
//! about `--set` are true.

mod common;

use common::{pepkit_run, two_hop_upload};
use std::path::Path;
use std::process::{Command, Output};

fn scenario(dir: &Path) -> std::path::PathBuf {
    let text = two_hop_upload("hostile", "hostile input")
        + r#"
[[variant]]
name = "a"

[[variant]]
name = "b"
"#;
    let path = dir.join("hostile.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    common::files(dir)
        .keys()
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn a_name_that_leaves_results_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path());
    // The run's working directory: results/NAME would be under it.
    let work = dir.path().join("w");
    std::fs::create_dir_all(&work).unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("summary.md"), "keep me").unwrap();
    let absolute = dir.path().join("abs").display().to_string();
    for name in [
        "../../victim",
        "..",
        ".",
        "",
        absolute.as_str(),
        "x/../../../victim",
        "back\\slash",
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_pepkit"))
            .current_dir(&work)
            .args(["run", "--quiet", "--set"])
            .arg(format!("name={name:?}"))
            .arg(&file)
            .output()
            .unwrap();
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{name:?}: {message}");
        assert!(message.contains("`name`"), "{name:?}: {message}");
        assert!(
            message.contains("results/NAME") && message.contains("without `/`"),
            "{name:?}: {message}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(victim.join("summary.md")).unwrap(),
        "keep me"
    );
    assert_eq!(files_under(&victim), ["summary.md"]);
    assert!(!dir.path().join("abs").exists());
    assert!(files_under(&work).is_empty(), "{:?}", files_under(&work));
    // A name with spaces and punctuation is a directory under results/.
    let output = Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .current_dir(&work)
        .args([
            "run",
            "--quiet",
            "--only",
            "a",
            "--set",
            "name=\"odd, name (1%)\"",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(work.join("results/odd, name (1%)/summary.md").exists());
}

#[test]
fn a_trace_that_is_not_a_trace_is_not_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path());
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:$6$s3cr3t:19000:0:99999:7:::\ndaemon:*:1\n").unwrap();
    let out = dir.path().join("out");
    let output = pepkit_run(&file, &out)
        .arg("--set")
        .arg(format!("hops.far.trace={:?}", secret.display().to_string()))
        .args(["--set", "hops.far.rate=\"1Mbit/s\""])
        .output()
        .unwrap();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("not a mahimahi trace"), "{message}");
    assert!(
        !message.contains("root") && !message.contains("s3cr3t") && !message.contains("daemon"),
        "{message}"
    );
    assert!(!out.exists());
}

#[test]
fn a_sweep_set_on_a_variant_reaches_it_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path());
    let out = dir.path().join("out");
    let output = pepkit_run(&file, &out)
        .args([
            "--set",
            r#"variant."a".sweep={ field = "hops.far.delay", values = [2, 3], unit = "ms" }"#,
        ])
        .output()
        .unwrap();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{message}");
    assert!(!message.contains("does not reach"), "{message}");
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    for variant in ["a, delay = 2ms", "a, delay = 3ms", "\"b\""] {
        assert!(summary.contains(variant), "{variant} not in {summary}");
    }
}
