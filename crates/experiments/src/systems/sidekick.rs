//! Sidekick (NSDI 2024): the proxy engine on the middle node quACKs the
//! packets of the clients that ask, and each client it serves as a data
//! sender (an upload, the media workload) runs the sidekick sender engine
//! beside its socket, whose events feed the client's controller (PACUBIC).
//! For a flow whose data sender is the server (a download), the roles turn
//! around ([`sidekick::relay`]): the node resends the server's datagrams
//! from quACKs that the client sends, and the server is unmodified.
//!
//! ```toml
//! middle = { kind = "sidekick", interval = "30ms", threshold = 10 }
//! # or interval_packets = 2; reorder_threshold = 3 (default);
//! # strawman = { kind = "echo" } or { kind = "window", size = 3 }
//! ```

use super::settings::settings;
use super::{
    Facts, Feeds, OnTestbed, Placement, Problem, ServedClient, System, TrialSetup, client_as,
    engine_as, wrong_middle,
};
use crate::outcome::{FlowNames, TrialResult};
use crate::units::Span;
use crate::workloads::Side;
use netsim::{Host, Middlebox, Seed, Time};
use quack::F32;
use quic::ConnRecord;
use serde::{Deserialize, Serialize};
use sidekick::wire::Interval;
use sidekick::{
    FlowSummary, ProxyConfig, QuackingHost, Relay, SenderConfig, SidekickHost, SidekickProxy,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The sidekick proxy's control address (not on any host's subnet).
pub const SIDEKICK_PROXY: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 255, 255, 1)), 1234);

/// The sidekick's settings.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawSidekick")]
pub struct Sidekick {
    /// What the senders it serves ask of the proxy: how often it quACKs
    /// and the threshold t (at least 1). A scenario gives them; a router's
    /// proxy takes each flow's from its sender.
    pub quacks: Option<(SidekickInterval, u8)>,
    /// A missing packet is lost once this many later packets have been
    /// received (default 3).
    pub reorder_threshold: u32,
    /// Replace the power sum with a strawman of §3.3 (default: none).
    pub strawman: Option<Strawman>,
    /// The proxy's bounds on its flow table.
    pub limits: ProxyLimits,
}

/// The bounds of the proxy's flow table ([`ProxyConfig`]'s).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct ProxyLimits {
    /// Flows kept at most; requests beyond get no reply.
    pub max_flows: usize,
    /// A configured flow without packets for this long is forgotten.
    pub idle_timeout: Span,
    /// A flow its sender never configured is forgotten after this long.
    pub unconfigured_timeout: Span,
    /// How many of a flow's latest session IDs are accepted.
    pub session_window: usize,
    /// The largest quota a sender can hold.
    pub max_quota: u32,
}

/// How often the proxy quACKs.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub enum SidekickInterval {
    /// Every this many packets (at least 1).
    Packets(u32),
    /// Every this long (at least 1 ms).
    Every(Span),
}

/// A strawman quACK (Sidekick §3.3), for overhead comparisons.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Strawman {
    /// 1a: each quACK echoes one identifier.
    Echo,
    /// 1b: each quACK carries the last `size` identifiers (1..=255).
    Window {
        /// Identifiers per quACK.
        size: usize,
    },
}

/// The proxy engine's defaults (its bounds).
fn proxy_defaults() -> ProxyConfig {
    ProxyConfig::new(SIDEKICK_PROXY, Seed::new(0))
}

settings! {
    /// The sidekick's settings as written.
    pub(crate) struct RawSidekick {
        /// The senders ask for a quACK every this many packets (give this
        /// or `interval` with `threshold` in a scenario; on a router each
        /// sender asks its own).
        interval_packets: u32,
        /// The senders ask for a quACK every this long, at least 1ms.
        interval: Span,
        /// The senders' quACK threshold t, at least 1.
        threshold: u8,
        /// A missing packet is lost once this many later packets have been
        /// received.
        reorder_threshold: u32 = 3,
        /// A strawman of §3.3 instead of the power sum: `{ kind = "echo" }`
        /// or `{ kind = "window", size = N }` (N in 1..=255).
        strawman: Strawman,
        /// The proxy's flow table holds at most this many flows; requests
        /// beyond get no reply.
        max_flows: usize = proxy_defaults().max_flows,
        /// A configured flow without packets for this long is forgotten.
        idle_timeout: Span = Span(proxy_defaults().idle_timeout),
        /// A flow its sender never configured is forgotten after this long.
        unconfigured_timeout: Span = Span(proxy_defaults().unconfigured_timeout),
        /// How many of a flow's latest session IDs the proxy accepts (lost
        /// quACKs do not lock the sender out), at least 1.
        session_window: usize = proxy_defaults().session_window,
        /// The largest quota (quACKs granted and not yet sent) a sender can
        /// hold.
        max_quota: u32 = proxy_defaults().max_quota,
    }
}

impl TryFrom<RawSidekick> for Sidekick {
    type Error = String;

    fn try_from(raw: RawSidekick) -> Result<Sidekick, String> {
        if let Some(Strawman::Window { size }) = raw.strawman
            && !(1..=255).contains(&size)
        {
            return Err("`strawman.size` must be 1..=255".into());
        }
        if raw.session_window() == 0 {
            return Err("`session_window` must be at least 1".into());
        }
        let interval = match (raw.interval_packets, raw.interval) {
            (Some(0), _) => return Err("`interval_packets` must be at least 1".into()),
            (Some(n), None) => Some(SidekickInterval::Packets(n)),
            (None, Some(span)) if span.0 >= Duration::from_millis(1) => {
                Some(SidekickInterval::Every(span))
            }
            (None, Some(_)) => return Err("`interval` must be at least 1ms".into()),
            (Some(_), Some(_)) => {
                return Err("give one of `interval_packets` or `interval`".into());
            }
            (None, None) => None,
        };
        let quacks = match (interval, raw.threshold) {
            (_, Some(0)) => return Err("`threshold` must be at least 1".into()),
            (Some(interval), Some(threshold)) => Some((interval, threshold)),
            (None, None) => None,
            (Some(_), None) => return Err("give `threshold`, the quACK threshold t".into()),
            (None, Some(_)) => {
                return Err("give one of `interval_packets` or `interval` with `threshold`".into());
            }
        };
        Ok(Sidekick {
            quacks,
            reorder_threshold: raw.reorder_threshold(),
            strawman: raw.strawman,
            limits: ProxyLimits {
                max_flows: raw.max_flows(),
                idle_timeout: raw.idle_timeout(),
                unconfigured_timeout: raw.unconfigured_timeout(),
                session_window: raw.session_window(),
                max_quota: raw.max_quota(),
            },
        })
    }
}

impl Sidekick {
    /// The sender engine's settings (checked to be given when a scenario
    /// uses the sidekick: [`System::check`]).
    fn sender_config(&self) -> SenderConfig {
        let (interval, threshold) = self.quacks.unwrap_or((SidekickInterval::Packets(1), 1));
        let interval = match interval {
            SidekickInterval::Packets(n) => Interval::Packets(n),
            SidekickInterval::Every(span) => {
                Interval::Millis(span.0.as_millis().clamp(1, u128::from(u32::MAX)) as u32)
            }
        };
        let mut config = SenderConfig::new(interval, threshold);
        config.reorder_threshold = self.reorder_threshold;
        config
    }

    /// The proxy engine's settings for trial seed `seed`: in the path
    /// (forwarding what it sees), or beside it (the kernel forwards).
    pub fn proxy_config(&self, seed: Seed, forward: bool) -> ProxyConfig {
        self.proxy_config_at(SIDEKICK_PROXY, seed, forward)
    }

    /// The proxy engine's settings with its control address at `control`.
    fn proxy_config_at(&self, control: SocketAddr, seed: Seed, forward: bool) -> ProxyConfig {
        let mut config = ProxyConfig::new(control, seed.derive("sidekick-proxy"));
        let limits = self.limits;
        config.max_flows = limits.max_flows;
        config.idle_timeout = limits.idle_timeout.0;
        config.unconfigured_timeout = limits.unconfigured_timeout.0;
        config.session_window = limits.session_window;
        config.max_quota = limits.max_quota;
        config.strawman = self.strawman.map(|strawman| match strawman {
            Strawman::Echo => quack::Scheme::Echo,
            Strawman::Window { size } => quack::Scheme::Window { size },
        });
        config.forward = forward;
        config
    }
}

/// A data sender with the sender engine beside it.
type Wrapped = SidekickHost<Box<dyn Host>, F32>;

/// A data receiver (the client of a download) that quACKs to the relay.
type Receiver = QuackingHost<Box<dyn Host>>;

impl System for Sidekick {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if self.quacks.is_none() {
            return wrong_middle(
                "give the senders' quACKs: `threshold` and `interval` or `interval_packets`",
            );
        }
        if facts.kernel_tcp {
            return wrong_middle(
                "the sidekick sender runs beside our own endpoints: use transport = \"quic\"",
            );
        }
        Ok(())
    }

    fn serves(&self) -> bool {
        true
    }

    fn provides(&self) -> Option<cc::Input> {
        Some(cc::Input::NearSegment)
    }

    fn address(&self) -> Option<IpAddr> {
        Some(SIDEKICK_PROXY.ip())
    }

    fn middlebox(&self, trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        Some(self.engine(trial, SIDEKICK_PROXY, true))
    }

    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed {
        let control = trial.own_addr(SIDEKICK_PROXY);
        OnTestbed::Engine {
            engine: self.engine(trial, control, false),
            placement: Placement::Beside,
            local: vec![control],
        }
    }

    fn feeds(&self, client: &cc::Controller, _server: &cc::Controller) -> Feeds {
        let reads = client.requires().map(|(input, _)| input) == Some(cc::Input::NearSegment);
        Feeds {
            client_signals: reads.then(cc::Signals::default),
            ..Feeds::default()
        }
    }

    fn wrap_client(&self, client: Box<dyn Host>, served: &ServedClient<'_>) -> Box<dyn Host> {
        match served.data_sender {
            Side::Client => self.wrap(client, served, served.feeds.client_signals.clone()),
            Side::Server => {
                let seed = served.seed.derive(&served.names.label("sidekick-receiver"));
                let config = self.proxy_config(seed, false);
                Box::new(QuackingHost::new(client, served.addrs.0, config))
            }
        }
    }

    fn collect(&self, engine: Option<&dyn Middlebox>, result: &mut TrialResult) {
        if let Some(proxy) = engine_as::<SidekickProxy>(engine) {
            result.set("proxy_quacks", proxy.stats().quacks as f64);
        }
        if let Some(relay) = engine_as::<Relay<F32>>(engine) {
            result.set("proxy_quacks", relay.proxy().stats().quacks as f64);
            let stats = relay.stats();
            result.set("proxy_received_quacks", stats.quacks as f64);
            result.set("proxy_retransmitted", stats.retransmitted as f64);
        }
    }

    fn stats(&self, engine: &dyn Middlebox, now: Time) -> serde_json::Value {
        let Some(proxy) = engine_as::<SidekickProxy>(Some(engine)) else {
            return serde_json::Value::Null;
        };
        let mut stats = serde_json::to_value(proxy.stats()).unwrap_or_default();
        stats["flows"] = proxy.flow_count().into();
        let configured = proxy.flows(now).iter().filter(|f| f.configured()).count();
        stats["configured_flows"] = configured.into();
        stats
    }

    fn table(&self, engine: &dyn Middlebox, now: Time) -> Option<(&'static str, Vec<String>)> {
        let proxy = engine_as::<SidekickProxy>(Some(engine))?;
        Some(("flows", proxy.flows(now).iter().map(flow_line).collect()))
    }

    fn open_flow<'a>(
        &self,
        client: &'a dyn Host,
        _engine: Option<&'a dyn Middlebox>,
        _flow: (SocketAddr, SocketAddr),
        names: &FlowNames,
        result: &mut TrialResult,
    ) -> (&'a dyn Host, Option<&'a ConnRecord>) {
        let any: &dyn std::any::Any = client;
        if let Some(receiver) = any.downcast_ref::<Receiver>() {
            let quacks = receiver.engine().stats().quacks;
            result.set(names.metric("receiver_quacks"), quacks as f64);
            return (receiver.inner().as_ref(), None);
        }
        let Some(wrapped) = client_as::<Wrapped>(client, "the sidekick sender engine", result)
        else {
            return (client, None);
        };
        let stats = wrapped.stats();
        result.set(names.metric("sidekick_quacks"), stats.quacks as f64);
        result.set(
            names.metric("sidekick_retransmitted"),
            stats.retransmitted as f64,
        );
        result.set(names.metric("sidekick_resets"), stats.resets as f64);
        (wrapped.inner().as_ref(), None)
    }
}

impl Sidekick {
    /// The engine on the node, with its control address at `control`:
    /// the proxy, or, when it serves a flow whose data sender is the
    /// server, the relay around it.
    fn engine(
        &self,
        trial: &TrialSetup<'_>,
        control: SocketAddr,
        forward: bool,
    ) -> Box<dyn Middlebox> {
        let config = self.proxy_config_at(control, trial.seed, forward);
        let remote: Vec<IpAddr> = trial
            .flows
            .iter()
            .filter(|flow| flow.data_sender == Side::Server)
            .map(|flow| flow.server.ip())
            .collect();
        if remote.is_empty() {
            return Box::new(SidekickProxy::new(config));
        }
        let seed = trial.seed.derive("sidekick-relay");
        Box::new(Relay::<F32>::new(
            config,
            self.sender_config(),
            remote,
            seed,
        ))
    }

    /// `sender`, the data sender of a served flow, with the sender engine
    /// beside it, pushing its signals to `signals` if its controller reads
    /// them.
    fn wrap(
        &self,
        sender: Box<dyn Host>,
        served: &ServedClient<'_>,
        signals: Option<cc::Signals>,
    ) -> Box<dyn Host> {
        let seed = served.seed.derive(&served.names.label("sidekick"));
        let host = Wrapped::new(sender, self.sender_config(), seed);
        match signals {
            Some(signals) => Box::new(host.with_signals(signals)),
            None => Box::new(host),
        }
    }
}

/// One of the proxy's flows as a line of its table.
fn flow_line(flow: &FlowSummary) -> String {
    let state = match (&flow.config, flow.peer) {
        (Some(c), Some(peer)) => {
            let interval = match c.interval {
                Interval::Packets(n) => format!("{n}pkt"),
                Interval::Millis(ms) => format!("{ms}ms"),
            };
            format!(
                "configured interval={interval} threshold={} id={}B@{} quacks_to={peer}",
                c.threshold, c.id_bytes, c.id_offset
            )
        }
        _ => "unconfigured".to_string(),
    };
    format!(
        "flow {} -> {} {state} quota_left={} epoch={} pending={} idle={:.3}s",
        flow.sender,
        flow.receiver,
        flow.quota_left,
        flow.epoch,
        flow.pending,
        flow.idle.as_secs_f64()
    )
}
