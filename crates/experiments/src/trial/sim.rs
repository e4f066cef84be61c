//! A trial of competing flows (`[[flows]]`): bulk uploads from several
//! clients, each over its own access hop, sharing one bottleneck.
//!
//! ```text
//! client 0 ─ path[0] ─┐                        ┌─ 10 µs ─ server 0
//! client 1 ─ path[0] ─┼─ left ═ path[1] ═ right ┼─ 10 µs ─ server 1
//! ```
//!
//! The left router runs `middle`: the Sidekick proxy (asked by the flows
//! with `sidekick = true`), split-connection proxies for the flows with
//! `split = true`, or nothing. Each receiver's access hop is fast and short
//! (10 µs, 10 Gbit/s, no buffer limit, no loss), so that the path of every
//! flow is its access hop and the bottleneck, as in the chain.

use crate::report::slug;
use crate::scenario::{Middle, Scenario, Workload};
use crate::trial::{
    LinkReport, PACUBIC, Pacubic, TrialResult, add_errors, add_pacubic_metrics, add_series,
    bulk_server, endpoint_config, sidekick_proxy, sidekick_sender_config,
};
use netsim::{
    Datagram, Dumbbell, DumbbellSpec, FlowPair, HopConfig, HostSpec, Interface, LinkConfig,
    MiddleSpec, Middlebox, Rate, Simulator, Time, Transmit,
};
use quack::F32;
use quic::{
    BulkClient, BulkReport, BulkServerFactory, ControllerRegistry, QuicClient, QuicConfig,
    QuicServer, SplitProxy,
};
use sidekick::{SidekickHost, SidekickProxy};
use std::collections::VecDeque;
use std::time::Duration;

/// Every receiver's access hop: fast and short, so that it changes nothing.
fn receiver_access() -> HopConfig {
    let link = LinkConfig::constant(Duration::from_micros(10), Rate::from_gbps(10));
    HopConfig::new(link.clone(), link)
}

/// Runs trial `trial` of a scenario with `[[flows]]`; `hops` are the
/// prepared link configurations of `path`.
pub(crate) fn run(
    scenario: &Scenario,
    hops: &[HopConfig],
    registry: &ControllerRegistry,
    variant: &str,
    trial: u32,
) -> TrialResult {
    let seed = scenario.trial_seed(trial);
    let mut quic = QuicConfig::new(seed).with_registry(registry.clone());
    if let Some(bytes) = scenario.max_udp_payload {
        quic = quic.with_max_udp_payload(bytes);
    }
    if let Some(interval) = scenario.sample_interval {
        quic = quic.with_sampling(interval.0);
    }
    let Workload::Bulk { size, .. } = &scenario.workload else {
        unreachable!("checked: [[flows]] need a bulk upload")
    };
    let mut dumbbell = DumbbellSpec::new(hops[1].clone());
    let mut pacubic = Vec::new();
    let mut splits = Vec::new();
    for (index, flow) in scenario.flows.iter().enumerate() {
        let client_addr = scenario.flow_client_addr(index);
        let server_addr = scenario.flow_server_addr(index);
        let controller = scenario.flow_controller(index);
        let mut client_quic = endpoint_config(&quic, &scenario.client, controller);
        let mut signals = sidekick::Signals::default();
        if controller == PACUBIC {
            let spec = scenario
                .sidekick
                .as_ref()
                .expect("checked: pacubic has a sidekick");
            let wired = Pacubic::new(registry, client_quic, spec);
            client_quic = wired.quic;
            signals = wired.signals;
            pacubic.push((index, wired.factory));
        }
        let bytes = flow.size.unwrap_or(*size).0;
        let app = BulkClient::new(quic::Direction::Upload, bytes);
        let endpoint = QuicClient::new(client_quic, client_addr, server_addr, app)
            .expect("controllers were checked when the variant was prepared");
        let name = format!("{} client", flow.name);
        let client = if flow.sidekick {
            let spec = scenario.sidekick.as_ref().expect("checked: a [sidekick]");
            let engine = sidekick_sender_config(spec);
            let host = SidekickHost::<_, F32>::new(
                endpoint,
                engine,
                seed.derive(&format!("sidekick/{index}")),
            )
            .with_signals(signals);
            HostSpec::new(name, client_addr.ip(), host)
        } else {
            HostSpec::new(name, client_addr.ip(), endpoint)
        };
        let server = bulk_server(
            &format!("{} server", flow.name),
            endpoint_config(&quic, &scenario.server, &scenario.server.controller),
            server_addr,
            scenario.server.min_ack_delay,
        );
        if flow.split {
            // As in the chain: the client-facing leg sends the server's
            // data, the server-facing leg the client's.
            let back = scenario.split_controller.as_deref().unwrap_or(controller);
            let front = quic.clone().with_congestion(&scenario.server.controller);
            splits.push(
                SplitProxy::new(front, quic.clone().with_congestion(back), server_addr)
                    .expect("controllers were checked when the variant was prepared"),
            );
        }
        dumbbell = dumbbell.pair(FlowPair {
            sender: client.starting_at(Time::ZERO + flow.start.0),
            receiver: server,
            sender_access: hops[0].clone(),
            receiver_access: receiver_access(),
        });
    }
    let left = match scenario.middle {
        Middle::Router | Middle::Pep => MiddleSpec::forwarder("left"),
        Middle::Sidekick => sidekick_proxy(scenario, seed),
        Middle::Split => MiddleSpec::with_middlebox("split-proxies", SplitMux::new(splits)),
    };
    let mut sim = Simulator::new(seed);
    let built = sim
        .add_dumbbell(dumbbell.with_left(left))
        .expect("a dumbbell with at least one flow and distinct addresses");
    let outcome = sim.run_until(Time::ZERO + scenario.time_limit.0);
    let links = link_reports(&sim, &built, scenario);
    let mut result = TrialResult::simulated(variant, trial, seed, &sim, outcome, links);
    collect(&sim, &built, scenario, &mut result);
    for (index, factory) in pacubic {
        let suffix = format!("_{}", slug(&scenario.flows[index].name));
        add_pacubic_metrics(&mut result, &factory, &suffix);
    }
    result
}

/// The bottleneck as `<path[1]>/…`, each flow's access hop as
/// `<path[0]>-<flow>/…` and its receiver's as `access-<flow>/…`.
fn link_reports(sim: &Simulator, built: &Dumbbell, scenario: &Scenario) -> Vec<LinkReport> {
    let mut hops = vec![(scenario.path[1].clone(), built.bottleneck)];
    for (flow, pair) in scenario.flows.iter().zip(&built.pairs) {
        let name = slug(&flow.name);
        hops.push((format!("{}-{name}", scenario.path[0]), pair.sender_access));
        hops.push((format!("access-{name}"), pair.receiver_access));
    }
    let mut reports = Vec::new();
    for (name, links) in hops {
        for (direction, link) in [("forward", links.forward), ("reverse", links.reverse)] {
            reports.push(LinkReport::new(
                format!("{name}/{direction}"),
                sim.link_stats(link),
            ));
        }
    }
    reports
}

/// Per flow: goodput, completion time, sender counters, errors; then the
/// flows' total goodput, shares and Jain's fairness index.
fn collect(sim: &Simulator, built: &Dumbbell, scenario: &Scenario, result: &mut TrialResult) {
    let splits = sim.middlebox::<SplitMux>(built.left);
    if let Some(proxy) = sim.middlebox::<SidekickProxy>(built.left) {
        let quacks = proxy.stats().quacks as f64;
        result.metrics.insert("proxy_quacks".into(), quacks);
    }
    let mut goodputs = Vec::new();
    for (index, (flow, pair)) in scenario.flows.iter().zip(&built.pairs).enumerate() {
        let name = slug(&flow.name);
        let client = match sim.host::<SidekickHost<QuicClient<BulkClient>, F32>>(pair.sender) {
            Some(wrapped) => {
                let stats = wrapped.stats();
                let metrics = &mut result.metrics;
                metrics.insert(format!("sidekick_quacks_{name}"), stats.quacks as f64);
                metrics.insert(
                    format!("sidekick_retransmitted_{name}"),
                    stats.retransmitted as f64,
                );
                metrics.insert(format!("sidekick_resets_{name}"), stats.resets as f64);
                wrapped.inner()
            }
            None => sim
                .host::<QuicClient<BulkClient>>(pair.sender)
                .expect("the client host"),
        };
        let server = match sim.host::<quic::AckDelay<QuicServer<BulkServerFactory>>>(pair.receiver)
        {
            Some(delayed) => delayed.inner(),
            None => sim
                .host::<QuicServer<BulkServerFactory>>(pair.receiver)
                .expect("the server host"),
        };
        // A split flow's data crosses the bottleneck on the proxy's
        // server-facing leg.
        let client_addr = scenario.flow_client_addr(index);
        let server_addr = scenario.flow_server_addr(index);
        let split = splits
            .and_then(|mux| mux.proxy(server_addr))
            .and_then(|proxy| proxy.back_record(client_addr));
        if let Some(record) = split.or(client.record()) {
            if index == 0 {
                add_series(result, record);
            }
            let stats = &record.stats;
            let metrics = &mut result.metrics;
            metrics.insert(
                format!("sender_lost_packets_{name}"),
                stats.lost_packets as f64,
            );
            metrics.insert(
                format!("sender_sent_packets_{name}"),
                stats.sent_packets as f64,
            );
        }
        add_errors(result, &format!("{} client", flow.name), client.record());
        let report = BulkReport::from_hosts(client, server);
        // A flow that finished before the others: its server went on to
        // see the client (or the split proxy) close with code 0, the
        // normal end, which a chain's trial stops before seeing.
        let server_record = server.records().next().filter(|record| {
            let normal = record.error.as_ref().is_some_and(|error| {
                error.starts_with("closed by peer: ") && error.ends_with(" (code 0)")
            });
            !(normal && report.is_some())
        });
        add_errors(result, &format!("{} server", flow.name), server_record);
        if let Some(report) = report {
            let goodput = report.goodput.bits_per_sec() as f64 / 1e6;
            let metrics = &mut result.metrics;
            metrics.insert(format!("goodput_mbps_{name}"), goodput);
            metrics.insert(
                format!("completion_s_{name}"),
                report.completion.as_secs_f64(),
            );
            goodputs.push((name, goodput));
        }
    }
    if goodputs.len() < scenario.flows.len() {
        return;
    }
    result.completed = true;
    let total: f64 = goodputs.iter().map(|(_, g)| g).sum();
    let metrics = &mut result.metrics;
    metrics.insert("goodput_mbps".into(), total);
    for (name, goodput) in &goodputs {
        let share = if total > 0.0 { goodput / total } else { 0.0 };
        metrics.insert(format!("share_{name}"), share);
    }
    metrics.insert(
        "jain_index".into(),
        jain_index(goodputs.iter().map(|(_, g)| *g)),
    );
}

/// Jain's fairness index (Σx)² / (n · Σx²): 1 when all are equal, 1/n
/// when one takes everything (1 for no or all-zero values).
pub(crate) fn jain_index(values: impl IntoIterator<Item = f64>) -> f64 {
    let (mut n, mut sum, mut squares) = (0.0, 0.0, 0.0);
    for x in values {
        n += 1.0;
        sum += x;
        squares += x * x;
    }
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (n * squares)
    }
}

/// Split proxies for some flows on the dumbbell's left router.
///
/// A [`SplitProxy`] relays one server address and takes interface 0 for
/// its clients' side and 1 for the server's, as on a chain. On the left
/// router interface 0 is the bottleneck and the clients are behind 1…n, so
/// this maps interfaces (the bottleneck is the servers' side, anything else
/// the clients'), gives each datagram to the proxy of its server, forwards
/// the rest, and routes what the proxies send by destination.
struct SplitMux {
    proxies: Vec<SplitProxy>,
    outbox: VecDeque<Transmit>,
}

/// A [`SplitProxy`]'s interfaces.
const CLIENT_SIDE: Interface = Interface(0);
const SERVER_SIDE: Interface = Interface(1);

impl SplitMux {
    fn new(proxies: Vec<SplitProxy>) -> SplitMux {
        SplitMux {
            proxies,
            outbox: VecDeque::new(),
        }
    }

    /// The proxy of the server at `server`.
    fn proxy(&self, server: std::net::SocketAddr) -> Option<&SplitProxy> {
        self.proxies.iter().find(|proxy| proxy.server() == server)
    }
}

impl Middlebox for SplitMux {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        let side = if from == Dumbbell::BOTTLENECK {
            SERVER_SIDE
        } else {
            CLIENT_SIDE
        };
        let mine = |proxy: &&mut SplitProxy| match side {
            CLIENT_SIDE => datagram.dst == proxy.server(),
            _ => datagram.src == proxy.server(),
        };
        match self.proxies.iter_mut().find(mine) {
            Some(proxy) => proxy.handle_datagram(now, side, datagram),
            None => self.outbox.push_back(Transmit::at(now, datagram)),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        for proxy in &mut self.proxies {
            // Only the proxies whose timers are due: an early call would
            // poll their connections at an instant they did not ask for.
            if proxy.poll_timeout().is_some_and(|at| at <= now) {
                proxy.handle_timeout(now);
            }
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        if let Some(transmit) = self.outbox.pop_front() {
            return Some(transmit);
        }
        for proxy in &mut self.proxies {
            if let Some(transmit) = proxy.poll_transmit(now) {
                // The left router's routes know every client and send
                // everything else over the bottleneck.
                return Some(Transmit::at(transmit.at, transmit.datagram));
            }
        }
        None
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.proxies
            .iter_mut()
            .filter_map(|proxy| proxy.poll_timeout())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::jain_index;

    #[test]
    fn jain_index_is_one_for_equal_shares_and_one_over_n_for_a_hog() {
        assert!((jain_index([3.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index([4.0, 0.0]) - 0.5).abs() < 1e-12);
        // (1 + 3)² / (2 · (1 + 9)) = 0.8
        assert!((jain_index([1.0, 3.0]) - 0.8).abs() < 1e-12);
    }
}
