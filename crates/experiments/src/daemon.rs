//! A middle system as a daemon on a real router (`pepkit middle`): one way
//! in for every system. The daemon takes the `middle` value a scenario
//! variant writes, reads it with the same code (its settings validated
//! once, by their one declaration), builds it through the same
//! [`System`](crate::systems) trait as a testbed's middle node, with the
//! router in place of a trial ([`Site`]), and runs it on the same
//! middlebox driver ([`emu::driver::MiddleDriver`]) or, for a service of
//! the kernel (the TCP PEP), on the calling thread. What the router gives
//! it — interfaces, neighbours' MACs, routes, its own addresses — is read
//! by [`emu::router`], the same for every system. A new system needs
//! nothing here.

use crate::scenario::Override;
use crate::systems::{Middle, OnTestbed, Placement, Site, Topology, TrialSetup};
use emu::driver::{
    DriverInterface, MAX_SLEEP, Mac, MiddleDriver, MiddleNodeSpec, Periodic, write_table,
};
use emu::{RealClock, router};
use netsim::{Middlebox, Seed};
use quic::QuicConfig;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Why the daemon cannot run (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// What was asked does not fit the system (the command line's fault).
    #[error("{0}")]
    Usage(String),
    /// The router does not fit or a socket failed.
    #[error("{0}")]
    Router(String),
}

impl From<String> for DaemonError {
    fn from(message: String) -> DaemonError {
        DaemonError::Router(message)
    }
}

/// A usage error.
fn usage<T>(message: String) -> Result<T, DaemonError> {
    Err(DaemonError::Usage(message))
}

/// What the router gives the system, and how the daemon runs.
#[derive(Clone, Debug, Default)]
pub struct RouterOptions {
    /// The interfaces the system uses: in the path, the clients' side
    /// first; beside it, those facing the data senders.
    pub interfaces: Vec<String>,
    /// Neighbours' MACs the kernel's table does not hold.
    pub peer_macs: Vec<(String, Mac)>,
    /// The system's address and the targets it may reach.
    pub site: Site,
    /// Seeds the system's randomness (tests only; by default from the OS:
    /// session IDs and connection IDs must not be guessable).
    pub seed: Option<u64>,
    /// Write the counters to the log this often.
    pub stats_every: Option<Duration>,
    /// Stop after this long.
    pub run_for: Option<Duration>,
}

/// Reads a `middle` value: `table`, written as a scenario writes it after
/// `middle =` (`pemi`, `{ kind = "sidekick", interval = "30ms", threshold
/// = 10 }`) or as the body of a table (`kind = "pemi"` lines), or the
/// `middle` of scenario file `file` (of its variant `variant` if that
/// sets one); then the `sets` edits (`PATH=VALUE`, PATH inside the
/// table, as `pepkit run --set` writes them). Validated as a scenario's.
pub fn read_middle(
    table: Option<&str>,
    file: Option<(&Path, Option<&str>)>,
    sets: &[String],
) -> Result<Middle, String> {
    let mut value = match (table, file) {
        (Some(text), None) => parse_table(text)?,
        (None, Some((path, variant))) => from_file(path, variant)?,
        (Some(_), Some(_)) => return Err("give the table or --file, not both".into()),
        (None, None) => {
            return Err("give the system: a `middle` table such as pemi, or --file FILE".into());
        }
    };
    if !sets.is_empty()
        && let toml::Value::String(kind) = &value
    {
        // `pemi` with edits is `{ kind = "pemi", … }`.
        value = toml::Value::Table(toml::Table::from_iter([(
            "kind".to_string(),
            toml::Value::String(kind.clone()),
        )]));
    }
    let mut document = toml::Table::from_iter([("middle".to_string(), value)]);
    for set in sets {
        let edit: Override = format!("middle.{set}")
            .parse()
            .map_err(|e: String| format!("--set {set}: {e}"))?;
        edit.apply(&mut document)
            .map_err(|e| format!("--set {set}: {e}"))?;
    }
    #[derive(serde::Deserialize)]
    struct Document {
        #[serde(deserialize_with = "crate::shorthand::tagged")]
        middle: Middle,
    }
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(toml::Value::Table(document), &mut track);
    let read = <Document as serde::Deserialize>::deserialize(de);
    read.map(|document| document.middle).map_err(|e| {
        let message = e.to_string();
        let first = message.lines().next().unwrap_or_default();
        format!("{}: {first}", track.path())
    })
}

/// `text` as a value (`pemi`, `{ … }`) or as a table's body.
fn parse_table(text: &str) -> Result<toml::Value, String> {
    if let Ok(edit) = format!("middle={}", text.trim()).parse::<Override>() {
        return Ok(edit.value().clone());
    }
    text.parse::<toml::Table>()
        .map(toml::Value::Table)
        .map_err(|e| {
            format!(
                "not a `middle` table: {} (write it as a scenario does, e.g. pemi or \
                 '{{ kind = \"pemi\", alpha = 3 }}')",
                e.message().trim()
            )
        })
}

/// The `middle` of a scenario file, or of its variant `variant`.
fn from_file(path: &Path, variant: Option<&str>) -> Result<toml::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let document: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("{}: {}", path.display(), e.message().trim()))?;
    if let Some(name) = variant {
        let variants = document.get("variant").and_then(toml::Value::as_array);
        let found = variants
            .into_iter()
            .flatten()
            .find(|v| v.get("name").and_then(toml::Value::as_str) == Some(name))
            .ok_or_else(|| format!("{}: no variant named {name:?}", path.display()))?;
        if let Some(middle) = found.get("middle") {
            return Ok(middle.clone());
        }
    }
    document
        .get("middle")
        .cloned()
        .ok_or_else(|| format!("{}: no `middle` there", path.display()))
}

/// 64 bits from the OS's randomness (`/dev/urandom`).
fn os_seed() -> Result<u64, String> {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("reading /dev/urandom: {e}"))?;
    Ok(u64::from_le_bytes(bytes))
}

/// Where the system runs, in words, for the daemon's first log line.
fn describe(middle: &Middle, interfaces: &[String], addr: Option<SocketAddr>) -> String {
    let kind = middle.kind();
    let interfaces = interfaces.join(", ");
    match addr {
        Some(addr) if interfaces.is_empty() => format!("{kind} on {addr}"),
        Some(addr) => format!("{kind} on {interfaces}, its address {}", addr.ip()),
        None => format!("{kind} on {interfaces}"),
    }
}

/// Runs `middle` on this router (the calling thread's network namespace)
/// until `stop` is set or [`RouterOptions::run_for`] has passed; writes
/// its table to `log` whenever `dump` is set (and clears it), and its
/// counters every [`RouterOptions::stats_every`]. Returns the counters:
/// the system's (`system`) and the driver's (`driver`), or the
/// service's.
pub fn run(
    middle: &Middle,
    options: &RouterOptions,
    stop: &Arc<AtomicBool>,
    dump: &AtomicBool,
    log: &mut dyn Write,
) -> Result<serde_json::Value, DaemonError> {
    let system = middle.system();
    system
        .check_settings()
        .or_else(|(field, why)| usage(format!("{field}: {why}")))?;
    let seed = Seed::new(match options.seed {
        Some(seed) => seed,
        None => os_seed()?,
    });
    // What the system needs of the router, checked before anything is
    // read from it (the engine built here is dropped).
    let quic = QuicConfig::new(seed);
    let mut setup = TrialSetup {
        seed,
        quic: &quic,
        flows: &[],
        topology: Topology::Chain,
        tcp: None,
        router: Some(&options.site),
    };
    fits(middle, options, &system.on_testbed(&setup))?;
    let mut site = options.site.clone();
    if site.addr.is_none() && system.address().is_some() {
        site.addr = Some(default_addr(middle, &options.interfaces)?);
    }
    if let Some(addr) = site.addr {
        let own = router::addresses(None).map_err(|e| e.to_string())?;
        if !matches!(addr.ip(), IpAddr::V4(v4) if own.contains(&v4)) {
            return usage(format!(
                "{} is not an IPv4 address of this router (ip -4 addr)",
                addr.ip()
            ));
        }
    }
    setup.router = Some(&site);
    let _ = writeln!(
        log,
        "middle: {}",
        describe(middle, &options.interfaces, site.addr)
    );
    if let Some(run_for) = options.run_for {
        let stop = Arc::clone(stop);
        std::thread::spawn(move || {
            std::thread::sleep(run_for);
            stop.store(true, Ordering::Relaxed);
        });
    }
    match system.on_testbed(&setup) {
        OnTestbed::Router => Ok(serde_json::Value::Null),
        OnTestbed::Server(server) => Ok(server.run(stop, options.stats_every, log)?),
        OnTestbed::Service(service) => {
            let metrics = service.run(Arc::clone(stop), &|| {})?;
            Ok(serde_json::Value::Object(
                metrics
                    .into_iter()
                    .map(|(name, value)| (name, value.into()))
                    .collect(),
            ))
        }
        OnTestbed::Engine {
            engine,
            placement,
            local,
        } => {
            let frames = matches!(placement, Placement::Beside) && !local.is_empty();
            let spec = node_spec(options, placement, local)?;
            let driver =
                MiddleDriver::open(spec, engine, RealClock::start()).map_err(|e| match e {
                    emu::driver::DriverError::NotRoot => format!("{e} (run as root)"),
                    _ => e.to_string(),
                })?;
            if frames {
                // How the driver sends the engine's own datagrams (beside.rs).
                let _ = writeln!(
                    log,
                    "middle: datagrams from its own address leave as Ethernet frames on a \
                     packet socket where the kernel's tables name the next hop (else from \
                     its UDP socket); the counters' sent_as_frames counts them"
                );
            }
            Ok(drive(middle, driver, options.stats_every, stop, dump, log)?)
        }
    }
}

/// Whether the router's interfaces fit where the system sits.
fn fits(middle: &Middle, options: &RouterOptions, built: &OnTestbed) -> Result<(), DaemonError> {
    let kind = middle.kind();
    let given = options.interfaces.len();
    match built {
        OnTestbed::Router => usage(
            "a plain router runs nothing: the kernel forwards (name a system, such as pemi)".into(),
        ),
        OnTestbed::Service(_) if given > 0 => usage(format!(
            "{kind} is a service of the kernel: --iface does not apply"
        )),
        OnTestbed::Server(_) if given > 0 => usage(format!(
            "{kind} runs on sockets of its own: --iface does not apply (give --addr)"
        )),
        OnTestbed::Engine {
            placement: Placement::InPath,
            ..
        } if given < 2 => usage(format!(
            "{kind} sits in the path: give --iface twice or more, the clients' side first"
        )),
        OnTestbed::Engine {
            placement: Placement::Beside,
            ..
        } if given == 0 => usage(format!(
            "{kind} watches the path beside it: give --iface, facing the data senders"
        )),
        OnTestbed::Engine {
            placement: Placement::OwnSockets,
            ..
        } if given > 0 => usage(format!(
            "{kind} runs on sockets of its own: --iface does not apply (give --addr)"
        )),
        _ => Ok(()),
    }
}

/// The system's address when none is given: the first IPv4 address of the
/// first interface.
fn default_addr(middle: &Middle, interfaces: &[String]) -> Result<SocketAddr, DaemonError> {
    let Some(first) = interfaces.first() else {
        return usage(format!(
            "{} needs an address of its own: give --addr IP[:PORT]",
            middle.kind()
        ));
    };
    let addrs = router::addresses(Some(first)).map_err(|e| e.to_string())?;
    match addrs.first() {
        Some(&ip) => Ok(SocketAddr::new(ip.into(), 0)),
        None => usage(format!(
            "{first} has no IPv4 address: give --addr IP[:PORT]"
        )),
    }
}

/// The middle node as the driver runs it: the router's interfaces as the
/// system's placement needs them.
fn node_spec(
    options: &RouterOptions,
    placement: Placement,
    local: Vec<SocketAddr>,
) -> Result<MiddleNodeSpec, DaemonError> {
    let names = &options.interfaces;
    let (interfaces, placement) = match placement {
        Placement::InPath => {
            let interfaces =
                router::wired_interfaces(names, &options.peer_macs).map_err(|e| e.to_string())?;
            let routes = router::routes(names).map_err(|e| e.to_string())?;
            (interfaces, emu::driver::Placement::InPath { routes })
        }
        Placement::Beside => {
            let sniff = (0..names.len()).collect();
            let interfaces = names.iter().map(DriverInterface::sniffed).collect();
            (interfaces, emu::driver::Placement::Beside { sniff })
        }
        Placement::OwnSockets => {
            let sniff = Vec::new();
            (Vec::new(), emu::driver::Placement::Beside { sniff })
        }
    };
    let local = OnTestbed::ipv4(local);
    Ok(MiddleNodeSpec {
        interfaces,
        placement,
        local,
    })
}

/// The driver's loop until `stop`, with the table on `dump` and the
/// periodic counters.
fn drive(
    middle: &Middle,
    mut driver: MiddleDriver<Box<dyn Middlebox>>,
    stats_every: Option<Duration>,
    stop: &AtomicBool,
    dump: &AtomicBool,
    log: &mut dyn Write,
) -> Result<serde_json::Value, String> {
    let system = middle.system();
    let mut periodic = Periodic::new(stats_every);
    let report = |driver: &mut MiddleDriver<Box<dyn Middlebox>>| {
        let now = driver.clock().now();
        serde_json::json!({
            "system": system.stats(driver.engine().as_ref(), now),
            "driver": driver.stats(),
        })
    };
    while !stop.load(Ordering::Relaxed) && !emu::sys::interrupt::requested() {
        let now = driver.clock().now();
        if dump.swap(false, Ordering::Relaxed)
            && let Some((rows, lines)) = system.table(driver.engine().as_ref(), now)
        {
            write_table(log, middle.kind(), rows, now, &lines);
        }
        periodic.write_if_due(now, log, || report(&mut driver));
        driver.turn(MAX_SLEEP).map_err(|e| e.to_string())?;
    }
    Ok(report(&mut driver))
}
