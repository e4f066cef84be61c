//! The bulk workload: one stream carrying N bytes up or down.
//!
//! The client opens a bidirectional stream and sends a 9-byte request:
//! the direction (0 = upload, 1 = download) and N as a big-endian `u64`.
//! Upload: the client then sends N bytes and FIN; the server reads them
//! and answers with FIN. Download: the server sends N bytes and FIN. The
//! client is done when it reads the server's FIN.
//!
//! A transfer bounded by time instead ([`BulkClient::until`]) asks for
//! N = 2⁶⁴ − 1: an upload stops writing at its deadline and ends with FIN
//! as above; a download's client is done at its deadline (and closes the
//! connection). The receiving side keeps a [`DeliveryLog`] of the bytes
//! it received by each 100 ms, from which a flow's throughput over any
//! window and over time are read. A client can also run actions at set
//! times ([`BulkClient::at`]), the first time it is driven at or after
//! each: an application changing its controller's utility mid-flow.

use crate::app::{App, AppFactory};
use crate::client::QuicClient;
use crate::metrics::DeliveryLog;
use crate::server::QuicServer;
use crate::session::{Session, StreamId};
use bytes::Bytes;
use netsim::{Rate, Time};
use std::time::Duration;

/// Which way the bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    Upload,
    /// Server to client.
    Download,
}

/// The length of the request header.
const HEADER_LEN: usize = 9;

/// The payload chunk both sides send (zeros), shared without copying.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Writes up to `remaining` zero bytes; returns how many were taken.
pub(crate) fn write_zeros(session: &mut Session<'_>, stream: StreamId, remaining: u64) -> u64 {
    let mut written = 0;
    while written < remaining {
        let len = (remaining - written).min(ZEROS.len() as u64) as usize;
        match session.write_bytes(stream, Bytes::from_static(&ZEROS[..len])) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    written
}

/// An action a client runs at a set time.
pub type Action = Box<dyn FnMut() + Send>;

/// The client side of a bulk transfer.
pub struct BulkClient {
    direction: Direction,
    bytes: u64,
    deadline: Option<Time>,
    actions: Vec<(Time, Action)>,
    stream: Option<StreamId>,
    header_sent: usize,
    sent: u64,
    fin_sent: bool,
    received: u64,
    delivery: DeliveryLog,
    done_at: Option<Time>,
}

impl std::fmt::Debug for BulkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkClient")
            .field("direction", &self.direction)
            .field("bytes", &self.bytes)
            .field("deadline", &self.deadline)
            .field("actions", &self.actions.len())
            .field("sent", &self.sent)
            .field("received", &self.received)
            .field("done_at", &self.done_at)
            .finish_non_exhaustive()
    }
}

impl BulkClient {
    /// A transfer of `bytes` bytes in `direction`.
    pub fn new(direction: Direction, bytes: u64) -> BulkClient {
        BulkClient {
            direction,
            bytes,
            deadline: None,
            actions: Vec::new(),
            stream: None,
            header_sent: 0,
            sent: 0,
            fin_sent: false,
            received: 0,
            delivery: DeliveryLog::default(),
            done_at: None,
        }
    }

    /// A transfer in `direction` that lasts until `deadline` (virtual
    /// time), however many bytes that is.
    pub fn until(direction: Direction, deadline: Time) -> BulkClient {
        BulkClient {
            deadline: Some(deadline),
            ..BulkClient::new(direction, u64::MAX)
        }
    }

    /// Runs `action` the first time the client is driven at or after `at`.
    pub fn at(mut self, at: Time, action: Action) -> BulkClient {
        self.actions.push((at, action));
        self.actions.sort_by_key(|(at, _)| *at);
        self
    }

    /// Whether the transfer is bounded by time rather than size.
    pub fn is_timed(&self) -> bool {
        self.deadline.is_some()
    }

    /// When a transfer bounded by time ends.
    pub fn deadline(&self) -> Option<Time> {
        self.deadline
    }

    /// Payload bytes received by each 100 ms (downloads).
    pub fn delivery(&self) -> &DeliveryLog {
        &self.delivery
    }

    /// The transfer's direction.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// The transfer's size (2⁶⁴ − 1 for a transfer bounded by time).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Payload bytes sent (uploads).
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Payload bytes received (downloads).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// When the client read the server's FIN.
    pub fn done_at(&self) -> Option<Time> {
        self.done_at
    }
}

impl App for BulkClient {
    fn drive(&mut self, session: &mut Session<'_>) {
        let now = session.now();
        while self.actions.first().is_some_and(|(at, _)| *at <= now) {
            let (_, mut action) = self.actions.remove(0);
            action();
        }
        if self.done_at.is_some() || !session.is_connected() {
            return;
        }
        let expired = self.deadline.is_some_and(|deadline| now >= deadline);
        if expired && self.direction == Direction::Download {
            self.done_at = Some(now);
            return;
        }
        let Some(stream) = session.open_bi_once(&mut self.stream) else {
            return;
        };
        let mut header = [0u8; HEADER_LEN];
        header[0] = u8::from(self.direction == Direction::Download);
        header[1..].copy_from_slice(&self.bytes.to_be_bytes());
        while self.header_sent < HEADER_LEN {
            match session.write(stream, &header[self.header_sent..]) {
                Ok(0) | Err(_) => return,
                Ok(n) => self.header_sent += n,
            }
        }
        if self.direction == Direction::Upload && !expired {
            self.sent += write_zeros(session, stream, self.bytes - self.sent);
        }
        let last_written = self.sent == self.bytes || expired;
        if !self.fin_sent && (self.direction == Direction::Download || last_written) {
            self.fin_sent = session.finish(stream).is_ok();
        }
        self.delivery.record(now, self.received);
        if let Ok(status) = session.read(stream, |_| {}) {
            self.received += status.bytes;
            if status.finished {
                self.done_at = Some(session.now());
            }
        }
    }

    fn is_done(&self) -> bool {
        self.done_at.is_some()
    }
}

/// The server side of a bulk transfer, one per connection.
#[derive(Debug, Default)]
pub struct BulkServer {
    stream: Option<StreamId>,
    header: Vec<u8>,
    request: Option<(Direction, u64)>,
    received: u64,
    delivery: DeliveryLog,
    sent: u64,
    fin_sent: bool,
    upload_done_at: Option<Time>,
}

impl BulkServer {
    /// Payload bytes received (uploads).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Payload bytes received by each 100 ms (uploads).
    pub fn delivery(&self) -> &DeliveryLog {
        &self.delivery
    }

    /// When the client's FIN was read: for an upload, when the last
    /// uploaded byte arrived; for a download, when the request did.
    pub fn upload_done_at(&self) -> Option<Time> {
        self.upload_done_at
    }
}

impl App for BulkServer {
    fn drive(&mut self, session: &mut Session<'_>) {
        if self.stream.is_none() {
            self.stream = session.accept_bi();
        }
        let Some(stream) = self.stream else {
            return;
        };
        if self.upload_done_at.is_none() {
            self.delivery.record(session.now(), self.received);
            let (header, request) = (&mut self.header, &mut self.request);
            let mut payload = 0u64;
            let read = session.read(stream, |mut data| {
                if request.is_none() {
                    let take = (HEADER_LEN - header.len()).min(data.len());
                    header.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if header.len() == HEADER_LEN {
                        let direction = if header[0] == 1 {
                            Direction::Download
                        } else {
                            Direction::Upload
                        };
                        let mut n = [0u8; 8];
                        n.copy_from_slice(&header[1..]);
                        *request = Some((direction, u64::from_be_bytes(n)));
                    }
                }
                payload += data.len() as u64;
            });
            self.received += payload;
            if let Ok(status) = read
                && status.finished
            {
                self.upload_done_at = Some(session.now());
            }
        }
        let Some((direction, bytes)) = self.request else {
            return;
        };
        if direction == Direction::Download {
            self.sent += write_zeros(session, stream, bytes - self.sent);
        }
        let ready = match direction {
            Direction::Download => self.sent == bytes,
            Direction::Upload => self.upload_done_at.is_some(),
        };
        if ready && !self.fin_sent {
            self.fin_sent = session.finish(stream).is_ok();
        }
    }

    fn is_done(&self) -> bool {
        self.fin_sent
    }
}

/// Makes a [`BulkServer`] for each connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct BulkServerFactory;

impl AppFactory for BulkServerFactory {
    type App = BulkServer;

    fn make(&mut self) -> BulkServer {
        BulkServer::default()
    }
}

/// The result of one bulk transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BulkReport {
    /// Payload bytes transferred.
    pub bytes: u64,
    /// When the client sent its first packet.
    pub start: Time,
    /// When the last payload byte was delivered to the receiving
    /// application.
    pub end: Time,
    /// `end - start`: the flow completion time, handshake included.
    pub completion: Duration,
    /// `bytes · 8 / completion`.
    pub goodput: Rate,
}

impl BulkReport {
    /// The report of the transfer between `client` and the first
    /// connection of `server`, if it completed.
    pub fn from_hosts(
        client: &QuicClient<BulkClient>,
        server: &QuicServer<BulkServerFactory>,
    ) -> Option<BulkReport> {
        let app = client.app()?;
        let start = client.record()?.first_tx?;
        // A timed transfer is complete with whatever it moved; a sized one
        // when every byte arrived.
        let expected = |received: u64| app.is_timed() || received == app.bytes();
        let (bytes, end) = match app.direction() {
            Direction::Download => {
                if !expected(app.received()) {
                    return None;
                }
                (app.received(), app.done_at()?)
            }
            Direction::Upload => {
                let server_app = server.apps().next()?;
                if !expected(server_app.received()) {
                    return None;
                }
                (server_app.received(), server_app.upload_done_at()?)
            }
        };
        let completion = end - start;
        Some(BulkReport {
            bytes,
            start,
            end,
            completion,
            goodput: Rate::from_bytes_over(bytes, completion),
        })
    }
}
