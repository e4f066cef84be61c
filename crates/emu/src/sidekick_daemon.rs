//! The Sidekick proxy as a daemon on a real Linux router
//! (`pepkit sidekick-proxy`).
//!
//! The kernel forwards the traffic; the daemon only watches it. It is the
//! simulator's proxy engine ([`sidekick::SidekickProxy`], forwarding off:
//! [`ProxyConfig::forward`]) on the generic middlebox driver placed beside
//! the path ([`crate::driver`], [`Placement::Beside`]), which feeds it:
//!
//! * every UDP datagram *arriving* on the interface that faces the data
//!   senders, sniffed with an `AF_PACKET` socket (which ignores the host's
//!   own outgoing frames), parsed by [`crate::driver::frame`];
//! * the control messages (configure, reset), from a UDP socket bound to
//!   the proxy's control address (their sniffed copies are skipped);
//!
//! and sends what the engine emits: quACKs from the control socket (their
//! source is the control address), discovery replies — whose source is
//! the *receiver's* address and port, so they cross NATs like the base
//! traffic — from a raw IPv4 socket (`IP_HDRINCL`).
//!
//! What is the daemon's own: the proxy's settings from the command line,
//! the flow-table dump ([`SidekickDaemon::dump`], on SIGUSR1), the
//! periodic and final counters ([`DaemonStats`]: the engine's, the
//! driver's, the flow table's size). The loop (the driver's) sleeps in
//! `ppoll` until the engine's next timer, at most [`MAX_SLEEP`] so that a
//! stop request is seen. Nothing a peer sends stops the daemon: frames
//! that do not parse, send failures and the like are counted. Per-flow
//! state is bounded by the engine (its flow table's size and idle
//! timeouts).
//!
//! The sniffed interface should not coalesce UDP (`rx-udp-gro-forwarding`
//! off, the kernel's default): a coalesced frame holds many datagrams
//! behind one header, and only the first would be counted.

use crate::RealClock;
use crate::driver::{
    DriverError, DriverInterface, MiddleDriver, MiddleNodeSpec, MiddleStats, Periodic, Placement,
    run_until_stopped, write_table,
};
use netsim::{Seed, Time};
use serde::Serialize;
use sidekick::wire::Interval;
use sidekick::{FlowSummary, ProxyConfig, ProxyStats, SidekickProxy};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The control port when none is given.
pub const DEFAULT_PORT: u16 = 1234;
/// The longest the daemon sleeps without looking at its flags.
pub const MAX_SLEEP: Duration = crate::driver::MAX_SLEEP;

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct SidekickDaemonConfig {
    /// The interface facing the data senders; the daemon sees the frames
    /// that arrive on it.
    pub iface: String,
    /// The proxy's control address: an address of this host. Control
    /// messages arrive here, quACKs leave from here, and replies name it.
    pub addr: SocketAddrV4,
    /// The flow table's bound.
    pub max_flows: usize,
    /// A configured flow without packets for this long is forgotten.
    pub idle_timeout: Duration,
    /// A flow never configured is forgotten after this long.
    pub unconfigured_timeout: Duration,
    /// How many of a flow's latest session IDs are accepted.
    pub session_window: usize,
    /// The largest quota a sender can hold.
    pub max_quota: u32,
    /// Send a strawman instead of the power sum (for comparisons).
    pub strawman: Option<quack::Scheme>,
    /// Seeds the session IDs; `None` (the default) takes a seed from the
    /// OS, as a deployment must (session IDs are the reflection defence).
    pub seed: Option<u64>,
    /// Write the counters to the log this often (`None`: never).
    pub stats_every: Option<Duration>,
}

impl SidekickDaemonConfig {
    /// The engine's defaults ([`ProxyConfig::new`]): 4096 flows, 30 s idle
    /// timeout (5 s unconfigured), 8 session IDs, quota at most 2^20, the
    /// power sum; a seed from the OS; no periodic stats.
    pub fn new(iface: impl Into<String>, addr: SocketAddrV4) -> SidekickDaemonConfig {
        let defaults = ProxyConfig::new(SocketAddr::V4(addr), Seed::new(0));
        SidekickDaemonConfig {
            iface: iface.into(),
            addr,
            max_flows: defaults.max_flows,
            idle_timeout: defaults.idle_timeout,
            unconfigured_timeout: defaults.unconfigured_timeout,
            session_window: defaults.session_window,
            max_quota: defaults.max_quota,
            strawman: defaults.strawman,
            seed: None,
            stats_every: None,
        }
    }

    /// The engine's configuration (forwarding off; the seed drawn from the
    /// OS if none was given).
    pub fn proxy_config(&self) -> ProxyConfig {
        let seed = self.seed.unwrap_or_else(os_seed);
        let mut config = ProxyConfig::new(SocketAddr::V4(self.addr), Seed::new(seed));
        config.max_flows = self.max_flows;
        config.idle_timeout = self.idle_timeout;
        config.unconfigured_timeout = self.unconfigured_timeout;
        config.session_window = self.session_window;
        config.max_quota = self.max_quota;
        config.strawman = self.strawman;
        config.forward = false;
        config
    }
}

/// 64 random bits from the OS (`/dev/urandom`); if that fails, the clock
/// and the process ID mixed (never expected on Linux).
fn os_seed() -> u64 {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok()
    {
        return u64::from_le_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Seed::new(nanos ^ u64::from(std::process::id()))
        .derive("sidekick-daemon")
        .value()
}

/// What the daemon counted: the engine's counters (flattened in JSON), the
/// driver's, and the flow table's size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DaemonStats {
    /// The engine's counters.
    #[serde(flatten)]
    pub proxy: ProxyStats,
    /// Frames read from the interface.
    pub frames: u64,
    /// UDP datagrams handed to the engine, sniffed or from the control
    /// socket.
    pub datagrams: u64,
    /// Frames that are not IPv4/UDP (ARP, TCP, IPv6, fragments).
    pub other_frames: u64,
    /// Frames that do not parse (truncated, bad header or checksum).
    pub malformed_frames: u64,
    /// Frames longer than the daemon reads (skipped).
    pub oversize_frames: u64,
    /// Sniffed datagrams whose TTL ran out here (the kernel drops them
    /// too; not handed to the engine).
    pub ttl_expired: u64,
    /// Sniffed datagrams to the control address (the control socket gets
    /// them; not counted twice).
    pub sniffed_control: u64,
    /// Datagrams read from the control socket.
    pub control_datagrams: u64,
    /// Replies and quACKs the kernel refused (full buffer, no route).
    pub send_errors: u64,
    /// Frames the kernel dropped before the daemon read them.
    pub kernel_drops: u64,
    /// Receive errors of the packet socket (the interface went down); the
    /// daemon goes on and sees the frames again once it is back up.
    pub interface_errors: u64,
    /// Turns of the loop (wake-ups): frames per turn says how well
    /// receives are batched.
    pub turns: u64,
    /// Flows in the table when the counters were taken.
    pub flows: usize,
    /// Of those, flows their sender configured.
    pub configured_flows: usize,
}

impl DaemonStats {
    fn new(driver: &MiddleStats, proxy: &SidekickProxy, now: Time) -> DaemonStats {
        DaemonStats {
            proxy: *proxy.stats(),
            frames: driver.frames,
            datagrams: driver.datagrams,
            other_frames: driver.other_frames,
            malformed_frames: driver.malformed_frames,
            oversize_frames: driver.oversize_frames,
            ttl_expired: driver.ttl_expired,
            sniffed_control: driver.sniffed_local,
            control_datagrams: driver.local_datagrams,
            send_errors: driver.send_errors + driver.unroutable,
            kernel_drops: driver.kernel_drops,
            interface_errors: driver.interface_errors,
            turns: driver.turns,
            flows: proxy.flow_count(),
            configured_flows: proxy.flows(now).iter().filter(|f| f.configured()).count(),
        }
    }
}

/// Why the daemon cannot run: the driver's errors ([`DriverError`]).
pub type DaemonError = DriverError;

/// The daemon with its sockets open, ready to run.
pub struct SidekickDaemon {
    driver: MiddleDriver<SidekickProxy>,
    iface: String,
    /// When the counters are next written (Copy: `stats()` needs `self`).
    periodic: Periodic,
}

impl SidekickDaemon {
    /// Opens the sockets in the current network namespace: the packet
    /// socket on `config.iface`, the raw socket, the control socket on
    /// `config.addr`. The daemon's clock starts now.
    pub fn open(config: &SidekickDaemonConfig) -> Result<SidekickDaemon, DaemonError> {
        let spec = MiddleNodeSpec {
            interfaces: vec![DriverInterface::sniffed(&config.iface)],
            placement: Placement::Beside { sniff: vec![0] },
            local: vec![config.addr],
        };
        let proxy = SidekickProxy::new(config.proxy_config());
        let driver = MiddleDriver::open(spec, proxy, RealClock::start())?;
        Ok(SidekickDaemon {
            driver,
            iface: config.iface.clone(),
            periodic: Periodic::new(config.stats_every),
        })
    }

    /// Runs until `stop` is set; writes the flow table to `log` whenever
    /// `dump` is set (and clears it), and the counters every
    /// [`SidekickDaemonConfig::stats_every`]. Returns the counters.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        dump: &AtomicBool,
        mut log: impl Write,
    ) -> Result<DaemonStats, DaemonError> {
        run_until_stopped(
            &mut self,
            stop,
            dump,
            &mut log,
            Self::dump,
            |daemon, log| daemon.turn(MAX_SLEEP, log),
        )?;
        Ok(self.stats())
    }

    /// One turn of the driver's loop ([`MiddleDriver::turn`]), with the
    /// periodic counters written to `log` when due.
    pub fn turn(&mut self, max_sleep: Duration, log: &mut dyn Write) -> Result<(), DaemonError> {
        let now = self.driver.clock().now();
        let mut periodic = self.periodic;
        periodic.write_if_due(now, log, || self.stats());
        self.periodic = periodic;
        let errors = self.driver.counters().interface_errors;
        self.driver.turn(max_sleep)?;
        if self.driver.counters().interface_errors > errors {
            let _ = writeln!(
                log,
                "sidekick-proxy: {} is down; waiting for it",
                self.iface
            );
        }
        Ok(())
    }

    /// The counters now (reads the kernel's drop counter).
    pub fn stats(&mut self) -> DaemonStats {
        let driver = self.driver.stats();
        let now = self.driver.clock().now();
        DaemonStats::new(&driver, self.driver.engine(), now)
    }

    /// The flow table now.
    pub fn flows(&self) -> Vec<FlowSummary> {
        self.driver.engine().flows(self.driver.clock().now())
    }

    /// Writes the flow table to `log`: a header line, then one line per
    /// flow.
    pub fn dump(&mut self, log: &mut dyn Write) {
        let lines: Vec<String> = self.flows().iter().map(flow_line).collect();
        let now = self.driver.clock().now();
        write_table(log, "sidekick-proxy", "flows", now, &lines);
    }

    /// For capacity measurements: with `null` set, frames are received and
    /// parsed but not handed to the engine.
    pub fn set_null(&mut self, null: bool) {
        self.driver.set_null(null);
    }

    /// The daemon's clock.
    pub fn clock(&self) -> RealClock {
        self.driver.clock()
    }

    /// Stops the daemon: the engine, with everything it counted.
    pub fn into_engine(self) -> SidekickProxy {
        self.driver.into_parts().0
    }
}

/// One flow as a log line.
pub fn flow_line(flow: &FlowSummary) -> String {
    let state = match (&flow.config, flow.peer) {
        (Some(c), Some(peer)) => {
            let interval = match c.interval {
                Interval::Packets(n) => format!("{n}pkt"),
                Interval::Millis(ms) => format!("{ms}ms"),
            };
            format!(
                "configured interval={interval} threshold={} id={}B@{} quacks_to={peer}",
                c.threshold, c.id_bytes, c.id_offset
            )
        }
        _ => "unconfigured".to_string(),
    };
    format!(
        "flow {} -> {} {state} quota_left={} epoch={} pending={} idle={:.3}s",
        flow.sender,
        flow.receiver,
        flow.quota_left,
        flow.epoch,
        flow.pending,
        flow.idle.as_secs_f64()
    )
}

/// Opens the daemon ([`SidekickDaemon::open`]) and runs it until `stop`
/// ([`SidekickDaemon::run`]).
pub fn run(
    config: &SidekickDaemonConfig,
    stop: &AtomicBool,
    dump: &AtomicBool,
    log: impl Write,
) -> Result<DaemonStats, DaemonError> {
    SidekickDaemon::open(config)?.run(stop, dump, log)
}

/// Parses `IP[:PORT]` (IPv4; the port defaults to [`DEFAULT_PORT`]).
pub fn parse_control_addr(text: &str) -> Result<SocketAddrV4, String> {
    if let Ok(addr) = text.parse::<SocketAddrV4>() {
        return Ok(addr);
    }
    match text.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(SocketAddrV4::new(ip, DEFAULT_PORT)),
        Ok(IpAddr::V6(_)) => Err(format!("{text}: only IPv4 is supported")),
        Err(_) => Err(format!("{text}: not an IPv4 address, IP or IP:PORT")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_addresses_parse_with_a_default_port() {
        assert_eq!(
            parse_control_addr("10.255.255.1"),
            Ok("10.255.255.1:1234".parse().unwrap())
        );
        assert_eq!(
            parse_control_addr("10.0.0.1:99"),
            Ok("10.0.0.1:99".parse().unwrap())
        );
        assert!(parse_control_addr("::1").is_err());
        assert!(parse_control_addr("nonsense").is_err());
    }

    #[test]
    fn stats_are_one_flat_json_object() {
        let json = serde_json::to_value(DaemonStats::default()).unwrap();
        for key in ["requests", "replies", "quacks", "frames", "kernel_drops"] {
            assert!(json.get(key).is_some(), "{key} in {json}");
        }
    }

    #[test]
    fn the_engine_runs_without_forwarding() {
        let config = SidekickDaemonConfig::new("eth0", "10.255.255.1:1234".parse().unwrap());
        let proxy = config.proxy_config();
        assert!(!proxy.forward);
        assert_eq!(proxy.max_flows, 4096);
        // Two configs without a seed draw different ones.
        assert_ne!(
            config.proxy_config().seed.value(),
            config.proxy_config().seed.value()
        );
    }
}
