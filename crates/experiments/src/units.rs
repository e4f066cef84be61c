//! Quantities as scenario files write them: `"25ms"`, `"10Mbit/s"`, `"10MB"`.
//!
//! Units are decimal (k = 10³, M = 10⁶) except the binary byte units
//! `KiB`, `MiB`, `GiB`, which are written out so nobody confuses them (the
//! Sidekick scripts' `10M` meant MiB; see docs/experiments.md).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A span of time, written `"25ms"`, `"1.5s"`, `"250us"` or `"100ns"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span(pub Duration);

/// A bit rate, written `"10Mbit/s"`, `"3000kbit/s"`, `"1Gbit/s"` or `"9600bit/s"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BitRate(pub netsim::Rate);

/// An amount of data, written as a number of bytes or `"10MB"`, `"64kB"`,
/// `"1200B"`, `"2MiB"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub u64);

/// Splits `"1.5 ms"` into `(1.5, "ms")`.
fn split(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let number: String = text[..end].chars().filter(|&c| c != '_').collect();
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((value, text[end..].trim()))
}

impl Span {
    /// Parses a span; `None` if the text is not a number and a time unit.
    pub fn parse(text: &str) -> Option<Span> {
        let (value, unit) = split(text)?;
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "min" => 60e9,
            _ => return None,
        };
        let nanos = (value * nanos_per_unit).round();
        (nanos < u64::MAX as f64).then(|| Span(Duration::from_nanos(nanos as u64)))
    }
}

impl BitRate {
    /// Parses a rate; `None` if the text is not a number and a rate unit.
    pub fn parse(text: &str) -> Option<BitRate> {
        let (value, unit) = split(text)?;
        let bits_per_unit = match unit {
            "bit/s" | "bps" => 1.0,
            "kbit/s" | "kbps" => 1e3,
            "Mbit/s" | "Mbps" => 1e6,
            "Gbit/s" | "Gbps" => 1e9,
            _ => return None,
        };
        let bps = (value * bits_per_unit).round();
        (bps < u64::MAX as f64).then(|| BitRate(netsim::Rate::from_bps(bps as u64)))
    }
}

impl Bytes {
    /// Parses an amount of data; `None` if the text is not a number and a
    /// byte unit.
    pub fn parse(text: &str) -> Option<Bytes> {
        let (value, unit) = split(text)?;
        let bytes_per_unit = match unit {
            "" | "B" => 1.0,
            "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        let bytes = (value * bytes_per_unit).round();
        (bytes < u64::MAX as f64).then_some(Bytes(bytes as u64))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        match nanos {
            n if n % 1_000_000_000 == 0 => write!(f, "{}s", n / 1_000_000_000),
            n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => write!(f, "{}us", n / 1_000),
            n => write!(f, "{n}ns"),
        }
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bps = self.0.bits_per_sec();
        match bps {
            b if b != 0 && b % 1_000_000_000 == 0 => write!(f, "{}Gbit/s", b / 1_000_000_000),
            b if b != 0 && b % 1_000_000 == 0 => write!(f, "{}Mbit/s", b / 1_000_000),
            b if b != 0 && b % 1_000 == 0 => write!(f, "{}kbit/s", b / 1_000),
            b => write!(f, "{b}bit/s"),
        }
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            b if b != 0 && b % 1_000_000 == 0 => write!(f, "{}MB", b / 1_000_000),
            b if b != 0 && b % 1_000 == 0 => write!(f, "{}kB", b / 1_000),
            b => write!(f, "{b}B"),
        }
    }
}

/// Implements serde for a quantity: a string in, the canonical string out.
macro_rules! quantity_serde {
    ($type:ty, $expecting:literal) => {
        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $type;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$type, E> {
                        <$type>::parse(text).ok_or_else(|| {
                            E::custom(format_args!("`{text}` is not {}", $expecting))
                        })
                    }
                    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<$type, E> {
                        self.visit_str(&value.to_string())
                    }
                    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<$type, E> {
                        self.visit_str(&value.to_string())
                    }
                }
                deserializer.deserialize_any(Visitor)
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }
    };
}

quantity_serde!(Span, "a time such as \"25ms\", \"1.5s\" or \"250us\"");
quantity_serde!(BitRate, "a rate such as \"10Mbit/s\" or \"3000kbit/s\"");
quantity_serde!(
    Bytes,
    "an amount of data such as \"10MB\", \"1200B\" or 1200"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_with_their_units() {
        assert_eq!(Span::parse("25ms"), Some(Span(Duration::from_millis(25))));
        assert_eq!(
            Span::parse("1.5 s"),
            Some(Span(Duration::from_millis(1500)))
        );
        assert_eq!(Span::parse("250us"), Some(Span(Duration::from_micros(250))));
        assert_eq!(
            BitRate::parse("10Mbit/s"),
            Some(BitRate(netsim::Rate::from_mbps(10)))
        );
        assert_eq!(
            BitRate::parse("3000kbit/s"),
            Some(BitRate(netsim::Rate::from_mbps(3)))
        );
        assert_eq!(Bytes::parse("10MB"), Some(Bytes(10_000_000)));
        assert_eq!(Bytes::parse("2MiB"), Some(Bytes(2 * 1024 * 1024)));
        assert_eq!(Bytes::parse("1_200"), Some(Bytes(1200)));
    }

    #[test]
    fn missing_or_unknown_units_are_rejected() {
        for bad in ["25", "25 parsecs", "ms", "-1ms", "1e3ms", ""] {
            assert_eq!(Span::parse(bad), None, "{bad}");
        }
        assert_eq!(BitRate::parse("10MB/s"), None);
        assert_eq!(Bytes::parse("10Mb"), None);
    }

    #[test]
    fn display_round_trips() {
        for text in ["25ms", "1s", "250us", "7ns"] {
            assert_eq!(Span::parse(text).unwrap().to_string(), text);
        }
        for text in ["10Mbit/s", "3kbit/s", "1Gbit/s", "9bit/s"] {
            assert_eq!(BitRate::parse(text).unwrap().to_string(), text);
        }
        for text in ["10MB", "64kB", "1200B"] {
            assert_eq!(Bytes::parse(text).unwrap().to_string(), text);
        }
    }
}
