//! A dumbbell: several sender/receiver pairs sharing one bottleneck.
//!
//! ```text
//! sender 0 ─┐                         ┌─ receiver 0
//! sender 1 ─┼─ left ══ bottleneck ══ right ─┼─ receiver 1
//! sender n ─┘                         └─ receiver n
//! ```

use super::{HopConfig, HopLinks, HostSpec, MiddleSpec, NodeId, TopologyError};
use crate::{Interface, Simulator};

/// One flow of a dumbbell: its two hosts (each with its own start time)
/// and their access hops. The sender's access hop points forward from the
/// sender to the left router; the receiver's from the right router to the
/// receiver.
#[derive(Debug)]
pub struct FlowPair {
    /// The sending host.
    pub sender: HostSpec,
    /// The receiving host.
    pub receiver: HostSpec,
    /// Sender ⇄ left router.
    pub sender_access: HopConfig,
    /// Right router ⇄ receiver.
    pub receiver_access: HopConfig,
}

/// A dumbbell to build.
#[derive(Debug)]
pub struct DumbbellSpec {
    /// The router on the senders' side (may run a middlebox).
    pub left: MiddleSpec,
    /// The router on the receivers' side (may run a middlebox).
    pub right: MiddleSpec,
    /// Left ⇄ right; forward is left → right.
    pub bottleneck: HopConfig,
    /// The flows.
    pub pairs: Vec<FlowPair>,
}

impl DumbbellSpec {
    /// A dumbbell with plain forwarding routers and no flows yet.
    pub fn new(bottleneck: HopConfig) -> DumbbellSpec {
        DumbbellSpec {
            left: MiddleSpec::forwarder("left"),
            right: MiddleSpec::forwarder("right"),
            bottleneck,
            pairs: Vec::new(),
        }
    }

    /// Adds a flow.
    pub fn pair(mut self, pair: FlowPair) -> DumbbellSpec {
        self.pairs.push(pair);
        self
    }

    /// Replaces the left router.
    pub fn with_left(mut self, left: MiddleSpec) -> DumbbellSpec {
        self.left = left;
        self
    }

    /// Replaces the right router.
    pub fn with_right(mut self, right: MiddleSpec) -> DumbbellSpec {
        self.right = right;
        self
    }
}

/// The nodes and links of one built flow pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumbbellPair {
    /// The sender host.
    pub sender: NodeId,
    /// The receiver host.
    pub receiver: NodeId,
    /// Sender ⇄ left router.
    pub sender_access: HopLinks,
    /// Right router ⇄ receiver.
    pub receiver_access: HopLinks,
}

/// The nodes and links of a built dumbbell.
///
/// On both routers interface 0 is the bottleneck and interface `i + 1`
/// leads to pair `i`'s host. The left router routes each sender's address
/// to its access link and everything else over the bottleneck; the right
/// router routes each receiver's address to its access link and the
/// senders' (and the left router's) addresses over the bottleneck, and has
/// no default route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dumbbell {
    /// The senders' router.
    pub left: NodeId,
    /// The receivers' router.
    pub right: NodeId,
    /// The shared links.
    pub bottleneck: HopLinks,
    /// The flows, in the order given.
    pub pairs: Vec<DumbbellPair>,
}

impl Dumbbell {
    /// On both routers: the bottleneck interface.
    pub const BOTTLENECK: Interface = Interface(0);
}

impl Simulator {
    /// Builds a dumbbell (see [`DumbbellSpec`]) and its routes.
    pub fn add_dumbbell(&mut self, spec: DumbbellSpec) -> Result<Dumbbell, TopologyError> {
        if spec.pairs.is_empty() {
            return Err(TopologyError::NoPairs);
        }
        let left = self.add_middle(spec.left)?;
        let right = self.add_middle(spec.right)?;
        let bottleneck = self.connect(
            left,
            right,
            spec.bottleneck.forward,
            spec.bottleneck.reverse,
        )?;
        let mut pairs = Vec::new();
        for pair in spec.pairs {
            let sender = self.add_host(pair.sender)?;
            let receiver = self.add_host(pair.receiver)?;
            let sender_access = self.connect(
                sender,
                left,
                pair.sender_access.forward,
                pair.sender_access.reverse,
            )?;
            let receiver_access = self.connect(
                right,
                receiver,
                pair.receiver_access.forward,
                pair.receiver_access.reverse,
            )?;
            pairs.push(DumbbellPair {
                sender,
                receiver,
                sender_access,
                receiver_access,
            });
        }
        for (i, pair) in pairs.iter().enumerate() {
            let access = Interface(
                u16::try_from(i + 1).map_err(|_| TopologyError::TooManyInterfaces(left))?,
            );
            for addr in self.node_addrs(pair.sender).to_vec() {
                self.add_route(left, addr, access)?;
                self.add_route(right, addr, Dumbbell::BOTTLENECK)?;
            }
            for addr in self.node_addrs(pair.receiver).to_vec() {
                self.add_route(right, addr, access)?;
            }
        }
        for addr in self.node_addrs(left).to_vec() {
            self.add_route(right, addr, Dumbbell::BOTTLENECK)?;
        }
        self.set_default_route(left, Dumbbell::BOTTLENECK)?;
        Ok(Dumbbell {
            left,
            right,
            bottleneck,
            pairs,
        })
    }
}
