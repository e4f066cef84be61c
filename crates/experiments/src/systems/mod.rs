//! What runs on the middle node: one module per system, each reached
//! through [`System`] and the one `match` in [`Middle::system`].
//!
//! A system owns everything about itself: its settings (validated when the
//! scenario is read), the checks against the rest of the scenario, the
//! modes it runs in, the engine on its middle node (the same engine in the
//! simulator and, driven on real interfaces, in real mode), what it puts
//! beside the clients it serves (the Sidekick sender engine) and what it
//! feeds their controllers, and the metrics it reads back. Adding one is a
//! module, a variant and an arm.

mod forward;
mod pemi;
mod pep;
mod router;
mod settings;
mod sidekick;
mod split;
mod tecc;
mod tecc_daemon;
mod tecc_limits;

pub use pemi::{PEMI_PROBE, PemiSettings};
pub use pep::Pep;
use settings::Documented;
pub use settings::Setting;
pub use sidekick::{SIDEKICK_PROXY, Sidekick, SidekickInterval, Strawman};
pub use split::Split;
pub use tecc::{TUNNEL_SERVER, Tecc, TunnelCc, TunnelMode};

use crate::outcome::{FlowNames, Mode, TrialResult};
use crate::workloads::{Side, TcpTransfer, Traits};
use netsim::{FateRecord, Host, Middlebox, Seed, Time};
use quic::{ConnRecord, QuicConfig};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What runs on the middle node (`middle = "split"`, or a table with
/// `kind` and the system's settings).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Middle {
    /// A plain router.
    #[default]
    Router,
    /// A router in user space: in real mode the in-path driver carries
    /// every datagram, with an engine that forwards it at once (the
    /// driver's own cost, measured).
    Forward,
    /// The split-connection QUIC proxy.
    Split(Split),
    /// A split-connection TCP PEP (PEPsal-like, transparent with nft
    /// tproxy), for `transport = "tcp"`; real mode only.
    Pep(Pep),
    /// The Sidekick proxy; the clients it serves run the sidekick sender
    /// engine.
    Sidekick(Sidekick),
    /// PEMI, transparent and in the path: loss inference from reply
    /// timing, one-shot retransmission, rate enforcement.
    Pemi(PemiSettings),
    /// A TECC (MASQUE) tunnel server; the clients it serves run the tunnel
    /// client beside them.
    Tecc(Tecc),
}

impl crate::shorthand::Tagged for Middle {
    const TAG: &'static str = "kind";
}

impl Middle {
    /// Its kind, as a `middle` table names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Middle::Router => "router",
            Middle::Forward => "forward",
            Middle::Split(_) => "split",
            Middle::Pep(_) => "pep",
            Middle::Sidekick(_) => "sidekick",
            Middle::Pemi(_) => "pemi",
            Middle::Tecc(_) => "tecc",
        }
    }

    /// Whether it is an engine in the path that terminates no connection:
    /// it acts on the packets that reach it and cannot undo a loss before
    /// them (a loss upstream of it, in the data's direction, is beyond
    /// its reach). From the system's own placement on a testbed and
    /// whether it serves flows, so no system is named.
    pub fn transparent_in_path(&self) -> bool {
        let system = self.system();
        if system.serves() {
            return false;
        }
        let quic = QuicConfig::new(Seed::new(0));
        let trial = TrialSetup {
            seed: Seed::new(0),
            quic: &quic,
            flows: &[],
            topology: Topology::Chain,
            tcp: None,
            router: None,
        };
        matches!(
            system.on_testbed(&trial),
            OnTestbed::Engine {
                placement: Placement::InPath,
                ..
            }
        )
    }

    /// The system's behaviour.
    pub(crate) fn system(&self) -> &dyn System {
        match self {
            Middle::Router => &router::Router,
            Middle::Forward => &forward::UserSpaceRouter,
            Middle::Split(split) => split,
            Middle::Pep(pep) => pep,
            Middle::Sidekick(sidekick) => sidekick,
            Middle::Pemi(pemi) => pemi,
            Middle::Tecc(tecc) => tecc,
        }
    }
}

/// A system a `middle` table can name, as `pepkit middle --help` lists it.
pub struct Entry {
    /// Its kind.
    pub kind: &'static str,
    /// What it is and where it sits.
    pub what: &'static str,
    /// Its settings.
    pub settings: Vec<Setting>,
}

/// Every system a `middle` table can name, with its settings from their
/// one declaration.
pub fn catalogue() -> Vec<Entry> {
    let entry = |kind, what, settings| Entry {
        kind,
        what,
        settings,
    };
    vec![
        entry(
            "router",
            "a plain router: the kernel forwards, nothing runs",
            Vec::new(),
        ),
        entry(
            "forward",
            "a router in user space: the in-path driver forwards every datagram at once",
            Vec::new(),
        ),
        entry(
            "split",
            "the split-connection QUIC proxy, in the path",
            Split::settings(),
        ),
        entry(
            "pep",
            "the split-connection TCP PEP (nftables tproxy), a service of the node's kernel",
            Pep::settings(),
        ),
        entry(
            "sidekick",
            "the Sidekick proxy, beside the path: quACKs to the senders that ask",
            sidekick::RawSidekick::settings(),
        ),
        entry(
            "pemi",
            "PEMI, in the path: infers losses of unmodified QUIC and resends them",
            pemi::RawPemi::settings(),
        ),
        entry(
            "tecc",
            "the TECC / MASQUE tunnel server (CONNECT-UDP), on its own sockets",
            tecc::RawTecc::settings(),
        ),
    ]
}

/// A problem with a scenario: the field and what is wrong.
pub(crate) type Problem = (String, String);

/// A positive count, or the problem with setting `field` to 0.
pub(crate) fn positive(field: &str, value: usize) -> Result<(), Problem> {
    match value {
        0 => Err((format!("middle.{field}"), "must be at least 1".into())),
        _ => Ok(()),
    }
}

/// A check's verdict that the `middle` system does not fit the rest of the
/// scenario, `why` saying what to change.
pub(crate) fn wrong_middle(why: &str) -> Result<(), Problem> {
    Err(("middle".into(), why.into()))
}

/// What a system's checks may look at in the rest of the scenario.
pub(crate) struct Facts {
    /// The workload's traits.
    pub workload: Traits,
    /// Hops on the path.
    pub hops: usize,
    /// Whether Linux TCP carries the traffic (`transport = "tcp"`).
    pub kernel_tcp: bool,
}

/// How the trial's nodes are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// Client — hops — server; the system's node has the client side on
    /// interface 0.
    Chain,
    /// Flows sharing a bottleneck; the system runs on the left router,
    /// whose interface 0 is the bottleneck.
    Dumbbell,
}

/// What a system passes between a served flow's endpoints, its
/// controllers and what it puts beside the client: each present only when
/// something reads it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Feeds {
    /// The signals the system produces for the client's controller (a
    /// sidekick's near-segment signals).
    pub client_signals: Option<cc::Signals>,
    /// The signals the system produces for the server's controller (a TECC
    /// tunnel's feedback).
    pub server_signals: Option<cc::Signals>,
    /// Datagrams the client endpoint sends for what is beside it (TECC's
    /// QUIC_INFO, queued by the tunnel client).
    pub client_datagrams: Option<quic::DatagramChannel>,
    /// Datagrams the server endpoint receives (TECC's QUIC_INFO, turned
    /// into the server's signals when its controller reads them).
    pub server_datagrams: Option<quic::DatagramChannel>,
    /// The connection IDs the client endpoint issues (QUIC-aware
    /// forwarding registers them).
    pub client_cids: Option<quic::CidLog>,
}

/// A served flow's client as the system wraps it.
pub(crate) struct ServedClient<'a> {
    /// The trial's seed.
    pub seed: Seed,
    /// The flow's data sender.
    pub data_sender: Side,
    /// How the flow is named.
    pub names: &'a FlowNames,
    /// The client's and the server's addresses.
    pub addrs: (SocketAddr, SocketAddr),
    /// What the system passes between the flow's parts.
    pub feeds: Feeds,
    /// The QUIC configuration the client's own endpoints start from: a
    /// QUIC endpoint the system adds beside the client (the tunnel
    /// client) logs its secrets and qlog where it says ([`observed`]).
    pub quic: &'a QuicConfig,
}

/// A flow the system serves, as its engine is built.
pub(crate) struct ServedFlow<'a> {
    /// The server's address.
    pub server: SocketAddr,
    /// The flow's data sender.
    pub data_sender: Side,
    /// The client's controller.
    pub client_controller: &'a cc::Controller,
    /// The server's controller.
    pub server_controller: &'a cc::Controller,
}

/// An operator's router, as a daemon runs a system on it (`pepkit
/// middle`): what the router gives the system in place of a trial's
/// flows and the scenario's fixed addresses.
#[derive(Clone, Debug, Default)]
pub struct Site {
    /// The system's own address on the router (port 0: the system's
    /// default port).
    pub addr: Option<SocketAddr>,
    /// Where the system may lead traffic (the tunnel server's targets):
    /// an address and a range of ports each.
    pub allow: Vec<(IpAddr, RangeInclusive<u16>)>,
    /// Worker threads of a server with several (the tunnel server;
    /// `None`: one per core the daemon may run on).
    pub workers: Option<usize>,
}

/// A trial as a system sees it while its engine is built — or, with
/// `router`, an operator's router (no flows: the system serves whatever
/// comes).
pub(crate) struct TrialSetup<'a> {
    /// The trial's seed.
    pub seed: Seed,
    /// The configuration every QUIC endpoint starts from.
    pub quic: &'a QuicConfig,
    /// The flows it serves.
    pub flows: &'a [ServedFlow<'a>],
    /// The layout.
    pub topology: Topology,
    /// The Linux TCP transfer, when the kernel carries the traffic.
    pub tcp: Option<&'a TcpTransfer>,
    /// The router a daemon runs on (`None`: a trial's node).
    pub router: Option<&'a Site>,
}

impl TrialSetup<'_> {
    /// The system's own address: the router's if it gives one (with
    /// `default`'s port where it names none), else `default`, the
    /// scenario's.
    pub(crate) fn own_addr(&self, default: SocketAddr) -> SocketAddr {
        match self.router.and_then(|site| site.addr) {
            Some(addr) if addr.port() == 0 => SocketAddr::new(addr.ip(), default.port()),
            Some(addr) => addr,
            None => default,
        }
    }
}

/// How a system runs on a testbed's middle node.
pub(crate) enum OnTestbed {
    /// The node routes.
    Router,
    /// An engine on the node's interfaces, as the simulator runs it.
    Engine {
        /// The engine.
        engine: Box<dyn Middlebox>,
        /// In the path or beside it.
        placement: Placement,
        /// Socket addresses of the node that are the engine's own: what
        /// arrives there goes to the engine only.
        local: Vec<SocketAddr>,
    },
    /// A service of the node's own kernel (the split TCP PEP).
    Service(Box<dyn Service>),
    /// A server on sockets of its own with worker threads of its own (the
    /// tunnel server as a router's daemon).
    Server(Box<dyn Server>),
}

/// Where an engine runs on a real node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The node does not forward; the engine sees every datagram and
    /// decides what leaves, when.
    InPath,
    /// The kernel forwards; the engine sees copies of what arrives on the
    /// node's interfaces (from either side) and sends only its own
    /// datagrams.
    Beside,
    /// The kernel forwards; the engine sees only what arrives on its own
    /// sockets (its addresses), as a server does.
    OwnSockets,
}

impl OnTestbed {
    /// The IPv4 addresses of an engine's own sockets (real mode is IPv4
    /// only).
    pub(crate) fn ipv4(local: Vec<SocketAddr>) -> Vec<std::net::SocketAddrV4> {
        local
            .into_iter()
            .filter_map(|addr| match addr {
                SocketAddr::V4(v4) => Some(v4),
                SocketAddr::V6(_) => None,
            })
            .collect()
    }
}

/// The simulator's ground truth around the system's node on a chain: the
/// fate of every datagram on the hop to the client's side and on the hop
/// to the server's side, each way.
pub(crate) struct NodeTruth<'a> {
    /// From the node towards the client.
    pub to_client: &'a [FateRecord],
    /// From the client's side towards the node.
    pub from_client: &'a [FateRecord],
    /// From the node towards the server.
    pub to_server: &'a [FateRecord],
    /// From the server's side towards the node.
    pub from_server: &'a [FateRecord],
    /// The path's end-to-end propagation RTT.
    pub e2e_rtt: std::time::Duration,
}

/// Something that runs on a middle node's own kernel in real mode.
pub(crate) trait Service: Send {
    /// Runs in the node's network namespace (the calling thread's) until
    /// `stop`; calls `ready` once it serves. Returns its counters as
    /// metrics.
    fn run(
        self: Box<Self>,
        stop: Arc<AtomicBool>,
        ready: &dyn Fn(),
    ) -> Result<Vec<(String, f64)>, String>;
}

/// A server a router's daemon runs on threads of its own.
pub(crate) trait Server: Send {
    /// Runs in the calling thread's network namespace until `stop`,
    /// writing its counters to `log` every `every` (as the middlebox
    /// driver's daemons do); returns its counters.
    fn run(
        self: Box<Self>,
        stop: &AtomicBool,
        every: Option<std::time::Duration>,
        log: &mut dyn std::io::Write,
    ) -> Result<serde_json::Value, String>;
}

/// A middle system's behaviour. The provided methods describe a system
/// that has no address, feeds no controller, puts nothing beside its
/// clients and counts nothing.
pub(crate) trait System {
    /// Checks what its settings' types cannot say, on their own: run for a
    /// scenario and for a router daemon alike (by default, nothing).
    fn check_settings(&self) -> Result<(), Problem> {
        Ok(())
    }

    /// Checks it against the rest of the scenario.
    fn check(&self, facts: &Facts) -> Result<(), Problem>;

    /// Why it cannot run in `mode`, if it cannot (by default it runs in
    /// both).
    fn unsupported_in(&self, _mode: Mode) -> Option<&'static str> {
        None
    }

    /// Whether it can serve flows (`[[flows]]` with `middle = true`).
    fn serves(&self) -> bool;

    /// The engine on its node for a simulated trial (`None`: a router).
    fn middlebox(&self, trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>>;

    /// How it runs on a testbed.
    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed;

    /// What it feeds the controllers of the flows it serves.
    fn provides(&self) -> Option<cc::Input> {
        None
    }

    /// What it passes between a served flow's parts, given its
    /// controllers (see [`Feeds`]).
    fn feeds(&self, _client: &cc::Controller, _server: &cc::Controller) -> Feeds {
        Feeds::default()
    }

    /// Its own address on its node, if it has one.
    fn address(&self) -> Option<IpAddr> {
        None
    }

    /// The client of a flow it serves, with what it puts beside it.
    fn wrap_client(&self, client: Box<dyn Host>, _served: &ServedClient<'_>) -> Box<dyn Host> {
        client
    }

    /// Records what its engine counted, once per trial.
    fn collect(&self, _engine: Option<&dyn Middlebox>, _result: &mut TrialResult) {}

    /// On a router: what its engine counted at `now`, for the daemon's
    /// reports.
    fn stats(&self, _engine: &dyn Middlebox, _now: Time) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// On a router: its table at `now` (what its rows are, one line each),
    /// which the daemon writes on SIGUSR1.
    fn table(&self, _engine: &dyn Middlebox, _now: Time) -> Option<(&'static str, Vec<String>)> {
        None
    }

    /// Whether it measures itself against the simulator's ground truth
    /// ([`NodeTruth`]; chains only).
    fn wants_truth(&self) -> bool {
        false
    }

    /// Records what it can measure against the ground truth, once per
    /// simulated chain trial.
    fn collect_truth(
        &self,
        _engine: Option<&dyn Middlebox>,
        _truth: &NodeTruth<'_>,
        _result: &mut TrialResult,
    ) {
    }

    /// Derives metrics (and time-series columns) of its own from
    /// everything the trial recorded, its engine's and the workload's,
    /// once per trial, last; `sampled` is the client address of the flow
    /// whose series is recorded.
    fn derive(
        &self,
        _engine: Option<&dyn Middlebox>,
        _sampled: Option<SocketAddr>,
        _result: &mut TrialResult,
    ) {
    }

    /// A served flow after the trial: records what it put beside the
    /// client and returns the workload's own client host and the
    /// connection that carried the client's data beyond the node, if the
    /// system terminated the client's.
    fn open_flow<'a>(
        &self,
        client: &'a dyn Host,
        _engine: Option<&'a dyn Middlebox>,
        _flow: (SocketAddr, SocketAddr),
        _names: &FlowNames,
        _result: &mut TrialResult,
    ) -> (&'a dyn Host, Option<&'a ConnRecord>) {
        (client, None)
    }
}

/// `engine` as a `T`, if it is one.
pub(crate) fn engine_as<T: Middlebox>(engine: Option<&dyn Middlebox>) -> Option<&T> {
    let any: &dyn std::any::Any = engine?;
    any.downcast_ref()
}

/// The client-side companion `W` a system wrapped around `client`; if it
/// is missing, says so in `result` as "client: `what` is missing".
pub(crate) fn client_as<'a, W: Host>(
    client: &'a dyn Host,
    what: &str,
    result: &mut TrialResult,
) -> Option<&'a W> {
    let any: &dyn std::any::Any = client;
    let wrapped = any.downcast_ref();
    if wrapped.is_none() {
        result.errors.push(format!("client: {what} is missing"));
    }
    wrapped
}

/// `config` with the key log and qlog collection of `base`, if it has
/// them: a system's own QUIC endpoint (a tunnel's) in a captured trial.
pub(crate) fn observed(mut config: QuicConfig, base: &QuicConfig) -> QuicConfig {
    if let Some(keylog) = &base.keylog {
        config = config.with_keylog(keylog.clone());
    }
    #[cfg(feature = "qlog")]
    if let Some(qlog) = &base.qlog {
        config = config.with_qlog(qlog.clone());
    }
    config
}

/// A QUIC configuration with `controller`, built for an endpoint with
/// nothing beside it (the split proxy's legs).
pub(crate) fn quic_with(base: &QuicConfig, controller: &cc::Controller, seed: Seed) -> QuicConfig {
    let clock = quic::SimClock::new();
    let built = controller.build(&cc::ControllerContext::new(seed, clock));
    base.clone()
        .with_controller(built.factory)
        .with_clock(clock)
}
