//! The real-time driver of a [`netsim::Host`]: the same endpoint the
//! simulator runs (a QUIC client or server, a media sender, a sidekick
//! sender engine beside either) on UDP sockets, on the wall clock.
//!
//! The driver keeps the simulator's calling convention: after every input
//! (datagrams that arrived, a timer that expired) it drains
//! `poll_transmit`, then asks `poll_timeout` for the next wake-up and
//! sleeps in `ppoll` until then or until a socket is readable. The host
//! picks each datagram's source address; the driver sends it from a socket
//! bound to that address, binding one the first time it is used (the
//! sidekick sender's control port, for instance).

use crate::RealClock;
use crate::sys::{PollFd, poll};
use bytes::Bytes;
use netsim::{Datagram, Host, Time};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The socket buffer size: several BDPs of the paths real mode emulates.
const SOCKET_BUFFER: usize = 4 << 20;
/// The largest UDP payload received.
const MAX_DATAGRAM: usize = 65_535;
/// The longest the driver sleeps without checking its stop flag.
const MAX_SLEEP: Duration = Duration::from_millis(20);

/// Why a host run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostStop {
    /// The host said it was finished.
    Finished,
    /// The deadline passed.
    TimeLimit,
    /// The stop flag was set.
    Stopped,
}

/// When a host's run ends, besides its deadline and stop flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunUntil {
    /// When the host says it is finished (a client, a source).
    Finished,
    /// Only when stopped: passive hosts (servers, sinks) say they are
    /// finished at all times, as the simulator expects of them.
    Stopped,
}

/// What the driver counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DriverStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams the kernel refused (full buffer, no route).
    pub send_errors: u64,
}

/// A host after its run.
pub struct HostRun<H> {
    /// The host, with everything it recorded.
    pub host: H,
    /// Why it ended.
    pub stop: HostStop,
    /// When, on the run's clock.
    pub end: Time,
    /// The driver's counters.
    pub stats: DriverStats,
}

/// A host with its sockets, ready to run.
pub struct HostDriver<H: Host> {
    host: H,
    sockets: BTreeMap<SocketAddr, UdpSocket>,
    buf: Vec<u8>,
    stats: DriverStats,
}

fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    // Ask for more than the sysctl default; root may exceed the limits.
    if socket.set_recv_buffer_size(SOCKET_BUFFER).is_err() {
        let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    }
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    let socket: UdpSocket = socket.into();
    Ok(socket)
}

impl<H: Host> HostDriver<H> {
    /// Binds `host`'s listening addresses in the current network
    /// namespace (call it on the thread that will run the host).
    pub fn bind(host: H, addrs: &[SocketAddr]) -> io::Result<HostDriver<H>> {
        let mut sockets = BTreeMap::new();
        for &addr in addrs {
            let socket = bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {addr}: {e}")))?;
            sockets.insert(addr, socket);
        }
        Ok(HostDriver {
            host,
            sockets,
            buf: vec![0; MAX_DATAGRAM],
            stats: DriverStats::default(),
        })
    }

    /// Runs the host until `until`, `deadline` passes or `stop` is set.
    pub fn run(
        mut self,
        clock: RealClock,
        until: RunUntil,
        deadline: Time,
        stop: &AtomicBool,
    ) -> io::Result<HostRun<H>> {
        // As the simulator starts a host: poll it once.
        self.flush(clock.now())?;
        let reason = loop {
            if until == RunUntil::Finished && self.host.is_finished() {
                break HostStop::Finished;
            }
            if stop.load(Ordering::Relaxed) || crate::sys::interrupt::requested() {
                break HostStop::Stopped;
            }
            let now = clock.now();
            if now >= deadline {
                break HostStop::TimeLimit;
            }
            let wake = self.host.poll_timeout().unwrap_or(Time::MAX).min(deadline);
            if wake <= now {
                self.host.handle_timeout(now);
                self.flush(now)?;
                continue;
            }
            let sleep = clock.until(wake).min(MAX_SLEEP);
            let addrs: Vec<SocketAddr> = self.sockets.keys().copied().collect();
            let mut fds: Vec<PollFd> = self
                .sockets
                .values()
                .map(|s| PollFd::readable(s.as_fd()))
                .collect();
            poll(&mut fds, Some(sleep))?;
            let mut got = false;
            for (addr, fd) in addrs.iter().zip(&fds) {
                if fd.readable {
                    got |= self.receive(*addr, &clock)?;
                }
            }
            let now = clock.now();
            if !got && self.host.poll_timeout().is_some_and(|at| at <= now) {
                self.host.handle_timeout(now);
            }
            self.flush(now)?;
        };
        Ok(HostRun {
            host: self.host,
            stop: reason,
            end: clock.now(),
            stats: self.stats,
        })
    }

    /// Hands what waits on the socket bound to `local` to the host (a
    /// bounded number, so sends are not starved). Returns whether anything
    /// arrived.
    fn receive(&mut self, local: SocketAddr, clock: &RealClock) -> io::Result<bool> {
        let mut got = false;
        for _ in 0..64 {
            let socket = &self.sockets[&local];
            match socket.recv_from(&mut self.buf) {
                Ok((len, src)) => {
                    got = true;
                    self.stats.received += 1;
                    let payload = Bytes::copy_from_slice(&self.buf[..len]);
                    let now = clock.now();
                    self.host
                        .handle_datagram(now, Datagram::new(src, local, payload));
                    self.flush(now)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error from an earlier send (port unreachable):
                // the datagram is gone, as it would be on a real host.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    /// Sends everything the host has to send now.
    fn flush(&mut self, now: Time) -> io::Result<()> {
        while let Some(datagram) = self.host.poll_transmit(now) {
            let socket = match self.sockets.entry(datagram.src) {
                std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(bind(datagram.src).map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot bind {}: {e}", datagram.src))
                    })?)
                }
            };
            match send(socket, &datagram) {
                Ok(()) => self.stats.sent += 1,
                Err(_) => self.stats.send_errors += 1,
            }
        }
        Ok(())
    }
}

/// Sends one datagram, waiting briefly for room if the socket buffer is
/// full (the host paces itself, so this is rare and short).
fn send(socket: &UdpSocket, datagram: &Datagram) -> io::Result<()> {
    for _ in 0..100 {
        match socket.send_to(&datagram.payload, datagram.dst) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut fds = [PollFd::read_write(socket.as_fd())];
                poll(&mut fds, Some(Duration::from_millis(1)))?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        "send buffer stayed full",
    ))
}
