//! Beside the path: the kernel forwards, the engine only watches, and
//! everything it emits is its own traffic — from the bound UDP socket of
//! its source address if it has one, otherwise from a raw IPv4 socket
//! (`IPPROTO_RAW`, i.e. `IP_HDRINCL`) with the headers built here, so the
//! source may be any address (the Sidekick proxy's discovery replies come
//! from the receiver's). The kernel routes both. An engine that sniffs no
//! interface (one that lives on its own sockets, such as a tunnel server)
//! opens the raw socket only if it ever sends from an address not its
//! own, so it needs root only then.

use super::frame::{FrameError, write_ipv4_packet};
use super::middle_stats::MiddleStats;
use super::spec::{DriverError, LocalSocket};
use netsim::Datagram;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::SocketAddr;

/// The raw socket's send buffer.
const RAW_BUFFER: usize = 4 << 20;

/// The sending side beside the path.
pub(super) struct Beside {
    /// Opened at start when the engine sniffs, else at its first use.
    raw: Option<Socket>,
    packet: Vec<u8>,
}

impl Beside {
    /// The sending side; opens the raw socket now if `sniffing` (so that a
    /// missing privilege shows at start).
    pub(super) fn open(sniffing: bool) -> Result<Beside, DriverError> {
        Ok(Beside {
            raw: if sniffing { Some(open_raw()?) } else { None },
            packet: Vec::with_capacity(2048),
        })
    }

    /// Sends one of the engine's datagrams now.
    pub(super) fn send(
        &mut self,
        datagram: &Datagram,
        locals: &[LocalSocket],
        stats: &mut MiddleStats,
    ) {
        let local = locals
            .iter()
            .find(|l| SocketAddr::V4(l.addr) == datagram.src);
        let sent = match local {
            Some(local) => local
                .socket
                .send_to(&datagram.payload, datagram.dst)
                .map(drop),
            None => match write_ipv4_packet(datagram, &mut self.packet) {
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
            },
        };
        match sent {
            Ok(()) => stats.sent += 1,
            Err(_) => stats.send_errors += 1,
        }
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
