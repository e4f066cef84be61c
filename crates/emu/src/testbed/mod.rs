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
//! address) sit on a middle node's loopback. Middle nodes forward (routes
//! to every address of the chain on the right side); neighbour entries are
//! pinned, IPv6 is off, and the node interfaces have checksum and
//! segmentation offloads off, so every frame the relay carries is a real,
//! complete packet.
//!
//! Namespaces are called `pk-<pid>-<n>-<role>`. [`Testbed::drop`] removes
//! them (and the relay stops first); [`sweep_stale`] removes those of
//! processes that died without cleaning up.

use crate::RealClock;
use crate::driver::{DriverInterface, MiddleDriver, MiddleNodeSpec, MiddleRun, Placement, Routes};
use crate::driver::{HostDriver, HostRun, RunUntil};
use crate::link::{Relay, RelayError, RelayHop, RelayReport};
use crate::sys::command::{self, CommandError, in_netns, ip};
use netsim::{HopConfig, Host, Middlebox, Seed, Time};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;

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

/// Whether this process can build testbeds; `Err` says why not, in words
/// a skipped test can print.
pub fn available() -> Result<(), String> {
    // Root: the effective uid (third field of Uid:) is 0.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    if !root {
        return Err("needs root (network namespaces and AF_PACKET sockets)".into());
    }
    for program in ["ip", "ethtool", "sysctl", "timeout"] {
        if !command::have(program) {
            return Err(format!(
                "{program} is not installed (scripts/setup installs it)"
            ));
        }
    }
    // A name of its own per call: threads may probe at the same time.
    static PROBES: AtomicU32 = AtomicU32::new(0);
    let probe = format!(
        "pk-{}-probe{}",
        std::process::id(),
        PROBES.fetch_add(1, Ordering::Relaxed)
    );
    ip(&["netns", "add", &probe]).map_err(|e| format!("cannot create a network namespace: {e}"))?;
    let _ = ip(&["netns", "del", &probe]);
    Ok(())
}

/// Creates network namespace `name` the way real mode wants its nodes, and
/// records it in `made` (for the caller's cleanup) as soon as it exists: no
/// IPv6 chatter (router solicitations, DAD), no reverse-path filtering (the
/// sidekick proxy answers from the receiver's address), forwarding on,
/// loopback up.
pub(crate) fn add_namespace(name: &str, made: &mut Vec<String>) -> Result<(), CommandError> {
    ip(&["netns", "add", name])?;
    made.push(name.to_string());
    in_netns(
        name,
        "sysctl",
        &[
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.ip_forward=1",
        ],
    )?;
    ip(&["-n", name, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Removes the namespaces of testbeds whose process is gone (after a
/// crash or SIGKILL). Returns the names removed.
pub fn sweep_stale() -> Vec<String> {
    let Ok(list) = ip(&["netns", "list"]) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix("pk-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists()
            && ip(&["netns", "del", name]).is_ok()
        {
            removed.push(name.to_string());
        }
    }
    removed
}

/// A built chain with its relay running. Dropping it stops the relay and
/// removes every namespace.
pub struct Testbed {
    nodes: Vec<Node>,
    emu_netns: String,
    namespaces: Vec<String>,
    clock: RealClock,
    relay_stop: Arc<AtomicBool>,
    relay: Option<JoinHandle<std::io::Result<RelayReport>>>,
}

/// The MAC of node `node`'s interface on hop `hop` (locally administered).
fn mac(node: usize, hop: usize) -> [u8; 6] {
    [0x02, 0x70, 0x6b, 0x00, node as u8, hop as u8]
}

/// A MAC as `ip` writes it.
fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

impl Testbed {
    /// Builds the chain and starts its relay; the relay's and everyone's
    /// times count from `clock`.
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
        // Node k sits between hop k-1 and hop k.
        let left_end = |hop: usize| {
            if hop == 0 {
                spec.client
            } else {
                Ipv4Addr::new(10, 100, hop as u8, 1)
            }
        };
        let right_end = |hop: usize| {
            if hop == hops - 1 {
                spec.server
            } else {
                Ipv4Addr::new(10, 100, hop as u8, 2)
            }
        };
        let mut nodes = Vec::new();
        for k in 0..=hops {
            let role = match k {
                0 => "client".to_string(),
                k if k == hops => "server".to_string(),
                k => format!("middle{}", k - 1),
            };
            let mut interfaces = Vec::new();
            if k > 0 {
                interfaces.push(NodeInterface {
                    name: format!("eth{}", interfaces.len()),
                    addr: right_end(k - 1),
                    peer: left_end(k - 1),
                    hop: k - 1,
                    mac: mac(k, k - 1),
                    peer_mac: mac(k - 1, k - 1),
                });
            }
            if k < hops {
                interfaces.push(NodeInterface {
                    name: format!("eth{}", interfaces.len()),
                    addr: left_end(k),
                    peer: right_end(k),
                    hop: k,
                    mac: mac(k, k),
                    peer_mac: mac(k + 1, k),
                });
            }
            let extra = spec
                .extra
                .iter()
                .filter(|(middle, _)| k > 0 && k < hops && *middle == k - 1)
                .map(|(_, addr)| *addr)
                .collect();
            nodes.push(Node {
                netns: format!("{prefix}-{role}"),
                role,
                interfaces,
                extra,
            });
        }
        let mut testbed = Testbed {
            emu_netns: format!("{prefix}-emu"),
            namespaces: Vec::new(),
            nodes,
            clock,
            relay_stop: Arc::new(AtomicBool::new(false)),
            relay: None,
        };
        // From here on, Drop cleans up whatever was made.
        testbed.configure()?;
        testbed.start_relay(spec)?;
        Ok(testbed)
    }

    fn add_netns(&mut self, name: &str) -> Result<(), TestbedError> {
        add_namespace(name, &mut self.namespaces)?;
        Ok(())
    }

    fn configure(&mut self) -> Result<(), TestbedError> {
        let emu = self.emu_netns.clone();
        self.add_netns(&emu)?;
        let nodes = self.nodes.clone();
        for node in &nodes {
            self.add_netns(&node.netns)?;
        }
        for (k, node) in nodes.iter().enumerate() {
            for iface in &node.interfaces {
                // The relay port this interface faces.
                let port = relay_port(iface.hop, iface.hop != k);
                ip(&[
                    "link",
                    "add",
                    &iface.name,
                    "netns",
                    &node.netns,
                    "address",
                    &mac_text(iface.mac),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &port,
                    "netns",
                    &emu,
                ])?;
                // Real frames on the wire: no checksum or segmentation
                // offload, or the relay would carry unfinished packets.
                in_netns(
                    &node.netns,
                    "ethtool",
                    &[
                        "-K",
                        &iface.name,
                        "tx",
                        "off",
                        "rx",
                        "off",
                        "tso",
                        "off",
                        "gso",
                        "off",
                        "gro",
                        "off",
                        "tx-udp-segmentation",
                        "off",
                    ],
                )?;
                in_netns(
                    &emu,
                    "ethtool",
                    &["-K", &port, "gro", "off", "rx", "off", "tx", "off"],
                )?;
                ip(&["-n", &emu, "link", "set", &port, "promisc", "on", "up"])?;
                let netns = node.netns.as_str();
                ip(&["-n", netns, "link", "set", &iface.name, "up"])?;
                ip(&[
                    "-n",
                    netns,
                    "addr",
                    "add",
                    &format!("{}/32", iface.addr),
                    "dev",
                    &iface.name,
                ])?;
                ip(&[
                    "-n",
                    netns,
                    "route",
                    "add",
                    &format!("{}/32", iface.peer),
                    "dev",
                    &iface.name,
                    "src",
                    &iface.addr.to_string(),
                ])?;
                ip(&[
                    "-n",
                    netns,
                    "neigh",
                    "replace",
                    &iface.peer.to_string(),
                    "lladdr",
                    &mac_text(iface.peer_mac),
                    "dev",
                    &iface.name,
                    "nud",
                    "permanent",
                ])?;
            }
            for extra in &node.extra {
                ip(&[
                    "-n",
                    &node.netns,
                    "addr",
                    "add",
                    &format!("{extra}/32"),
                    "dev",
                    "lo",
                ])?;
            }
        }
        // Routes: every address of another node goes towards its side.
        for (k, node) in nodes.iter().enumerate() {
            for (m, other) in nodes.iter().enumerate() {
                if m == k {
                    continue;
                }
                let via = if m < k {
                    &node.interfaces[0]
                } else {
                    node.interfaces.last().expect("a node has an interface")
                };
                for addr in other.addresses() {
                    if addr == via.peer {
                        continue; // already on-link
                    }
                    ip(&[
                        "-n",
                        &node.netns,
                        "route",
                        "replace",
                        &format!("{addr}/32"),
                        "via",
                        &via.peer.to_string(),
                        "dev",
                        &via.name,
                        "src",
                        &via.addr.to_string(),
                    ])?;
                }
            }
        }
        Ok(())
    }

    fn start_relay(&mut self, spec: &TestbedSpec) -> Result<(), TestbedError> {
        let hops: Vec<RelayHop> = spec
            .hops
            .iter()
            .enumerate()
            .map(|(i, config)| RelayHop {
                left: relay_port(i, false),
                right: relay_port(i, true),
                config: config.clone(),
            })
            .collect();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stop = self.relay_stop.clone();
        let emu = self.emu_netns.clone();
        let clock = self.clock;
        let seed = spec.seed;
        let handle = std::thread::Builder::new()
            .name("relay".into())
            .spawn(move || {
                let opened = crate::sys::enter_netns(&emu)
                    .map_err(|e| RelayError::Port {
                        port: emu.clone(),
                        source: e,
                    })
                    .and_then(|()| Relay::open(&hops, seed));
                let relay = match opened {
                    Ok(relay) => {
                        let _ = ready_tx.send(Ok(()));
                        relay
                    }
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        return Ok(RelayReport::default());
                    }
                };
                // Punctual wake-ups; the relay sleeps between deadlines.
                let _ = crate::sys::set_realtime(50);
                relay.run(clock, &stop)
            })
            .map_err(|e| TestbedError::Other(format!("cannot start the relay thread: {e}")))?;
        self.relay = Some(handle);
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error.into()),
            Err(_) => Err(TestbedError::Other("the relay thread died".into())),
        }
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
            driver?.run(clock, run.until, run.deadline, &run.stop)
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
        let handle = self.spawn_in(node, &node.role, move || {
            let driver = MiddleDriver::open(spec, engine, clock);
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
}

impl HostRunSpec {
    /// An ordinary thread that runs until `until`, `deadline` or `stop`.
    pub fn new(until: RunUntil, deadline: Time, stop: Arc<AtomicBool>) -> HostRunSpec {
        HostRunSpec {
            until,
            deadline,
            stop,
            realtime: false,
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

/// The relay port of `hop` facing its left (`false`) or right node.
fn relay_port(hop: usize, right: bool) -> String {
    format!("h{hop}{}", if right { 'r' } else { 'l' })
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.stop_relay();
        for name in self.namespaces.iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
