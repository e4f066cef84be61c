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
//!
//! I/O is batched: what waits on a socket is read with `recvmmsg`, each
//! datagram handed to the host in turn (and `poll_transmit` drained after
//! each, as the simulator does), and what the host sends after a batch goes
//! out with `sendmmsg`. A driver given a minimum wake-up interval
//! ([`HostDriver::with_min_wake`], for instruments such as the link check's
//! probes) that is busy also waits that long between wake-ups, so that a
//! fast source sends its due datagrams in bursts.

use crate::RealClock;
use crate::sys::{PollFd, RecvBatch, SendBatch, poll, udp_recv_batch, udp_send_batch};
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
/// Datagrams read per `recvmmsg`, and sent per `sendmmsg`.
const BATCH: usize = 32;
/// Batches read from one socket per wake-up.
const BATCHES_PER_WAKE: usize = 4;

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
    recv: RecvBatch,
    /// What the host sent that is not on a socket yet, in order.
    pending: Vec<Datagram>,
    send: SendBatch,
    stats: DriverStats,
    min_wake: Duration,
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
            recv: RecvBatch::new(BATCH, MAX_DATAGRAM),
            pending: Vec::new(),
            send: SendBatch::new(BATCH),
            stats: DriverStats::default(),
            min_wake: Duration::ZERO,
        })
    }

    /// Once busy (two wake-ups less than `interval` apart, with work to
    /// do), wakes at most once per `interval`: a source that falls due
    /// more often sends what is due in bursts, as it would from a real
    /// host's timer slack. Zero (the default) wakes for every deadline.
    pub fn with_min_wake(mut self, interval: Duration) -> HostDriver<H> {
        self.min_wake = interval;
        self
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
        self.send_pending()?;
        let mut last_wake: Option<(std::time::Instant, bool)> = None;
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
                self.send_pending()?;
                continue;
            }
            let mut sleep = clock.until(wake).min(MAX_SLEEP);
            if let Some((at, true)) = last_wake {
                sleep = sleep.max(self.min_wake.saturating_sub(at.elapsed()));
            }
            let addrs: Vec<SocketAddr> = self.sockets.keys().copied().collect();
            let mut fds: Vec<PollFd> = self
                .sockets
                .values()
                .map(|s| PollFd::readable(s.as_fd()))
                .collect();
            poll(&mut fds, Some(sleep))?;
            let woke = std::time::Instant::now();
            let mut got = 0;
            for (addr, fd) in addrs.iter().zip(&fds) {
                if fd.readable {
                    got += self.receive(*addr, &clock)?;
                }
            }
            let now = clock.now();
            let due = self.host.poll_timeout().is_some_and(|at| at <= now);
            if got == 0 && due {
                self.host.handle_timeout(now);
            }
            self.flush(now)?;
            self.send_pending()?;
            let busy =
                (got > 0 || due) && last_wake.is_some_and(|(at, _)| woke - at < 2 * self.min_wake);
            last_wake = Some((woke, busy));
        };
        Ok(HostRun {
            host: self.host,
            stop: reason,
            end: clock.now(),
            stats: self.stats,
        })
    }

    /// Hands what waits on the socket bound to `local` to the host (a
    /// bounded number of batches, so sends are not starved), draining
    /// `poll_transmit` after each datagram and sending after each batch.
    /// Returns how many arrived.
    fn receive(&mut self, local: SocketAddr, clock: &RealClock) -> io::Result<usize> {
        let mut got = 0;
        for _ in 0..BATCHES_PER_WAKE {
            let socket = &self.sockets[&local];
            let n = match udp_recv_batch(socket, &mut self.recv) {
                Ok(n) => n,
                // An ICMP error from an earlier send (port unreachable):
                // the datagram is gone, as it would be on a real host.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            let now = clock.now();
            for index in 0..n {
                let (bytes, _) = self.recv.frame(index);
                let Some(src) = self.recv.source(index) else {
                    continue;
                };
                got += 1;
                self.stats.received += 1;
                let payload = Bytes::copy_from_slice(bytes);
                self.host
                    .handle_datagram(now, Datagram::new(src, local, payload));
                self.flush(now)?;
            }
            self.send_pending()?;
            if n < self.recv.capacity() {
                break;
            }
        }
        Ok(got)
    }

    /// Takes everything the host has to send now (sent by
    /// [`Self::send_pending`]).
    fn flush(&mut self, now: Time) -> io::Result<()> {
        while let Some(datagram) = self.host.poll_transmit(now) {
            if let std::collections::btree_map::Entry::Vacant(entry) =
                self.sockets.entry(datagram.src)
            {
                entry.insert(bind(datagram.src).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot bind {}: {e}", datagram.src))
                })?);
            }
            self.pending.push(datagram);
        }
        Ok(())
    }

    /// Sends what the host sent, in order, a `sendmmsg` per run of
    /// datagrams from one source address.
    fn send_pending(&mut self) -> io::Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let mut at = 0;
        while at < pending.len() {
            let src = pending[at].src;
            let run = pending[at..]
                .iter()
                .take(BATCH)
                .take_while(|d| d.src == src)
                .count();
            let socket = &self.sockets[&src];
            let sent = send(socket, &pending[at..at + run], &mut self.send);
            self.stats.sent += sent as u64;
            // The datagram at which sending stopped is dropped, as the
            // kernel would; the rest is tried again.
            if sent < run {
                self.stats.send_errors += 1;
                at += sent + 1;
            } else {
                at += run;
            }
        }
        self.pending = pending;
        self.pending.clear();
        Ok(())
    }
}

/// Sends `datagrams` from `socket` with `sendmmsg`, waiting briefly for
/// room whenever the socket buffer is full (the host paces itself, so this
/// is rare and short); returns how many were sent.
fn send(socket: &UdpSocket, datagrams: &[Datagram], batch: &mut SendBatch) -> usize {
    let payloads: Vec<&[u8]> = datagrams.iter().map(|d| &d.payload[..]).collect();
    let dsts: Vec<SocketAddr> = datagrams.iter().map(|d| d.dst).collect();
    let mut sent = 0;
    let mut waits = 0;
    while sent < datagrams.len() {
        match udp_send_batch(socket, &payloads[sent..], &dsts[sent..], batch) {
            Ok(0) if waits < 100 => {
                waits += 1;
                let mut fds = [PollFd::read_write(socket.as_fd())];
                let _ = poll(&mut fds, Some(Duration::from_millis(1)));
            }
            Ok(0) => break,
            Ok(n) => sent += n,
            // A refused datagram (no route, an ICMP error): skip it.
            Err(_) => break,
        }
    }
    sent
}
