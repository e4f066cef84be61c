//! What a workload sees of its connection: streams and close, in our own
//! types, so that workloads do not depend on the QUIC library.

use crate::probe::{InFlightGauge, PacketEvent, PacketLog};
use bytes::Bytes;
use netsim::{Rate, Time};
use noq_proto::{
    Connection, Dir, PathId, ReadError, ReadableError, SendDatagramError, VarInt, WriteError,
};
use std::time::{Duration, Instant};

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

/// A QUIC DATAGRAM frame could not be queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    /// The peer does not accept datagrams, or not this large; or the
    /// connection is closed. The datagram can never be sent.
    #[error("the peer does not take this datagram: {0}")]
    Refused(String),
    /// The send buffer is full; the datagram is handed back unsent.
    #[error("datagram send buffer full")]
    Blocked(Bytes),
}

/// The application's handle on its connection during one
/// [`crate::App::drive`] call.
pub struct Session<'a> {
    conn: &'a mut Connection,
    now: Time,
    instant: Instant,
    gauge: &'a InFlightGauge,
}

impl<'a> Session<'a> {
    pub(crate) fn new(
        conn: &'a mut Connection,
        now: Time,
        instant: Instant,
        gauge: &'a InFlightGauge,
    ) -> Session<'a> {
        Session {
            conn,
            now,
            instant,
            gauge,
        }
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

    /// The stream in `slot`, after opening a bidirectional one into it if
    /// it is empty (`None` while the peer's limit allows none): for an
    /// application that runs on one stream of its own.
    pub fn open_bi_once(&mut self, slot: &mut Option<StreamId>) -> Option<StreamId> {
        if slot.is_none() {
            *slot = self.open_bi();
        }
        *slot
    }

    /// Accepts a bidirectional stream the peer opened, if any.
    pub fn accept_bi(&mut self) -> Option<StreamId> {
        self.conn.streams().accept(Dir::Bi).map(StreamId)
    }

    /// Opens a unidirectional stream, if the peer's limit allows.
    pub fn open_uni(&mut self) -> Option<StreamId> {
        self.conn.streams().open(Dir::Uni).map(StreamId)
    }

    /// Accepts a unidirectional stream the peer opened, if any.
    pub fn accept_uni(&mut self) -> Option<StreamId> {
        self.conn.streams().accept(Dir::Uni).map(StreamId)
    }

    /// Sets a stream's send priority (higher goes first; default 0).
    pub fn set_priority(&mut self, id: StreamId, priority: i32) -> Result<(), StreamError> {
        self.conn
            .send_stream(id.0)
            .set_priority(priority)
            .map_err(|e| StreamError(e.to_string()))
    }

    /// Queues an unreliable QUIC DATAGRAM frame (RFC 9221). A full send
    /// buffer hands the datagram back ([`DatagramError::Blocked`]) rather
    /// than dropping an older one, so the caller keeps the queue.
    pub fn send_datagram(&mut self, data: Bytes) -> Result<(), DatagramError> {
        match self.conn.datagrams().send(data, false) {
            Ok(()) => Ok(()),
            Err(SendDatagramError::Blocked(data)) => Err(DatagramError::Blocked(data)),
            Err(e) => Err(DatagramError::Refused(e.to_string())),
        }
    }

    /// The next QUIC DATAGRAM frame received, if any.
    pub fn recv_datagram(&mut self) -> Option<Bytes> {
        self.conn.datagrams().recv()
    }

    /// The largest datagram payload the peer and the path take now
    /// (`None`: the peer takes no datagrams).
    pub fn max_datagram_size(&mut self) -> Option<usize> {
        self.conn.datagrams().max_size()
    }

    /// Bytes of datagrams the send buffer still takes.
    pub fn datagram_send_space(&mut self) -> usize {
        self.conn.datagrams().send_buffer_space()
    }

    /// QUIC DATAGRAM frames sent so far on the connection. Read after each
    /// packet (the endpoint drives the application after every packet it
    /// sends), its growth says how many datagrams that packet carried.
    pub fn datagrams_sent(&mut self) -> u64 {
        self.conn.stats().frame_tx.datagram
    }

    /// Moves the per-packet events logged since the last call into `out`
    /// (nothing unless the endpoint was built with
    /// [`crate::QuicConfig::with_packet_log`]).
    pub fn take_packet_events(&mut self, out: &mut Vec<PacketEvent>) {
        if let Some(log) = self.gauge.packets() {
            log.drain_into(out);
        }
    }

    /// The connection's minimum RTT, once known (needs the packet log).
    pub fn min_rtt(&self) -> Option<Duration> {
        self.gauge.packets().and_then(PacketLog::min_rtt)
    }

    /// The peer's address (of the connection's first path).
    pub fn remote(&self) -> Option<std::net::SocketAddr> {
        self.conn
            .network_path(PathId::ZERO)
            .ok()
            .map(|path| path.remote())
    }

    /// The connection's smoothed RTT.
    pub fn smoothed_rtt(&mut self) -> Duration {
        self.conn
            .path_stats(PathId::ZERO)
            .map(|stats| stats.rtt)
            .unwrap_or_default()
    }

    /// The pacing rate the controller sets, if it sets one.
    pub fn pacing_rate(&mut self) -> Option<Rate> {
        self.conn
            .congestion_state(PathId::ZERO)
            .and_then(|cc| cc.metrics().pacing_rate)
            .map(|bytes_per_sec| Rate::from_bps(bytes_per_sec.saturating_mul(8)))
    }

    /// Bytes in flight as the congestion controller counts them (noq-proto
    /// does not expose its own count).
    pub fn bytes_in_flight(&self) -> u64 {
        self.gauge.bytes()
    }

    /// The controller's congestion window, bytes.
    pub fn congestion_window(&mut self) -> u64 {
        self.conn
            .congestion_state(PathId::ZERO)
            .map(|cc| cc.window())
            .unwrap_or_default()
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
