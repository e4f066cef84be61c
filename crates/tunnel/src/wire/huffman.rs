//! The Huffman code of HPACK (RFC 7541 Appendix B), which QPACK string
//! literals use (RFC 9204 §4.1.2). quic-go Huffman-encodes every literal, so
//! decoding is required; our own encoder writes plain literals, and the
//! encoder here serves the round-trip tests.
//!
//! The code is canonical: within each length, codes are consecutive in
//! symbol order, and each length starts where the previous one ended,
//! shifted. So the table is its code lengths alone (RFC 7541 Appendix B,
//! column "len"), and the codes follow (checked against the RFC's own
//! values in the tests).

use super::WireError;

/// The end-of-string symbol (never in a valid string).
const EOS: usize = 256;

/// Code lengths of symbols 0–255 and EOS (RFC 7541 Appendix B).
#[rustfmt::skip]
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

/// The longest code, bits.
const MAX_LEN: usize = 30;

/// The canonical code, built once from [`LENGTHS`].
struct Code {
    /// Each symbol's code (right-aligned).
    codes: [u32; 257],
    /// Per length: the first code of that length.
    first: [u32; MAX_LEN + 1],
    /// Per length: how many codes have it.
    count: [u16; MAX_LEN + 1],
    /// Per length: where its symbols start in `symbols`.
    offset: [u16; MAX_LEN + 1],
    /// Symbols ordered by (length, symbol).
    symbols: [u16; 257],
}

const fn build() -> Code {
    let mut count = [0u16; MAX_LEN + 1];
    let mut i = 0;
    while i < 257 {
        count[LENGTHS[i] as usize] += 1;
        i += 1;
    }
    let mut first = [0u32; MAX_LEN + 1];
    let mut offset = [0u16; MAX_LEN + 1];
    let mut code = 0u32;
    let mut seen = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        code <<= 1;
        first[len] = code;
        offset[len] = seen;
        code += count[len] as u32;
        seen += count[len];
        len += 1;
    }
    let mut next = first;
    let mut codes = [0u32; 257];
    let mut symbols = [0u16; 257];
    let mut placed = offset;
    let mut sym = 0;
    while sym < 257 {
        let len = LENGTHS[sym] as usize;
        codes[sym] = next[len];
        next[len] += 1;
        symbols[placed[len] as usize] = sym as u16;
        placed[len] += 1;
        sym += 1;
    }
    Code {
        codes,
        first,
        count,
        offset,
        symbols,
    }
}

static CODE: Code = build();

/// Decodes a Huffman-coded string (RFC 7541 §5.2): padding must be at most
/// 7 bits, all ones (a prefix of EOS); EOS itself is an error.
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in input {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            if len > MAX_LEN {
                return Err(WireError::Malformed("Huffman code longer than 30 bits"));
            }
            let index = code.wrapping_sub(CODE.first[len]);
            if index < u32::from(CODE.count[len]) {
                let symbol =
                    usize::from(CODE.symbols[usize::from(CODE.offset[len]) + index as usize]);
                if symbol == EOS {
                    return Err(WireError::Malformed("EOS in a Huffman string"));
                }
                out.push(symbol as u8);
                code = 0;
                len = 0;
            }
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones.
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(WireError::Malformed("bad Huffman padding"));
    }
    Ok(())
}

/// Bytes `input` takes Huffman-coded.
pub fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input
        .iter()
        .map(|&b| usize::from(LENGTHS[usize::from(b)]))
        .sum();
    bits.div_ceil(8)
}

/// Appends `input` Huffman-coded, padded with ones.
pub fn encode(input: &[u8], out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &byte in input {
        let len = u32::from(LENGTHS[usize::from(byte)]);
        acc = (acc << len) | u64::from(CODE.codes[usize::from(byte)]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn codes_match_rfc7541_appendix_b() {
        //= https://www.rfc-editor.org/rfc/rfc7541#appendix-B
        for (symbol, code, len) in [
            (0, 0x1ff8, 13),
            (1, 0x7f_ffd8, 23),
            (10, 0x3fff_fffc, 30),
            (32, 0x14, 6),
            (48, 0x0, 5),
            (97, 0x3, 5),
            (255, 0x3ff_ffee, 26),
            (256, 0x3fff_ffff, 30),
        ] {
            assert_eq!(
                (CODE.codes[symbol], LENGTHS[symbol]),
                (code, len),
                "{symbol}"
            );
        }
    }

    #[test]
    fn rfc7541_examples_decode() {
        //= https://www.rfc-editor.org/rfc/rfc7541#appendix-C.4.1
        let mut out = Vec::new();
        decode(
            &[
                0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
            ],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, b"www.example.com");
        out.clear();
        decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], &mut out).unwrap();
        assert_eq!(out, b"no-cache");
    }

    #[test]
    fn bad_padding_and_eos_are_errors() {
        let mut out = Vec::new();
        // "0" is 00000: padding with zeros is not a prefix of EOS.
        assert!(decode(&[0x00], &mut out).is_err());
        // 32 one-bits contain the 30-bit EOS.
        assert!(decode(&[0xff; 4], &mut out).is_err());
        // A full byte of padding is too much.
        assert!(decode(&[0x07, 0xff], &mut out).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(input in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut coded = Vec::new();
            encode(&input, &mut coded);
            prop_assert_eq!(coded.len(), encoded_len(&input));
            let mut out = Vec::new();
            decode(&coded, &mut out).unwrap();
            prop_assert_eq!(out, input);
        }

        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut out = Vec::new();
            let _ = decode(&input, &mut out);
            prop_assert!(out.len() <= input.len() * 8 / 5);
        }
    }
}
