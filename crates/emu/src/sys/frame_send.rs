//! Sending whole Ethernet frames out of an interface from a send-only
//! `AF_PACKET` socket ([`FrameSender`]), and the next hop toward an IPv4
//! address as the kernel's main routing table and neighbour table name it
//! ([`next_hop`]). A frame sent this way skips the kernel's UDP output and
//! routing: the caller built its headers.
//!
//! Like `syscalls.rs`, this module allows `unsafe` for the system calls
//! it wraps (`socket`, `bind`, `ioctl`); each block's arguments are owned
//! values that outlive the call.
#![allow(unsafe_code)]

use super::syscalls::{SendBatch, interface_index, send_mmsg, set_int_option};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// An `AF_PACKET` socket bound to one Ethernet interface with protocol 0,
/// so that it receives nothing: it only sends frames the caller built.
#[derive(Debug)]
pub struct FrameSender {
    fd: OwnedFd,
    mac: [u8; 6],
}

impl FrameSender {
    /// Opens a sender on interface `name` of the current network
    /// namespace with a send buffer of `buffer` bytes. Fails with
    /// [`io::ErrorKind::Unsupported`] if the interface is not Ethernet
    /// (a tunnel or loopback, whose frames have other headers).
    pub fn open(name: &str, buffer: usize) -> io::Result<FrameSender> {
        let index = interface_index(name)?;
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let (hw_type, mac) = hardware_address(fd.as_fd(), name)?;
        if hw_type != libc::ARPHRD_ETHER {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{name} is not an Ethernet interface (ARPHRD {hw_type})"),
            ));
        }
        let size = libc::c_int::try_from(buffer).unwrap_or(libc::c_int::MAX);
        for option in [libc::SO_SNDBUFFORCE, libc::SO_SNDBUF] {
            if set_int_option(fd.as_fd(), libc::SOL_SOCKET, option, size).is_ok() {
                break;
            }
        }
        // SAFETY: an all-zero sockaddr_ll is valid; protocol 0 receives
        // nothing, the index names the interface frames leave from.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = index as i32;
        // SAFETY: `addr` is a valid sockaddr_ll of the given length.
        let ret = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FrameSender { fd, mac })
    }

    /// The interface's MAC address: the source of the frames it sends.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Sends whole frames out of the interface with one `sendmmsg`;
    /// returns how many the kernel took (0 when its queue is full).
    pub fn send_frames(&self, frames: &[Vec<u8>], batch: &mut SendBatch) -> io::Result<usize> {
        send_mmsg(self.fd.as_fd(), frames, None, batch)
    }
}

/// The hardware type (`ARPHRD_*`) and address of interface `name`
/// (`SIOCGIFHWADDR`).
fn hardware_address(fd: BorrowedFd<'_>, name: &str) -> io::Result<(u16, [u8; 6])> {
    // SAFETY: an all-zero ifreq is valid; the name is set below.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= request.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (dst, &b) in request.ifr_name.iter_mut().zip(bytes) {
        *dst = b as libc::c_char;
    }
    // SAFETY: `request` is a valid, NUL-terminated ifreq for the call.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut request) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFHWADDR filled the union's hardware address.
    let hw = unsafe { request.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, &b) in mac.iter_mut().zip(&hw.sa_data) {
        *dst = b as u8;
    }
    Ok((hw.sa_family, mac))
}

/// Where a frame toward an address goes: out of `interface`, to the
/// neighbour with MAC `mac` (the destination itself on its link, else the
/// gateway).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextHop {
    /// The interface's name.
    pub interface: String,
    /// The next hop's MAC address.
    pub mac: [u8; 6],
}

/// The next hop toward `dst` from the calling thread's network namespace:
/// the longest-prefix route of the main table
/// (`/proc/thread-self/net/route`) and its gateway's (or `dst`'s) entry in
/// the neighbour table (`/proc/thread-self/net/arp`), if that entry is
/// complete. `None` when there is no usable route (none, a reject or
/// blackhole route) or the neighbour is not resolved yet; policy routing
/// rules are not consulted.
pub fn next_hop(dst: Ipv4Addr) -> Option<NextHop> {
    let routes = std::fs::read_to_string("/proc/thread-self/net/route").ok()?;
    let arp = std::fs::read_to_string("/proc/thread-self/net/arp").ok()?;
    let (interface, via) = route_to(&routes, dst)?;
    let mac = neighbour(&arp, via, &interface)?;
    Some(NextHop { interface, mac })
}

/// `RTF_UP`, `RTF_GATEWAY` and `RTF_REJECT` of the route table's flags.
const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
const RTF_REJECT: u32 = 0x200;

/// The interface and next-hop address of the longest-prefix route (then
/// the lowest metric) to `dst` in the text of `/proc/net/route`.
fn route_to(table: &str, dst: Ipv4Addr) -> Option<(String, Ipv4Addr)> {
    // Addresses are printed as the in-memory (network-order) word.
    let addr = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let dst_bits = u32::from_be_bytes(dst.octets());
    let mut best: Option<(u32, u32, String, Ipv4Addr, u32)> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (Some(net), Some(gateway), Some(mask)) = (addr(f[1]), addr(f[2]), addr(f[7])) else {
            continue;
        };
        let (Ok(flags), Ok(metric)) = (u32::from_str_radix(f[3], 16), f[6].parse::<u32>()) else {
            continue;
        };
        let (net, mask) = (u32::from_be_bytes(net), u32::from_be_bytes(mask));
        if flags & RTF_UP == 0 || dst_bits & mask != net {
            continue;
        }
        let prefix = mask.count_ones();
        let better = best
            .as_ref()
            .is_none_or(|b| prefix > b.0 || (prefix == b.0 && metric < b.1));
        if better {
            let via = if flags & RTF_GATEWAY != 0 {
                Ipv4Addr::from(gateway)
            } else {
                dst
            };
            best = Some((prefix, metric, f[0].to_string(), via, flags));
        }
    }
    let (_, _, interface, via, flags) = best?;
    (flags & RTF_REJECT == 0 && interface != "*" && interface != "lo").then_some((interface, via))
}

/// `ATF_COM`: a complete neighbour entry.
const ATF_COM: u32 = 0x2;

/// The MAC of `ip` on `interface` in the text of `/proc/net/arp`, if its
/// entry is complete.
fn neighbour(table: &str, ip: Ipv4Addr, interface: &str) -> Option<[u8; 6]> {
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[5] != interface || f[0].parse::<Ipv4Addr>().ok() != Some(ip) {
            continue;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        if flags & ATF_COM == 0 {
            return None;
        }
        let mut mac = [0u8; 6];
        let mut parts = f[3].split(':');
        for byte in &mut mac {
            *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        return Some(mac);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTES: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0100C90A\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t0000C90A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
*\t0001C90A\t00000000\t0201\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth1\t0002C90A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    const ARP: &str = "\
IP address       HW type     Flags       HW address            Mask     Device
10.201.0.1       0x1         0x6         02:70:6b:ca:00:01     *        eth0
10.201.2.7       0x1         0x0         00:00:00:00:00:00     *        eth1
";

    #[test]
    fn routes_pick_the_longest_prefix_and_the_gateway() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        // On the link: the destination itself.
        assert_eq!(
            route_to(ROUTES, ip("10.201.0.9")),
            Some(("eth0".into(), ip("10.201.0.9")))
        );
        // Elsewhere: the default route's gateway.
        assert_eq!(
            route_to(ROUTES, ip("8.8.8.8")),
            Some(("eth0".into(), ip("10.201.0.1")))
        );
        // A blackhole route wins by prefix and refuses.
        assert_eq!(route_to(ROUTES, ip("10.201.1.1")), None);
        assert_eq!(route_to("header only\n", ip("10.201.0.9")), None);
    }

    #[test]
    fn only_complete_neighbours_on_the_interface_count() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            neighbour(ARP, ip("10.201.0.1"), "eth0"),
            Some([0x02, 0x70, 0x6b, 0xca, 0x00, 0x01])
        );
        assert_eq!(neighbour(ARP, ip("10.201.0.1"), "eth1"), None);
        assert_eq!(neighbour(ARP, ip("10.201.2.7"), "eth1"), None);
    }
}
