//! One trial: a plan of hosts and engines built from a validated
//! [`Scenario`] ([`plan`]), run by one of two drivers — the simulator
//! ([`sim`]) or a real testbed ([`real`]) — and read back into a
//! [`TrialResult`] by the same code ([`collect`]), whichever ran it.
//!
//! The drivers differ only where they must: the simulator builds a chain
//! or a dumbbell in virtual time; real mode builds the chain as network
//! namespaces, drives the same hosts on UDP sockets and the same middle
//! engine on the node's interfaces, and reads link counters from the
//! relay.

mod plan;
mod real;
mod sim;

pub use real::testbed_spec;

use crate::outcome::{FlowNames, Mode, TrialResult, jain_index};
use crate::scenario::{Scenario, ScenarioError, Traffic};
use crate::systems::Topology;
use crate::workloads::FlowView;
use netsim::{CapacityTrace, HopConfig, Host, Middlebox};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A variant made ready to run: its traces loaded and, in real mode, its
/// Linux congestion controls checked, so that trials cannot fail on
/// configuration.
#[derive(Clone)]
pub struct Prepared {
    scenario: Scenario,
    hops: Vec<HopConfig>,
}

impl Prepared {
    /// Loads the traces `scenario` names (relative to `file`'s directory,
    /// or bundled with pepkit) and, for `mode`, checks what only the
    /// machine can say. `context` prefixes errors (the variant).
    pub fn new(
        scenario: &Scenario,
        file: &Path,
        context: &str,
        mode: Mode,
    ) -> Result<Prepared, ScenarioError> {
        let fail = |field: String, message: String| ScenarioError::Field {
            path: file.to_path_buf(),
            context: context.to_string(),
            field,
            message,
        };
        let dir = match file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut traces: BTreeMap<&PathBuf, Arc<CapacityTrace>> = BTreeMap::new();
        for hop in &scenario.path {
            for (trace, field) in hop.traces() {
                if !traces.contains_key(trace) {
                    let loaded = load_trace(dir, trace)
                        .map_err(|message| fail(format!("hops.{}.{field}", hop.name), message))?;
                    traces.insert(trace, Arc::new(loaded));
                }
            }
        }
        let hops = scenario
            .path
            .iter()
            .map(|hop| hop.config(&|trace| traces[trace].clone()))
            .collect();
        if let (Mode::Real, Traffic::KernelTcp(tcp)) = (mode, &scenario.traffic) {
            for (field, name) in [
                ("client.controller", &tcp.client_controller),
                ("server.controller", &tcp.server_controller),
            ] {
                check_tcp_controller(name).map_err(|message| fail(field.into(), message))?;
            }
        }
        Ok(Prepared {
            scenario: scenario.clone(),
            hops,
        })
    }

    /// The scenario this runs.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The hops' link configurations, client first.
    pub(crate) fn hops(&self) -> &[HopConfig] {
        &self.hops
    }

    /// Runs trial `trial` of variant `variant` in `mode`.
    pub fn run(&self, variant: &str, trial: u32, mode: Mode) -> TrialResult {
        match mode {
            Mode::Simulator => sim::run(self, variant, trial),
            Mode::Real => real::run(self, variant, trial),
        }
    }
}

/// A mahimahi trace by the name a scenario gives: a file relative to
/// `dir` (plain or `.gz`), or else one bundled with pepkit
/// (`cellular/TMobile-LTE-short.up`; `traces/` in the repository).
fn load_trace(dir: &Path, trace: &Path) -> Result<CapacityTrace, String> {
    let path = dir.join(trace);
    let bundled = trace
        .to_str()
        .and_then(|name| traces::compressed(name).ok());
    let loaded = match bundled {
        Some(gz) if !path.exists() => CapacityTrace::from_bytes(gz),
        _ if path.exists() => CapacityTrace::from_file(&path),
        _ => {
            let names: Vec<&str> = traces::names().collect();
            return Err(format!(
                "{}: no such file relative to {}, and pepkit bundles no trace of that name \
                 (bundled: {})",
                trace.display(),
                dir.display(),
                names.join(", ")
            ));
        }
    };
    let at = |error| {
        format!(
            "{} (relative to {}): {error}",
            trace.display(),
            dir.display()
        )
    };
    loaded.map_err(at)
}

/// Whether Linux offers TCP congestion control `name` (skipped where the
/// kernel's list cannot be read: the run will say).
fn check_tcp_controller(name: &str) -> Result<(), String> {
    let Ok(list) = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
    else {
        return Ok(());
    };
    if list.split_whitespace().any(|known| known == name) {
        Ok(())
    } else {
        Err(format!(
            "TCP congestion control {name:?} is not available in this kernel; it offers {}",
            list.trim()
        ))
    }
}

/// Where a finished trial's engines are read from: the simulator's nodes,
/// or what real mode ran.
pub(crate) trait Engines {
    /// Flow `index`'s client host, as built (with what a system put
    /// beside it).
    fn client(&self, index: usize) -> Option<&dyn Host>;
    /// Flow `index`'s server host.
    fn server(&self, index: usize) -> Option<&dyn Host>;
    /// The middle system's engine, if it ran one.
    fn middle(&self) -> Option<&dyn Middlebox>;
}

/// What a trial's flows need besides their hosts, to be read back.
pub(crate) struct FlowMeta {
    /// How it is named.
    pub names: FlowNames,
    /// Its client's and server's addresses.
    pub addrs: (std::net::SocketAddr, std::net::SocketAddr),
    /// Whether the middle system serves it.
    pub served: bool,
    /// The client's and the server's controllers' counters, for those
    /// that keep any.
    pub counters: Vec<Arc<dyn cc::ControllerCounters>>,
}

/// Reads the system's, the workload's and the controllers' results out of
/// a finished trial.
pub(crate) fn collect(
    scenario: &Scenario,
    flows: &[FlowMeta],
    engines: &dyn Engines,
    result: &mut TrialResult,
) {
    let system = scenario.middle.system();
    let middle = engines.middle();
    system.collect(middle, result);
    let mut outcomes = Vec::with_capacity(flows.len());
    for (index, flow) in flows.iter().enumerate() {
        let (Some(client), Some(server)) = (engines.client(index), engines.server(index)) else {
            result
                .errors
                .push(format!("{}: the hosts are missing", flow.names.who("flow")));
            return;
        };
        let (client, relayed) = if flow.served {
            system.open_flow(client, middle, flow.addrs, &flow.names, result)
        } else {
            (client, None)
        };
        let view = FlowView {
            client,
            server,
            relayed,
            names: &flow.names,
        };
        outcomes.push(scenario.workload.kind().collect(&view, result));
        for (name, value) in flow.counters.iter().flat_map(|c| c.counters()) {
            result.set(flow.names.metric(&name), value);
        }
    }
    let topology = match &scenario.traffic {
        Traffic::Hosts { topology, .. } => *topology,
        Traffic::KernelTcp(_) | Traffic::Peers(_) => Topology::Chain,
    };
    match topology {
        Topology::Chain => result.completed = outcomes.iter().all(|o| o.completed),
        Topology::Dumbbell => add_shares(flows, &outcomes, result),
    }
    system.derive(middle, result);
}

/// Competing flows: once every flow has its goodput, the total, each
/// flow's share and Jain's fairness index.
fn add_shares(
    flows: &[FlowMeta],
    outcomes: &[crate::workloads::FlowOutcome],
    result: &mut TrialResult,
) {
    let goodputs: Option<Vec<f64>> = outcomes.iter().map(|o| o.goodput_mbps).collect();
    let Some(goodputs) = goodputs.filter(|g| g.len() == flows.len()) else {
        return;
    };
    result.completed = true;
    let total: f64 = goodputs.iter().sum();
    result.set("goodput_mbps", total);
    for (flow, goodput) in flows.iter().zip(&goodputs) {
        let share = if total > 0.0 { goodput / total } else { 0.0 };
        result.set(flow.names.metric("share"), share);
    }
    result.set("jain_index", jain_index(goodputs.iter().copied()));
}
