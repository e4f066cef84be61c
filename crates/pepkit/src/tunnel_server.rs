//! `pepkit tunnel-server`: the TECC / MASQUE tunnel server as a daemon on
//! UDP sockets of this host (the engine the simulator runs on its middle
//! node, `tunnel::TunnelServer`, driven by `emu::HostDriver`).
//!
//! It answers extended CONNECT (`:protocol = connect-udp`) for the targets
//! `--allow` names and refuses every other with 403: with no `--allow` it
//! forwards nowhere (never an open proxy). SIGTERM or SIGINT stops it; it
//! then prints its counters as one JSON line on standard output and exits 0.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use emu::{HostDriver, RealClock, RunUntil};
use netsim::{Seed, Time};
use tunnel::{
    AllowList, Mode, RateSource, ServerHost, ServerShared, TunnelServer, TunnelServerConfig,
    TunnelSettings, UriTemplate,
};

/// Options of `pepkit tunnel-server`.
#[derive(clap::Args)]
#[command(
    after_help = "SIGTERM or SIGINT stops the daemon, which prints its counters as \
one JSON line on stdout and exits 0.\n\
Security: it presents pepkit's public test certificate (Ed25519, CN \"pepkit.test\") and \
seeds its TLS randomness from 64 bits of OS randomness: it is a research tool for \
testbeds, not a production proxy."
)]
pub(crate) struct Args {
    /// The address to listen on (UDP); targets are reached from this IP.
    #[arg(long, value_name = "IP:PORT")]
    listen: SocketAddr,
    /// A target the tunnel may lead to: IP, IP:PORT or IP:LOW-HIGH (IPv6 in
    /// brackets); repeat for more. Requests for other targets get 403
    /// [default: none, so every request is refused].
    #[arg(long, value_name = "RULE", value_parser = AllowList::parse_rule)]
    allow: Vec<(std::net::IpAddr, std::ops::RangeInclusive<u16>)>,
    /// How packets from targets go to the client: datagram (MDT, as
    /// masque-go expects), rdatagram (RMDT: resent when lost), stream (MST),
    /// forwarding (MFT), tecc (RMDT with TECC's feedback).
    #[arg(long, value_name = "MODE", default_value = "datagram", value_parser = mode)]
    mode: (Mode, bool),
    /// The tunnel connection's congestion control: none, cubic or bbr.
    #[arg(long, value_name = "CC", default_value = "none", value_parser = tunnel_cc)]
    tunnel_cc: cc::Controller,
    /// With --mode tecc, what the feedback reports as the tunnel's rate Tr:
    /// pacing (the tunnel controller's pacing rate, the paper's reading) or
    /// sent (the datagram bytes that left the tunnel over the cycle).
    #[arg(long, value_name = "RATE", default_value_t = RateSource::default(),
          value_parser = |text: &str| text.parse::<RateSource>())]
    tunnel_rate: RateSource,
    /// The URI template requests must match.
    #[arg(long, value_name = "TEMPLATE", default_value = tunnel::connect_udp::DEFAULT_TEMPLATE)]
    template: String,
    /// The tunnel connection's UDP payload size (1250-1452).
    #[arg(long, value_name = "BYTES", default_value_t = 1350,
          value_parser = clap::value_parser!(u16).range(1250..=1452))]
    outer_payload: u16,
    /// The first of the target-facing ports (16 per client connection).
    #[arg(long, value_name = "PORT", default_value_t = 20_000)]
    first_port: u16,
    /// Stop after this many seconds [default: run until signalled].
    #[arg(long, value_name = "SECONDS")]
    seconds: Option<f64>,
    /// Seed of the endpoint's randomness, for tests only [default: from
    /// the OS].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Enter this network namespace (`ip netns`) first.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
}

fn mode(text: &str) -> Result<(Mode, bool), String> {
    Ok(match text {
        "datagram" => (Mode::Datagram, false),
        "rdatagram" => (Mode::RetransmittedDatagram, false),
        "stream" => (Mode::Stream, false),
        "forwarding" => (Mode::Forwarding, false),
        "tecc" => (Mode::RetransmittedDatagram, true),
        _ => {
            return Err(format!(
                "{text}: one of datagram, rdatagram, stream, forwarding, tecc"
            ));
        }
    })
}

fn tunnel_cc(text: &str) -> Result<cc::Controller, String> {
    Ok(match text {
        "none" => cc::Controller::None,
        "cubic" => cc::Controller::Cubic,
        "bbr" => cc::Controller::Bbr,
        _ => return Err(format!("{text}: one of none, cubic, bbr")),
    })
}

/// 64 bits from the OS's randomness (std's hasher keys).
fn os_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.finish()
}

impl Args {
    /// The tunnel's settings from `--mode` and `--tunnel-rate`.
    fn settings(&self) -> Result<TunnelSettings, String> {
        let (mode, feedback) = self.mode;
        if self.tunnel_rate != RateSource::default() && !feedback {
            return Err("--tunnel-rate applies to --mode tecc only".into());
        }
        let mut settings = TunnelSettings::new(mode);
        settings.feedback = feedback;
        settings.sampler.rate = self.tunnel_rate;
        Ok(settings)
    }

    fn server(&self) -> Result<TunnelServer, String> {
        let template = UriTemplate::new(&self.template)?;
        let allow = self
            .allow
            .iter()
            .fold(AllowList::default(), |list, (ip, ports)| {
                list.allow(*ip, ports.clone())
            });
        let settings = self.settings()?;
        let seed = Seed::new(self.seed.unwrap_or_else(os_seed));
        let clock = quic::SimClock::new();
        let built = self
            .tunnel_cc
            .build(&cc::ControllerContext::new(seed, clock));
        let base = quic::QuicConfig::new(seed)
            .with_controller(built.factory)
            .with_clock(clock);
        let quic = tunnel::outer_config(base, self.outer_payload);
        Ok(TunnelServer::new(TunnelServerConfig {
            addr: self.listen,
            quic,
            shared: ServerShared {
                settings,
                template,
                allow: Arc::new(allow),
                sample_interval: None,
            },
            first_port: self.first_port,
        }))
    }
}

pub(crate) fn run(args: &Args) -> ExitCode {
    if let Some(netns) = &args.netns
        && let Err(e) = emu::sys::enter_netns(netns)
    {
        eprintln!("tunnel-server: entering network namespace {netns}: {e}");
        return ExitCode::FAILURE;
    }
    if args.allow.is_empty() {
        eprintln!("tunnel-server: no --allow given: every request will be refused (403)");
    }
    let server = match args.server() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("tunnel-server: {e}");
            return ExitCode::from(2);
        }
    };
    let stop = match crate::daemon::stop_flag() {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("tunnel-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let driver = match HostDriver::bind(ServerHost::new(server), &[args.listen]) {
        Ok(driver) => driver,
        Err(e) => {
            eprintln!("tunnel-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("tunnel-server: listening on {}", args.listen);
    let clock = RealClock::start();
    let deadline = args
        .seconds
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Time::MAX, |s| Time::ZERO + Duration::from_secs_f64(s));
    match driver.run(clock, RunUntil::Stopped, deadline, &stop) {
        Ok(run) => {
            let stats = run.host.server().stats();
            let sum = |f: &dyn Fn(&tunnel::ServerStats) -> u64| stats.iter().map(f).sum::<u64>();
            println!(
                "{{\"connections\":{},\"tunnels\":{},\"refused\":{},\"forbidden\":{},\"to_targets\":{},\"from_targets\":{},\"retransmitted\":{},\"received\":{},\"sent\":{}}}",
                stats.len(),
                sum(&|s| s.tunnels),
                sum(&|s| s.refused),
                sum(&|s| s.forbidden),
                sum(&|s| s.to_targets),
                sum(&|s| s.from_targets),
                sum(&|s| s.sender.retransmitted),
                run.stats.received,
                run.stats.sent,
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tunnel-server: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn settings(extra: &[&str]) -> Result<TunnelSettings, String> {
        let argv = ["tunnel-server", "--listen", "127.0.0.1:4443"];
        let cli = Cli::try_parse_from(argv.iter().chain(extra)).map_err(|e| e.to_string())?;
        cli.args.settings()
    }

    #[test]
    fn tunnel_rate_defaults_to_pacing_and_reaches_the_sampler() {
        let tecc = settings(&["--mode", "tecc"]).unwrap();
        assert_eq!(tecc.sampler.rate, RateSource::Pacing);
        let sent = settings(&["--mode", "tecc", "--tunnel-rate", "sent"]).unwrap();
        assert_eq!(sent.sampler.rate, RateSource::Sent);
        assert!(sent.feedback);
        assert!(settings(&["--mode", "tecc", "--tunnel-rate", "bytes"]).is_err());
        assert!(settings(&["--mode", "datagram", "--tunnel-rate", "sent"]).is_err());
    }
}
