//! What the simulator keeps for each node and each link.

use crate::capture::CapturePoint;
use crate::topology::RoutingTable;
use crate::{Host, Interface, Link, LinkId, Middlebox, NodeId, Time};
use std::net::IpAddr;

/// One interface: the links to and from one neighbour.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Iface {
    pub(crate) out: LinkId,
    pub(crate) peer: NodeId,
}

pub(crate) struct HostSlot {
    pub(crate) engine: Box<dyn Host>,
    pub(crate) started: bool,
    pub(crate) finished: bool,
    /// The deadline the engine last asked for (its timer is in `Timers`).
    pub(crate) deadline: Option<Time>,
}

pub(crate) struct MiddleSlot {
    pub(crate) engine: Option<Box<dyn Middlebox>>,
    /// The deadline the engine last asked for (its timer is in `Timers`).
    pub(crate) deadline: Option<Time>,
}

pub(crate) enum Role {
    Host(HostSlot),
    Middle(MiddleSlot),
}

pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) addrs: Vec<IpAddr>,
    pub(crate) ifaces: Vec<Iface>,
    pub(crate) routes: RoutingTable,
    pub(crate) role: Role,
}

impl Node {
    pub(crate) fn owns(&self, ip: IpAddr) -> bool {
        self.addrs.contains(&ip)
    }

    pub(crate) fn iface(&self, interface: Interface) -> Option<Iface> {
        self.ifaces.get(interface.index()).copied()
    }
}

pub(crate) struct LinkSlot {
    pub(crate) link: Link,
    pub(crate) from: NodeId,
    pub(crate) to: NodeId,
    pub(crate) to_iface: Interface,
    /// Captures attached to this link: indices into the simulator's list,
    /// the point, and the link's interface in a pcapng capture.
    pub(crate) captures: Vec<(usize, CapturePoint, u32)>,
    /// The fate of every datagram offered, when recorded.
    pub(crate) fates: Option<Vec<super::FateRecord>>,
}
