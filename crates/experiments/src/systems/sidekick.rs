//! Sidekick (NSDI 2024): the proxy engine on the middle node quACKs the
//! packets of the clients that ask, and each client it serves runs the
//! sidekick sender engine beside its socket, whose events feed the
//! client's controller (PACUBIC).
//!
//! ```toml
//! middle = { kind = "sidekick", interval = "30ms", threshold = 10 }
//! # or interval_packets = 2; reorder_threshold = 3 (default);
//! # strawman = { kind = "echo" } or { kind = "window", size = 3 }
//! ```

use super::{
    Facts, Feeds, OnTestbed, Placement, Problem, ServedClient, System, TrialSetup, client_as,
    engine_as, wrong_middle,
};
use crate::outcome::{FlowNames, TrialResult};
use crate::units::Span;
use crate::workloads::Side;
use netsim::{Host, Middlebox, Seed};
use quack::F32;
use quic::ConnRecord;
use serde::{Deserialize, Serialize};
use sidekick::wire::Interval;
use sidekick::{ProxyConfig, SenderConfig, SidekickHost, SidekickProxy};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The sidekick proxy's control address (not on any host's subnet).
pub const SIDEKICK_PROXY: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 255, 255, 1)), 1234);

/// The sidekick's settings.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawSidekick")]
pub struct Sidekick {
    /// How often the proxy quACKs.
    pub interval: SidekickInterval,
    /// The threshold t (at least 1).
    pub threshold: u8,
    /// A missing packet is lost once this many later packets have been
    /// received (default 3).
    pub reorder_threshold: u32,
    /// Replace the power sum with a strawman of §3.3 (default: none).
    pub strawman: Option<Strawman>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSidekick {
    #[serde(default)]
    interval_packets: Option<u32>,
    #[serde(default)]
    interval: Option<Span>,
    threshold: u8,
    #[serde(default = "three")]
    reorder_threshold: u32,
    #[serde(default)]
    strawman: Option<Strawman>,
}

fn three() -> u32 {
    3
}

impl TryFrom<RawSidekick> for Sidekick {
    type Error = String;

    fn try_from(raw: RawSidekick) -> Result<Sidekick, String> {
        if let Some(Strawman::Window { size }) = raw.strawman
            && !(1..=255).contains(&size)
        {
            return Err("`strawman.size` must be 1..=255".into());
        }
        if raw.threshold == 0 {
            return Err("`threshold` must be at least 1".into());
        }
        let interval = match (raw.interval_packets, raw.interval) {
            (Some(0), _) => return Err("`interval_packets` must be at least 1".into()),
            (Some(n), None) => SidekickInterval::Packets(n),
            (None, Some(span)) if span.0 >= Duration::from_millis(1) => {
                SidekickInterval::Every(span)
            }
            (None, Some(_)) => return Err("`interval` must be at least 1ms".into()),
            _ => return Err("give one of `interval_packets` or `interval`".into()),
        };
        Ok(Sidekick {
            interval,
            threshold: raw.threshold,
            reorder_threshold: raw.reorder_threshold,
            strawman: raw.strawman,
        })
    }
}

impl Sidekick {
    /// The sender engine's settings.
    fn sender_config(&self) -> SenderConfig {
        let interval = match self.interval {
            SidekickInterval::Packets(n) => Interval::Packets(n),
            SidekickInterval::Every(span) => {
                Interval::Millis(span.0.as_millis().clamp(1, u128::from(u32::MAX)) as u32)
            }
        };
        let mut config = SenderConfig::new(interval, self.threshold);
        config.reorder_threshold = self.reorder_threshold;
        config
    }

    /// The proxy engine's settings for trial seed `seed`: in the path
    /// (forwarding what it sees), or beside it (the kernel forwards).
    pub fn proxy_config(&self, seed: Seed, forward: bool) -> ProxyConfig {
        let mut config = ProxyConfig::new(SIDEKICK_PROXY, seed.derive("sidekick-proxy"));
        config.strawman = self.strawman.map(|strawman| match strawman {
            Strawman::Echo => quack::Scheme::Echo,
            Strawman::Window { size } => quack::Scheme::Window { size },
        });
        config.forward = forward;
        config
    }
}

/// A client with the sender engine beside it.
type Wrapped = SidekickHost<Box<dyn Host>, F32>;

impl System for Sidekick {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if facts.kernel_tcp {
            return wrong_middle(
                "the sidekick sender runs beside our own endpoints: use transport = \"quic\"",
            );
        }
        if facts.workload.data_sender != Side::Client {
            return wrong_middle(
                "the sidekick helps the client as a data sender: use it with the media \
                 workload or a bulk upload",
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
        let proxy = SidekickProxy::new(self.proxy_config(trial.seed, true));
        Some(Box::new(proxy))
    }

    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed {
        OnTestbed::Engine {
            engine: Box::new(SidekickProxy::new(self.proxy_config(trial.seed, false))),
            placement: Placement::Beside,
            local: vec![SIDEKICK_PROXY],
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
        let seed = served.seed.derive(&served.names.label("sidekick"));
        let host = Wrapped::new(client, self.sender_config(), seed);
        match served.feeds.client_signals.clone() {
            Some(signals) => Box::new(host.with_signals(signals)),
            None => Box::new(host),
        }
    }

    fn collect(&self, engine: Option<&dyn Middlebox>, result: &mut TrialResult) {
        if let Some(proxy) = engine_as::<SidekickProxy>(engine) {
            result.set("proxy_quacks", proxy.stats().quacks as f64);
        }
    }

    fn open_flow<'a>(
        &self,
        client: &'a dyn Host,
        _engine: Option<&'a dyn Middlebox>,
        _flow: (SocketAddr, SocketAddr),
        names: &FlowNames,
        result: &mut TrialResult,
    ) -> (&'a dyn Host, Option<&'a ConnRecord>) {
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
