//! Parses arbitrary bytes as quACK messages of every width: parsing never
//! panics, and whatever parses re-encodes to the same bytes (the format is
//! canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use quack::{F16, F32, F64, Field, Message};

fn check<F: Field>(data: &[u8]) {
    if let Ok(message) = Message::<F>::parse(data) {
        assert_eq!(message.to_bytes(), data);
    }
}

fuzz_target!(|data: &[u8]| {
    check::<F16>(data);
    check::<F32>(data);
    check::<F64>(data);
});
