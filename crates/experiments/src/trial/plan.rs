//! The one construction path of a trial's hosts, shared by the simulator
//! and real mode, by chains and dumbbells: per flow, the controllers (with
//! what a middle system feeds them), the workload's endpoints, and what
//! the system puts beside the client.

use super::{FlowMeta, Prepared};
use crate::outcome::FlowNames;
use crate::scenario::{Flow, Scenario};
use crate::systems::{Feeds, ServedClient, ServedFlow, Topology, TrialSetup};
use crate::workloads::{FlowSetup, Hosts, Side};
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
    /// Its own one-way delays on its client and server access hops (a
    /// dumbbell's), if set.
    pub access_delays: (Option<std::time::Duration>, Option<std::time::Duration>),
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
        // What the system passes between the flow's parts, if it serves it.
        let feeds = if served {
            system.feeds(&flow.client_controller, &flow.server_controller)
        } else {
            Feeds::default()
        };
        let client_quic = endpoint(
            &quic,
            &flow.client_controller,
            seed,
            Side::Client,
            &feeds,
            flow.client_ack_frequency,
        );
        let server_quic = endpoint(
            &quic,
            &flow.server_controller,
            seed,
            Side::Server,
            &feeds,
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
            let served = ServedClient {
                seed,
                names: &names,
                addrs: (flow.client, flow.server),
                feeds,
            };
            system.wrap_client(client, &served)
        } else {
            client
        };
        built.push(FlowHosts {
            client,
            server,
            start: Time::ZERO + flow.start,
            access_delays: flow.access_delays,
            meta: FlowMeta {
                names,
                addrs: (flow.client, flow.server),
                served,
                counters: client_quic.1.into_iter().chain(server_quic.1).collect(),
            },
        });
    }
    built
}

/// An endpoint's QUIC configuration with its controller built (with what
/// the system feeds it), and the controller's counters.
fn endpoint(
    quic: &QuicConfig,
    controller: &cc::Controller,
    seed: Seed,
    side: Side,
    feeds: &Feeds,
    ack_frequency: Option<quic::AckFrequency>,
) -> (
    QuicConfig,
    Option<std::sync::Arc<dyn cc::ControllerCounters>>,
) {
    let clock = SimClock::new();
    let mut context = cc::ControllerContext::new(seed, clock);
    let (datagrams, cids) = match side {
        Side::Client => {
            context.sidekick = feeds.sidekick.clone();
            (feeds.client_datagrams.clone(), feeds.client_cids.clone())
        }
        Side::Server => {
            context.tecc = feeds.server_datagrams.clone();
            (feeds.server_datagrams.clone(), None)
        }
    };
    let built = controller.build(&context);
    let mut config = quic
        .clone()
        .with_controller(built.factory)
        .with_clock(clock);
    if let Some(channel) = datagrams {
        config = config.with_datagram_channel(channel);
    }
    if let Some(log) = cids {
        config = config.with_cid_log(log);
    }
    if let Some(loss) = built.loss_detection {
        config = config.with_loss_detection(loss);
    }
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
