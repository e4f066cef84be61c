//! What a workload sees of its connection: streams and close, in our own
//! types, so that workloads do not depend on the QUIC library.

use bytes::Bytes;
use netsim::Time;
use noq_proto::{Connection, Dir, ReadError, ReadableError, VarInt, WriteError};
use std::time::Instant;

/// A stream of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(noq_proto::StreamId);

impl StreamId {
    /// The QUIC stream ID (RFC 9000 §2.1).
    pub fn id(self) -> u64 {
        u64::from(VarInt::from(self.0))
    }
}

/// A stream operation failed: the stream is closed, stopped or reset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stream error: {0}")]
pub struct StreamError(String);

/// What one [`Session::read`] call found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStatus {
    /// Bytes read by this call.
    pub bytes: u64,
    /// Whether the peer's FIN was reached (everything has been read).
    pub finished: bool,
}

/// The application's handle on its connection during one
/// [`crate::App::drive`] call.
pub struct Session<'a> {
    conn: &'a mut Connection,
    now: Time,
    instant: Instant,
}

impl<'a> Session<'a> {
    pub(crate) fn new(conn: &'a mut Connection, now: Time, instant: Instant) -> Session<'a> {
        Session { conn, now, instant }
    }

    /// The current virtual time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Whether the handshake has completed and the connection is open.
    pub fn is_connected(&self) -> bool {
        !self.conn.is_handshaking() && !self.conn.is_closed()
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// Opens a bidirectional stream, if the peer's limit allows.
    pub fn open_bi(&mut self) -> Option<StreamId> {
        self.conn.streams().open(Dir::Bi).map(StreamId)
    }

    /// Accepts a bidirectional stream the peer opened, if any.
    pub fn accept_bi(&mut self) -> Option<StreamId> {
        self.conn.streams().accept(Dir::Bi).map(StreamId)
    }

    /// Writes as much of `data` as flow control and the send buffer allow;
    /// `Ok(0)` when blocked.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        match self.conn.send_stream(id.0).write(data) {
            Ok(n) => Ok(n),
            Err(WriteError::Blocked) => Ok(0),
            Err(e) => Err(StreamError(e.to_string())),
        }
    }

    /// Writes as much of the chunk as allowed without copying it; returns
    /// the bytes taken (`Ok(0)` when blocked).
    pub fn write_bytes(&mut self, id: StreamId, data: Bytes) -> Result<usize, StreamError> {
        let mut chunks = [data];
        let mut slice: &mut [Bytes] = &mut chunks;
        match self.conn.send_stream(id.0).write_chunks(&mut slice) {
            Ok(written) => Ok(written),
            Err(WriteError::Blocked) => Ok(0),
            Err(e) => Err(StreamError(e.to_string())),
        }
    }

    /// Sends FIN once everything written has been sent.
    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        self.conn
            .send_stream(id.0)
            .finish()
            .map_err(|e| StreamError(e.to_string()))
    }

    /// Reads everything available on the stream, in order, handing each
    /// chunk to `on_data`.
    pub fn read(
        &mut self,
        id: StreamId,
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<ReadStatus, StreamError> {
        let mut status = ReadStatus::default();
        let mut stream = self.conn.recv_stream(id.0);
        let mut chunks = match stream.read(true) {
            Ok(chunks) => chunks,
            Err(ReadableError::ClosedStream) => {
                return Err(StreamError("closed stream".to_string()));
            }
            Err(e) => return Err(StreamError(e.to_string())),
        };
        let result = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    status.bytes += chunk.bytes.len() as u64;
                    on_data(&chunk.bytes);
                }
                Ok(None) => {
                    status.finished = true;
                    break Ok(status);
                }
                Err(ReadError::Blocked) => break Ok(status),
                Err(e) => break Err(StreamError(e.to_string())),
            }
        };
        let _ = chunks.finalize();
        result
    }

    /// Closes the connection with an application error code (0 for a clean
    /// close).
    pub fn close(&mut self, code: u32, reason: &'static [u8]) {
        self.conn.close(
            self.instant,
            VarInt::from_u32(code),
            Bytes::from_static(reason),
        );
    }
}
