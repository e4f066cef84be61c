//! Parses arbitrary bytes as the cleartext of a QUIC datagram, as PEMI
//! reads every UDP payload it sees, with the checks of
//! `fuzz/checks/pemi_wire.rs` (which `cargo test -p pepkit-pemi --test
//! fuzz_seeds` also runs on the committed seeds and reproducers).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../checks/pemi_wire.rs");

fuzz_target!(|data: &[u8]| {
    check_pemi_wire(data);
});
