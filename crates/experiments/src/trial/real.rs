//! The real-mode driver: the scenario's chain as network namespaces
//! joined through the link emulator ([`emu::Testbed`]), the same hosts the
//! simulator runs driven on UDP sockets in real time
//! ([`emu::HostDriver`]), the middle system's same engine driven on the
//! middle node's interfaces in process ([`emu::driver::MiddleDriver`], in the path
//! or beside it), or a service of the node's kernel (the TCP PEP), and the
//! same metrics read back from the same objects.
//!
//! What differs from the simulator, by necessity: time is the wall clock
//! (so nothing repeats exactly), and the links' counters come from the
//! relay.

use super::Prepared;
use super::middle_cpu::KeptOff;
use super::plan::Plan;
use crate::outcome::{LinkReport, TrialResult};
use crate::peers::PeerTransfer;
use crate::scenario::Traffic;
use crate::systems::{OnTestbed, Placement, Service};
use crate::workloads::TcpTransfer;
use emu::driver::MiddleStats;
use emu::{RealClock, Testbed, TestbedSpec};
use netsim::Middlebox;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// An IPv4 address (real mode refuses IPv6 scenarios before they run).
fn ipv4(addr: IpAddr) -> Option<Ipv4Addr> {
    match addr {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(_) => None,
    }
}

/// The testbed of trial `trial` of a prepared variant: its chain of hops,
/// with the middle system's own address on its node if it has one.
pub fn testbed_spec(prepared: &Prepared, trial: u32) -> Result<TestbedSpec, String> {
    let scenario = prepared.scenario();
    let v4 = |addr: SocketAddr| ipv4(addr.ip()).ok_or("real mode is IPv4 only".to_string());
    // Competing flows: each its own client and server address, on the
    // client and server nodes (the first flow's as the nodes' own).
    let mut client_extra = Vec::new();
    let mut server_extra = Vec::new();
    let (client, server) = match &scenario.traffic {
        Traffic::Hosts { flows, .. } => {
            let Some((first, rest)) = flows.split_first() else {
                return Err("the scenario has no flow".into());
            };
            for flow in rest {
                for (addr, own, extra) in [
                    (flow.client, first.client, &mut client_extra),
                    (flow.server, first.server, &mut server_extra),
                ] {
                    let addr = v4(addr)?;
                    if addr != v4(own)? && !extra.contains(&addr) {
                        extra.push(addr);
                    }
                }
            }
            (first.client, first.server)
        }
        Traffic::KernelTcp(tcp) => (tcp.client, tcp.server),
        Traffic::Peers(peers) => (peers.client, peers.server),
    };
    let extra = match scenario.middle.system().address() {
        Some(addr) => vec![(
            scenario.middle_at,
            ipv4(addr).ok_or("real mode is IPv4 only")?,
        )],
        None => Vec::new(),
    };
    Ok(TestbedSpec {
        client: v4(client)?,
        server: v4(server)?,
        hops: prepared.hops().to_vec(),
        extra,
        client_extra,
        server_extra,
        seed: scenario.trial_seed(trial),
    })
}

/// Runs trial `trial` of `variant` in real mode.
pub(crate) fn run(prepared: &Prepared, variant: &str, trial: u32) -> TrialResult {
    let seed = prepared.scenario().trial_seed(trial);
    // After Ctrl-C the remaining trials are not started.
    if emu::sys::interrupt::requested() {
        return TrialResult::interrupted(variant, trial, seed);
    }
    try_run(prepared, variant, trial)
        .unwrap_or_else(|error| TrialResult::failed(variant, trial, seed, error))
}

fn try_run(prepared: &Prepared, variant: &str, trial: u32) -> Result<TrialResult, String> {
    let scenario = prepared.scenario();
    let clock = RealClock::start();
    let spec = testbed_spec(prepared, trial)?;
    // Before the testbed: its relay, hosts and peers start from this thread.
    let _kept_off = prepared.middle_cpu.map(KeptOff::cpu).transpose()?;
    let mut testbed = Testbed::build(&spec, clock).map_err(|e| format!("testbed: {e}"))?;
    testbed.pin_middles(prepared.middle_cpu);
    let limit = scenario.time_limit;
    let system = scenario.middle.system();
    let Plan {
        seed,
        flows,
        middle,
    } = Plan::new(scenario, trial, |setup| system.on_testbed(setup));
    // The run, and a trace-driven link's trace, start now, as the
    // simulator's do when its hosts start.
    let clock = testbed.restart_clock();
    let middle = start_middle(&testbed, scenario.middle_at, middle)?;
    let mut result = match &scenario.traffic {
        Traffic::Hosts { .. } => {
            let deadline = clock.now() + limit;
            super::real_flows::run_hosts(
                prepared,
                &testbed,
                (variant, trial, seed),
                flows,
                deadline,
                middle,
            )?
        }
        Traffic::KernelTcp(tcp) => {
            let mut result = run_tcp(tcp, &testbed, (variant, trial, seed), limit)?;
            middle.stop(&mut result);
            result
        }
        Traffic::Peers(peers) => {
            let mut result = run_peers(peers, &testbed, (variant, trial, seed), limit)?;
            let engine = middle.stop(&mut result);
            system.collect(engine.as_deref(), &mut result);
            result
        }
    };
    let relay = testbed
        .stop_relay()
        .ok_or("the link emulator failed during the trial")?;
    let links = scenario
        .path
        .iter()
        .zip(&relay.links)
        .flat_map(|(hop, (forward, reverse))| LinkReport::hop(&hop.name, forward, reverse));
    result.add_links(links.collect());
    result.set("relay_late_over_1ms", relay.lateness.over_1ms as f64);
    Ok(result)
}

/// A service's thread: its metrics, or why it failed.
type ServiceThread = JoinHandle<std::io::Result<Result<Vec<(String, f64)>, String>>>;

/// What runs on the middle node during a trial.
pub(super) enum Middle {
    Router,
    Engine(emu::MiddleThread<Box<dyn Middlebox>>, Arc<AtomicBool>),
    Service(ServiceThread, Arc<AtomicBool>),
}

impl Middle {
    /// Stops it; returns its engine (for the system's metrics) and
    /// records the driver's or the service's counters.
    pub(super) fn stop(self, result: &mut TrialResult) -> Option<Box<dyn Middlebox>> {
        match self {
            Middle::Router => None,
            Middle::Engine(thread, stop) => {
                stop.store(true, Ordering::Relaxed);
                match thread.join() {
                    Ok(run) => {
                        add_driver_stats(result, &run.stats);
                        if let Some(error) = run.error {
                            result.errors.push(format!("middle: {error}"));
                        }
                        Some(run.engine)
                    }
                    Err(error) => {
                        result.errors.push(format!("middle: {error}"));
                        None
                    }
                }
            }
            Middle::Service(handle, stop) => {
                stop.store(true, Ordering::Relaxed);
                match handle.join() {
                    Ok(Ok(Ok(metrics))) => {
                        for (name, value) in metrics {
                            result.set(name, value);
                        }
                    }
                    Ok(Ok(Err(error))) => result.errors.push(format!("middle: {error}")),
                    Ok(Err(error)) => result.errors.push(format!("middle: {error}")),
                    Err(_) => result.errors.push("middle: its thread panicked".into()),
                }
                None
            }
        }
    }
}

/// The driver's counters that say whether it kept up, and how its thread's
/// CPU time divides between the engine and the packet I/O (PEMI's Figure
/// 13: the engine's time over the rest). `middle_engine_share` is by the
/// thread's CPU clock, each part corrected for the clock readings' own
/// cost (measured by the driver at start); `middle_engine_wall_share`
/// is the engine's wall-clock time over the rest of the thread's CPU
/// time, which counts preemption inside the engine as its work.
fn add_driver_stats(result: &mut TrialResult, stats: &MiddleStats) {
    result.set("middle_frames", stats.frames as f64);
    result.set("middle_kernel_drops", stats.kernel_drops as f64);
    result.set("middle_send_errors", stats.send_errors as f64);
    // How long frames sat in the kernel before the driver read them
    // (the engine is given their arrival stamps instead).
    let wait = &stats.read_wait;
    if wait.frames > 0 {
        let frames = wait.frames as f64;
        result.set(
            "middle_read_wait_over_100us",
            wait.over_100us as f64 / frames,
        );
        result.set("middle_read_wait_over_1ms", wait.over_1ms as f64 / frames);
        result.set("middle_read_wait_max_ms", wait.max_us as f64 / 1e3);
    }
    if stats.cpu_ns == 0 {
        return;
    }
    result.set("middle_cpu_ms", stats.cpu_ns as f64 / 1e6);
    result.set("middle_engine_wall_ms", stats.engine_ns as f64 / 1e6);
    result.set("middle_engine_calls", stats.engine_calls as f64);
    let wall_io = stats.cpu_ns.saturating_sub(stats.engine_ns);
    if wall_io > 0 {
        result.set(
            "middle_engine_wall_share",
            stats.engine_ns as f64 / wall_io as f64,
        );
    }
    if stats.engine_cpu_calls > 0 {
        let calls = stats.engine_cpu_calls;
        let engine = stats
            .engine_cpu_ns
            .saturating_sub(calls.saturating_mul(stats.cpu_clock_inside_ns));
        let io = stats
            .cpu_ns
            .saturating_sub(stats.engine_cpu_ns)
            .saturating_sub(stats.cpu_clock_warmup_ns)
            .saturating_sub(calls.saturating_mul(stats.cpu_clock_outside_ns));
        result.set("middle_engine_ms", engine as f64 / 1e6);
        result.set("middle_io_ms", io as f64 / 1e6);
        result.set("middle_engine_ns_per_call", engine as f64 / calls as f64);
        let timers = stats.engine_timer_calls;
        result.set("middle_engine_timer_calls", timers as f64);
        result.set(
            "middle_engine_timer_ms",
            stats
                .engine_timer_cpu_ns
                .saturating_sub(timers.saturating_mul(stats.cpu_clock_inside_ns))
                as f64
                / 1e6,
        );
        result.set(
            "middle_cpu_clock_warmup_ns",
            stats.cpu_clock_warmup_ns as f64 / calls as f64,
        );
        result.set(
            "middle_cpu_clock_ns",
            (stats.cpu_clock_inside_ns + stats.cpu_clock_outside_ns) as f64,
        );
        if io > 0 {
            result.set("middle_engine_share", engine as f64 / io as f64);
        }
    }
}

/// Starts what runs on middle node `at` and waits until it serves.
fn start_middle(testbed: &Testbed, at: usize, on_testbed: OnTestbed) -> Result<Middle, String> {
    let stop = Arc::new(AtomicBool::new(false));
    match on_testbed {
        OnTestbed::Router => Ok(Middle::Router),
        OnTestbed::Engine {
            engine,
            placement,
            local,
        } => {
            let placement = match placement {
                Placement::InPath => emu::driver::Placement::InPath {
                    routes: testbed
                        .routes(at)
                        .ok_or_else(|| format!("no middle node {at}"))?,
                },
                Placement::Beside => emu::driver::Placement::Beside { sniff: vec![0] },
            };
            let local = local
                .into_iter()
                .filter_map(|addr| match addr {
                    SocketAddr::V4(v4) => Some(v4),
                    SocketAddr::V6(_) => None,
                })
                .collect::<Vec<SocketAddrV4>>();
            let thread = testbed
                .run_middlebox(at, placement, local, engine, stop.clone())
                .map_err(|e| format!("middle: {e}"))?;
            Ok(Middle::Engine(thread, stop))
        }
        OnTestbed::Service(service) => start_service(testbed, at, service, stop),
    }
}

/// Runs `service` on a thread in middle node `at`'s namespace.
fn start_service(
    testbed: &Testbed,
    at: usize,
    service: Box<dyn Service>,
    stop: Arc<AtomicBool>,
) -> Result<Middle, String> {
    let node = testbed
        .middle(at)
        .ok_or_else(|| format!("no middle node {at}"))?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let service_stop = stop.clone();
    let handle = testbed
        .spawn_in(node, "middle-service", move || {
            let ready = move || {
                let _ = ready_tx.send(());
            };
            service.run(service_stop, &ready)
        })
        .map_err(|e| format!("middle: {e}"))?;
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => Ok(Middle::Service(handle, stop)),
        Err(_) => {
            stop.store(true, Ordering::Relaxed);
            let why = match handle.join() {
                Ok(Ok(Err(error))) => error,
                Ok(Err(error)) => error.to_string(),
                _ => "it did not start within 10 s".into(),
            };
            Err(format!("middle: {why}"))
        }
    }
}

/// A TCP bulk trial: Linux TCP with the endpoints' congestion control.
fn run_tcp(
    tcp: &TcpTransfer,
    testbed: &Testbed,
    (variant, trial, seed): (&str, u32, netsim::Seed),
    limit: Duration,
) -> Result<TrialResult, String> {
    use emu::tcp::bulk::{
        BulkDirection, TcpBulkClient, TcpBulkClientConfig, TcpBulkServer, TcpBulkServerConfig,
    };
    let direction = match tcp.direction {
        crate::workloads::BulkDirection::Upload => BulkDirection::Upload,
        crate::workloads::BulkDirection::Download => BulkDirection::Download,
    };
    let size = tcp.size;
    let server_addr = tcp.server;
    let stop = Arc::new(AtomicBool::new(false));
    let mut server_config = TcpBulkServerConfig::new(server_addr);
    server_config.congestion = tcp.server_controller.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server_stop = stop.clone();
    let server = testbed
        .spawn_in(
            testbed.server(),
            "tcp-server",
            move || match TcpBulkServer::bind(server_config) {
                Ok(server) => {
                    let _ = ready_tx.send(Ok(()));
                    server.run(server_stop)
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    Ok(Vec::new())
                }
            },
        )
        .map_err(|e| format!("server: {e}"))?;
    ready_rx
        .recv()
        .map_err(|_| "the TCP server thread died".to_string())?
        .map_err(|e| format!("server: {e}"))?;
    let mut config = TcpBulkClientConfig::new(server_addr, direction, size);
    config.congestion = tcp.client_controller.clone();
    config.bind = Some(std::net::SocketAddr::new(tcp.client.ip(), 0));
    config.timeout = limit;
    let clock = testbed.clock();
    let client = testbed
        .spawn_in(testbed.client(), "tcp-client", move || {
            TcpBulkClient::run(&config)
        })
        .map_err(|e| format!("client: {e}"))?
        .join()
        .map_err(|_| "the TCP client thread panicked".to_string())?
        .map_err(|e| format!("client: {e}"))?;
    stop.store(true, Ordering::Relaxed);
    let records = server
        .join()
        .map_err(|_| "the TCP server thread panicked".to_string())?
        .map_err(|e| format!("server: {e}"))?
        .unwrap_or_default();
    let (stop_name, end) = match &client {
        Ok(report) => ("finished", clock.at(report.end)),
        Err(_) => ("error", clock.now()),
    };
    let mut result = TrialResult::new(variant, trial, seed, stop_name, end, 0);
    // The PEP is transparent: the server must see the client's address.
    if let Some(record) = records.first()
        && record.peer.ip() != tcp.client.ip()
    {
        result.errors.push(format!(
            "server: the connection came from {}, not from the client {}",
            record.peer,
            tcp.client.ip()
        ));
    }
    match client {
        Ok(report) => {
            // An upload ends when the server has the last byte, as QUIC's.
            let end = match direction {
                BulkDirection::Upload => records
                    .iter()
                    .find_map(|r| r.last_byte_at)
                    .unwrap_or(report.end),
                BulkDirection::Download => report.end,
            };
            let completion = end.saturating_duration_since(report.start);
            result.completed = report.bytes == size;
            if result.completed && !completion.is_zero() {
                result.metrics.insert(
                    "goodput_mbps".into(),
                    report.bytes as f64 * 8.0 / completion.as_secs_f64() / 1e6,
                );
                result
                    .metrics
                    .insert("completion_s".into(), completion.as_secs_f64());
            }
        }
        Err(error) => result.errors.push(format!("client: {error}")),
    }
    Ok(result)
}

/// Independent QUIC stacks through `peers/run`: the server in the server's
/// namespace, then the client in the client's, which reports the workload
/// on its standard output.
fn run_peers(
    peers: &PeerTransfer,
    testbed: &Testbed,
    (variant, trial, seed): (&str, u32, netsim::Seed),
    limit: Duration,
) -> Result<TrialResult, String> {
    let run = crate::peers::peers_run()
        .ok_or("peers/run not found (run from the repository, or set PEPKIT_PEERS_RUN)")?;
    let run = run.to_string_lossy().into_owned();
    let mut server_args = vec![peers.server_stack.name().to_string()];
    server_args.extend(peers.server_args());
    let server = emu::Process::spawn(
        "server",
        Some(&testbed.server().netns),
        limit + Duration::from_secs(10),
        &run,
        &server_args,
    )
    .map_err(|e| format!("server: {e}"))?;
    // The peers print "ready" within a second or so (aioquic is the
    // slowest); their clients retry the handshake anyway.
    std::thread::sleep(Duration::from_millis(1500));
    let clock = testbed.clock();
    let mut args = vec![peers.client_stack.name().to_string(), "client".to_string()];
    args.extend(peers.client_args(limit));
    let client = emu::Process::spawn(
        "client",
        Some(&testbed.client().netns),
        limit + Duration::from_secs(10),
        &run,
        &args,
    )
    .map_err(|e| format!("client: {e}"))?
    .wait(limit + Duration::from_secs(10));
    let server = server.stop();
    let mut result = TrialResult::new(variant, trial, seed, "finished", clock.now(), 0);
    if !client.success() {
        result.stop = "error".into();
        result
            .errors
            .push(format!("client: {}", client.stderr.trim()));
        if !server.stderr.trim().is_empty() {
            result
                .errors
                .push(format!("server: {}", server.stderr.trim()));
        }
        return Ok(result);
    }
    match peers.collect(&client.stdout, &mut result) {
        Ok(completed) => result.completed = completed,
        Err(error) => result.errors.push(format!("client: {error}")),
    }
    Ok(result)
}
