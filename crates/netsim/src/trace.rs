//! Capacity traces in mahimahi format.
//!
//! A trace is a text file with one integer per line: a time in milliseconds
//! from the start of the trace at which the link may deliver one packet of up
//! to [`CapacityTrace::OPPORTUNITY_BYTES`] bytes. Several lines with the same
//! time are several opportunities in that millisecond. The trace repeats with
//! a period equal to its last timestamp: opportunity `k` happens at
//! `(k / n) · period + t[k mod n]` for a trace of `n` lines.
//!
//! Trace files may be gzip-compressed ([`CapacityTrace::from_file`] and
//! [`CapacityTrace::from_bytes`] recognise them), as the traces bundled in the
//! repository's `traces/` folder are.

use crate::Time;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// A parsed capacity trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityTrace {
    /// Opportunity times within one period, in nanoseconds, non-decreasing.
    times_ns: Vec<u64>,
    /// The period: the last timestamp.
    period_ns: u64,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("cannot read trace {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The trace has no timestamps.
    #[error("trace has no timestamps")]
    Empty,
    /// A line is not a non-negative integer number of milliseconds.
    #[error(
        "trace line {line}: expected a non-negative integer (milliseconds), {}",
        match excerpt {
            Some(excerpt) => format!("got {excerpt:?}"),
            None => "and no line before it is one: this is not a mahimahi trace \
                     (its content is not shown)".to_string(),
        }
    )]
    InvalidLine {
        /// 1-based line number.
        line: usize,
        /// The start of the offending line, only when the lines before it
        /// are timestamps (the text looks like a trace): at most
        /// [`CapacityTrace::EXCERPT_CHARS`] characters, anything but
        /// printable ASCII replaced by `?`. An error about a file that is
        /// not a trace quotes none of it.
        excerpt: Option<String>,
    },
    /// A timestamp is smaller than the one before it.
    #[error(
        "trace line {line}: timestamp {value} ms is smaller than the previous one ({previous} ms)"
    )]
    NotMonotonic {
        /// 1-based line number.
        line: usize,
        /// The timestamp on that line.
        value: u64,
        /// The timestamp before it.
        previous: u64,
    },
    /// The last timestamp is 0, so the trace would repeat with period zero.
    #[error("trace period (its last timestamp) is 0 ms; it must be positive")]
    ZeroPeriod,
    /// The trace is larger than [`CapacityTrace::MAX_BYTES`] (a file, or
    /// a compressed one once decompressed).
    #[error(
        "trace{} is larger than {} MiB; the largest mahimahi traces are a few MB",
        path.as_ref().map(|p| format!(" {p}")).unwrap_or_default(),
        CapacityTrace::MAX_BYTES >> 20
    )]
    TooLarge {
        /// The file, if the trace came from one.
        path: Option<String>,
    },
    /// A gzip-compressed trace could not be decompressed.
    #[error(
        "cannot decompress gzip trace{}: {source}",
        path.as_ref().map(|p| format!(" {p}")).unwrap_or_default()
    )]
    Gzip {
        /// The file, if the trace came from one.
        path: Option<String>,
        /// The decompressor's error.
        source: std::io::Error,
    },
}

/// The first bytes of a gzip stream (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Decompresses a gzip stream (several members are read one after the other,
/// as `gzip -d` does).
fn gunzip(bytes: &[u8], path: Option<&Path>) -> Result<Vec<u8>, TraceError> {
    let error = |source| TraceError::Gzip {
        path: path.map(|p| p.display().to_string()),
        source,
    };
    if !bytes.starts_with(&GZIP_MAGIC) {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not gzip data (it does not start with the gzip magic bytes 1f 8b)",
        )));
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(CapacityTrace::MAX_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(error)?;
    if out.len() as u64 > CapacityTrace::MAX_BYTES {
        return Err(TraceError::TooLarge {
            path: path.map(|p| p.display().to_string()),
        });
    }
    Ok(out)
}

/// The start of a bad line as an error may quote it: at most
/// [`CapacityTrace::EXCERPT_CHARS`] characters, each one that is not
/// printable ASCII replaced by `?`.
fn excerpt(line: &str) -> String {
    line.chars()
        .take(CapacityTrace::EXCERPT_CHARS)
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Parses decompressed trace bytes; bytes that are not UTF-8 end up in an
/// [`TraceError::InvalidLine`] like any other non-number.
fn parse_bytes(bytes: &[u8]) -> Result<CapacityTrace, TraceError> {
    CapacityTrace::parse(&String::from_utf8_lossy(bytes))
}

impl CapacityTrace {
    /// The largest trace read, bytes of text (compressed or not): 64 MiB,
    /// some 8 million opportunities, 25 times the largest bundled trace.
    pub const MAX_BYTES: u64 = 64 << 20;

    /// The most characters of a bad line an error quotes.
    pub const EXCERPT_CHARS: usize = 16;

    /// Bytes one delivery opportunity can carry (mahimahi's 1500-byte MTU).
    pub const OPPORTUNITY_BYTES: u32 = 1500;

    /// Parses a trace from text. Blank lines and surrounding whitespace are
    /// ignored; anything else that is not a non-negative integer is an error,
    /// which quotes the line's start only when the lines before it are
    /// timestamps (a text that is not a trace is never echoed).
    pub fn parse(text: &str) -> Result<CapacityTrace, TraceError> {
        let mut times_ms: Vec<u64> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let value: u64 = line.parse().map_err(|_| TraceError::InvalidLine {
                line: index + 1,
                excerpt: (!times_ms.is_empty()).then(|| excerpt(line)),
            })?;
            if let Some(&previous) = times_ms.last()
                && value < previous
            {
                return Err(TraceError::NotMonotonic {
                    line: index + 1,
                    value,
                    previous,
                });
            }
            times_ms.push(value);
        }
        CapacityTrace::from_millis(times_ms)
    }

    /// Parses a trace from the contents of a trace file: text as for
    /// [`parse`](Self::parse), or gzip-compressed text (recognised by the
    /// gzip magic bytes `1f 8b`, which no text trace starts with). Bytes that
    /// are not UTF-8 make an [`TraceError::InvalidLine`].
    pub fn from_bytes(bytes: &[u8]) -> Result<CapacityTrace, TraceError> {
        if bytes.len() as u64 > CapacityTrace::MAX_BYTES {
            return Err(TraceError::TooLarge { path: None });
        }
        if bytes.starts_with(&GZIP_MAGIC) {
            parse_bytes(&gunzip(bytes, None)?)
        } else {
            parse_bytes(bytes)
        }
    }

    /// Reads and parses a trace file. A file whose name ends in `.gz` or
    /// whose contents start with the gzip magic bytes is decompressed first
    /// (a corrupt one gives [`TraceError::Gzip`]); any other file must be
    /// UTF-8 text.
    pub fn from_file(path: impl AsRef<Path>) -> Result<CapacityTrace, TraceError> {
        let path = path.as_ref();
        let io_error = |source| TraceError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io_error)?;
        let mut bytes = Vec::new();
        file.take(CapacityTrace::MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
        if bytes.len() as u64 > CapacityTrace::MAX_BYTES {
            return Err(TraceError::TooLarge {
                path: Some(path.display().to_string()),
            });
        }
        let gzip_name = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
        if gzip_name || bytes.starts_with(&GZIP_MAGIC) {
            return parse_bytes(&gunzip(&bytes, Some(path))?);
        }
        // The same error `std::fs::read_to_string` gives.
        let text = String::from_utf8(bytes).map_err(|_| {
            io_error(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ))
        })?;
        CapacityTrace::parse(&text)
    }

    /// A trace from opportunity times in milliseconds (non-decreasing, last
    /// one positive).
    pub fn from_millis(times_ms: Vec<u64>) -> Result<CapacityTrace, TraceError> {
        let Some(&last) = times_ms.last() else {
            return Err(TraceError::Empty);
        };
        if let Some(i) = times_ms.windows(2).position(|w| w[1] < w[0]) {
            return Err(TraceError::NotMonotonic {
                line: i + 2,
                value: times_ms[i + 1],
                previous: times_ms[i],
            });
        }
        if last == 0 {
            return Err(TraceError::ZeroPeriod);
        }
        let times_ns = times_ms
            .iter()
            .map(|&ms| ms.saturating_mul(1_000_000))
            .collect();
        Ok(CapacityTrace {
            times_ns,
            period_ns: last.saturating_mul(1_000_000),
        })
    }

    /// Number of delivery opportunities in one period.
    pub fn opportunities_per_period(&self) -> usize {
        self.times_ns.len()
    }

    /// The period after which the trace repeats.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// The mean capacity over one period, in bits per second.
    pub fn mean_rate(&self) -> crate::Rate {
        let bytes = self.times_ns.len() as u64 * u64::from(Self::OPPORTUNITY_BYTES);
        crate::Rate::from_bytes_over(bytes, self.period())
    }

    /// The time of opportunity number `k` (counting from 0 over all
    /// repetitions).
    pub fn opportunity_time(&self, k: u64) -> Time {
        let n = self.times_ns.len() as u64;
        let cycle = k / n;
        let offset = self.times_ns[(k % n) as usize];
        Time::from_nanos(cycle.saturating_mul(self.period_ns).saturating_add(offset))
    }

    /// The index of the first opportunity at or after `now`.
    pub fn first_opportunity_at_or_after(&self, now: Time) -> u64 {
        let now = now.as_nanos();
        let n = self.times_ns.len() as u64;
        let cycle = now / self.period_ns;
        // Opportunities of the previous cycle can equal `now` (its last one
        // sits exactly on the cycle boundary); the next cycle always has one.
        for c in cycle.saturating_sub(1)..=cycle.saturating_add(1) {
            let base = c.saturating_mul(self.period_ns);
            let i = self
                .times_ns
                .partition_point(|&t| base.saturating_add(t) < now);
            if i < self.times_ns.len() {
                return c.saturating_mul(n).saturating_add(i as u64);
            }
        }
        cycle.saturating_add(2).saturating_mul(n)
    }

    /// The index of the first opportunity strictly after `now`: the first
    /// one a packet arriving at `now` can use (mahimahi serves an
    /// opportunity before it queues a packet that arrives in the same
    /// millisecond).
    pub fn first_opportunity_after(&self, now: Time) -> u64 {
        self.first_opportunity_at_or_after(Time::from_nanos(now.as_nanos().saturating_add(1)))
    }

    /// Number of opportunities with a time in `[from, to)`.
    pub fn opportunities_between(&self, from: Time, to: Time) -> u64 {
        if to <= from {
            return 0;
        }
        self.first_opportunity_at_or_after(to) - self.first_opportunity_at_or_after(from)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn too_large_traces_are_refused_before_they_are_parsed() {
        // A gzip bomb: 65 MiB of zeros compress to about 65 kB.
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![b'0'; 1 << 20];
        for _ in 0..65 {
            gz.write_all(&zeros).unwrap();
        }
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 1 << 20);
        let error = CapacityTrace::from_bytes(&bomb).unwrap_err();
        assert!(matches!(error, TraceError::TooLarge { .. }), "{error}");
        assert!(error.to_string().contains("64 MiB"), "{error}");

        let dir = std::env::temp_dir().join(format!("pepkit-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.up");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(CapacityTrace::MAX_BYTES + 1).unwrap();
        let error = CapacityTrace::from_file(&big).unwrap_err();
        assert!(matches!(error, TraceError::TooLarge { .. }), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn repeats_with_period_of_last_timestamp() {
        let t = CapacityTrace::parse("0\n0\n5\n10\n").unwrap();
        let times: Vec<u64> = (0..8)
            .map(|k| t.opportunity_time(k).as_nanos() / 1_000_000)
            .collect();
        assert_eq!(times, [0, 0, 5, 10, 10, 10, 15, 20]);
        assert_eq!(t.first_opportunity_at_or_after(Time::from_millis(10)), 3);
        assert_eq!(t.first_opportunity_at_or_after(Time::from_millis(11)), 6);
        assert_eq!(t.first_opportunity_at_or_after(Time::ZERO), 0);
        assert_eq!(t.first_opportunity_after(Time::ZERO), 2);
        assert_eq!(t.first_opportunity_after(Time::from_millis(10)), 6);
        assert_eq!(t.first_opportunity_after(Time::from_nanos(9_999_999)), 3);
        assert_eq!(
            t.opportunities_between(Time::ZERO, Time::from_millis(20)),
            7
        );
    }

    #[test]
    fn errors_are_clear() {
        assert!(matches!(CapacityTrace::parse(""), Err(TraceError::Empty)));
        assert!(matches!(
            CapacityTrace::parse("1\nx2\n"),
            Err(TraceError::InvalidLine { line: 2, .. })
        ));
        assert!(matches!(
            CapacityTrace::parse("1\n-2\n"),
            Err(TraceError::InvalidLine { line: 2, .. })
        ));
        assert!(matches!(
            CapacityTrace::parse("5\n\n3\n"),
            Err(TraceError::NotMonotonic { line: 3, .. })
        ));
        assert!(matches!(
            CapacityTrace::parse("0\n0\n"),
            Err(TraceError::ZeroPeriod)
        ));
        let err = CapacityTrace::from_file("/nonexistent/trace").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/trace"));
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    /// A file in a fresh temporary directory, removed on drop.
    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn new(name: &str, contents: &[u8]) -> TempFile {
            use std::sync::atomic::{AtomicU32, Ordering};
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "netsim-trace-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            std::fs::write(&path, contents).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
        }
    }

    #[test]
    fn gzip_traces_read_like_plain_ones() {
        let text = "0\n0\n5\n10\n";
        let plain = CapacityTrace::parse(text).unwrap();
        let gz = gzip(text.as_bytes());
        assert_eq!(CapacityTrace::from_bytes(&gz).unwrap(), plain);
        assert_eq!(CapacityTrace::from_bytes(text.as_bytes()).unwrap(), plain);
        // By name, and by contents when the name does not say.
        let named = TempFile::new("t.up.gz", &gz);
        assert_eq!(CapacityTrace::from_file(&named.0).unwrap(), plain);
        let unnamed = TempFile::new("t.up", &gz);
        assert_eq!(CapacityTrace::from_file(&unnamed.0).unwrap(), plain);
        // Errors inside a compressed trace are the parser's.
        assert!(matches!(
            CapacityTrace::from_bytes(&gzip(b"5\n\n3\n")),
            Err(TraceError::NotMonotonic { line: 3, .. })
        ));
        assert!(matches!(
            CapacityTrace::from_bytes(b"1\n\xff\n"),
            Err(TraceError::InvalidLine { line: 2, .. })
        ));
    }

    #[test]
    fn corrupt_gzip_is_a_clear_error() {
        let mut gz = gzip(b"1\n2\n3\n");
        let truncated = &gz[..gz.len() - 6];
        assert!(matches!(
            CapacityTrace::from_bytes(truncated),
            Err(TraceError::Gzip { path: None, .. })
        ));
        let last = gz.len() - 1;
        gz[last] ^= 0xff; // the length in the trailer
        let file = TempFile::new("bad.up.gz", &gz);
        let err = CapacityTrace::from_file(&file.0).unwrap_err();
        assert!(
            matches!(err, TraceError::Gzip { path: Some(_), .. }),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with("cannot decompress gzip trace "),
            "{message}"
        );
        assert!(message.contains("bad.up.gz"), "{message}");
        // A `.gz` name with text inside is not gzip either.
        let file = TempFile::new("text.up.gz", b"1\n2\n");
        let err = CapacityTrace::from_file(&file.0).unwrap_err();
        assert!(matches!(err, TraceError::Gzip { .. }), "{err:?}");
        assert!(err.to_string().contains("not gzip data"), "{err}");
    }

    #[test]
    fn plain_files_keep_their_errors() {
        let file = TempFile::new("t.up", b"1\nx2\n");
        assert!(matches!(
            CapacityTrace::from_file(&file.0),
            Err(TraceError::InvalidLine { line: 2, .. })
        ));
        // Not UTF-8: the error `read_to_string` gives, with the path.
        let file = TempFile::new("t.down", b"1\n\xff\n");
        let err = CapacityTrace::from_file(&file.0).unwrap_err();
        let TraceError::Io { path, source } = &err else {
            panic!("{err:?}")
        };
        assert!(path.ends_with("t.down"));
        assert_eq!(source.kind(), std::io::ErrorKind::InvalidData);
        let expected = std::fs::read_to_string(&file.0).unwrap_err();
        assert_eq!(source.to_string(), expected.to_string());
    }
}
