// The pemi_wire fuzz target's checks, shared by the target
// (fuzz/fuzz_targets/pemi_wire.rs) and the test that feeds the committed
// seeds and reproducers through them (crates/pemi/tests/fuzz_seeds.rs);
// both `include!` this file.

/// Parses `data` as the cleartext of a QUIC datagram, as PEMI reads every
/// UDP payload it sees: parsing never panics, and what parses is
/// consistent (a long header's version is v1 or v2, connection IDs are at
/// most 20 bytes, at most `MAX_COALESCED` packets, at least one); every
/// varint read at every offset either fails or reads 1, 2, 4 or 8 bytes
/// within the input. Returns whether `data` parsed.
pub fn check_pemi_wire(data: &[u8]) -> bool {
    use pemi::wire::{self, MAX_CID_LEN, MAX_COALESCED, VERSION_1, VERSION_2};
    let parsed = wire::summarize(data);
    if let Ok(summary) = &parsed {
        assert!(summary.packets >= 1);
        assert!(usize::from(summary.packets) <= MAX_COALESCED);
        assert!(usize::from(summary.dcid_len) <= MAX_CID_LEN);
        assert_eq!(summary.long != 0, summary.version.is_some());
        if let Some(version) = summary.version {
            assert!(version == VERSION_1 || version == VERSION_2);
        }
        // A short header first is a 1-RTT packet alone.
        if data[0] & 0x80 == 0 {
            assert!(summary.is_short());
        }
    }
    for at in 0..data.len().min(64) {
        if let Ok((_, next)) = wire::varint(data, at) {
            assert!(matches!(next - at, 1 | 2 | 4 | 8));
            assert!(next <= data.len());
        }
    }
    parsed.is_ok()
}
