//! One trial: a plan of hosts and engines built once from a validated
//! [`Scenario`] ([`plan`]), run by one of two drivers — the simulator
//! ([`sim`]) or a real testbed ([`real`]) — and read back into a
//! [`TrialResult`] by the same code ([`collect`]), whichever ran it.
//!
//! The drivers differ only where they must: the simulator builds a chain
//! or a dumbbell in virtual time; real mode builds the chain as network
//! namespaces, drives the same hosts on UDP sockets ([`real_flows`]) and
//! the same middle engine on the node's interfaces ([`real_middle`]), and
//! reads link counters from the relay.

mod middle_cpu;
mod plan;
mod real;
mod real_flows;
mod real_middle;
mod sim;

pub use middle_cpu::keep_middle_cpu;
pub use real::testbed_spec;

use crate::outcome::{FlowNames, Mode, TrialResult, Window, jain_index};
use crate::scenario::{Scenario, ScenarioError, Traffic};
use crate::systems::Topology;
use crate::workloads::FlowView;
use netsim::{CapacityTrace, HopConfig, Host, Middlebox};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A variant made ready to run: its traces loaded and, in real mode, its
/// Linux congestion controls checked, so that trials cannot fail on
/// configuration.
#[derive(Clone)]
pub struct Prepared {
    scenario: Scenario,
    hops: Vec<HopConfig>,
    /// In real mode, the CPU the middle node's engine runs on alone
    /// ([`crate::RunOptions::middle_cpu`]).
    pub(crate) middle_cpu: Option<usize>,
    /// Record the middle engine's counters into each trial
    /// ([`TrialResult::middle`]).
    pub(crate) middle_stats: bool,
    /// The trials captured, and where their files go (`--capture`).
    pub(crate) capture: Option<crate::capture::VariantCapture>,
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
            middle_cpu: None,
            middle_stats: false,
            capture: None,
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

    /// The bottleneck's mean client → server capacity over `window`, in
    /// Mbit/s: its rate, or what its trace offers in that time (one
    /// 1500-byte packet per opportunity), so that a trace-driven
    /// bottleneck has a utilisation too.
    pub(crate) fn bottleneck_mbps(&self, window: Window) -> Option<f64> {
        let name = &self.scenario.bottleneck()?.name;
        let index = self
            .scenario
            .path
            .iter()
            .position(|hop| &hop.name == name)?;
        match &self.hops.get(index)?.forward.capacity {
            netsim::Capacity::Constant(rate) => Some(rate.bits_per_sec() as f64 / 1e6),
            netsim::Capacity::Trace(trace) if window.seconds() > 0.0 => {
                let opportunities = trace.opportunities_between(window.from, window.until);
                let bits = opportunities as f64 * f64::from(CapacityTrace::OPPORTUNITY_BYTES) * 8.0;
                Some(bits / window.seconds() / 1e6)
            }
            netsim::Capacity::Trace(_) | netsim::Capacity::Unlimited => None,
        }
    }

    /// Runs trial `trial` of variant `variant` in `mode`; with flows
    /// marked `alone`, runs them again without the others (or, in the
    /// simulator, takes that run from `shared` when another variant made
    /// the same one) and reports their throughput and RTT against that.
    pub fn run(&self, variant: &str, trial: u32, mode: Mode, shared: &AloneRuns) -> TrialResult {
        let mut result = self.run_once(variant, trial, mode);
        if let Some(baseline) = self.alone() {
            let run = || baseline.run_once(variant, trial, mode);
            let alone = match mode {
                Mode::Simulator => shared.get_or_run(baseline.alone_key(trial), run),
                // A real trial measures the machine at its time: never reused.
                Mode::Real => run(),
            };
            add_alone(&self.scenario, &mut result, &alone);
        }
        result
    }

    /// What decides an alone run's result: the scenario without what only
    /// names or reports it, and the trial (its seed).
    fn alone_key(&self, trial: u32) -> String {
        let mut scenario = self.scenario.clone();
        scenario.name.clear();
        scenario.title.clear();
        scenario.source = None;
        scenario.figure = None;
        scenario.trials = 0;
        scenario.plots.clear();
        format!("{trial} {scenario:?}")
    }

    fn run_once(&self, variant: &str, trial: u32, mode: Mode) -> TrialResult {
        match mode {
            Mode::Simulator => sim::run(self, variant, trial),
            Mode::Real => real::run(self, variant, trial),
        }
    }

    /// The same trial with only the flows marked `alone`, if any are.
    fn alone(&self) -> Option<Prepared> {
        if !self.scenario.flows().iter().any(|flow| flow.alone) {
            return None;
        }
        let mut scenario = self.scenario.clone();
        if let Traffic::Hosts { flows, .. } = &mut scenario.traffic {
            flows.retain(|flow| flow.alone);
            for flow in flows.iter_mut() {
                flow.alone = false;
            }
        }
        Some(Prepared {
            scenario,
            hops: self.hops.clone(),
            middle_cpu: self.middle_cpu,
            middle_stats: false,
            capture: None,
        })
    }
}

/// Alone runs (flows marked `alone`, run without the others) shared by the
/// variants of one simulator run. A simulated trial depends only on its
/// scenario and seed, so variants that differ only in the flows left out
/// (Figure 8's six pairs of three primaries) need each alone run once.
#[derive(Default)]
pub struct AloneRuns(Mutex<HashMap<String, Arc<OnceLock<TrialResult>>>>);

impl AloneRuns {
    /// The result stored under `key`, or `run`'s, stored. A second asker
    /// of a key being run waits for it.
    fn get_or_run(&self, key: String, run: impl FnOnce() -> TrialResult) -> TrialResult {
        let cell = {
            let mut runs = self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            runs.entry(key).or_default().clone()
        };
        cell.get_or_init(run).clone()
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
    /// Flow `index`'s delivery, if Linux TCP carried it.
    fn kernel_tcp(&self, _index: usize) -> Option<&KernelTcpFlow> {
        None
    }
}

/// What a Linux TCP flow delivered (real mode): the receiving
/// application's reads on the run's clock.
#[derive(Default)]
pub(crate) struct KernelTcpFlow {
    /// Bytes received by each bin edge.
    pub log: quic::DeliveryLog,
    /// Bytes received in all.
    pub total: u64,
    /// Whether the sender ran to its end without error.
    pub completed: bool,
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
    /// The `[[flows]]` entry it was expanded from by a `count`, if any.
    pub group: Option<String>,
    /// Whether Linux TCP carried it (real mode), not our hosts.
    pub kernel_tcp: bool,
}

/// Reads the system's, the workload's and the controllers' results out of
/// a finished trial.
pub(crate) fn collect(
    prepared: &Prepared,
    flows: &[FlowMeta],
    engines: &dyn Engines,
    result: &mut TrialResult,
) {
    let scenario = prepared.scenario();
    let system = scenario.middle.system();
    let middle = engines.middle();
    system.collect(middle, result);
    if let (true, Some(engine)) = (prepared.middle_stats, middle) {
        let now = netsim::Time::ZERO + std::time::Duration::from_secs_f64(result.end_s.max(0.0));
        result.middle = system.stats(engine, now);
    }
    let mut outcomes = Vec::with_capacity(flows.len());
    for (index, flow) in flows.iter().enumerate() {
        if flow.kernel_tcp {
            outcomes.push(collect_kernel_tcp(
                scenario,
                flow,
                engines.kernel_tcp(index),
                result,
            ));
            continue;
        }
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
            measure: scenario.measure,
            time_limit: netsim::Time::ZERO + scenario.time_limit,
            phases: &scenario.phases,
            rtt_intervals: scenario.rtt_intervals,
        };
        let workload = scenario
            .flows()
            .get(index)
            .map_or(&scenario.workload, |f| scenario.workload_of(f));
        outcomes.push(workload.kind().collect(&view, result));
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
    if scenario.measure.is_some() {
        add_window_metrics(prepared, flows, result);
    }
    add_group_means(flows, result);
    let sampled = flows.iter().find(|flow| flow.names.series);
    system.derive(middle, sampled.map(|flow| flow.addrs.0), result);
}

/// A Linux TCP flow's throughput over the measurement window and its
/// phases, by the same code and names as our hosts' (`throughput_mbps`
/// with the flow's suffix). The kernel's RTT samples are not read, so
/// such a flow has no RTT metrics.
fn collect_kernel_tcp(
    scenario: &Scenario,
    flow: &FlowMeta,
    delivered: Option<&KernelTcpFlow>,
    result: &mut TrialResult,
) -> crate::workloads::FlowOutcome {
    let Some(delivered) = delivered else {
        result
            .errors
            .push(format!("{}: no delivery recorded", flow.names.who("flow")));
        return crate::workloads::FlowOutcome::default();
    };
    if let Some(window) = scenario.measure {
        let until = netsim::Time::ZERO + scenario.time_limit;
        let (log, total) = (&delivered.log, delivered.total);
        crate::outcome::add_throughput(result, &flow.names, log, total, window, until);
        crate::outcome::add_phase_throughputs(result, &flow.names, log, total, &scenario.phases);
    }
    result.set(flow.names.metric("received_bytes"), delivered.total as f64);
    crate::workloads::FlowOutcome {
        completed: delivered.completed,
        goodput_mbps: None,
    }
}

/// For the flows of one `[[flows]]` entry with a `count`, the mean of
/// each metric they all have, named after the entry (`bitrate_mbps_1080p`
/// for the flows `1080p 1` … `1080p 3`).
fn add_group_means(flows: &[FlowMeta], result: &mut TrialResult) {
    let mut groups: Vec<(&str, Vec<&FlowMeta>)> = Vec::new();
    for flow in flows {
        let Some(group) = flow.group.as_deref() else {
            continue;
        };
        match groups.iter_mut().find(|(name, _)| *name == group) {
            Some((_, members)) => members.push(flow),
            None => groups.push((group, vec![flow])),
        }
    }
    for (group, members) in groups {
        let Some(first) = members.first() else {
            continue;
        };
        let bases: Vec<String> = result
            .metrics
            .keys()
            .filter_map(|key| key.strip_suffix(&first.names.suffix))
            .map(str::to_string)
            .collect();
        let suffix = format!("_{}", crate::outcome::slug(group));
        for base in bases {
            let values: Option<Vec<f64>> = members
                .iter()
                .map(|m| result.metrics.get(&m.names.metric(&base)).copied())
                .collect();
            if let Some(values) = values {
                let mean = values.iter().sum::<f64>() / values.len() as f64;
                result.set(format!("{base}{suffix}"), mean);
            }
        }
    }
}

/// With a measurement window: Jain's index over the flows' throughputs
/// in it (`jain_index_window`), their joint utilisation of the bottleneck
/// (`utilization`: over its rate, or over the mean capacity its trace
/// offers in the window), and each flow's 95th-percentile inflation ratio,
/// (p95 RTT − base RTT) / (buffer / bottleneck rate), the paper's §6.1.1
/// measure of buffer occupancy, with the flow's smallest RTT as its base
/// (`inflation_p95`). Jain's index and the utilisation also for each
/// phase of the window (`jain_index_<phase>`, `utilization_<phase>`).
fn add_window_metrics(prepared: &Prepared, flows: &[FlowMeta], result: &mut TrialResult) {
    let scenario = prepared.scenario();
    let metric = |result: &TrialResult, flow: &FlowMeta, name: &str| {
        result.metrics.get(&flow.names.metric(name)).copied()
    };
    let Some(whole) = scenario.measure else {
        return;
    };
    let bottleneck = scenario.bottleneck();
    let rate = bottleneck
        .and_then(|hop| hop.rate())
        .map(|r| r.bits_per_sec() as f64 / 1e6);
    // The whole window, then each phase (`jain_index_<phase>`,
    // `utilization_<phase>`).
    let windows = std::iter::once((
        "",
        whole,
        "jain_index_window".to_string(),
        "utilization".to_string(),
    ))
    .chain(scenario.phases.iter().map(|phase| {
        (
            phase.name.as_str(),
            phase.window,
            format!("jain_index_{}", phase.name),
            format!("utilization_{}", phase.name),
        )
    }));
    for (phase, window, jain, utilization) in windows {
        let throughput = match phase {
            "" => "throughput_mbps".to_string(),
            phase => format!("throughput_mbps_{phase}"),
        };
        let throughputs: Option<Vec<f64>> = flows
            .iter()
            .map(|flow| metric(result, flow, &throughput))
            .collect();
        if let Some(throughputs) = throughputs {
            if flows.len() > 1 {
                result.set(jain, jain_index(throughputs.iter().copied()));
            }
            if let Some(capacity) = prepared.bottleneck_mbps(window) {
                result.set(utilization, throughputs.iter().sum::<f64>() / capacity);
            }
        }
    }
    let drain_ms = match (bottleneck.and_then(|hop| hop.buffer_bytes()), rate) {
        (Some(bytes), Some(mbps)) => bytes as f64 * 8.0 / (mbps * 1e6) * 1e3,
        _ => return,
    };
    for flow in flows {
        if let (Some(p95), Some(base)) = (
            metric(result, flow, "rtt_p95_ms"),
            metric(result, flow, "rtt_min_ms"),
        ) {
            result.set(flow.names.metric("inflation_p95"), (p95 - base) / drain_ms);
        }
    }
}

/// The metrics of the flows marked `alone` against their run alone:
/// `throughput_mbps_alone`, `throughput_ratio` (the paper's primary
/// throughput ratio), `rtt_p95_ms_alone` and `rtt_p95_ratio` (Figure 7),
/// and per phase `throughput_ratio_<phase>`, each with the flow's suffix.
fn add_alone(scenario: &Scenario, result: &mut TrialResult, alone: &TrialResult) {
    for (index, flow) in scenario.flows().iter().enumerate() {
        let (true, Some(name)) = (flow.alone, &flow.name) else {
            continue;
        };
        let names = FlowNames::named(index, name, false);
        let phases = scenario.phases.iter().map(|phase| {
            (
                format!("throughput_mbps_{}", phase.name),
                format!("throughput_ratio_{}", phase.name),
            )
        });
        let pairs = [
            (
                "throughput_mbps".to_string(),
                "throughput_ratio".to_string(),
            ),
            ("rtt_p95_ms".to_string(), "rtt_p95_ratio".to_string()),
        ]
        .into_iter()
        .chain(phases);
        for (metric, ratio) in pairs {
            let (metric, ratio) = (metric.as_str(), ratio.as_str());
            let key = names.metric(metric);
            let Some(&by_itself) = alone.metrics.get(&key) else {
                continue;
            };
            result.set(names.metric(&format!("{metric}_alone")), by_itself);
            if let Some(&with) = result.metrics.get(&key)
                && by_itself > 0.0
            {
                result.set(names.metric(ratio), with / by_itself);
            }
        }
    }
    result
        .errors
        .extend(alone.errors.iter().map(|e| format!("alone: {e}")));
}

/// Competing flows: once every flow has its goodput, the total, each
/// flow's share and Jain's fairness index.
fn add_shares(
    flows: &[FlowMeta],
    outcomes: &[crate::workloads::FlowOutcome],
    result: &mut TrialResult,
) {
    result.completed = outcomes.len() == flows.len() && outcomes.iter().all(|o| o.completed);
    let goodputs: Option<Vec<f64>> = outcomes.iter().map(|o| o.goodput_mbps).collect();
    let Some(goodputs) = goodputs.filter(|g| g.len() == flows.len()) else {
        return;
    };
    let total: f64 = goodputs.iter().sum();
    result.set("goodput_mbps", total);
    for (flow, goodput) in flows.iter().zip(&goodputs) {
        let share = if total > 0.0 { goodput / total } else { 0.0 };
        result.set(flow.names.metric("share"), share);
    }
    result.set("jain_index", jain_index(goodputs.iter().copied()));
}
