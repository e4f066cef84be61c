//! One worker's loop: its listening socket and its target-facing sockets
//! (bound as its tunnels take ports), read in batches, its engine's
//! datagrams sent in batches.

use super::WorkerReport;
use crate::server_box::TunnelServer;
use emu::RealClock;
use emu::sys::{MAX_SEGMENTS, PollFd, RecvBatch, SendBatch};
use netsim::{Datagram, Interface, Middlebox, Time};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Datagrams one `recvmmsg` takes at most.
const BATCH: usize = 64;
/// Batches read from one socket per wake-up before the others' turn.
const ROUNDS: usize = 8;
/// The longest datagram received whole.
const MAX_DATAGRAM: usize = 2048;
/// The longest wait, so that a stop is seen.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// The most bytes one segmented send carries.
const MAX_SEGMENTED_BYTES: usize = 60_000;
/// How often the worker publishes its report.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// A worker's socket counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct IoStats {
    /// Datagrams received.
    pub received: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub receive_calls: u64,
    /// Datagrams longer than the receive buffer, dropped.
    pub truncated: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Send system calls (`sendmmsg`, and `sendmsg` with segments).
    pub send_calls: u64,
    /// Datagrams sent as segments of a larger send.
    pub segmented: u64,
    /// Datagrams the kernel did not take (a socket buffer full) or that
    /// had no socket to leave from.
    pub send_dropped: u64,
    /// Sockets open (the listening one and the target-facing ones).
    pub sockets: usize,
}

/// One worker.
pub(super) struct Worker {
    engine: TunnelServer,
    /// The listening socket first, then the target-facing ones.
    sockets: Vec<(SocketAddr, UdpSocket)>,
    by_addr: HashMap<SocketAddr, usize>,
    clock: RealClock,
    receive: RecvBatch,
    send: SendBatch,
    /// The engine's datagrams waiting to be sent.
    out: Vec<Datagram>,
    /// A run of segments being assembled.
    segments: Vec<u8>,
    /// Whether the kernel takes segmented sends (cleared on a refusal).
    segmentation: bool,
    io: IoStats,
    published: Arc<Mutex<WorkerReport>>,
}

impl Worker {
    /// A worker running `engine` on `listen`.
    pub(super) fn new(
        engine: TunnelServer,
        listen: UdpSocket,
        published: Arc<Mutex<WorkerReport>>,
    ) -> Worker {
        let addr = listen.local_addr().unwrap_or_else(|_| engine.addr());
        Worker {
            engine,
            sockets: vec![(addr, listen)],
            by_addr: HashMap::from([(addr, 0)]),
            clock: RealClock::start(),
            receive: RecvBatch::new(BATCH, MAX_DATAGRAM),
            send: SendBatch::new(BATCH),
            out: Vec::new(),
            segments: Vec::new(),
            segmentation: true,
            io: IoStats::default(),
            published,
        }
    }

    /// Runs until `stop`; returns what it did.
    pub(super) fn run(mut self, stop: &AtomicBool) -> Result<WorkerReport, String> {
        let mut next_report = Instant::now();
        let mut fds: Vec<PollFd> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let now = self.clock.now();
            if self.engine.poll_timeout().is_some_and(|at| at <= now) {
                self.engine.handle_timeout(now);
            }
            self.flush(now)?;
            if Instant::now() >= next_report {
                self.publish();
                next_report = Instant::now() + REPORT_EVERY;
            }
            let wait = self
                .engine
                .poll_timeout()
                .map_or(MAX_SLEEP, |at| self.clock.until(at).min(MAX_SLEEP));
            if fds.len() != self.sockets.len() {
                fds = self
                    .sockets
                    .iter()
                    .map(|(_, s)| PollFd::readable(s.as_fd()))
                    .collect();
            }
            emu::sys::poll(&mut fds, Some(wait)).map_err(|e| format!("poll: {e}"))?;
            for (index, fd) in fds.iter().enumerate() {
                if fd.readable {
                    self.read(index)?;
                }
            }
        }
        self.publish();
        let report = self.published.lock().map(|r| r.clone()).unwrap_or_default();
        Ok(report)
    }

    /// Writes its report where [`super::ServerWorkers::reports`] reads it.
    fn publish(&mut self) {
        self.io.sockets = self.sockets.len();
        let report = WorkerReport {
            connections: self.engine.stats(),
            io: self.io,
            cpu: emu::sys::thread_cpu_time().unwrap_or_default(),
        };
        if let Ok(mut published) = self.published.lock() {
            *published = report;
        }
    }

    /// Reads what waits on socket `index`, batch by batch, each handed to
    /// the engine and its answers sent.
    fn read(&mut self, index: usize) -> Result<(), String> {
        let local = self.sockets[index].0;
        for _ in 0..ROUNDS {
            let n = emu::sys::udp_recv_batch(&self.sockets[index].1, &mut self.receive)
                .map_err(|e| format!("receiving on {local}: {e}"))?;
            if n == 0 {
                return Ok(());
            }
            self.io.receive_calls += 1;
            let now = self.clock.now();
            for i in 0..n {
                let (bytes, len) = self.receive.frame(i);
                let Some(src) = self.receive.source(i) else {
                    continue;
                };
                if len > bytes.len() {
                    self.io.truncated += 1;
                    continue;
                }
                self.io.received += 1;
                let datagram = Datagram::new(src, local, bytes::Bytes::copy_from_slice(bytes));
                self.engine.handle_datagram(now, Interface(0), datagram);
            }
            self.flush(now)?;
            if n < self.receive.capacity() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sends what the engine has for now: consecutive datagrams from one
    /// socket in one `sendmmsg`, a run of equal-sized ones to one
    /// destination in one segmented send.
    fn flush(&mut self, now: Time) -> Result<(), String> {
        while let Some(transmit) = self.engine.poll_transmit(now) {
            self.out.push(transmit.datagram);
        }
        let out = std::mem::take(&mut self.out);
        let mut start = 0;
        while start < out.len() {
            let first = &out[start];
            let Some(socket) = self.socket_for(first.src) else {
                self.io.send_dropped += 1;
                start += 1;
                continue;
            };
            // A run of equal-sized datagrams to one destination.
            let size = first.payload.len();
            let run = out[start..]
                .iter()
                .take(MAX_SEGMENTS.min(MAX_SEGMENTED_BYTES / size.max(1)))
                .take_while(|d| d.src == first.src && d.dst == first.dst)
                .take_while(|d| d.payload.len() == size)
                .count();
            if run >= 2 && self.segmentation && self.send_segments(socket, &out[start..start + run])
            {
                start += run;
                continue;
            }
            // Otherwise everything from this socket up to the next run.
            let mut end = start + 1;
            while end < out.len() && end - start < BATCH && out[end].src == first.src {
                end += 1;
            }
            self.send_batch(socket, &out[start..end])?;
            start = end;
        }
        self.out = out;
        self.out.clear();
        Ok(())
    }

    /// Sends `run` (equal sizes, one destination) as segments of one send;
    /// false if the kernel refused segmentation (then never again).
    fn send_segments(&mut self, socket: usize, run: &[Datagram]) -> bool {
        self.segments.clear();
        for datagram in run {
            self.segments.extend_from_slice(&datagram.payload);
        }
        let size = u16::try_from(run[0].payload.len()).unwrap_or(u16::MAX);
        let sent =
            emu::sys::udp_send_segments(&self.sockets[socket].1, &self.segments, size, run[0].dst);
        match sent {
            Ok(taken) => {
                self.io.send_calls += 1;
                if taken {
                    self.io.sent += run.len() as u64;
                    self.io.segmented += run.len() as u64;
                } else {
                    self.io.send_dropped += run.len() as u64;
                }
                true
            }
            Err(_) => {
                self.segmentation = false;
                false
            }
        }
    }

    /// Sends `datagrams` (all from one socket) with `sendmmsg`.
    fn send_batch(&mut self, socket: usize, datagrams: &[Datagram]) -> Result<(), String> {
        let payloads: Vec<&[u8]> = datagrams.iter().map(|d| &d.payload[..]).collect();
        let dsts: Vec<SocketAddr> = datagrams.iter().map(|d| d.dst).collect();
        let (addr, udp) = &self.sockets[socket];
        let taken = emu::sys::udp_send_batch(udp, &payloads, &dsts, &mut self.send)
            .map_err(|e| format!("sending from {addr}: {e}"))?;
        self.io.send_calls += 1;
        self.io.sent += taken as u64;
        self.io.send_dropped += (datagrams.len() - taken) as u64;
        Ok(())
    }

    /// The socket bound to `addr`, bound now if it is one of the worker's
    /// target-facing ports (on the listening IP); `None` for an address
    /// not its own or a port something else holds.
    fn socket_for(&mut self, addr: SocketAddr) -> Option<usize> {
        if let Some(&index) = self.by_addr.get(&addr) {
            return Some(index);
        }
        if addr.ip() != self.sockets[0].0.ip() {
            return None;
        }
        let socket = UdpSocket::bind(addr).ok()?;
        socket.set_nonblocking(true).ok()?;
        self.sockets.push((addr, socket));
        self.by_addr.insert(addr, self.sockets.len() - 1);
        Some(self.sockets.len() - 1)
    }
}
