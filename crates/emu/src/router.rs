//! What a middle system's daemon takes from the real router it runs on
//! (`pepkit middle`): the interfaces it is given, their MACs and their
//! neighbours', the kernel's IPv4 routes and the router's own addresses —
//! everything the middlebox driver ([`crate::driver`]) needs for a
//! [`MiddleNodeSpec`], read the same way for every system.
//!
//! Everything is read with `ip` (netlink), so it describes the network
//! namespace the calling thread is in — the one `--netns` entered
//! ([`crate::sys::enter_netns`]) — and not the one `/sys` was mounted in.

use crate::driver::{DriverInterface, Mac, Routes};
use crate::sys::command::ip;
use std::net::Ipv4Addr;

/// Why the router's configuration cannot be read or does not fit.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RouterError(String);

/// The router's interfaces for a driver in the path: each with its own MAC
/// and its neighbour's (`peer_macs` first, else the one neighbour the
/// kernel's table holds on it).
pub fn wired_interfaces(
    names: &[String],
    peer_macs: &[(String, Mac)],
) -> Result<Vec<DriverInterface>, RouterError> {
    names
        .iter()
        .map(|name| {
            let own = own_mac(name)?;
            let peer = match peer_macs.iter().find(|(n, _)| n == name) {
                Some(&(_, mac)) => mac,
                None => {
                    let table = read(&["-4", "neigh", "show", "dev", name], "neighbours")?;
                    neighbour_mac(&table, name)?
                }
            };
            Ok(DriverInterface::wired(name, own, peer))
        })
        .collect()
}

/// The kernel's IPv4 routes through `interfaces` and the router's own
/// addresses.
pub fn routes(interfaces: &[String]) -> Result<Routes, RouterError> {
    let mut routes = parse_routes(&read(&["-o", "-4", "route", "show"], "routes")?, interfaces);
    routes.local = addresses(None)?;
    Ok(routes)
}

/// The router's IPv4 addresses, or those of interface `dev`.
pub fn addresses(dev: Option<&str>) -> Result<Vec<Ipv4Addr>, RouterError> {
    let mut args = vec!["-o", "-4", "addr", "show"];
    if let Some(dev) = dev {
        args.extend(["dev", dev]);
    }
    Ok(parse_addresses(&read(&args, "addresses")?))
}

/// `ip ARGS`, its failure said as reading `what`.
fn read(args: &[&str], what: &str) -> Result<String, RouterError> {
    ip(args).map_err(|e| RouterError(format!("reading the {what}: {e}")))
}

/// Interface `name`'s own MAC (`ip -o link show dev NAME`: `link/ether MAC`).
fn own_mac(name: &str) -> Result<Mac, RouterError> {
    let text = ip(&["-o", "link", "show", "dev", name])
        .map_err(|_| RouterError(format!("no interface {name} in this network namespace")))?;
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == "link/ether")
        .and_then(|at| parse_mac(words.get(at + 1)?))
        .ok_or_else(|| RouterError(format!("{name} has no Ethernet address")))
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<Mac> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The one neighbour MAC of `ip -4 neigh show dev DEVICE`
/// (`10.0.0.1 lladdr 02:… REACHABLE`; entries without an address are
/// incomplete or failed).
pub fn neighbour_mac(table: &str, device: &str) -> Result<Mac, RouterError> {
    let mut macs: Vec<Mac> = table
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "lladdr")?;
            parse_mac(words.get(at + 1)?)
        })
        .collect();
    macs.sort_unstable();
    macs.dedup();
    match macs.as_slice() {
        [mac] => Ok(*mac),
        [] => Err(RouterError(format!(
            "no neighbour on {device} in the kernel's table: give --peer-mac {device}=MAC"
        ))),
        _ => Err(RouterError(format!(
            "several neighbours on {device}: give --peer-mac {device}=MAC"
        ))),
    }
}

/// The routes of `ip -o -4 route show` through `interfaces`: host routes,
/// networks and the default (others are ignored).
pub fn parse_routes(text: &str, interfaces: &[String]) -> Routes {
    let mut routes = Routes::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(dev) = words.iter().position(|w| *w == "dev") else {
            continue;
        };
        let Some(out) = words
            .get(dev + 1)
            .and_then(|d| interfaces.iter().position(|i| i == d))
        else {
            continue;
        };
        match words.first().copied() {
            Some("default") => routes.default = Some(out),
            Some(dest) => {
                let (addr, len) = dest.split_once('/').unwrap_or((dest, "32"));
                if let (Ok(addr), Ok(len)) = (addr.parse::<Ipv4Addr>(), len.parse::<u8>()) {
                    if len == 32 {
                        routes.to.push((addr, out));
                    } else if len < 32 {
                        routes.nets.push((addr, len, out));
                    }
                }
            }
            None => {}
        }
    }
    routes
}

/// The addresses of `ip -o -4 addr show` (`N: IF inet A/L …`).
pub fn parse_addresses(text: &str) -> Vec<Ipv4Addr> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "inet")?;
            let addr = words.get(at + 1)?.split('/').next()?;
            addr.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routers_tables_parse() {
        let neighbours = "10.100.0.1 lladdr 02:70:6b:00:00:00 REACHABLE\n\
                          10.100.0.9 FAILED\n\
                          10.100.0.7 lladdr 02:70:6b:00:00:00 STALE\n";
        assert_eq!(
            neighbour_mac(neighbours, "eth0").unwrap(),
            [2, 0x70, 0x6b, 0, 0, 0]
        );
        let two = "10.0.0.1 lladdr 02:00:00:00:00:01 REACHABLE\n\
                   10.0.0.2 lladdr 02:00:00:00:00:02 REACHABLE\n";
        assert!(neighbour_mac(two, "eth1").is_err());
        assert!(neighbour_mac("10.0.0.3 INCOMPLETE\n", "eth2").is_err());
        let routes = "10.0.2.10 dev eth0 scope link \n\
                      10.0.1.0/24 via 10.100.1.2 dev eth1 \n\
                      default via 10.100.1.2 dev eth1 \n\
                      10.7.0.0/16 dev wlan0 scope link \n";
        let names = vec!["eth0".to_string(), "eth1".to_string()];
        let parsed = parse_routes(routes, &names);
        assert_eq!(parsed.to, vec![("10.0.2.10".parse().unwrap(), 0)]);
        assert_eq!(parsed.nets, vec![("10.0.1.0".parse().unwrap(), 24, 1)]);
        assert_eq!(parsed.default, Some(1));
        let addrs = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
                     2: eth0    inet 10.100.0.2/32 scope global eth0\\ valid_lft forever\n";
        assert_eq!(
            parse_addresses(addrs),
            vec![
                "127.0.0.1".parse::<Ipv4Addr>().unwrap(),
                "10.100.0.2".parse().unwrap()
            ]
        );
        assert_eq!(
            parse_mac("02:70:6b:00:00:0a"),
            Some([2, 0x70, 0x6b, 0, 0, 10])
        );
        assert_eq!(parse_mac("02:70:6b:00:00"), None);
    }
}
