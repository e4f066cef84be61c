//! The fuzz targets' seed corpora and dictionaries (`fuzz/seeds/TARGET/`,
//! `fuzz/dict/TARGET.dict`), generated from the real encoders so that
//! libFuzzer starts from valid messages: without them it never got past
//! the 128-byte discovery marker.
//!
//! This test checks that the committed files are what the encoders write
//! today; after a change of a wire format, regenerate them with
//!
//! ```sh
//! PEPKIT_WRITE_FUZZ_SEEDS=1 cargo test -p pepkit-sidekick --test fuzz_seeds
//! ```

use quack::{F16, F32, F64, Field, Message, PowerSums, Quack};
use sidekick::wire::{
    Config, Control, Discovery, Interval, MARKER_LEN, REPLY_MARKER, REQUEST_MARKER, VERSION,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File name → contents, for one target (or its dictionary).
type Files = BTreeMap<String, Vec<u8>>;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// A power-sum quACK of `ids`, with `missing` of them left out.
fn quack_of<F: Field>(threshold: usize, ids: &[F::Id], missing: &[usize]) -> Quack<F> {
    let mut sums = PowerSums::<F>::new(threshold).expect("a valid threshold");
    for (i, &id) in ids.iter().enumerate() {
        if !missing.contains(&i) {
            sums.insert(id);
        }
    }
    sums.quack()
}

fn ids<F: Field>(n: u64) -> Vec<F::Id> {
    (1..=n)
        .map(|i| F::truncate(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7))
        .collect()
}

fn quack_wire_seeds() -> Files {
    fn of_width<F: Field>(files: &mut Files, name: &str) {
        let ids = ids::<F>(12);
        let mut add = |label: &str, message: Message<F>| {
            files.insert(format!("{name}-{label}"), message.to_bytes());
        };
        add(
            "power-sum-t10",
            Message::PowerSum(quack_of(10, &ids, &[3, 7])),
        );
        add("power-sum-t1", Message::PowerSum(quack_of(1, &ids, &[])));
        let mut truncated = quack_of(8, &ids, &[0]);
        truncated.truncate(2);
        add("power-sum-truncated", Message::PowerSum(truncated));
        add("power-sum-empty", Message::PowerSum(quack_of(4, &[], &[])));
        add("echo", Message::Echo(ids[0]));
        add("window", Message::Window(ids[..3].to_vec()));
        add(
            "sorted-hash",
            Message::SortedHash {
                count: 11,
                digest: [0x5a; 32],
            },
        );
    }
    let mut files = Files::new();
    of_width::<F16>(&mut files, "w16");
    of_width::<F32>(&mut files, "w32");
    of_width::<F64>(&mut files, "w64");
    files
}

/// The quack_decode target's input: a byte giving the length of the
/// candidates, the candidates (4 bytes each), then a 32-bit quACK.
fn quack_decode_seeds() -> Files {
    let mut files = Files::new();
    for (label, n, threshold, missing) in [
        ("none-missing", 8u64, 4usize, &[][..]),
        ("two-missing", 12, 4, &[2, 9][..]),
        ("at-threshold", 10, 3, &[0, 4, 8][..]),
        ("over-threshold", 10, 2, &[1, 2, 3][..]),
        ("many", 60, 10, &[5, 17, 33, 59][..]),
    ] {
        let ids = ids::<F32>(n);
        let quack = quack_of::<F32>(threshold, &ids, missing);
        let mut input = vec![(n * 4) as u8];
        ids.iter()
            .for_each(|id| input.extend_from_slice(&id.to_be_bytes()));
        quack.encode(&mut input);
        files.insert(label.to_string(), input);
    }
    files
}

fn sidekick_wire_seeds() -> Files {
    let mut files = Files::new();
    let mut add = |label: &str, bytes: Vec<u8>| {
        files.insert(label.to_string(), bytes);
    };
    add("request", Discovery::Request { nonce: 42 }.to_bytes());
    for (label, proxy) in [
        ("reply-v4", "10.0.0.254:1234"),
        ("reply-v6", "[fd00::fe]:1234"),
    ] {
        let reply = Discovery::Reply {
            nonce: 42,
            session: 0x0123_4567_89ab_cdef,
            proxy: proxy.parse().expect("an address"),
        };
        add(label, reply.to_bytes());
    }
    for (label, interval, id_bytes) in [
        ("configure-millis", Interval::Millis(30), 4u8),
        ("configure-packets", Interval::Packets(2), 2),
        ("configure-w64", Interval::Packets(1), 8),
    ] {
        let config = Config {
            interval,
            threshold: 10,
            id_bytes,
            id_offset: 21,
            quota: 1024,
        };
        add(label, Control::Configure { session: 7, config }.to_bytes());
    }
    add(
        "reset",
        Control::Reset {
            session: 7,
            epoch: 3,
        }
        .to_bytes(),
    );
    let quack = Message::PowerSum(quack_of::<F32>(10, &ids::<F32>(30), &[4])).to_bytes();
    add(
        "quack",
        Control::Quack {
            next_session: 8,
            quota_left: 1000,
            epoch: 3,
            quack,
        }
        .to_bytes(),
    );
    files
}

/// A libFuzzer dictionary entry: `name="\xNN..."`.
fn entry(name: &str, bytes: &[u8]) -> String {
    let escaped: String = bytes.iter().map(|b| format!("\\x{b:02x}")).collect();
    format!("{name}=\"{escaped}\"\n")
}

fn dictionaries() -> Files {
    let mut files = Files::new();
    // libFuzzer takes entries of at most 64 bytes: each marker in halves,
    // and its start alone.
    let mut sidekick = String::from(
        "# Sidekick wire constants (generated by crates/sidekick/tests/fuzz_seeds.rs)\n",
    );
    for (name, marker) in [("request", REQUEST_MARKER), ("reply", REPLY_MARKER)] {
        let half = MARKER_LEN / 2;
        sidekick += &entry(&format!("{name}_marker_head"), &marker[..half]);
        sidekick += &entry(&format!("{name}_marker_tail"), &marker[half..]);
        sidekick += &entry(&format!("{name}_marker_start"), &marker[..16]);
        let mut tail_and_version = marker[MARKER_LEN - 8..].to_vec();
        tail_and_version.push(VERSION);
        sidekick += &entry(&format!("{name}_marker_end_version"), &tail_and_version);
    }
    for kind in 1..=3u8 {
        sidekick += &entry(&format!("control_kind_{kind}"), &[VERSION << 4 | kind]);
    }
    sidekick += &entry("family_v4", &[4]);
    sidekick += &entry("family_v6", &[6]);
    sidekick += &entry("padding", &[0; 27]);
    files.insert("sidekick_wire.dict".into(), sidekick.into_bytes());
    let mut quack =
        String::from("# quACK wire constants (generated by crates/sidekick/tests/fuzz_seeds.rs)\n");
    for kind in 0..=3u8 {
        quack += &entry(&format!("kind_{kind}"), &[quack::VERSION << 4 | kind]);
    }
    for width in [2u8, 4, 8] {
        quack += &entry(&format!("width_{width}"), &[width]);
        quack += &entry(&format!("width_{width}_last"), &[0x80 | width]);
    }
    // The fields' primes: sums must be below them.
    quack += &entry("p32", &(F32::MODULUS as u32).to_be_bytes());
    quack += &entry("p16", &(F16::MODULUS as u16).to_be_bytes());
    quack += &entry("p64", &F64::MODULUS.to_be_bytes());
    files.insert("quack_wire.dict".into(), quack.clone().into_bytes());
    files.insert("quack_decode.dict".into(), quack.into_bytes());
    files
}

/// Writes `files` into `dir`, or checks that `dir` holds exactly them.
fn write_or_check(dir: &Path, files: &Files, write: bool, stale: &mut Vec<String>) {
    if write {
        if dir.exists() && dir.file_name().is_some_and(|n| n != "dict") {
            std::fs::remove_dir_all(dir).expect("remove old seeds");
        }
        std::fs::create_dir_all(dir).expect("create the seed directory");
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).expect("write a seed");
        }
        return;
    }
    for (name, bytes) in files {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_ref() != Some(bytes) {
            stale.push(path.display().to_string());
        }
    }
}

#[test]
fn the_committed_seeds_and_dictionaries_are_current() {
    let write = std::env::var_os("PEPKIT_WRITE_FUZZ_SEEDS").is_some();
    let fuzz = fuzz_dir();
    let mut stale = Vec::new();
    for (target, files) in [
        ("quack_wire", quack_wire_seeds()),
        ("quack_decode", quack_decode_seeds()),
        ("sidekick_wire", sidekick_wire_seeds()),
    ] {
        write_or_check(&fuzz.join("seeds").join(target), &files, write, &mut stale);
    }
    write_or_check(&fuzz.join("dict"), &dictionaries(), write, &mut stale);
    assert!(
        stale.is_empty(),
        "stale or missing fuzz seeds, regenerate with \
         PEPKIT_WRITE_FUZZ_SEEDS=1 cargo test -p pepkit-sidekick --test fuzz_seeds: {stale:?}"
    );
}

/// Every seed is a valid input: it parses (and for quack_decode, the quACK
/// parses), so the fuzzers start inside the messages.
#[test]
fn every_seed_parses() {
    for bytes in sidekick_wire_seeds().values() {
        assert!(Discovery::parse(bytes).is_ok() || Control::parse(bytes).is_ok());
    }
    for (name, bytes) in quack_wire_seeds() {
        let ok = match &name[..3] {
            "w16" => Message::<F16>::parse(&bytes).is_ok(),
            "w32" => Message::<F32>::parse(&bytes).is_ok(),
            _ => Message::<F64>::parse(&bytes).is_ok(),
        };
        assert!(ok, "{name}");
    }
    for (name, bytes) in quack_decode_seeds() {
        let split = usize::from(bytes[0]);
        assert!(Quack::<F32>::parse(&bytes[1 + split..]).is_ok(), "{name}");
    }
}
