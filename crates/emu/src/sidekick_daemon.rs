//! The Sidekick proxy as a daemon on a real Linux router
//! (`pepkit sidekick-proxy`).
//!
//! The kernel forwards the traffic; the daemon only watches it. It runs
//! the simulator's proxy engine ([`sidekick::SidekickProxy`]) with
//! forwarding off ([`ProxyConfig::forward`]) and feeds it:
//!
//! * every UDP datagram *arriving* on the interface that faces the data
//!   senders, sniffed with an `AF_PACKET` socket ([`PacketSocket`], which
//!   ignores the host's own outgoing frames), parsed by [`crate::frame`];
//! * the control messages (configure, reset), from a UDP socket bound to
//!   the proxy's control address (their sniffed copies are ignored).
//!
//! and sends what the engine emits: quACKs from the control socket (their
//! source is the control address), discovery replies — whose source is
//! the *receiver's* address and port, so they cross NATs like the base
//! traffic — from a raw IPv4 socket (`IPPROTO_RAW`, i.e. `IP_HDRINCL`),
//! with the IP and UDP headers built here ([`crate::frame::ipv4_udp_packet`]).
//!
//! The loop sleeps in `ppoll` on both sockets until the engine's next timer
//! (nanosecond precision), at most [`MAX_SLEEP`] so that a stop request is
//! seen; frames are received in batches (`recvmmsg`). Time is a
//! [`RealClock`] started when the daemon opens. Nothing a peer sends stops
//! the daemon: frames that do not parse, send failures and the like are
//! counted in [`DaemonStats`]. Per-flow state is bounded by the engine
//! (its flow table's size and idle timeouts).
//!
//! The sniffed interface should not coalesce UDP (`rx-udp-gro-forwarding`
//! off, the kernel's default): a coalesced frame holds many datagrams
//! behind one header, and only the first would be counted.

use crate::clock::RealClock;
use crate::frame::{Frame, parse_frame, write_ipv4_udp_packet};
use crate::sys::{PacketSocket, PollFd, RecvBatch, poll};
use bytes::Bytes;
use netsim::{Datagram, Interface, Middlebox, Seed, Time};
use serde::Serialize;
use sidekick::wire::Interval;
use sidekick::{FlowSummary, ProxyConfig, ProxyStats, SidekickProxy};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The control port when none is given.
pub const DEFAULT_PORT: u16 = 1234;
/// The longest the daemon sleeps without looking at its flags.
pub const MAX_SLEEP: Duration = Duration::from_millis(50);
/// Frames received per `recvmmsg` call.
const BATCH: usize = 64;
/// Batches handled before the control socket and the timers get a turn.
const BATCHES_PER_TURN: usize = 16;
/// The longest frame read whole: a 9216-byte jumbo MTU, an Ethernet header
/// and two VLAN tags. Longer frames (coalesced TCP) are skipped.
const MAX_FRAME: usize = 9216 + 22;
/// The packet socket's receive buffer: ~2 s of 100k small frames.
const PACKET_BUFFER: usize = 16 << 20;
/// The control socket's buffers.
const CONTROL_BUFFER: usize = 4 << 20;
/// Control datagrams read per turn.
const CONTROL_PER_TURN: usize = 64;

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct SidekickDaemonConfig {
    /// The interface facing the data senders; the daemon sees the frames
    /// that arrive on it.
    pub iface: String,
    /// The proxy's control address: an address of this host. Control
    /// messages arrive here, quACKs leave from here, and replies name it.
    pub addr: SocketAddrV4,
    /// The flow table's bound.
    pub max_flows: usize,
    /// A configured flow without packets for this long is forgotten.
    pub idle_timeout: Duration,
    /// A flow never configured is forgotten after this long.
    pub unconfigured_timeout: Duration,
    /// How many of a flow's latest session IDs are accepted.
    pub session_window: usize,
    /// The largest quota a sender can hold.
    pub max_quota: u32,
    /// Send a strawman instead of the power sum (for comparisons).
    pub strawman: Option<quack::Scheme>,
    /// Seeds the session IDs; `None` (the default) takes a seed from the
    /// OS, as a deployment must (session IDs are the reflection defence).
    pub seed: Option<u64>,
    /// Write the counters to the log this often (`None`: never).
    pub stats_every: Option<Duration>,
}

impl SidekickDaemonConfig {
    /// The engine's defaults ([`ProxyConfig::new`]): 4096 flows, 30 s idle
    /// timeout (5 s unconfigured), 8 session IDs, quota at most 2^20, the
    /// power sum; a seed from the OS; no periodic stats.
    pub fn new(iface: impl Into<String>, addr: SocketAddrV4) -> SidekickDaemonConfig {
        let defaults = ProxyConfig::new(SocketAddr::V4(addr), Seed::new(0));
        SidekickDaemonConfig {
            iface: iface.into(),
            addr,
            max_flows: defaults.max_flows,
            idle_timeout: defaults.idle_timeout,
            unconfigured_timeout: defaults.unconfigured_timeout,
            session_window: defaults.session_window,
            max_quota: defaults.max_quota,
            strawman: defaults.strawman,
            seed: None,
            stats_every: None,
        }
    }

    /// The engine's configuration (forwarding off; the seed drawn from the
    /// OS if none was given).
    pub fn proxy_config(&self) -> ProxyConfig {
        let seed = self.seed.unwrap_or_else(os_seed);
        let mut config = ProxyConfig::new(SocketAddr::V4(self.addr), Seed::new(seed));
        config.max_flows = self.max_flows;
        config.idle_timeout = self.idle_timeout;
        config.unconfigured_timeout = self.unconfigured_timeout;
        config.session_window = self.session_window;
        config.max_quota = self.max_quota;
        config.strawman = self.strawman;
        config.forward = false;
        config
    }
}

/// 64 random bits from the OS (`/dev/urandom`); if that fails, the clock
/// and the process ID mixed (never expected on Linux).
fn os_seed() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok()
    {
        return u64::from_le_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Seed::new(nanos ^ u64::from(std::process::id()))
        .derive("sidekick-daemon")
        .value()
}

/// What the daemon counted: the engine's counters (flattened in JSON) and
/// the daemon's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DaemonStats {
    /// The engine's counters.
    #[serde(flatten)]
    pub proxy: ProxyStats,
    /// Frames read from the interface.
    pub frames: u64,
    /// UDP datagrams handed to the engine.
    pub datagrams: u64,
    /// Frames that are not IPv4/UDP (ARP, TCP, IPv6, fragments).
    pub other_frames: u64,
    /// Frames that do not parse (truncated, bad header or checksum).
    pub malformed_frames: u64,
    /// Frames longer than the daemon reads (skipped).
    pub oversize_frames: u64,
    /// Sniffed datagrams to the control address (the control socket gets
    /// them; not counted twice).
    pub sniffed_control: u64,
    /// Datagrams read from the control socket.
    pub control_datagrams: u64,
    /// Replies and quACKs the kernel refused (full buffer, no route).
    pub send_errors: u64,
    /// Frames the kernel dropped before the daemon read them.
    pub kernel_drops: u64,
    /// Receive errors of the packet socket (the interface went down); the
    /// daemon goes on and sees the frames again once it is back up.
    pub interface_errors: u64,
    /// Turns of the loop (wake-ups): frames per turn says how well
    /// receives are batched.
    pub turns: u64,
    /// Flows in the table when the counters were taken.
    pub flows: usize,
    /// Of those, flows their sender configured.
    pub configured_flows: usize,
}

/// Why the daemon cannot run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Packet and raw sockets need root (`CAP_NET_RAW`).
    #[error("the sidekick proxy needs root (CAP_NET_RAW) for its packet and raw sockets")]
    NotRoot,
    /// No interface of that name in this network namespace.
    #[error("no interface {0} in this network namespace")]
    NoInterface(String),
    /// The control address is not an address of this host.
    #[error("{0} is not an address of this host (cannot bind the control socket)")]
    AddrNotLocal(SocketAddrV4),
    /// Something else about a socket.
    #[error("{what}: {source}")]
    Io {
        /// What the daemon was doing.
        what: String,
        /// The error.
        source: io::Error,
    },
}

impl DaemonError {
    fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
        let what = what.into();
        move |source| DaemonError::Io { what, source }
    }
}

/// The daemon with its sockets open, ready to run.
pub struct SidekickDaemon {
    proxy: SidekickProxy,
    addr: SocketAddr,
    packets: PacketSocket,
    control: UdpSocket,
    raw: Socket,
    batch: RecvBatch,
    recv_buf: Vec<u8>,
    packet_buf: Vec<u8>,
    clock: RealClock,
    stats: DaemonStats,
    stats_every: Option<Duration>,
    next_stats: Time,
    null: bool,
}

impl SidekickDaemon {
    /// Opens the sockets in the current network namespace: the packet
    /// socket on `config.iface`, the control socket on `config.addr`, the
    /// raw socket. The daemon's clock starts now.
    pub fn open(config: &SidekickDaemonConfig) -> Result<SidekickDaemon, DaemonError> {
        let packets =
            PacketSocket::bind(&config.iface, PACKET_BUFFER).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => DaemonError::NoInterface(config.iface.clone()),
                io::ErrorKind::PermissionDenied => DaemonError::NotRoot,
                _ => DaemonError::Io {
                    what: format!("packet socket on {}", config.iface),
                    source: e,
                },
            })?;
        let raw = Socket::new(
            Domain::IPV4,
            Type::RAW,
            Some(Protocol::from(libc::IPPROTO_RAW)),
        )
        .map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => DaemonError::NotRoot,
            _ => DaemonError::Io {
                what: "raw IPv4 socket".into(),
                source: e,
            },
        })?;
        raw.set_nonblocking(true)
            .map_err(DaemonError::io("raw IPv4 socket"))?;
        let _ = raw.set_send_buffer_size(CONTROL_BUFFER);
        let control = bind_control(config.addr)?;
        let clock = RealClock::start();
        Ok(SidekickDaemon {
            proxy: SidekickProxy::new(config.proxy_config()),
            addr: SocketAddr::V4(config.addr),
            packets,
            control,
            raw,
            batch: RecvBatch::new(BATCH, MAX_FRAME),
            recv_buf: vec![0; 65_536],
            packet_buf: Vec::with_capacity(2048),
            clock,
            stats: DaemonStats::default(),
            stats_every: config.stats_every,
            next_stats: config
                .stats_every
                .map_or(Time::MAX, |every| Time::ZERO + every),
            null: false,
        })
    }

    /// Runs until `stop` is set; writes the flow table to `log` whenever
    /// `dump` is set (and clears it), and the counters every
    /// [`SidekickDaemonConfig::stats_every`]. Returns the counters.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        dump: &AtomicBool,
        mut log: impl Write,
    ) -> Result<DaemonStats, DaemonError> {
        while !stop.load(Ordering::Relaxed) {
            if dump.swap(false, Ordering::Relaxed) {
                self.dump(&mut log);
            }
            self.turn(MAX_SLEEP, &mut log)?;
        }
        Ok(self.stats())
    }

    /// One turn of the loop: run due timers, sleep until the next one (at
    /// most `max_sleep`) or until a socket is readable, read what arrived
    /// (a bounded amount), send what the engine emits.
    pub fn turn(&mut self, max_sleep: Duration, log: &mut dyn Write) -> Result<(), DaemonError> {
        self.stats.turns += 1;
        let now = self.clock.now();
        self.run_timers(now);
        if now >= self.next_stats {
            let _ = writeln!(
                log,
                "stats {}",
                serde_json::to_string(&self.stats()).unwrap_or_default()
            );
            self.next_stats = now + self.stats_every.unwrap_or(Duration::MAX);
        }
        let wake = self.proxy.poll_timeout().unwrap_or(Time::MAX);
        let sleep = wake.saturating_duration_since(now).min(max_sleep);
        let mut fds = [
            PollFd::readable(self.packets.as_fd()),
            PollFd::readable(self.control.as_fd()),
        ];
        poll(&mut fds, Some(sleep)).map_err(DaemonError::io("poll"))?;
        // Control first: a configure message usually precedes the packets
        // that arrive with it.
        if fds[1].readable {
            self.read_control()?;
        }
        if fds[0].readable {
            let errors = self.stats.interface_errors;
            self.read_frames()?;
            if self.stats.interface_errors > errors {
                let _ = writeln!(
                    log,
                    "sidekick-proxy: {} is down; waiting for it",
                    self.packets.interface()
                );
            }
        }
        let now = self.clock.now();
        self.run_timers(now);
        Ok(())
    }

    /// Runs the engine's timers if one is due, and sends what it emits.
    fn run_timers(&mut self, now: Time) {
        if self.proxy.poll_timeout().is_some_and(|at| at <= now) {
            self.proxy.handle_timeout(now);
        }
        self.flush(now);
    }

    /// Reads frames from the interface, in batches, up to
    /// [`BATCHES_PER_TURN`] of them.
    fn read_frames(&mut self) -> Result<(), DaemonError> {
        for _ in 0..BATCHES_PER_TURN {
            let n = match self.packets.recv_batch(&mut self.batch) {
                Ok(0) => break,
                Ok(n) => n,
                // The interface went down (reported once per event).
                Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                    self.stats.interface_errors += 1;
                    break;
                }
                Err(e) => {
                    return Err(DaemonError::Io {
                        what: format!("packet socket on {}", self.packets.interface()),
                        source: e,
                    });
                }
            };
            let now = self.clock.now();
            for (frame, len) in self.batch.frames() {
                self.stats.frames += 1;
                if len > frame.len() {
                    self.stats.oversize_frames += 1;
                    continue;
                }
                match parse_frame(frame) {
                    Ok(Frame::Udp(udp)) => {
                        if SocketAddr::V4(udp.dst) == self.addr {
                            self.stats.sniffed_control += 1;
                        } else {
                            self.stats.datagrams += 1;
                            if !self.null {
                                self.proxy
                                    .handle_datagram(now, Interface(0), udp.to_datagram());
                            }
                        }
                    }
                    Ok(Frame::Other(_)) => self.stats.other_frames += 1,
                    Err(_) => self.stats.malformed_frames += 1,
                }
            }
            self.flush(now);
            if n < self.batch.capacity() {
                break;
            }
        }
        Ok(())
    }

    /// Hands the control socket's datagrams to the engine (a bounded
    /// number per turn).
    fn read_control(&mut self) -> Result<(), DaemonError> {
        for _ in 0..CONTROL_PER_TURN {
            match self.control.recv_from(&mut self.recv_buf) {
                Ok((len, src)) => {
                    self.stats.control_datagrams += 1;
                    let now = self.clock.now();
                    let payload = Bytes::copy_from_slice(&self.recv_buf[..len]);
                    self.proxy.handle_datagram(
                        now,
                        Interface(0),
                        Datagram::new(src, self.addr, payload),
                    );
                    self.flush(now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Interrupted, or an ICMP error from an earlier quACK
                // (port unreachable): nothing to read, go on.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::HostUnreachable
                            | io::ErrorKind::NetworkUnreachable
                    ) => {}
                Err(e) => {
                    return Err(DaemonError::Io {
                        what: format!("control socket {}", self.addr),
                        source: e,
                    });
                }
            }
        }
        Ok(())
    }

    /// Sends everything the engine has to send: from the control socket
    /// if its source is the control address, else (a reply, from the
    /// receiver's address) from the raw socket.
    fn flush(&mut self, now: Time) {
        while let Some(transmit) = self.proxy.poll_transmit(now) {
            let datagram = transmit.datagram;
            let sent = if datagram.src == self.addr {
                self.control
                    .send_to(&datagram.payload, datagram.dst)
                    .map(drop)
            } else {
                self.send_raw(&datagram)
            };
            if sent.is_err() {
                self.stats.send_errors += 1;
            }
        }
    }

    fn send_raw(&mut self, datagram: &Datagram) -> io::Result<()> {
        write_ipv4_udp_packet(datagram, &mut self.packet_buf).map_err(io::Error::other)?;
        let dst = SockAddr::from(SocketAddr::new(datagram.dst.ip(), 0));
        self.raw.send_to(&self.packet_buf, &dst).map(drop)
    }

    /// The counters now (reads the kernel's drop counter).
    pub fn stats(&mut self) -> DaemonStats {
        if let Ok(kernel) = self.packets.take_stats() {
            self.stats.kernel_drops += kernel.drops;
        }
        self.stats.proxy = *self.proxy.stats();
        self.stats.flows = self.proxy.flow_count();
        self.stats.configured_flows = self
            .proxy
            .flows(self.clock.now())
            .iter()
            .filter(|f| f.configured())
            .count();
        self.stats
    }

    /// The flow table now.
    pub fn flows(&self) -> Vec<FlowSummary> {
        self.proxy.flows(self.clock.now())
    }

    /// Writes the flow table to `log`: a header line, then one line per
    /// flow.
    pub fn dump(&mut self, log: &mut dyn Write) {
        let flows = self.flows();
        let _ = writeln!(
            log,
            "sidekick-proxy: {} flows at {:.3} s",
            flows.len(),
            self.clock.now().as_secs_f64()
        );
        for flow in &flows {
            let _ = writeln!(log, "{}", flow_line(flow));
        }
        let _ = log.flush();
    }

    /// For capacity measurements: with `null` set, frames are received and
    /// parsed but not handed to the engine.
    pub fn set_null(&mut self, null: bool) {
        self.null = null;
    }

    /// The daemon's clock.
    pub fn clock(&self) -> RealClock {
        self.clock
    }
}

/// One flow as a log line.
pub fn flow_line(flow: &FlowSummary) -> String {
    let state = match (&flow.config, flow.peer) {
        (Some(c), Some(peer)) => {
            let interval = match c.interval {
                Interval::Packets(n) => format!("{n}pkt"),
                Interval::Millis(ms) => format!("{ms}ms"),
            };
            format!(
                "configured interval={interval} threshold={} id={}B@{} quacks_to={peer}",
                c.threshold, c.id_bytes, c.id_offset
            )
        }
        _ => "unconfigured".to_string(),
    };
    format!(
        "flow {} -> {} {state} quota_left={} epoch={} pending={} idle={:.3}s",
        flow.sender,
        flow.receiver,
        flow.quota_left,
        flow.epoch,
        flow.pending,
        flow.idle.as_secs_f64()
    )
}

fn bind_control(addr: SocketAddrV4) -> Result<UdpSocket, DaemonError> {
    let what = || format!("control socket {addr}");
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| DaemonError::io(what())(e))?;
    let _ = socket.set_recv_buffer_size(CONTROL_BUFFER);
    let _ = socket.set_send_buffer_size(CONTROL_BUFFER);
    socket.bind(&SocketAddr::V4(addr).into()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrNotAvailable {
            DaemonError::AddrNotLocal(addr)
        } else {
            DaemonError::io(what())(e)
        }
    })?;
    socket
        .set_nonblocking(true)
        .map_err(|e| DaemonError::io(what())(e))?;
    Ok(socket.into())
}

/// Opens the daemon ([`SidekickDaemon::open`]) and runs it until `stop`
/// ([`SidekickDaemon::run`]).
pub fn run(
    config: &SidekickDaemonConfig,
    stop: &AtomicBool,
    dump: &AtomicBool,
    log: impl Write,
) -> Result<DaemonStats, DaemonError> {
    SidekickDaemon::open(config)?.run(stop, dump, log)
}

/// Parses `IP[:PORT]` (IPv4; the port defaults to [`DEFAULT_PORT`]).
pub fn parse_control_addr(text: &str) -> Result<SocketAddrV4, String> {
    if let Ok(addr) = text.parse::<SocketAddrV4>() {
        return Ok(addr);
    }
    match text.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(SocketAddrV4::new(ip, DEFAULT_PORT)),
        Ok(IpAddr::V6(_)) => Err(format!("{text}: only IPv4 is supported")),
        Err(_) => Err(format!("{text}: not an IPv4 address, IP or IP:PORT")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_addresses_parse_with_a_default_port() {
        assert_eq!(
            parse_control_addr("10.255.255.1"),
            Ok("10.255.255.1:1234".parse().unwrap())
        );
        assert_eq!(
            parse_control_addr("10.0.0.1:99"),
            Ok("10.0.0.1:99".parse().unwrap())
        );
        assert!(parse_control_addr("::1").is_err());
        assert!(parse_control_addr("nonsense").is_err());
    }

    #[test]
    fn stats_are_one_flat_json_object() {
        let json = serde_json::to_value(DaemonStats::default()).unwrap();
        for key in ["requests", "replies", "quacks", "frames", "kernel_drops"] {
            assert!(json.get(key).is_some(), "{key} in {json}");
        }
    }

    #[test]
    fn the_engine_runs_without_forwarding() {
        let config = SidekickDaemonConfig::new("eth0", "10.255.255.1:1234".parse().unwrap());
        let proxy = config.proxy_config();
        assert!(!proxy.forward);
        assert_eq!(proxy.max_flows, 4096);
        // Two configs without a seed draw different ones.
        assert_ne!(
            config.proxy_config().seed.value(),
            config.proxy_config().seed.value()
        );
    }
}
