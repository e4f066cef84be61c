//! Feeds an arbitrary quACK (parsed from the input) and arbitrary candidates
//! to the decoder and the send log: errors are fine, panics are not, and a
//! successful decode names only candidates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quack::{Classification, Decoder, F32, Missing, Quack, SendLog};

fuzz_target!(|data: &[u8]| {
    // First byte: how many candidate bytes follow the quACK's end.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = (split as usize).min(rest.len());
    let (ids, wire) = rest.split_at(split);
    let Ok(quack) = Quack::<F32>::parse(wire) else {
        return;
    };
    let candidates: Vec<u32> = ids
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut missing = Missing::default();
    if Decoder::new().decode(&quack, &candidates, &mut missing).is_ok() {
        assert!(missing.indices.iter().all(|&i| i < candidates.len()));
        assert_eq!(missing.indices.len(), quack.count() as usize);
    }
    let mut log = SendLog::<F32>::new(quack.threshold()).expect("parsed thresholds are valid");
    candidates.iter().for_each(|&id| {
        log.push(id);
    });
    let mut out = Classification::default();
    let _ = log.apply(&quack, &mut out);
});
