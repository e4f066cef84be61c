//! `pepkit bench quack` says what its yardstick is: a scalar implementation
//! of ours, not the authors', and how the authors' library compared.

use std::process::Command;

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args(["bench", "quack", "--rounds", "1"])
        .args(args)
        .output()
        .expect("pepkit runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_yardstick_is_named_for_what_it_is() {
    let text = bench(&[]);
    // Unwrapped, so that line breaks do not matter.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "yardstick: a straightforward scalar implementation we wrote",
        "measured in the same run; NOT the authors' implementation.",
        "found the authors' own library ~3.4x slower than ours, not the 8.6x",
        "the yardstick overstates the gain over the authors' code",
        "(paper: 2.82 µs)",
    ] {
        assert!(flat.contains(said), "{said:?} missing from:\n{text}");
    }
    assert!(!text.contains("x slower)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&bench(&["--json"])).unwrap();
    let what = json["textbook"]["what"].as_str().unwrap();
    assert!(what.contains("NOT the authors' implementation"), "{what}");
    assert!(json["textbook"]["decode_us"].as_f64().unwrap() > 0.0);
}
