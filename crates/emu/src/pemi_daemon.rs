//! PEMI as a daemon in a real Linux router's path (`pepkit pemi`).
//!
//! The router's kernel does not forward on the daemon's interfaces while
//! it runs: the generic middlebox driver in path ([`crate::driver`],
//! [`Placement::InPath`]) receives every frame on them with `AF_PACKET`,
//! decrements the TTL, hands UDP (and the ICMP echo replies addressed to
//! the router) to the engine ([`pemi::Pemi`], the simulator's), and sends
//! what the engine emits — every datagram at once and unchanged, replies
//! later when PEMI enforces a rate, its retransmissions and ICMP probes —
//! as Ethernet frames to the neighbour on the way to each destination.
//! What is not UDP (ARP, TCP, other ICMP, IPv6, fragments) is passed
//! through unchanged at once.
//!
//! Why in path and not with nft `tproxy` (the paper's prototype): tproxy
//! hands the daemon UDP payloads on a socket and the kernel builds the
//! packets it sends, which rewrites TTL and IP ID and cannot send a
//! byte-identical copy from the original source without extra spoofing
//! rules; in path, PEMI sees and emits whole packets and the kernel's
//! forwarding stays out of the way (docs/pemi.md).
//!
//! What the daemon takes from the router: each interface's MAC (sysfs),
//! its neighbour's (given, or the one complete entry of the kernel's
//! neighbour table on that interface), the kernel's IPv4 routes (host and
//! network routes and a default, `ip -4 route`), and its own addresses
//! (`ip -4 addr`), which are left to the kernel but for the echo replies
//! to PEMI's probes. The daemon's own: its settings, the connection-table
//! dump ([`PemiDaemon::dump`], on SIGUSR1), the periodic and final
//! counters ([`PemiDaemonStats`]).

use crate::RealClock;
use crate::driver::{
    DriverError, DriverInterface, Mac, MiddleDriver, MiddleNodeSpec, MiddleStats, Periodic,
    Placement, Routes, run_until_stopped, write_table,
};
use crate::sys::command::ip;
use pemi::{ConnSummary, Pemi, PemiConfig, PemiStats};
use serde::Serialize;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The longest the daemon sleeps without looking at its flags.
pub const MAX_SLEEP: Duration = crate::driver::MAX_SLEEP;

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct PemiDaemonConfig {
    /// The interfaces in the path, the clients' side first (PEMI tells the
    /// ends of a connection apart by its handshake, not by interface).
    pub interfaces: Vec<String>,
    /// Each interface's neighbour MAC, if given (else from the neighbour
    /// table).
    pub peer_macs: Vec<Option<Mac>>,
    /// The engine's settings (its probe address must be one of the
    /// router's).
    pub pemi: PemiConfig,
    /// Write the counters to the log this often (`None`: only at exit).
    pub stats_every: Option<Duration>,
}

/// What the daemon counted: the engine's counters (flattened in JSON) and
/// the driver's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PemiDaemonStats {
    /// The engine's counters.
    #[serde(flatten)]
    pub pemi: PemiStats,
    /// The driver's.
    pub driver: MiddleStats,
}

/// Why the daemon cannot run.
#[derive(Debug, thiserror::Error)]
pub enum PemiDaemonError {
    /// The driver could not open.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// Reading the router's configuration failed.
    #[error("{0}")]
    Router(String),
}

/// The daemon with its sockets open, ready to run.
pub struct PemiDaemon {
    driver: MiddleDriver<Pemi>,
    /// When the counters are next written (Copy: `stats()` needs `self`).
    periodic: Periodic,
}

/// An interface's MAC from sysfs.
fn own_mac(name: &str) -> Result<Mac, PemiDaemonError> {
    let path = format!("/sys/class/net/{name}/address");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| PemiDaemonError::Router(format!("{path}: {e} (no interface {name}?)")))?;
    parse_mac(text.trim()).ok_or_else(|| PemiDaemonError::Router(format!("{path}: not a MAC")))
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

/// The one complete neighbour entry on `device` in `/proc/net/arp`
/// (columns: IP, HW type, flags, HW address, mask, device).
pub fn neighbour_mac(arp: &str, device: &str) -> Result<Mac, String> {
    let macs: Vec<Mac> = arp
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let complete = fields.get(2).is_some_and(|f| *f != "0x0");
            (fields.get(5) == Some(&device) && complete)
                .then(|| fields.get(3).and_then(|m| parse_mac(m)))
                .flatten()
        })
        .collect();
    match macs.as_slice() {
        [mac] => Ok(*mac),
        [] => Err(format!(
            "no neighbour on {device} in the ARP table: give --peer-mac {device}=MAC"
        )),
        _ => Err(format!(
            "several neighbours on {device}: give --peer-mac {device}=MAC"
        )),
    }
}

/// The routes of `ip -o -4 route show` for the daemon's `interfaces`:
/// host routes, networks and the default (others are ignored).
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

impl PemiDaemon {
    /// Reads the router's configuration and opens the sockets in the
    /// current network namespace; the daemon's clock starts now.
    pub fn open(config: &PemiDaemonConfig) -> Result<PemiDaemon, PemiDaemonError> {
        if config.interfaces.len() < 2 {
            return Err(PemiDaemonError::Router(
                "PEMI sits in the path: give two interfaces or more".into(),
            ));
        }
        let arp = std::fs::read_to_string("/proc/net/arp").unwrap_or_default();
        let mut interfaces = Vec::new();
        for (i, name) in config.interfaces.iter().enumerate() {
            let peer = match config.peer_macs.get(i).copied().flatten() {
                Some(mac) => mac,
                None => neighbour_mac(&arp, name).map_err(PemiDaemonError::Router)?,
            };
            interfaces.push(DriverInterface::wired(name, own_mac(name)?, peer));
        }
        let router = |what: &str, e: crate::sys::command::CommandError| {
            PemiDaemonError::Router(format!("reading the {what}: {e}"))
        };
        let routes_text = ip(&["-o", "-4", "route", "show"]).map_err(|e| router("routes", e))?;
        let addrs_text = ip(&["-o", "-4", "addr", "show"]).map_err(|e| router("addresses", e))?;
        let mut routes = parse_routes(&routes_text, &config.interfaces);
        routes.local = parse_addresses(&addrs_text);
        if let Some(IpAddr::V4(probe)) = config.pemi.probe_addr
            && !routes.local.contains(&probe)
        {
            return Err(PemiDaemonError::Router(format!(
                "the probe address {probe} is not an address of this router"
            )));
        }
        let spec = MiddleNodeSpec {
            interfaces,
            placement: Placement::InPath { routes },
            local: Vec::new(),
        };
        let engine = Pemi::new(PemiConfig {
            record: false,
            ..config.pemi.clone()
        });
        let mut driver = MiddleDriver::open(spec, engine, RealClock::start())?;
        driver.time_engine_cpu();
        Ok(PemiDaemon {
            driver,
            periodic: Periodic::new(config.stats_every),
        })
    }

    /// Runs until `stop` is set; writes the connection table to `log`
    /// whenever `dump` is set (and clears it), and the counters every
    /// [`PemiDaemonConfig::stats_every`]. Returns the counters.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        dump: &AtomicBool,
        mut log: impl Write,
    ) -> Result<PemiDaemonStats, PemiDaemonError> {
        let cpu_start = crate::sys::thread_cpu_time().ok();
        run_until_stopped(&mut self, stop, dump, &mut log, Self::dump, Self::turn)?;
        let mut stats = self.stats();
        if let (Some(start), Ok(end)) = (cpu_start, crate::sys::thread_cpu_time()) {
            stats.driver.cpu_ns = u64::try_from((end - start).as_nanos()).unwrap_or(u64::MAX);
        }
        Ok(stats)
    }

    /// One turn of the driver's loop ([`MiddleDriver::turn`]), with the
    /// periodic counters written to `log` when due.
    fn turn(&mut self, log: &mut dyn Write) -> Result<(), PemiDaemonError> {
        let now = self.driver.clock().now();
        let mut periodic = self.periodic;
        periodic.write_if_due(now, log, || self.stats());
        self.periodic = periodic;
        self.driver.turn(MAX_SLEEP)?;
        Ok(())
    }

    /// The counters now (reads the kernel's drop counters).
    pub fn stats(&mut self) -> PemiDaemonStats {
        PemiDaemonStats {
            driver: self.driver.stats(),
            pemi: *self.driver.engine().stats(),
        }
    }

    /// The connection table now.
    pub fn connections(&self) -> Vec<ConnSummary> {
        self.driver.engine().connections(self.driver.clock().now())
    }

    /// Writes the connection table to `log`: a header line, then one JSON
    /// line per connection.
    pub fn dump(&mut self, log: &mut dyn Write) {
        let connections = self.connections();
        let lines: Vec<String> = connections
            .iter()
            .map(|conn| serde_json::to_string(conn).unwrap_or_default())
            .collect();
        write_table(
            log,
            "pemi",
            "connections",
            self.driver.clock().now(),
            &lines,
        );
    }

    /// Stops the daemon: the engine, with everything it counted.
    pub fn into_engine(self) -> Pemi {
        self.driver.into_parts().0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routers_tables_parse() {
        let arp = "IP address       HW type     Flags       HW address            Mask     Device\n\
                   10.100.0.1       0x1         0x6         02:70:6b:00:00:00     *        eth0\n\
                   10.100.1.2       0x1         0x6         02:70:6b:00:02:01     *        eth1\n\
                   10.100.1.9       0x1         0x0         00:00:00:00:00:00     *        eth1\n";
        assert_eq!(neighbour_mac(arp, "eth0"), Ok([2, 0x70, 0x6b, 0, 0, 0]));
        assert_eq!(neighbour_mac(arp, "eth1"), Ok([2, 0x70, 0x6b, 0, 2, 1]));
        assert!(neighbour_mac(arp, "eth2").is_err());
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
        assert!(
            serde_json::to_value(PemiDaemonStats::default()).unwrap()["retransmissions"].is_u64()
        );
    }
}
