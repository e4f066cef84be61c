//! The tunnel server on real UDP sockets, one worker thread per core
//! (`pepkit middle tecc --workers N`). Each worker runs a [`TunnelServer`]
//! of its own on a socket of its own bound to the one listening address
//! (`SO_REUSEPORT`); the kernel steers each QUIC packet to the worker
//! whose index is the first byte of its destination connection ID
//! ([`emu::sys::udp_steered_by_cid`]), and each worker's endpoint issues
//! connection IDs starting with its index, so a connection's packets all
//! reach the worker that accepted it, also after the client's address
//! changes. A client's first Initials carry an ID the client chose: the
//! kernel's hash of the 4-tuple (or that ID's first byte, if it names a
//! worker) picks the worker that accepts it.
//!
//! What the limits bound holds for the server as a whole: the workers
//! share one count of connections ([`ConnectionSlots`]) and one byte
//! budget ([`ByteBudget`]); the Retry threshold is divided among them
//! (each answers with Retry beyond its share of unvalidated handshakes),
//! and so is the range of target-facing ports (each worker its own
//! blocks, bound as tunnels take them).
//!
//! Each worker receives with `recvmmsg`, sends with `sendmmsg`, and sends a
//! run of equal-sized datagrams to one target as one `UDP_SEGMENT` send.

mod socket_loop;

use crate::limits::{ByteBudget, ConnectionSlots};
use crate::mode::Mode;
use crate::server::ServerStats;
use crate::server_box::{TunnelServer, TunnelServerConfig};
pub use socket_loop::IoStats;
use socket_loop::Worker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The receive (and send) buffer of each worker's listening socket.
const SOCKET_BUFFER: usize = 8 << 20;

/// How the workers are set up.
#[derive(Clone, Debug)]
pub struct WorkersConfig {
    /// The server (its address, QUIC configuration, limits, first
    /// target-facing port).
    pub server: TunnelServerConfig,
    /// Worker threads (at least 1). Mode MFT runs one: its forwarded
    /// packets carry virtual connection IDs the steering cannot place.
    pub workers: usize,
}

/// What one worker did.
#[derive(Clone, Debug, Default)]
pub struct WorkerReport {
    /// Its connections' counters, in order of arrival.
    pub connections: Vec<ServerStats>,
    /// Its sockets' counters.
    pub io: IoStats,
    /// The CPU time its thread used.
    pub cpu: Duration,
}

/// The cores the calling thread may run on: the default number of
/// workers.
pub fn available_cores() -> usize {
    emu::sys::thread_cpus().map_or(1, |cpus| cpus.len().max(1))
}

/// The running workers.
pub struct ServerWorkers {
    threads: Vec<JoinHandle<Result<WorkerReport, String>>>,
    reports: Vec<Arc<Mutex<WorkerReport>>>,
    stop: Arc<AtomicBool>,
}

impl ServerWorkers {
    /// Binds every worker's listening socket (in order: the n-th bound is
    /// the one steered to by byte n) and starts the workers.
    pub fn start(config: &WorkersConfig) -> Result<ServerWorkers, String> {
        let n = if config.server.shared.settings.mode == Mode::Forwarding {
            1
        } else {
            config.workers.clamp(1, 255)
        };
        let limits = config.server.shared.limits;
        let budget = ByteBudget::shared();
        let slots = ConnectionSlots::shared(limits.max_connections);
        let width = limits.max_tunnels.max(1);
        let span = (u32::from(u16::MAX) + 1 - u32::from(config.server.first_port)) / n as u32;
        let blocks = u16::try_from(span / u32::from(width)).unwrap_or(u16::MAX);
        let stop = Arc::new(AtomicBool::new(false));
        let mut started = ServerWorkers {
            threads: Vec::new(),
            reports: Vec::new(),
            stop,
        };
        for index in 0..n {
            let socket = match emu::sys::udp_steered_by_cid(config.server.addr, SOCKET_BUFFER) {
                Ok(socket) => socket,
                Err(e) => {
                    // The workers started so far stop.
                    let _ = started.stop();
                    return Err(format!("binding {}: {e}", config.server.addr));
                }
            };
            let mut server = config.server.clone();
            let byte = u8::try_from(index).unwrap_or(u8::MAX);
            server.quic = server.quic.with_cid_first_byte(byte);
            server.quic.seed = server.quic.seed.derive(&format!("worker/{index}"));
            // A threshold of 0 (Retry for every Initial) stays 0.
            let threshold = limits.handshakes.retry_threshold;
            server.shared.limits.handshakes.retry_threshold = if threshold == 0 {
                0
            } else {
                (threshold / n).max(1)
            };
            server.first_port += blocks * width * u16::from(byte);
            let (budget, slots) = (budget.clone(), slots.clone());
            let report = Arc::new(Mutex::new(WorkerReport::default()));
            let (published, stop) = (report.clone(), started.stop.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("tunnel-worker-{index}"))
                .spawn(move || {
                    let engine = TunnelServer::sharing(server, budget, slots, blocks);
                    Worker::new(engine, socket, published).run(&stop)
                });
            let thread = match spawned {
                Ok(thread) => thread,
                Err(e) => {
                    let _ = started.stop();
                    return Err(format!("starting worker {index}: {e}"));
                }
            };
            started.threads.push(thread);
            started.reports.push(report);
        }
        Ok(started)
    }

    /// How many workers run.
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// What each worker reported last (they report about once a second).
    pub fn reports(&self) -> Vec<WorkerReport> {
        self.reports
            .iter()
            .map(|r| r.lock().map(|r| r.clone()).unwrap_or_default())
            .collect()
    }

    /// Whether a worker stopped on its own (a socket failed).
    pub fn any_finished(&self) -> bool {
        self.threads.iter().any(JoinHandle::is_finished)
    }

    /// Stops the workers; returns what each did, or the first error.
    pub fn stop(self) -> Result<Vec<WorkerReport>, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect()
    }
}
