//! The middlebox driver ([`MiddleDriver`]): a [`netsim::Middlebox`] on a
//! node's interfaces, its loop and the engine's held datagrams; the
//! placements' own work is in [`super::in_path`] and [`super::beside`].
//! The module docs of [`crate::driver`] describe it.

use super::beside::Beside;
use super::engine_timer::EngineTimer;
use super::frame::{Frame, UdpPacket, parse_frame};
use super::in_path::{InPath, RouteTable};
use super::middle_stats::MiddleStats;
use super::spec::{DriverError, LocalSocket, MiddleNodeSpec, Placement, Port};
use crate::RealClock;
use crate::sys::{PacketSocket, PollFd, RecvBatch, poll};
use bytes::Bytes;
use netsim::{Datagram, Interface, Middlebox, Time, Transmit};
use socket2::{Domain, Protocol, Socket, Type};
use std::cell::RefCell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A reasonable `max_sleep` for [`MiddleDriver::turn`]: how late a stop
/// request is seen at most.
pub const MAX_SLEEP: Duration = Duration::from_millis(50);
/// Frames received per `recvmmsg` call.
pub const BATCH: usize = 64;
/// Batches read from one interface per turn.
const BATCHES_PER_TURN: usize = 16;
/// The longest frame read whole: a 9216-byte jumbo MTU, an Ethernet header
/// and two VLAN tags. Longer frames (coalesced by GRO) are dropped.
const MAX_FRAME: usize = 9216 + 22;
/// A packet socket's receive (and send) buffer: ~2 s of 100k small frames.
const PACKET_BUFFER: usize = 16 << 20;
/// A local socket's buffers.
const LOCAL_BUFFER: usize = 4 << 20;
/// Datagrams read from one local socket per turn.
const LOCAL_PER_TURN: usize = 64;

/// The placement's own state.
enum Place {
    InPath(InPath),
    Beside(Beside),
}

/// A datagram waiting for its time.
struct Held {
    at: Time,
    seq: u64,
    transmit: Transmit,
}

impl PartialEq for Held {
    fn eq(&self, other: &Held) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Held) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    /// Reversed, so that the heap's top is the earliest (then the oldest).
    fn cmp(&self, other: &Held) -> CmpOrdering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Everything but the receive buffers: what handling a frame touches.
struct Core<M> {
    engine: M,
    place: Place,
    locals: Vec<LocalSocket>,
    /// The interface datagrams from local sockets are said to arrive on.
    local_iface: Interface,
    held: BinaryHeap<Held>,
    next_seq: u64,
    stats: MiddleStats,
    null: bool,
    clock: RealClock,
    /// The latest time the engine was given: frames placed at their
    /// arrival stamps never take it back.
    engine_now: Time,
    timer: EngineTimer,
    /// What the engine returned from one call, before it is sent.
    outbox: Vec<Transmit>,
}

/// A middlebox with its sockets open, ready to run.
pub struct MiddleDriver<M: Middlebox> {
    core: Core<M>,
    ports: Vec<Port>,
    fds: Vec<PollFd>,
    /// One receive batch per port.
    batches: Vec<RecvBatch>,
    /// Per port: whether it may have more to read this turn.
    more: Vec<bool>,
    /// A round's frames to hand over: (arrival, port, index in its batch).
    arrivals: Vec<(Time, usize, usize)>,
    recv_buf: Vec<u8>,
}

/// A middlebox after its run ([`MiddleDriver::run`]).
pub struct MiddleRun<M> {
    /// The engine, with everything it counted.
    pub engine: M,
    /// The driver's counters.
    pub stats: MiddleStats,
    /// Why the run ended early, if a socket failed outright.
    pub error: Option<DriverError>,
}

impl<M: Middlebox> MiddleDriver<M> {
    /// Opens the sockets in the current network namespace (call it on the
    /// thread that will run the engine) — packet sockets first, then (in
    /// path) turns the kernel's forwarding off on the node's interfaces,
    /// or (beside) opens the raw socket, then binds the local sockets. The
    /// engine's times are `clock`'s.
    pub fn open(
        spec: MiddleNodeSpec,
        engine: M,
        clock: RealClock,
    ) -> Result<MiddleDriver<M>, DriverError> {
        let listen = check(&spec)?;
        let mut ports = Vec::new();
        for &iface in &listen {
            ports.push(Port {
                socket: open_packet_socket(&spec.interfaces[iface].name)?,
                iface,
            });
        }
        let place = match &spec.placement {
            Placement::InPath { routes } => {
                let table = RouteTable::new(routes, spec.interfaces.len())?;
                let links = spec.interfaces.iter().filter_map(|i| i.link).collect();
                let names: Vec<String> = spec.interfaces.iter().map(|i| i.name.clone()).collect();
                Place::InPath(InPath::new(table, links, &names)?)
            }
            Placement::Beside { sniff } => Place::Beside(Beside::open(!sniff.is_empty())?),
        };
        let locals = spec
            .local
            .iter()
            .map(|&addr| bind_local(addr).map(|socket| LocalSocket { addr, socket }))
            .collect::<Result<Vec<_>, _>>()?;
        let fds = ports
            .iter()
            .map(|p| PollFd::readable(p.socket.as_fd()))
            .chain(locals.iter().map(|l| PollFd::readable(l.socket.as_fd())))
            .collect();
        Ok(MiddleDriver {
            core: Core {
                engine,
                place,
                locals,
                local_iface: Interface(listen.first().map_or(0, |&i| i as u16)),
                held: BinaryHeap::new(),
                next_seq: 0,
                stats: MiddleStats::default(),
                null: false,
                clock,
                engine_now: Time::ZERO,
                timer: EngineTimer::wall(),
                outbox: Vec::new(),
            },
            ports,
            fds,
            batches: (0..listen.len())
                .map(|_| RecvBatch::new(BATCH, MAX_FRAME))
                .collect(),
            more: vec![false; listen.len()],
            arrivals: Vec::with_capacity(BATCH * listen.len()),
            recv_buf: vec![0; 65_536],
        })
    }

    /// Runs until `stop` is set (or Ctrl-C, [`crate::sys::interrupt`]), then
    /// hands the engine back with the counters.
    pub fn run(mut self, stop: &AtomicBool) -> MiddleRun<M> {
        let cpu_start = crate::sys::thread_cpu_time().ok();
        let mut error = None;
        while !stop.load(Ordering::Relaxed) && !crate::sys::interrupt::requested() {
            if let Err(e) = self.turn(MAX_SLEEP) {
                error = Some(e);
                break;
            }
        }
        if let (Some(start), Ok(end)) = (cpu_start, crate::sys::thread_cpu_time()) {
            self.core.stats.cpu_ns = u64::try_from((end - start).as_nanos()).unwrap_or(u64::MAX);
        }
        let (engine, stats) = self.into_parts();
        MiddleRun {
            engine,
            stats,
            error,
        }
    }

    /// One turn of the loop: send what is due and run a due timer, sleep
    /// until the next timer or held datagram (at most `max_sleep`) or until
    /// a socket is readable, read what arrived (a bounded amount), and send
    /// what is due again. Errors only if a socket fails outright.
    pub fn turn(&mut self, max_sleep: Duration) -> Result<(), DriverError> {
        self.core.stats.turns += 1;
        let now = self.core.clock.now();
        self.core.service(now);
        self.flush();
        let wake = self.core.next_wake();
        let sleep = wake.saturating_duration_since(now).min(max_sleep);
        poll(&mut self.fds, Some(sleep)).map_err(|source| DriverError::Io {
            what: "poll".into(),
            source,
        })?;
        // Local sockets first: a control message usually precedes the
        // packets that arrive with it.
        let ports = self.ports.len();
        for local in 0..self.core.locals.len() {
            if self.fds[ports + local].readable {
                self.read_local(local)?;
            }
        }
        self.read_ports()?;
        let now = self.core.clock.now();
        self.core.service(now);
        self.flush();
        Ok(())
    }

    /// Reads the frames waiting on the readable packet sockets, a batch
    /// from each in a round (up to [`BATCHES_PER_TURN`] rounds), and
    /// hands each round's frames to the engine in the order of their
    /// kernel arrival stamps, each at its arrival time: however late the
    /// thread woke, the engine sees the frames' real spacing (PEMI's
    /// inference reads it) and the two directions in their real order.
    fn read_ports(&mut self) -> Result<(), DriverError> {
        let ports = self.ports.len();
        for (more, fd) in self.more.iter_mut().zip(&self.fds[..ports]) {
            *more = fd.readable;
        }
        for _ in 0..BATCHES_PER_TURN {
            if !self.more.contains(&true) {
                break;
            }
            for (port, more) in self.more.iter_mut().enumerate() {
                let batch = &mut self.batches[port];
                batch.clear();
                if !*more {
                    continue;
                }
                let n = match self.ports[port].socket.recv_batch(batch) {
                    Ok(n) => n,
                    // The interface went down (reported once per event).
                    Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                        self.core.stats.interface_errors += 1;
                        0
                    }
                    Err(source) => {
                        return Err(DriverError::Io {
                            what: format!(
                                "packet socket on {}",
                                self.ports[port].socket.interface()
                            ),
                            source,
                        });
                    }
                };
                *more = n == batch.capacity();
            }
            self.deliver_round();
        }
        Ok(())
    }

    /// Hands the frames of one round of reads to the engine, oldest
    /// arrival first.
    fn deliver_round(&mut self) {
        let anchor = self.core.clock.anchor();
        let now = anchor.now();
        self.core.send_due(now);
        self.arrivals.clear();
        for (port, batch) in self.batches.iter().enumerate() {
            for (index, stamp) in batch.stamps().iter().enumerate() {
                let at = match stamp {
                    Some(stamp) => anchor.place(*stamp),
                    None => {
                        self.core.stats.unstamped += 1;
                        now
                    }
                };
                self.arrivals.push((at, port, index));
            }
        }
        self.arrivals.sort_unstable();
        for &(at, port, index) in &self.arrivals {
            // Never before what the engine has already seen.
            let at = at.max(self.core.engine_now);
            self.core.stats.read_wait.record(now - at);
            let (frame, len) = self.batches[port].frame(index);
            self.core.on_frame(at, self.ports[port].iface, frame, len);
        }
        self.flush();
    }

    /// Reads what waits on local socket `local` (a bounded number): beside
    /// the path the engine's input, in path a duplicate to discard.
    fn read_local(&mut self, local: usize) -> Result<(), DriverError> {
        for _ in 0..LOCAL_PER_TURN {
            let socket = &self.core.locals[local];
            match socket.socket.recv_from(&mut self.recv_buf) {
                Ok((len, src)) => {
                    self.core.stats.local_datagrams += 1;
                    let dst = SocketAddr::V4(socket.addr);
                    let payload = Bytes::copy_from_slice(&self.recv_buf[..len]);
                    self.core.on_local(Datagram::new(src, dst, payload));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Interrupted, or an ICMP error from an earlier send (port
                // unreachable): nothing to read, go on.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::HostUnreachable
                            | io::ErrorKind::NetworkUnreachable
                    ) => {}
                Err(source) => {
                    return Err(DriverError::Io {
                        what: format!("local socket {}", socket.addr),
                        source,
                    });
                }
            }
        }
        self.flush();
        Ok(())
    }

    /// Sends the frames queued in path, or the datagrams queued for the
    /// local sockets beside it.
    fn flush(&mut self) {
        match &mut self.core.place {
            Place::InPath(in_path) => in_path.flush(&self.ports, &mut self.core.stats),
            Place::Beside(beside) => beside.flush(&self.core.locals, &mut self.core.stats),
        }
    }

    /// The counters as they stand, without asking the kernel for its
    /// drops (no system call; [`MiddleDriver::stats`] does).
    pub fn counters(&self) -> &MiddleStats {
        &self.core.stats
    }

    /// The counters now (reads the kernel's drop counters: a system call
    /// per interface).
    pub fn stats(&mut self) -> MiddleStats {
        for port in &self.ports {
            if let Ok(kernel) = port.socket.take_stats() {
                self.core.stats.kernel_drops += kernel.drops;
            }
        }
        self.core.stats
    }

    /// The engine.
    pub fn engine(&self) -> &M {
        &self.core.engine
    }

    /// The engine, mutably (for a caller that changes its settings between
    /// turns).
    pub fn engine_mut(&mut self) -> &mut M {
        &mut self.core.engine
    }

    /// The driver's clock.
    pub fn clock(&self) -> RealClock {
        self.core.clock
    }

    /// Times the engine's work by the thread's CPU clock too
    /// ([`MiddleStats::engine_cpu_ns`]; two system calls per stretch, so
    /// off by default). Call it on the thread that runs the driver: it
    /// measures the clock's own cost there first (≈ 10 ms).
    pub fn time_engine_cpu(&mut self) {
        self.core.timer = EngineTimer::cpu();
        let cost = self.core.timer.cpu_clock_cost().unwrap_or_default();
        self.core.stats.cpu_clock_inside_ns = cost.inside_ns;
        self.core.stats.cpu_clock_outside_ns = cost.outside_ns;
    }

    /// For capacity measurements: with `null` set, frames are received
    /// and parsed but not handed to the engine; in path the datagrams are
    /// then forwarded by destination as an engine that forwards everything
    /// would.
    pub fn set_null(&mut self, null: bool) {
        self.core.null = null;
    }

    /// Stops: the engine and the counters. Held datagrams not yet due are
    /// dropped; the kernel's forwarding is restored.
    pub fn into_parts(mut self) -> (M, MiddleStats) {
        self.flush();
        let stats = self.stats();
        (self.core.engine, stats)
    }
}

impl<M: Middlebox> Core<M> {
    /// Runs `call` on the engine, then takes everything it has to send, in
    /// one stretch of the engine's time ([`MiddleStats::engine_ns`]); then
    /// sends it (now, or held until its time).
    fn engine_then_send(&mut self, now: Time, call: impl FnOnce(&mut M)) {
        self.engine_now = self.engine_now.max(now);
        let stretch = self.timer.start();
        call(&mut self.engine);
        while let Some(transmit) = self.engine.poll_transmit(now) {
            self.outbox.push(transmit);
        }
        self.timer.stop(stretch, &mut self.stats);
        let mut outbox = std::mem::take(&mut self.outbox);
        for transmit in outbox.drain(..) {
            if transmit.at > now {
                self.stats.held += 1;
                self.held.push(Held {
                    at: transmit.at,
                    seq: self.next_seq,
                    transmit,
                });
                self.next_seq += 1;
            } else {
                self.send(transmit);
            }
        }
        self.outbox = outbox;
    }

    /// Sends what is due, runs the engine's timer if it is due, and sends
    /// what the engine has to send.
    fn service(&mut self, now: Time) {
        self.send_due(now);
        if self.engine.poll_timeout().is_some_and(|at| at <= now) {
            self.timer.timing_timer = true;
            self.engine_then_send(now, |engine| engine.handle_timeout(now));
            self.timer.timing_timer = false;
        }
    }

    /// The engine's next timer or the next held datagram.
    fn next_wake(&mut self) -> Time {
        let timer = self.engine.poll_timeout().unwrap_or(Time::MAX);
        let held = self.held.peek().map_or(Time::MAX, |h| h.at);
        timer.min(held)
    }

    /// Sends the held datagrams whose time has come, in order.
    fn send_due(&mut self, now: Time) {
        if self.held.peek().is_none_or(|h| h.at > now) {
            return;
        }
        let real = self.clock.now();
        while self.held.peek().is_some_and(|h| h.at <= now) {
            let held = self.held.pop().expect("peeked");
            self.stats.late.record(real - held.at);
            self.send(held.transmit);
        }
    }

    fn send(&mut self, transmit: Transmit) {
        match &mut self.place {
            Place::InPath(in_path) => in_path.send(transmit, &mut self.stats),
            Place::Beside(beside) => beside.send(&transmit.datagram, &self.locals, &mut self.stats),
        }
    }

    /// One frame from interface `from`, `len` bytes long (`frame` holds
    /// what was read of it).
    fn on_frame(&mut self, now: Time, from: usize, frame: &[u8], len: usize) {
        self.stats.frames += 1;
        if len > frame.len() {
            self.stats.oversize_frames += 1;
            return;
        }
        match parse_frame(frame) {
            Ok(Frame::Udp(udp)) => self.on_udp(now, from, &udp),
            Ok(Frame::Echo(echo)) if self.for_this_node(echo.dst) => {
                // An echo message to the node (the answer to an engine's
                // ping): the engine's too; the kernel has its own copy.
                self.stats.datagrams += 1;
                let datagram = echo.to_datagram();
                self.engine_then_send(now, |engine| {
                    engine.handle_datagram(now, Interface(from as u16), datagram)
                });
            }
            Ok(Frame::Echo(_) | Frame::Other(_)) => {
                self.stats.other_frames += 1;
                self.pass_through(from, frame);
            }
            Err(_) => {
                self.stats.malformed_frames += 1;
                self.pass_through(from, frame);
            }
        }
    }

    /// In path, not in null mode: whether `ip` is one of the node's own
    /// addresses.
    fn for_this_node(&self, ip: Ipv4Addr) -> bool {
        match &self.place {
            Place::InPath(in_path) => !self.null && in_path.routes.is_local(ip),
            Place::Beside(_) => false,
        }
    }

    fn pass_through(&mut self, from: usize, frame: &[u8]) {
        if let Place::InPath(in_path) = &mut self.place {
            in_path.pass_through(from, frame, &mut self.stats);
        }
    }

    /// A UDP datagram from interface `from`: its TTL decremented, to the
    /// engine.
    fn on_udp(&mut self, now: Time, from: usize, udp: &UdpPacket<'_>) {
        if matches!(self.place, Place::Beside(_)) && self.locals.iter().any(|l| l.addr == udp.dst) {
            self.stats.sniffed_local += 1;
            return;
        }
        if udp.ttl <= 1 {
            self.stats.ttl_expired += 1;
            return;
        }
        self.stats.datagrams += 1;
        if self.null {
            if let Place::InPath(in_path) = &self.place
                && !in_path.routes.is_local(*udp.dst.ip())
            {
                self.send(Transmit::at(now, pooled_datagram(udp)));
            }
            return;
        }
        let datagram = pooled_datagram(udp);
        self.engine_then_send(now, |engine| {
            engine.handle_datagram(now, Interface(from as u16), datagram)
        });
    }

    /// A datagram from a local socket: beside the path, the engine's.
    fn on_local(&mut self, datagram: Datagram) {
        if matches!(self.place, Place::InPath(_)) || self.null {
            return;
        }
        self.stats.datagrams += 1;
        let now = self.clock.now();
        let from = self.local_iface;
        self.engine_then_send(now, |engine| engine.handle_datagram(now, from, datagram));
    }
}

/// Payload buffers kept for reuse per thread, at most this many.
const SPARE_PAYLOADS: usize = 1024;

thread_local! {
    /// The driver thread's spare payload buffers ([`Payload`]).
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A datagram's payload buffer that goes back to its thread's spares
/// when the last [`Bytes`] over it is dropped, as a packet buffer goes
/// back to a router's pool: neither the driver nor an engine that keeps a
/// copy (PEMI keeps each protected packet until its flowlet is decided)
/// pays the allocator for a frame, and a copy is a reference count, not a
/// promotion of the buffer to a shared one.
struct Payload(Vec<u8>);

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        // Dropped on another thread, or while the thread ends: freed.
        let _ = SPARE.try_with(|spare| {
            if let Ok(mut spare) = spare.try_borrow_mut()
                && spare.len() < SPARE_PAYLOADS
            {
                spare.push(buffer);
            }
        });
    }
}

/// `udp` as the engine's datagram, its TTL decremented, its payload
/// copied into a spare buffer ([`Payload`]).
fn pooled_datagram(udp: &UdpPacket<'_>) -> Datagram {
    let mut buffer = SPARE
        .try_with(|spare| spare.try_borrow_mut().ok()?.pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(udp.payload.len().max(1500)));
    buffer.clear();
    buffer.extend_from_slice(udp.payload);
    Datagram {
        src: SocketAddr::V4(udp.src),
        dst: SocketAddr::V4(udp.dst),
        ttl: udp.ttl - 1,
        payload: Bytes::from_owner(Payload(buffer)),
        protocol: netsim::Protocol::Udp,
    }
}

/// Checks that the spec fits together; returns the interfaces to receive
/// on.
fn check(spec: &MiddleNodeSpec) -> Result<Vec<usize>, DriverError> {
    let n = spec.interfaces.len();
    if n > usize::from(u16::MAX) {
        return Err(DriverError::Config("too many interfaces".into()));
    }
    match &spec.placement {
        Placement::InPath { .. } => {
            if n < 2 {
                return Err(DriverError::Config(
                    "in path, the node needs two interfaces or more".into(),
                ));
            }
            if let Some(i) = spec.interfaces.iter().find(|i| i.link.is_none()) {
                return Err(DriverError::Config(format!(
                    "in path, interface {} needs its MAC and its neighbour's",
                    i.name
                )));
            }
            Ok((0..n).collect())
        }
        Placement::Beside { sniff } => {
            if sniff.iter().any(|&i| i >= n) {
                return Err(DriverError::Config(format!(
                    "beside the path, sniff some of the {n} interfaces"
                )));
            }
            if sniff.is_empty() && spec.local.is_empty() {
                return Err(DriverError::Config(
                    "beside the path, the engine sniffs an interface or has an address of its own"
                        .into(),
                ));
            }
            Ok(sniff.clone())
        }
    }
}

/// A packet socket on interface `name` that stamps arrivals.
fn open_packet_socket(name: &str) -> Result<PacketSocket, DriverError> {
    let io = |source| DriverError::Io {
        what: format!("packet socket on {name}"),
        source,
    };
    let socket = PacketSocket::bind(name, PACKET_BUFFER).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => DriverError::NoInterface(name.to_string()),
        io::ErrorKind::PermissionDenied => DriverError::NotRoot,
        _ => io(e),
    })?;
    socket.stamp_arrivals().map_err(io)?;
    Ok(socket)
}

/// A non-blocking UDP socket bound to `addr`, with large buffers.
fn bind_local(addr: SocketAddrV4) -> Result<UdpSocket, DriverError> {
    let io = |source| DriverError::Io {
        what: format!("local socket {addr}"),
        source,
    };
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(io)?;
    let _ = socket.set_recv_buffer_size(LOCAL_BUFFER);
    let _ = socket.set_send_buffer_size(LOCAL_BUFFER);
    socket.bind(&SocketAddr::V4(addr).into()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrNotAvailable {
            DriverError::AddrNotLocal(addr)
        } else {
            io(e)
        }
    })?;
    socket.set_nonblocking(true).map_err(io)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_buffer_returns_to_the_spares_when_its_last_copy_goes() {
        let spares = || SPARE.with(|spare| spare.borrow().len());
        let udp = UdpPacket {
            src: "10.0.0.1:1000".parse().unwrap(),
            dst: "10.0.0.2:2000".parse().unwrap(),
            ttl: 64,
            payload: b"hello",
        };
        let before = spares();
        let datagram = pooled_datagram(&udp);
        assert_eq!((&datagram.payload[..], datagram.ttl), (&b"hello"[..], 63));
        let copy = datagram.payload.clone();
        drop(datagram);
        assert_eq!(spares(), before, "a copy still holds it");
        drop(copy);
        assert_eq!(spares(), before + 1);
        // The next datagram reuses it, with its own contents.
        let shorter = UdpPacket {
            payload: b"hi",
            ..udp
        };
        let again = pooled_datagram(&shorter);
        assert_eq!(&again.payload[..], b"hi");
        assert_eq!(spares(), before);
    }
}
