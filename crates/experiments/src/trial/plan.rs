//! The one construction path of a trial's hosts, shared by the simulator
//! and real mode, by chains and dumbbells: per flow, the controllers (with
//! what a middle system feeds them), the workload's endpoints, and what
//! the system puts beside the client.

use super::{FlowMeta, Prepared};
use crate::outcome::FlowNames;
use crate::scenario::{Flow, Scenario};
use crate::systems::{ServedFlow, Topology, TrialSetup};
use crate::workloads::{FlowSetup, Hosts};
use netsim::{Host, Seed, Time};
use quic::{QuicConfig, SimClock};

/// One flow, built.
pub(crate) struct FlowHosts {
    /// Its client, with what the middle system put beside it.
    pub client: Box<dyn Host>,
    /// Its server.
    pub server: Box<dyn Host>,
    /// When the client starts.
    pub start: Time,
    /// What collecting its results needs.
    pub meta: FlowMeta,
}

/// The configuration every QUIC endpoint of trial `trial` starts from.
pub(crate) fn base_quic(scenario: &Scenario, seed: Seed) -> QuicConfig {
    let mut quic = QuicConfig::new(seed);
    if let Some(bytes) = scenario.max_udp_payload {
        quic = quic.with_max_udp_payload(bytes);
    }
    if let Some(interval) = scenario.sample_interval {
        quic = quic.with_sampling(interval);
    }
    quic
}

/// How flow `index` is named: a chain's one flow is unnamed.
fn names(index: usize, flow: &Flow) -> FlowNames {
    match &flow.name {
        None => FlowNames::single(),
        Some(name) => FlowNames::named(index, name),
    }
}

/// Every flow's hosts for trial `trial`.
pub(crate) fn flows(prepared: &Prepared, trial: u32) -> Vec<FlowHosts> {
    let scenario = prepared.scenario();
    let seed = scenario.trial_seed(trial);
    let quic = base_quic(scenario, seed);
    let system = scenario.middle.system();
    let workload = scenario.workload.kind();
    let mut built = Vec::new();
    for (index, flow) in scenario.flows().iter().enumerate() {
        let names = names(index, flow);
        let served = flow.served;
        // What the system feeds the client's controller, if it reads it.
        let input = flow.client_controller.requires().map(|(input, _)| input);
        let signals = (served && input.is_some() && system.provides() == input)
            .then(sidekick::Signals::default);
        let client_quic = endpoint(
            &quic,
            &flow.client_controller,
            seed,
            signals.clone(),
            flow.client_ack_frequency,
        );
        let server_quic = endpoint(
            &quic,
            &flow.server_controller,
            seed,
            None,
            flow.server_ack_frequency,
        );
        let Hosts { client, server } = workload.endpoints(&FlowSetup {
            seed,
            client: flow.client,
            server: flow.server,
            client_quic: client_quic.0,
            server_quic: server_quic.0,
            server_min_ack_delay: flow.server_min_ack_delay,
            size: flow.size,
        });
        let client = if served {
            system.wrap_client(client, seed, &names, signals)
        } else {
            client
        };
        built.push(FlowHosts {
            client,
            server,
            start: Time::ZERO + flow.start,
            meta: FlowMeta {
                names,
                addrs: (flow.client, flow.server),
                served,
                counters: client_quic.1,
            },
        });
    }
    built
}

/// An endpoint's QUIC configuration with its controller built, and the
/// controller's counters.
fn endpoint(
    quic: &QuicConfig,
    controller: &cc::Controller,
    seed: Seed,
    sidekick: Option<sidekick::Signals>,
    ack_frequency: Option<quic::AckFrequency>,
) -> (
    QuicConfig,
    Option<std::sync::Arc<dyn cc::ControllerCounters>>,
) {
    let clock = SimClock::new();
    let mut context = cc::ControllerContext::new(seed, clock);
    context.sidekick = sidekick;
    let built = controller.build(&context);
    let mut config = quic
        .clone()
        .with_controller(built.factory)
        .with_clock(clock);
    if let Some(frequency) = ack_frequency {
        config = config.with_ack_frequency(frequency);
    }
    (config, built.counters)
}

/// Runs `build` with the trial as the middle system sees it: the flows it
/// serves and the layout.
pub(crate) fn with_setup<T>(
    prepared: &Prepared,
    trial: u32,
    build: impl FnOnce(&TrialSetup<'_>) -> T,
) -> T {
    let scenario = prepared.scenario();
    let seed = scenario.trial_seed(trial);
    let quic = base_quic(scenario, seed);
    let (topology, tcp) = match &scenario.traffic {
        crate::scenario::Traffic::Hosts { topology, .. } => (*topology, None),
        crate::scenario::Traffic::KernelTcp(tcp) => (Topology::Chain, Some(tcp)),
        crate::scenario::Traffic::Peers(_) => (Topology::Chain, None),
    };
    let flows: Vec<&Flow> = scenario.flows().iter().filter(|flow| flow.served).collect();
    let served: Vec<ServedFlow<'_>> = flows
        .iter()
        .map(|flow| ServedFlow {
            server: flow.server,
            client_controller: &flow.client_controller,
            server_controller: &flow.server_controller,
        })
        .collect();
    build(&TrialSetup {
        seed,
        quic: &quic,
        flows: &served,
        topology,
        tcp,
    })
}
