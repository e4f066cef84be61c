//! In path: the driver is the node's forwarding plane. It writes every
//! frame it sends (the engine's datagrams, and what it passes through
//! unchanged) into a per-interface queue that [`InPath::flush`] hands to
//! the interface's packet socket with `sendmmsg`; the kernel's own
//! forwarding is off on the driver's interfaces while it runs
//! ([`ForwardingOff`]).

use super::frame::{FrameError, ipv4_destination, write_frame};
use super::middle_stats::MiddleStats;
use super::spec::{DriverError, LinkAddrs, Port, Routes};
use crate::sys::SendBatch;
use netsim::{Route, Transmit};
use std::fs::File;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::FileExt;

/// Spare frame buffers kept for reuse.
const SPARE: usize = 1024;

/// Where the routing table sends an IPv4 destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hop {
    /// Out of this interface.
    Out(usize),
    /// One of the node's own addresses: the local stack's.
    Local,
    /// Nowhere.
    Unroutable,
}

/// [`Routes`] sorted for lookups.
#[derive(Clone, Debug)]
pub(super) struct RouteTable {
    to: Vec<(Ipv4Addr, usize)>,
    /// (network as a number, mask, interface), longest prefix first.
    nets: Vec<(u32, u32, usize)>,
    default: Option<usize>,
    local: Vec<Ipv4Addr>,
}

impl RouteTable {
    /// Checks the interface indices against `interfaces`.
    pub(super) fn new(routes: &Routes, interfaces: usize) -> Result<RouteTable, DriverError> {
        let mut to = routes.to.clone();
        to.sort_unstable();
        to.dedup_by_key(|(addr, _)| *addr);
        let bad = to
            .iter()
            .map(|&(_, i)| i)
            .chain(routes.nets.iter().map(|&(_, _, i)| i))
            .chain(routes.default)
            .find(|&i| i >= interfaces);
        if let Some(i) = bad {
            return Err(DriverError::Config(format!(
                "a route names interface {i}, the node has {interfaces}"
            )));
        }
        let mut nets: Vec<(u32, u32, usize)> = routes
            .nets
            .iter()
            .map(|&(net, len, i)| {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(len.min(32)))
                    .unwrap_or(0);
                (u32::from(net) & mask, mask, i)
            })
            .collect();
        nets.sort_by_key(|&(net, mask, _)| (std::cmp::Reverse(mask), net));
        Ok(RouteTable {
            to,
            nets,
            default: routes.default,
            local: routes.local.clone(),
        })
    }

    /// Where `ip` goes: the node's own addresses first, then the host
    /// routes, the networks (longest prefix first), then the default.
    pub(super) fn lookup(&self, ip: Ipv4Addr) -> Hop {
        if self.local.contains(&ip) {
            return Hop::Local;
        }
        if let Ok(at) = self.to.binary_search_by_key(&ip, |&(addr, _)| addr) {
            return Hop::Out(self.to[at].1);
        }
        let bits = u32::from(ip);
        match self.nets.iter().find(|&&(net, mask, _)| bits & mask == net) {
            Some(&(_, _, out)) => Hop::Out(out),
            None => self.default.map_or(Hop::Unroutable, Hop::Out),
        }
    }

    /// Whether `ip` is one of the node's own addresses.
    pub(super) fn is_local(&self, ip: Ipv4Addr) -> bool {
        self.local.contains(&ip)
    }
}

/// The in-path forwarding plane: routes, link addresses and the frames
/// waiting for the next flush.
pub(super) struct InPath {
    pub(super) routes: RouteTable,
    links: Vec<LinkAddrs>,
    /// Frames to send, per interface, in order.
    out: Vec<Vec<Vec<u8>>>,
    spare: Vec<Vec<u8>>,
    /// `sendmmsg`'s headers, reused.
    send: Box<SendBatch>,
    _forwarding: ForwardingOff,
}

impl InPath {
    /// Turns the kernel's forwarding off on `names` (restored on drop).
    pub(super) fn new(
        routes: RouteTable,
        links: Vec<LinkAddrs>,
        names: &[String],
    ) -> Result<InPath, DriverError> {
        let forwarding = ForwardingOff::on(names).map_err(|source| DriverError::Io {
            what: "turning the kernel's forwarding off".into(),
            source,
        })?;
        Ok(InPath {
            routes,
            out: vec![Vec::new(); links.len()],
            links,
            spare: Vec::new(),
            send: Box::new(SendBatch::new(64)),
            _forwarding: forwarding,
        })
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| Vec::with_capacity(1514))
    }

    /// Queues the engine's datagram as a frame out of the interface its
    /// route names.
    pub(super) fn send(&mut self, transmit: Transmit, stats: &mut MiddleStats) {
        let out = match transmit.route {
            Route::Interface(i) if i.index() < self.links.len() => Some(i.index()),
            Route::Interface(_) => None,
            Route::ByDestination => match transmit.datagram.dst.ip() {
                IpAddr::V4(ip) => match self.routes.lookup(ip) {
                    Hop::Out(i) => Some(i),
                    Hop::Local | Hop::Unroutable => None,
                },
                IpAddr::V6(_) => None,
            },
        };
        let Some(out) = out else {
            stats.unroutable += 1;
            return;
        };
        let link = self.links[out];
        let mut frame = self.buffer();
        match write_frame(link.peer_mac, link.mac, &transmit.datagram, &mut frame) {
            Ok(()) => self.out[out].push(frame),
            Err(error) => {
                match error {
                    FrameError::NotIpv4 => stats.unroutable += 1,
                    _ => stats.send_errors += 1,
                }
                self.spare.push(frame);
            }
        }
    }

    /// Forwards a frame the driver does not hand to the engine, unchanged
    /// but for its Ethernet addresses: IPv4 by the routing table (left to
    /// the kernel if it is for the node itself), anything else — and
    /// IPv4 without a route — out of every other interface.
    pub(super) fn pass_through(&mut self, from: usize, frame: &[u8], stats: &mut MiddleStats) {
        if frame.len() < super::frame::ETHERNET_HEADER {
            return;
        }
        let hop = ipv4_destination(frame).map_or(Hop::Unroutable, |ip| self.routes.lookup(ip));
        match hop {
            Hop::Local => return,
            Hop::Out(out) => self.queue_copy(out, frame),
            Hop::Unroutable => {
                for out in (0..self.links.len()).filter(|&i| i != from) {
                    self.queue_copy(out, frame);
                }
            }
        }
        stats.passed_through += 1;
    }

    /// Queues a copy of `frame` out of `out`, from that interface's MAC
    /// and (unless it is broadcast or multicast) to its neighbour's.
    fn queue_copy(&mut self, out: usize, frame: &[u8]) {
        let link = self.links[out];
        let mut copy = self.buffer();
        copy.clear();
        copy.extend_from_slice(frame);
        if copy[0] & 1 == 0 {
            copy[..6].copy_from_slice(&link.peer_mac);
        }
        copy[6..12].copy_from_slice(&link.mac);
        self.out[out].push(copy);
    }

    /// Sends the queued frames, a `sendmmsg` per interface. `ports[i]` is
    /// interface `i`'s socket. A full transmit queue drops the rest, as a
    /// NIC would; a frame the kernel refuses is skipped.
    pub(super) fn flush(&mut self, ports: &[Port], stats: &mut MiddleStats) {
        for (queue, port) in self.out.iter_mut().zip(ports) {
            if queue.is_empty() {
                continue;
            }
            let mut at = 0;
            while at < queue.len() {
                match port.socket.send_frames(&queue[at..], &mut self.send) {
                    Ok(0) => {
                        stats.send_errors += (queue.len() - at) as u64;
                        break;
                    }
                    Ok(n) => {
                        stats.sent += n as u64;
                        at += n;
                    }
                    Err(_) => {
                        stats.send_errors += 1;
                        at += 1;
                    }
                }
            }
            let room = SPARE.saturating_sub(self.spare.len());
            self.spare.extend(queue.drain(..).take(room));
        }
    }
}

/// The kernel's IPv4 forwarding turned off on some interfaces
/// (`net.ipv4.conf.<if>.forwarding = 0`, which is what the kernel checks
/// for a packet arriving on `<if>`), and back to what it was on drop.
///
/// The sysctl files are opened in the calling thread's network namespace
/// and kept open, so the values are restored there whichever thread drops
/// this. With forwarding off on its input interface the kernel drops a
/// transit packet silently (no ICMP), while it still delivers what is
/// addressed to the node itself.
struct ForwardingOff {
    saved: Vec<(File, Vec<u8>)>,
}

impl ForwardingOff {
    fn on(names: &[String]) -> io::Result<ForwardingOff> {
        let mut guard = ForwardingOff { saved: Vec::new() };
        for name in names {
            let path = format!("/proc/sys/net/ipv4/conf/{name}/forwarding");
            let file = File::options()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
            let mut old = vec![0u8; 16];
            let len = file.read_at(&mut old, 0)?;
            old.truncate(len);
            file.write_at(b"0\n", 0)
                .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
            guard.saved.push((file, old));
        }
        Ok(guard)
    }
}

impl Drop for ForwardingOff {
    fn drop(&mut self) {
        for (file, old) in &self.saved {
            let _ = file.write_at(old, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_prefer_local_then_table_then_default() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let routes = Routes {
            to: vec![(ip("10.0.1.10"), 1), (ip("10.0.2.10"), 0)],
            nets: vec![(ip("10.9.0.0"), 16, 1), (ip("10.9.7.0"), 24, 0)],
            default: None,
            local: vec![ip("10.255.255.1")],
        };
        let table = RouteTable::new(&routes, 2).unwrap();
        assert_eq!(table.lookup(ip("10.0.1.10")), Hop::Out(1));
        assert_eq!(table.lookup(ip("10.0.2.10")), Hop::Out(0));
        assert_eq!(table.lookup(ip("10.255.255.1")), Hop::Local);
        assert_eq!(table.lookup(ip("192.0.2.1")), Hop::Unroutable);
        assert_eq!(table.lookup(ip("10.9.1.1")), Hop::Out(1));
        assert_eq!(table.lookup(ip("10.9.7.1")), Hop::Out(0));
        let with_default = Routes {
            default: Some(1),
            ..routes.clone()
        };
        let table = RouteTable::new(&with_default, 2).unwrap();
        assert_eq!(table.lookup(ip("192.0.2.1")), Hop::Out(1));
        assert!(RouteTable::new(&routes, 1).is_err(), "interface 1 of 1");
    }
}
