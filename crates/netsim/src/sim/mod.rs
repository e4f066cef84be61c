//! The simulator: owns the nodes, the links and the event queue, and drives
//! the hosts' and middleboxes' state machines in virtual time.

mod node;
mod run;
mod timers;

pub use run::{RunOutcome, StopReason};

use crate::capture::{Capture, CapturePoint};
use crate::event_queue::EventQueue;
use crate::pcapng::Pcapng;
use crate::topology::{HopLinks, HostSpec, MiddleSpec, RoutingTable, TopologyError};
use crate::{
    Datagram, Fate, Host, Interface, Link, LinkConfig, LinkId, LinkStats, Middlebox, NodeId, Seed,
    Time, Transmit,
};
use node::{HostSlot, Iface, LinkSlot, MiddleSlot, Node, Role};
use run::Event;
use std::any::Any;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A handle to a packet capture attached to a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CaptureId(usize);

/// Where a capture writes: a pcap file, or an interface of a pcapng file.
pub(crate) enum Sink {
    /// A pcap file of one link.
    Pcap(Capture),
    /// A pcapng file of several links, each an interface.
    Pcapng(Pcapng),
}

impl Sink {
    /// Records `datagram` on `interface` (a pcap file has only one).
    pub(crate) fn record(
        &mut self,
        interface: u32,
        at: Time,
        datagram: &Datagram,
        from: usize,
        to: usize,
    ) {
        match self {
            Sink::Pcap(c) => c.record(at, datagram, from, to),
            Sink::Pcapng(c) => c.record(interface, at, datagram, from, to),
        }
    }

    fn packets(&self) -> u64 {
        match self {
            Sink::Pcap(c) => c.packets(),
            Sink::Pcapng(c) => c.packets(),
        }
    }
}

/// What happened to one datagram offered to a recorded link
/// ([`Simulator::record_fates`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FateRecord {
    /// When it was offered (entered the link).
    pub offered: Time,
    /// Its [`Datagram::fingerprint`].
    pub fingerprint: u64,
    /// Whether the link carries it over, and when it arrives.
    pub fate: Fate,
}

/// Simulator-wide counters (the links count their own drops).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SimStats {
    /// Events processed.
    pub events: u64,
    /// Datagrams dropped because a node had no route for them.
    pub unroutable: u64,
    /// Datagrams dropped at a middle node because their TTL ran out.
    pub ttl_expired: u64,
    /// Datagrams that reached a host not owning their destination address,
    /// or a plain forwarding node addressed to itself.
    pub not_for_node: u64,
    /// Datagrams that reached a host before its start time.
    pub before_start: u64,
    /// ICMP echo requests hosts answered.
    pub echo_replies: u64,
}

/// A deterministic discrete-event network simulator.
///
/// Build a network with [`Simulator::add_host`], [`Simulator::add_middle`],
/// [`Simulator::connect`] and routes (or with a builder such as
/// [`Simulator::add_chain`]), attach captures, then
/// [`Simulator::run_until`] a time limit. Afterwards read the link counters
/// and the hosts' own results.
pub struct Simulator {
    seed: Seed,
    now: Time,
    queue: EventQueue<Event>,
    timers: timers::Timers,
    /// The key of the last event or timer handled.
    last: timers::Key,
    nodes: Vec<Node>,
    links: Vec<LinkSlot>,
    captures: Vec<Option<Sink>>,
    addresses: BTreeMap<IpAddr, NodeId>,
    hosts: usize,
    unfinished: usize,
    stats: SimStats,
    host_out: Vec<Datagram>,
    middle_out: Vec<Transmit>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("nodes", &self.nodes.len())
            .field("links", &self.links.len())
            .field("pending_events", &self.queue.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Simulator {
    /// An empty network whose random sources all derive from `seed`.
    pub fn new(seed: Seed) -> Simulator {
        Simulator {
            seed,
            now: Time::ZERO,
            queue: EventQueue::new(),
            timers: timers::Timers::default(),
            last: (Time::ZERO, 0),
            nodes: Vec::new(),
            links: Vec::new(),
            captures: Vec::new(),
            addresses: BTreeMap::new(),
            hosts: 0,
            unfinished: 0,
            stats: SimStats::default(),
            host_out: Vec::new(),
            middle_out: Vec::new(),
        }
    }

    /// The scenario seed.
    pub fn seed(&self) -> Seed {
        self.seed
    }

    /// The current virtual time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Simulator-wide counters.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    fn claim_address(&mut self, addr: IpAddr, node: NodeId) -> Result<(), TopologyError> {
        if self.addresses.contains_key(&addr) {
            return Err(TopologyError::DuplicateAddress(addr));
        }
        self.addresses.insert(addr, node);
        Ok(())
    }

    fn next_node_id(&self) -> NodeId {
        NodeId(u32::try_from(self.nodes.len()).unwrap_or(u32::MAX))
    }

    /// Adds a host. It is first polled at `spec.start`.
    pub fn add_host(&mut self, spec: HostSpec) -> Result<NodeId, TopologyError> {
        let id = self.next_node_id();
        self.claim_address(spec.addr, id)?;
        self.nodes.push(Node {
            name: spec.name,
            addrs: vec![spec.addr],
            ifaces: Vec::new(),
            routes: RoutingTable::default(),
            role: Role::Host(HostSlot {
                engine: spec.host,
                started: false,
                finished: false,
                deadline: None,
            }),
        });
        self.hosts += 1;
        self.unfinished += 1;
        // A host added during a run cannot start in the past.
        self.queue.push(spec.start.max(self.now), Event::Start(id));
        Ok(id)
    }

    /// Adds a middle node (a plain forwarder, or one running a middlebox).
    /// A middlebox is first polled at the current time (zero before a run).
    pub fn add_middle(&mut self, spec: MiddleSpec) -> Result<NodeId, TopologyError> {
        let id = self.next_node_id();
        if let Some(addr) = spec.addr {
            self.claim_address(addr, id)?;
        }
        let has_engine = spec.middlebox.is_some();
        self.nodes.push(Node {
            name: spec.name,
            addrs: spec.addr.into_iter().collect(),
            ifaces: Vec::new(),
            routes: RoutingTable::default(),
            role: Role::Middle(MiddleSlot {
                engine: spec.middlebox,
                deadline: None,
            }),
        });
        if has_engine {
            self.queue.push(self.now, Event::Start(id));
        }
        Ok(id)
    }

    fn node_mut(&mut self, id: NodeId) -> Result<&mut Node, TopologyError> {
        self.nodes
            .get_mut(id.index())
            .ok_or(TopologyError::NoSuchNode(id))
    }

    fn push_link(&mut self, link: Link, from: NodeId, to: NodeId, to_iface: Interface) -> LinkId {
        let id = LinkId(u32::try_from(self.links.len()).unwrap_or(u32::MAX));
        self.links.push(LinkSlot {
            link,
            from,
            to,
            to_iface,
            captures: Vec::new(),
            fates: None,
        });
        id
    }

    /// Joins `a` and `b` with a link each way, giving each a new interface.
    /// A host without a default route gets one through this interface.
    pub fn connect(
        &mut self,
        a: NodeId,
        b: NodeId,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<HopLinks, TopologyError> {
        if a == b {
            return Err(TopologyError::SelfLoop(a));
        }
        let a_iface = next_interface(self.node_mut(a)?, a)?;
        let b_iface = next_interface(self.node_mut(b)?, b)?;
        // Build both links before changing anything, so an error leaves the
        // network as it was.
        let n = self.links.len();
        let a_to_b = Link::new(a_to_b, self.seed.link(n))?;
        let b_to_a = Link::new(b_to_a, self.seed.link(n + 1))?;
        let forward = self.push_link(a_to_b, a, b, b_iface);
        let reverse = self.push_link(b_to_a, b, a, a_iface);
        for (node, out, peer) in [(a, forward, b), (b, reverse, a)] {
            let n = self.node_mut(node)?;
            n.ifaces.push(Iface { out, peer });
            if matches!(n.role, Role::Host(_)) && n.routes.default_route().is_none() {
                let iface = Interface(u16::try_from(n.ifaces.len() - 1).unwrap_or(u16::MAX));
                n.routes.set_default(iface);
            }
        }
        Ok(HopLinks { forward, reverse })
    }

    /// Routes datagrams for `dst` out of `via` at `node`.
    pub fn add_route(
        &mut self,
        node: NodeId,
        dst: IpAddr,
        via: Interface,
    ) -> Result<(), TopologyError> {
        let n = self.node_mut(node)?;
        if n.iface(via).is_none() {
            return Err(TopologyError::NoSuchInterface {
                node,
                interface: via,
            });
        }
        n.routes.add(dst, via);
        Ok(())
    }

    /// Routes datagrams with no specific route out of `via` at `node`.
    pub fn set_default_route(&mut self, node: NodeId, via: Interface) -> Result<(), TopologyError> {
        let n = self.node_mut(node)?;
        if n.iface(via).is_none() {
            return Err(TopologyError::NoSuchInterface {
                node,
                interface: via,
            });
        }
        n.routes.set_default(via);
        Ok(())
    }

    /// The interface of `node` that leads to its neighbour `peer`.
    pub fn interface_towards(&self, node: NodeId, peer: NodeId) -> Option<Interface> {
        let n = self.nodes.get(node.index())?;
        let i = n.ifaces.iter().position(|f| f.peer == peer)?;
        u16::try_from(i).ok().map(Interface)
    }

    /// Records the packets of `link` at `point` into a new pcap capture.
    ///
    /// # Panics
    /// If `link` does not belong to this simulator.
    pub fn capture(&mut self, link: LinkId, point: CapturePoint) -> CaptureId {
        let id = self.captures.len();
        self.captures.push(Some(Sink::Pcap(Capture::new())));
        self.link_slot_mut(link).captures.push((id, point, 0));
        CaptureId(id)
    }

    /// Records the packets of several links into one pcapng capture: each
    /// tap `(link, point, name)` is an interface of the file, named
    /// `name`, in the order given. Packets are written in the order the
    /// simulator sees them (time order), whichever interface.
    ///
    /// # Panics
    /// If a link does not belong to this simulator.
    pub fn capture_pcapng(&mut self, taps: &[(LinkId, CapturePoint, String)]) -> CaptureId {
        let id = self.captures.len();
        let names = taps.iter().map(|(_, _, name)| name.clone());
        self.captures.push(Some(Sink::Pcapng(Pcapng::new(names))));
        for (interface, (link, point, _)) in taps.iter().enumerate() {
            let interface = u32::try_from(interface).unwrap_or(u32::MAX);
            self.link_slot_mut(*link)
                .captures
                .push((id, *point, interface));
        }
        CaptureId(id)
    }

    /// Records the fate of every datagram offered to `link` from now on
    /// ([`Simulator::fates`]): the ground truth that a middlebox's
    /// inferences are measured against (which packets a link really
    /// dropped, when each arrived). Costs nothing on links not recorded.
    pub fn record_fates(&mut self, link: LinkId) {
        let slot = self.link_slot_mut(link);
        if slot.fates.is_none() {
            slot.fates = Some(Vec::new());
        }
    }

    /// The fates recorded on `link`, in the order the datagrams were
    /// offered (empty if it is not recorded).
    pub fn fates(&self, link: LinkId) -> &[FateRecord] {
        self.link_slot(link).fates.as_deref().unwrap_or(&[])
    }

    /// The pcap file of a capture (once; later calls return `None`). Take
    /// it after the run; packets recorded after taking are discarded.
    pub fn take_capture(&mut self, id: CaptureId) -> Option<Vec<u8>> {
        match self.captures.get_mut(id.0)?.take()? {
            Sink::Pcap(c) => Some(c.into_bytes()),
            Sink::Pcapng(c) => Some(c.finish("")),
        }
    }

    /// The pcapng capture `id`, to finish with its secrets
    /// ([`Pcapng::finish`]); `None` if it is a pcap capture or was taken.
    pub fn take_pcapng(&mut self, id: CaptureId) -> Option<Pcapng> {
        let slot = self.captures.get_mut(id.0)?;
        match slot.take()? {
            Sink::Pcapng(c) => Some(c),
            other => {
                *slot = Some(other);
                None
            }
        }
    }

    /// Packets recorded so far by a capture.
    pub fn capture_packets(&self, id: CaptureId) -> u64 {
        self.captures
            .get(id.0)
            .and_then(Option::as_ref)
            .map_or(0, Sink::packets)
    }

    fn link_slot(&self, id: LinkId) -> &LinkSlot {
        match self.links.get(id.index()) {
            Some(slot) => slot,
            None => panic!("{id} does not belong to this simulator"),
        }
    }

    fn link_slot_mut(&mut self, id: LinkId) -> &mut LinkSlot {
        match self.links.get_mut(id.index()) {
            Some(slot) => slot,
            None => panic!("{id} does not belong to this simulator"),
        }
    }

    /// A link's model (its counters, queue samples, RED state).
    ///
    /// # Panics
    /// If `id` does not belong to this simulator.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.link_slot(id).link
    }

    /// A link's counters.
    ///
    /// # Panics
    /// If `id` does not belong to this simulator.
    pub fn link_stats(&self, id: LinkId) -> &LinkStats {
        self.link(id).stats()
    }

    /// The nodes a link goes from and to.
    ///
    /// # Panics
    /// If `id` does not belong to this simulator.
    pub fn link_ends(&self, id: LinkId) -> (NodeId, NodeId) {
        let slot = self.link_slot(id);
        (slot.from, slot.to)
    }

    /// Every link with its id, in creation order.
    pub fn links(&self) -> impl Iterator<Item = (LinkId, &Link)> + '_ {
        (0u32..)
            .zip(&self.links)
            .map(|(i, slot)| (LinkId(i), &slot.link))
    }

    /// A node's name.
    pub fn node_name(&self, id: NodeId) -> Option<&str> {
        self.nodes.get(id.index()).map(|n| n.name.as_str())
    }

    /// A node's addresses.
    pub fn node_addrs(&self, id: NodeId) -> &[IpAddr] {
        self.nodes.get(id.index()).map_or(&[], |n| &n.addrs)
    }

    /// The host engine of `node`, if it is a host of type `T`.
    pub fn host<T: Host>(&self, node: NodeId) -> Option<&T> {
        match &self.nodes.get(node.index())?.role {
            Role::Host(h) => {
                let any: &dyn Any = h.engine.as_ref();
                any.downcast_ref()
            }
            Role::Middle(_) => None,
        }
    }

    /// The host engine of `node`, whatever its type (`None` for a middle
    /// node).
    pub fn host_dyn(&self, node: NodeId) -> Option<&dyn Host> {
        match &self.nodes.get(node.index())?.role {
            Role::Host(h) => Some(h.engine.as_ref()),
            Role::Middle(_) => None,
        }
    }

    /// The host engine of `node`, mutably, if it is a host of type `T`.
    pub fn host_mut<T: Host>(&mut self, node: NodeId) -> Option<&mut T> {
        match &mut self.nodes.get_mut(node.index())?.role {
            Role::Host(h) => {
                let any: &mut dyn Any = h.engine.as_mut();
                any.downcast_mut()
            }
            Role::Middle(_) => None,
        }
    }

    /// The middlebox of `node`, if it runs one of type `T`.
    pub fn middlebox<T: Middlebox>(&self, node: NodeId) -> Option<&T> {
        match &self.nodes.get(node.index())?.role {
            Role::Middle(MiddleSlot {
                engine: Some(engine),
                ..
            }) => {
                let any: &dyn Any = engine.as_ref();
                any.downcast_ref()
            }
            _ => None,
        }
    }

    /// The middlebox of `node`, whatever its type (`None` for a host or a
    /// plain forwarder).
    pub fn middlebox_dyn(&self, node: NodeId) -> Option<&dyn Middlebox> {
        match &self.nodes.get(node.index())?.role {
            Role::Middle(MiddleSlot {
                engine: Some(engine),
                ..
            }) => Some(engine.as_ref()),
            _ => None,
        }
    }

    /// The middlebox of `node`, mutably, if it runs one of type `T`.
    pub fn middlebox_mut<T: Middlebox>(&mut self, node: NodeId) -> Option<&mut T> {
        match &mut self.nodes.get_mut(node.index())?.role {
            Role::Middle(MiddleSlot {
                engine: Some(engine),
                ..
            }) => {
                let any: &mut dyn Any = engine.as_mut();
                any.downcast_mut()
            }
            _ => None,
        }
    }
}

fn next_interface(node: &Node, id: NodeId) -> Result<Interface, TopologyError> {
    u16::try_from(node.ifaces.len())
        .map(Interface)
        .map_err(|_| TopologyError::TooManyInterfaces(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulator_can_move_to_a_worker_thread() {
        fn is_send<T: Send>() {}
        is_send::<Simulator>();
    }
}
