//! One trial in real mode: the scenario's chain as network namespaces
//! joined through the link emulator ([`emu::Testbed`]), the same endpoint
//! hosts the simulator runs, driven on UDP sockets in real time
//! ([`emu::HostDriver`]), the middlebox as its daemon (`pepkit
//! sidekick-proxy`, `pepkit tcp-pep`) on the middle node, and the same
//! metrics read back from the same hosts.
//!
//! What differs from the simulator, by necessity: time is the wall clock
//! (so nothing repeats exactly), the links' counters come from the relay,
//! and the proxy's counters from the daemon's final stats line.

use crate::scenario::{Middle, Scenario, Strawman, Transport, Workload};
use crate::trial::{
    Endpoints, Engines, LinkReport, Prepared, SIDEKICK_PROXY, TrialResult, add_pacubic_metrics,
    collect,
};
use emu::{HostRunSpec, Process, RealClock, RunUntil, Testbed, TestbedSpec};
use netsim::{Host, Time};
use std::any::Any;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How real-mode trials run.
#[derive(Clone, Debug)]
pub struct RealOptions {
    /// The pepkit executable, which runs the middle node's daemon
    /// (`sidekick-proxy`, `tcp-pep`) in its namespace.
    pub pepkit: PathBuf,
}

/// The hosts of a finished real-mode trial.
struct Ran {
    client: Box<dyn Host>,
    server: Box<dyn Host>,
}

impl Engines for Ran {
    fn client<T: Host>(&self) -> Option<&T> {
        let any: &dyn Any = self.client.as_ref();
        any.downcast_ref()
    }

    fn server<T: Host>(&self) -> Option<&T> {
        let any: &dyn Any = self.server.as_ref();
        any.downcast_ref()
    }

    /// Middleboxes run as daemons in real mode; their counters come from
    /// their stats lines instead.
    fn middlebox<T: netsim::Middlebox>(&self, _index: usize) -> Option<&T> {
        None
    }
}

fn ipv4(addr: IpAddr) -> Ipv4Addr {
    match addr {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(_) => unreachable!("checked: real mode is IPv4 only"),
    }
}

/// The testbed of trial `trial` of a prepared variant: its chain of hops,
/// with the Sidekick proxy's control address on its middle node if it has
/// one.
pub fn testbed_spec(prepared: &Prepared, trial: u32) -> TestbedSpec {
    let scenario = prepared.scenario();
    let mut extra = Vec::new();
    if scenario.middle == Middle::Sidekick {
        extra.push((scenario.middle_index(), ipv4(SIDEKICK_PROXY.ip())));
    }
    TestbedSpec {
        client: ipv4(scenario.client.addr),
        server: ipv4(scenario.server.addr),
        hops: prepared.hops().to_vec(),
        extra,
        seed: scenario.trial_seed(trial),
    }
}

/// A result for a trial that could not run, saying why.
fn failed(variant: &str, scenario: &Scenario, trial: u32, error: String) -> TrialResult {
    let seed = scenario.trial_seed(trial);
    let mut result = TrialResult::new(variant, trial, seed, "error", Time::ZERO, 0, Vec::new());
    result.errors.push(error);
    result
}

/// Runs trial `trial` of `variant` in real mode.
pub(crate) fn run(
    prepared: &Prepared,
    variant: &str,
    trial: u32,
    options: &RealOptions,
) -> TrialResult {
    let scenario = prepared.scenario();
    // After Ctrl-C the remaining trials are not started.
    if emu::interrupt::requested() {
        return failed(
            variant,
            scenario,
            trial,
            "interrupted before it started".into(),
        );
    }
    match try_run(prepared, variant, trial, options) {
        Ok(result) => result,
        Err(error) => failed(variant, scenario, trial, error),
    }
}

fn try_run(
    prepared: &Prepared,
    variant: &str,
    trial: u32,
    options: &RealOptions,
) -> Result<TrialResult, String> {
    let scenario = prepared.scenario();
    let clock = RealClock::start();
    let spec = testbed_spec(prepared, trial);
    let mut testbed = Testbed::build(&spec, clock).map_err(|e| format!("testbed: {e}"))?;
    let limit = scenario.time_limit.0;
    let daemon = start_daemon(&testbed, scenario, trial, options, limit)?;
    // The run, and a trace-driven link's trace, start now, as the
    // simulator's do when its hosts start.
    let clock = testbed.restart_clock();
    let deadline = clock.now() + limit;
    let stop = Arc::new(AtomicBool::new(false));
    let mut result = match scenario.transport {
        Transport::Quic => run_quic(prepared, &testbed, variant, trial, deadline, &stop)?,
        Transport::Tcp => run_tcp(scenario, &testbed, variant, trial, limit)?,
    };
    if let Some(daemon) = daemon {
        let finished = daemon.stop();
        add_daemon_stats(&mut result, scenario.middle, &finished);
    }
    let relay = testbed
        .stop_relay()
        .ok_or("the link emulator failed during the trial")?;
    let mut links = Vec::new();
    for (name, (forward, reverse)) in scenario.path.iter().zip(&relay.links) {
        links.push(LinkReport::new(format!("{name}/forward"), forward));
        links.push(LinkReport::new(format!("{name}/reverse"), reverse));
    }
    result.add_links(links);
    result
        .metrics
        .insert("relay_late_over_1ms".into(), relay.lateness.over_1ms as f64);
    Ok(result)
}

/// Starts the middle node's daemon, if the scenario has one, and waits
/// until it listens.
fn start_daemon(
    testbed: &Testbed,
    scenario: &Scenario,
    trial: u32,
    options: &RealOptions,
    limit: Duration,
) -> Result<Option<Process>, String> {
    let Some(middle) = testbed.middle(scenario.middle_index()) else {
        return Ok(None);
    };
    let pepkit = options.pepkit.to_string_lossy().to_string();
    let (args, listening): (Vec<String>, Vec<String>) = match scenario.middle {
        Middle::Router | Middle::Split => return Ok(None),
        Middle::Sidekick => {
            let mut args = vec![
                "sidekick-proxy".to_string(),
                "--iface".into(),
                middle.interfaces[0].name.clone(),
                "--addr".into(),
                SIDEKICK_PROXY.to_string(),
                "--seed".into(),
                scenario
                    .trial_seed(trial)
                    .derive("sidekick-proxy")
                    .value()
                    .to_string(),
            ];
            match scenario.sidekick.as_ref().and_then(|s| s.strawman) {
                Some(Strawman::Echo) => args.extend(["--strawman".into(), "echo".into()]),
                Some(Strawman::Window { size }) => {
                    args.extend(["--strawman".into(), format!("window:{size}")]);
                }
                None => {}
            }
            let listening = vec!["-Hnul".into(), "src".into(), SIDEKICK_PROXY.to_string()];
            (args, listening)
        }
        Middle::Pep => {
            let args = vec![
                "tcp-pep".to_string(),
                "--controller".into(),
                scenario.client.controller.clone(),
            ];
            let port = emu::tcp_pep::DEFAULT_PORT;
            (
                args,
                vec![
                    "-Hntl".into(),
                    "sport".into(),
                    "=".into(),
                    format!(":{port}"),
                ],
            )
        }
    };
    let name = &args[0];
    let mut process = Process::spawn(
        name,
        Some(&middle.netns),
        limit + Duration::from_secs(30),
        &pepkit,
        &args,
    )
    .map_err(|e| format!("{name}: {e}"))?;
    let started = Instant::now();
    loop {
        let up = emu::command::in_netns(&middle.netns, "ss", &listening)
            .is_ok_and(|out| !out.trim().is_empty());
        if up {
            return Ok(Some(process));
        }
        if process.has_exited() || started.elapsed() > Duration::from_secs(10) {
            let finished = process.stop();
            return Err(format!(
                "{name} did not start listening: {}",
                finished.stderr.trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the daemon's final stats line (JSON) into the result.
fn add_daemon_stats(result: &mut TrialResult, middle: Middle, finished: &emu::Finished) {
    let stats = finished
        .stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str::<serde_json::Value>(line).ok());
    let Some(serde_json::Value::Object(stats)) = stats else {
        result.errors.push(format!(
            "{middle:?} daemon left no stats line: {}",
            finished.stderr.trim()
        ));
        return;
    };
    let prefix = match middle {
        Middle::Sidekick => "proxy",
        _ => "pep",
    };
    for (key, value) in stats {
        if let Some(number) = value.as_f64() {
            result.metrics.insert(format!("{prefix}_{key}"), number);
        }
    }
}

/// A QUIC (or media) trial: the simulator's hosts on the testbed.
fn run_quic(
    prepared: &Prepared,
    testbed: &Testbed,
    variant: &str,
    trial: u32,
    deadline: Time,
    stop: &Arc<AtomicBool>,
) -> Result<TrialResult, String> {
    let scenario = prepared.scenario();
    let Endpoints {
        client,
        server,
        pacubic,
    } = prepared.endpoints(trial);
    let server = testbed
        .run_host(
            testbed.server(),
            server.host,
            vec![scenario.server_addr()],
            &HostRunSpec::new(RunUntil::Stopped, deadline, stop.clone()),
        )
        .map_err(|e| format!("server: {e}"))?;
    let client = testbed
        .run_host(
            testbed.client(),
            client.host,
            vec![scenario.client_addr()],
            &HostRunSpec::new(RunUntil::Finished, deadline, stop.clone()),
        )
        .map_err(|e| format!("client: {e}"))?;
    let client = client.join().map_err(|e| format!("client: {e}"));
    // The server runs until the client is done (or failed).
    stop.store(true, Ordering::Relaxed);
    let server = server.join().map_err(|e| format!("server: {e}"))?;
    let client = client?;
    let stop_name = match client.stop {
        emu::HostStop::Finished => "finished",
        emu::HostStop::TimeLimit => "time_limit",
        emu::HostStop::Stopped => "stopped",
    };
    let seed = scenario.trial_seed(trial);
    let mut result = TrialResult::new(variant, trial, seed, stop_name, client.end, 0, Vec::new());
    let ran = Ran {
        client: client.host,
        server: server.host,
    };
    collect(&ran, scenario, &mut result);
    if let Some(factory) = pacubic {
        add_pacubic_metrics(&mut result, &factory, "");
    }
    let sent_errors = client.stats.send_errors + server.stats.send_errors;
    if sent_errors > 0 {
        result
            .metrics
            .insert("socket_send_errors".into(), sent_errors as f64);
    }
    Ok(result)
}

/// A TCP bulk trial: Linux TCP with the endpoints' congestion control.
fn run_tcp(
    scenario: &Scenario,
    testbed: &Testbed,
    variant: &str,
    trial: u32,
    limit: Duration,
) -> Result<TrialResult, String> {
    use emu::tcp_bulk::{
        BulkDirection, TcpBulkClient, TcpBulkClientConfig, TcpBulkServer, TcpBulkServerConfig,
    };
    let Workload::Bulk { direction, size } = &scenario.workload else {
        unreachable!("checked: tcp carries bulk transfers only");
    };
    let direction = match direction {
        crate::scenario::BulkDirection::Upload => BulkDirection::Upload,
        crate::scenario::BulkDirection::Download => BulkDirection::Download,
    };
    let server_addr = scenario.server_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let mut server_config = TcpBulkServerConfig::new(server_addr);
    server_config.congestion = scenario.server.controller.clone();
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
    let mut config = TcpBulkClientConfig::new(server_addr, direction, size.0);
    config.congestion = scenario.client.controller.clone();
    config.bind = Some(std::net::SocketAddr::new(scenario.client.addr, 0));
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
    let seed = scenario.trial_seed(trial);
    let (stop_name, end) = match &client {
        Ok(report) => ("finished", clock.at(report.end)),
        Err(_) => ("error", clock.now()),
    };
    let mut result = TrialResult::new(variant, trial, seed, stop_name, end, 0, Vec::new());
    // The PEP is transparent: the server must see the client's address.
    if let Some(record) = records.first()
        && record.peer.ip() != scenario.client.addr
    {
        result.errors.push(format!(
            "server: the connection came from {}, not from the client {}",
            record.peer, scenario.client.addr
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
            result.completed = report.bytes == size.0;
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
