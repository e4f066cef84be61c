//! The server side of bulk transfers: accepts connections (up to
//! `max_concurrent` at once, a thread each), reads each request header and
//! serves the upload or download, with a record per connection.

use super::{BulkDirection, HEADER_LEN, POLL_INTERVAL, TcpBulkError, ZEROS, decode_header, io_err};
use crate::tcp::congestion::{congestion_in_use, set_congestion};
use crate::tcp::{is_timeout, is_transient_accept_error};
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

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
    set_options(stream, ctx, record)?;
    let mut io = ConnIo {
        stream,
        ctx,
        last_progress: Instant::now(),
    };
    let (direction, requested) = read_request(&mut io, record)?;
    match direction {
        BulkDirection::Upload => receive_upload(&mut io, record, requested),
        BulkDirection::Download => send_download(&mut io, record, requested),
    }
}

/// An accepted socket's options: the congestion controller (read back into
/// `record`), the send buffer, and the timeouts its calls poll with.
fn set_options(
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
    Ok(())
}

/// Reads the request header; returns (and records) its direction and size.
fn read_request(
    io: &mut ConnIo<'_>,
    record: &mut TcpServerRecord,
) -> Result<(BulkDirection, u64), String> {
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
    Ok((direction, requested))
}

/// Upload: counts bytes until end of stream, then replies with one byte
/// (1 if exactly `requested` arrived) and closes the write side.
fn receive_upload(
    io: &mut ConnIo<'_>,
    record: &mut TcpServerRecord,
    requested: u64,
) -> Result<(), String> {
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
    let _ = io.stream.shutdown(Shutdown::Write);
    if !ok {
        return Err(format!(
            "short transfer: expected {requested} bytes, got {}",
            record.bytes
        ));
    }
    Ok(())
}

/// Download: sends `requested` zeros, closes the write side and waits for
/// the client's close.
fn send_download(
    io: &mut ConnIo<'_>,
    record: &mut TcpServerRecord,
    requested: u64,
) -> Result<(), String> {
    while record.bytes < requested {
        let len = (requested - record.bytes).min(ZEROS.len() as u64) as usize;
        io.write_all(&ZEROS[..len], "sending the download")?;
        record.bytes += len as u64;
    }
    io.stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("shutting down after the download: {e}"))?;
    // Wait for the client's close so that closing never resets a
    // connection whose last bytes are still in flight.
    let mut sink = [0u8; 64];
    while io.read(&mut sink, "waiting for the client to close")? > 0 {}
    Ok(())
}
