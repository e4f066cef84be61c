//! Feeds arbitrary bytes to the capsule reader in two pieces: nothing
//! panics, and every capsule it returns re-encodes and parses back to
//! itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tunnel::wire::capsule::CapsuleReader;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut reader = CapsuleReader::default();
    let mut capsules = Vec::new();
    if reader.push(&data[..split], &mut capsules).is_ok() {
        let _ = reader.push(&data[split..], &mut capsules);
    }
    for capsule in capsules {
        let mut bytes = Vec::new();
        capsule.encode(&mut bytes);
        let mut again = Vec::new();
        CapsuleReader::default()
            .push(&bytes, &mut again)
            .expect("an encoded capsule parses");
        assert_eq!(again, vec![capsule]);
    }
});
