//! Parses arbitrary bytes as sidekick discovery and control messages:
//! parsing never panics, and whatever parses re-encodes to the same bytes
//! (the format is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sidekick::wire::{Control, Discovery};

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = Discovery::parse(data) {
        assert_eq!(message.to_bytes(), data);
    }
    if let Ok(message) = Control::parse(data) {
        assert_eq!(message.to_bytes(), data);
    }
});
