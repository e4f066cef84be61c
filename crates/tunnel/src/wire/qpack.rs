//! QPACK field sections (RFC 9204) without a dynamic table: we advertise
//! `SETTINGS_QPACK_MAX_TABLE_CAPACITY = 0`, so a peer may only use the
//! static table (Appendix A) and literals. The decoder refuses any
//! reference to a dynamic table; it decodes Huffman-coded strings (quic-go
//! codes every literal). The encoder writes static references where the
//! table has the field or its name, and plain literals otherwise.

use super::{WireError, huffman};

/// A decoded header field line.
pub type Field = (Vec<u8>, Vec<u8>);

/// The most bytes a decoded field section may hold (names plus values),
/// whatever the peer sends: RFC 9114's SETTINGS_MAX_FIELD_SECTION_SIZE,
/// which we advertise.
pub const MAX_FIELD_SECTION: usize = 16 * 1024;

/// The static table (RFC 9204 Appendix A), indices 0–98.
#[rustfmt::skip]
const STATIC: [(&str, &str); 99] = [
    (":authority", ""), (":path", "/"), ("age", "0"), ("content-disposition", ""),
    ("content-length", "0"), ("cookie", ""), ("date", ""), ("etag", ""),
    ("if-modified-since", ""), ("if-none-match", ""), ("last-modified", ""), ("link", ""),
    ("location", ""), ("referer", ""), ("set-cookie", ""), (":method", "CONNECT"),
    (":method", "DELETE"), (":method", "GET"), (":method", "HEAD"), (":method", "OPTIONS"),
    (":method", "POST"), (":method", "PUT"), (":scheme", "http"), (":scheme", "https"),
    (":status", "103"), (":status", "200"), (":status", "304"), (":status", "404"),
    (":status", "503"), ("accept", "*/*"), ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"), ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"), ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"), ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"), ("cache-control", "no-cache"),
    ("cache-control", "no-store"), ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"), ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"), ("content-type", "application/javascript"),
    ("content-type", "application/json"), ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"), ("content-type", "image/jpeg"), ("content-type", "image/png"),
    ("content-type", "text/css"), ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"), ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"), ("strict-transport-security", "max-age=31536000"),
    ("strict-transport-security", "max-age=31536000; includesubdomains"),
    ("strict-transport-security", "max-age=31536000; includesubdomains; preload"),
    ("vary", "accept-encoding"), ("vary", "origin"), ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"), (":status", "100"), (":status", "204"),
    (":status", "206"), (":status", "302"), (":status", "400"), (":status", "403"),
    (":status", "421"), (":status", "425"), (":status", "500"), ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"), ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"), ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"), ("access-control-request-method", "post"),
    ("alt-svc", "clear"), ("authorization", ""),
    ("content-security-policy", "script-src 'none'; object-src 'none'; base-uri 'none'"),
    ("early-data", "1"), ("expect-ct", ""), ("forwarded", ""), ("if-range", ""), ("origin", ""),
    ("purpose", "prefetch"), ("server", ""), ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"), ("user-agent", ""), ("x-forwarded-for", ""),
    ("x-frame-options", "deny"), ("x-frame-options", "sameorigin"),
];

/// Reads an HPACK prefix integer (RFC 7541 §5.1) whose prefix is the low
/// `bits` bits of the first byte; bounded to `u32` (RFC 9204 §4.1.1 lets an
/// implementation refuse larger values).
fn read_int(input: &mut &[u8], bits: u32) -> Result<u64, WireError> {
    let (&first, rest) = input.split_first().ok_or(WireError::Truncated)?;
    *input = rest;
    let max = (1u64 << bits) - 1;
    let mut value = u64::from(first) & max;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let (&byte, rest) = input.split_first().ok_or(WireError::Truncated)?;
        *input = rest;
        if shift > 28 {
            return Err(WireError::TooLarge("QPACK integer"));
        }
        value += u64::from(byte & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(WireError::TooLarge("QPACK integer"));
        }
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
}

/// Writes an HPACK prefix integer with `flags` in the bits above the
/// `bits`-bit prefix.
fn write_int(out: &mut Vec<u8>, flags: u8, bits: u32, value: u64) {
    let max = (1u64 << bits) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Reads a string literal whose Huffman flag is bit `bits` of the first
/// byte and whose length has a `bits`-bit prefix.
fn read_string(input: &mut &[u8], bits: u32, out: &mut Vec<u8>) -> Result<(), WireError> {
    let huffman = input.first().ok_or(WireError::Truncated)? & (1 << bits) != 0;
    let len = read_int(input, bits)?;
    let len = usize::try_from(len).map_err(|_| WireError::TooLarge("QPACK string"))?;
    let bytes = input.get(..len).ok_or(WireError::Truncated)?;
    *input = &input[len..];
    if huffman {
        huffman::decode(bytes, out)
    } else {
        out.extend_from_slice(bytes);
        Ok(())
    }
}

fn static_entry(index: u64) -> Result<(&'static str, &'static str), WireError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| STATIC.get(i))
        .copied()
        .ok_or(WireError::Malformed("static table index out of range"))
}

/// Decodes a field section (the payload of a HEADERS frame).
pub fn decode(mut input: &[u8]) -> Result<Vec<Field>, WireError> {
    let input = &mut input;
    let required_insert_count = read_int(input, 8)?;
    let _delta_base = read_int(input, 7)?;
    if required_insert_count != 0 {
        return Err(WireError::Unsupported("QPACK dynamic table references"));
    }
    let mut fields = Vec::new();
    let mut size = 0usize;
    while let Some(&first) = input.first() {
        let field = if first & 0x80 != 0 {
            // Indexed field line: 1 T index(6+).
            if first & 0x40 == 0 {
                return Err(WireError::Unsupported("QPACK dynamic table references"));
            }
            let (name, value) = static_entry(read_int(input, 6)?)?;
            (name.as_bytes().to_vec(), value.as_bytes().to_vec())
        } else if first & 0x40 != 0 {
            // Literal with name reference: 01 N T index(4+).
            if first & 0x10 == 0 {
                return Err(WireError::Unsupported("QPACK dynamic table references"));
            }
            let (name, _) = static_entry(read_int(input, 4)?)?;
            let mut value = Vec::new();
            read_string(input, 7, &mut value)?;
            (name.as_bytes().to_vec(), value)
        } else if first & 0x20 != 0 {
            // Literal with literal name: 001 N H len(3+).
            let mut name = Vec::new();
            read_string(input, 3, &mut name)?;
            let mut value = Vec::new();
            read_string(input, 7, &mut value)?;
            (name, value)
        } else {
            // Post-base forms (0001 …, 0000 …) refer to the dynamic table.
            return Err(WireError::Unsupported("QPACK dynamic table references"));
        };
        // RFC 9114 §4.2.2: each field counts 32 bytes of overhead.
        size += field.0.len() + field.1.len() + 32;
        if size > MAX_FIELD_SECTION {
            return Err(WireError::TooLarge("field section"));
        }
        fields.push(field);
    }
    Ok(fields)
}

/// Encodes a field section: static references where possible, plain
/// literals otherwise, never the dynamic table.
pub fn encode(fields: &[(&str, &str)], out: &mut Vec<u8>) {
    // Required Insert Count 0, Delta Base 0.
    out.extend_from_slice(&[0, 0]);
    for &(name, value) in fields {
        if let Some(index) = STATIC.iter().position(|&entry| entry == (name, value)) {
            write_int(out, 0xc0, 6, index as u64);
            continue;
        }
        if let Some(index) = STATIC.iter().position(|&(n, _)| n == name) {
            write_int(out, 0x50, 4, index as u64);
        } else {
            write_int(out, 0x20, 3, name.len() as u64);
            out.extend_from_slice(name.as_bytes());
        }
        write_int(out, 0x00, 7, value.len() as u64);
        out.extend_from_slice(value.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(fields: &[Field]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn connect_udp_request_round_trips() {
        let request = [
            (":method", "CONNECT"),
            (":protocol", "connect-udp"),
            (":scheme", "https"),
            (":authority", "proxy.example:443"),
            (":path", "/.well-known/masque/udp/10.0.1.10/4433/"),
            ("capsule-protocol", "?1"),
        ];
        let mut out = Vec::new();
        encode(&request, &mut out);
        let decoded = decode(&out).unwrap();
        let expected: Vec<(String, String)> = request
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(text(&decoded), expected);
        // :method CONNECT and :scheme https are one byte each.
        assert_eq!(&out[2..3], &[0xc0 | 15]);
    }

    #[test]
    fn decodes_huffman_literals_as_quic_go_writes_them() {
        // :status 200 indexed, then a literal with name reference to
        // `server` (92) and a Huffman-coded value "www.example.com".
        let mut section = vec![0x00, 0x00, 0xc0 | 25, 0x5f, 92 - 15];
        section.push(0x80 | 12);
        section.extend_from_slice(&[
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ]);
        let fields = text(&decode(&section).unwrap());
        assert_eq!(fields[0], (":status".into(), "200".into()));
        assert_eq!(fields[1], ("server".into(), "www.example.com".into()));
    }

    #[test]
    fn dynamic_references_and_bad_indices_are_refused() {
        assert!(matches!(
            decode(&[0x01, 0x00]),
            Err(WireError::Unsupported(_))
        ));
        assert!(matches!(
            decode(&[0x00, 0x00, 0x80]),
            Err(WireError::Unsupported(_))
        ));
        assert!(matches!(
            decode(&[0x00, 0x00, 0xc0 | 63, 40]),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            decode(&[0x00, 0x00, 0x10]),
            Err(WireError::Unsupported(_))
        ));
        assert_eq!(decode(&[0x00]), Err(WireError::Truncated));
    }

    #[test]
    fn oversized_sections_are_refused() {
        let long = "x".repeat(MAX_FIELD_SECTION);
        let mut out = Vec::new();
        encode(&[("a", &long)], &mut out);
        assert_eq!(decode(&out), Err(WireError::TooLarge("field section")));
    }

    proptest! {
        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode(&input);
        }

        #[test]
        fn long_integers_are_refused_not_overflowed(len in 5usize..40) {
            let mut input = vec![0x00, 0x00, 0xff];
            input.extend(std::iter::repeat_n(0xff, len));
            prop_assert!(decode(&input).is_err());
        }

        #[test]
        fn literals_round_trip(name in "[a-z-]{1,20}", value in "[ -~]{0,40}") {
            let mut out = Vec::new();
            encode(&[(&name, &value)], &mut out);
            let fields = text(&decode(&out).unwrap());
            prop_assert_eq!(fields, vec![(name, value)]);
        }
    }
}
