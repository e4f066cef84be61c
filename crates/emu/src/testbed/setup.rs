//! Building a testbed ([`Testbed::build`]): its nodes planned from the
//! spec, then configured step by step — the namespaces, each node
//! interface's veth link to the emulator and its addresses, the loopback
//! addresses, the routes across the chain — and the relay started in the
//! emulator namespace.

use super::{Node, NodeInterface, Testbed, TestbedError, TestbedSpec, add_namespace};
use crate::link::{Relay, RelayError, RelayHop, RelayReport};
use crate::sys::command::{CommandError, in_netns, ip};
use std::net::Ipv4Addr;

/// The chain's nodes for `spec`, their namespaces named from `prefix`:
/// node `k` sits between hop `k - 1` and hop `k`; the middle nodes'
/// interfaces get `10.100.<hop>.1` (left end of a hop) and `.2` (right
/// end), extra addresses go to their node's loopback.
pub(super) fn plan_nodes(spec: &TestbedSpec, prefix: &str) -> Vec<Node> {
    let hops = spec.hops.len();
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
        let extra = match k {
            0 => spec.client_extra.clone(),
            k if k == hops => spec.server_extra.clone(),
            k => spec
                .extra
                .iter()
                .filter(|(middle, _)| *middle == k - 1)
                .map(|(_, addr)| *addr)
                .collect(),
        };
        nodes.push(Node {
            netns: format!("{prefix}-{role}"),
            role,
            interfaces,
            extra,
        });
    }
    nodes
}

/// The MAC of node `node`'s interface on hop `hop` (locally administered).
fn mac(node: usize, hop: usize) -> [u8; 6] {
    [0x02, 0x70, 0x6b, 0x00, node as u8, hop as u8]
}

/// A MAC as `ip` writes it.
fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// The relay port of `hop` facing its left (`false`) or right node.
fn relay_port(hop: usize, right: bool) -> String {
    format!("h{hop}{}", if right { 'r' } else { 'l' })
}

impl Testbed {
    fn add_netns(&mut self, name: &str) -> Result<(), TestbedError> {
        add_namespace(name, &mut self.namespaces)?;
        Ok(())
    }

    /// Makes and wires every namespace: the emulator's and the nodes'; for
    /// each node interface its link to the emulator and its addresses; each
    /// node's loopback addresses; then the routes across the chain.
    pub(super) fn configure(&mut self) -> Result<(), TestbedError> {
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
                add_link(&emu, node, iface, &port)?;
                address_interface(&node.netns, iface)?;
            }
            add_loopback_addresses(node)?;
        }
        add_routes(&nodes)?;
        Ok(())
    }

    /// Starts the relay thread in the emulator namespace, one pair of
    /// ports per hop of `spec`; returns once its ports are open.
    pub(super) fn start_relay(&mut self, spec: &TestbedSpec) -> Result<(), TestbedError> {
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
        let clock = self.base;
        let shift = self.clock_shift.clone();
        let capture = self.capture.clone();
        let seed = spec.seed;
        let handle = std::thread::Builder::new()
            .name("relay".into())
            .spawn(move || {
                let opened = crate::sys::enter_netns(&emu)
                    .map_err(|e| RelayError::Port {
                        port: emu.clone(),
                        source: e,
                    })
                    .and_then(|()| Relay::open(&hops, seed))
                    .map(|relay| relay.with_restart(shift).with_capture(capture));
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
}

/// The veth pair from a node's interface to its relay `port` in the
/// emulator namespace `emu`, offloads off at both ends, both ends up.
fn add_link(emu: &str, node: &Node, iface: &NodeInterface, port: &str) -> Result<(), CommandError> {
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
        port,
        "netns",
        emu,
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
        emu,
        "ethtool",
        &["-K", port, "gro", "off", "rx", "off", "tx", "off"],
    )?;
    ip(&["-n", emu, "link", "set", port, "promisc", "on", "up"])?;
    ip(&["-n", &node.netns, "link", "set", &iface.name, "up"])?;
    Ok(())
}

/// A node interface's /32 address, the on-link route to the node across
/// its hop and that node's pinned neighbour entry.
fn address_interface(netns: &str, iface: &NodeInterface) -> Result<(), CommandError> {
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
    Ok(())
}

/// A node's extra addresses, on its loopback.
fn add_loopback_addresses(node: &Node) -> Result<(), CommandError> {
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
    Ok(())
}

/// Routes: on every node, every address of another node goes towards its
/// side (out of the first interface for nodes on the client side, the last
/// for nodes on the server side), except the on-link one.
fn add_routes(nodes: &[Node]) -> Result<(), CommandError> {
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
