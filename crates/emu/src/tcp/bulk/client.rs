//! The client side of a bulk transfer: connects within its timeout,
//! sends the header, then uploads or downloads by a deadline.

use super::{BulkDirection, TcpBulkError, ZEROS, encode_header, io_err};
use crate::tcp::congestion::{congestion_in_use, set_congestion};
use crate::tcp::is_timeout;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

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
        let socket = open_socket(config)?;
        let start = Instant::now();
        let deadline = Deadline::new(start, config.timeout);
        let stream = connect(socket, config)?;
        let connected = Instant::now();
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
            BulkDirection::Upload => upload(&deadline, &stream, config.bytes)?,
            BulkDirection::Download => download(&deadline, &stream, config.bytes, connected)?,
        };
        Ok(TcpBulkReport {
            direction: config.direction,
            bytes,
            start,
            connected,
            end,
            congestion,
            local,
            peer: config.server,
        })
    }
}

/// The client's socket, not yet connected: its congestion controller, its
/// buffers and its local address set as `config` says.
fn open_socket(config: &TcpBulkClientConfig) -> Result<Socket, TcpBulkError> {
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
    Ok(socket)
}

/// Connects `socket` to the server within the connect timeout (at most the
/// whole transfer's), naming a refusal and a timeout.
fn connect(socket: Socket, config: &TcpBulkClientConfig) -> Result<TcpStream, TcpBulkError> {
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
    Ok(TcpStream::from(socket))
}

/// Sends `bytes` zeros, shuts down the write side and reads the server's
/// one-byte reply; returns the bytes sent and when the reply came.
fn upload(
    deadline: &Deadline,
    stream: &TcpStream,
    bytes: u64,
) -> Result<(u64, Instant), TcpBulkError> {
    let sent = deadline.write_zeros(stream, bytes, "uploading")?;
    stream
        .shutdown(Shutdown::Write)
        .map_err(io_err("shutting down the write side after the upload"))?;
    let what = "waiting for the server's reply to the upload";
    let reply = deadline.read_to_end(stream, what)?;
    match (reply.bytes, reply.first) {
        (1, Some(1)) => {}
        (1, _) => {
            return Err(TcpBulkError::ServerIncomplete { expected: bytes });
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
    Ok((sent, reply.last_at.unwrap_or_else(Instant::now)))
}

/// Reads until the server closes and checks that `bytes` arrived; returns
/// them and when the last one came (`connected` if none did).
fn download(
    deadline: &Deadline,
    stream: &TcpStream,
    bytes: u64,
    connected: Instant,
) -> Result<(u64, Instant), TcpBulkError> {
    let got = deadline.read_to_end(stream, "downloading")?;
    if got.bytes != bytes {
        return Err(TcpBulkError::ShortTransfer {
            what: "downloading".to_owned(),
            expected: bytes,
            got: got.bytes,
        });
    }
    Ok((got.bytes, got.last_at.unwrap_or(connected)))
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
