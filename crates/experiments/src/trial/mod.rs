//! One trial: build the chain a [`Scenario`] describes, run it in virtual
//! time, and collect the workload's metrics and the links' counters.

use crate::scenario::{
    ArrivalKind, Buffer, BulkDirection, Endpoint, Hop, LossDirection, Middle, Scenario,
    ScenarioError, SidekickSpec, Strawman, Workload,
};
use netsim::{
    BufferLimit, CapacityTrace, Chain, ChainSpec, GilbertElliott, HopConfig, Host, HostSpec,
    LinkConfig, LinkStats, LossModel, MiddleSpec, Probability, RedConfig, Simulator, StopReason,
    Time,
};
use quack::F32;
use quic::{
    BulkClient, BulkReport, BulkServerFactory, ConnRecord, ControllerRegistry, DelaySummary,
    MediaConfig, MediaReceiver, MediaSender, QuicClient, QuicConfig, QuicServer, RtcConfig,
    RtcReceiver, RtcReport, RtcSenderFactory, ShortFlowsClient, ShortFlowsReport,
    ShortFlowsServerFactory, SplitProxy, Timed,
};
use serde::{Deserialize, Serialize};
use sidekick::wire::Interval;
use sidekick::{ProxyConfig, SenderConfig, SenderStats, SidekickHost, SidekickProxy};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Everything one trial produced. Written as `trials/<variant>/<n>.json`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct TrialResult {
    /// The variant's name.
    pub variant: String,
    /// The trial's index within the variant, from 0.
    pub trial: u32,
    /// The seed every random source of the trial derived from.
    pub seed: u64,
    /// Whether the workload finished before the time limit.
    pub completed: bool,
    /// Why the trial stopped: `finished`, `time_limit`, `idle` (nothing
    /// left to happen, simulator) or `stopped` (interrupted, real mode).
    pub stop: String,
    /// Time at the end, seconds (virtual time; wall-clock in real mode).
    pub end_s: f64,
    /// Simulator events processed (a measure of work, for speed figures;
    /// 0 in real mode).
    pub events: u64,
    /// The workload's scalar metrics (see `docs/experiments.md`).
    pub metrics: BTreeMap<String, f64>,
    /// Per-packet, per-frame or per-flow values, for distributions.
    pub distributions: BTreeMap<String, Vec<f64>>,
    /// Each link's counters.
    pub links: Vec<LinkReport>,
    /// Why connections closed abnormally, if any did (`client: …`).
    pub errors: Vec<String>,
    /// The data sender's connection sampled over time, one array per
    /// variable (empty unless the scenario sets `sample_interval`).
    pub series: BTreeMap<String, Vec<f64>>,
}

impl TrialResult {
    /// A finished simulation's result (see [`TrialResult::new`]).
    pub(crate) fn simulated(
        variant: &str,
        trial: u32,
        seed: netsim::Seed,
        sim: &Simulator,
        outcome: netsim::RunOutcome,
        links: Vec<LinkReport>,
    ) -> TrialResult {
        let stop = match outcome.reason {
            StopReason::AllFinished => "finished",
            StopReason::TimeLimit => "time_limit",
            StopReason::Idle => "idle",
        };
        let events = sim.stats().events;
        TrialResult::new(variant, trial, seed, stop, outcome.end, events, links)
    }

    /// A finished trial's result before the workload's metrics: its
    /// stop, its events and each link's counters, also as
    /// `link_<hop>_<direction>_packets` and `_bytes` metrics (what each link
    /// carried, for overhead comparisons like Sidekick's Figure 7).
    pub(crate) fn new(
        variant: &str,
        trial: u32,
        seed: netsim::Seed,
        stop: &str,
        end: Time,
        events: u64,
        links: Vec<LinkReport>,
    ) -> TrialResult {
        let mut result = TrialResult {
            variant: variant.to_string(),
            trial,
            seed: seed.value(),
            completed: false,
            stop: stop.to_string(),
            end_s: end.as_secs_f64(),
            events,
            metrics: BTreeMap::new(),
            distributions: BTreeMap::new(),
            links: Vec::new(),
            errors: Vec::new(),
            series: BTreeMap::new(),
        };
        result.add_links(links);
        result
    }

    /// Adds the links' counters, also as `link_<hop>_<direction>_packets`
    /// and `_bytes` metrics.
    pub(crate) fn add_links(&mut self, links: Vec<LinkReport>) {
        for link in &links {
            let stem = format!("link_{}", link.link.replace('/', "_"));
            self.metrics
                .insert(format!("{stem}_packets"), link.offered_packets as f64);
            self.metrics
                .insert(format!("{stem}_bytes"), link.offered_bytes as f64);
        }
        self.links.extend(links);
    }
}

/// One direction of one hop, as a trial file reports it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct LinkReport {
    /// `<hop>/forward` (client → server) or `<hop>/reverse`.
    pub link: String,
    /// Packets offered to the link.
    pub offered_packets: u64,
    /// Bytes offered to the link.
    pub offered_bytes: u64,
    /// Packets it delivered.
    pub delivered_packets: u64,
    /// Bytes it delivered.
    pub delivered_bytes: u64,
    /// Lost to the random loss model.
    pub dropped_loss: u64,
    /// Dropped by a full buffer.
    pub dropped_buffer: u64,
    /// Dropped by RED, early or forced.
    pub dropped_red: u64,
    /// The largest queue an arrival saw, bytes.
    pub max_queue_bytes: u64,
}

impl LinkReport {
    pub(crate) fn new(link: String, stats: &LinkStats) -> LinkReport {
        LinkReport {
            link,
            offered_packets: stats.offered.packets,
            offered_bytes: stats.offered.bytes,
            delivered_packets: stats.delivered.packets,
            delivered_bytes: stats.delivered.bytes,
            dropped_loss: stats.dropped_loss.packets,
            dropped_buffer: stats.dropped_buffer.packets,
            dropped_red: stats.dropped_red_early.packets + stats.dropped_red_forced.packets,
            max_queue_bytes: stats.max_queue_bytes,
        }
    }
}

/// A variant made ready to run: traces loaded and controllers checked, so
/// that trials cannot fail on configuration.
#[derive(Clone)]
pub struct Prepared {
    scenario: Scenario,
    hops: Vec<HopConfig>,
    registry: ControllerRegistry,
}

impl Prepared {
    /// Loads the traces `scenario` names (relative to `dir`) and checks its
    /// controllers against `registry`. `context` prefixes errors (the
    /// variant); `file` names the scenario file in them.
    pub fn new(
        scenario: &Scenario,
        registry: &ControllerRegistry,
        file: &Path,
        context: &str,
    ) -> Result<Prepared, ScenarioError> {
        let fail = |field: String, message: String| ScenarioError::Field {
            path: file.to_path_buf(),
            context: context.to_string(),
            field,
            message,
        };
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut traces: BTreeMap<&Path, Arc<CapacityTrace>> = BTreeMap::new();
        let mut hops = Vec::new();
        for name in &scenario.path {
            let hop = &scenario.hops[name];
            for (field, trace) in [("trace", &hop.trace), ("reverse_trace", &hop.reverse_trace)] {
                if let Some(trace) = trace
                    && !traces.contains_key(trace.as_path())
                {
                    let loaded = CapacityTrace::from_file(dir.join(trace)).map_err(|error| {
                        fail(
                            format!("hops.{name}.{field}"),
                            format!(
                                "{} (relative to {}): {error}",
                                trace.display(),
                                dir.display()
                            ),
                        )
                    })?;
                    traces.insert(trace.as_path(), Arc::new(loaded));
                }
            }
            hops.push(
                hop_config(hop, &traces)
                    .map_err(|message| fail(format!("hops.{name}"), message))?,
            );
        }
        for (endpoint, who) in [(&scenario.client, "client"), (&scenario.server, "server")] {
            // With [[flows]], the client's controller is only the flows'
            // default; each flow's is checked below.
            let allowed = who == "client"
                && (scenario.middle == Middle::Sidekick || !scenario.flows.is_empty());
            if endpoint.controller == PACUBIC && !allowed {
                return Err(fail(
                    format!("{who}.controller"),
                    "pacubic reads the sidekick's quACKs: only the client can run it, \
                     with middle = \"sidekick\""
                        .into(),
                ));
            }
        }
        let tcp = scenario.transport == crate::scenario::Transport::Tcp;
        for (field, name) in [
            ("client.controller", Some(&scenario.client.controller)),
            ("server.controller", Some(&scenario.server.controller)),
        ] {
            if let Some(name) = name.filter(|_| tcp) {
                check_tcp_controller(name).map_err(|message| fail(field.to_string(), message))?;
            }
        }
        for (field, name) in [
            (
                "client.controller",
                Some(&scenario.client.controller).filter(|_| !tcp),
            ),
            (
                "server.controller",
                Some(&scenario.server.controller).filter(|_| !tcp),
            ),
            ("split_controller", scenario.split_controller.as_ref()),
        ] {
            if let Some(name) = name.filter(|name| *name != PACUBIC) {
                registry
                    .get(name)
                    .map_err(|error| fail(field.to_string(), error.to_string()))?;
            }
        }
        for index in 0..scenario.flows.len() {
            let name = scenario.flow_controller(index);
            if name != PACUBIC {
                registry.get(name).map_err(|error| {
                    fail(format!("flows[{index}].controller"), error.to_string())
                })?;
            }
        }
        Ok(Prepared {
            scenario: scenario.clone(),
            hops,
            registry: registry.clone(),
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

    /// Runs trial `trial` of variant `variant` in the simulator.
    pub fn run(&self, variant: &str, trial: u32) -> TrialResult {
        let scenario = &self.scenario;
        if !scenario.flows.is_empty() {
            return crate::flows::run(scenario, &self.hops, &self.registry, variant, trial);
        }
        let seed = scenario.trial_seed(trial);
        let Endpoints {
            client,
            server,
            pacubic,
        } = self.endpoints(trial);
        let server_addr = scenario.server_addr();
        let quic = self.quic_config(trial);
        let mut spec = ChainSpec::new(client, server);
        for (index, hop) in self.hops.iter().enumerate() {
            if index > 0 {
                let name = format!("middle{index}");
                let middle =
                    if index == scenario.middle_index() + 1 && scenario.middle == Middle::Split {
                        // The client-facing leg sends the server's data, so it
                        // uses the server's controller; the server-facing leg
                        // sends the client's.
                        let back = scenario
                            .split_controller
                            .as_ref()
                            .unwrap_or(&scenario.client.controller);
                        let front = quic.clone().with_congestion(&scenario.server.controller);
                        let proxy =
                            SplitProxy::new(front, quic.clone().with_congestion(back), server_addr)
                                .expect("controllers were checked when the variant was prepared");
                        MiddleSpec::with_middlebox("split-proxy", proxy)
                    } else if index == scenario.middle_index() + 1
                        && scenario.middle == Middle::Sidekick
                    {
                        sidekick_proxy(scenario, seed)
                    } else {
                        MiddleSpec::forwarder(name)
                    };
                spec = spec.middle(middle);
            }
            spec = spec.hop(hop.clone());
        }
        let mut sim = Simulator::new(seed);
        let chain = sim
            .add_chain(spec)
            .expect("a chain with one more hop than middle nodes and distinct addresses");
        let outcome = sim.run_until(Time::ZERO + scenario.time_limit.0);
        let links = link_reports(&sim, &chain, &scenario.path);
        let mut result = TrialResult::simulated(variant, trial, seed, &sim, outcome, links);
        collect(
            &Simulated {
                sim: &sim,
                chain: &chain,
            },
            scenario,
            &mut result,
        );
        if let Some(factory) = pacubic {
            add_pacubic_metrics(&mut result, &factory, "");
        }
        result
    }

    /// The QUIC configuration every endpoint of trial `trial` starts from.
    fn quic_config(&self, trial: u32) -> QuicConfig {
        let scenario = &self.scenario;
        let mut quic =
            QuicConfig::new(scenario.trial_seed(trial)).with_registry(self.registry.clone());
        if let Some(bytes) = scenario.max_udp_payload {
            quic = quic.with_max_udp_payload(bytes);
        }
        if let Some(interval) = scenario.sample_interval {
            quic = quic.with_sampling(interval.0);
        }
        quic
    }

    /// The client and server hosts of trial `trial`, as the workload, the
    /// controllers and the sidekick make them; the simulator and real mode
    /// run the same ones.
    pub(crate) fn endpoints(&self, trial: u32) -> Endpoints {
        let scenario = &self.scenario;
        let seed = scenario.trial_seed(trial);

        let client_addr = scenario.client_addr();
        let server_addr = scenario.server_addr();
        let quic = self.quic_config(trial);
        let endpoint_quic =
            |endpoint: &Endpoint| endpoint_config(&quic, endpoint, &endpoint.controller);
        let mut client_quic = endpoint_quic(&scenario.client);
        let mut signals = sidekick::Signals::default();
        let mut pacubic = None;
        if scenario.client.controller == PACUBIC {
            let spec = scenario
                .sidekick
                .as_ref()
                .expect("checked: pacubic has a sidekick");
            let wired = Pacubic::new(&self.registry, client_quic, spec);
            client_quic = wired.quic;
            signals = wired.signals;
            pacubic = Some(wired.factory);
        }
        let server_quic = endpoint_quic(&scenario.server);
        let (client, server) = match &scenario.workload {
            Workload::Bulk { direction, size } => {
                let direction = match direction {
                    BulkDirection::Upload => quic::Direction::Upload,
                    BulkDirection::Download => quic::Direction::Download,
                };
                let app = BulkClient::new(direction, size.0);
                let endpoint = QuicClient::new(client_quic, client_addr, server_addr, app)
                    .expect("controllers were checked when the variant was prepared");
                let client = match &scenario.sidekick {
                    Some(spec) => {
                        let engine = sidekick_sender_config(spec);
                        let host =
                            SidekickHost::<_, F32>::new(endpoint, engine, seed.derive("sidekick"))
                                .with_signals(signals);
                        HostSpec::new("client", client_addr.ip(), host)
                    }
                    None => HostSpec::new("client", client_addr.ip(), endpoint),
                };
                let server = bulk_server(
                    "server",
                    server_quic,
                    server_addr,
                    scenario.server.min_ack_delay,
                );
                (client, server)
            }
            Workload::Media { duration } => {
                let config = MediaConfig::new(seed.derive("media")).with_duration(duration.0);
                let media = MediaSender::new(config.clone(), client_addr, server_addr);
                let client = match &scenario.sidekick {
                    Some(spec) => {
                        let engine = sidekick_sender_config(spec);
                        let host =
                            SidekickHost::<_, F32>::new(media, engine, seed.derive("sidekick"));
                        HostSpec::new("client", client_addr.ip(), host)
                    }
                    None => HostSpec::new("client", client_addr.ip(), media),
                };
                (
                    client,
                    HostSpec::new(
                        "server",
                        server_addr.ip(),
                        MediaReceiver::new(config, server_addr, client_addr),
                    ),
                )
            }
            Workload::Rtc { .. } => {
                let source = rtc_config(&scenario.workload);
                let receiver = RtcReceiver::new(source.frames);
                let sender =
                    QuicServer::new(server_quic, server_addr, RtcSenderFactory::new(source));
                (
                    host(
                        "client",
                        client_addr,
                        QuicClient::new(client_quic, client_addr, server_addr, receiver),
                    ),
                    host("server", server_addr, sender.map(Timed::new)),
                )
            }
            Workload::ShortFlows {
                count,
                request,
                response,
                arrivals,
                mean_gap,
            } => {
                let app = match (arrivals, mean_gap) {
                    (ArrivalKind::Poisson, Some(gap)) => ShortFlowsClient::poisson(
                        *count,
                        gap.0,
                        &mut seed.rng("short-flows"),
                        request.0,
                        response.0,
                    ),
                    _ => ShortFlowsClient::sequential(*count, request.0, response.0),
                };
                let client = QuicClient::new(client_quic, client_addr, server_addr, app);
                (
                    host("client", client_addr, client.map(Timed::new)),
                    host(
                        "server",
                        server_addr,
                        QuicServer::new(server_quic, server_addr, ShortFlowsServerFactory),
                    ),
                )
            }
        };
        Endpoints {
            client,
            server,
            pacubic,
        }
    }
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

/// A trial's two hosts and, for a PACUBIC client, its controller's
/// factory (for its counters).
pub(crate) struct Endpoints {
    /// The client host.
    pub client: HostSpec,
    /// The server host.
    pub server: HostSpec,
    /// PACUBIC's factory, if the client runs it.
    pub pacubic: Option<Arc<cc::PacubicFactory>>,
}

/// An endpoint's QUIC configuration: `controller` and its ACK frequency.
pub(crate) fn endpoint_config(
    quic: &QuicConfig,
    endpoint: &Endpoint,
    controller: &str,
) -> QuicConfig {
    let config = quic.clone().with_congestion(controller);
    match endpoint.ack_frequency {
        Some(spec) => config.with_ack_frequency(quic::AckFrequency {
            threshold: spec.threshold,
            max_delay: spec.max_delay.map(|span| span.0),
        }),
        None => config,
    }
}

/// A PACUBIC client wired to its own sidekick engine: PACUBIC reads the
/// engine's events from a fresh queue, on a clock shared with the client
/// endpoint, through a factory registered for this client alone.
pub(crate) struct Pacubic {
    /// The client's configuration, with the registry and the clock.
    pub quic: QuicConfig,
    /// Give these to the client's `SidekickHost`.
    pub signals: sidekick::Signals,
    /// Its counters.
    pub factory: Arc<cc::PacubicFactory>,
}

impl Pacubic {
    /// Wires `quic` (a client's configuration) to a new PACUBIC instance.
    pub(crate) fn new(
        registry: &ControllerRegistry,
        quic: QuicConfig,
        spec: &SidekickSpec,
    ) -> Pacubic {
        let signals = sidekick::Signals::default();
        let clock = quic::SimClock::new();
        let mut config = cc::PacubicConfig::new(clock).with_quack_acks(spec.quack_acks);
        if let Some(r) = spec.ratio {
            config = config.with_fixed_ratio(r);
        }
        let factory = Arc::new(cc::PacubicFactory::new(signals.clone(), config));
        let mut registry = registry.clone();
        registry.register(PACUBIC, factory.clone());
        Pacubic {
            quic: quic.with_registry(registry).with_clock(clock),
            signals,
            factory,
        }
    }
}

/// `pacubic_quack_cuts<suffix>` and PACUBIC's other counters.
pub(crate) fn add_pacubic_metrics(
    result: &mut TrialResult,
    factory: &cc::PacubicFactory,
    suffix: &str,
) {
    let stats = factory.stats();
    let metrics = &mut result.metrics;
    metrics.insert(
        format!("pacubic_quack_cuts{suffix}"),
        stats.quack_reductions as f64,
    );
    metrics.insert(
        format!("pacubic_e2e_cuts{suffix}"),
        stats.e2e_reductions as f64,
    );
    // r as used by the last quACK-driven cut (none without near losses).
    if stats.ratio_ppm > 0 {
        metrics.insert(
            format!("pacubic_ratio{suffix}"),
            f64::from(stats.ratio_ppm) / 1e6,
        );
    }
    if stats.quacked_bytes > 0 {
        metrics.insert(
            format!("pacubic_quacked_bytes{suffix}"),
            stats.quacked_bytes as f64,
        );
    }
}

/// A bulk server host; one that holds back its ACKs (`min_ack_delay`)
/// holds back its flow-control credit too, so it grants it all up front,
/// as the Sidekick clients did (1000 MiB), and only the ACKs are thinned.
pub(crate) fn bulk_server(
    name: &str,
    server_quic: QuicConfig,
    server_addr: SocketAddr,
    min_ack_delay: Option<crate::units::Span>,
) -> HostSpec {
    let server_quic = match min_ack_delay {
        Some(_) => server_quic.with_receive_window(1 << 30),
        None => server_quic,
    };
    let server = QuicServer::new(server_quic, server_addr, BulkServerFactory)
        .expect("controllers were checked when the variant was prepared");
    match min_ack_delay {
        Some(delay) => HostSpec::new(name, server_addr.ip(), quic::AckDelay::new(server, delay.0)),
        None => HostSpec::new(name, server_addr.ip(), server),
    }
}

/// The Sidekick proxy's node, configured by the scenario's `[sidekick]`.
pub(crate) fn sidekick_proxy(scenario: &Scenario, seed: netsim::Seed) -> MiddleSpec {
    let mut config = ProxyConfig::new(SIDEKICK_PROXY, seed.derive("sidekick-proxy"));
    config.strawman = scenario
        .sidekick
        .as_ref()
        .and_then(|spec| spec.strawman)
        .map(|strawman| match strawman {
            Strawman::Echo => quack::Scheme::Echo,
            Strawman::Window { size } => quack::Scheme::Window { size },
        });
    MiddleSpec::with_middlebox("sidekick-proxy", SidekickProxy::new(config))
        .with_addr(SIDEKICK_PROXY.ip())
}

/// A host from an endpoint constructor whose controller was checked.
fn host<H: netsim::Host>(
    name: &str,
    addr: SocketAddr,
    endpoint: Result<H, quic::UnknownController>,
) -> HostSpec {
    let endpoint = endpoint.expect("controllers were checked when the variant was prepared");
    HostSpec::new(name, addr.ip(), endpoint)
}

fn rtc_config(workload: &Workload) -> RtcConfig {
    let Workload::Rtc {
        duration,
        fps,
        bitrate,
    } = workload
    else {
        unreachable!("called for rtc workloads only")
    };
    let frame_bytes = (bitrate.0.bits_per_sec() / 8 / fps) as usize;
    RtcConfig {
        fps: *fps,
        frame_bytes,
        frames: (duration.0.as_nanos() * u128::from(*fps) / 1_000_000_000) as u64,
    }
}

/// The link configuration of both directions of a hop.
pub(crate) fn hop_config(
    hop: &Hop,
    traces: &BTreeMap<&Path, Arc<CapacityTrace>>,
) -> Result<HopConfig, String> {
    let probability = |p: f64| Probability::new(p).map_err(|error| error.to_string());
    let loss = match &hop.gilbert_elliott {
        Some(ge) => LossModel::GilbertElliott(GilbertElliott {
            p: probability(ge.p)?,
            r: probability(ge.r)?,
            loss_good: probability(ge.loss_good)?,
            loss_bad: probability(ge.loss_bad)?,
        }),
        None if hop.loss > 0.0 => LossModel::Bernoulli(probability(hop.loss)?),
        None => LossModel::None,
    };
    let direction = |trace: Option<&Path>, lossy: bool| -> LinkConfig {
        let link = match (trace, hop.rate) {
            (Some(trace), _) => LinkConfig::trace(hop.delay.0, traces[trace].clone()),
            (None, Some(rate)) => LinkConfig::constant(hop.delay.0, rate.0),
            (None, None) => unreachable!("checked: a hop has a rate or a trace"),
        };
        let link = match &hop.buffer {
            Buffer::Unlimited => link,
            Buffer::DropTail {
                packets: Some(packets),
                ..
            } => link.with_buffer(BufferLimit::Packets(*packets)),
            Buffer::DropTail {
                bytes: Some(bytes), ..
            } => link.with_buffer(BufferLimit::Bytes(bytes.0)),
            Buffer::DropTail { .. } => unreachable!("checked: drop_tail has a limit"),
            Buffer::Red { limit } => {
                let rate = hop.rate.expect("checked: RED needs a rate").0;
                link.with_red(RedConfig::new(limit.0, rate).with_adaptive(true))
            }
        };
        if lossy { link.with_loss(loss) } else { link }
    };
    let forward = direction(
        hop.trace.as_deref(),
        hop.loss_direction != LossDirection::Reverse,
    );
    let reverse_trace = hop.reverse_trace.as_deref().or(match hop.rate {
        Some(_) => None,
        None => hop.trace.as_deref(),
    });
    let reverse = direction(reverse_trace, hop.loss_direction != LossDirection::Forward);
    Ok(HopConfig::new(forward, reverse))
}

fn link_reports(sim: &Simulator, chain: &Chain, path: &[String]) -> Vec<LinkReport> {
    let mut reports = Vec::new();
    for (name, links) in path.iter().zip(&chain.hops) {
        reports.push(LinkReport::new(
            format!("{name}/forward"),
            sim.link_stats(links.forward),
        ));
        reports.push(LinkReport::new(
            format!("{name}/reverse"),
            sim.link_stats(links.reverse),
        ));
    }
    reports
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The nearest-rank percentile `p` (0–100) of sorted values: the value at
/// rank ⌈p/100 · n⌉, as the rtc and short-flow reports define theirs.
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

/// Adds `<name>_p50_ms`, `_p90_ms`, `_p99_ms` and the distribution `<name>_ms`.
fn add_distribution(result: &mut TrialResult, name: &str, values: &[Duration]) {
    let values: Vec<f64> = values.iter().copied().map(millis).collect();
    if !values.is_empty() {
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for p in [50.0, 90.0, 99.0] {
            result
                .metrics
                .insert(format!("{name}_p{p}_ms"), nearest_rank(&sorted, p));
        }
    }
    result.distributions.insert(format!("{name}_ms"), values);
}

/// Where a finished trial's engines are read from: the simulator's nodes,
/// or the hosts real mode ran.
pub(crate) trait Engines {
    /// The client host, if it is a `T`.
    fn client<T: Host>(&self) -> Option<&T>;
    /// The server host, if it is a `T`.
    fn server<T: Host>(&self) -> Option<&T>;
    /// The engine on middle node `index` (from 0), if it is a `T`.
    fn middlebox<T: netsim::Middlebox>(&self, index: usize) -> Option<&T>;
}

/// A finished simulation's engines.
struct Simulated<'a> {
    sim: &'a Simulator,
    chain: &'a Chain,
}

impl Engines for Simulated<'_> {
    fn client<T: Host>(&self) -> Option<&T> {
        self.sim.host(self.chain.sender)
    }

    fn server<T: Host>(&self) -> Option<&T> {
        self.sim.host(self.chain.receiver)
    }

    fn middlebox<T: netsim::Middlebox>(&self, index: usize) -> Option<&T> {
        self.sim.middlebox(*self.chain.middles.get(index)?)
    }
}

/// Reads the workload's results out of a finished trial.
pub(crate) fn collect(engines: &impl Engines, scenario: &Scenario, result: &mut TrialResult) {
    match &scenario.workload {
        Workload::Bulk { direction, .. } => {
            let client = sender_host::<QuicClient<BulkClient>>(engines, scenario, result);
            let delayed = engines.server::<quic::AckDelay<QuicServer<BulkServerFactory>>>();
            // Datagrams the receiver's stack sent that its ACK delay dropped.
            let replaced = delayed.map_or(0, quic::AckDelay::replaced);
            let server = match delayed {
                Some(delayed) => delayed.inner(),
                None => engines
                    .server::<QuicServer<BulkServerFactory>>()
                    .expect("the server host"),
            };
            // The sender whose counters and series describe the transfer:
            // for a split upload, the proxy's server-facing leg, which sends
            // over the far hop (as Sidekick's Figure 9 plots split CUBIC).
            let client_addr = scenario.client_addr();
            let split = engines
                .middlebox::<SplitProxy>(scenario.middle_index())
                .and_then(|proxy| proxy.back_record(client_addr));
            let sender_record = match direction {
                BulkDirection::Upload => split.or(client.record()),
                BulkDirection::Download => server.records().next(),
            };
            add_sender_counters(result, sender_record);
            let receiver_record = match direction {
                BulkDirection::Upload => server.records().next(),
                BulkDirection::Download => client.record(),
            };
            if let Some(record) = receiver_record {
                result.metrics.insert(
                    "receiver_sent_packets".into(),
                    record.stats.udp_tx_datagrams.saturating_sub(replaced) as f64,
                );
            }
            add_errors(result, "client", client.record());
            add_errors(result, "server", server.records().next());
            if let Some(report) = BulkReport::from_hosts(client, server) {
                result.completed = true;
                result.metrics.insert(
                    "goodput_mbps".into(),
                    report.goodput.bits_per_sec() as f64 / 1e6,
                );
                result
                    .metrics
                    .insert("completion_s".into(), report.completion.as_secs_f64());
            }
        }
        Workload::Media { .. } => {
            let sender = sender_host::<MediaSender>(engines, scenario, result);
            let receiver = engines
                .server::<MediaReceiver>()
                .expect("the receiver host");
            let summary: DelaySummary = receiver.summary();
            result.completed = receiver.is_complete();
            let metrics = &mut result.metrics;
            metrics.insert("dejitter_p50_ms".into(), millis(summary.p50));
            metrics.insert("dejitter_p95_ms".into(), millis(summary.p95));
            metrics.insert("dejitter_p99_ms".into(), millis(summary.p99));
            metrics.insert("dejitter_max_ms".into(), millis(summary.max));
            let sent = sender.packet_count().max(1);
            metrics.insert(
                "played_fraction".into(),
                f64::from(receiver.played()) / f64::from(sent),
            );
            metrics.insert(
                "retransmissions".into(),
                sender.stats().retransmissions as f64,
            );
            result.distributions.insert(
                "dejitter_ms".into(),
                receiver
                    .dejitter_delays()
                    .iter()
                    .copied()
                    .map(millis)
                    .collect(),
            );
        }
        Workload::Rtc { .. } => {
            let client = engines
                .client::<QuicClient<RtcReceiver>>()
                .expect("the client host");
            let server = engines
                .server::<Timed<QuicServer<RtcSenderFactory>>>()
                .expect("the server host");
            add_sender_counters(result, server.inner().records().next());
            add_errors(result, "client", client.record());
            add_errors(result, "server", server.inner().records().next());
            if let Some(report) = RtcReport::from_client(client) {
                result.completed = report.frames.len() as u64 == report.expected;
                result.metrics.insert(
                    "frames_received_fraction".into(),
                    report.frames.len() as f64 / report.expected.max(1) as f64,
                );
                add_distribution(result, "frame_delay", &report.delays);
                add_distribution(result, "frame_jitter", &report.jitter);
            }
        }
        Workload::ShortFlows { count, .. } => {
            let client = engines
                .client::<Timed<QuicClient<ShortFlowsClient>>>()
                .expect("the client host");
            add_errors(result, "client", client.inner().record());
            if let Some(report) = ShortFlowsReport::from_client(client.inner()) {
                result.completed = report.flows.len() == *count;
                add_distribution(result, "fct", &report.fcts);
            }
        }
    }
}

/// The name of Sidekick's path-aware CUBIC; each trial registers its own
/// instance, wired to that trial's sidekick engine.
pub const PACUBIC: &str = "pacubic";

/// The sidekick proxy's control address (not on any host's subnet).
pub(crate) const SIDEKICK_PROXY: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 255, 255, 1)),
    1234,
);

/// The sender engine's settings from a scenario's `[sidekick]` table.
pub(crate) fn sidekick_sender_config(spec: &SidekickSpec) -> SenderConfig {
    let interval = match (spec.interval_packets, spec.interval) {
        (Some(n), _) => Interval::Packets(n),
        (None, Some(span)) => {
            Interval::Millis(span.0.as_millis().clamp(1, u128::from(u32::MAX)) as u32)
        }
        (None, None) => unreachable!("checked: the sidekick has an interval"),
    };
    let mut config = SenderConfig::new(interval, spec.threshold);
    config.reorder_threshold = spec.reorder_threshold;
    config
}

/// The client host of type `H`, whether or not a sidekick sender engine
/// sits beside it; records the engine's and the proxy's counters if so.
fn sender_host<'a, H: netsim::Host>(
    engines: &'a impl Engines,
    scenario: &Scenario,
    result: &mut TrialResult,
) -> &'a H {
    let Some(wrapped) = engines.client::<SidekickHost<H, F32>>() else {
        return engines.client::<H>().expect("the client host");
    };
    let stats: SenderStats = wrapped.stats();
    let metrics = &mut result.metrics;
    metrics.insert("sidekick_quacks".into(), stats.quacks as f64);
    metrics.insert("sidekick_retransmitted".into(), stats.retransmitted as f64);
    metrics.insert("sidekick_resets".into(), stats.resets as f64);
    if let Some(proxy) = engines.middlebox::<SidekickProxy>(scenario.middle_index()) {
        metrics.insert("proxy_quacks".into(), proxy.stats().quacks as f64);
    }
    wrapped.inner()
}

/// Records why `who`'s connection closed, if it closed abnormally.
pub(crate) fn add_errors(result: &mut TrialResult, who: &str, record: Option<&ConnRecord>) {
    if let Some(error) = record.and_then(|r| r.error.as_ref()) {
        result.errors.push(format!("{who}: {error}"));
    }
}

/// The data sender's loss counters and, if sampled, its time series.
fn add_sender_counters(result: &mut TrialResult, record: Option<&ConnRecord>) {
    if let Some(record) = record {
        add_series(result, record);
        let stats = &record.stats;
        result
            .metrics
            .insert("sender_lost_packets".into(), stats.lost_packets as f64);
        result
            .metrics
            .insert("sender_sent_packets".into(), stats.sent_packets as f64);
    }
}

/// The sender's sampled time series, if it was sampled.
pub(crate) fn add_series(result: &mut TrialResult, record: &ConnRecord) {
    if record.samples.is_empty() {
        return;
    }
    let mut column = |name: &str, value: &dyn Fn(&quic::Sample) -> f64| {
        let values = record.samples.iter().map(value).collect();
        result.series.insert(name.to_string(), values);
    };
    column("t_s", &|s| s.at.as_secs_f64());
    column("cwnd_bytes", &|s| s.cwnd_bytes as f64);
    // Only controllers that set a pacing rate (BBR) have one.
    if record.samples.iter().any(|s| s.pacing_rate.is_some()) {
        column("pacing_mbps", &|s| {
            s.pacing_rate.map_or(0.0, |r| r.bits_per_sec() as f64 / 1e6)
        });
    }
    column("srtt_ms", &|s| millis(s.smoothed_rtt));
    column("bytes_in_flight", &|s| s.bytes_in_flight as f64);
    column("lost_packets", &|s| s.lost_packets as f64);
    column("spurious_losses", &|s| s.spurious_losses as f64);
}
