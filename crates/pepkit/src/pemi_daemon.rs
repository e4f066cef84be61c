//! `pepkit pemi`: PEMI in a real router's path (`emu::pemi_daemon`).
//!
//! SIGUSR1 writes the connection table to standard error; SIGTERM or
//! SIGINT stops the daemon, which then prints its counters as one JSON line
//! on standard output and exits 0.

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use emu::driver::Mac;
use emu::pemi_daemon::{PemiDaemon, PemiDaemonConfig, PemiDaemonError, parse_mac};
use pemi::{Enforcement, PemiConfig};

/// Options of `pepkit pemi`. Defaults are the paper's §6 settings.
#[derive(clap::Args)]
#[command(
    after_help = "PEMI runs in the path: the kernel's forwarding is off on the given \
interfaces while it runs (restored at exit), and the daemon forwards every packet itself — \
unchanged and at once, except the replies of a sender it slows down. It infers losses from the \
timing of the replies and resends each lost packet once, byte-identical.\n\
Signals: SIGUSR1 logs the connection table to stderr (one JSON line per connection); SIGTERM \
or SIGINT stops the daemon, which prints its counters as one JSON line on stdout and exits 0.\n\
Needs root (CAP_NET_RAW, CAP_NET_ADMIN) for its packet sockets and the forwarding sysctls."
)]
pub(crate) struct Args {
    /// An interface in the path, the clients' side first; give it twice
    /// or more. Each neighbour's MAC comes from the ARP table unless
    /// --peer-mac names it.
    #[arg(long = "iface", value_name = "IF", required = true, num_args = 1)]
    interfaces: Vec<String>,
    /// The MAC of the neighbour on IF (for an interface whose ARP table has
    /// none, or several).
    #[arg(long, value_name = "IF=MAC", value_parser = peer_mac)]
    peer_mac: Vec<(String, Mac)>,
    /// The source of PEMI's ICMP echo probes (RTT calibration when a
    /// connection does not spin): an IPv4 address of this router that the
    /// protected hosts route back through it [default: the first address
    /// of the first interface].
    #[arg(long, value_name = "IP")]
    probe_addr: Option<IpAddr>,
    /// No ICMP probes (calibrate from the spin bit alone).
    #[arg(long)]
    no_icmp: bool,
    /// No spin-bit calibration.
    #[arg(long)]
    no_spin: bool,
    /// α: the flowlet timeout is α times the smoothed packet interval.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    alpha: u32,
    /// β: the matching margin is β times the flowlet timeout.
    #[arg(long, value_name = "X", default_value_t = 0.5, value_parser = fraction(10.0))]
    beta: f64,
    /// Packets closer than this are acknowledged as one (µs).
    #[arg(long, value_name = "US", default_value_t = 100)]
    close_interval_us: u64,
    /// N: a flowlet of more packets is not protected.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(2..))]
    max_flowlet: u64,
    /// Retransmit only while retransmissions are at most this share of
    /// the forwarded packets.
    #[arg(long, value_name = "X", default_value_t = 0.1, value_parser = fraction(1.0))]
    retransmit_cap: f64,
    /// Above this reply/sent ratio the receiver acknowledges every packet.
    #[arg(long, value_name = "X", default_value_t = 0.6, value_parser = fraction(1.0))]
    threshold_ratio: f64,
    /// Protected packets left out at the start of the reply ratio.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    threshold_window: u64,
    /// The fresh-RTT width ratio.
    #[arg(long, value_name = "X", default_value_t = 0.8, value_parser = fraction(1.0))]
    width_ratio: f64,
    /// The tail grace in ms (0: the paper's rule alone).
    #[arg(long, value_name = "MS", default_value_t = 25)]
    tail_grace_ms: u64,
    /// No Copa-derived rate control (never withholds retransmissions or
    /// slows replies).
    #[arg(long)]
    no_congestion_control: bool,
    /// How a sender over its target rate is slowed: off, delay, reorder or
    /// both.
    #[arg(long, value_name = "MODE", default_value = "delay", value_parser = enforcement)]
    enforcement: Enforcement,
    /// Connections idle this long are forgotten (s).
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    idle_timeout: u64,
    /// Handshakes not completed within this are forgotten (s).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    handshake_timeout: u64,
    /// The most connections tracked.
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    max_connections: usize,
    /// The most connections in their handshake (a newer Initial evicts the
    /// oldest).
    #[arg(long, value_name = "N", default_value_t = 16_384)]
    max_handshakes: usize,
    /// Bytes buffered for retransmission per connection.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    buffer_per_connection: usize,
    /// Bytes buffered for retransmission in all.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    buffer_total: usize,
    /// Log the counters to stderr every this many seconds [default: only
    /// at exit].
    #[arg(long, value_name = "SECONDS")]
    stats_every: Option<u64>,
    /// Enter this network namespace (`ip netns`) first [default: stay in
    /// the current one].
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
}

/// `IF=aa:bb:cc:dd:ee:ff`.
fn peer_mac(text: &str) -> Result<(String, Mac), String> {
    let (name, mac) = text
        .split_once('=')
        .ok_or_else(|| format!("{text}: expected IF=MAC"))?;
    let mac = parse_mac(mac).ok_or_else(|| format!("{mac}: not a MAC address"))?;
    Ok((name.to_string(), mac))
}

/// A number in `0..=high`.
fn fraction(high: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |text: &str| match text.parse::<f64>() {
        Ok(x) if (0.0..=high).contains(&x) => Ok(x),
        _ => Err(format!("{text}: expected a number in 0..={high}")),
    }
}

fn enforcement(text: &str) -> Result<Enforcement, String> {
    match text {
        "off" => Ok(Enforcement::Off),
        "delay" => Ok(Enforcement::Delay),
        "reorder" => Ok(Enforcement::Reorder),
        "both" => Ok(Enforcement::Both),
        _ => Err(format!("{text}: expected off, delay, reorder or both")),
    }
}

/// Hundredths of `x`.
fn percent(x: f64) -> u64 {
    (x * 100.0).round() as u64
}

impl Args {
    fn config(&self) -> Result<PemiDaemonConfig, String> {
        let probe_addr = match (self.no_icmp, self.probe_addr) {
            (true, _) => None,
            (false, Some(addr)) => Some(addr),
            (false, None) => Some(first_address(&self.interfaces[0])?),
        };
        let pemi = PemiConfig {
            alpha: self.alpha,
            beta_percent: percent(self.beta) as u32,
            close_interval: Duration::from_micros(self.close_interval_us),
            max_flowlet: self.max_flowlet as usize,
            retransmit_cap_percent: percent(self.retransmit_cap),
            threshold_ratio_percent: percent(self.threshold_ratio),
            threshold_window: self.threshold_window,
            width_ratio_percent: percent(self.width_ratio),
            tail_grace: (self.tail_grace_ms > 0).then(|| Duration::from_millis(self.tail_grace_ms)),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            handshake_timeout: Duration::from_secs(self.handshake_timeout),
            max_connections: self.max_connections,
            max_handshakes: self.max_handshakes,
            buffer_per_connection: self.buffer_per_connection,
            buffer_total: self.buffer_total,
            probe_addr,
            spin_calibration: !self.no_spin,
            congestion_control: !self.no_congestion_control,
            enforcement: self.enforcement,
            ..PemiConfig::default()
        };
        let peer_macs = self
            .interfaces
            .iter()
            .map(|name| {
                self.peer_mac
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|&(_, mac)| mac)
            })
            .collect();
        Ok(PemiDaemonConfig {
            interfaces: self.interfaces.clone(),
            peer_macs,
            pemi,
            stats_every: self.stats_every.filter(|&s| s > 0).map(Duration::from_secs),
        })
    }
}

/// The first IPv4 address of `iface`.
fn first_address(iface: &str) -> Result<IpAddr, String> {
    let text = emu::sys::command::ip(&["-o", "-4", "addr", "show", "dev", iface])
        .map_err(|e| format!("reading {iface}'s addresses: {e}"))?;
    emu::pemi_daemon::parse_addresses(&text)
        .first()
        .map(|&a| IpAddr::V4(a))
        .ok_or_else(|| format!("{iface} has no IPv4 address: give --probe-addr or --no-icmp"))
}

pub(crate) fn run(args: &Args) -> ExitCode {
    if args.interfaces.len() < 2 {
        eprintln!("pemi: PEMI sits in the path: give --iface twice (the clients' side first)");
        return ExitCode::from(2);
    }
    if let Some(netns) = &args.netns
        && let Err(e) = emu::sys::enter_netns(netns)
    {
        eprintln!("pemi: entering network namespace {netns}: {e}");
        return ExitCode::FAILURE;
    }
    let (stop, dump) = match crate::daemon::stop_and_dump_flags() {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("pemi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("pemi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let daemon = match PemiDaemon::open(&config) {
        Ok(daemon) => daemon,
        Err(e) => {
            let hint = match e {
                PemiDaemonError::Driver(emu::driver::DriverError::NotRoot) => " (run as root)",
                _ => "",
            };
            eprintln!("pemi: {e}{hint}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "pemi: in the path of {}, probes from {}",
        config.interfaces.join(", "),
        config
            .pemi
            .probe_addr
            .map_or("nowhere (no ICMP)".to_string(), |a| a.to_string())
    );
    crate::daemon::report("pemi", daemon.run(&stop, &dump, std::io::stderr()))
}
