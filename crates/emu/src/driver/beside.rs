//! Beside the path: the kernel forwards, the engine only watches, and
//! everything it emits is its own traffic — from the bound UDP socket of
//! its source address if it has one, otherwise from a raw IPv4 socket
//! (`IPPROTO_RAW`, i.e. `IP_HDRINCL`) with the headers built here, so the
//! source may be any address (the Sidekick proxy's discovery replies come
//! from the receiver's). The kernel routes both. An engine that sniffs no
//! interface (one that lives on its own sockets, such as a tunnel server)
//! opens the raw socket only if it ever sends from an address not its
//! own, so it needs root only then.
//!
//! Datagrams from the local sockets (the Sidekick proxy's quACKs) are
//! queued and sent together when the driver flushes, after each batch of
//! received frames. A sniffing engine's go out as whole Ethernet frames
//! on a send-only packet socket ([`FrameSender`]), which skips the
//! kernel's UDP output and routing: the route and the neighbour's MAC
//! are looked up once per destination address
//! ([`crate::sys::frame_send::next_hop`], the main table), the headers
//! and checksums written here, and each interface's frames leave with one
//! `sendmmsg`. A destination with no resolved neighbour (retried every
//! [`RESOLVE_RETRY`]), on an interface that is not Ethernet or whose
//! packet socket does not open, goes through the UDP socket instead, one
//! `sendmmsg` per socket and batch; [`MiddleStats::sent_as_frames`]
//! counts the frames.

use super::frame::{FrameError, write_frame, write_ipv4_packet};
use super::middle_stats::MiddleStats;
use super::spec::{DriverError, LocalSocket, Mac};
use crate::sys::frame_send::{FrameSender, next_hop};
use crate::sys::{SendBatch, udp_send_batch};
use bytes::Bytes;
use netsim::Datagram;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The raw socket's send buffer.
const RAW_BUFFER: usize = 4 << 20;
/// A frame sender's send buffer.
const FRAME_BUFFER: usize = 4 << 20;
/// Datagrams per `sendmmsg` call.
const SEND_BATCH: usize = 64;
/// How long a destination without a resolved neighbour goes through the
/// UDP socket before its next hop is looked up again.
pub(super) const RESOLVE_RETRY: Duration = Duration::from_secs(1);

/// A datagram waiting for the flush: which local socket sends it, where.
struct Queued {
    local: usize,
    dst: SocketAddr,
    payload: Bytes,
}

/// How the local sockets' datagrams to one address leave.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// As frames from `senders[sender]` to the neighbour with MAC `mac`.
    Frame { sender: usize, mac: Mac },
    /// Through the UDP socket, until `retry`.
    Udp { retry: Instant },
}

/// The frame path: send-only packet sockets and the frames queued on them.
#[derive(Default)]
struct Frames {
    /// By interface name; `None` when the socket did not open (not
    /// Ethernet, or no privilege).
    senders: Vec<(String, Option<FrameSender>)>,
    routes: HashMap<Ipv4Addr, Route>,
    /// Per sender, reused frame buffers: the first `queued[i]` wait.
    frames: Vec<Vec<Vec<u8>>>,
    queued: Vec<usize>,
}

impl Frames {
    /// The route to `ip`, looked up if unknown or due for a retry.
    fn route(&mut self, ip: Ipv4Addr) -> Route {
        match self.routes.get(&ip) {
            Some(&Route::Udp { retry }) if Instant::now() < retry => Route::Udp { retry },
            Some(&route @ Route::Frame { .. }) => route,
            _ => {
                let route = self.look_up(ip);
                self.routes.insert(ip, route);
                route
            }
        }
    }

    fn look_up(&mut self, ip: Ipv4Addr) -> Route {
        let udp = Route::Udp {
            retry: Instant::now() + RESOLVE_RETRY,
        };
        let Some(hop) = next_hop(ip) else {
            return udp;
        };
        let sender = match self.senders.iter().position(|(n, _)| *n == hop.interface) {
            Some(i) => i,
            None => {
                let opened = FrameSender::open(&hop.interface, FRAME_BUFFER).ok();
                self.senders.push((hop.interface, opened));
                self.frames.push(Vec::new());
                self.queued.push(0);
                self.senders.len() - 1
            }
        };
        if self.senders[sender].1.is_some() {
            Route::Frame {
                sender,
                mac: hop.mac,
            }
        } else {
            udp
        }
    }

    /// Queues the frame of `datagram` on `sender`; false if it has no
    /// frame (not IPv4, too large).
    fn queue(&mut self, sender: usize, mac: Mac, datagram: &Datagram) -> bool {
        let Some(own) = self.senders[sender].1.as_ref().map(FrameSender::mac) else {
            return false;
        };
        let (frames, queued) = (&mut self.frames[sender], &mut self.queued[sender]);
        if *queued == frames.len() {
            frames.push(Vec::with_capacity(128));
        }
        if write_frame(mac, own, datagram, &mut frames[*queued]).is_err() {
            return false;
        }
        *queued += 1;
        true
    }

    /// Sends the queued frames, [`SEND_BATCH`] a call per interface.
    fn flush(&mut self, batch: &mut SendBatch, stats: &mut MiddleStats) {
        for (sender, queued) in self.queued.iter_mut().enumerate() {
            let Some(socket) = &self.senders[sender].1 else {
                continue;
            };
            let frames = &self.frames[sender][..*queued];
            let mut at = 0;
            while at < frames.len() {
                let end = frames.len().min(at + SEND_BATCH);
                match socket.send_frames(&frames[at..end], batch) {
                    Ok(0) => {
                        stats.send_errors += (frames.len() - at) as u64;
                        break;
                    }
                    Ok(n) => {
                        stats.sent += n as u64;
                        stats.sent_as_frames += n as u64;
                        at += n;
                    }
                    Err(_) => {
                        stats.send_errors += 1;
                        at += 1;
                    }
                }
            }
            *queued = 0;
        }
    }
}

/// The sending side beside the path.
pub(super) struct Beside {
    /// Opened at start when the engine sniffs, else at its first use.
    raw: Option<Socket>,
    packet: Vec<u8>,
    /// Datagrams for the local sockets, in the engine's order.
    queue: Vec<Queued>,
    /// The headers of a `sendmmsg`.
    batch: SendBatch,
    /// The destinations of a `sendmmsg`.
    dsts: Vec<SocketAddr>,
    /// The local sockets' datagrams as frames (a sniffing engine's).
    frames: Option<Frames>,
}

impl Beside {
    /// The sending side; opens the raw socket now if `sniffing` (so that a
    /// missing privilege shows at start), and sends the local sockets'
    /// datagrams as frames if `sniffing` (the privilege is there).
    pub(super) fn open(sniffing: bool) -> Result<Beside, DriverError> {
        Ok(Beside {
            raw: if sniffing { Some(open_raw()?) } else { None },
            packet: Vec::with_capacity(2048),
            queue: Vec::with_capacity(SEND_BATCH),
            batch: SendBatch::new(SEND_BATCH),
            dsts: Vec::with_capacity(SEND_BATCH),
            frames: sniffing.then(Frames::default),
        })
    }

    /// Sends one of the engine's datagrams: from a local socket's address
    /// at the next [`Beside::flush`] (as a frame, or from the socket),
    /// otherwise now from the raw socket (after flushing, so that the
    /// datagrams leave in the engine's order).
    pub(super) fn send(
        &mut self,
        datagram: &Datagram,
        locals: &[LocalSocket],
        stats: &mut MiddleStats,
    ) {
        if let Some(local) = locals
            .iter()
            .position(|l| SocketAddr::V4(l.addr) == datagram.src)
        {
            if let (Some(frames), SocketAddr::V4(dst)) = (&mut self.frames, datagram.dst)
                && let Route::Frame { sender, mac } = frames.route(*dst.ip())
                && frames.queue(sender, mac, datagram)
            {
                return;
            }
            self.queue.push(Queued {
                local,
                dst: datagram.dst,
                payload: datagram.payload.clone(),
            });
            return;
        }
        self.flush(locals, stats);
        let sent = match write_ipv4_packet(datagram, &mut self.packet) {
            Ok(()) => {
                if self.raw.is_none() {
                    self.raw = open_raw().ok();
                }
                let dst = SockAddr::from(SocketAddr::new(datagram.dst.ip(), 0));
                match &self.raw {
                    Some(raw) => raw.send_to(&self.packet, &dst).map(drop),
                    None => Err(io::Error::from(io::ErrorKind::PermissionDenied)),
                }
            }
            Err(FrameError::NotIpv4) => {
                stats.unroutable += 1;
                return;
            }
            Err(e) => Err(io::Error::other(e)),
        };
        match sent {
            Ok(()) => stats.sent += 1,
            Err(_) => stats.send_errors += 1,
        }
    }

    /// Sends the queued datagrams: each run of consecutive ones from one
    /// socket with `sendmmsg`, [`SEND_BATCH`] a call, then the queued
    /// frames. A datagram the kernel refuses (a full buffer, say) counts
    /// as a send error and is skipped, as a refused `sendto` was. (A
    /// destination moves from the socket to frames, never back, so its
    /// datagrams keep their order.)
    pub(super) fn flush(&mut self, locals: &[LocalSocket], stats: &mut MiddleStats) {
        self.flush_sockets(locals, stats);
        if let Some(frames) = &mut self.frames {
            frames.flush(&mut self.batch, stats);
        }
    }

    fn flush_sockets(&mut self, locals: &[LocalSocket], stats: &mut MiddleStats) {
        let mut start = 0;
        while start < self.queue.len() {
            let local = self.queue[start].local;
            let run = self.queue[start..]
                .iter()
                .take_while(|q| q.local == local)
                .count()
                .min(SEND_BATCH);
            let chunk = &self.queue[start..start + run];
            let mut payloads: [&[u8]; SEND_BATCH] = [&[]; SEND_BATCH];
            self.dsts.clear();
            for (payload, queued) in payloads.iter_mut().zip(chunk) {
                *payload = &queued.payload;
                self.dsts.push(queued.dst);
            }
            let sent = udp_send_batch(
                &locals[local].socket,
                &payloads[..run],
                &self.dsts,
                &mut self.batch,
            );
            match sent {
                Ok(n) if n == chunk.len() => {
                    stats.sent += n as u64;
                    start += n;
                }
                // The kernel took `n` and refused the next one.
                Ok(n) => {
                    stats.sent += n as u64;
                    stats.send_errors += 1;
                    start += n + 1;
                }
                Err(_) => {
                    stats.send_errors += 1;
                    start += 1;
                }
            }
        }
        self.queue.clear();
    }
}

/// A raw IPv4 socket (`IPPROTO_RAW`), non-blocking.
fn open_raw() -> Result<Socket, DriverError> {
    let raw = Socket::new(
        Domain::IPV4,
        Type::RAW,
        Some(Protocol::from(libc::IPPROTO_RAW)),
    )
    .map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => DriverError::NotRoot,
        _ => DriverError::Io {
            what: "raw IPv4 socket".into(),
            source: e,
        },
    })?;
    raw.set_nonblocking(true)
        .map_err(|source| DriverError::Io {
            what: "raw IPv4 socket".into(),
            source,
        })?;
    let _ = raw.set_send_buffer_size(RAW_BUFFER);
    Ok(raw)
}
