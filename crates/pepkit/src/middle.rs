//! `pepkit middle`: any middle system as a daemon on a real router, from
//! the `middle` table a scenario variant writes (`experiments::daemon`).
//!
//! SIGUSR1 writes the system's table to standard error; SIGTERM or SIGINT
//! stops the daemon, which then prints its counters as one JSON line on
//! standard output and exits 0. A bad command line or table exits 2, a
//! router that does not fit (no such interface, not root) 1.

use experiments::daemon::{self, RouterOptions};
use experiments::systems::{Site, catalogue};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `pepkit middle`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The system, as a scenario writes it after `middle =`: pemi, split,
    /// pep, forward, or a table such as '{ kind = "sidekick", interval =
    /// "30ms", threshold = 10 }'.
    #[arg(value_name = "TABLE", required_unless_present = "file")]
    table: Option<String>,
    /// Take the `middle` of this scenario file instead.
    #[arg(long, value_name = "FILE", conflicts_with = "table")]
    file: Option<PathBuf>,
    /// With --file: the `middle` of this variant (if it sets one).
    #[arg(long, value_name = "NAME", requires = "file")]
    variant: Option<String>,
    /// Edit the table (repeatable, in order): PATH a field of it such as
    /// alpha or strawman.size, VALUE as `pepkit run --set` reads it.
    #[arg(long, value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// An interface the system uses: in the path (pemi, split, forward)
    /// give it twice or more, the clients' side first; beside the path
    /// (sidekick) the one facing the data senders.
    #[arg(long = "iface", value_name = "IF")]
    interfaces: Vec<String>,
    /// The MAC of the neighbour on IF, where the kernel's neighbour table
    /// has none or several.
    #[arg(long, value_name = "IF=MAC", value_parser = peer_mac)]
    peer_mac: Vec<(String, emu::driver::Mac)>,
    /// The system's own address on this router (Sidekick's control
    /// address, PEMI's probe source, the tunnel server's listening
    /// address); PORT defaults to the system's [default: the first address
    /// of the first --iface].
    #[arg(long, value_name = "IP[:PORT]", value_parser = address)]
    addr: Option<SocketAddr>,
    /// A target the tunnel server may lead to: IP, IP:PORT or IP:LOW-HIGH
    /// (IPv6 in brackets); repeat for more [default: none, every request
    /// refused].
    #[arg(long, value_name = "RULE", value_parser = tunnel::AllowList::parse_rule)]
    allow: Vec<(IpAddr, std::ops::RangeInclusive<u16>)>,
    /// Worker threads of a server that runs several (the tunnel server),
    /// each with a socket of its own on the address [default: one per
    /// core the daemon may run on].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..))]
    workers: Option<u8>,
    /// Enter this network namespace (`ip netns`) first.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Log the counters to stderr every this many seconds [default: only
    /// at exit].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    stats_every: Option<f64>,
    /// Stop after this many seconds [default: run until signalled].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    seconds: Option<f64>,
    /// Seed the system's randomness, for tests only [default: from the
    /// OS; session and connection IDs must not be guessable].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
}

/// `IF=aa:bb:cc:dd:ee:ff`.
fn peer_mac(text: &str) -> Result<(String, emu::driver::Mac), String> {
    let (name, mac) = text
        .split_once('=')
        .ok_or_else(|| format!("{text}: expected IF=MAC"))?;
    let mac = emu::router::parse_mac(mac).ok_or_else(|| format!("{mac}: not a MAC address"))?;
    Ok((name.to_string(), mac))
}

/// `IP` or `IP:PORT` (port 0: the system's default).
fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>()
        .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 0)))
        .map_err(|_| format!("{text}: expected IP or IP:PORT"))
}

/// A positive, finite number of seconds.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s < 1e9 => Ok(s),
        _ => Err(format!("{text}: not a positive number of seconds")),
    }
}

/// What `pepkit middle --help` says after the options: every system and
/// its settings, with their defaults, from their one declaration.
pub(crate) fn settings_help() -> String {
    let mut text = String::from(
        "Systems and their settings (a scenario's `middle` table; default in brackets):\n",
    );
    for entry in catalogue() {
        text.push_str(&format!("\n  {}: {}\n", entry.kind, entry.what));
        for setting in entry.settings {
            let default = setting.default.map_or(String::new(), |d| format!(" [{d}]"));
            text.push_str(&format!(
                "      {}{default}: {}\n",
                setting.name, setting.doc
            ));
        }
    }
    text.push_str(
        "\nSignals: SIGUSR1 writes the system's table to stderr; SIGTERM or SIGINT stops it, \
         and it prints its counters as one JSON line on stdout. In the path the kernel's \
         forwarding is off on the interfaces while it runs. Needs root for packet sockets \
         and for ports below 1024 (the tunnel server opens no packet socket).",
    );
    text
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let file = args
        .file
        .as_deref()
        .map(|path| (path, args.variant.as_deref()));
    let middle = match daemon::read_middle(args.table.as_deref(), file, &args.set) {
        Ok(middle) => middle,
        Err(e) => {
            eprintln!("middle: {e}");
            return ExitCode::from(2);
        }
    };
    let options = RouterOptions {
        interfaces: args.interfaces.clone(),
        peer_macs: args.peer_mac.clone(),
        site: Site {
            addr: args.addr,
            allow: args.allow.clone(),
            workers: args.workers.map(usize::from),
        },
        seed: args.seed,
        stats_every: args.stats_every.map(Duration::from_secs_f64),
        run_for: args.seconds.map(Duration::from_secs_f64),
    };
    if let Some(netns) = &args.netns
        && let Err(e) = emu::sys::enter_netns(netns)
    {
        let why = if e.kind() == std::io::ErrorKind::PermissionDenied {
            "needs root".to_string()
        } else {
            e.to_string()
        };
        eprintln!("middle: entering network namespace {netns}: {why}");
        return ExitCode::FAILURE;
    }
    let (stop, dump) = match crate::daemon::stop_and_dump_flags() {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("middle: {e}");
            return ExitCode::FAILURE;
        }
    };
    match daemon::run(&middle, &options, &stop, &dump, &mut std::io::stderr()) {
        Err(daemon::DaemonError::Usage(e)) => {
            eprintln!("middle: {e}");
            ExitCode::from(2)
        }
        outcome => crate::daemon::report("middle", outcome),
    }
}
