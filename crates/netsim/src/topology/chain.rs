//! A chain: sender — hop — middle — hop — … — receiver.

use super::{HopConfig, HopLinks, HostSpec, MiddleSpec, NodeId, TopologyError};
use crate::{Interface, Simulator};

/// A chain to build: a sender, zero or more middle nodes, a receiver, and
/// one [`HopConfig`] per hop (one more hop than middle nodes). Hop `i` joins
/// position `i` and `i + 1` (position 0 is the sender); its forward link
/// points towards the receiver.
///
/// ```
/// # use netsim::*;
/// # use std::time::Duration;
/// # use netsim::testing::Sink;
/// let link = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(10));
/// let spec = ChainSpec::new(
///     HostSpec::new("client", "10.0.0.1".parse().unwrap(), Sink::new()),
///     HostSpec::new("server", "10.0.1.1".parse().unwrap(), Sink::new()),
/// )
/// .hop(HopConfig::symmetric(link.clone()))
/// .middle(MiddleSpec::forwarder("router"))
/// .hop(HopConfig::symmetric(link));
/// let mut sim = Simulator::new(Seed::new(1));
/// let chain = sim.add_chain(spec).unwrap();
/// assert_eq!(chain.hops.len(), 2);
/// ```
#[derive(Debug)]
pub struct ChainSpec {
    /// The host at position 0.
    pub sender: HostSpec,
    /// The middle nodes, in order from the sender.
    pub middles: Vec<MiddleSpec>,
    /// The host at the far end.
    pub receiver: HostSpec,
    /// The hops, in order from the sender.
    pub hops: Vec<HopConfig>,
}

impl ChainSpec {
    /// A chain between two hosts, with no hops yet.
    pub fn new(sender: HostSpec, receiver: HostSpec) -> ChainSpec {
        ChainSpec {
            sender,
            middles: Vec::new(),
            receiver,
            hops: Vec::new(),
        }
    }

    /// Appends a hop.
    pub fn hop(mut self, hop: HopConfig) -> ChainSpec {
        self.hops.push(hop);
        self
    }

    /// Appends a middle node.
    pub fn middle(mut self, middle: MiddleSpec) -> ChainSpec {
        self.middles.push(middle);
        self
    }
}

/// The nodes and links of a built chain.
///
/// On every middle node, interface 0 faces the sender and interface 1 the
/// receiver. Each middle node routes the addresses of the nodes on its
/// sender side to interface 0 and everything else (the receiver side and
/// unknown destinations) to interface 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The sender host.
    pub sender: NodeId,
    /// The middle nodes, from the sender.
    pub middles: Vec<NodeId>,
    /// The receiver host.
    pub receiver: NodeId,
    /// The links of each hop, from the sender.
    pub hops: Vec<HopLinks>,
}

impl Chain {
    /// On a middle node of a chain: the interface facing the sender.
    pub const TOWARDS_SENDER: Interface = Interface(0);
    /// On a middle node of a chain: the interface facing the receiver.
    pub const TOWARDS_RECEIVER: Interface = Interface(1);
}

impl Simulator {
    /// Builds a chain (see [`ChainSpec`]) and its routes.
    pub fn add_chain(&mut self, spec: ChainSpec) -> Result<Chain, TopologyError> {
        if spec.hops.len() != spec.middles.len() + 1 {
            return Err(TopologyError::HopCount {
                middles: spec.middles.len(),
                hops: spec.hops.len(),
            });
        }
        let sender = self.add_host(spec.sender)?;
        let mut positions = vec![sender];
        let mut middles = Vec::new();
        for m in spec.middles {
            let id = self.add_middle(m)?;
            middles.push(id);
            positions.push(id);
        }
        let receiver = self.add_host(spec.receiver)?;
        positions.push(receiver);

        let mut hops = Vec::new();
        for (i, hop) in spec.hops.into_iter().enumerate() {
            hops.push(self.connect(positions[i], positions[i + 1], hop.forward, hop.reverse)?);
        }
        for (p, &node) in positions.iter().enumerate() {
            if p == 0 || p == positions.len() - 1 {
                continue;
            }
            for (q, &other) in positions.iter().enumerate() {
                let via = if q < p {
                    Chain::TOWARDS_SENDER
                } else {
                    Chain::TOWARDS_RECEIVER
                };
                for addr in self.node_addrs(other).to_vec() {
                    if q != p {
                        self.add_route(node, addr, via)?;
                    }
                }
            }
            self.set_default_route(node, Chain::TOWARDS_RECEIVER)?;
        }
        Ok(Chain {
            sender,
            middles,
            receiver,
            hops,
        })
    }
}
