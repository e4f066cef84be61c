//! `--set PATH=VALUE` edits the scenario before it is read: the base for
//! every variant that does not set the field itself (those are named), one
//! variant by name or index, and errors say which override caused them.

mod common;

use common::write_and_read;
use experiments::scenario::Override;
use experiments::{Progress, RunOptions, ScenarioFile};
use std::path::PathBuf;
use std::time::Duration;

const BASE: &str = r#"
name = "t"
title = "test"
trials = 1
path = ["near", "far"]
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "5ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "200kB"

[[variant]]
name = "plain"

[[variant]]
name = "slow far hop"
hops.far.delay = "30ms"

[[variant]]
name = "tecc server"
middle = { kind = "tecc", mode = "tecc" }
server.controller = "tecc"
workload.direction = "download"

[[variant]]
name = "swept"
sweep = { field = "hops.far.delay", values = [10, 20], unit = "ms" }
"#;

fn sets(texts: &[&str]) -> Vec<Override> {
    texts.iter().map(|text| text.parse().unwrap()).collect()
}

fn load(texts: &[&str]) -> ScenarioFile {
    ScenarioFile::parse_with(BASE, PathBuf::from("t.toml"), &sets(texts)).unwrap()
}

fn error(texts: &[&str]) -> String {
    match ScenarioFile::parse_with(BASE, PathBuf::from("t.toml"), &sets(texts)) {
        Ok(_) => panic!("accepted with {texts:?}"),
        Err(error) => error.to_string(),
    }
}

fn far_delay(file: &ScenarioFile, variant: &str) -> Duration {
    let variant = file.variants.iter().find(|v| v.name == variant).unwrap();
    variant.scenario.path[1].delay
}

#[test]
fn no_overrides_read_the_file_as_written() {
    let plain = ScenarioFile::parse(BASE, PathBuf::from("t.toml")).unwrap();
    let edited = load(&[]);
    assert_eq!(plain.variants, edited.variants);
    assert!(edited.overrides.is_empty() && edited.shadowed.is_empty());
}

#[test]
fn the_base_reaches_variants_that_do_not_set_the_field() {
    let file = load(&["hops.far.delay=40ms"]);
    assert_eq!(file.base.path[1].delay, Duration::from_millis(40));
    assert_eq!(far_delay(&file, "plain"), Duration::from_millis(40));
    assert_eq!(far_delay(&file, "tecc server"), Duration::from_millis(40));
    // A variant's own value wins, as over any base field; so does a sweep.
    assert_eq!(far_delay(&file, "slow far hop"), Duration::from_millis(30));
    assert_eq!(
        far_delay(&file, "swept, delay = 10ms"),
        Duration::from_millis(10)
    );
    assert_eq!(file.shadowed.len(), 1);
    assert_eq!(file.shadowed[0].set.to_string(), "hops.far.delay=\"40ms\"");
    assert_eq!(file.shadowed[0].variants, ["slow far hop", "swept"]);
    assert_eq!(file.overrides, sets(&["hops.far.delay = \"40ms\""]));
}

#[test]
fn a_variant_is_set_by_name_or_index() {
    let file = load(&[
        "variant.\"slow far hop\".hops.far.delay=50ms",
        "variant.0.trials=3",
    ]);
    assert_eq!(far_delay(&file, "slow far hop"), Duration::from_millis(50));
    assert_eq!(file.variants[0].scenario.trials, 3);
    assert_eq!(file.variants[1].scenario.trials, 1);
    assert!(file.shadowed.is_empty());
    // A sweep's value wins over a --set of its variant.
    let file = load(&["variant.swept.hops.far.delay=50ms"]);
    assert_eq!(file.shadowed[0].variants, ["swept"]);
}

#[test]
fn a_table_value_replaces_the_table() {
    let file = load(&[
        "hops.far.buffer={ kind = \"drop_tail\", packets = 10 }",
        "hops.far.buffer={ kind = \"unlimited\" }",
    ]);
    assert_eq!(
        file.base.path[1].buffer,
        experiments::scenario::Buffer::Unlimited
    );
    // Missing tables are made on the way.
    let set = "server.loss_detection={ packet_threshold = 300, time_threshold = 2.0 }";
    let file = ScenarioFile::parse_with(
        &BASE.replace(
            "server.controller = \"tecc\"",
            "server.controller = \"bbr\"",
        ),
        PathBuf::from("t.toml"),
        &sets(&[set]),
    )
    .unwrap();
    let detection = file.variants[0].scenario.flows()[0].server_loss_detection;
    assert_eq!(detection.map(|d| d.packet_threshold), Some(300));
}

#[test]
fn errors_name_the_override_that_caused_them() {
    let message = error(&["hops.far.delay=fast"]);
    assert!(message.contains("`hops.far.delay`"), "{message}");
    assert!(
        message.contains("(from --set hops.far.delay=\"fast\")"),
        "{message}"
    );
    // The reader's error in a variant, with the override that caused it.
    let message = error(&["server.loss_detection={ packet_threshold = 300 }"]);
    assert!(message.contains("variant \"tecc server\": `server.loss_detection`"));
    assert!(message.contains("sets its own loss detection"), "{message}");
    assert!(
        message.contains("(from --set server.loss_detection="),
        "{message}"
    );
    // An error elsewhere in the edited file lists every override.
    let broken = BASE.replace("size = \"200kB\"", "size = \"200kB\"\nsise = 1");
    let message =
        ScenarioFile::parse_with(&broken, "t.toml".into(), &sets(&["seed=2", "trials=2"]))
            .unwrap_err()
            .to_string();
    assert!(
        message.contains("`workload`: unknown field `sise`"),
        "{message}"
    );
    assert!(
        message.contains("(the file edited with --set seed=2, --set trials=2)"),
        "{message}"
    );
    // Setting inside a value that is not a table.
    let message = error(&["workload.size.unit=1"]);
    assert!(
        message.contains("t.toml: `workload.size.unit`: --set"),
        "{message}"
    );
    assert!(message.contains("`workload.size` is string"), "{message}");
}

#[test]
fn the_same_overrides_give_the_same_files_and_record_themselves() {
    let tmp = tempfile::tempdir().unwrap();
    let options = RunOptions {
        only: Some("plain".into()),
        ..RunOptions::default()
    };
    let mut written = Vec::new();
    for run in ["a", "b"] {
        let file = load(&["hops.far.rate=20Mbit/s", "workload.size=100kB"]);
        let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
        written.push(write_and_read(&tmp.path().join(run), &file, &results));
    }
    assert_eq!(written[0], written[1]);
    let summary = String::from_utf8(written[0][&PathBuf::from("summary.json")].clone()).unwrap();
    assert!(
        summary.contains(
            "\"overrides\": [\n    \"hops.far.rate=\\\"20Mbit/s\\\"\",\n    \"workload.size=\\\"100kB\\\"\"\n  ]"
        ),
        "{summary}"
    );
    let markdown = String::from_utf8(written[0][&PathBuf::from("summary.md")].clone()).unwrap();
    assert!(
        markdown.contains("`--set 'hops.far.rate=\"20Mbit/s\"'` `--set 'workload.size=\"100kB\"'`")
    );
    // Without overrides, summary.json has no such field.
    let file = load(&[]);
    let results = experiments::run(&file, &options, &mut Progress::silent()).unwrap();
    let plain = write_and_read(&tmp.path().join("plain"), &file, &results);
    let summary = String::from_utf8(plain[&PathBuf::from("summary.json")].clone()).unwrap();
    assert!(!summary.contains("overrides"));
}

#[test]
fn a_variants_own_keys_set_on_it_reach_it() {
    // A sweep given to a variant sweeps it; no warning says otherwise.
    let file = load(&[
        r#"variant.plain.sweep={ field = "hops.far.delay", values = [7, 8], unit = "ms" }"#,
    ]);
    assert_eq!(
        far_delay(&file, "plain, delay = 7ms"),
        Duration::from_millis(7)
    );
    assert_eq!(
        far_delay(&file, "plain, delay = 8ms"),
        Duration::from_millis(8)
    );
    assert!(file.shadowed.is_empty(), "{:?}", file.shadowed);
    let file = load(&[
        "variant.swept.sweep.values=[40]",
        "variant.plain.name=renamed",
    ]);
    assert_eq!(
        far_delay(&file, "swept, delay = 40ms"),
        Duration::from_millis(40)
    );
    assert!(file.variants.iter().any(|v| v.name == "renamed"));
    assert!(file.shadowed.is_empty(), "{:?}", file.shadowed);
}

#[test]
fn a_name_that_is_not_one_directory_is_refused() {
    for name in ["../../victim", "/tmp/abs", "..", ".", "", "a\\\\b", "a..b"] {
        let message = error(&[&format!("name={name:?}")]);
        assert!(message.contains("`name`"), "{name:?}: {message}");
        assert!(message.contains("results/NAME"), "{name:?}: {message}");
    }
    assert_eq!(
        load(&["name=\"odd, name (1%)\""]).base.name,
        "odd, name (1%)"
    );
}
