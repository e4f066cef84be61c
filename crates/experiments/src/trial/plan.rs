//! The one construction path of a trial's hosts, shared by the simulator
//! and real mode, by chains and dumbbells: per flow, the controllers (with
//! what a middle system feeds them), the workload's endpoints, and what
//! the system puts beside the client.

use super::FlowMeta;
use crate::capture::TrialCapture;
use crate::outcome::FlowNames;
use crate::scenario::{Capacity, Flow, Scenario, Traffic};
use crate::systems::{Feeds, ServedClient, ServedFlow, Topology, TrialSetup};
use crate::workloads::{FlowSetup, Hosts, Side};
use netsim::{Host, Seed, Time};
use quic::{QuicConfig, SimClock};
use std::time::Duration;

/// One flow, built.
pub(crate) struct FlowHosts {
    /// Who carries it.
    pub endpoints: Endpoints,
    /// When the client starts.
    pub start: Time,
    /// Its own one-way delays on its client and server access hops (a
    /// dumbbell's), if set.
    pub access_delays: (Option<std::time::Duration>, Option<std::time::Duration>),
    /// What collecting its results needs.
    pub meta: FlowMeta,
}

/// Who carries a flow.
pub(crate) enum Endpoints {
    /// Our hosts.
    Hosts {
        /// Its client, with what the middle system put beside it.
        client: Box<dyn Host>,
        /// Its server.
        server: Box<dyn Host>,
    },
    /// Linux TCP with this congestion control (real mode only): a bulk
    /// upload until the flow's end.
    KernelTcp {
        /// The congestion control, as Linux names it.
        congestion: String,
        /// When the flow ends, or how many bytes it sends.
        amount: crate::workloads::Amount,
    },
}

/// The configuration every QUIC endpoint of trial `trial` starts from.
fn base_quic(scenario: &Scenario, seed: Seed) -> QuicConfig {
    let mut quic = QuicConfig::new(seed);
    if let Some(bytes) = scenario.max_udp_payload {
        quic = quic.with_max_udp_payload(bytes);
    }
    if let Some(interval) = scenario.sample_interval {
        quic = quic.with_sampling(interval);
    }
    if let Some(window) = scenario.measure {
        quic = quic.with_rtt_window(window.from, window.until);
        if scenario.rtt_intervals.is_some() {
            quic = quic.with_rtt_times();
        }
    }
    if let Some(bytes) = transport_window(scenario) {
        let receive = u32::try_from(bytes).unwrap_or(u32::MAX);
        quic = quic.with_receive_window(receive).with_send_window(bytes);
    }
    quic
}

/// noq-proto's stream receive window (1.25 MB) and send window (10 MB).
const NOQ_WINDOWS: (u64, u64) = (1_250_000, 10_000_000);

/// QUIC's flow-control and send windows: the scenario's or, on a path
/// whose bandwidth-delay product alone would need more than noq-proto's
/// stream window (1.25 MB, twice the BDP), twice what the path can hold
/// (the BDP of its bottleneck plus the bottleneck's buffer), so that
/// neither window limits a flow. `None` keeps noq-proto's defaults, which
/// are enough for paths of smaller BDP unless their buffers hold over a
/// megabyte (give `transport_window` then). A path with a trace keeps the
/// defaults too: its rate is not one number, and a window sized from its
/// fixed-rate hops would let a lossy trace hop open more gaps in a stream
/// than noq-proto's receiver keeps (1024; it then aborts the connection).
fn transport_window(scenario: &Scenario) -> Option<u64> {
    if let Some(bytes) = scenario.transport_window {
        return Some(bytes);
    }
    let traced = |capacity: &Capacity| matches!(capacity, Capacity::Trace { .. });
    if scenario
        .path
        .iter()
        .any(|hop| traced(&hop.forward) || traced(&hop.reverse))
    {
        return None;
    }
    let bottleneck = scenario.bottleneck()?;
    let rate = bottleneck.rate()?.bits_per_sec();
    let rtt = 2 * scenario.path.iter().map(|hop| hop.delay).sum::<Duration>();
    let bdp = (rate as f64 / 8.0 * rtt.as_secs_f64()) as u64;
    if 2 * bdp <= NOQ_WINDOWS.0 {
        return None;
    }
    let needed = 2 * (bdp + bottleneck.buffer_bytes().unwrap_or(0));
    Some(needed.max(NOQ_WINDOWS.1))
}

/// How flow `index` is named (a chain's one flow is unnamed), and
/// whether its series is recorded.
fn names(scenario: &Scenario, index: usize, flow: &Flow) -> FlowNames {
    match &flow.name {
        None => FlowNames::single(),
        Some(name) => FlowNames::named(index, name, index == scenario.sample_flow),
    }
}

/// A trial, planned once for its driver: its seed, its flows built, and
/// what its middle system runs.
pub(crate) struct Plan<M> {
    /// The trial's seed.
    pub seed: Seed,
    /// Every flow, built.
    pub flows: Vec<FlowHosts>,
    /// What the middle system runs, in the form the driver asked for
    /// (its engine in the simulator, how it runs on a testbed in real
    /// mode).
    pub middle: M,
}

impl<M> Plan<M> {
    /// Plans trial `trial` of `scenario`: its flows, then what its middle
    /// system runs, which `middle` builds (from the trial as the system
    /// sees it).
    /// With `capture`, every QUIC endpoint of ours logs its TLS secrets
    /// and its qlog there (which changes nothing else).
    pub(crate) fn new(
        scenario: &Scenario,
        trial: u32,
        capture: Option<&TrialCapture>,
        middle: impl FnOnce(&TrialSetup<'_>) -> M,
    ) -> Plan<M> {
        let seed = scenario.trial_seed(trial);
        let mut quic = base_quic(scenario, seed);
        if let Some(capture) = capture {
            quic = quic.with_keylog(capture.keylog.clone());
        }
        let flows = flows(scenario, seed, &quic, capture);
        if let Some(capture) = capture {
            quic = capture.observe(quic, "middle");
        }
        let middle = with_setup(scenario, seed, &quic, middle);
        Plan {
            seed,
            flows,
            middle,
        }
    }
}

/// Every flow's hosts for the trial of seed `seed`, from `quic`.
fn flows(
    scenario: &Scenario,
    seed: Seed,
    quic: &QuicConfig,
    capture: Option<&TrialCapture>,
) -> Vec<FlowHosts> {
    let system = scenario.middle.system();
    let mut built = Vec::new();
    for (index, flow) in scenario.flows().iter().enumerate() {
        let names = names(scenario, index, flow);
        if let Some(congestion) = &flow.kernel_tcp {
            // Validation allows Linux TCP flows for transfers only.
            let transfer = scenario.workload_of(flow).traits().transfer;
            let amount = flow
                .amount
                .or(transfer.map(|transfer| transfer.amount))
                .unwrap_or(crate::workloads::Amount::Until(crate::units::Span(
                    scenario.time_limit,
                )));
            built.push(FlowHosts {
                endpoints: Endpoints::KernelTcp {
                    congestion: congestion.clone(),
                    amount,
                },
                start: Time::ZERO + flow.start,
                access_delays: flow.access_delays,
                meta: FlowMeta {
                    names,
                    addrs: (flow.client, flow.server),
                    served: false,
                    counters: Vec::new(),
                    group: flow.group.clone(),
                    kernel_tcp: true,
                },
            });
            continue;
        }
        let served = flow.served;
        let workload = scenario.workload_of(flow).kind();
        let sender = workload.traits().data_sender;
        // What the system passes between the flow's parts, if it serves it.
        let feeds = if served {
            system.feeds(&flow.client_controller, &flow.server_controller)
        } else {
            Feeds::default()
        };
        // The handle the workload (or the flow's switches) drive, given to
        // the data sender's controller.
        let drives =
            workload.provides() == Some(cc::Input::UtilityHandle) || !flow.switch.is_empty();
        let utility = drives.then(|| cc::UtilityHandle::new(cc::Utility::Primary));
        let (client_utility, server_utility) = match sender {
            Side::Client => (utility.clone(), None),
            Side::Server => (None, utility.clone()),
        };
        // Each endpoint's qlog, named by its role (`client`, `a-server`…).
        let logged = |side: &str| match capture {
            Some(capture) => {
                let role = crate::outcome::slug(&names.who(side));
                capture.observe(quic.clone(), &role)
            }
            None => quic.clone(),
        };
        // Both endpoints offer QUIC timestamps when either controller asks
        // for one-way delays (LEDBAT's default), and only then.
        let timestamps =
            flow.client_controller.wants_timestamps() || flow.server_controller.wants_timestamps();
        let offered = |config: QuicConfig| match timestamps {
            true => config.with_timestamps(),
            false => config,
        };
        let client_quic = endpoint(
            &offered(logged("client")),
            &flow.client_controller,
            seed.derive(&names.label("controller/client")),
            (Side::Client, &feeds, client_utility),
            (flow.client_ack_frequency, flow.client_loss_detection),
        );
        let server_quic = endpoint(
            &offered(logged("server")),
            &flow.server_controller,
            seed.derive(&names.label("controller/server")),
            (Side::Server, &feeds, server_utility),
            (flow.server_ack_frequency, flow.server_loss_detection),
        );
        let Hosts { client, server } = workload.endpoints(&FlowSetup {
            seed,
            workload_seed: seed.derive(&names.label("workload")),
            client: flow.client,
            server: flow.server,
            client_quic: client_quic.0,
            server_quic: server_quic.0,
            server_min_ack_delay: flow.server_min_ack_delay,
            amount: flow.amount,
            start: flow.start,
            utility,
            switch: flow
                .switch
                .iter()
                .map(|&(at, to)| (Time::ZERO + at, to))
                .collect(),
        });
        let client = if served {
            let tunnel_quic = logged("tunnel-client");
            let served = ServedClient {
                quic: &tunnel_quic,
                seed,
                data_sender: sender,
                names: &names,
                addrs: (flow.client, flow.server),
                feeds,
            };
            system.wrap_client(client, &served)
        } else {
            client
        };
        built.push(FlowHosts {
            endpoints: Endpoints::Hosts { client, server },
            start: Time::ZERO + flow.start,
            access_delays: flow.access_delays,
            meta: FlowMeta {
                names,
                addrs: (flow.client, flow.server),
                served,
                counters: client_quic.1.into_iter().chain(server_quic.1).collect(),
                group: flow.group.clone(),
                kernel_tcp: false,
            },
        });
    }
    built
}

/// An endpoint's QUIC configuration with its controller built (with what
/// the system feeds it and the application's utility handle, where
/// given), its ACK-frequency request and its loss thresholds (the
/// scenario's or its controller's; validation lets only one set them), and
/// the controller's counters.
fn endpoint(
    quic: &QuicConfig,
    controller: &cc::Controller,
    seed: Seed,
    (side, feeds, utility): (Side, &Feeds, Option<cc::UtilityHandle>),
    (ack_frequency, loss_detection): (Option<quic::AckFrequency>, Option<quic::LossDetection>),
) -> (
    QuicConfig,
    Option<std::sync::Arc<dyn cc::ControllerCounters>>,
) {
    let clock = SimClock::new();
    let mut context = cc::ControllerContext::new(seed, clock);
    context.utility = utility;
    let (datagrams, cids) = match side {
        Side::Client => {
            context.signals = feeds.client_signals.clone();
            (feeds.client_datagrams.clone(), feeds.client_cids.clone())
        }
        Side::Server => {
            context.signals = feeds.server_signals.clone();
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
    if let Some(loss) = built.loss_detection.or(loss_detection) {
        config = config.with_loss_detection(loss);
    }
    if let Some(frequency) = ack_frequency {
        config = config.with_ack_frequency(frequency);
    }
    (config, built.counters)
}

/// Runs `build` with the trial as the middle system sees it: the flows it
/// serves and the layout.
fn with_setup<T>(
    scenario: &Scenario,
    seed: Seed,
    quic: &QuicConfig,
    build: impl FnOnce(&TrialSetup<'_>) -> T,
) -> T {
    let (topology, tcp) = match &scenario.traffic {
        Traffic::Hosts { topology, .. } => (*topology, None),
        Traffic::KernelTcp(tcp) => (Topology::Chain, Some(tcp)),
        Traffic::Peers(_) => (Topology::Chain, None),
    };
    let served: Vec<ServedFlow<'_>> = scenario
        .flows()
        .iter()
        .filter(|flow| flow.served)
        .map(|flow| ServedFlow {
            server: flow.server,
            data_sender: scenario.workload_of(flow).kind().traits().data_sender,
            client_controller: &flow.client_controller,
            server_controller: &flow.server_controller,
        })
        .collect();
    build(&TrialSetup {
        seed,
        quic,
        flows: &served,
        topology,
        tcp,
        router: None,
    })
}
