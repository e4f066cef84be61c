//! Linux TCP bulk transfers: the TCP baseline of the papers.
//!
//! The protocol is the one of pepkit's QUIC bulk workload, on a TCP
//! connection. The client sends a 9-byte header: byte 0 is the direction
//! (1 = download, 0 = upload), bytes 1..9 the transfer size N as a big-endian
//! `u64`.
//!
//! - Upload: the client sends N bytes and shuts down its write side. The
//!   server reads until end of stream, counting bytes and noting when the last
//!   one arrived, then replies with one byte (1 if it received exactly N
//!   bytes, 0 otherwise) and closes.
//! - Download: the server sends N bytes and closes; the client reads until
//!   end of stream.
//!
//! The congestion controller is chosen per socket with `TCP_CONGESTION`
//! (`"cubic"`, `"bbr"`, `"reno"`, …): on the client before it connects, on
//! the server's listener and on each accepted socket. Every blocking call has
//! a timeout, so a [`TcpBulkServer`] notices its stop flag within
//! [`POLL_INTERVAL`] and a [`TcpBulkClient`] never outlives its deadline.
//!
//! Retransmission counters (`TCP_INFO`) are not read: socket2 has no safe
//! wrapper for them and this module has no unsafe code.
//!
//! The client is [`TcpBulkClient`] (`client.rs`), the server
//! [`TcpBulkServer`] (`server.rs`); the controller is set with
//! [`crate::tcp::congestion`].

mod client;
mod server;

pub use client::{TcpBulkClient, TcpBulkClientConfig, TcpBulkReport};
pub use server::{TcpBulkServer, TcpBulkServerConfig, TcpServerRecord};

use crate::tcp::congestion::CongestionError;
use serde::Serialize;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// The length of the request header: direction byte and a big-endian `u64`.
pub const HEADER_LEN: usize = 9;

/// How often blocked accepts, reads and writes wake up to look at stop flags
/// and deadlines.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The payload both sides send (zeros).
static ZEROS: [u8; 128 * 1024] = [0; 128 * 1024];

/// Which way the bytes of a bulk transfer go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkDirection {
    /// Client to server.
    Upload,
    /// Server to client.
    Download,
}

impl BulkDirection {
    /// The header's direction byte.
    pub fn to_byte(self) -> u8 {
        u8::from(self == BulkDirection::Download)
    }

    /// The direction named by a header byte, if it is 0 or 1.
    pub fn from_byte(byte: u8) -> Option<BulkDirection> {
        match byte {
            0 => Some(BulkDirection::Upload),
            1 => Some(BulkDirection::Download),
            _ => None,
        }
    }
}

/// The 9-byte request header for a transfer of `bytes` bytes.
pub fn encode_header(direction: BulkDirection, bytes: u64) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0] = direction.to_byte();
    header[1..].copy_from_slice(&bytes.to_be_bytes());
    header
}

/// The direction and size in a request header, if the direction byte is valid.
pub fn decode_header(header: &[u8; HEADER_LEN]) -> Option<(BulkDirection, u64)> {
    let direction = BulkDirection::from_byte(header[0])?;
    let mut size = [0u8; 8];
    size.copy_from_slice(&header[1..]);
    Some((direction, u64::from_be_bytes(size)))
}

/// A TCP bulk transfer or server failed.
#[derive(Debug, thiserror::Error)]
pub enum TcpBulkError {
    /// The congestion controller could not be set.
    #[error(transparent)]
    Congestion(#[from] CongestionError),
    /// The server refused the connection (nothing listens, or a firewall
    /// answered with a reset).
    #[error("connecting to {addr}: connection refused (is the server running?)")]
    ConnectRefused {
        /// The server's address.
        addr: SocketAddr,
    },
    /// The connection was not established in time.
    #[error("connecting to {addr}: no connection within {timeout:?}")]
    ConnectTimeout {
        /// The server's address.
        addr: SocketAddr,
        /// The connect timeout.
        timeout: Duration,
    },
    /// Connecting failed for another reason.
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// The system error.
        source: io::Error,
    },
    /// The transfer did not finish before its deadline.
    #[error("timed out after {after:?} while {what}")]
    Timeout {
        /// What was going on.
        what: String,
        /// The deadline, measured from the start of the transfer.
        after: Duration,
    },
    /// The stream ended before all bytes arrived.
    #[error("short transfer while {what}: expected {expected} bytes, got {got}")]
    ShortTransfer {
        /// What was being transferred.
        what: String,
        /// Bytes expected.
        expected: u64,
        /// Bytes transferred.
        got: u64,
    },
    /// The upload's server replied that it did not get every byte.
    #[error("the server reports it did not receive all {expected} bytes of the upload")]
    ServerIncomplete {
        /// Bytes sent.
        expected: u64,
    },
    /// The peer broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// The system error.
        source: io::Error,
    },
}

/// A closure mapping an `io::Error` to [`TcpBulkError::Io`] for `what`.
fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> TcpBulkError {
    let what = what.into();
    move |source| TcpBulkError::Io { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread::{self, JoinHandle};
    use std::time::Instant;

    const TWO_MB: u64 = 2_000_000;

    fn server(stop_after: usize) -> (SocketAddr, JoinHandle<Vec<TcpServerRecord>>) {
        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.stop_after = Some(stop_after);
        config.deadline = Some(Duration::from_secs(30));
        let server = TcpBulkServer::bind(config).unwrap();
        let addr = server.local_addr();
        let handle = thread::spawn(move || server.run(Arc::new(AtomicBool::new(false))).unwrap());
        (addr, handle)
    }

    fn transfer(direction: BulkDirection) {
        let (addr, handle) = server(1);
        let mut config = TcpBulkClientConfig::new(addr, direction, TWO_MB);
        config.timeout = Duration::from_secs(20);
        let report = TcpBulkClient::run(&config).unwrap();
        assert_eq!(report.bytes, TWO_MB);
        assert_eq!(report.congestion, "cubic");
        assert!(report.end >= report.connected && report.connected >= report.start);
        let records = handle.join().unwrap();
        assert_eq!(records.len(), 1);
        let record = &records[0];
        assert!(record.complete(), "{record:?}");
        assert_eq!(record.direction, Some(direction));
        assert_eq!(record.requested, TWO_MB);
        assert_eq!(record.bytes, TWO_MB);
        assert_eq!(record.congestion.as_deref(), Some("cubic"));
        assert_eq!(record.peer, report.local);
        if direction == BulkDirection::Upload {
            assert!(record.upload_duration().is_some());
        }
        let json = report.to_json();
        assert_eq!(json["bytes"], TWO_MB);
    }

    #[test]
    fn upload_counts_every_byte() {
        transfer(BulkDirection::Upload);
    }

    #[test]
    fn download_counts_every_byte() {
        transfer(BulkDirection::Download);
    }

    #[test]
    fn header_round_trips() {
        let header = encode_header(BulkDirection::Download, 0x0102_0304_0506_0708);
        assert_eq!(header, [1, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            decode_header(&header),
            Some((BulkDirection::Download, 0x0102_0304_0506_0708))
        );
        assert_eq!(decode_header(&[7; HEADER_LEN]), None);
    }

    #[test]
    fn unknown_controller_is_a_clear_error() {
        let mut config =
            TcpBulkClientConfig::new("127.0.0.1:9".parse().unwrap(), BulkDirection::Upload, 1);
        config.congestion = "no-such-cc".to_owned();
        let err = TcpBulkClient::run(&config).unwrap_err();
        assert!(
            matches!(
                err,
                TcpBulkError::Congestion(CongestionError::Unavailable { .. })
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("congestion controller no-such-cc is not available")
                && text.contains("tcp_available_congestion_control lists: ")
                && text.contains("cubic"),
            "{text}"
        );

        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.congestion = "no-such-cc".to_owned();
        let err = TcpBulkServer::bind(config).unwrap_err();
        assert!(
            err.to_string().contains("no-such-cc is not available"),
            "{err}"
        );
    }

    #[test]
    fn refused_connection_is_named() {
        // Bind a port, then free it: nothing listens there any more.
        let addr = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let config = TcpBulkClientConfig::new(addr, BulkDirection::Download, 10);
        let err = TcpBulkClient::run(&config).unwrap_err();
        assert!(
            matches!(err, TcpBulkError::ConnectRefused { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn server_stops_on_flag() {
        let server =
            TcpBulkServer::bind(TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::spawn(move || server.run(flag).unwrap());
        thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
        let started = Instant::now();
        assert!(handle.join().unwrap().is_empty());
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn concurrent_connections_are_served() {
        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.max_concurrent = 4;
        config.stop_after = Some(4);
        config.deadline = Some(Duration::from_secs(30));
        let server = TcpBulkServer::bind(config).unwrap();
        let addr = server.local_addr();
        let handle = thread::spawn(move || server.run(Arc::new(AtomicBool::new(false))).unwrap());
        let clients: Vec<_> = (0..4)
            .map(|i| {
                thread::spawn(move || {
                    let direction = if i % 2 == 0 {
                        BulkDirection::Upload
                    } else {
                        BulkDirection::Download
                    };
                    TcpBulkClient::run(&TcpBulkClientConfig::new(addr, direction, 300_000)).unwrap()
                })
            })
            .collect();
        for client in clients {
            assert_eq!(client.join().unwrap().bytes, 300_000);
        }
        let records = handle.join().unwrap();
        assert_eq!(records.len(), 4);
        assert!(records.iter().all(TcpServerRecord::complete));
    }
}
