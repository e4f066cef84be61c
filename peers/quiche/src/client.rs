//! The clients: one bulk transfer (download or upload), or RTC frames;
//! each prints one JSON line on success (peers/README.md).

use crate::common::{
    self, BULK_HEADER, FRAME_HEAD, Flushed, MAX_READS, Output, RECV_BUF, RTC_HEADER, be_u64,
};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The client's only bidirectional stream, which carries the request.
const REQUEST_STREAM: u64 = 0;

/// What the client asks the server for.
pub enum Request {
    /// `size` bytes from the server, or to it with `upload`.
    Bulk { size: u64, upload: bool },
    /// `frames` frames of `bytes` bytes at `fps` frames per second.
    Rtc { frames: u64, fps: u32, bytes: u32 },
}

/// One connection to the server over one UDP socket, with the time it
/// must be done by.
struct Link {
    conn: quiche::Connection,
    socket: UdpSocket,
    local: SocketAddr,
    poll: Poll,
    events: Events,
    output: Output,
    buf: Vec<u8>,
    deadline: Instant,
}

impl Link {
    fn connect(server: SocketAddr, uni_streams: u64, deadline: Instant) -> Result<Link, String> {
        let any: SocketAddr = if server.is_ipv6() {
            "[::]:0".parse()
        } else {
            "0.0.0.0:0".parse()
        }
        .map_err(|_| "cannot happen: a literal address")?;
        let mut socket = UdpSocket::bind(any).map_err(|e| format!("socket: {e}"))?;
        let local = socket.local_addr().map_err(|e| e.to_string())?;
        let poll = Poll::new().map_err(|e| e.to_string())?;
        poll.registry()
            .register(&mut socket, Token(0), Interest::READABLE)
            .map_err(|e| e.to_string())?;
        let mut config = common::config(false, uni_streams)?;
        let scid = common::random_cid()?;
        let mut conn = quiche::connect(Some("localhost"), &scid, local, server, &mut config)
            .map_err(|e| format!("connect {server}: {e}"))?;
        common::qlog(&mut conn, "client");
        Ok(Link {
            conn,
            socket,
            local,
            poll,
            events: Events::with_capacity(64),
            output: Output::new(),
            buf: vec![0; RECV_BUF],
            deadline,
        })
    }

    /// Sends what quiche has, waits for datagrams, a timer or the
    /// deadline, and hands quiche what arrived.
    fn turn(&mut self) -> Result<(), String> {
        let send_at = match self.output.flush(&mut self.conn, &self.socket) {
            Ok(Flushed::Idle) => None,
            Ok(Flushed::At(t)) => Some(t),
            Err(e) => return Err(format!("send: {e}")),
        };
        let wake = common::earliest(self.conn.timeout_instant(), send_at)
            .map_or(self.deadline, |t| t.min(self.deadline));
        let now = Instant::now();
        match self
            .poll
            .poll(&mut self.events, Some(wake.saturating_duration_since(now)))
        {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        // Edge-triggered: read until it would block, or the bound (the
        // socket stays readable; the next turn reads on).
        for _ in 0..MAX_READS {
            let (len, from) = match self.socket.recv_from(&mut self.buf) {
                Ok(v) => v,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // No server there yet (ICMP): the handshake retries.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("recv: {e}")),
            };
            let info = quiche::RecvInfo {
                from,
                to: self.local,
            };
            // A packet quiche cannot use is dropped by it; a fatal one
            // closes the connection, which the caller sees.
            let _ = self.conn.recv(&mut self.buf[..len], info);
        }
        if self
            .conn
            .timeout_instant()
            .is_some_and(|t| t <= Instant::now())
        {
            self.conn.on_timeout();
        }
        Ok(())
    }

    fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Closes the connection (no error) and sends the close at once.
    fn close(&mut self) {
        let _ = self.conn.close(true, 0, b"done");
        let _ = self.output.flush(&mut self.conn, &self.socket);
        common::write_stats(&self.conn, "client");
    }
}

pub fn run(server: SocketAddr, request: Request, timeout: Duration) -> Result<(), String> {
    let start = Instant::now(); // before the handshake, as peers/README.md specifies
    let deadline = start + timeout;
    match request {
        Request::Bulk { size, upload } => {
            bulk(Link::connect(server, 0, deadline)?, size, upload, start)
        }
        Request::Rtc { frames, fps, bytes } => {
            rtc(Link::connect(server, frames, deadline)?, frames, fps, bytes)
        }
    }
}

/// Download: the header with FIN, then the server's bytes up to its FIN.
/// Upload: the header, N bytes and FIN, then the server's empty FIN, its
/// acknowledgement. Prints
/// `{"peer":"quiche","direction":…,"bytes":N,"seconds":…}`.
fn bulk(mut link: Link, size: u64, upload: bool, start: Instant) -> Result<(), String> {
    let direction = if upload { "upload" } else { "download" };
    let mut header = [0; BULK_HEADER];
    header[0] = u8::from(!upload);
    header[1..].copy_from_slice(&size.to_be_bytes());
    let mut header_sent = 0;
    let mut upload_left = if upload { size } else { 0 };
    let mut request_done = false; // header (and upload bytes) and FIN handed to quiche
    let mut got = 0u64;
    loop {
        if link.conn.is_established() && !request_done {
            if header_sent < BULK_HEADER {
                // A download's request ends with its header: the server reads
                // only the header.
                match link
                    .conn
                    .stream_send(REQUEST_STREAM, &header[header_sent..], !upload)
                {
                    Ok(n) => header_sent += n,
                    Err(quiche::Error::Done) => {}
                    Err(e) => return Err(format!("send the header: {e}")),
                }
                request_done = !upload && header_sent == BULK_HEADER;
            }
            if upload && header_sent == BULK_HEADER {
                request_done = common::send_zeros(&mut link.conn, REQUEST_STREAM, &mut upload_left)
                    .map_err(|e| format!("upload: {e}"))?;
            }
        }
        let mut finished = false;
        // At most a stream window (6 MB) is waiting: a bounded drain.
        while let Ok((n, fin)) = link.conn.stream_recv(REQUEST_STREAM, &mut link.buf) {
            got += n as u64;
            finished |= fin;
        }
        if finished {
            break;
        }
        if link.conn.is_closed() {
            return Err(format!(
                "{direction} after {got} bytes: {}",
                common::describe_close(&link.conn)
            ));
        }
        if link.expired() {
            return Err(format!(
                "timed out after {:.1} s ({direction}, {got} bytes received)",
                start.elapsed().as_secs_f64()
            ));
        }
        link.turn()?;
    }
    let seconds = start.elapsed().as_secs_f64();
    link.close();
    if upload && got != 0 {
        return Err(format!("the server sent {got} unexpected bytes"));
    }
    if !upload && got != size {
        return Err(format!("download transferred {got} bytes, expected {size}"));
    }
    println!(
        r#"{{"peer":"quiche","direction":"{direction}","bytes":{size},"seconds":{seconds:.6}}}"#
    );
    Ok(())
}

/// The first 16 bytes of a frame's stream, and whether it has arrived.
#[derive(Clone, Copy, Default)]
struct Slot {
    head: [u8; FRAME_HEAD],
    len: u8,
    arrived: bool,
}

/// Asks for RTC frames and records each one's arrival (its FIN); prints
/// every frame that arrived before the deadline, in order of arrival:
/// `{"peer":"quiche","mode":"rtc","frames":[[INDEX,GENERATED_NS,ARRIVED_NS],…]}`.
fn rtc(mut link: Link, frames: u64, fps: u32, bytes: u32) -> Result<(), String> {
    let mut request = [0; RTC_HEADER];
    request[0] = 2;
    request[1..9].copy_from_slice(&frames.to_be_bytes());
    request[9..13].copy_from_slice(&fps.to_be_bytes());
    request[13..17].copy_from_slice(&bytes.to_be_bytes());
    let mut request_sent = 0;
    // Indexed by the server's stream (the k-th unidirectional one): the
    // client grants exactly `frames` of them.
    let mut slots = vec![Slot::default(); frames as usize];
    let mut arrivals: Vec<[u64; 3]> = Vec::with_capacity(frames as usize);
    let mut data = vec![0; RECV_BUF];
    while (arrivals.len() as u64) < frames {
        if link.conn.is_established() && request_sent < RTC_HEADER {
            match link
                .conn
                .stream_send(REQUEST_STREAM, &request[request_sent..], false)
            {
                Ok(n) => request_sent += n,
                Err(quiche::Error::Done) => {}
                Err(e) => return Err(format!("send the request: {e}")),
            }
        }
        let readable: Vec<u64> = link.conn.readable().collect();
        for stream in readable {
            let slot = (stream & 3 == 3)
                .then_some(stream >> 2)
                .filter(|&n| n < frames)
                .map(|n| n as usize);
            // A bounded drain: a frame is at most a stream window.
            while let Ok((n, fin)) = link.conn.stream_recv(stream, &mut data) {
                let Some(s) = slot.map(|i| &mut slots[i]) else {
                    continue; // not a frame: discarded
                };
                let have = usize::from(s.len);
                let take = n.min(FRAME_HEAD - have);
                s.head[have..have + take].copy_from_slice(&data[..take]);
                s.len += take as u8;
                if fin && usize::from(s.len) == FRAME_HEAD && !s.arrived {
                    s.arrived = true;
                    arrivals.push([
                        be_u64(&s.head[..8]),
                        be_u64(&s.head[8..]),
                        common::unix_ns(),
                    ]);
                }
            }
        }
        if (arrivals.len() as u64) == frames {
            break;
        }
        if link.conn.is_closed() {
            return Err(format!(
                "{} ({} of {frames} frames)",
                common::describe_close(&link.conn),
                arrivals.len()
            ));
        }
        if link.expired() {
            if !link.conn.is_established() {
                return Err("handshake timed out".into());
            }
            break; // print what arrived: pepkit counts the rest as missing
        }
        link.turn()?;
    }
    link.close();
    let list: Vec<String> = arrivals
        .iter()
        .map(|[k, generated, arrived]| format!("[{k},{generated},{arrived}]"))
        .collect();
    println!(
        r#"{{"peer":"quiche","mode":"rtc","frames":[{}]}}"#,
        list.join(",")
    );
    Ok(())
}
