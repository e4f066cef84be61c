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

use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The length of the request header: direction byte and a big-endian `u64`.
pub const HEADER_LEN: usize = 9;

/// How often blocked accepts, reads and writes wake up to look at stop flags
/// and deadlines.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The file listing the congestion controllers the kernel has loaded.
const AVAILABLE_CONTROLLERS: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// The file listing the controllers unprivileged sockets may choose.
const ALLOWED_CONTROLLERS: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

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

/// Setting a socket's congestion controller failed.
#[derive(Debug, thiserror::Error)]
pub enum CongestionError {
    /// The kernel does not know the controller (`ENOENT`, `EINVAL`).
    #[error(
        "congestion controller {name} is not available; \
         /proc/sys/net/ipv4/tcp_available_congestion_control lists: {available}"
    )]
    Unavailable {
        /// The controller asked for.
        name: String,
        /// The controllers the kernel lists, space-separated.
        available: String,
    },
    /// The controller exists but this process may not choose it (`EPERM`).
    #[error(
        "congestion controller {name} is not allowed for this process; \
         /proc/sys/net/ipv4/tcp_allowed_congestion_control lists: {allowed}"
    )]
    NotAllowed {
        /// The controller asked for.
        name: String,
        /// The controllers unprivileged sockets may choose, space-separated.
        allowed: String,
    },
    /// Any other failure of `setsockopt(TCP_CONGESTION)`.
    #[error("setting congestion controller {name} failed: {source}")]
    Other {
        /// The controller asked for.
        name: String,
        /// The system error.
        source: io::Error,
    },
}

/// The congestion controllers the kernel has loaded
/// (`/proc/sys/net/ipv4/tcp_available_congestion_control`).
pub fn available_congestion_controls() -> Vec<String> {
    read_list(AVAILABLE_CONTROLLERS)
}

/// A space-separated list from a procfs file, empty if it cannot be read.
fn read_list(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|text| text.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A list for an error message.
fn describe_list(path: &str) -> String {
    let list = read_list(path);
    if list.is_empty() {
        format!("(could not read {path})")
    } else {
        list.join(" ")
    }
}

/// Sets a TCP socket's congestion controller (`TCP_CONGESTION`) by name.
pub fn set_congestion(socket: SockRef<'_>, name: &str) -> Result<(), CongestionError> {
    socket
        .set_tcp_congestion(name.as_bytes())
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINVAL) => CongestionError::Unavailable {
                name: name.to_owned(),
                available: describe_list(AVAILABLE_CONTROLLERS),
            },
            Some(libc::EPERM) => CongestionError::NotAllowed {
                name: name.to_owned(),
                allowed: describe_list(ALLOWED_CONTROLLERS),
            },
            _ => CongestionError::Other {
                name: name.to_owned(),
                source,
            },
        })
}

/// The congestion controller a TCP socket uses, read back with
/// `getsockopt(TCP_CONGESTION)`.
pub fn congestion_in_use(socket: SockRef<'_>) -> io::Result<String> {
    let name = socket.tcp_congestion()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
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

/// Whether an error only means "the timeout fired".
pub(crate) fn is_timeout(error: &io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// What a [`TcpBulkClient`] does.
#[derive(Clone, Debug)]
pub struct TcpBulkClientConfig {
    /// The server's address.
    pub server: SocketAddr,
    /// Upload or download.
    pub direction: BulkDirection,
    /// Bytes to transfer (N).
    pub bytes: u64,
    /// The congestion controller, set before connecting.
    pub congestion: String,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long the whole transfer (connect included) may take.
    pub timeout: Duration,
    /// A local address to bind before connecting (`None`: the kernel picks).
    pub bind: Option<SocketAddr>,
    /// `SO_SNDBUF` (`None`: the kernel autotunes).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` (`None`: the kernel autotunes).
    pub recv_buffer: Option<usize>,
}

impl TcpBulkClientConfig {
    /// A transfer with CUBIC, a 5 s connect timeout and a 60 s deadline.
    pub fn new(server: SocketAddr, direction: BulkDirection, bytes: u64) -> TcpBulkClientConfig {
        TcpBulkClientConfig {
            server,
            direction,
            bytes,
            congestion: "cubic".to_owned(),
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(60),
            bind: None,
            send_buffer: None,
            recv_buffer: None,
        }
    }
}

/// What a finished client transfer measured.
#[derive(Clone, Debug)]
pub struct TcpBulkReport {
    /// Upload or download.
    pub direction: BulkDirection,
    /// Payload bytes transferred (N on success; the header is not counted).
    pub bytes: u64,
    /// Just before connecting.
    pub start: Instant,
    /// When the connection was established.
    pub connected: Instant,
    /// Download: when the last byte was read. Upload: when the server's
    /// one-byte reply was read.
    pub end: Instant,
    /// The congestion controller the socket used, as the kernel reports it.
    pub congestion: String,
    /// The client's address.
    pub local: SocketAddr,
    /// The server's address.
    pub peer: SocketAddr,
}

impl TcpBulkReport {
    /// From just before connecting to the end of the transfer.
    pub fn duration(&self) -> Duration {
        self.end.saturating_duration_since(self.start)
    }

    /// Payload bits per second over [`TcpBulkReport::duration`].
    pub fn goodput_bps(&self) -> f64 {
        let secs = self.duration().as_secs_f64();
        if secs > 0.0 {
            self.bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    }

    /// The report as JSON, times in seconds from [`TcpBulkReport::start`].
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "direction": self.direction,
            "bytes": self.bytes,
            "connect_s": self.connected.saturating_duration_since(self.start).as_secs_f64(),
            "duration_s": self.duration().as_secs_f64(),
            "goodput_mbps": self.goodput_bps() / 1e6,
            "congestion": self.congestion,
            "local": self.local.to_string(),
            "peer": self.peer.to_string(),
        })
    }
}

/// The client side of a TCP bulk transfer.
#[derive(Debug)]
pub struct TcpBulkClient;

impl TcpBulkClient {
    /// Connects, transfers and reports, within `config.timeout`.
    pub fn run(config: &TcpBulkClientConfig) -> Result<TcpBulkReport, TcpBulkError> {
        let socket = Socket::new(
            Domain::for_address(config.server),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(io_err("creating a TCP socket"))?;
        set_congestion(SockRef::from(&socket), &config.congestion)?;
        if let Some(size) = config.send_buffer {
            socket
                .set_send_buffer_size(size)
                .map_err(io_err("setting SO_SNDBUF"))?;
        }
        if let Some(size) = config.recv_buffer {
            socket
                .set_recv_buffer_size(size)
                .map_err(io_err("setting SO_RCVBUF"))?;
        }
        if let Some(bind) = config.bind {
            socket
                .set_reuse_address(true)
                .map_err(io_err("setting SO_REUSEADDR"))?;
            socket
                .bind(&SockAddr::from(bind))
                .map_err(io_err(format!("binding {bind}")))?;
        }

        let start = Instant::now();
        let deadline = Deadline::new(start, config.timeout);
        let addr = config.server;
        let connect_timeout = config.connect_timeout.min(config.timeout);
        if connect_timeout.is_zero() {
            return Err(TcpBulkError::ConnectTimeout {
                addr,
                timeout: connect_timeout,
            });
        }
        socket
            .connect_timeout(&SockAddr::from(addr), connect_timeout)
            .map_err(|source| match source.kind() {
                ErrorKind::ConnectionRefused => TcpBulkError::ConnectRefused { addr },
                ErrorKind::WouldBlock | ErrorKind::TimedOut => TcpBulkError::ConnectTimeout {
                    addr,
                    timeout: connect_timeout,
                },
                _ => TcpBulkError::Connect { addr, source },
            })?;
        let connected = Instant::now();
        let stream = TcpStream::from(socket);
        let congestion = congestion_in_use(SockRef::from(&stream))
            .map_err(io_err("reading TCP_CONGESTION back"))?;
        let local = stream
            .local_addr()
            .map_err(io_err("reading the local address"))?;

        deadline.write_all(
            &stream,
            &encode_header(config.direction, config.bytes),
            "sending the request header",
        )?;
        let (bytes, end) = match config.direction {
            BulkDirection::Upload => {
                let sent = deadline.write_zeros(&stream, config.bytes, "uploading")?;
                stream
                    .shutdown(Shutdown::Write)
                    .map_err(io_err("shutting down the write side after the upload"))?;
                let what = "waiting for the server's reply to the upload";
                let reply = deadline.read_to_end(&stream, what)?;
                match (reply.bytes, reply.first) {
                    (1, Some(1)) => {}
                    (1, _) => {
                        return Err(TcpBulkError::ServerIncomplete {
                            expected: config.bytes,
                        });
                    }
                    (0, _) => {
                        return Err(TcpBulkError::ShortTransfer {
                            what: what.to_owned(),
                            expected: 1,
                            got: 0,
                        });
                    }
                    (n, _) => {
                        return Err(TcpBulkError::Protocol(format!(
                            "the server replied to the upload with {n} bytes instead of one"
                        )));
                    }
                }
                (sent, reply.last_at.unwrap_or_else(Instant::now))
            }
            BulkDirection::Download => {
                let got = deadline.read_to_end(&stream, "downloading")?;
                if got.bytes != config.bytes {
                    return Err(TcpBulkError::ShortTransfer {
                        what: "downloading".to_owned(),
                        expected: config.bytes,
                        got: got.bytes,
                    });
                }
                (got.bytes, got.last_at.unwrap_or(connected))
            }
        };
        Ok(TcpBulkReport {
            direction: config.direction,
            bytes,
            start,
            connected,
            end,
            congestion,
            local,
            peer: addr,
        })
    }
}

/// An absolute deadline for the client's blocking calls.
struct Deadline {
    at: Instant,
    total: Duration,
}

impl Deadline {
    fn new(start: Instant, total: Duration) -> Deadline {
        Deadline {
            at: start + total,
            total,
        }
    }

    /// The time left, or a timeout error naming `what`.
    fn left(&self, what: &str) -> Result<Duration, TcpBulkError> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(TcpBulkError::Timeout {
                what: what.to_owned(),
                after: self.total,
            })
        } else {
            Ok(left)
        }
    }

    /// Writes all of `buf`, or fails by the deadline.
    fn write_all(
        &self,
        stream: &TcpStream,
        mut buf: &[u8],
        what: &str,
    ) -> Result<(), TcpBulkError> {
        while !buf.is_empty() {
            stream
                .set_write_timeout(Some(self.left(what)?))
                .map_err(io_err("setting the write timeout"))?;
            match (&*stream).write(buf) {
                Ok(0) => {
                    return Err(TcpBulkError::Io {
                        what: what.to_owned(),
                        source: io::Error::from(ErrorKind::WriteZero),
                    });
                }
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {}
                Err(source) => {
                    return Err(TcpBulkError::Io {
                        what: what.to_owned(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Writes `count` zero bytes; returns `count`.
    fn write_zeros(&self, stream: &TcpStream, count: u64, what: &str) -> Result<u64, TcpBulkError> {
        let mut sent = 0u64;
        while sent < count {
            let len = (count - sent).min(ZEROS.len() as u64) as usize;
            self.write_all(stream, &ZEROS[..len], what)
                .map_err(|e| match e {
                    TcpBulkError::Io { what, source } => TcpBulkError::Io {
                        what: format!("{what} (sent {sent} of {count} bytes)"),
                        source,
                    },
                    other => other,
                })?;
            sent += len as u64;
        }
        Ok(sent)
    }

    /// Reads until end of stream, counting bytes; returns the count, when
    /// the last byte arrived and the first byte.
    fn read_to_end(&self, stream: &TcpStream, what: &str) -> Result<ReadToEnd, TcpBulkError> {
        let mut buf = vec![0u8; 128 * 1024];
        let mut done = ReadToEnd::default();
        loop {
            stream
                .set_read_timeout(Some(self.left(what)?))
                .map_err(io_err("setting the read timeout"))?;
            match (&*stream).read(&mut buf) {
                Ok(0) => return Ok(done),
                Ok(n) => {
                    if done.bytes == 0 {
                        done.first = Some(buf[0]);
                    }
                    done.bytes += n as u64;
                    done.last_at = Some(Instant::now());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {}
                Err(source) => {
                    return Err(TcpBulkError::Io {
                        what: format!("{what} (received {} bytes)", done.bytes),
                        source,
                    });
                }
            }
        }
    }
}

/// What [`Deadline::read_to_end`] read.
#[derive(Default)]
struct ReadToEnd {
    bytes: u64,
    last_at: Option<Instant>,
    first: Option<u8>,
}

/// How a [`TcpBulkServer`] runs.
#[derive(Clone, Debug)]
pub struct TcpBulkServerConfig {
    /// The address to listen on (port 0: an ephemeral port, see
    /// [`TcpBulkServer::local_addr`]).
    pub listen: SocketAddr,
    /// The congestion controller of the listener and of every accepted socket.
    pub congestion: String,
    /// Connections served at once (1: one after the other). Further clients
    /// wait in the listen backlog.
    pub max_concurrent: usize,
    /// Stop this long after [`TcpBulkServer::run`] starts (`None`: only the
    /// stop flag or [`TcpBulkServerConfig::stop_after`] stops it).
    pub deadline: Option<Duration>,
    /// Close a connection that moves no byte for this long.
    pub idle_timeout: Duration,
    /// Stop once this many connections have been served.
    pub stop_after: Option<usize>,
    /// `SO_SNDBUF` of accepted sockets (`None`: the kernel autotunes).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` of the listener, inherited by accepted sockets (`None`:
    /// the kernel autotunes).
    pub recv_buffer: Option<usize>,
}

impl TcpBulkServerConfig {
    /// CUBIC, one connection at a time, no deadline, a 30 s idle timeout.
    pub fn new(listen: SocketAddr) -> TcpBulkServerConfig {
        TcpBulkServerConfig {
            listen,
            congestion: "cubic".to_owned(),
            max_concurrent: 1,
            deadline: None,
            idle_timeout: Duration::from_secs(30),
            stop_after: None,
            send_buffer: None,
            recv_buffer: None,
        }
    }
}

/// What the server saw of one connection.
#[derive(Clone, Debug)]
pub struct TcpServerRecord {
    /// The client's address as the server sees it.
    pub peer: SocketAddr,
    /// The server's address of this connection.
    pub local: SocketAddr,
    /// The requested direction, once the header arrived.
    pub direction: Option<BulkDirection>,
    /// The requested size N, once the header arrived.
    pub requested: u64,
    /// Payload bytes received (upload) or sent (download).
    pub bytes: u64,
    /// The congestion controller of the accepted socket.
    pub congestion: Option<String>,
    /// When the connection was accepted.
    pub accepted_at: Instant,
    /// When the whole header had arrived.
    pub header_at: Option<Instant>,
    /// Upload: when the last payload byte arrived.
    pub last_byte_at: Option<Instant>,
    /// When the server was done with the connection.
    pub finished_at: Instant,
    /// Why the connection failed, if it did.
    pub error: Option<String>,
}

impl TcpServerRecord {
    fn new(peer: SocketAddr, local: SocketAddr, accepted_at: Instant) -> TcpServerRecord {
        TcpServerRecord {
            peer,
            local,
            direction: None,
            requested: 0,
            bytes: 0,
            congestion: None,
            accepted_at,
            header_at: None,
            last_byte_at: None,
            finished_at: accepted_at,
            error: None,
        }
    }

    /// Whether the request was served in full.
    pub fn complete(&self) -> bool {
        self.error.is_none() && self.direction.is_some() && self.bytes == self.requested
    }

    /// Upload: from the header's arrival to the last payload byte's.
    pub fn upload_duration(&self) -> Option<Duration> {
        Some(
            self.last_byte_at?
                .saturating_duration_since(self.header_at?),
        )
    }

    /// The record as JSON, times in seconds from [`TcpServerRecord::accepted_at`].
    pub fn to_json(&self) -> serde_json::Value {
        let since = |t: Option<Instant>| {
            t.map(|t| t.saturating_duration_since(self.accepted_at).as_secs_f64())
        };
        serde_json::json!({
            "peer": self.peer.to_string(),
            "local": self.local.to_string(),
            "direction": self.direction,
            "requested": self.requested,
            "bytes": self.bytes,
            "complete": self.complete(),
            "congestion": self.congestion,
            "header_s": since(self.header_at),
            "last_byte_s": since(self.last_byte_at),
            "finished_s": since(Some(self.finished_at)),
            "error": self.error,
        })
    }
}

/// A TCP bulk server: binds on creation, serves in [`TcpBulkServer::run`].
#[derive(Debug)]
pub struct TcpBulkServer {
    listener: Socket,
    local: SocketAddr,
    config: TcpBulkServerConfig,
}

impl TcpBulkServer {
    /// Creates the listener (`SO_REUSEADDR`, the congestion controller) and
    /// binds it.
    pub fn bind(config: TcpBulkServerConfig) -> Result<TcpBulkServer, TcpBulkError> {
        let listener = Socket::new(
            Domain::for_address(config.listen),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(io_err("creating the listening socket"))?;
        listener
            .set_reuse_address(true)
            .map_err(io_err("setting SO_REUSEADDR"))?;
        set_congestion(SockRef::from(&listener), &config.congestion)?;
        if let Some(size) = config.recv_buffer {
            listener
                .set_recv_buffer_size(size)
                .map_err(io_err("setting SO_RCVBUF"))?;
        }
        listener
            .bind(&SockAddr::from(config.listen))
            .map_err(io_err(format!("binding {}", config.listen)))?;
        listener
            .listen(1024)
            .map_err(io_err(format!("listening on {}", config.listen)))?;
        // Linux's accept honours SO_RCVTIMEO: accept wakes up to look at the
        // stop flag.
        listener
            .set_read_timeout(Some(POLL_INTERVAL))
            .map_err(io_err("setting the accept timeout"))?;
        let local = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| TcpBulkError::Protocol("the listener has no IP address".to_owned()))?;
        Ok(TcpBulkServer {
            listener,
            local,
            config,
        })
    }

    /// The address the server listens on (with the real port if port 0 was
    /// asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves connections until `stop` is set, the deadline passes or
    /// `stop_after` connections were served; returns one record per
    /// connection, in the order they were accepted. Connections still open
    /// when it stops are aborted.
    pub fn run(self, stop: Arc<AtomicBool>) -> Result<Vec<TcpServerRecord>, TcpBulkError> {
        let started = Instant::now();
        let deadline = self.config.deadline.map(|d| started + d);
        let conn = Arc::new(ConnContext {
            congestion: self.config.congestion.clone(),
            idle_timeout: self.config.idle_timeout,
            send_buffer: self.config.send_buffer,
            stop: Arc::clone(&stop),
            abort: AtomicBool::new(false),
            deadline,
        });
        let max_concurrent = self.config.max_concurrent.max(1);
        let mut running: Vec<(usize, JoinHandle<TcpServerRecord>)> = Vec::new();
        let mut records: Vec<(usize, TcpServerRecord)> = Vec::new();
        let mut accepted = 0usize;
        let mut result = Ok(());
        loop {
            reap(&mut running, &mut records, false);
            if conn.should_stop() {
                break;
            }
            if let Some(limit) = self.config.stop_after {
                if records.len() >= limit {
                    break;
                }
                if accepted >= limit {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                }
            }
            if running.len() >= max_concurrent {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
            match self.listener.accept() {
                Ok((socket, peer)) => {
                    let accepted_at = Instant::now();
                    let stream = TcpStream::from(socket);
                    let peer = peer.as_socket().unwrap_or(self.local);
                    let local = stream.local_addr().unwrap_or(self.local);
                    let index = accepted;
                    accepted += 1;
                    let ctx = Arc::clone(&conn);
                    let spawned = thread::Builder::new()
                        .name(format!("tcp-bulk-{index}"))
                        .spawn(move || serve(stream, peer, local, accepted_at, &ctx));
                    match spawned {
                        Ok(handle) => running.push((index, handle)),
                        Err(e) => {
                            let mut record = TcpServerRecord::new(peer, local, accepted_at);
                            record.error = Some(format!("spawning a thread: {e}"));
                            records.push((index, record));
                        }
                    }
                }
                Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_transient_accept_error(&e) => thread::sleep(POLL_INTERVAL),
                Err(source) => {
                    result = Err(TcpBulkError::Io {
                        what: format!("accepting on {}", self.local),
                        source,
                    });
                    break;
                }
            }
        }
        // Connections still running end on their own (stop_after, idle) or
        // see the stop flag or deadline; tell them to stop if we are ending
        // for another reason.
        if result.is_err() {
            conn.abort.store(true, Ordering::Relaxed);
        }
        reap(&mut running, &mut records, true);
        result?;
        records.sort_by_key(|(index, _)| *index);
        Ok(records.into_iter().map(|(_, r)| r).collect())
    }
}

/// Errors after which accepting can go on.
pub(crate) fn is_transient_accept_error(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::EPROTO
                | libc::EPERM
        )
    ) || error.kind() == ErrorKind::ConnectionReset
}

/// Moves finished connection threads' records into `records` (all of them,
/// waiting, if `all`).
fn reap(
    running: &mut Vec<(usize, JoinHandle<TcpServerRecord>)>,
    records: &mut Vec<(usize, TcpServerRecord)>,
    all: bool,
) {
    let mut i = 0;
    while i < running.len() {
        if all || running[i].1.is_finished() {
            let (index, handle) = running.swap_remove(i);
            if let Ok(record) = handle.join() {
                records.push((index, record));
            }
        } else {
            i += 1;
        }
    }
}

/// What every connection thread of a server shares.
struct ConnContext {
    congestion: String,
    idle_timeout: Duration,
    send_buffer: Option<usize>,
    stop: Arc<AtomicBool>,
    /// Set when the server ends for an error of its own.
    abort: AtomicBool,
    deadline: Option<Instant>,
}

impl ConnContext {
    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.abort.load(Ordering::Relaxed)
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Serves one connection; never panics on network errors.
fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    accepted_at: Instant,
    ctx: &ConnContext,
) -> TcpServerRecord {
    let mut record = TcpServerRecord::new(peer, local, accepted_at);
    if let Err(e) = serve_inner(&stream, ctx, &mut record) {
        record.error = Some(e);
    }
    record.finished_at = Instant::now();
    record
}

/// A poller for one connection's blocking calls: every wait is at most
/// [`POLL_INTERVAL`], and gives up on stop, deadline or idle timeout.
struct ConnIo<'a> {
    stream: &'a TcpStream,
    ctx: &'a ConnContext,
    last_progress: Instant,
}

impl ConnIo<'_> {
    /// An error if waiting must end.
    fn check(&self, what: &str) -> Result<(), String> {
        if self.ctx.should_stop() {
            return Err(format!("server stopping while {what}"));
        }
        if self.last_progress.elapsed() >= self.ctx.idle_timeout {
            return Err(format!("idle for {:?} while {what}", self.ctx.idle_timeout));
        }
        Ok(())
    }

    /// One read: `Ok(0)` is end of stream.
    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<usize, String> {
        loop {
            match (&*self.stream).read(buf) {
                Ok(n) => {
                    if n > 0 {
                        self.last_progress = Instant::now();
                    }
                    // A busy connection never times out: look at the stop
                    // flag and the deadline between calls too.
                    if self.ctx.should_stop() {
                        return Err(format!("server stopping while {what}"));
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {
                    self.check(what)?;
                }
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
    }

    fn write_all(&mut self, mut buf: &[u8], what: &str) -> Result<(), String> {
        while !buf.is_empty() {
            match (&*self.stream).write(buf) {
                Ok(0) => return Err(format!("{what}: the socket accepted no bytes")),
                Ok(n) => {
                    buf = &buf[n..];
                    self.last_progress = Instant::now();
                    if self.ctx.should_stop() {
                        return Err(format!("server stopping while {what}"));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {
                    self.check(what)?;
                }
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
        Ok(())
    }
}

fn serve_inner(
    stream: &TcpStream,
    ctx: &ConnContext,
    record: &mut TcpServerRecord,
) -> Result<(), String> {
    let sock = SockRef::from(stream);
    set_congestion(sock, &ctx.congestion).map_err(|e| e.to_string())?;
    record.congestion = congestion_in_use(SockRef::from(stream)).ok();
    if let Some(size) = ctx.send_buffer {
        SockRef::from(stream)
            .set_send_buffer_size(size)
            .map_err(|e| format!("setting SO_SNDBUF: {e}"))?;
    }
    stream
        .set_read_timeout(Some(POLL_INTERVAL))
        .map_err(|e| format!("setting the read timeout: {e}"))?;
    stream
        .set_write_timeout(Some(POLL_INTERVAL))
        .map_err(|e| format!("setting the write timeout: {e}"))?;
    let mut io = ConnIo {
        stream,
        ctx,
        last_progress: Instant::now(),
    };

    let mut header = [0u8; HEADER_LEN];
    let mut have = 0;
    while have < HEADER_LEN {
        match io.read(&mut header[have..], "reading the request header")? {
            0 => {
                return Err(format!(
                    "the client closed after {have} of {HEADER_LEN} header bytes"
                ));
            }
            n => have += n,
        }
    }
    record.header_at = Some(Instant::now());
    let (direction, requested) = decode_header(&header)
        .ok_or_else(|| format!("bad direction byte {} in the request header", header[0]))?;
    record.direction = Some(direction);
    record.requested = requested;

    match direction {
        BulkDirection::Upload => {
            let mut buf = vec![0u8; 128 * 1024];
            loop {
                match io.read(&mut buf, "receiving the upload")? {
                    0 => break,
                    n => {
                        record.bytes += n as u64;
                        record.last_byte_at = Some(io.last_progress);
                    }
                }
            }
            let ok = record.bytes == requested;
            io.write_all(&[u8::from(ok)], "replying to the upload")?;
            let _ = stream.shutdown(Shutdown::Write);
            if !ok {
                return Err(format!(
                    "short transfer: expected {requested} bytes, got {}",
                    record.bytes
                ));
            }
        }
        BulkDirection::Download => {
            while record.bytes < requested {
                let len = (requested - record.bytes).min(ZEROS.len() as u64) as usize;
                io.write_all(&ZEROS[..len], "sending the download")?;
                record.bytes += len as u64;
            }
            stream
                .shutdown(Shutdown::Write)
                .map_err(|e| format!("shutting down after the download: {e}"))?;
            // Wait for the client's close so that closing never resets a
            // connection whose last bytes are still in flight.
            let mut sink = [0u8; 64];
            while io.read(&mut sink, "waiting for the client to close")? > 0 {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
