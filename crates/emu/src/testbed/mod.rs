//! A chain of network namespaces — client, middle nodes, server — joined
//! through the link emulator, and torn down when dropped.
//!
//! ```text
//!  client ns        emu ns (relay)            middle ns            emu ns             server ns
//!  eth0 ═══ veth ═══ h0l ⇄ link ⇄ h0r ═══ veth ═══ eth0 | eth1 ═══ h1l ⇄ link ⇄ h1r ═══ eth0
//! ```
//!
//! Every hop of the chain is one pair of relay ports in a single emulator
//! namespace, where one relay thread runs all hops' links. The relay is a
//! bump in the wire: node interfaces on either side of a hop see each other
//! as Ethernet neighbours. Addresses are /32s with on-link routes: the client
//! and server keep the addresses their scenario gives them, the middle
//! nodes' interfaces get `10.100.<hop>.1` (left end of a hop) and
//! `10.100.<hop>.2` (right end); extra addresses (a proxy's control
//! address, competing flows' own client and server addresses) sit on
//! their node's loopback. Middle nodes forward (routes
//! to every address of the chain on the right side); neighbour entries are
//! pinned, IPv6 is off, and the node interfaces have checksum and
//! segmentation offloads off, so every frame the relay carries is a real,
//! complete packet.
//!
//! Namespaces are called `pk-<pid>-<n>-<role>`. [`Testbed::drop`] removes
//! them (and the relay stops first); [`sweep_stale`] removes those of
//! processes that died without cleaning up.

mod namespaces;
mod setup;

pub use namespaces::add_namespace;
pub use namespaces::{Swept, available, sweep_stale};

use crate::RealClock;
use crate::driver::{
    DriverInterface, HostDriver, HostRun, MiddleDriver, MiddleNodeSpec, MiddleRun, Placement,
    Routes, RunUntil,
};
use crate::link::{RelayError, RelayReport};
use crate::sys::command::{CommandError, ip};
use netsim::{HopConfig, Host, Middlebox, Seed, Time};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a testbed is built from.
#[derive(Clone, Debug)]
pub struct TestbedSpec {
    /// The client's address.
    pub client: Ipv4Addr,
    /// The server's address.
    pub server: Ipv4Addr,
    /// The hops from client to server; there is one middle node between
    /// each two.
    pub hops: Vec<HopConfig>,
    /// Extra addresses on middle nodes' loopbacks: `(middle index from 0,
    /// address)`.
    pub extra: Vec<(usize, Ipv4Addr)>,
    /// More addresses of the client node, on its loopback (competing
    /// flows' clients: each flow its own address).
    pub client_extra: Vec<Ipv4Addr>,
    /// More addresses of the server node, on its loopback.
    pub server_extra: Vec<Ipv4Addr>,
    /// Seeds the links' random loss and RED.
    pub seed: Seed,
}

/// One interface of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInterface {
    /// Its name inside the node's namespace (`eth0`, `eth1`).
    pub name: String,
    /// Its address.
    pub addr: Ipv4Addr,
    /// The address of the node across the hop.
    pub peer: Ipv4Addr,
    /// The hop it is on.
    pub hop: usize,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// The MAC of the node across the hop (pinned as its neighbour entry).
    pub peer_mac: [u8; 6],
}

/// One node: a network namespace with its interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// `client`, `middle0`, `middle1`, …, `server`.
    pub role: String,
    /// Its network namespace.
    pub netns: String,
    /// Its interfaces, left (client side) first.
    pub interfaces: Vec<NodeInterface>,
    /// Addresses on its loopback.
    pub extra: Vec<Ipv4Addr>,
}

impl Node {
    /// All its addresses.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.interfaces
            .iter()
            .map(|i| i.addr)
            .chain(self.extra.iter().copied())
    }
}

/// Why a testbed could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// Real mode needs root.
    #[error("real mode needs root (network namespaces, AF_PACKET sockets); run as root")]
    NotRoot,
    /// A configuration command failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The relay could not start.
    #[error("link emulator: {0}")]
    Relay(#[from] RelayError),
    /// A socket or thread failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Something else.
    #[error("{0}")]
    Other(String),
}

/// A built chain with its relay running. Dropping it stops the relay and
/// removes every namespace.
pub struct Testbed {
    nodes: Vec<Node>,
    emu_netns: String,
    namespaces: Vec<String>,
    /// The clock the testbed was built with.
    base: RealClock,
    /// The run's clock: `base`, or later after [`Testbed::restart_clock`].
    clock: RealClock,
    /// How much later than `base`'s the relay's origin is, in nanoseconds.
    clock_shift: Arc<AtomicU64>,
    relay_stop: Arc<AtomicBool>,
    relay: Option<JoinHandle<std::io::Result<RelayReport>>>,
    /// Where capture requests go to the relay ([`Testbed::capture`]).
    capture: crate::link::CaptureSlot,
    /// The CPU middle nodes' threads are kept on ([`Testbed::pin_middles`]).
    middle_cpu: Option<usize>,
}

impl Testbed {
    /// Builds the chain and starts its relay; the relay's and everyone's
    /// times count from `clock` (until [`Testbed::restart_clock`]).
    pub fn build(spec: &TestbedSpec, clock: RealClock) -> Result<Testbed, TestbedError> {
        available().map_err(|reason| {
            if reason.starts_with("needs root") {
                TestbedError::NotRoot
            } else {
                TestbedError::Other(reason)
            }
        })?;
        sweep_stale();
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "pk-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let hops = spec.hops.len();
        if hops == 0 {
            return Err(TestbedError::Other(
                "a testbed needs at least one hop".into(),
            ));
        }
        let nodes = setup::plan_nodes(spec, &prefix);
        let mut testbed = Testbed {
            emu_netns: format!("{prefix}-emu"),
            namespaces: Vec::new(),
            nodes,
            base: clock,
            clock,
            clock_shift: Arc::new(AtomicU64::new(0)),
            relay_stop: Arc::new(AtomicBool::new(false)),
            relay: None,
            capture: Default::default(),
            middle_cpu: None,
        };
        // From here on, Drop cleans up whatever was made.
        testbed.configure()?;
        testbed.start_relay(spec)?;
        Ok(testbed)
    }

    /// The nodes, client first.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The client node.
    pub fn client(&self) -> &Node {
        &self.nodes[0]
    }

    /// The server node.
    pub fn server(&self) -> &Node {
        self.nodes.last().expect("a testbed has nodes")
    }

    /// Middle node `index` (from 0).
    pub fn middle(&self, index: usize) -> Option<&Node> {
        let n = self.nodes.len();
        (index + 2 < n).then(|| &self.nodes[index + 1])
    }

    /// The run's clock.
    pub fn clock(&self) -> RealClock {
        self.clock
    }

    /// Restarts the run's clock now, for the links (the relay) and for the
    /// hosts started after this call, and returns it. In the simulator a
    /// run's time 0 is when its hosts start, and a trace-driven link's trace
    /// starts then too; building the testbed and starting a daemon take a
    /// few hundred milliseconds or more, so a trial calls this just before
    /// it starts its hosts, and both modes meet the trace at the same phase.
    /// Call it while no traffic crosses the testbed.
    pub fn restart_clock(&mut self) -> RealClock {
        let shift = self.base.now();
        self.clock_shift.store(shift.as_nanos(), Ordering::SeqCst);
        self.clock = self.base.later(Duration::from_nanos(shift.as_nanos()));
        self.clock
    }

    /// Runs the middle nodes' threads started from now on only on `cpu`
    /// (`None`: wherever the caller's threads may run). For measuring a
    /// middlebox's CPU on a core of its own, the caller keeps its own
    /// threads (and so the relay's, the hosts' and the peers' it starts
    /// later) off that CPU ([`crate::sys::pin_thread`]).
    pub fn pin_middles(&mut self, cpu: Option<usize>) {
        self.middle_cpu = cpu;
    }

    /// Runs `work` on a new thread inside `node`'s namespace.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        node: &Node,
        name: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<JoinHandle<std::io::Result<T>>> {
        let netns = node.netns.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                crate::sys::enter_netns(&netns)?;
                Ok(work())
            })
    }

    /// Runs `host` on a thread in `node`'s namespace, its sockets bound to
    /// `bind`, as `run` says. Returns once the sockets are bound, so a
    /// server is ready for its client.
    pub fn run_host<H: Host>(
        &self,
        node: &Node,
        host: H,
        bind: Vec<SocketAddr>,
        run: &HostRunSpec,
    ) -> Result<HostThread<H>, TestbedError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let clock = self.clock;
        let run = run.clone();
        let handle = self.spawn_in(node, &node.role, move || {
            if run.realtime {
                // Best effort: without it the host still runs.
                let _ = crate::sys::set_realtime(40);
            }
            let driver = HostDriver::bind(host, &bind);
            let _ = ready_tx.send(driver.as_ref().err().map(|e| e.to_string()));
            driver?
                .with_min_wake(run.min_wake)
                .run(clock, run.until, run.deadline, &run.stop)
        })?;
        match ready_rx.recv() {
            Ok(None) => Ok(HostThread { handle }),
            Ok(Some(error)) => Err(TestbedError::Other(format!("{}: {error}", node.role))),
            Err(_) => Err(TestbedError::Other(format!(
                "{}: could not enter its namespace: {:?}",
                node.role,
                handle.join().ok().and_then(|r| r.err())
            ))),
        }
    }

    /// The routing table of middle node `middle` as its kernel has it, for
    /// a middlebox in its path: every address of a node on the client side
    /// out of interface 0, on the server side out of the last; the node's
    /// own addresses are local; no default.
    pub fn routes(&self, middle: usize) -> Option<Routes> {
        let node = self.middle(middle)?;
        let k = middle + 1;
        let last = node.interfaces.len() - 1;
        let to = self
            .nodes
            .iter()
            .enumerate()
            .filter(|&(m, _)| m != k)
            .flat_map(|(m, other)| {
                let out = if m < k { 0 } else { last };
                other.addresses().map(move |addr| (addr, out))
            })
            .collect();
        Some(Routes {
            to,
            nets: Vec::new(),
            default: None,
            local: node.addresses().collect(),
        })
    }

    /// Runs `engine` on middle node `middle` ([`MiddleDriver`]), placed as
    /// `placement` says (for in path, [`Testbed::routes`] gives the
    /// routes), with UDP sockets bound on `local`, on a thread in the
    /// node's namespace, until `stop` is set. Returns once its sockets are
    /// open.
    pub fn run_middlebox<M: Middlebox>(
        &self,
        middle: usize,
        placement: Placement,
        local: Vec<SocketAddrV4>,
        engine: M,
        stop: Arc<AtomicBool>,
    ) -> Result<MiddleThread<M>, TestbedError> {
        let node = self
            .middle(middle)
            .ok_or_else(|| TestbedError::Other(format!("no middle node {middle}")))?;
        let spec = MiddleNodeSpec {
            interfaces: node
                .interfaces
                .iter()
                .map(|i| DriverInterface::wired(&i.name, i.mac, i.peer_mac))
                .collect(),
            placement,
            local,
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let clock = self.clock;
        let cpu = self.middle_cpu;
        let handle = self.spawn_in(node, &node.role, move || {
            let pinned = cpu.map_or(Ok(()), |cpu| {
                crate::sys::pin_thread(&[cpu]).map_err(|e| format!("running on CPU {cpu}: {e}"))
            });
            if let Err(error) = pinned {
                let _ = ready_tx.send(Some(error));
                return None;
            }
            let mut driver = MiddleDriver::open(spec, engine, clock);
            if let Ok(driver) = &mut driver {
                driver.time_engine_cpu();
            }
            let _ = ready_tx.send(driver.as_ref().err().map(|e| e.to_string()));
            driver.map(|driver| driver.run(&stop)).ok()
        })?;
        match ready_rx.recv() {
            Ok(None) => Ok(MiddleThread { handle }),
            Ok(Some(error)) => Err(TestbedError::Other(format!("{}: {error}", node.role))),
            Err(_) => Err(TestbedError::Other(format!(
                "{}: could not enter its namespace: {:?}",
                node.role,
                handle.join().ok().and_then(|r| r.err())
            ))),
        }
    }

    /// Captures hops `hops` (index in the chain, name) in the relay from
    /// now on: each a pcapng file with one interface per direction, every
    /// frame as it reaches the link emulator, which come back in the
    /// relay's report ([`Testbed::stop_relay`]). Returns once the relay
    /// has started them (false if it did not within a second).
    pub fn capture(&self, hops: Vec<(usize, String)>) -> bool {
        if let Ok(mut slot) = self.capture.lock() {
            *slot = Some(hops);
        }
        for _ in 0..100 {
            if self.capture.lock().is_ok_and(|slot| slot.is_none()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Stops the relay and returns its report (links' counters per hop).
    pub fn stop_relay(&mut self) -> Option<RelayReport> {
        self.relay_stop.store(true, Ordering::Relaxed);
        self.relay.take()?.join().ok()?.ok()
    }
}

/// How a host runs on a testbed ([`Testbed::run_host`]).
#[derive(Clone, Debug)]
pub struct HostRunSpec {
    /// When its run ends, besides the deadline and the stop flag.
    pub until: RunUntil,
    /// The latest its run ends, on the testbed's clock.
    pub deadline: Time,
    /// Ends the run when set.
    pub stop: Arc<AtomicBool>,
    /// Run its thread in the `SCHED_FIFO` class, like the relay: for
    /// measuring instruments (the link check's probes), whose timestamps
    /// should not wait for the scheduler. Endpoints under study run as
    /// ordinary threads.
    pub realtime: bool,
    /// Its driver's least interval between wake-ups once busy
    /// ([`HostDriver::with_min_wake`]; zero: none).
    pub min_wake: std::time::Duration,
}

impl HostRunSpec {
    /// An ordinary thread that runs until `until`, `deadline` or `stop`.
    pub fn new(until: RunUntil, deadline: Time, stop: Arc<AtomicBool>) -> HostRunSpec {
        HostRunSpec {
            until,
            deadline,
            stop,
            realtime: false,
            min_wake: std::time::Duration::ZERO,
        }
    }
}

/// A host running on its own thread ([`Testbed::run_host`]).
pub struct HostThread<H> {
    handle: JoinHandle<std::io::Result<std::io::Result<HostRun<H>>>>,
}

impl<H> HostThread<H> {
    /// Waits for the host's run to end.
    pub fn join(self) -> Result<HostRun<H>, TestbedError> {
        match self.handle.join() {
            Ok(Ok(Ok(run))) => Ok(run),
            Ok(Ok(Err(e)) | Err(e)) => Err(e.into()),
            Err(_) => Err(TestbedError::Other("a host thread panicked".into())),
        }
    }
}

/// A middlebox running on its own thread ([`Testbed::run_middlebox`]).
pub struct MiddleThread<M> {
    handle: JoinHandle<std::io::Result<Option<MiddleRun<M>>>>,
}

impl<M> MiddleThread<M> {
    /// Waits for the run to end (set its stop flag first) and returns the
    /// engine, the driver's counters and the error that ended it early, if
    /// any.
    pub fn join(self) -> Result<MiddleRun<M>, TestbedError> {
        match self.handle.join() {
            Ok(Ok(Some(run))) => Ok(run),
            Ok(Ok(None)) => Err(TestbedError::Other("the middlebox did not open".into())),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(TestbedError::Other("a middlebox thread panicked".into())),
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.stop_relay();
        for name in self.namespaces.iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
