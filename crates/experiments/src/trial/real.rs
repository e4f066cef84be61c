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
use super::real_flows::run_hosts;
use super::real_middle::RunningMiddle;
use crate::capture::TrialCapture;
use crate::outcome::{LinkReport, TrialResult};
use crate::peers::PeerTransfer;
use crate::scenario::Traffic;
use crate::workloads::TcpTransfer;
use emu::{RealClock, Testbed, TestbedSpec};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    let capture = TrialCapture::new(prepared.capture.as_ref(), trial);
    if let Some(capture) = &capture {
        let hops = capture
            .hops()
            .iter()
            .filter_map(|&hop| Some((hop, scenario.path.get(hop)?.name.clone())))
            .collect();
        if !testbed.capture(hops) {
            return Err("the link emulator did not start the capture".into());
        }
    }
    let Plan {
        seed,
        flows,
        middle,
    } = Plan::new(scenario, trial, capture.as_ref(), |setup| {
        system.on_testbed(setup)
    });
    // The run, and a trace-driven link's trace, start now, as the
    // simulator's do when its hosts start.
    let clock = testbed.restart_clock();
    let middle = RunningMiddle::start(&testbed, scenario.middle_at, middle)?;
    let mut result = match &scenario.traffic {
        Traffic::Hosts { .. } => {
            let deadline = clock.now() + limit;
            run_hosts(
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
    let mut relay = testbed
        .stop_relay()
        .ok_or("the link emulator failed during the trial")?;
    if let Some(capture) = capture {
        capture.write(std::mem::take(&mut relay.captures));
    }
    let links = scenario
        .path
        .iter()
        .zip(&relay.links)
        .flat_map(|(hop, (forward, reverse))| LinkReport::hop(&hop.name, forward, reverse));
    result.add_links(links.collect());
    result.set("relay_late_over_1ms", relay.lateness.over_1ms as f64);
    Ok(result)
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
