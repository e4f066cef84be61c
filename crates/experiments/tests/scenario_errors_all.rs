//! A file with several independent errors gets them all at once, each
//! naming its field; and an error whose cause is the transfer's direction
//! says so.

use experiments::{ScenarioError, ScenarioFile};
use std::path::PathBuf;

const BASE: &str = r#"
name = "t"
title = "test"
path = ["near", "far"]
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "25ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "1MB"
"#;

fn error(text: &str) -> ScenarioError {
    ScenarioFile::parse(text, PathBuf::from("t.toml")).unwrap_err()
}

#[test]
fn three_independent_errors_are_reported_together_each_with_its_field() {
    let text = BASE.replace("rate = \"10Mbit/s\"", "rate = \"10Mbit/s\"\nlosss = 0.1")
        + "trials = 0\n"
        + r#"
[[variant]]
name = "A"
hops.near.loss = "1%"
[[variant]]
name = "B"
[[check]]
claim = "x"
metric = "goodput_mbps"
variant = "C"
at_least = 1
"#;
    // `trials` after [workload] belongs to it: move it to the top.
    let text =
        text.replace("trials = 0\n", "")
            .replacen("name = \"t\"", "name = \"t\"\ntrials = 0", 1);
    let ScenarioError::Several(errors) = error(&text) else {
        panic!("one error only: {}", error(&text));
    };
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert!(messages[0].contains("`hops.far.losss`: unknown field `losss`"));
    assert!(messages[1].contains("`trials`: must be at least 1"));
    assert!(messages[2].contains("variant \"A\": `hops.near.loss`: invalid type"));
    assert!(messages[3].contains("`check[0].variant`: no variant is called \"C\""));
    // Printed as a list, one error a line.
    let printed = ScenarioError::Several(errors).to_string();
    assert!(printed.starts_with("4 errors:\n  - t.toml: "), "{printed}");
}

#[test]
fn a_base_error_is_not_repeated_for_every_variant_and_one_error_stays_one() {
    let text = BASE.replace("delay = \"1ms\"", "delay = \"1ms\"\nlosss = 0.1")
        + "[[variant]]\nname = \"A\"\n[[variant]]\nname = \"B\"\n";
    let single = error(&text);
    assert!(
        matches!(&single, ScenarioError::Field { field, .. } if field == "hops.near.losss"),
        "{single}"
    );
}

#[test]
fn a_field_taken_out_to_read_on_is_not_reported_missing() {
    // The size's type is wrong; reading on without it must not add
    // "missing field" for the same field, nor run the checks that span
    // fields on a document without it.
    let text = BASE.replace("size = \"1MB\"", "size = 12.5");
    let message = error(&text).to_string();
    assert!(!message.contains("missing"), "{message}");
    assert!(!message.contains("errors:"), "{message}");
}

#[test]
fn tecc_on_an_upload_says_its_tunnel_serves_downloads() {
    let text = BASE.to_string()
        + "middle = { kind = \"tecc\", mode = \"tecc\" }\n"
        + "[server]\ncontroller = \"tecc\"\n";
    // `middle` after [workload] belongs to it: put it at the top.
    let text = text
        .replace("middle = { kind = \"tecc\", mode = \"tecc\" }\n", "")
        .replacen(
            "name = \"t\"",
            "name = \"t\"\nmiddle = { kind = \"tecc\", mode = \"tecc\" }",
            1,
        );
    let message = error(&text).to_string();
    assert!(message.contains("`server.controller`"), "{message}");
    assert!(
        message.contains("here the client sends the data (client → server, an upload)")
            && message.contains("in a download (the server → client direction)"),
        "{message}"
    );
    // As a download it loads.
    let download = text.replace("direction = \"upload\"", "direction = \"download\"");
    ScenarioFile::parse(&download, PathBuf::from("t.toml")).unwrap();
}
