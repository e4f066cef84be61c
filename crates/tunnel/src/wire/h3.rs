//! HTTP/3 frames (RFC 9114 §7) and the SETTINGS we use, with a streaming
//! reader for the bytes of one stream.
//!
//! Unknown frame types (including the reserved `0x1f·N + 0x21` greasing
//! types) are skipped, as §9 requires; the HTTP/2 types HTTP/3 reserves
//! (0x02, 0x06, 0x08, 0x09) are errors. DATA payloads are handed on as they
//! arrive, so a long DATA frame is never buffered whole; other frames are
//! buffered up to [`MAX_FRAME`] bytes and refused beyond.

use super::{WireError, varint};

/// DATA.
pub const DATA: u64 = 0x00;
/// HEADERS.
pub const HEADERS: u64 = 0x01;
/// SETTINGS.
pub const SETTINGS: u64 = 0x04;
/// GOAWAY.
pub const GOAWAY: u64 = 0x07;

/// Unidirectional stream type: control (§6.2.1).
pub const STREAM_CONTROL: u64 = 0x00;
/// Unidirectional stream type: QPACK encoder (RFC 9204 §4.2).
pub const STREAM_QPACK_ENCODER: u64 = 0x02;
/// Unidirectional stream type: QPACK decoder.
pub const STREAM_QPACK_DECODER: u64 = 0x03;

/// SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204 §5).
pub const SETTING_QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
/// SETTINGS_MAX_FIELD_SECTION_SIZE (§7.2.4.1).
pub const SETTING_MAX_FIELD_SECTION_SIZE: u64 = 0x06;
/// SETTINGS_QPACK_BLOCKED_STREAMS.
pub const SETTING_QPACK_BLOCKED_STREAMS: u64 = 0x07;
/// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220 §3).
pub const SETTING_ENABLE_CONNECT_PROTOCOL: u64 = 0x08;
/// SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1).
pub const SETTING_H3_DATAGRAM: u64 = 0x33;

/// The largest non-DATA frame we buffer.
pub const MAX_FRAME: usize = 64 * 1024;
/// The most settings a SETTINGS frame may carry.
const MAX_SETTINGS: usize = 64;

/// What one stream's bytes held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameEvent {
    /// A HEADERS frame's field section (QPACK-encoded).
    Headers(Vec<u8>),
    /// Part of a DATA frame's payload.
    Data(Vec<u8>),
    /// A SETTINGS frame.
    Settings(Settings),
    /// A GOAWAY frame with its ID.
    Goaway(u64),
}

/// The settings of a SETTINGS frame that we act on; others are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// SETTINGS_H3_DATAGRAM = 1.
    pub h3_datagram: bool,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL = 1.
    pub connect_protocol: bool,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE, if given.
    pub max_field_section_size: Option<u64>,
}

impl Settings {
    /// Ours: H3 datagrams and extended CONNECT on, no QPACK dynamic table.
    pub fn ours() -> Settings {
        Settings {
            h3_datagram: true,
            connect_protocol: true,
            qpack_max_table_capacity: 0,
            max_field_section_size: Some(super::qpack::MAX_FIELD_SECTION as u64),
        }
    }

    /// Parses a SETTINGS payload (§7.2.4): duplicates and HTTP/2's settings
    /// are errors; a boolean setting must be 0 or 1.
    pub fn decode(mut payload: &[u8]) -> Result<Settings, WireError> {
        let mut settings = Settings::default();
        let mut seen = Vec::new();
        while !payload.is_empty() {
            let id = varint::read(&mut payload)?;
            let value = varint::read(&mut payload)?;
            if seen.contains(&id) {
                return Err(WireError::Malformed("duplicate setting"));
            }
            if seen.len() == MAX_SETTINGS {
                return Err(WireError::TooLarge("settings"));
            }
            seen.push(id);
            let flag = || match value {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(WireError::Malformed("a boolean setting is 0 or 1")),
            };
            match id {
                0x02..=0x05 => return Err(WireError::Malformed("an HTTP/2 setting")),
                SETTING_H3_DATAGRAM => settings.h3_datagram = flag()?,
                SETTING_ENABLE_CONNECT_PROTOCOL => settings.connect_protocol = flag()?,
                SETTING_QPACK_MAX_TABLE_CAPACITY => settings.qpack_max_table_capacity = value,
                SETTING_MAX_FIELD_SECTION_SIZE => settings.max_field_section_size = Some(value),
                _ => {}
            }
        }
        Ok(settings)
    }

    /// The SETTINGS frame (type and length included).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut payload = Vec::new();
        for (id, value) in [
            (
                SETTING_QPACK_MAX_TABLE_CAPACITY,
                self.qpack_max_table_capacity,
            ),
            (SETTING_QPACK_BLOCKED_STREAMS, 0),
            (
                SETTING_ENABLE_CONNECT_PROTOCOL,
                u64::from(self.connect_protocol),
            ),
            (SETTING_H3_DATAGRAM, u64::from(self.h3_datagram)),
        ] {
            varint::write(&mut payload, id);
            varint::write(&mut payload, value);
        }
        if let Some(size) = self.max_field_section_size {
            varint::write(&mut payload, SETTING_MAX_FIELD_SECTION_SIZE);
            varint::write(&mut payload, size);
        }
        write_frame(out, SETTINGS, &payload);
    }
}

/// Appends one frame.
pub fn write_frame(out: &mut Vec<u8>, kind: u64, payload: &[u8]) {
    varint::write(out, kind);
    varint::write(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Appends a DATA frame's header for a payload of `len` bytes.
pub fn write_data_header(out: &mut Vec<u8>, len: usize) {
    varint::write(out, DATA);
    varint::write(out, len as u64);
}

/// Where a [`FrameReader`] is within the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between frames.
    Header,
    /// Inside a DATA payload with this many bytes to go.
    Data(u64),
    /// Skipping an unknown frame's payload.
    Skip(u64),
    /// Collecting a frame of this type and length.
    Body(u64, usize),
}

/// Splits one stream's bytes into frames as they arrive.
#[derive(Clone, Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    state: State,
}

impl Default for FrameReader {
    fn default() -> FrameReader {
        FrameReader {
            buf: Vec::new(),
            state: State::Header,
        }
    }
}

impl FrameReader {
    /// Takes more of the stream and appends what it completes to `events`.
    /// An error leaves the reader unusable (the stream or connection is to
    /// be closed).
    pub fn push(&mut self, input: &[u8], events: &mut Vec<FrameEvent>) -> Result<(), WireError> {
        self.buf.extend_from_slice(input);
        let mut at = 0;
        let result = self.parse(&mut at, events);
        self.buf.drain(..at);
        result
    }

    /// Parses what `buf` holds from `at` on, advancing `at` past it.
    fn parse(&mut self, at: &mut usize, events: &mut Vec<FrameEvent>) -> Result<(), WireError> {
        loop {
            let avail = &self.buf[*at..];
            match self.state {
                State::Data(left) | State::Skip(left) if left > 0 => {
                    if avail.is_empty() {
                        return Ok(());
                    }
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(avail.len());
                    if matches!(self.state, State::Data(_)) {
                        events.push(FrameEvent::Data(avail[..take].to_vec()));
                        self.state = State::Data(left - take as u64);
                    } else {
                        self.state = State::Skip(left - take as u64);
                    }
                    *at += take;
                }
                State::Data(_) | State::Skip(_) => self.state = State::Header,
                State::Header => {
                    if avail.is_empty() {
                        return Ok(());
                    }
                    let mut cursor = avail;
                    let (kind, len) = match (varint::read(&mut cursor), varint::read(&mut cursor)) {
                        (Ok(kind), Ok(len)) => (kind, len),
                        _ => return Ok(()), // truncated: wait for more
                    };
                    *at += avail.len() - cursor.len();
                    self.state = match kind {
                        DATA => State::Data(len),
                        HEADERS | SETTINGS | GOAWAY => {
                            let len = usize::try_from(len)
                                .ok()
                                .filter(|&len| len <= MAX_FRAME)
                                .ok_or(WireError::TooLarge("HTTP/3 frame"))?;
                            State::Body(kind, len)
                        }
                        0x02 | 0x06 | 0x08 | 0x09 => {
                            return Err(WireError::Malformed("an HTTP/2 frame type"));
                        }
                        _ => State::Skip(len),
                    };
                }
                State::Body(kind, len) => {
                    let Some(payload) = avail.get(..len) else {
                        return Ok(());
                    };
                    let payload = payload.to_vec();
                    *at += len;
                    self.state = State::Header;
                    events.push(match kind {
                        HEADERS => FrameEvent::Headers(payload),
                        SETTINGS => FrameEvent::Settings(Settings::decode(&payload)?),
                        _ => {
                            let mut cursor = &payload[..];
                            let id = varint::read(&mut cursor)?;
                            if !cursor.is_empty() {
                                return Err(WireError::Malformed("GOAWAY"));
                            }
                            FrameEvent::Goaway(id)
                        }
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(bytes: &[u8], chunk: usize) -> Result<Vec<FrameEvent>, WireError> {
        let mut reader = FrameReader::default();
        let mut events = Vec::new();
        for piece in bytes.chunks(chunk.max(1)) {
            reader.push(piece, &mut events)?;
        }
        Ok(events)
    }

    fn merge_data(events: Vec<FrameEvent>) -> Vec<FrameEvent> {
        let mut merged: Vec<FrameEvent> = Vec::new();
        for event in events {
            match (merged.last_mut(), event) {
                (Some(FrameEvent::Data(a)), FrameEvent::Data(b)) => a.extend(b),
                (_, event) => merged.push(event),
            }
        }
        merged
    }

    #[test]
    fn frames_in_any_chunking() {
        let mut bytes = Vec::new();
        Settings::ours().encode(&mut bytes);
        write_frame(&mut bytes, 0x21, b"grease"); // reserved: skipped
        write_frame(&mut bytes, HEADERS, b"\0\0");
        write_frame(&mut bytes, DATA, &[7; 300]);
        for chunk in [1, 2, 3, 7, 100, 1000] {
            let events = merge_data(read_all(&bytes, chunk).unwrap());
            assert_eq!(
                events,
                vec![
                    FrameEvent::Settings(Settings::ours()),
                    FrameEvent::Headers(vec![0, 0]),
                    FrameEvent::Data(vec![7; 300]),
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn protocol_errors() {
        let mut bytes = Vec::new();
        write_frame(&mut bytes, 0x02, b"");
        assert!(read_all(&bytes, 10).is_err());
        let mut dup = Vec::new();
        write_frame(&mut dup, SETTINGS, &[0x33, 1, 0x33, 1]);
        assert!(read_all(&dup, 10).is_err());
        let mut big = Vec::new();
        varint::write(&mut big, HEADERS);
        varint::write(&mut big, MAX_FRAME as u64 + 1);
        assert_eq!(read_all(&big, 10), Err(WireError::TooLarge("HTTP/3 frame")));
    }

    proptest! {
        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..256), chunk in 1usize..20) {
            let _ = read_all(&input, chunk);
        }
    }
}
