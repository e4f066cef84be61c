//! `pepkit sidekick-proxy`: the Sidekick proxy as a daemon on a real
//! router's interface (`emu::sidekick_daemon`).
//!
//! SIGUSR1 writes the flow table to standard error; SIGTERM or SIGINT
//! stops the daemon, which then prints its counters as one JSON line on
//! standard output and exits 0.

use std::process::ExitCode;
use std::time::Duration;

use emu::sidekick_daemon::{self, DaemonError, SidekickDaemon, SidekickDaemonConfig};

/// Options of `pepkit sidekick-proxy`.
#[derive(clap::Args)]
#[command(
    after_help = "Signals: SIGUSR1 logs the flow table to stderr; SIGTERM or SIGINT \
stops the daemon, which prints its counters as one JSON line on stdout and exits 0.\n\
Needs root (CAP_NET_RAW) for its packet and raw sockets."
)]
pub(crate) struct Args {
    /// The interface facing the data senders: the daemon watches the
    /// frames that arrive on it (the kernel forwards them).
    #[arg(long, value_name = "IF")]
    iface: String,
    /// The proxy's control address, an IPv4 address of this host:
    /// configure and reset messages arrive here, quACKs leave from here,
    /// and discovery replies name it [default port: 1234].
    #[arg(long, value_name = "IP[:PORT]", value_parser = sidekick_daemon::parse_control_addr)]
    addr: std::net::SocketAddrV4,
    /// The most flows kept; requests beyond it get no reply.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_flows: usize,
    /// A configured flow without packets for this long is forgotten.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = seconds)]
    idle_timeout: f64,
    /// A flow whose sender never configured it is forgotten after this long.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
    unconfigured_timeout: f64,
    /// How many of a flow's latest session IDs are accepted (lost quACKs
    /// do not lock the sender out).
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..))]
    session_window: u16,
    /// The largest quota (quACKs granted and not yet sent) a sender can hold.
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    max_quota: u32,
    /// Send a strawman instead of the power-sum quACK: `echo` (every
    /// identifier, once) or `window:N` (the last N identifiers, 1–255)
    /// [default: the power sum].
    #[arg(long, value_name = "echo|window:N", value_parser = strawman)]
    strawman: Option<quack::Scheme>,
    /// Log the counters to stderr every this many seconds [default: only
    /// at exit].
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    stats_every: Option<f64>,
    /// Seed of the session IDs, for tests only: the IDs are the defence
    /// against reflection [default: from the OS].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Enter this network namespace (`ip netns`) first [default: stay in
    /// the current one].
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
}

/// A non-negative, finite number of seconds.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..1e9).contains(&s) => Ok(s),
        _ => Err(format!("{text}: not a number of seconds")),
    }
}

/// `echo` or `window:N`.
fn strawman(text: &str) -> Result<quack::Scheme, String> {
    if text == "echo" {
        return Ok(quack::Scheme::Echo);
    }
    match text.strip_prefix("window:").map(str::parse::<usize>) {
        Some(Ok(size)) if (1..=255).contains(&size) => Ok(quack::Scheme::Window { size }),
        _ => Err(format!(
            "{text}: expected echo or window:N with N in 1..=255"
        )),
    }
}

impl Args {
    fn config(&self) -> SidekickDaemonConfig {
        let mut config = SidekickDaemonConfig::new(&self.iface, self.addr);
        config.max_flows = self.max_flows;
        config.idle_timeout = Duration::from_secs_f64(self.idle_timeout);
        config.unconfigured_timeout = Duration::from_secs_f64(self.unconfigured_timeout);
        config.session_window = usize::from(self.session_window);
        config.max_quota = self.max_quota;
        config.strawman = self.strawman;
        config.seed = self.seed;
        config.stats_every = self
            .stats_every
            .filter(|&s| s > 0.0)
            .map(Duration::from_secs_f64);
        config
    }
}

pub(crate) fn run(args: &Args) -> ExitCode {
    if let Some(netns) = &args.netns
        && let Err(e) = emu::sys::enter_netns(netns)
    {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            eprintln!("sidekick-proxy: entering network namespace {netns} needs root");
        } else {
            eprintln!("sidekick-proxy: {e}");
        }
        return ExitCode::FAILURE;
    }
    let (stop, dump) = match crate::daemon::stop_and_dump_flags() {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("sidekick-proxy: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = args.config();
    let daemon = match SidekickDaemon::open(&config) {
        Ok(daemon) => daemon,
        Err(e) => {
            let hint = match e {
                DaemonError::NotRoot => " (run as root)",
                DaemonError::NoInterface(_) if args.netns.is_none() => {
                    " (is it in another namespace? --netns NAME)"
                }
                _ => "",
            };
            eprintln!("sidekick-proxy: {e}{hint}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "sidekick-proxy: watching {} for sidekick requests, control address {}",
        config.iface, config.addr
    );
    crate::daemon::report(
        "sidekick-proxy",
        daemon.run(&stop, &dump, std::io::stderr()),
    )
}
