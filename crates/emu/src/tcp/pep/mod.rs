//! A transparent split-connection TCP PEP, like PEPsal: the "TCP + PEP"
//! baseline.
//!
//! It runs on a router (the middle node that forwards IP packets between the
//! sender's and the receiver's side). nftables' `tproxy` hands every
//! forwarded TCP connection to the PEP's listener ([`ruleset`],
//! [`routing_commands`], [`install`]); the accepted socket's local address is
//! the connection's original destination. The PEP opens the server-side leg
//! from the *client's* address and port (`IP_TRANSPARENT`), so the server
//! sees the client, the client sees the server, and the ruleset's
//! `socket transparent 1` rule delivers the server's replies to that socket.
//! Each leg is a full TCP connection with its own congestion controller, so
//! each side's loss recovery and window growth only span its own hop.
//!
//! Per connection two threads copy bytes, one per direction. At end of stream
//! a thread shuts down the other leg's write side and exits, so half-close is
//! preserved (the bulk protocol's upload-then-reply needs it). A connection
//! that moves no byte in either direction for the idle timeout is closed on
//! both legs; every blocking call wakes up every [`POLL_INTERVAL`] to look at
//! the stop flag, so [`TcpPep::run`] returns promptly once it is set.
//!
//! Buffering: the relay buffer ([`TcpPepConfig::relay_buffer`], 64 KiB per
//! direction) only carries bytes from one socket to the other. The buffering
//! that decouples the legs — what makes a split connection fast when one hop
//! is lossy or long — is the kernel's socket buffers, which autotune up to
//! `tcp_rmem`/`tcp_wmem` unless [`TcpPepConfig::send_buffer`] or
//! [`TcpPepConfig::recv_buffer`] fix them. PEPsal uses two pages (8 KiB) per
//! direction for the same reason; 64 KiB takes 8× fewer system calls for the
//! same bytes, and 1024 connections cost at most 128 MiB of relay buffers.

use crate::sys::command::{self, CommandError};
use crate::tcp::congestion::{CongestionError, set_congestion};
use crate::tcp::{is_timeout, is_transient_accept_error};
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The nftables table the PEP's ruleset lives in.
pub const TABLE: &str = "pepkit_pep";
/// The firewall mark that routes intercepted packets to the local stack.
pub const FWMARK: u32 = 0x1;
/// The routing table holding the `local 0.0.0.0/0 dev lo` route.
pub const ROUTE_TABLE: u32 = 100;
/// The PEP's default listening port.
pub const DEFAULT_PORT: u16 = 5000;
/// How often blocked accepts, reads and writes wake up to look at the stop
/// flag and the idle timeout.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// The nftables ruleset that diverts forwarded TCP to a transparent
/// listener on `port` (the kernel's TPROXY recipe): packets of connections
/// the PEP already owns (`socket transparent 1`) and new connections
/// (`tproxy to :port`) are marked, and the mark routes them to the local
/// stack.
pub fn ruleset(port: u16) -> String {
    format!(
        "table ip {TABLE} {{\n\
         \tchain divert {{\n\
         \t\ttype filter hook prerouting priority mangle; policy accept;\n\
         \t\tmeta l4proto tcp socket transparent 1 meta mark set {FWMARK:#x} accept\n\
         \t\tmeta l4proto tcp tproxy to :{port} meta mark set {FWMARK:#x} accept\n\
         \t}}\n\
         }}\n"
    )
}

/// The `ip` commands that route marked packets to the local stack, and the
/// commands that undo them (in the order to run them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingCommands {
    /// `ip rule add …`, `ip route add …`: the arguments after `ip`.
    pub install: Vec<Vec<String>>,
    /// `ip route del …`, `ip rule del …`: the arguments after `ip`.
    pub undo: Vec<Vec<String>>,
}

/// The policy routing of the TPROXY recipe:
/// `ip rule add fwmark 0x1 lookup 100` and
/// `ip route add local 0.0.0.0/0 dev lo table 100`, with their undo commands.
pub fn routing_commands() -> RoutingCommands {
    let args = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let mark = format!("{FWMARK:#x}");
    let table = ROUTE_TABLE.to_string();
    RoutingCommands {
        install: vec![
            args(&["rule", "add", "fwmark", &mark, "lookup", &table]),
            args(&[
                "route",
                "add",
                "local",
                "0.0.0.0/0",
                "dev",
                "lo",
                "table",
                &table,
            ]),
        ],
        undo: vec![
            args(&[
                "route",
                "del",
                "local",
                "0.0.0.0/0",
                "dev",
                "lo",
                "table",
                &table,
            ]),
            args(&["rule", "del", "fwmark", &mark, "lookup", &table]),
        ],
    }
}

/// Installs the interception for a PEP on `port` in the current network
/// namespace: the nftables table (replacing an older one of the same name)
/// and the policy routing. Needs root (`CAP_NET_ADMIN`); `nft` comes from
/// the Debian package `nftables`.
pub fn install(port: u16) -> Result<(), PepError> {
    // Leftovers of an earlier run are removed first, so that installing
    // twice leaves one copy of everything.
    let _ = uninstall();
    // `add` then `delete` makes the delete succeed whether or not the table
    // existed; the whole input is one atomic transaction.
    let text = format!(
        "add table ip {TABLE}\ndelete table ip {TABLE}\n{}",
        ruleset(port)
    );
    command::run_input("nft", &["-f", "-"], Some(&text)).map_err(PepError::Setup)?;
    for args in routing_commands().install {
        if let Err(e) = command::ip(&args) {
            let _ = uninstall();
            return Err(PepError::Setup(e));
        }
    }
    Ok(())
}

/// Removes what [`install`] set up from the current network namespace.
/// Missing pieces are not errors. A step that fails otherwise is tried up to
/// three times (a daemon stopped through `timeout` can see the first tool it
/// starts killed by the signal `timeout` sends to its process group); the
/// first lasting failure is returned after trying every step.
pub fn uninstall() -> Result<(), PepError> {
    let mut first = None;
    let text = format!("add table ip {TABLE}\ndelete table ip {TABLE}\n");
    let mut steps: Vec<Box<dyn Fn() -> Result<String, CommandError>>> = vec![Box::new(move || {
        command::run_input("nft", &["-f", "-"], Some(&text))
    })];
    for args in routing_commands().undo {
        steps.push(Box::new(move || command::ip(&args)));
    }
    for step in &steps {
        if let Err(e) = with_retries(step.as_ref()) {
            first.get_or_insert(e);
        }
    }
    // `ip rule add` twice adds two rules: remove any further copies (a
    // bounded number of them).
    let rule_undo = routing_commands().undo.pop().unwrap_or_default();
    for _ in 0..16 {
        if command::ip(&rule_undo).is_err() {
            break;
        }
    }
    match first {
        Some(e) => Err(PepError::Setup(e)),
        None => Ok(()),
    }
}

/// Runs an undo step up to three times; "already gone" counts as success.
fn with_retries(step: &dyn Fn() -> Result<String, CommandError>) -> Result<(), CommandError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match step() {
            Ok(_) => return Ok(()),
            Err(CommandError::Failed { stderr, .. })
                if stderr.contains("No such file")
                    || stderr.contains("No such process")
                    || stderr.contains("does not exist") =>
            {
                return Ok(());
            }
            Err(e @ CommandError::Missing { .. }) => return Err(e),
            Err(e) if attempt >= 3 => return Err(e),
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// How the PEP runs.
#[derive(Clone, Debug)]
pub struct TcpPepConfig {
    /// The port nftables' `tproxy` diverts connections to (default 5000).
    pub port: u16,
    /// The congestion controller of both legs (default `"cubic"`).
    pub congestion: String,
    /// Connections relayed at once (default 1024). Beyond it new connections
    /// are reset at once and counted as refused.
    pub max_connections: usize,
    /// A connection that moves no byte in either direction for this long is
    /// closed on both legs (default 60 s).
    pub idle_timeout: Duration,
    /// How long opening the server-side leg may take (default 10 s).
    pub connect_timeout: Duration,
    /// Bytes copied per system call, per direction (default 64 KiB; see the
    /// module docs).
    pub relay_buffer: usize,
    /// `SO_SNDBUF` of both legs (`None`, the default: the kernel autotunes).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` of both legs (`None`, the default: the kernel autotunes).
    pub recv_buffer: Option<usize>,
    /// Open the server-side leg from the client's port too, not only its
    /// address, so the server sees the client's exact address (default
    /// true; falls back to an ephemeral port if that one is taken).
    pub preserve_client_port: bool,
}

impl Default for TcpPepConfig {
    fn default() -> TcpPepConfig {
        TcpPepConfig {
            port: DEFAULT_PORT,
            congestion: "cubic".to_owned(),
            max_connections: 1024,
            idle_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            relay_buffer: 64 * 1024,
            send_buffer: None,
            recv_buffer: None,
            preserve_client_port: true,
        }
    }
}

/// What the PEP counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PepStats {
    /// Connections accepted and relayed (refused ones not included).
    pub connections: u64,
    /// Connections whose both directions ended with an orderly end of stream.
    pub completed: u64,
    /// Connections reset at once because `max_connections` were open.
    pub refused: u64,
    /// Connections closed by the idle timeout.
    pub idle_closed: u64,
    /// Connections whose server-side leg could not be opened.
    pub connect_failed: u64,
    /// Connections ended by a network error on either leg.
    pub errors: u64,
    /// Connections cut because the PEP was stopping.
    pub stopped: u64,
    /// Payload bytes relayed from clients to servers.
    pub bytes_client_to_server: u64,
    /// Payload bytes relayed from servers to clients.
    pub bytes_server_to_client: u64,
    /// The most connections open at once.
    pub peak_connections: u64,
}

/// The PEP failed.
#[derive(Debug, thiserror::Error)]
pub enum PepError {
    /// Installing or removing the interception failed.
    #[error("setting up the interception: {0}")]
    Setup(#[source] CommandError),
    /// The congestion controller could not be set.
    #[error(transparent)]
    Congestion(#[from] CongestionError),
    /// The configuration cannot work.
    #[error("invalid PEP configuration: {0}")]
    Config(String),
    /// A system call on the listener failed.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// The system error.
        source: io::Error,
    },
}

/// A closure mapping an `io::Error` to [`PepError::Io`] for `what`.
fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> PepError {
    let what = what.into();
    move |source| PepError::Io { what, source }
}

/// The PEP's counters, shared by its threads.
#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    completed: AtomicU64,
    refused: AtomicU64,
    idle_closed: AtomicU64,
    connect_failed: AtomicU64,
    errors: AtomicU64,
    stopped: AtomicU64,
    bytes_c2s: AtomicU64,
    bytes_s2c: AtomicU64,
    peak: AtomicU64,
    open: AtomicUsize,
}

impl Counters {
    fn snapshot(&self) -> PepStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PepStats {
            connections: get(&self.connections),
            completed: get(&self.completed),
            refused: get(&self.refused),
            idle_closed: get(&self.idle_closed),
            connect_failed: get(&self.connect_failed),
            errors: get(&self.errors),
            stopped: get(&self.stopped),
            bytes_client_to_server: get(&self.bytes_c2s),
            bytes_server_to_client: get(&self.bytes_s2c),
            peak_connections: get(&self.peak),
        }
    }
}

/// A transparent split-connection TCP PEP. [`TcpPep::new`] opens the
/// listener; [`TcpPep::run`] relays until the stop flag is set. The
/// interception ([`install`]) is separate, so that the daemon and the
/// firewall can be managed apart.
#[derive(Debug)]
pub struct TcpPep {
    listener: Socket,
    config: TcpPepConfig,
}

impl TcpPep {
    /// Checks the configuration and opens the transparent listener on
    /// `0.0.0.0:port` (needs root: `IP_TRANSPARENT` takes `CAP_NET_ADMIN`).
    pub fn new(config: TcpPepConfig) -> Result<TcpPep, PepError> {
        if config.max_connections == 0 {
            return Err(PepError::Config(
                "max_connections must be at least 1".into(),
            ));
        }
        if config.relay_buffer == 0 {
            return Err(PepError::Config(
                "relay_buffer must be at least 1 byte".into(),
            ));
        }
        if config.idle_timeout.is_zero() || config.connect_timeout.is_zero() {
            return Err(PepError::Config(
                "idle_timeout and connect_timeout must be positive".into(),
            ));
        }
        let listener = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))
            .map_err(io_err("creating the listening socket"))?;
        listener
            .set_reuse_address(true)
            .map_err(io_err("setting SO_REUSEADDR"))?;
        listener.set_ip_transparent_v4(true).map_err(io_err(
            "setting IP_TRANSPARENT on the listener (needs root)",
        ))?;
        set_congestion(SockRef::from(&listener), &config.congestion)?;
        if let Some(size) = config.recv_buffer {
            listener
                .set_recv_buffer_size(size)
                .map_err(io_err("setting SO_RCVBUF"))?;
        }
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, config.port));
        listener
            .bind(&SockAddr::from(addr))
            .map_err(io_err(format!("binding {addr}")))?;
        listener
            .listen(1024)
            .map_err(io_err(format!("listening on {addr}")))?;
        // Linux's accept honours SO_RCVTIMEO: accept wakes up to look at the
        // stop flag.
        listener
            .set_read_timeout(Some(POLL_INTERVAL))
            .map_err(io_err("setting the accept timeout"))?;
        Ok(TcpPep { listener, config })
    }

    /// The configuration.
    pub fn config(&self) -> &TcpPepConfig {
        &self.config
    }

    /// Relays connections until `stop` is set; then closes every open
    /// connection, waits for its threads and returns the counters. That
    /// takes about [`POLL_INTERVAL`], or up to
    /// [`TcpPepConfig::connect_timeout`] while a server-side leg is still
    /// being opened.
    pub fn run(self, stop: Arc<AtomicBool>) -> Result<PepStats, PepError> {
        let shared = Arc::new(Shared {
            config: self.config.clone(),
            counters: Counters::default(),
            stop: Arc::clone(&stop),
        });
        let mut running: Vec<JoinHandle<()>> = Vec::new();
        let mut result = Ok(());
        while !stop.load(Ordering::Relaxed) {
            running.retain(|h| !h.is_finished());
            match self.listener.accept() {
                Ok((socket, peer)) => {
                    if let Some(handle) = shared.admit(socket, peer) {
                        running.push(handle);
                    }
                }
                Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_transient_accept_error(&e) => {
                    shared.counters.errors.fetch_add(1, Ordering::Relaxed);
                    thread::sleep(Duration::from_millis(50));
                }
                Err(source) => {
                    result = Err(PepError::Io {
                        what: format!("accepting on port {}", self.config.port),
                        source,
                    });
                    break;
                }
            }
        }
        // Every connection thread sees the flag within POLL_INTERVAL.
        stop.store(true, Ordering::Relaxed);
        for handle in running {
            let _ = handle.join();
        }
        result?;
        Ok(shared.counters.snapshot())
    }
}

/// What the PEP's threads share.
struct Shared {
    config: TcpPepConfig,
    counters: Counters,
    stop: Arc<AtomicBool>,
}

/// Makes closing a socket send a reset (`SO_LINGER` 0) instead of a FIN.
fn reset(socket: SockRef<'_>) {
    let _ = socket.set_linger(Some(Duration::ZERO));
}

impl Shared {
    /// Takes on a freshly accepted connection: refuses it if too many are
    /// open, else starts its relay thread.
    fn admit(self: &Arc<Shared>, socket: Socket, peer: SockAddr) -> Option<JoinHandle<()>> {
        let counters = &self.counters;
        let (Some(peer), Some(original_dst)) = (
            peer.as_socket(),
            socket.local_addr().ok().and_then(|a| a.as_socket()),
        ) else {
            counters.errors.fetch_add(1, Ordering::Relaxed);
            reset(SockRef::from(&socket));
            return None;
        };
        let open = counters.open.load(Ordering::Relaxed);
        if open >= self.config.max_connections || self.is_direct(original_dst) {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            reset(SockRef::from(&socket));
            return None;
        }
        let open = counters.open.fetch_add(1, Ordering::Relaxed) + 1;
        counters.peak.fetch_max(open as u64, Ordering::Relaxed);
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let me = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name("pep-conn".to_owned())
            .stack_size(256 * 1024)
            .spawn(move || {
                let outcome = me.relay(TcpStream::from(socket), peer, original_dst);
                me.count(outcome);
                me.counters.open.fetch_sub(1, Ordering::Relaxed);
            });
        match spawned {
            Ok(handle) => Some(handle),
            Err(_) => {
                // The socket moved into the closure and was dropped with it.
                counters.errors.fetch_add(1, Ordering::Relaxed);
                counters.open.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Whether a connection was made to the PEP's own port on one of this
    /// host's addresses rather than diverted by `tproxy`: relaying it would
    /// connect the PEP to itself, again and again.
    fn is_direct(&self, original_dst: SocketAddr) -> bool {
        original_dst.port() == self.config.port
            && (original_dst.ip().is_loopback()
                || UdpSocket::bind(SocketAddr::new(original_dst.ip(), 0)).is_ok())
    }

    fn count(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Completed => &self.counters.completed,
            Outcome::Idle => &self.counters.idle_closed,
            Outcome::ConnectFailed => &self.counters.connect_failed,
            Outcome::Error => &self.counters.errors,
            Outcome::Stopped => &self.counters.stopped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the per-socket options of a leg.
    fn leg_options(&self, socket: SockRef<'_>) -> io::Result<()> {
        if let Some(size) = self.config.send_buffer {
            socket.set_send_buffer_size(size)?;
        }
        if let Some(size) = self.config.recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        socket.set_read_timeout(Some(POLL_INTERVAL))?;
        socket.set_write_timeout(Some(POLL_INTERVAL))?;
        Ok(())
    }

    /// Opens the server-side leg from the client's address to the original
    /// destination.
    fn connect_server(&self, client: SocketAddr, server: SocketAddr) -> io::Result<TcpStream> {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        socket.set_ip_transparent_v4(true)?;
        socket.set_reuse_address(true)?;
        set_congestion(SockRef::from(&socket), &self.config.congestion)
            .map_err(io::Error::other)?;
        self.leg_options(SockRef::from(&socket))?;
        let mut bound = false;
        if self.config.preserve_client_port {
            bound = socket.bind(&SockAddr::from(client)).is_ok();
        }
        if !bound {
            socket.bind(&SockAddr::from(SocketAddr::new(client.ip(), 0)))?;
        }
        socket.connect_timeout(&SockAddr::from(server), self.config.connect_timeout)?;
        Ok(TcpStream::from(socket))
    }

    /// Relays one connection until both directions end, it idles out, an
    /// error breaks it or the PEP stops.
    fn relay(&self, client: TcpStream, peer: SocketAddr, original_dst: SocketAddr) -> Outcome {
        let setup = set_congestion(SockRef::from(&client), &self.config.congestion)
            .map_err(io::Error::other)
            .and_then(|()| self.leg_options(SockRef::from(&client)));
        if setup.is_err() {
            reset(SockRef::from(&client));
            return Outcome::Error;
        }
        if self.stop.load(Ordering::Relaxed) {
            reset(SockRef::from(&client));
            return Outcome::Stopped;
        }
        let server = match self.connect_server(peer, original_dst) {
            Ok(server) => server,
            Err(_) => {
                // The client sees a reset, as it would from a dead server.
                reset(SockRef::from(&client));
                return Outcome::ConnectFailed;
            }
        };
        let conn = Arc::new(Connection {
            client,
            server,
            started: Instant::now(),
            last_activity_ms: AtomicU64::new(0),
            end: AtomicU8::new(END_NONE),
        });
        let upstream = {
            let conn = Arc::clone(&conn);
            let stop = Arc::clone(&self.stop);
            let idle = self.config.idle_timeout;
            let buffer = self.config.relay_buffer;
            thread::Builder::new()
                .name("pep-c2s".to_owned())
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut bytes = 0u64;
                    let end = conn.copy(Leg::ClientToServer, &stop, idle, buffer, &mut bytes);
                    (end, bytes)
                })
        };
        let Ok(upstream) = upstream else {
            conn.abort(END_ERROR);
            return Outcome::Error;
        };
        let mut down_bytes = 0u64;
        let down = conn.copy(
            Leg::ServerToClient,
            &self.stop,
            self.config.idle_timeout,
            self.config.relay_buffer,
            &mut down_bytes,
        );
        self.counters
            .bytes_s2c
            .fetch_add(down_bytes, Ordering::Relaxed);
        let up = match upstream.join() {
            Ok((end, bytes)) => {
                self.counters.bytes_c2s.fetch_add(bytes, Ordering::Relaxed);
                end
            }
            Err(_) => END_ERROR,
        };
        // The first abnormal end (recorded by whichever thread saw it) names
        // the outcome.
        match conn.end.load(Ordering::Relaxed) {
            END_IDLE => Outcome::Idle,
            END_STOPPED => Outcome::Stopped,
            END_ERROR => Outcome::Error,
            _ if up == END_NONE && down == END_NONE => Outcome::Completed,
            _ => Outcome::Error,
        }
    }
}

/// How a relayed connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Completed,
    Idle,
    ConnectFailed,
    Error,
    Stopped,
}

/// No abnormal end (a copy thread's normal end: end of stream).
const END_NONE: u8 = 0;
/// Idle timeout.
const END_IDLE: u8 = 1;
/// The PEP is stopping.
const END_STOPPED: u8 = 2;
/// A network error on either leg.
const END_ERROR: u8 = 3;

/// One direction of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leg {
    ClientToServer,
    ServerToClient,
}

/// Both legs of a relayed connection.
struct Connection {
    client: TcpStream,
    server: TcpStream,
    started: Instant,
    /// Milliseconds after `started` at which the last byte moved either way.
    last_activity_ms: AtomicU64,
    /// The first abnormal end, `END_NONE` if none.
    end: AtomicU8,
}

impl Connection {
    fn touch(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_activity_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }

    /// Records `why` (if nothing was recorded before) and shuts both legs in
    /// both directions, which wakes the other copy thread.
    fn abort(&self, why: u8) {
        let _ = self
            .end
            .compare_exchange(END_NONE, why, Ordering::Relaxed, Ordering::Relaxed);
        for leg in [&self.client, &self.server] {
            reset(SockRef::from(leg));
            let _ = leg.shutdown(Shutdown::Both);
        }
    }

    /// Why waiting must end now, if it must.
    fn must_end(&self, stop: &AtomicBool, idle: Duration) -> Option<u8> {
        if self.end.load(Ordering::Relaxed) != END_NONE {
            return Some(self.end.load(Ordering::Relaxed));
        }
        if stop.load(Ordering::Relaxed) {
            return Some(END_STOPPED);
        }
        if self.idle_for() >= idle {
            return Some(END_IDLE);
        }
        None
    }

    /// Copies one direction until end of stream (then shuts down the
    /// destination's write side) or an abnormal end (then aborts the
    /// connection). Returns `END_NONE` for end of stream, else why it ended;
    /// `bytes` counts what was written.
    fn copy(
        &self,
        leg: Leg,
        stop: &AtomicBool,
        idle: Duration,
        buffer: usize,
        bytes: &mut u64,
    ) -> u8 {
        let (from, to) = match leg {
            Leg::ClientToServer => (&self.client, &self.server),
            Leg::ServerToClient => (&self.server, &self.client),
        };
        let mut buf = vec![0u8; buffer];
        loop {
            let n = match (&*from).read(&mut buf) {
                Ok(0) => {
                    if self.end.load(Ordering::Relaxed) != END_NONE {
                        // The other thread aborted: this "end of stream" is
                        // our own shutdown.
                        return self.end.load(Ordering::Relaxed);
                    }
                    let _ = to.shutdown(Shutdown::Write);
                    return END_NONE;
                }
                Ok(n) => {
                    // A busy connection never times out: look at the stop
                    // flag between reads too.
                    if stop.load(Ordering::Relaxed) {
                        self.abort(END_STOPPED);
                        return END_STOPPED;
                    }
                    n
                }
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {
                    if let Some(why) = self.must_end(stop, idle) {
                        self.abort(why);
                        return why;
                    }
                    continue;
                }
                Err(_) => {
                    self.abort(END_ERROR);
                    return END_ERROR;
                }
            };
            self.touch();
            let mut data = &buf[..n];
            while !data.is_empty() {
                match (&*to).write(data) {
                    Ok(0) => {
                        self.abort(END_ERROR);
                        return END_ERROR;
                    }
                    Ok(written) => {
                        data = &data[written..];
                        *bytes += written as u64;
                        self.touch();
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {
                        if let Some(why) = self.must_end(stop, idle) {
                            self.abort(why);
                            return why;
                        }
                    }
                    Err(_) => {
                        self.abort(END_ERROR);
                        return END_ERROR;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruleset_follows_the_tproxy_recipe() {
        let text = ruleset(5000);
        assert!(text.starts_with("table ip pepkit_pep {\n"), "{text}");
        assert!(text.contains("type filter hook prerouting priority mangle; policy accept;"));
        assert!(text.contains("meta l4proto tcp socket transparent 1 meta mark set 0x1 accept"));
        assert!(text.contains("meta l4proto tcp tproxy to :5000 meta mark set 0x1 accept"));
        assert!(ruleset(6000).contains("tproxy to :6000 "));
    }

    #[test]
    fn routing_commands_undo_in_reverse() {
        let commands = routing_commands();
        let words = |v: &[String]| v.join(" ");
        assert_eq!(
            words(&commands.install[0]),
            "rule add fwmark 0x1 lookup 100"
        );
        assert_eq!(
            words(&commands.install[1]),
            "route add local 0.0.0.0/0 dev lo table 100"
        );
        assert_eq!(
            words(&commands.undo[0]),
            "route del local 0.0.0.0/0 dev lo table 100"
        );
        assert_eq!(words(&commands.undo[1]), "rule del fwmark 0x1 lookup 100");
    }

    #[test]
    fn stats_serialize_as_one_json_object() {
        let stats = PepStats {
            connections: 1,
            bytes_client_to_server: 9,
            ..PepStats::default()
        };
        let json = serde_json::to_string(&stats).unwrap();
        assert!(json.contains("\"connections\":1"), "{json}");
        assert!(json.contains("\"bytes_client_to_server\":9"), "{json}");
        assert!(!json.contains('\n'));
    }

    #[test]
    fn bad_configurations_are_rejected() {
        let config = TcpPepConfig {
            max_connections: 0,
            ..TcpPepConfig::default()
        };
        assert!(matches!(TcpPep::new(config), Err(PepError::Config(_))));
    }

    use crate::tcp::bulk::{BulkDirection, TcpBulkServer, TcpBulkServerConfig, encode_header};
    use std::net::TcpListener;

    /// Whether this process may set `IP_TRANSPARENT` (root).
    /// Whether `test` can set `IP_TRANSPARENT` (root); skips or fails as
    /// [`crate::require_or_skip`] decides.
    fn transparent_or_skip(test: &str) -> bool {
        let check = Socket::new(Domain::IPV4, Type::STREAM, None)
            .and_then(|s| s.set_ip_transparent_v4(true))
            .map_err(|e| format!("IP_TRANSPARENT needs root (CAP_NET_ADMIN): {e}"));
        crate::require_or_skip(test, check)
    }

    fn shared(config: TcpPepConfig) -> Arc<Shared> {
        Arc::new(Shared {
            config,
            counters: Counters::default(),
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A client connected to a stand-in for the intercepting listener, and
    /// the relay thread between it and `server` (loopback, no tproxy).
    fn relay_to(shared: &Arc<Shared>, server: SocketAddr) -> (TcpStream, JoinHandle<Outcome>) {
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(front.local_addr().unwrap()).unwrap();
        let (accepted, peer) = front.accept().unwrap();
        let me = Arc::clone(shared);
        let relay = thread::spawn(move || {
            let outcome = me.relay(accepted, peer, server);
            me.count(outcome);
            outcome
        });
        (client, relay)
    }

    #[test]
    fn relay_carries_an_upload_and_its_reply_across_a_half_close() {
        if !transparent_or_skip("relay_carries_an_upload_and_its_reply_across_a_half_close") {
            return;
        }
        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.stop_after = Some(1);
        config.deadline = Some(Duration::from_secs(20));
        let server = TcpBulkServer::bind(config).unwrap();
        let server_addr = server.local_addr();
        let server = thread::spawn(move || server.run(Arc::new(AtomicBool::new(false))));
        let pep = shared(TcpPepConfig::default());
        let (client, relay) = relay_to(&pep, server_addr);
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let size = 3_000_000u64;
        (&client)
            .write_all(&encode_header(BulkDirection::Upload, size))
            .unwrap();
        (&client).write_all(&vec![7u8; size as usize]).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut reply = Vec::new();
        (&client).read_to_end(&mut reply).unwrap();
        assert_eq!(reply, [1]);
        assert_eq!(relay.join().unwrap(), Outcome::Completed);
        let records = server.join().unwrap().unwrap();
        assert!(records[0].complete(), "{:?}", records[0]);
        assert_eq!(records[0].bytes, size);
        let stats = pep.counters.snapshot();
        assert_eq!(stats.completed, 1);
        assert_eq!(stats.bytes_client_to_server, size + 9);
        assert_eq!(stats.bytes_server_to_client, 1);
    }

    #[test]
    fn idle_connections_are_closed_on_both_legs() {
        if !transparent_or_skip("idle_connections_are_closed_on_both_legs") {
            return;
        }
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let pep = shared(TcpPepConfig {
            idle_timeout: Duration::from_millis(300),
            ..TcpPepConfig::default()
        });
        let started = Instant::now();
        let (client, relay) = relay_to(&pep, server.local_addr().unwrap());
        let (server_leg, _) = server.accept().unwrap();
        assert_eq!(relay.join().unwrap(), Outcome::Idle);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        // Both ends see the connection end (a reset or end of stream).
        for leg in [&client, &server_leg] {
            leg.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 16];
            assert!(matches!((&*leg).read(&mut buf), Ok(0) | Err(_)));
        }
        assert_eq!(pep.counters.snapshot().idle_closed, 1);
    }

    #[test]
    fn stop_ends_a_busy_connection() {
        if !transparent_or_skip("stop_ends_a_busy_connection") {
            return;
        }
        let mut config = TcpBulkServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.deadline = Some(Duration::from_secs(20));
        let server = TcpBulkServer::bind(config).unwrap();
        let server_addr = server.local_addr();
        let server_stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&server_stop);
        let server = thread::spawn(move || server.run(flag));
        let pep = shared(TcpPepConfig::default());
        let (client, relay) = relay_to(&pep, server_addr);
        // A download far larger than will ever be read.
        (&client)
            .write_all(&encode_header(BulkDirection::Download, u64::MAX / 2))
            .unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < 1_000_000 {
            got += (&client).read(&mut buf).unwrap();
        }
        pep.stop.store(true, Ordering::Relaxed);
        let stopping = Instant::now();
        // Keep reading, so the relay stays busy while it notices the flag.
        while matches!((&client).read(&mut buf), Ok(n) if n > 0) {
            assert!(stopping.elapsed() < Duration::from_secs(3));
        }
        assert_eq!(relay.join().unwrap(), Outcome::Stopped);
        assert!(stopping.elapsed() < Duration::from_secs(3));
        server_stop.store(true, Ordering::Relaxed);
        let records = server.join().unwrap().unwrap();
        assert_eq!(records.len(), 1);
        assert!(records[0].error.is_some());
        assert_eq!(pep.counters.snapshot().stopped, 1);
    }

    #[test]
    fn connections_beyond_the_limit_are_refused() {
        let pep = shared(TcpPepConfig {
            max_connections: 1,
            ..TcpPepConfig::default()
        });
        pep.counters.open.store(1, Ordering::Relaxed);
        let front = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        front
            .bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        front.listen(4).unwrap();
        let addr = front.local_addr().unwrap().as_socket().unwrap();
        let client = TcpStream::connect(addr).unwrap();
        let (accepted, peer) = front.accept().unwrap();
        assert!(pep.admit(accepted, peer).is_none());
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 4];
        let read = (&client).read(&mut buf);
        assert!(
            matches!(&read, Err(e) if e.kind() == ErrorKind::ConnectionReset),
            "{read:?}"
        );
        let stats = pep.counters.snapshot();
        assert_eq!((stats.refused, stats.connections), (1, 0));
    }
}
