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
//!
//! The interception is in `rules.rs`, a relayed connection's two legs and
//! copy threads in `connection.rs`.

mod connection;
mod rules;

pub use rules::{
    FWMARK, ROUTE_TABLE, RoutingCommands, TABLE, install, routing_commands, ruleset, uninstall,
};

use connection::Shared;
use emu::sys::command::CommandError;
use emu::tcp::congestion::{CongestionError, set_congestion};
use emu::tcp::{is_timeout, is_transient_accept_error};
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use std::io::{self, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The PEP's default listening port.
pub const DEFAULT_PORT: u16 = 5000;
/// How often blocked accepts, reads and writes wake up to look at the stop
/// flag and the idle timeout.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
