//! QUIC variable-length integers (RFC 9000 §16), which HTTP/3 frames,
//! capsules and HTTP datagrams use.

use super::WireError;

/// The largest value a variable-length integer holds: 2^62 − 1.
pub const MAX: u64 = (1 << 62) - 1;

/// Reads one integer from the front of `input` and advances it.
pub fn read(input: &mut &[u8]) -> Result<u64, WireError> {
    let first = *input.first().ok_or(WireError::Truncated)?;
    let len = 1usize << (first >> 6);
    let bytes = input.get(..len).ok_or(WireError::Truncated)?;
    let mut value = u64::from(first & 0x3f);
    for &byte in &bytes[1..] {
        value = (value << 8) | u64::from(byte);
    }
    *input = &input[len..];
    Ok(value)
}

/// Bytes needed to write `value`.
pub fn len(value: u64) -> usize {
    match value {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `value` in its shortest encoding.
///
/// # Panics
///
/// If `value` exceeds [`MAX`]: a caller's bug, never a peer's input.
pub fn write(out: &mut Vec<u8>, value: u64) {
    assert!(value <= MAX, "varint {value} exceeds 2^62 - 1");
    match len(value) {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&(0x4000 | value as u16).to_be_bytes()),
        4 => out.extend_from_slice(&(0x8000_0000 | value as u32).to_be_bytes()),
        _ => out.extend_from_slice(&(0xc000_0000_0000_0000 | value).to_be_bytes()),
    }
}

/// Reads an integer that must fit a `usize` length no greater than `most`.
pub fn read_len(input: &mut &[u8], most: usize, what: &'static str) -> Result<usize, WireError> {
    let value = read(input)?;
    usize::try_from(value)
        .ok()
        .filter(|&n| n <= most)
        .ok_or(WireError::TooLarge(what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_examples() {
        //= https://www.rfc-editor.org/rfc/rfc9000#appendix-A.1
        for (bytes, value) in [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d][..], 494_878_333),
            (&[0x7b, 0xbd][..], 15_293),
            (&[0x25][..], 37),
            (&[0x40, 0x25][..], 37),
        ] {
            let mut input = bytes;
            assert_eq!(read(&mut input), Ok(value));
            assert!(input.is_empty());
        }
        assert_eq!(read(&mut &[0x40][..]), Err(WireError::Truncated));
        assert_eq!(read(&mut &[][..]), Err(WireError::Truncated));
    }

    proptest! {
        #[test]
        fn round_trip(value in 0..=MAX) {
            let mut out = Vec::new();
            write(&mut out, value);
            prop_assert_eq!(out.len(), len(value));
            let mut input = &out[..];
            prop_assert_eq!(read(&mut input), Ok(value));
            prop_assert!(input.is_empty());
        }
    }
}
