//! Real mode's flows: the trial's planned flows (its
//! [`Plan`](super::plan::Plan), the simulator's own) on the testbed's
//! chain, each with its own client and server address on the client and
//! server nodes, sharing every hop.
//! A flow is our hosts (QUIC, driven on UDP sockets) or Linux TCP with
//! the congestion control it names ([`emu::tcp::stream`]); every server
//! listens before the first client starts, and each client starts at its
//! flow's start on the run's clock.
//!
//! ```text
//!  client ns (10.0.0.1, .2, …)  ── access ── middle0 ── bottleneck ── server ns (10.0.1.1, .2, …)
//! ```

use super::plan::{Endpoints, FlowHosts};
use super::real_middle::RunningMiddle;
use super::{Engines, FlowMeta, KernelTcpFlow, Prepared, collect};
use crate::outcome::TrialResult;
use crate::workloads::Amount;
use emu::tcp::stream::{self, TcpSenderConfig, TcpSink};
use emu::{HostRunSpec, RealClock, RunUntil, Testbed};
use netsim::{Host, Middlebox, Time};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What real mode ran, to be read back: per flow, our hosts or a Linux
/// TCP flow's delivery.
struct Ran {
    clients: Vec<Option<Box<dyn Host>>>,
    servers: Vec<Option<Box<dyn Host>>>,
    kernel: Vec<Option<KernelTcpFlow>>,
    middle: Option<Box<dyn Middlebox>>,
}

impl Engines for Ran {
    fn client(&self, index: usize) -> Option<&dyn Host> {
        self.clients.get(index)?.as_deref()
    }

    fn server(&self, index: usize) -> Option<&dyn Host> {
        self.servers.get(index)?.as_deref()
    }

    fn middle(&self) -> Option<&dyn Middlebox> {
        self.middle.as_deref()
    }

    fn kernel_tcp(&self, index: usize) -> Option<&KernelTcpFlow> {
        self.kernel.get(index)?.as_ref()
    }
}

/// A Linux TCP sink's thread: its delivery log and byte count.
type SinkThread = JoinHandle<std::io::Result<std::io::Result<(quic::DeliveryLog, u64)>>>;
/// A Linux TCP sender's thread.
type SenderThread = JoinHandle<std::io::Result<std::io::Result<stream::TcpSenderReport>>>;

/// A flow's receiving end, running.
enum Server {
    Host(emu::HostThread<Box<dyn Host>>),
    Sink(SinkThread),
}

/// A flow's sending end, waiting for its start or running.
enum Client {
    Waiting(Box<dyn Host>),
    WaitingTcp(TcpSenderConfig),
    Host(emu::HostThread<Box<dyn Host>>),
    Sender(SenderThread),
    Failed(String),
}

/// Runs the trial's flows on `testbed` until every client is done (or
/// the deadline), then reads their results as the simulator does.
pub(super) fn run_hosts(
    prepared: &Prepared,
    testbed: &Testbed,
    (variant, trial, seed): (&str, u32, netsim::Seed),
    flows: Vec<FlowHosts>,
    deadline: Time,
    middle: RunningMiddle,
) -> Result<TrialResult, String> {
    let clock = testbed.clock();
    let server_stop = Arc::new(AtomicBool::new(false));
    // Clients end by themselves (or at the deadline), not when another
    // flow's does.
    let client_stop = Arc::new(AtomicBool::new(false));
    let mut metas = Vec::with_capacity(flows.len());
    let mut servers = Vec::with_capacity(flows.len());
    let mut clients = Vec::with_capacity(flows.len());
    // Every server listens before the first client starts.
    for flow in flows {
        let who = |side: &str| flow.meta.names.who(side);
        let (client_addr, server_addr) = flow.meta.addrs;
        match flow.endpoints {
            Endpoints::Hosts { client, server } => {
                let spec = HostRunSpec::new(RunUntil::Stopped, deadline, server_stop.clone());
                let server = testbed
                    .run_host(testbed.server(), server, vec![server_addr], &spec)
                    .map_err(|e| format!("{}: {e}", who("server")))?;
                servers.push(Server::Host(server));
                clients.push(Client::Waiting(client));
            }
            Endpoints::KernelTcp { congestion, amount } => {
                let sink = start_sink(testbed, server_addr, &congestion, &server_stop)
                    .map_err(|e| format!("{}: {e}", who("server")))?;
                servers.push(Server::Sink(sink));
                let (until, bytes) = match amount {
                    Amount::Size(size) => (deadline, Some(size.0)),
                    Amount::Duration(span) => (flow.start + span.0, None),
                    Amount::Until(span) => (Time::ZERO + span.0, None),
                };
                clients.push(Client::WaitingTcp(TcpSenderConfig {
                    server: server_addr,
                    bind: std::net::SocketAddr::new(client_addr.ip(), 0),
                    congestion,
                    until: instant(clock, until.min(deadline)),
                    bytes,
                }));
            }
        }
        metas.push((flow.meta, flow.start));
    }
    // Each client at its start, in order of start.
    let mut order: Vec<usize> = (0..metas.len()).collect();
    order.sort_by_key(|&i| metas[i].1);
    for i in order {
        let (meta, start) = &metas[i];
        while clock.now() < *start && !emu::sys::interrupt::requested() {
            std::thread::sleep(clock.until(*start).min(Duration::from_millis(50)));
        }
        let who = meta.names.who("client");
        clients[i] = match std::mem::replace(&mut clients[i], Client::Failed(String::new())) {
            Client::Waiting(host) => {
                let spec = HostRunSpec::new(RunUntil::Finished, deadline, client_stop.clone());
                match testbed.run_host(testbed.client(), host, vec![meta.addrs.0], &spec) {
                    Ok(thread) => Client::Host(thread),
                    Err(e) => Client::Failed(format!("{who}: {e}")),
                }
            }
            Client::WaitingTcp(config) => {
                match testbed.spawn_in(testbed.client(), "tcp-sender", move || {
                    stream::send(&config)
                }) {
                    Ok(thread) => Client::Sender(thread),
                    Err(e) => Client::Failed(format!("{who}: {e}")),
                }
            }
            other => other,
        };
    }
    // Every client to its end, then the servers.
    let mut errors = Vec::new();
    let mut ends = Vec::new();
    let mut all_finished = true;
    let mut ran_clients = Vec::with_capacity(clients.len());
    let mut sent_ok = Vec::with_capacity(clients.len());
    let mut send_errors = 0;
    for (client, (meta, _)) in clients.into_iter().zip(&metas) {
        let who = meta.names.who("client");
        let (host, ok) = match client {
            Client::Host(thread) => match thread.join() {
                Ok(run) => {
                    all_finished &= matches!(run.stop, emu::HostStop::Finished);
                    ends.push(run.end);
                    send_errors += run.stats.send_errors;
                    (Some(run.host), true)
                }
                Err(e) => {
                    errors.push(format!("{who}: {e}"));
                    (None, false)
                }
            },
            Client::Sender(thread) => match thread.join() {
                Ok(Ok(Ok(report))) => {
                    ends.push(clock.now());
                    if report.sent == 0 {
                        errors.push(format!("{who}: Linux TCP sent nothing"));
                    }
                    (None, report.sent > 0)
                }
                Ok(Ok(Err(e)) | Err(e)) => {
                    errors.push(format!("{who}: {e}"));
                    (None, false)
                }
                Err(_) => {
                    errors.push(format!("{who}: its thread panicked"));
                    (None, false)
                }
            },
            Client::Failed(error) => {
                errors.push(error);
                (None, false)
            }
            Client::Waiting(_) | Client::WaitingTcp(_) => (None, false),
        };
        ran_clients.push(host);
        sent_ok.push(ok);
    }
    server_stop.store(true, Ordering::Relaxed);
    let mut ran_servers = Vec::with_capacity(servers.len());
    let mut kernel = Vec::with_capacity(servers.len());
    for ((server, (meta, _)), ok) in servers.into_iter().zip(&metas).zip(&sent_ok) {
        let who = meta.names.who("server");
        match server {
            Server::Host(thread) => {
                match thread.join() {
                    Ok(run) => {
                        send_errors += run.stats.send_errors;
                        ran_servers.push(Some(run.host));
                    }
                    Err(e) => {
                        errors.push(format!("{who}: {e}"));
                        ran_servers.push(None);
                    }
                }
                kernel.push(None);
            }
            Server::Sink(thread) => {
                ran_servers.push(None);
                kernel.push(match thread.join() {
                    Ok(Ok(Ok((log, total)))) => Some(KernelTcpFlow {
                        log,
                        total,
                        completed: *ok,
                    }),
                    Ok(Ok(Err(e)) | Err(e)) => {
                        errors.push(format!("{who}: {e}"));
                        None
                    }
                    Err(_) => {
                        errors.push(format!("{who}: its thread panicked"));
                        None
                    }
                });
            }
        }
    }
    let end = ends.into_iter().max().unwrap_or_else(|| clock.now());
    let stop_name = if all_finished && errors.is_empty() {
        "finished"
    } else {
        "time_limit"
    };
    let mut result = TrialResult::new(variant, trial, seed, stop_name, end, 0);
    result.errors.extend(errors);
    let middle = middle.stop(&mut result);
    let ran = Ran {
        clients: ran_clients,
        servers: ran_servers,
        kernel,
        middle,
    };
    let metas: Vec<FlowMeta> = metas.into_iter().map(|(meta, _)| meta).collect();
    collect(prepared, &metas, &ran, &mut result);
    if send_errors > 0 {
        result.set("socket_send_errors", send_errors as f64);
    }
    Ok(result)
}

/// `time` on `clock` as an instant.
fn instant(clock: RealClock, time: Time) -> Instant {
    Instant::now() + clock.until(time)
}

/// A Linux TCP sink on the server node, listening on `addr` before this
/// returns; its reads are logged on the run's clock.
fn start_sink(
    testbed: &Testbed,
    addr: std::net::SocketAddr,
    congestion: &str,
    stop: &Arc<AtomicBool>,
) -> Result<SinkThread, String> {
    let clock = testbed.clock();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop = stop.clone();
    let congestion = congestion.to_string();
    let thread = testbed
        .spawn_in(testbed.server(), "tcp-sink", move || {
            let sink = match TcpSink::bind(addr, &congestion) {
                Ok(sink) => {
                    let _ = ready_tx.send(Ok(()));
                    sink
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return Err(e);
                }
            };
            let mut log = quic::DeliveryLog::default();
            let total = sink.run(stop, |before| log.record(clock.now(), before))?;
            Ok((log, total))
        })
        .map_err(|e| e.to_string())?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the TCP sink's thread could not enter its namespace".into()),
    }
}
