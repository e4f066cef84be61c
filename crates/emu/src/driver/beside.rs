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
//! received frames: one `sendmmsg` per socket and batch instead of one
//! `sendto` each.

use super::frame::{FrameError, write_ipv4_packet};
use super::middle_stats::MiddleStats;
use super::spec::{DriverError, LocalSocket};
use crate::sys::{SendBatch, udp_send_batch};
use bytes::Bytes;
use netsim::Datagram;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::SocketAddr;

/// The raw socket's send buffer.
const RAW_BUFFER: usize = 4 << 20;
/// Datagrams per `sendmmsg` call.
const SEND_BATCH: usize = 64;

/// A datagram waiting for the flush: which local socket sends it, where.
struct Queued {
    local: usize,
    dst: SocketAddr,
    payload: Bytes,
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
}

impl Beside {
    /// The sending side; opens the raw socket now if `sniffing` (so that a
    /// missing privilege shows at start).
    pub(super) fn open(sniffing: bool) -> Result<Beside, DriverError> {
        Ok(Beside {
            raw: if sniffing { Some(open_raw()?) } else { None },
            packet: Vec::with_capacity(2048),
            queue: Vec::with_capacity(SEND_BATCH),
            batch: SendBatch::new(SEND_BATCH),
            dsts: Vec::with_capacity(SEND_BATCH),
        })
    }

    /// Sends one of the engine's datagrams: from a local socket at the
    /// next [`Beside::flush`], otherwise now from the raw socket (after
    /// flushing, so that the datagrams leave in the engine's order).
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
    /// socket with `sendmmsg`, [`SEND_BATCH`] a call. A datagram the
    /// kernel refuses (a full buffer, say) counts as a send error and is
    /// skipped, as a refused `sendto` was.
    pub(super) fn flush(&mut self, locals: &[LocalSocket], stats: &mut MiddleStats) {
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
