//! A middle node as the driver runs it ([`MiddleNodeSpec`]): its
//! interfaces, where the engine sits, its own addresses; and the sockets
//! and errors the placements share.

use crate::sys::PacketSocket;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

/// A MAC address.
pub type Mac = [u8; 6];

/// An interface's Ethernet addresses, which the driver writes into the
/// frames it sends in path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkAddrs {
    /// The interface's own MAC: the source of frames sent out of it.
    pub mac: Mac,
    /// The neighbour's MAC: their destination.
    pub peer_mac: Mac,
}

/// One of the node's interfaces, as the driver uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInterface {
    /// Its name in the node's namespace.
    pub name: String,
    /// Its Ethernet addresses; needed in path, unused beside it.
    pub link: Option<LinkAddrs>,
}

impl DriverInterface {
    /// An interface the driver only sniffs (beside the path).
    pub fn sniffed(name: impl Into<String>) -> DriverInterface {
        DriverInterface {
            name: name.into(),
            link: None,
        }
    }

    /// An interface the driver sends on (in path), with its MAC and its
    /// neighbour's.
    pub fn wired(name: impl Into<String>, mac: Mac, peer_mac: Mac) -> DriverInterface {
        DriverInterface {
            name: name.into(),
            link: Some(LinkAddrs { mac, peer_mac }),
        }
    }
}

/// The in-path routing table, for [`netsim::Route::ByDestination`] and
/// for passed-through IPv4 packets: host routes, a default, and the node's
/// own addresses (not forwarded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// Destination address → interface index.
    pub to: Vec<(Ipv4Addr, usize)>,
    /// Networks (address, prefix length) → interface index, for what no
    /// host route covers; the longest prefix wins.
    pub nets: Vec<(Ipv4Addr, u8, usize)>,
    /// The interface for every other destination (`None`: dropped and
    /// counted as unroutable).
    pub default: Option<usize>,
    /// The node's own addresses.
    pub local: Vec<Ipv4Addr>,
}

/// Where the engine sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In the path: the driver forwards, the kernel does not.
    InPath {
        /// How the engine's datagrams and passed-through packets leave.
        routes: Routes,
    },
    /// Beside the path: the kernel forwards, the driver sniffs. With
    /// nothing to sniff, the engine lives on its own sockets
    /// ([`MiddleNodeSpec::local`]) alone, as a server does.
    Beside {
        /// The interfaces (indices into [`MiddleNodeSpec::interfaces`])
        /// whose arriving frames the engine sees (maybe none).
        sniff: Vec<usize>,
    },
}

/// A middle node as the driver runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MiddleNodeSpec {
    /// The node's interfaces; `Interface(i)` is the `i`-th.
    pub interfaces: Vec<DriverInterface>,
    /// In path or beside it.
    pub placement: Placement,
    /// The engine's own socket addresses on the node (a control address):
    /// a UDP socket is bound on each, and the engine's datagrams from one
    /// of them leave from it beside the path.
    pub local: Vec<SocketAddrV4>,
}

/// Why the driver cannot run.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// Packet and raw sockets need root (`CAP_NET_RAW`).
    #[error("needs root (CAP_NET_RAW) for its packet and raw sockets")]
    NotRoot,
    /// No interface of that name in this network namespace.
    #[error("no interface {0} in this network namespace")]
    NoInterface(String),
    /// A local socket address is not an address of this host.
    #[error("{0} is not an address of this host (cannot bind a socket to it)")]
    AddrNotLocal(SocketAddrV4),
    /// The spec does not fit together.
    #[error("{0}")]
    Config(String),
    /// Something else about a socket.
    #[error("{what}: {source}")]
    Io {
        /// What the driver was doing.
        what: String,
        /// The error.
        source: io::Error,
    },
}

/// A packet socket and the interface it is on.
pub(super) struct Port {
    pub(super) socket: PacketSocket,
    pub(super) iface: usize,
}

/// A bound UDP socket on one of the engine's addresses.
pub(super) struct LocalSocket {
    pub(super) addr: SocketAddrV4,
    pub(super) socket: UdpSocket,
}
