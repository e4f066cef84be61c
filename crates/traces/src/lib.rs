//! The capacity traces bundled with pepkit, embedded in the binary.
//!
//! This crate owns the repository's `traces/` folder: the eight cellular
//! traces of the Sprout paper (Winstein, Sivaraman, Balakrishnan, NSDI 2013)
//! in mahimahi format, one line per opportunity to deliver a 1500-byte
//! packet, as shipped by mahimahi (`traces/cellular/README.md`). They are
//! stored gzip-compressed (`*.gz`) and embedded with `include_bytes!`, so
//! tests and tools can use them without reading any file at run time.
//!
//! A trace is named by its path under `traces/` without the `.gz`, e.g.
//! `"cellular/TMobile-LTE-short.up"`; [`names`] lists them, [`text`] and
//! [`bytes`] decompress one, [`compressed`] gives the embedded gzip bytes.
//! Parsing is `netsim::CapacityTrace`'s business (`CapacityTrace::parse` on
//! [`text`], or `CapacityTrace::from_bytes` on either form).
//!
//! Licence: the crate's code is MIT OR Apache-2.0 like the rest of pepkit,
//! but the traces are mahimahi's data, GPL-3.0-or-later, copyright 2013 The
//! Mahimahi Authors; anything that embeds them (this crate, and binaries
//! linking it) distributes them under that licence, with the notice in
//! [`COPYRIGHT`] (`traces/cellular/COPYRIGHT`).
//!
//! ```
//! let up = traces::text("cellular/TMobile-LTE-short.up").unwrap();
//! assert_eq!(up.lines().count(), 155_381);
//! assert!(traces::names().any(|name| name == "cellular/ATT-LTE-driving.down"));
//! ```

use std::io::Read;

macro_rules! bundled {
    ($($file:literal),* $(,)?) => {
        /// (name, gzip bytes) of every bundled trace, sorted by name.
        const BUNDLED: &[(&str, &[u8])] = &[$((
            concat!("cellular/", $file),
            include_bytes!(concat!("../../../traces/cellular/", $file, ".gz")),
        )),*];
    };
}

bundled!(
    "ATT-LTE-driving.down",
    "ATT-LTE-driving.up",
    "TMobile-LTE-short.down",
    "TMobile-LTE-short.up",
    "TMobile-UMTS-driving.down",
    "TMobile-UMTS-driving.up",
    "Verizon-EVDO-driving.down",
    "Verizon-EVDO-driving.up",
);

/// The copyright and licence notice of the cellular traces (GPL-3+), as
/// distributed with them (`traces/cellular/COPYRIGHT`).
pub const COPYRIGHT: &str = include_str!("../../../traces/cellular/COPYRIGHT");

/// A name that is not one of the bundled traces.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no bundled trace named {name:?}; the bundled traces are: {}", names().collect::<Vec<_>>().join(", "))]
pub struct UnknownTrace {
    /// The name asked for.
    pub name: String,
}

/// The names of the bundled traces, sorted (e.g.
/// `"cellular/TMobile-LTE-short.up"`).
pub fn names() -> impl ExactSizeIterator<Item = &'static str> + Clone {
    BUNDLED.iter().map(|&(name, _)| name)
}

/// The embedded gzip-compressed bytes of the trace `name`, as in
/// `traces/<name>.gz`.
pub fn compressed(name: &str) -> Result<&'static [u8], UnknownTrace> {
    BUNDLED
        .iter()
        .find(|&&(known, _)| known == name)
        .map(|&(_, gz)| gz)
        .ok_or_else(|| UnknownTrace { name: name.into() })
}

/// The decompressed contents of the trace `name`.
pub fn bytes(name: &str) -> Result<Vec<u8>, UnknownTrace> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(compressed(name)?)
        .read_to_end(&mut out)
        // The embedded files are fixed at build time and every one is
        // decompressed by this crate's tests.
        .expect("bundled traces are valid gzip");
    Ok(out)
}

/// The decompressed text of the trace `name` (ASCII: one integer a line).
pub fn text(name: &str) -> Result<String, UnknownTrace> {
    Ok(String::from_utf8(bytes(name)?).expect("bundled traces are ASCII"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_and_unique() {
        let names: Vec<_> = names().collect();
        assert_eq!(names.len(), 8);
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    }

    #[test]
    fn every_trace_decompresses_to_non_decreasing_milliseconds() {
        for name in names() {
            let text = text(name).unwrap();
            let mut previous = 0u64;
            let mut lines = 0;
            for line in text.lines() {
                let ms: u64 = line.parse().unwrap_or_else(|_| panic!("{name}: {line:?}"));
                assert!(ms >= previous, "{name}: {ms} after {previous}");
                previous = ms;
                lines += 1;
            }
            assert!(lines > 40_000, "{name}: {lines} lines");
            assert!(previous > 100_000, "{name}: lasts {previous} ms");
        }
    }

    #[test]
    fn known_sizes() {
        // Line counts of the mahimahi files (`wc -l`).
        assert_eq!(
            text("cellular/TMobile-LTE-short.up")
                .unwrap()
                .lines()
                .count(),
            155_381
        );
        assert_eq!(
            text("cellular/Verizon-EVDO-driving.down")
                .unwrap()
                .lines()
                .count(),
            46_065
        );
    }

    #[test]
    fn unknown_names_list_the_bundled_ones() {
        let err = bytes("cellular/TMobile-LTE-short").unwrap_err();
        assert_eq!(err.name, "cellular/TMobile-LTE-short");
        let message = err.to_string();
        assert!(
            message.contains("\"cellular/TMobile-LTE-short\""),
            "{message}"
        );
        for name in names() {
            assert!(message.contains(name), "{message}");
        }
        assert!(text("TMobile-LTE-short.up").is_err());
        assert!(compressed("cellular/TMobile-LTE-short.up.gz").is_err());
    }

    #[test]
    fn compressed_is_gzip_and_the_notice_is_there() {
        let gz = compressed("cellular/ATT-LTE-driving.up").unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        assert!(COPYRIGHT.contains("GPL-3+"));
    }
}
