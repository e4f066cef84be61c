//! The HTTP/3 connection around the tunnel (RFC 9114): each side's control
//! stream with its SETTINGS, the peer's unidirectional streams (control
//! read, QPACK and unknown types drained and ignored), and the request
//! streams' framing: HEADERS as QPACK field sections, DATA carrying the
//! capsule protocol.

use crate::wire::capsule::{Capsule, CapsuleReader};
use crate::wire::h3::{self, FrameEvent, FrameReader, Settings};
use crate::wire::qpack::{self, Field};
use crate::wire::{WireError, varint};
use bytes::{Buf, Bytes};
use quic::{Session, StreamId};
use std::collections::VecDeque;

/// A peer's unidirectional stream.
#[derive(Debug)]
enum UniStream {
    /// Its type is not read yet.
    Untyped(Vec<u8>),
    /// The control stream.
    Control(FrameReader),
    /// QPACK or an unknown type: read and dropped.
    Ignored,
}

/// The connection-level HTTP/3 state of one tunnel connection.
#[derive(Debug, Default)]
pub struct H3Connection {
    control: Option<StreamId>,
    peer: Option<Settings>,
    uni: Vec<(StreamId, UniStream)>,
    error: Option<String>,
}

impl H3Connection {
    /// The peer's settings, once its control stream delivered them.
    pub fn peer_settings(&self) -> Option<&Settings> {
        self.peer.as_ref()
    }

    /// A connection error, if the peer broke HTTP/3.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Opens our control stream with our SETTINGS (once), and reads the
    /// peer's unidirectional streams.
    pub fn drive(&mut self, session: &mut Session<'_>) {
        if self.control.is_none()
            && let Some(id) = session.open_uni()
        {
            let mut bytes = Vec::new();
            varint::write(&mut bytes, h3::STREAM_CONTROL);
            Settings::ours().encode(&mut bytes);
            // A fresh stream takes a few dozen bytes whatever flow control
            // says (the initial window is far larger).
            let _ = session.write(id, &bytes);
            self.control = Some(id);
        }
        while let Some(id) = session.accept_uni() {
            if self.uni.len() < 16 {
                self.uni.push((id, UniStream::Untyped(Vec::new())));
            }
        }
        let mut events = Vec::new();
        for (id, stream) in &mut self.uni {
            let mut data = Vec::new();
            let _ = session.read(*id, |chunk| data.extend_from_slice(chunk));
            if data.is_empty() {
                continue;
            }
            if let UniStream::Untyped(pending) = stream {
                pending.extend_from_slice(&data);
                let mut cursor = &pending[..];
                let Ok(kind) = varint::read(&mut cursor) else {
                    continue;
                };
                data = cursor.to_vec();
                *stream = match kind {
                    h3::STREAM_CONTROL => UniStream::Control(FrameReader::default()),
                    _ => UniStream::Ignored,
                };
            }
            if let UniStream::Control(reader) = stream
                && let Err(e) = reader.push(&data, &mut events)
            {
                self.error.get_or_insert(format!("control stream: {e}"));
            }
        }
        for event in events {
            match event {
                FrameEvent::Settings(settings) if self.peer.is_none() => {
                    self.peer = Some(settings);
                }
                FrameEvent::Settings(_) => {
                    self.error.get_or_insert("a second SETTINGS frame".into());
                }
                FrameEvent::Goaway(_) => {}
                FrameEvent::Headers(_) | FrameEvent::Data(_) => {
                    self.error
                        .get_or_insert("a request frame on the control stream".into());
                }
            }
        }
    }
}

/// What a request stream delivered in one drive.
#[derive(Debug, Default)]
pub struct StreamInput {
    /// Field sections (the request, or the response and any trailers).
    pub headers: Vec<Vec<Field>>,
    /// Capsules from the DATA frames.
    pub capsules: Vec<Capsule>,
    /// The peer finished the stream.
    pub finished: bool,
}

/// One request stream: its framing in and out.
#[derive(Debug)]
pub struct RequestStream {
    /// The stream.
    pub id: StreamId,
    frames: FrameReader,
    capsules: CapsuleReader,
    outgoing: VecDeque<Bytes>,
    outgoing_bytes: usize,
    finished: bool,
    headers_seen: bool,
}

impl RequestStream {
    /// A request stream.
    pub fn new(id: StreamId) -> RequestStream {
        RequestStream {
            id,
            frames: FrameReader::default(),
            capsules: CapsuleReader::default(),
            outgoing: VecDeque::new(),
            outgoing_bytes: 0,
            finished: false,
            headers_seen: false,
        }
    }

    /// Queues a HEADERS frame with these fields.
    pub fn send_headers(&mut self, fields: &[(String, String)]) {
        let pairs: Vec<(&str, &str)> = fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let mut section = Vec::new();
        qpack::encode(&pairs, &mut section);
        let mut frame = Vec::new();
        h3::write_frame(&mut frame, h3::HEADERS, &section);
        self.queue(Bytes::from(frame));
    }

    /// Queues capsule bytes in one DATA frame.
    pub fn send_capsules(&mut self, capsules: &[u8]) {
        let mut frame = Vec::with_capacity(capsules.len() + 8);
        h3::write_data_header(&mut frame, capsules.len());
        frame.extend_from_slice(capsules);
        self.queue(Bytes::from(frame));
    }

    fn queue(&mut self, bytes: Bytes) {
        self.outgoing_bytes += bytes.len();
        self.outgoing.push_back(bytes);
    }

    /// Bytes queued here and not yet taken by the stream.
    pub fn outgoing_bytes(&self) -> usize {
        self.outgoing_bytes
    }

    /// Writes what flow control takes.
    pub fn flush(&mut self, session: &mut Session<'_>) {
        while let Some(chunk) = self.outgoing.front_mut() {
            match session.write_bytes(self.id, chunk.clone()) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    self.outgoing_bytes -= n;
                    if n == chunk.len() {
                        self.outgoing.pop_front();
                    } else {
                        chunk.advance(n);
                    }
                }
            }
        }
    }

    /// Reads what arrived (up to a budget per drive) and parses it.
    pub fn read(&mut self, session: &mut Session<'_>) -> Result<StreamInput, WireError> {
        let mut input = StreamInput::default();
        if self.finished {
            return Ok(input);
        }
        let mut data = Vec::new();
        let status = session.read(self.id, |chunk| data.extend_from_slice(chunk));
        match status {
            Ok(status) => input.finished = status.finished,
            Err(_) => input.finished = true,
        }
        self.finished = input.finished;
        let mut events = Vec::new();
        self.frames.push(&data, &mut events)?;
        for event in events {
            match event {
                FrameEvent::Headers(section) => {
                    self.headers_seen = true;
                    input.headers.push(qpack::decode(&section)?);
                }
                // A DATA frame before any HEADERS frame is
                // H3_FRAME_UNEXPECTED (RFC 9114 §4.1).
                FrameEvent::Data(_) if !self.headers_seen => {
                    return Err(WireError::Malformed("DATA before HEADERS"));
                }
                FrameEvent::Data(bytes) => self.capsules.push(&bytes, &mut input.capsules)?,
                FrameEvent::Settings(_) | FrameEvent::Goaway(_) => {
                    return Err(WireError::Malformed("a control frame on a request stream"));
                }
            }
        }
        Ok(input)
    }
}
