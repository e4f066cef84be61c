//! The server: bulk downloads, uploads and RTC frames on one UDP port,
//! for up to `MAX_CONNS` connections at once, until SIGTERM.

use crate::common::{
    self, BULK_HEADER, FRAME_HEAD, Flushed, MAX_FRAME_BYTES, MAX_FRAMES, MAX_READS, Output,
    RECV_BUF, RTC_HEADER, ZEROS, be_u64,
};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Connections served at once, as the ngtcp2 RTC peer; an Initial that
/// finds the table full is dropped and the client retries it.
const MAX_CONNS: usize = 64;
/// quiche stream priority of the frames' streams: its default urgency,
/// but not incremental, so that quiche sends them in order of stream ID
/// (of generation) instead of round-robin.
const FRAME_URGENCY: u8 = 127;
/// Application error code for a request this server cannot serve.
const BAD_REQUEST: u64 = 1;

/// What a connection's client asked for, and how far it has got.
enum Work {
    /// The request header, so far, on the client's first bidirectional stream.
    Request {
        stream: Option<u64>,
        header: Vec<u8>,
    },
    /// Download: N bytes left to hand to quiche, then FIN.
    Download { stream: u64, left: u64 },
    /// Upload: the client sends `expected` bytes; `got` so far.
    Upload {
        stream: u64,
        expected: u64,
        got: u64,
    },
    /// Upload complete: the empty FIN that acknowledges it is still to be sent.
    UploadAck { stream: u64 },
    /// RTC frames.
    Rtc(Frames),
    /// All sent: the client closes the connection.
    Done,
}

/// The RTC frames of one connection: frame k is generated at
/// start + k/fps and sent on the server's k-th unidirectional stream,
/// in order of generation. A frame held back by the congestion window
/// waits in `queued` without holding back the next one's generation.
struct Frames {
    frames: u64,
    fps: u64,
    bytes: u64,
    start: Instant,
    generated: u64,
    /// Generated frames not yet wholly handed to quiche, oldest first:
    /// their 16-byte heads (index, generation time).
    queued: VecDeque<[u8; FRAME_HEAD]>,
    /// Bytes of the oldest queued frame already handed to quiche.
    offset: u64,
}

impl Frames {
    fn due(&self, k: u64) -> Instant {
        self.start + Duration::from_nanos(k.saturating_mul(1_000_000_000) / self.fps)
    }

    /// When the next frame is due, if any is left.
    fn next_due(&self) -> Option<Instant> {
        (self.generated < self.frames).then(|| self.due(self.generated))
    }

    /// Generates the frames that are due by `now`.
    fn generate(&mut self, now: Instant) {
        while self.generated < self.frames && self.due(self.generated) <= now {
            let mut head = [0; FRAME_HEAD];
            head[..8].copy_from_slice(&self.generated.to_be_bytes());
            head[8..].copy_from_slice(&common::unix_ns().to_be_bytes());
            self.queued.push_back(head);
            self.generated += 1;
        }
    }

    /// Hands queued frames to quiche until it takes no more (congestion
    /// window, flow control or the client's stream limit). Returns whether
    /// every frame has been handed over.
    fn write(&mut self, conn: &mut quiche::Connection) -> Result<bool, quiche::Error> {
        while let Some(head) = self.queued.front() {
            let index = self.generated - self.queued.len() as u64;
            let stream = 4 * index + 3; // the server's unidirectional streams
            if self.offset == 0 {
                match conn.stream_priority(stream, FRAME_URGENCY, false) {
                    Ok(()) => {}
                    Err(quiche::Error::StreamLimit) => return Ok(false), // no credit yet
                    Err(e) => return Err(e),
                }
            }
            let (data, fin) = if self.offset < FRAME_HEAD as u64 {
                (&head[self.offset as usize..], false)
            } else {
                let left = self.bytes - self.offset;
                let n = left.min(ZEROS.len() as u64);
                (&ZEROS[..n as usize], n == left)
            };
            let n = match conn.stream_send(stream, data, fin) {
                Ok(n) => n,
                Err(quiche::Error::Done | quiche::Error::StreamLimit) => return Ok(false),
                Err(e) => return Err(e),
            };
            self.offset += n as u64;
            if self.offset == self.bytes {
                self.queued.pop_front();
                self.offset = 0;
            } else if n < data.len() {
                return Ok(false); // quiche took part: no room for more now
            }
        }
        Ok(self.generated == self.frames)
    }
}

struct Connection {
    conn: quiche::Connection,
    /// The client's first destination connection ID: its Initials until it
    /// learns ours.
    odcid: quiche::ConnectionId<'static>,
    work: Work,
    output: Output,
    /// When the output next needs a turn (pacing), if it does.
    send_at: Option<Instant>,
}

impl Connection {
    /// Reads what the client sent on its streams and advances the work.
    fn read(&mut self, buf: &mut [u8]) {
        let readable: Vec<u64> = self.conn.readable().collect();
        for stream in readable {
            // A bounded drain: quiche holds at most a stream window per stream.
            while let Ok((n, fin)) = self.conn.stream_recv(stream, buf) {
                self.on_data(stream, &buf[..n], fin);
            }
        }
    }

    fn on_data(&mut self, stream: u64, data: &[u8], fin: bool) {
        match &mut self.work {
            Work::Request {
                stream: request,
                header,
            } => {
                // The client's first bidirectional stream carries the request.
                if stream & 3 != 0 || *request.get_or_insert(stream) != stream {
                    return;
                }
                let want = match header.first().or(data.first()) {
                    Some(2) => RTC_HEADER,
                    _ => BULK_HEADER,
                };
                let take = data.len().min(want - header.len());
                header.extend_from_slice(&data[..take]);
                if header.len() == want {
                    let rest = &data[take..];
                    self.work = self.start(stream);
                    if !rest.is_empty() || fin {
                        self.on_data(stream, rest, fin);
                    }
                } else if fin {
                    self.fail("the request ended before its header");
                }
            }
            Work::Upload {
                stream: s,
                expected,
                got,
            } if *s == stream => {
                *got += data.len() as u64;
                if fin {
                    if *got == *expected {
                        self.work = Work::UploadAck { stream };
                    } else {
                        let why = format!("upload: got {got} bytes, header said {expected}");
                        self.fail(&why);
                    }
                }
            }
            // Downloads and RTC ignore the rest of the request stream (our
            // clients FIN it at once), as the other servers do.
            _ => {}
        }
    }

    /// The work a complete request header asks for.
    fn start(&mut self, stream: u64) -> Work {
        let Work::Request { header, .. } = &self.work else {
            return Work::Done;
        };
        let n = be_u64(&header[1..9]);
        match header[0] {
            0 => Work::Upload {
                stream,
                expected: n,
                got: 0,
            },
            1 => Work::Download { stream, left: n },
            2 => {
                let fps = be_u64(&header[9..13]);
                let bytes = be_u64(&header[13..17]);
                if n == 0 || n > MAX_FRAMES || fps == 0 || !(16..=MAX_FRAME_BYTES).contains(&bytes)
                {
                    self.fail("bad RTC header");
                    return Work::Done;
                }
                Work::Rtc(Frames {
                    frames: n,
                    fps,
                    bytes,
                    start: Instant::now(),
                    generated: 0,
                    queued: VecDeque::new(),
                    offset: 0,
                })
            }
            _ => {
                self.fail("bad header");
                Work::Done
            }
        }
    }

    /// Hands quiche what is due: download bytes, the upload's
    /// acknowledgement, frames.
    fn write(&mut self, now: Instant) {
        let result = match &mut self.work {
            Work::Download { stream, left } => common::send_zeros(&mut self.conn, *stream, left),
            Work::UploadAck { stream } => match self.conn.stream_send(*stream, b"", true) {
                Ok(_) => Ok(true),
                Err(quiche::Error::Done) => Ok(false),
                Err(e) => Err(e),
            },
            Work::Rtc(frames) => {
                frames.generate(now);
                frames.write(&mut self.conn)
            }
            Work::Request { .. } | Work::Upload { .. } | Work::Done => Ok(false),
        };
        match result {
            // Leave closing to the client: closing here could discard data
            // still in flight or unacknowledged.
            Ok(true) => self.work = Work::Done,
            Ok(false) => {}
            Err(e) => self.fail(&format!("send: {e}")),
        }
    }

    /// When this connection needs a turn: its timers, its next frame, its output.
    fn wake(&self) -> Option<Instant> {
        let frame = match &self.work {
            Work::Rtc(f) => f.next_due(),
            _ => None,
        };
        common::earliest(
            common::earliest(self.conn.timeout_instant(), frame),
            self.send_at,
        )
    }

    /// Closes the connection with an application error; logged only, as
    /// the failure is the client's to report.
    fn fail(&mut self, why: &str) {
        eprintln!("quiche-peer server: {}: {why}", self.conn.trace_id());
        let _ = self.conn.close(true, BAD_REQUEST, why.as_bytes());
        self.work = Work::Done;
    }
}

/// Serves until SIGTERM (or SIGINT), then exits 0.
pub fn run(listen: SocketAddr) -> Result<(), String> {
    // Registered before "ready", so that a SIGTERM at any time after it
    // stops the loop instead of killing the process.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    let mut socket = UdpSocket::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?;
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    poll.registry()
        .register(&mut socket, Token(0), Interest::READABLE)
        .map_err(|e| e.to_string())?;
    let mut config = common::config(true, 0)?;
    let mut conns: Vec<Connection> = Vec::with_capacity(MAX_CONNS);
    let mut events = Events::with_capacity(64);
    let mut buf = vec![0; RECV_BUF];
    let mut stream_buf = vec![0; RECV_BUF];
    let mut out = vec![0; 1500];
    eprintln!("ready");

    while !stop.load(Ordering::Relaxed) {
        // Sleep until the earliest timer, frame or paced datagram, at most
        // a second (a signal also ends the wait).
        let now = Instant::now();
        let wake = conns
            .iter()
            .filter_map(Connection::wake)
            .min()
            .unwrap_or(now + Duration::from_secs(1))
            .min(now + Duration::from_secs(1));
        match poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }

        // The socket is edge-triggered: read until it would block, or the
        // bound (then the next poll does not sleep: a connection is due at once).
        for _ in 0..MAX_READS {
            let (len, from) = match socket.recv_from(&mut buf) {
                Ok(v) => v,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("recv: {e}")),
            };
            receive(
                &mut conns,
                &mut config,
                &socket,
                local,
                from,
                &mut buf[..len],
                &mut out,
            );
        }

        let now = Instant::now();
        for c in conns.iter_mut() {
            if c.conn.timeout_instant().is_some_and(|t| t <= now) {
                c.conn.on_timeout();
            }
            if c.conn.is_established() {
                c.read(&mut stream_buf);
                c.write(now);
            }
            c.send_at = match c.output.flush(&mut c.conn, &socket) {
                Ok(Flushed::Idle) => None,
                Ok(Flushed::At(t)) => Some(t),
                Err(e) => {
                    eprintln!("quiche-peer server: {}: send: {e}", c.conn.trace_id());
                    let _ = c.conn.close(false, 1, b"internal error");
                    None
                }
            };
        }
        for c in conns.iter().filter(|c| c.conn.is_closed()) {
            common::write_stats(&c.conn, "server");
        }
        conns.retain(|c| !c.conn.is_closed());
    }
    // Tell the clients still connected, so that they need not wait for
    // their idle timeout.
    for c in conns.iter_mut() {
        let _ = c.conn.close(true, 0, b"server stopped");
        let _ = c.output.flush(&mut c.conn, &socket);
        common::write_stats(&c.conn, "server");
    }
    Ok(())
}

/// Hands one datagram to its connection, accepting a new one for an
/// Initial when there is room.
fn receive(
    conns: &mut Vec<Connection>,
    config: &mut quiche::Config,
    socket: &UdpSocket,
    local: SocketAddr,
    from: SocketAddr,
    pkt: &mut [u8],
    out: &mut [u8],
) {
    let Ok(hdr) = quiche::Header::from_slice(pkt, quiche::MAX_CONN_ID_LEN) else {
        return; // not QUIC
    };
    // Owned, so that the packet can be handed on.
    let (ty, version) = (hdr.ty, hdr.version);
    let (dcid, scid) = (hdr.dcid.into_owned(), hdr.scid.into_owned());
    let found = conns
        .iter()
        .position(|c| c.conn.source_id() == dcid || c.odcid == dcid);
    let index = match found {
        Some(i) => i,
        None => {
            if ty != quiche::Type::Initial || conns.len() >= MAX_CONNS {
                return;
            }
            if !quiche::version_is_supported(version) {
                if let Ok(n) = quiche::negotiate_version(&scid, &dcid, out) {
                    let _ = socket.send_to(&out[..n], from);
                }
                return;
            }
            let Ok(ours) = common::random_cid() else {
                return;
            };
            let mut conn = match quiche::accept(&ours, None, local, from, config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("quiche-peer server: accept {from}: {e}");
                    return;
                }
            };
            common::qlog(&mut conn, "server");
            conns.push(Connection {
                conn,
                odcid: dcid,
                work: Work::Request {
                    stream: None,
                    header: Vec::with_capacity(RTC_HEADER),
                },
                output: Output::new(),
                send_at: None,
            });
            conns.len() - 1
        }
    };
    // An undecryptable or stray packet is quiche's to drop: not fatal.
    let _ = conns[index]
        .conn
        .recv(pkt, quiche::RecvInfo { from, to: local });
}
