//! Whether a real-mode test runs, skips or fails: the one place that
//! decides.
//!
//! Real-mode tests need root, network namespaces and some installed tools.
//! On a developer's machine without them a test prints why and passes, so
//! `cargo test` stays useful; where the capability must be there (CI sets
//! [`REQUIRE_REAL`]` = 1`), its absence fails the test with the reason
//! instead of letting it pass without having run.

/// The environment variable that turns a skipped real-mode test into a
/// failed one: `PEPKIT_REQUIRE_REAL=1` (also `true` or `yes`) requires
/// every real-mode capability; unset, empty, `0`, `false` or `no` lets
/// tests skip.
pub const REQUIRE_REAL: &str = "PEPKIT_REQUIRE_REAL";

/// Whether [`REQUIRE_REAL`] asks for real-mode tests to run.
///
/// # Panics
///
/// If the variable has another value (a typo should not silently let
/// tests skip).
pub fn real_required() -> bool {
    let value = std::env::var(REQUIRE_REAL).unwrap_or_default();
    parse_required(&value)
        .unwrap_or_else(|| panic!("{REQUIRE_REAL}={value:?}: expected 1 (require real mode) or 0"))
}

fn parse_required(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Some(true),
        "" | "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// Whether the real-mode test `test` can run here ([`available`](crate::available)):
/// `true` if it can; otherwise prints `skipping TEST: real mode REASON` on
/// standard error and returns `false` (the test should return), or panics
/// with the reason when [`REQUIRE_REAL`] is set.
///
/// ```no_run
/// #[test]
/// fn over_a_testbed() {
///     if !emu::require_real_or_skip("over_a_testbed") {
///         return;
///     }
///     // ... build a testbed
/// }
/// ```
pub fn require_real_or_skip(test: &str) -> bool {
    require_or_skip(
        test,
        crate::available().map_err(|r| format!("real mode {r}")),
    )
}

/// [`require_real_or_skip`] for any capability a real-mode test checks
/// itself: `check` is `Err(reason)` when the test cannot run here.
pub fn require_or_skip(test: &str, check: Result<(), String>) -> bool {
    decide(test, check, real_required())
}

fn decide(test: &str, check: Result<(), String>, required: bool) -> bool {
    match check {
        Ok(()) => true,
        Err(reason) if required => {
            panic!("{test} cannot run: {reason} ({REQUIRE_REAL}=1 requires it to)")
        }
        Err(reason) => {
            eprintln!("skipping {test}: {reason}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_reads_as_a_flag() {
        for on in ["1", "true", "YES", " 1\n"] {
            assert_eq!(parse_required(on), Some(true), "{on:?}");
        }
        for off in ["", "0", "false", "No"] {
            assert_eq!(parse_required(off), Some(false), "{off:?}");
        }
        assert_eq!(parse_required("2"), None);
        assert_eq!(parse_required("on please"), None);
    }

    #[test]
    fn runs_skips_or_fails() {
        assert!(decide("t", Ok(()), false));
        assert!(decide("t", Ok(()), true));
        assert!(!decide("t", Err("needs root".into()), false));
        let failed = std::panic::catch_unwind(|| decide("t", Err("needs root".into()), true));
        let message = *failed.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(
            message,
            "t cannot run: needs root (PEPKIT_REQUIRE_REAL=1 requires it to)"
        );
    }
}
