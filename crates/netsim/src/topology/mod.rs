//! Naming the parts of a network and building common shapes.
//!
//! A network is nodes joined by one-direction links. A node is a host (runs
//! a [`crate::Host`]) or a middle node (forwards, or runs a
//! [`crate::Middlebox`]). [`crate::Simulator::connect`] joins two nodes with a
//! link in each direction and gives each node a new [`crate::Interface`].
//! Each node routes on the destination IP with a static table (exact
//! address → interface, plus an optional default). Hosts get a default
//! route to their first interface automatically.
//!
//! The builders in this module ([`ChainSpec`], [`DumbbellSpec`]) create the
//! nodes, the links and the routes for the two shapes the experiments use.

mod chain;
mod dumbbell;
mod routing;

pub use chain::{Chain, ChainSpec};
pub use dumbbell::{Dumbbell, DumbbellPair, DumbbellSpec, FlowPair};
pub(crate) use routing::RoutingTable;

use crate::{Host, LinkConfig, LinkConfigError, Middlebox, Time};
use std::fmt;
use std::net::IpAddr;

/// A node of the simulated network, numbered in the order nodes were added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub(crate) u32);

impl NodeId {
    /// The node's index (0 for the first node added).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// A one-direction link, numbered in the order links were created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub(crate) u32);

impl LinkId {
    /// The link's index (0 for the first link created).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link{}", self.0)
    }
}

/// Why a topology could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A node id that this simulator did not hand out.
    #[error("no such node: {0}")]
    NoSuchNode(NodeId),
    /// An interface the node does not have.
    #[error("{node} has no interface {interface}")]
    NoSuchInterface {
        /// The node.
        node: NodeId,
        /// The interface.
        interface: crate::Interface,
    },
    /// A node connected to itself.
    #[error("cannot connect {0} to itself")]
    SelfLoop(NodeId),
    /// Two nodes were given the same IP address.
    #[error("address {0} is used by two nodes")]
    DuplicateAddress(IpAddr),
    /// A node would get more interfaces than an [`crate::Interface`] can
    /// number.
    #[error("{0} has too many interfaces")]
    TooManyInterfaces(NodeId),
    /// A chain needs one more hop than middle nodes.
    #[error("a chain with {middles} middle nodes needs {} hops, got {hops}", middles + 1)]
    HopCount {
        /// Middle nodes given.
        middles: usize,
        /// Hops given.
        hops: usize,
    },
    /// A dumbbell needs at least one sender/receiver pair.
    #[error("a dumbbell needs at least one flow pair")]
    NoPairs,
    /// A link configuration was invalid.
    #[error("invalid link configuration: {0}")]
    Link(#[from] LinkConfigError),
}

/// A host to add: its name (for reports), address, start time and engine.
pub struct HostSpec {
    /// Name, for reports and debugging.
    pub name: String,
    /// Its IP address.
    pub addr: IpAddr,
    /// When the simulator first polls it.
    pub start: Time,
    /// The engine.
    pub host: Box<dyn Host>,
}

impl HostSpec {
    /// A host starting at time zero.
    pub fn new(name: impl Into<String>, addr: IpAddr, host: impl Host) -> HostSpec {
        HostSpec {
            name: name.into(),
            addr,
            start: Time::ZERO,
            host: Box::new(host),
        }
    }

    /// A host starting at time zero, from an engine already boxed (drivers
    /// that pick the engine's type at run time). Unlike [`HostSpec::new`]
    /// it does not box it again, so [`crate::Simulator::host`] finds the
    /// engine's own type.
    pub fn boxed(name: impl Into<String>, addr: IpAddr, host: Box<dyn Host>) -> HostSpec {
        HostSpec {
            name: name.into(),
            addr,
            start: Time::ZERO,
            host,
        }
    }

    /// Starts the host at `start` instead.
    pub fn starting_at(mut self, start: Time) -> HostSpec {
        self.start = start;
        self
    }
}

impl fmt::Debug for HostSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostSpec")
            .field("name", &self.name)
            .field("addr", &self.addr)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

/// A middle node to add: its name, optional address (for a middlebox that
/// sends or receives as itself) and optional middlebox (none: it forwards).
pub struct MiddleSpec {
    /// Name, for reports and debugging.
    pub name: String,
    /// Its own IP address, if it has one.
    pub addr: Option<IpAddr>,
    /// The middlebox, or `None` to just forward.
    pub middlebox: Option<Box<dyn Middlebox>>,
}

impl MiddleSpec {
    /// A plain forwarding node.
    pub fn forwarder(name: impl Into<String>) -> MiddleSpec {
        MiddleSpec {
            name: name.into(),
            addr: None,
            middlebox: None,
        }
    }

    /// A node running `middlebox`.
    pub fn with_middlebox(name: impl Into<String>, middlebox: impl Middlebox) -> MiddleSpec {
        MiddleSpec {
            name: name.into(),
            addr: None,
            middlebox: Some(Box::new(middlebox)),
        }
    }

    /// A node running a middlebox already boxed (see [`HostSpec::boxed`]).
    pub fn with_boxed(name: impl Into<String>, middlebox: Box<dyn Middlebox>) -> MiddleSpec {
        MiddleSpec {
            name: name.into(),
            addr: None,
            middlebox: Some(middlebox),
        }
    }

    /// Gives the node an IP address of its own.
    pub fn with_addr(mut self, addr: IpAddr) -> MiddleSpec {
        self.addr = Some(addr);
        self
    }
}

impl fmt::Debug for MiddleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MiddleSpec")
            .field("name", &self.name)
            .field("addr", &self.addr)
            .field("has_middlebox", &self.middlebox.is_some())
            .finish()
    }
}

/// The two links of one hop: forward (away from the sender side) and
/// reverse.
#[derive(Clone, Debug, PartialEq)]
pub struct HopConfig {
    /// The link in the forward direction.
    pub forward: LinkConfig,
    /// The link in the reverse direction.
    pub reverse: LinkConfig,
}

impl HopConfig {
    /// Different links in the two directions.
    pub fn new(forward: LinkConfig, reverse: LinkConfig) -> HopConfig {
        HopConfig { forward, reverse }
    }

    /// The same link configuration in both directions.
    pub fn symmetric(link: LinkConfig) -> HopConfig {
        HopConfig {
            forward: link.clone(),
            reverse: link,
        }
    }
}

/// The two links created for one hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HopLinks {
    /// The forward link.
    pub forward: LinkId,
    /// The reverse link.
    pub reverse: LinkId,
}
