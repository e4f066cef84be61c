//! `pepkit middle`'s command line: the help lists every system's settings
//! with the defaults of their one declaration; a table that does not
//! validate, or interfaces that do not fit where the system sits, fail
//! with one line and exit 2; a missing interface fails with one line.

use std::process::{Command, Output};

fn pepkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args(args)
        .output()
        .expect("pepkit runs")
}

/// The one line on stderr of a run that exited with `code`.
fn fails(args: &[&str], code: i32) -> String {
    let out = pepkit(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.trim().lines().collect();
    // The daemon's first line says what it would run; the error follows.
    let error = lines.last().copied().unwrap_or_default();
    assert!(lines.len() <= 2, "{args:?}: {stderr}");
    error.to_string()
}

#[test]
fn the_help_lists_every_system_and_its_settings_with_their_defaults() {
    let out = pepkit(&["middle", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let engine = pemi::PemiConfig::default();
    for expected in [
        "  pemi: ".to_string(),
        format!("alpha [{}]:", engine.alpha),
        format!("max_connections [{}]:", engine.max_connections),
        "  sidekick: ".into(),
        "max_flows [4096]:".into(),
        "session_window [8]:".into(),
        "  tecc: ".into(),
        "outer_payload [1350]:".into(),
        "mode: The tunnel mode (required)".into(),
        "  split: ".into(),
        "max_servers [64]:".into(),
        "  pep: ".into(),
        "max_connections [1024]:".into(),
        "--iface <IF>".into(),
        "--addr <IP[:PORT]>".into(),
        "--netns <NAME>".into(),
        "SIGUSR1".into(),
    ] {
        assert!(
            help.contains(&expected),
            "{expected:?} missing from:\n{help}"
        );
    }
    let top = String::from_utf8(pepkit(&["--help"]).stdout).unwrap();
    assert!(top.contains("middle"), "{top}");
    for gone in ["sidekick-proxy", "tunnel-server", "tcp-pep"] {
        assert!(!top.contains(gone), "{top}");
    }
}

#[test]
fn bad_tables_and_misfit_interfaces_fail_with_one_line() {
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["middle", "{ kind = \"pemi\", alpha = 0 }"],
            &["alpha", "at least 1"],
        ),
        (&["middle", "pemi", "--set", "beta=20"], &["beta", "0..=10"]),
        (&["middle", "pemi", "--set", "nosuch=1"], &["nosuch"]),
        (&["middle", "teleport"], &["teleport"]),
        (&["middle", "pemi", "--iface", "eth0"], &["pemi", "twice"]),
        (
            &[
                "middle",
                "{ kind = \"tecc\", mode = \"mdt\" }",
                "--iface",
                "eth0",
            ],
            &["tecc", "--addr"],
        ),
        (&["middle", "router"], &["plain router"]),
        (
            &["middle", "split", "--set", "max_servers=0"],
            &["middle.max_servers", "at least 1"],
        ),
        (
            &["middle", "pep", "--set", "idle_timeout=0s"],
            &["middle.idle_timeout"],
        ),
    ];
    for (args, words) in cases {
        let error = fails(args, 2);
        for word in words {
            assert!(error.contains(word), "{args:?}: {error}");
        }
    }
}

#[test]
fn a_table_comes_from_a_scenario_file_and_its_variant() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        "middle = \"pemi\"\n[[variant]]\nname = \"v\"\nmiddle = { kind = \"pemi\", alpha = 0 }\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    // The file's own middle validates and gets as far as the interfaces;
    // its variant's does not validate.
    assert!(fails(&["middle", "--file", file, "--iface", "x"], 2).contains("twice"));
    let error = fails(&["middle", "--file", file, "--variant", "v"], 2);
    assert!(error.contains("alpha"), "{error}");
    let error = fails(&["middle", "--file", file, "--variant", "w"], 2);
    assert!(error.contains("no variant named \"w\""), "{error}");
}

#[test]
fn a_missing_interface_is_named() {
    if !emu::require_real_or_skip("a_missing_interface_is_named") {
        return;
    }
    let error = fails(
        &[
            "middle",
            "sidekick",
            "--iface",
            "pk-no-such-if0",
            "--addr",
            "127.0.0.1",
        ],
        1,
    );
    assert!(error.contains("no interface pk-no-such-if0"), "{error}");
    let error = fails(
        &["middle", "sidekick", "--iface", "lo", "--addr", "192.0.2.1"],
        2,
    );
    assert!(
        error.contains("not an IPv4 address of this router"),
        "{error}"
    );
}
