//! `pepkit tcp-pep`: the transparent split-connection TCP PEP (PEPsal-like)
//! as a daemon on a router, the "TCP + PEP" baseline of the papers.

use emu::tcp::pep::{self, TcpPep, TcpPepConfig};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `pepkit tcp-pep`.
#[derive(clap::Args)]
#[command(after_help = "\
Run it as root on the router between the TCP senders and receivers. It installs an nftables \
tproxy ruleset (table pepkit_pep) and policy routing (fwmark 1 -> table 100) in the current \
network namespace, so that every forwarded TCP connection is diverted to it; it splits each one \
in two (the client's leg ends here, the server's leg starts here from the client's own address \
and port) and relays the bytes. The rules are removed on exit.\n\
Signals: SIGTERM or SIGINT stops it; it then prints its counters as one JSON line on stdout.")]
pub(crate) struct Args {
    /// The local port tproxy diverts connections to.
    #[arg(long, default_value_t = pep::DEFAULT_PORT)]
    port: u16,
    /// TCP congestion control of both legs (TCP_CONGESTION; see
    /// /proc/sys/net/ipv4/tcp_available_congestion_control).
    #[arg(long, default_value = "cubic")]
    controller: String,
    /// Connections relayed at once; more are reset and counted as refused.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Seconds without a byte in either direction after which a connection
    /// is closed on both legs.
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
    /// Do not install (or remove) the nftables and routing rules: they are
    /// managed elsewhere.
    #[arg(long)]
    no_rules: bool,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tcp-pep: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: &Args) -> Result<(), String> {
    if args.idle_timeout.is_nan() || args.idle_timeout <= 0.0 {
        return Err("--idle-timeout must be positive".into());
    }
    let config = TcpPepConfig {
        port: args.port,
        congestion: args.controller.clone(),
        max_connections: args.max_connections,
        idle_timeout: Duration::from_secs_f64(args.idle_timeout),
        ..TcpPepConfig::default()
    };
    let stop = crate::daemon::stop_flag()?;
    // The rules first: once the listener is up (what a testbed waits
    // for), every new connection must be diverted to it. A connection
    // that started before the rules would have its later segments
    // diverted to a listener that does not know it, and be reset.
    if !args.no_rules {
        pep::install(args.port).map_err(|e| e.to_string())?;
    }
    let pep = TcpPep::new(config).map_err(|e| e.to_string());
    if pep.is_err() && !args.no_rules {
        let _ = pep::uninstall();
    }
    let pep = pep?;
    eprintln!(
        "tcp-pep: relaying connections diverted to port {}",
        args.port
    );
    let result = pep.run(stop).map_err(|e| e.to_string());
    if !args.no_rules
        && let Err(e) = pep::uninstall()
    {
        eprintln!("tcp-pep: removing the rules: {e}");
    }
    let stats = result?;
    println!(
        "{}",
        serde_json::to_string(&stats).map_err(|e| e.to_string())?
    );
    Ok(())
}
