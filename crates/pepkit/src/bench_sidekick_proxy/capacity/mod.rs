//! How many packets per second the Sidekick proxy daemon sustains on one
//! core (`pepkit bench sidekick-proxy`).
//!
//! Two network namespaces joined by a plain veth pair (no link emulator,
//! which would be the bottleneck): a generator and the proxy. The proxy's
//! kernel routes the load into a blackhole, so all it does with a packet
//! is the daemon's work. Set-up, with the real protocol: each of F flows
//! sends a discovery request on its own 4-tuple, configures quACKs every N
//! packets from a control port of its own, and — on its first quACK —
//! grants itself a large quota with the session ID that came in it.
//!
//! Then the generator offers a fixed load (small UDP datagrams, random
//! identifiers at offset 21, round robin over the flows, in 1 ms bursts
//! sent with `sendmmsg` on a packet socket) while the daemon's thread
//! alternates phases of the *same* loop (the generic middlebox driver
//! beside the path, [`emu::driver::MiddleDriver::turn`], as `pepkit middle
//! sidekick` runs it):
//! **null** (capture and parse, no engine) and **full** (the engine, with
//! its quACKs sent), in the order null, full, full, null, … so that a
//! drift in the machine's speed affects both alike. For each phase it
//! reads its own thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) and the
//! packets it handled; CPU time per packet gives the packets per second
//! one core sustains, and full ÷ null says what the engine costs.
//!
//! Everything happens inside namespaces this module creates (called
//! `pk-<pid>-cap<n>-…`, so [`emu::sweep_stale`] finds them after a
//! crash); they are removed when the run ends, on error too. The
//! generator's side is in `generator.rs`; here are the namespaces, the
//! proxy thread's phases and the report.

mod generator;

use emu::driver::{
    DriverError, DriverInterface, MAX_SLEEP, MiddleDriver, MiddleNodeSpec, MiddleStats, Placement,
};
use emu::sys::command::{CommandError, in_netns, ip};
use emu::sys::{enter_netns, thread_cpu_time};
use generator::generate;
use netsim::Seed;
use serde::Serialize;
use sidekick::{ProxyConfig, ProxyStats, SidekickProxy};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const GEN_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
const PROXY_IP: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// The proxy daemon's control address.
const PROXY_CONTROL: SocketAddrV4 = SocketAddrV4::new(PROXY_IP, 1234);
/// The load's destination: routed by the generator to the proxy, and by
/// the proxy into a blackhole.
const SINK: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 201, 1, 1), 9);
const GEN_MAC: [u8; 6] = [0x02, 0x70, 0x6b, 0xca, 0x00, 0x01];
const PROXY_MAC: [u8; 6] = [0x02, 0x70, 0x6b, 0xca, 0x00, 0x02];
/// Flow `i` sends from this port + i and takes quACKs on the next block.
const FLOW_PORT: u16 = 30_000;
const CONTROL_PORT: u16 = 40_000;
/// The generator's burst spacing.
const TICK: Duration = Duration::from_millis(1);

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CapacityConfig {
    /// Flows, each configured for quACKs.
    pub(crate) flows: usize,
    /// Each flow asks for a quACK every this many packets.
    pub(crate) interval_packets: u32,
    /// The quACK threshold t.
    pub(crate) threshold: u8,
    /// The offered load, packets per second (keep it at most ~100k on a
    /// small machine).
    pub(crate) rate: u32,
    /// UDP payload bytes per packet (at least 25: identifier at 21..25).
    pub(crate) payload_len: usize,
    /// The length of one phase (`phase_seconds` in JSON).
    #[serde(rename = "phase_seconds", serialize_with = "seconds")]
    pub(crate) phase: Duration,
    /// Rounds; each round is one null and one full phase.
    pub(crate) rounds: u32,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Default for CapacityConfig {
    /// 64 flows quACKed every 32 packets (t = 10), 50 000 packets/s of
    /// 64-byte payloads, 3 rounds of 1.5 s phases.
    fn default() -> CapacityConfig {
        CapacityConfig {
            flows: 64,
            interval_packets: 32,
            threshold: 10,
            rate: 50_000,
            payload_len: 64,
            phase: Duration::from_millis(1500),
            rounds: 3,
        }
    }
}

/// One mode's totals over its phases.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ModeResult {
    /// `null` (capture and parse) or `full` (the engine too).
    pub(crate) mode: &'static str,
    /// Datagrams the loop handled.
    pub(crate) packets: u64,
    /// The loop thread's CPU time.
    pub(crate) cpu_seconds: f64,
    /// Wall-clock time of the phases.
    pub(crate) wall_seconds: f64,
    /// CPU time per packet.
    pub(crate) cpu_ns_per_packet: f64,
    /// Packets per second one core sustains at that cost.
    pub(crate) sustained_pps: f64,
    /// The share of a core the loop used at the offered load.
    pub(crate) core_share: f64,
    /// Frames the kernel dropped before the loop read them.
    pub(crate) kernel_drops: u64,
    /// QuACKs sent.
    pub(crate) quacks: u64,
    /// Turns of the loop (wake-ups).
    pub(crate) turns: u64,
    /// Packets per turn: how well receives were batched.
    pub(crate) packets_per_turn: f64,
}

impl ModeResult {
    fn add(&mut self, packets: u64, cpu: Duration, wall: Duration, drops: u64, quacks: u64) {
        self.packets += packets;
        self.cpu_seconds += cpu.as_secs_f64();
        self.wall_seconds += wall.as_secs_f64();
        self.kernel_drops += drops;
        self.quacks += quacks;
        if self.packets > 0 && self.cpu_seconds > 0.0 {
            self.cpu_ns_per_packet = self.cpu_seconds * 1e9 / self.packets as f64;
            self.sustained_pps = self.packets as f64 / self.cpu_seconds;
        }
        if self.wall_seconds > 0.0 {
            self.core_share = self.cpu_seconds / self.wall_seconds;
        }
    }

    fn add_turns(&mut self, turns: u64) {
        self.turns += turns;
        self.packets_per_turn = self.packets as f64 / self.turns.max(1) as f64;
    }
}

/// The measurement.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CapacityReport {
    /// What was measured.
    pub(crate) config: CapacityConfig,
    /// Flows the proxy had configured when the load started.
    pub(crate) configured_flows: usize,
    /// The load the generator achieved, packets per second.
    pub(crate) offered_pps: f64,
    /// Capture and parse only.
    pub(crate) null: ModeResult,
    /// The daemon's full work.
    pub(crate) full: ModeResult,
    /// Full's sustained packets per second over null's.
    pub(crate) ratio: f64,
    /// The driver's counters at the end.
    pub(crate) driver: MiddleStats,
    /// The proxy engine's counters at the end.
    pub(crate) proxy: ProxyStats,
}

/// Why the measurement could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CapacityError {
    /// Real mode is not available here.
    #[error("real mode {0}")]
    Unavailable(String),
    /// Setting up the namespaces failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The proxy's driver failed.
    #[error("the proxy: {0}")]
    Daemon(#[from] DriverError),
    /// The generator failed.
    #[error("the generator: {0}")]
    Generator(String),
    /// A bad configuration.
    #[error("{0}")]
    Config(String),
}

/// Namespaces removed on drop.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.0.iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// Builds the generator and proxy namespaces; returns their names.
fn build(guard: &mut Namespaces) -> Result<(String, String), CommandError> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let prefix = format!(
        "pk-{}-cap{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let (gen_ns, proxy_ns) = (format!("{prefix}-gen"), format!("{prefix}-proxy"));
    for ns in [&gen_ns, &proxy_ns] {
        emu::add_namespace(ns, &mut guard.0)?;
    }
    ip(&[
        "link",
        "add",
        "eth0",
        "netns",
        &gen_ns,
        "address",
        &mac_text(GEN_MAC),
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &proxy_ns,
        "address",
        &mac_text(PROXY_MAC),
    ])?;
    for (ns, addr, peer, peer_mac) in [
        (&gen_ns, GEN_IP, PROXY_IP, PROXY_MAC),
        (&proxy_ns, PROXY_IP, GEN_IP, GEN_MAC),
    ] {
        // Whole frames, as on a real wire; no coalescing.
        in_netns(
            ns,
            "ethtool",
            &[
                "-K", "eth0", "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
            ],
        )?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        ip(&[
            "-n",
            ns,
            "neigh",
            "replace",
            &peer.to_string(),
            "lladdr",
            &mac_text(peer_mac),
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
    }
    let sink_net = "10.201.1.0/24";
    ip(&[
        "-n",
        &gen_ns,
        "route",
        "add",
        sink_net,
        "via",
        &PROXY_IP.to_string(),
    ])?;
    ip(&["-n", &proxy_ns, "route", "add", "blackhole", sink_net])?;
    Ok((gen_ns, proxy_ns))
}

/// Runs the measurement.
pub(crate) fn run(config: &CapacityConfig) -> Result<CapacityReport, CapacityError> {
    check(config)?;
    emu::available().map_err(CapacityError::Unavailable)?;
    emu::sweep_stale();
    let mut guard = Namespaces(Vec::new());
    let (gen_ns, proxy_ns) = build(&mut guard)?;
    let flags = Flags::default();
    let proxy = spawn_proxy(proxy_ns, config, &flags)?;
    let generator = spawn_generator(gen_ns, config, &flags)?;
    let generated = generator
        .join()
        .map_err(|_| CapacityError::Generator("the generator panicked".into()))?;
    flags.abort.store(true, Ordering::Relaxed);
    let measured = proxy
        .join()
        .map_err(|_| CapacityError::Generator("the proxy thread panicked".into()))?;
    let offered_pps = generated.map_err(CapacityError::Generator)?;
    let Measured {
        configured_flows,
        null,
        full,
        driver,
        proxy,
    } = measured?;
    let ratio = if null.sustained_pps > 0.0 {
        full.sustained_pps / null.sustained_pps
    } else {
        0.0
    };
    drop(guard);
    Ok(CapacityReport {
        config: config.clone(),
        configured_flows,
        offered_pps,
        null,
        full,
        ratio,
        driver,
        proxy,
    })
}

/// Refuses a configuration the measurement cannot run, before anything is
/// built.
fn check(config: &CapacityConfig) -> Result<(), CapacityError> {
    if config.flows == 0 || config.flows > 1000 {
        return Err(CapacityError::Config("flows must be 1..=1000".into()));
    }
    if !(1_000..=200_000).contains(&config.rate) {
        return Err(CapacityError::Config(
            "the rate must be 1000..=200000 packets/s".into(),
        ));
    }
    if !(25..=1400).contains(&config.payload_len) || config.interval_packets == 0 {
        return Err(CapacityError::Config(
            "payloads of 25..=1400 bytes, an interval of at least 1 packet".into(),
        ));
    }
    Ok(())
}

/// What the proxy and generator threads tell each other.
#[derive(Clone, Default)]
struct Flags {
    /// The flows are configured and the load is on (the generator sets it).
    warm: Arc<AtomicBool>,
    /// The phases are over (the proxy thread sets it).
    done: Arc<AtomicBool>,
    /// Stop measuring (the generator sets it when it fails, [`run`] once it
    /// ended).
    abort: Arc<AtomicBool>,
}

/// What the proxy thread measured.
struct Measured {
    /// Flows the proxy had configured when the load started.
    configured_flows: usize,
    null: ModeResult,
    full: ModeResult,
    /// The driver's and the engine's counters at the end.
    driver: MiddleStats,
    proxy: ProxyStats,
}

/// The proxy engine on the middlebox driver beside the path, as `pepkit
/// middle sidekick` runs it.
type Proxy = MiddleDriver<SidekickProxy>;

/// Starts the proxy thread in `proxy_ns`: it opens the daemon, then
/// measures ([`measure`]). Returns once the daemon is open.
fn spawn_proxy(
    proxy_ns: String,
    config: &CapacityConfig,
    flags: &Flags,
) -> Result<JoinHandle<Result<Measured, CapacityError>>, CapacityError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let daemon = {
        let flags = flags.clone();
        let config = config.clone();
        std::thread::Builder::new()
            .name("proxy".into())
            .spawn(move || -> Result<_, CapacityError> {
                let mut daemon = match open_daemon(&proxy_ns) {
                    Ok(daemon) => {
                        let _ = ready_tx.send(None);
                        daemon
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Some(e.to_string()));
                        return Err(e.into());
                    }
                };
                let result = measure(&mut daemon, &config, &flags.warm, &flags.abort);
                flags.done.store(true, Ordering::Relaxed);
                result
            })
            .map_err(|e| CapacityError::Generator(e.to_string()))?
    };
    if let Some(error) = ready_rx
        .recv()
        .unwrap_or(Some("the proxy thread died".into()))
    {
        let _ = daemon.join();
        return Err(CapacityError::Generator(format!("proxy: {error}")));
    }
    Ok(daemon)
}

/// Enters `netns` and opens the proxy there beside `eth0`, seeded.
fn open_daemon(netns: &str) -> Result<Proxy, DriverError> {
    enter_netns(netns).map_err(|e| DriverError::Io {
        what: format!("namespace {netns}"),
        source: e,
    })?;
    let mut config = ProxyConfig::new(PROXY_CONTROL.into(), Seed::new(1));
    config.forward = false;
    let spec = MiddleNodeSpec {
        interfaces: vec![DriverInterface::sniffed("eth0")],
        placement: Placement::Beside { sniff: vec![0] },
        local: vec![PROXY_CONTROL],
    };
    MiddleDriver::open(spec, SidekickProxy::new(config), emu::RealClock::start())
}

/// Flows the proxy's senders configured.
fn configured_flows(daemon: &Proxy) -> usize {
    let now = daemon.clock().now();
    let flows = daemon.engine().flows(now);
    flows.iter().filter(|f| f.configured()).count()
}

/// Starts the generator thread in `gen_ns` ([`generate`]); it raises the
/// abort flag if it fails.
fn spawn_generator(
    gen_ns: String,
    config: &CapacityConfig,
    flags: &Flags,
) -> Result<JoinHandle<Result<f64, String>>, CapacityError> {
    let flags = flags.clone();
    let config = config.clone();
    std::thread::Builder::new()
        .name("generator".into())
        .spawn(move || {
            let result = enter_netns(&gen_ns)
                .map_err(|e| e.to_string())
                .and_then(|()| generate(&config, &flags.warm, &flags.done));
            if result.is_err() {
                flags.abort.store(true, Ordering::Relaxed);
            }
            result
        })
        .map_err(|e| CapacityError::Generator(e.to_string()))
}

/// The proxy thread: the full loop while the flows configure, then the
/// phases.
fn measure(
    daemon: &mut Proxy,
    config: &CapacityConfig,
    warm: &AtomicBool,
    abort: &AtomicBool,
) -> Result<Measured, CapacityError> {
    let limit = Instant::now() + Duration::from_secs(20);
    while !warm.load(Ordering::Relaxed) {
        if abort.load(Ordering::Relaxed) || Instant::now() > limit {
            return Err(CapacityError::Generator(
                "the flows were not configured".into(),
            ));
        }
        daemon.turn(MAX_SLEEP)?;
    }
    let configured = configured_flows(daemon);
    // Let the load settle before the first phase.
    let settle = Instant::now() + Duration::from_millis(200);
    while Instant::now() < settle {
        daemon.turn(MAX_SLEEP)?;
    }
    let mut null = ModeResult {
        mode: "null",
        ..ModeResult::default()
    };
    let mut full = ModeResult {
        mode: "full",
        ..ModeResult::default()
    };
    for round in 0..config.rounds {
        // null, full, full, null, …
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_null in order {
            if abort.load(Ordering::Relaxed) {
                return Err(CapacityError::Generator("the generator stopped".into()));
            }
            daemon.set_null(is_null);
            let before = (daemon.stats(), *daemon.engine().stats());
            let cpu0 = thread_cpu_time().map_err(|e| CapacityError::Generator(e.to_string()))?;
            let start = Instant::now();
            while start.elapsed() < config.phase {
                daemon.turn(MAX_SLEEP)?;
            }
            let cpu1 = thread_cpu_time().map_err(|e| CapacityError::Generator(e.to_string()))?;
            let wall = start.elapsed();
            let after = (daemon.stats(), *daemon.engine().stats());
            let target = if is_null { &mut null } else { &mut full };
            target.add(
                after.0.datagrams - before.0.datagrams,
                cpu1.saturating_sub(cpu0),
                wall,
                after.0.kernel_drops - before.0.kernel_drops,
                after.1.quacks - before.1.quacks,
            );
            target.add_turns(after.0.turns - before.0.turns);
        }
    }
    daemon.set_null(false);
    Ok(Measured {
        configured_flows: configured,
        null,
        full,
        driver: daemon.stats(),
        proxy: *daemon.engine().stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configurations_are_refused_before_anything_is_built() {
        for config in [
            CapacityConfig {
                flows: 0,
                ..CapacityConfig::default()
            },
            CapacityConfig {
                rate: 10_000_000,
                ..CapacityConfig::default()
            },
            CapacityConfig {
                payload_len: 10,
                ..CapacityConfig::default()
            },
        ] {
            assert!(matches!(run(&config), Err(CapacityError::Config(_))));
        }
    }

    #[test]
    fn mode_totals_divide_cpu_by_packets() {
        let mut m = ModeResult::default();
        m.add(
            1000,
            Duration::from_micros(500),
            Duration::from_secs(1),
            2,
            3,
        );
        assert_eq!(m.cpu_ns_per_packet, 500.0);
        assert_eq!(m.sustained_pps, 2_000_000.0);
        assert_eq!((m.kernel_drops, m.quacks), (2, 3));
    }

    #[test]
    fn the_capacity_measurement_runs_and_cleans_up() {
        if !emu::require_real_or_skip("the_capacity_measurement_runs_and_cleans_up") {
            return;
        }
        let config = CapacityConfig {
            flows: 8,
            interval_packets: 8,
            rate: 10_000,
            phase: Duration::from_millis(300),
            rounds: 1,
            ..CapacityConfig::default()
        };
        let report = run(&config).expect("the measurement runs");
        eprintln!("{}", serde_json::to_string(&report).unwrap());
        assert_eq!(report.configured_flows, 8);
        for mode in [&report.null, &report.full] {
            // 0.3 s at 10k packets/s.
            assert!(mode.packets > 2000, "{mode:?}");
            assert!(mode.cpu_ns_per_packet > 0.0, "{mode:?}");
        }
        assert_eq!(report.null.quacks, 0);
        assert!(
            report.full.quacks >= report.full.packets / 8 - 8,
            "{report:?}"
        );
        assert!(report.ratio > 0.0);
        // Its namespaces are gone.
        let left = ip(&["netns", "list"]).unwrap();
        let prefix = format!("pk-{}-cap", std::process::id());
        assert!(!left.contains(&prefix), "{left}");
    }
}
