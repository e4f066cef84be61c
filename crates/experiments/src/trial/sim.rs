//! The simulator driver: the trial's hosts on a chain, or on a dumbbell
//! for competing flows, with the middle system's engine on its node, run
//! in virtual time.
//!
//! ```text
//! chain:     client ─ path[0] ─ node 0 ─ path[1] ─ … ─ server
//! dumbbell:  client 0 ─ path[0] ─┐                         ┌─ 10 µs ─ server 0
//!            client 1 ─ path[0] ─┼─ left ═ path[1] ═ right ─┼─ 10 µs ─ server 1
//! ```
//!
//! On a dumbbell the system runs on the left router; each receiver's
//! access hop is fast and short (10 µs, 10 Gbit/s, no buffer limit, no
//! loss), so that the path of every flow is its access hop and the
//! bottleneck, as in the chain.

use super::plan::{Endpoints, FlowHosts, Plan};
use super::{Engines, FlowMeta, Prepared, collect};
use crate::capture::TrialCapture;
use crate::outcome::{LinkReport, TrialResult};
use crate::scenario::{Scenario, Traffic};
use crate::systems::{NodeTruth, Topology};
use netsim::{
    CaptureId, CapturePoint, ChainSpec, DumbbellSpec, FlowPair, HopConfig, HopLinks, Host,
    HostSpec, LinkConfig, MiddleSpec, Middlebox, NodeId, Rate, Simulator, StopReason, Time,
};
use std::time::Duration;

/// Every receiver's access hop on a dumbbell: fast and short, so that it
/// changes nothing, unless the flow gives it a delay.
fn receiver_access(delay: Option<Duration>) -> HopConfig {
    let delay = delay.unwrap_or(Duration::from_micros(10));
    let link = LinkConfig::constant(delay, Rate::from_gbps(10));
    HopConfig::new(link.clone(), link)
}

/// A hop with both directions' delay replaced, if a delay is given.
fn with_delay(hop: &HopConfig, delay: Option<Duration>) -> HopConfig {
    let mut hop = hop.clone();
    if let Some(delay) = delay {
        hop.forward.delay = delay;
        hop.reverse.delay = delay;
    }
    hop
}

/// The nodes and links to read back after the run.
struct Built {
    clients: Vec<NodeId>,
    servers: Vec<NodeId>,
    middle: Option<NodeId>,
    /// Each hop's links by the name its reports use.
    hops: Vec<(String, HopLinks)>,
}

/// A finished simulation's engines.
struct Simulated<'a> {
    sim: &'a Simulator,
    built: &'a Built,
}

impl Engines for Simulated<'_> {
    fn client(&self, index: usize) -> Option<&dyn Host> {
        self.sim.host_dyn(*self.built.clients.get(index)?)
    }

    fn server(&self, index: usize) -> Option<&dyn Host> {
        self.sim.host_dyn(*self.built.servers.get(index)?)
    }

    fn middle(&self) -> Option<&dyn Middlebox> {
        self.sim.middlebox_dyn(self.built.middle?)
    }
}

/// Runs trial `trial` of `variant` in the simulator.
pub(crate) fn run(prepared: &Prepared, variant: &str, trial: u32) -> TrialResult {
    let scenario = prepared.scenario();
    let topology = match &scenario.traffic {
        Traffic::Hosts { topology, .. }
            if scenario
                .flows()
                .iter()
                .all(|flow| flow.kernel_tcp.is_none()) =>
        {
            *topology
        }
        _ => {
            let why = scenario
                .unsupported_in(crate::outcome::Mode::Simulator)
                .unwrap_or("real mode only")
                .to_string();
            return TrialResult::failed(variant, trial, scenario.trial_seed(trial), why);
        }
    };
    let system = scenario.middle.system();
    let capture = TrialCapture::new(prepared.capture.as_ref(), trial);
    let Plan {
        seed,
        flows,
        middle: engine,
    } = Plan::new(scenario, trial, capture.as_ref(), |setup| {
        system.middlebox(setup)
    });
    let middle = |name: &str| match engine {
        Some(engine) => {
            let spec = MiddleSpec::with_boxed(name, engine);
            match system.address() {
                Some(addr) => spec.with_addr(addr),
                None => spec,
            }
        }
        None => MiddleSpec::forwarder(name),
    };
    let hops = prepared.hops();
    let mut sim = Simulator::new(seed);
    let (built, metas) = match topology {
        Topology::Chain => chain(&mut sim, scenario, hops, flows, middle),
        Topology::Dumbbell => dumbbell(&mut sim, scenario, hops, flows, middle),
    };
    // The hops on either side of the system's node, if it measures itself
    // against the truth.
    let around = match topology {
        Topology::Chain if system.wants_truth() => built
            .hops
            .get(scenario.middle_at)
            .zip(built.hops.get(scenario.middle_at + 1))
            .map(|((_, client), (_, server))| (*client, *server)),
        _ => None,
    };
    if let Some((client, server)) = around {
        for link in [
            client.forward,
            client.reverse,
            server.forward,
            server.reverse,
        ] {
            sim.record_fates(link);
        }
    }
    let taps = capture
        .as_ref()
        .map(|capture| tap(&mut sim, scenario, &built, capture.hops()))
        .unwrap_or_default();
    let outcome = sim.run_until(Time::ZERO + scenario.time_limit);
    if let Some(capture) = capture {
        let pcaps = taps
            .into_iter()
            .filter_map(|(name, id)| Some((name, sim.take_pcapng(id)?)))
            .collect();
        capture.write(pcaps);
    }
    let stop = match outcome.reason {
        StopReason::AllFinished => "finished",
        StopReason::TimeLimit => "time_limit",
        StopReason::Idle => "idle",
    };
    let mut result = TrialResult::new(variant, trial, seed, stop, outcome.end, sim.stats().events);
    let links = built.hops.iter().flat_map(|(name, links)| {
        LinkReport::hop(
            name,
            sim.link_stats(links.forward),
            sim.link_stats(links.reverse),
        )
    });
    result.add_links(links.collect());
    let engines = Simulated {
        sim: &sim,
        built: &built,
    };
    collect(prepared, &metas, &engines, &mut result);
    if let Some((client, server)) = around {
        let e2e_rtt = hops
            .iter()
            .map(|hop| hop.forward.delay + hop.reverse.delay)
            .sum();
        let truth = NodeTruth {
            to_client: sim.fates(client.reverse),
            from_client: sim.fates(client.forward),
            to_server: sim.fates(server.forward),
            from_server: sim.fates(server.reverse),
            e2e_rtt,
        };
        system.collect_truth(engines.middle(), &truth, &mut result);
    }
    result
}

/// Attaches a pcapng capture to each hop of `hops` (indices into the
/// path): both directions, each an interface, every packet as it enters
/// the link (what the link then loses included). On a dumbbell the access
/// hop `path[0]` is each flow's own copy, one file each.
fn tap(
    sim: &mut Simulator,
    scenario: &Scenario,
    built: &Built,
    hops: &[usize],
) -> Vec<(String, CaptureId)> {
    let mut taps = Vec::new();
    for &hop in hops {
        let Some(path) = scenario.path.get(hop) else {
            continue;
        };
        let copies = built.hops.iter().filter(|(name, _)| {
            name == &path.name
                || name
                    .strip_prefix(path.name.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
        });
        for (name, links) in copies {
            let interfaces = [
                (
                    links.forward,
                    CapturePoint::Offered,
                    format!("{name} forward"),
                ),
                (
                    links.reverse,
                    CapturePoint::Offered,
                    format!("{name} reverse"),
                ),
            ];
            taps.push((name.clone(), sim.capture_pcapng(&interfaces)));
        }
    }
    taps
}

/// A chain: the one flow's client, the path with a node between each two
/// hops (node `middle_at` runs the system), the server.
fn chain(
    sim: &mut Simulator,
    scenario: &Scenario,
    hops: &[HopConfig],
    flows: Vec<FlowHosts>,
    middle: impl FnOnce(&str) -> MiddleSpec,
) -> (Built, Vec<FlowMeta>) {
    let mut metas = Vec::new();
    let mut spec = None;
    for flow in flows {
        // Linux TCP flows never reach the simulator (`run` refuses them).
        let Endpoints::Hosts { client, server } = flow.endpoints else {
            continue;
        };
        let client = HostSpec::boxed("client", flow.meta.addrs.0.ip(), client);
        let server = HostSpec::boxed("server", flow.meta.addrs.1.ip(), server);
        spec = Some(ChainSpec::new(client, server));
        metas.push(flow.meta);
    }
    let Some(mut spec) = spec else {
        return (empty(), metas);
    };
    let mut middle = Some(middle);
    for (index, hop) in hops.iter().enumerate() {
        if index > 0 {
            let name = format!("middle{}", index - 1);
            let node = match middle.take_if(|_| index - 1 == scenario.middle_at) {
                Some(middle) => middle(&name),
                None => MiddleSpec::forwarder(name),
            };
            spec = spec.middle(node);
        }
        spec = spec.hop(hop.clone());
    }
    let Ok(chain) = sim.add_chain(spec) else {
        return (empty(), metas);
    };
    let built = Built {
        clients: vec![chain.sender],
        servers: vec![chain.receiver],
        middle: chain.middles.get(scenario.middle_at).copied(),
        hops: scenario
            .path
            .iter()
            .map(|hop| hop.name.clone())
            .zip(chain.hops.iter().copied())
            .collect(),
    };
    (built, metas)
}

/// A dumbbell: each flow's client behind its own access hop (`path[0]`),
/// the shared bottleneck (`path[1]`) between the left router (running the
/// system) and the right one, each server behind a short, fast hop.
fn dumbbell(
    sim: &mut Simulator,
    scenario: &Scenario,
    hops: &[HopConfig],
    flows: Vec<FlowHosts>,
    middle: impl FnOnce(&str) -> MiddleSpec,
) -> (Built, Vec<FlowMeta>) {
    let (Some(access), Some(bottleneck)) = (hops.first(), hops.get(1)) else {
        return (empty(), Vec::new());
    };
    let mut spec = DumbbellSpec::new(bottleneck.clone());
    let mut metas = Vec::new();
    for flow in flows {
        let who = |side: &str| flow.meta.names.who(side);
        let Endpoints::Hosts { client, server } = flow.endpoints else {
            continue;
        };
        let client = HostSpec::boxed(who("client"), flow.meta.addrs.0.ip(), client);
        let server = HostSpec::boxed(who("server"), flow.meta.addrs.1.ip(), server);
        let (client_delay, server_delay) = flow.access_delays;
        spec = spec.pair(FlowPair {
            sender: client.starting_at(flow.start),
            receiver: server,
            sender_access: with_delay(access, client_delay),
            receiver_access: receiver_access(server_delay),
        });
        metas.push(flow.meta);
    }
    // The system runs on the left router (after the access hops), or on
    // the right one (after the bottleneck: middle_after = path[1]).
    let spec = match scenario.middle_at {
        0 => spec.with_left(middle("left")),
        _ => spec.with_right(middle("right")),
    };
    let Ok(built) = sim.add_dumbbell(spec) else {
        return (empty(), metas);
    };
    let (access, bottleneck) = (&scenario.path[0].name, &scenario.path[1].name);
    let mut named = vec![(bottleneck.clone(), built.bottleneck)];
    for (meta, pair) in metas.iter().zip(&built.pairs) {
        let name = meta.names.suffix.trim_start_matches('_');
        named.push((format!("{access}-{name}"), pair.sender_access));
        named.push((format!("access-{name}"), pair.receiver_access));
    }
    let built = Built {
        clients: built.pairs.iter().map(|pair| pair.sender).collect(),
        servers: built.pairs.iter().map(|pair| pair.receiver).collect(),
        middle: Some(match scenario.middle_at {
            0 => built.left,
            _ => built.right,
        }),
        hops: named,
    };
    (built, metas)
}

/// Nothing to read back (the topology could not be built: reported as
/// missing hosts).
fn empty() -> Built {
    Built {
        clients: Vec::new(),
        servers: Vec::new(),
        middle: None,
        hops: Vec::new(),
    }
}
