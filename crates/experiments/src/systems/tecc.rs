//! TECC (APNet 2023): a MASQUE QUIC-in-QUIC tunnel. The tunnel server runs
//! on the middle node; each flow it serves has the tunnel client beside its
//! client (a host wrapper, like the Sidekick sender), which carries the
//! client's packets to the server through the tunnel; in mode `tecc` the
//! tunnel server's feedback reaches the application server's controller
//! (`tecc`) as QUIC_INFO datagrams relayed by the tunnel client on the
//! end-to-end connection.
//!
//! ```toml
//! middle = { kind = "tecc", mode = "rmdt", tunnel_cc = "bbr" }
//! # mode: mst, msgt (group = 4), mdt, rmdt, mft, tecc; tunnel_cc: none, cubic, bbr, bbr3
//! # (default: bbr for tecc, none otherwise); outer_payload = 1350;
//! # queue_limit = "4MB"; max_retransmissions = 4
//! # tunnel_rate = "pacing" | "sent" (mode tecc: what the feedback reports
//! # as Tr, the tunnel BBR's pacing rate or the bytes sent per cycle)
//! server.controller = "tecc"   # with mode = "tecc"
//! ```

use super::settings::settings;
use super::tecc_daemon::{TunnelDaemon, server_counters};
use super::tecc_limits::TunnelLimits;
use super::{
    Facts, Feeds, OnTestbed, Placement, Problem, ServedClient, System, TrialSetup, client_as,
    engine_as, wrong_middle,
};
use crate::outcome::{FlowNames, TrialResult};
use crate::units::Bytes;
use netsim::{Host, Middlebox, Seed, Time};
use quic::{ConnRecord, QuicConfig, SimClock};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tunnel::{
    AllowList, Mode, RateSource, ServerSample, ServerShared, TunnelClientConfig, TunnelClientHost,
    TunnelServer, TunnelServerConfig, TunnelSettings, UriTemplate,
};

/// The tunnel server's address (not on any host's subnet).
pub const TUNNEL_SERVER: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 255, 255, 2)), 443);
/// The tunnel client's port on its client's IP.
const TUNNEL_CLIENT_PORT: u16 = 5443;
/// The tunnel server's first target-facing port.
const FIRST_PORT: u16 = 20_000;
/// Target-facing ports a testbed node binds (16 per connection).
const TESTBED_PORTS: u16 = 256;

/// The tunnel's mode, as a scenario names it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TunnelMode {
    /// MST: capsules on the CONNECT stream.
    Mst,
    /// MSGT: a group of streams.
    Msgt,
    /// MDT: QUIC DATAGRAM frames.
    Mdt,
    /// RMDT: datagrams the tunnel resends when lost.
    Rmdt,
    /// MFT: QUIC-aware forwarding.
    Mft,
    /// TECC: RMDT with the tunnel server's feedback to the server.
    Tecc,
}

/// The tunnel connection's congestion control.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TunnelCc {
    /// None (the inner connections have their own).
    None,
    /// CUBIC (noq-proto's).
    Cubic,
    /// BBR (ours, deterministic).
    Bbr,
    /// BBRv3 (noq-proto's, its probe timing seeded from the trial's seed).
    Bbr3,
}

/// The TECC tunnel's settings.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawTecc")]
pub struct Tecc {
    /// The mode.
    pub mode: TunnelMode,
    /// Streams per tunnel in MSGT (at least 2).
    pub group: u16,
    /// The tunnel connection's controller.
    pub tunnel_cc: TunnelCc,
    /// The tunnel connection's UDP payload (at least 1250: an inner
    /// 1200-byte packet plus the outer headers).
    pub outer_payload: u16,
    /// The tunnel's queue per direction, bytes.
    pub queue_limit: u64,
    /// RMDT: resends of one datagram at most.
    pub max_retransmissions: u8,
    /// TECC: what the sampler reports as Tr (`tunnel::RateSource`, by its
    /// name). Left out when the default, so that files written before it
    /// existed stay byte-identical.
    #[serde(
        skip_serializing_if = "is_pacing",
        serialize_with = "serialize_rate_source"
    )]
    pub tunnel_rate: RateSource,
    /// The tunnel server's limits (unset: `tunnel::ServerLimits`'
    /// defaults), validated. Left out when unset, so that files written
    /// before it existed stay byte-identical.
    #[serde(skip_serializing_if = "TunnelLimits::is_unset")]
    pub(crate) limits: TunnelLimits,
}

fn is_pacing(rate: &RateSource) -> bool {
    *rate == RateSource::Pacing
}

fn serialize_rate_source<S: serde::Serializer>(
    rate: &RateSource,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(rate.name())
}

settings! {
    /// The TECC tunnel's settings as written.
    pub(crate) struct RawTecc {
        /// The tunnel mode (required): "mst" (capsules on the CONNECT
        /// stream), "msgt" (a group of streams), "mdt" (QUIC datagrams),
        /// "rmdt" (datagrams resent when lost), "mft" (QUIC-aware
        /// forwarding) or "tecc" (RMDT with feedback to the server).
        mode: TunnelMode,
        /// Streams per tunnel in MSGT, 2..=16 (default 4; MSGT only).
        group: u16,
        /// The tunnel connection's congestion control: "none", "cubic" or
        /// "bbr" (default "bbr" for mode "tecc", "none" otherwise).
        tunnel_cc: TunnelCc,
        /// The tunnel connection's UDP payload, 1250..=1452 bytes.
        outer_payload: u16 = 1350,
        /// The tunnel's queue per direction.
        queue_limit: Bytes = Bytes(4_000_000),
        /// RMDT: resends of one datagram at most.
        max_retransmissions: u8 = 4,
        /// Mode "tecc": what the feedback reports as the tunnel's rate,
        /// "pacing" (its controller's pacing rate) or "sent" (the bytes
        /// sent per cycle).
        tunnel_rate: String = RateSource::default().name().to_string(),
        /// The tunnel server's limits, a table whose fields are each
        /// optional (docs/tecc.md lists their ranges).
        limits: TunnelLimits = TunnelLimits::filled(),
    }
}

impl TryFrom<RawTecc> for Tecc {
    type Error = String;

    fn try_from(raw: RawTecc) -> Result<Tecc, String> {
        let Some(mode) = raw.mode else {
            return Err("give `mode`: mst, msgt, mdt, rmdt, mft or tecc".into());
        };
        let group = match (mode, raw.group) {
            (TunnelMode::Msgt, None) => 4,
            (TunnelMode::Msgt, Some(n)) if (2..=16).contains(&n) => n,
            (TunnelMode::Msgt, Some(_)) => return Err("`group` must be 2..=16".into()),
            (_, Some(_)) => return Err("`group` applies to mode = \"msgt\" only".into()),
            (_, None) => 1,
        };
        let outer_payload = raw.outer_payload();
        if !(1250..=1452).contains(&outer_payload) {
            return Err("`outer_payload` must be 1250..=1452".into());
        }
        let queue_limit = raw.queue_limit().0;
        if !(10_000..=1_000_000_000).contains(&queue_limit) {
            return Err("`queue_limit` must be 10kB..1GB".into());
        }
        if raw.tunnel_rate.is_some() && mode != TunnelMode::Tecc {
            return Err("`tunnel_rate` applies to mode = \"tecc\" only".into());
        }
        let tunnel_rate = raw
            .tunnel_rate()
            .parse::<RateSource>()
            .map_err(|e| format!("`tunnel_rate`: {e}"))?;
        let limits = raw.limits.clone().unwrap_or_default();
        limits.server_limits()?;
        let default_cc = match mode {
            TunnelMode::Tecc => TunnelCc::Bbr,
            _ => TunnelCc::None,
        };
        Ok(Tecc {
            mode,
            group,
            tunnel_cc: raw.tunnel_cc.unwrap_or(default_cc),
            outer_payload,
            queue_limit,
            max_retransmissions: raw.max_retransmissions(),
            tunnel_rate,
            limits,
        })
    }
}

impl Tecc {
    /// The tunnel engines' settings.
    pub fn settings(&self) -> TunnelSettings {
        let mode = match self.mode {
            TunnelMode::Mst => Mode::Stream,
            TunnelMode::Msgt => Mode::StreamGroup(self.group),
            TunnelMode::Mdt => Mode::Datagram,
            TunnelMode::Rmdt | TunnelMode::Tecc => Mode::RetransmittedDatagram,
            TunnelMode::Mft => Mode::Forwarding,
        };
        let mut settings = TunnelSettings::new(mode);
        settings.feedback = self.mode == TunnelMode::Tecc;
        settings.queue_limit = usize::try_from(self.queue_limit).unwrap_or(usize::MAX);
        settings.max_retransmissions = self.max_retransmissions;
        settings.sampler.rate = self.tunnel_rate;
        settings
    }

    /// The tunnel connection's QUIC configuration for the endpoint seeded
    /// by `seed`.
    pub fn outer_quic(&self, seed: Seed) -> QuicConfig {
        let controller = match self.tunnel_cc {
            TunnelCc::None => cc::Controller::None,
            TunnelCc::Cubic => cc::Controller::Cubic,
            TunnelCc::Bbr => cc::Controller::Bbr,
            TunnelCc::Bbr3 => cc::Controller::NoqBbr3,
        };
        let clock = SimClock::new();
        let built = controller.build(&cc::ControllerContext::new(seed, clock));
        let base = QuicConfig::new(seed)
            .with_controller(built.factory)
            .with_clock(clock);
        tunnel::outer_config(base, self.outer_payload)
    }

    /// The tunnel server's configuration on `addr` (logging its secrets
    /// and qlog where `quic` does), allowing `allow`, sampling its
    /// sending state every `sample_interval` if given.
    fn server_config(
        &self,
        quic: &QuicConfig,
        seed: Seed,
        addr: SocketAddr,
        allow: AllowList,
        sample_interval: Option<std::time::Duration>,
    ) -> TunnelServerConfig {
        TunnelServerConfig {
            addr,
            quic: super::observed(self.outer_quic(seed.derive("tunnel-server")), quic),
            shared: ServerShared {
                settings: self.settings(),
                template: UriTemplate::default(),
                allow: Arc::new(allow),
                sample_interval,
                limits: self.limits.server_limits().unwrap_or_default(),
            },
            first_port: FIRST_PORT,
        }
    }
}

/// The targets a tunnel server may reach: the router's allowed ones, or
/// the trial's servers.
fn allow_list(trial: &TrialSetup<'_>) -> AllowList {
    match trial.router {
        Some(site) => site
            .allow
            .iter()
            .fold(AllowList::default(), |list, (ip, ports)| {
                list.allow(*ip, ports.clone())
            }),
        None => trial.flows.iter().fold(AllowList::default(), |list, flow| {
            let port = flow.server.port();
            list.allow(flow.server.ip(), port..=port)
        }),
    }
}

/// A client with the tunnel client beside it.
type Wrapped = TunnelClientHost<Box<dyn Host>>;

/// One column of the tunnel's series: its value in a sample.
type Column = fn(&ServerSample) -> f64;

/// The tunnel server's sending state (TECC Figure 4) on the connection
/// from the tunnel client on `client` (the sampled flow's) as columns beside
/// the data sender's series, at the same instants: each row takes the
/// tunnel's last sample at or before it.
fn add_tunnel_series(server: &TunnelServer, client: IpAddr, result: &mut TrialResult) {
    let Some(times) = result.series.get("t_s").cloned() else {
        return;
    };
    let Some(samples) = server.samples_from(client).filter(|s| !s.is_empty()) else {
        return;
    };
    let columns: [(&str, Column); 5] = [
        ("tunnel_queue_kb", |s| s.queue_bytes as f64 / 1000.0),
        ("tunnel_pacing_mbps", |s| {
            s.pacing.map_or(0.0, |r| r.bits_per_sec() as f64 / 1e6)
        }),
        ("tunnel_srtt_ms", |s| s.srtt.as_secs_f64() * 1000.0),
        ("tunnel_cwnd_kb", |s| s.cwnd as f64 / 1000.0),
        ("tunnel_in_flight_kb", |s| s.in_flight as f64 / 1000.0),
    ];
    let mut values = vec![Vec::with_capacity(times.len()); columns.len()];
    let mut next = 0;
    for t in times {
        while samples.get(next).is_some_and(|s| s.at.as_secs_f64() <= t) {
            next += 1;
        }
        let sample = next.checked_sub(1).map(|i| &samples[i]);
        for ((_, read), column) in columns.iter().zip(&mut values) {
            column.push(sample.map_or(0.0, read));
        }
    }
    for ((name, _), column) in columns.iter().zip(values) {
        result.series.insert((*name).into(), column);
    }
}

impl System for Tecc {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if facts.kernel_tcp {
            return wrong_middle(
                "the tunnel carries UDP from our own endpoints: use transport = \"quic\"",
            );
        }
        Ok(())
    }

    fn serves(&self) -> bool {
        true
    }

    fn provides(&self) -> Option<cc::Input> {
        (self.mode == TunnelMode::Tecc).then_some(cc::Input::TunnelFeedback)
    }

    fn address(&self) -> Option<IpAddr> {
        Some(TUNNEL_SERVER.ip())
    }

    fn feeds(&self, _client: &cc::Controller, server: &cc::Controller) -> Feeds {
        let feedback = self.mode == TunnelMode::Tecc;
        let server_datagrams = feedback.then(quic::DatagramChannel::default);
        // The server's controller reads the feedback as signals, decoded
        // from QUIC_INFO as its endpoint receives them.
        let server_signals = server_datagrams
            .as_ref()
            .filter(|_| server.reads(cc::Input::TunnelFeedback))
            .map(|channel| {
                let signals = cc::Signals::default();
                tunnel::deliver_feedback(channel, signals.clone());
                signals
            });
        Feeds {
            client_datagrams: feedback.then(quic::DatagramChannel::default),
            server_datagrams,
            server_signals,
            client_cids: (self.mode == TunnelMode::Mft).then(quic::CidLog::default),
            ..Feeds::default()
        }
    }

    fn middlebox(&self, trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        let (quic, allow) = (trial.quic, allow_list(trial));
        let config =
            self.server_config(quic, trial.seed, TUNNEL_SERVER, allow, quic.sample_interval);
        Some(Box::new(TunnelServer::new(config)))
    }

    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed {
        // A server on sockets of its own: its address and the ports it
        // reaches targets from (16 per client connection).
        let addr = trial.own_addr(TUNNEL_SERVER);
        let server = self.server_config(trial.quic, trial.seed, addr, allow_list(trial), None);
        if let Some(site) = trial.router {
            // A router's daemon: its own workers, one per core.
            let workers = site.workers.unwrap_or_else(tunnel::available_cores);
            return OnTestbed::Server(Box::new(TunnelDaemon::new(server, workers)));
        }
        let mut local = vec![addr];
        local.extend((0..TESTBED_PORTS).map(|i| SocketAddr::new(addr.ip(), FIRST_PORT + i)));
        OnTestbed::Engine {
            engine: Box::new(TunnelServer::new(server)),
            placement: Placement::OwnSockets,
            local,
        }
    }

    fn wrap_client(&self, client: Box<dyn Host>, served: &ServedClient<'_>) -> Box<dyn Host> {
        let seed = served.seed.derive(&served.names.label("tunnel-client"));
        let (client_addr, server) = served.addrs;
        let config = TunnelClientConfig {
            settings: self.settings(),
            quic: super::observed(self.outer_quic(seed), served.quic),
            proxy: TUNNEL_SERVER,
            local: SocketAddr::new(client_addr.ip(), TUNNEL_CLIENT_PORT),
            template: UriTemplate::default(),
            targets: vec![server],
            feedback: served.feeds.client_datagrams.clone(),
            client_cids: served.feeds.client_cids.clone(),
        };
        Box::new(Wrapped::new(client, config))
    }

    fn stats(&self, engine: &dyn Middlebox, _now: Time) -> serde_json::Value {
        let Some(server) = engine_as::<TunnelServer>(Some(engine)) else {
            return serde_json::Value::Null;
        };
        server_counters(&server.stats())
    }

    fn collect(&self, engine: Option<&dyn Middlebox>, result: &mut TrialResult) {
        let Some(server) = engine_as::<TunnelServer>(engine) else {
            return;
        };
        let stats = server.stats();
        let sum = |f: &dyn Fn(&tunnel::ServerStats) -> u64| stats.iter().map(f).sum::<u64>() as f64;
        result.set("tunnel_server_sent", sum(&|s| s.sender.sent));
        result.set(
            "tunnel_server_retransmitted",
            sum(&|s| s.sender.retransmitted),
        );
        result.set("tunnel_server_lost", sum(&|s| s.sender.lost));
        result.set(
            "tunnel_server_dropped",
            sum(&|s| s.sender.dropped + s.dropped),
        );
        result.set("tunnel_feedback", sum(&|s| s.feedback));
        result.set("tunnel_refused", sum(&|s| s.refused));
    }

    fn derive(
        &self,
        engine: Option<&dyn Middlebox>,
        sampled: Option<SocketAddr>,
        result: &mut TrialResult,
    ) {
        if let (Some(server), Some(client)) = (engine_as::<TunnelServer>(engine), sampled) {
            add_tunnel_series(server, client.ip(), result);
        }
        // Rates over the packets the end-to-end sender sent (a one-flow
        // chain): TECC Figure 3's overall retransmission rate, the tunnel's
        // and the sender's retransmissions; and the sender's duplicated
        // retransmissions (TECC §2.2 and §4.2.5), the packets it declared
        // lost and then saw acknowledged, in every mode (behind RMDT, most
        // are packets the tunnel repaired late).
        let get = |name: &str| result.metrics.get(name).copied();
        let Some(sent) = get("sender_sent_packets").filter(|&sent| sent > 0.0) else {
            return;
        };
        let retransmitted = get("tunnel_server_retransmitted")
            .zip(get("sender_lost_packets"))
            .map(|(tunnel, e2e)| tunnel + e2e);
        let duplicated = get("sender_spurious_losses");
        if let Some(retransmitted) = retransmitted {
            result.set("retransmission_rate", retransmitted / sent);
        }
        if let Some(duplicated) = duplicated {
            result.set("spurious_retransmission_rate", duplicated / sent);
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
        let Some(wrapped) = client_as::<Wrapped>(client, "the tunnel client", result) else {
            return (client, None);
        };
        let stats = wrapped.stats();
        result.set(names.metric("tunnel_client_sent"), stats.sender.sent as f64);
        result.set(
            names.metric("tunnel_client_retransmitted"),
            stats.sender.retransmitted as f64,
        );
        result.set(
            names.metric("tunnel_feedback_relayed"),
            wrapped.feedback_relayed() as f64,
        );
        let (up, down) = stats.forwarded;
        result.set(names.metric("tunnel_forwarded"), (up + down) as f64);
        let times = wrapped.setup_times();
        if let (Some(start), Some(open)) = (times.started, times.opened) {
            let setup = open.saturating_duration_since(start);
            result.set(
                names.metric("tunnel_setup_ms"),
                setup.as_secs_f64() * 1000.0,
            );
        }
        if let Some(error) = wrapped.record().and_then(|r| r.error.as_ref()) {
            result
                .errors
                .push(format!("{}: {error}", names.who("tunnel")));
        }
        (wrapped.inner().as_ref(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_rate_reaches_the_sampler_and_is_written_only_when_not_the_default() {
        let plain: Tecc = toml::from_str(r#"mode = "tecc""#).unwrap();
        assert_eq!(plain.settings().sampler.rate, RateSource::Pacing);
        assert!(!toml::to_string(&plain).unwrap().contains("tunnel_rate"));
        let sent: Tecc = toml::from_str("mode = \"tecc\"\ntunnel_rate = \"sent\"").unwrap();
        assert_eq!(sent.settings().sampler.rate, RateSource::Sent);
        assert!(
            toml::to_string(&sent)
                .unwrap()
                .contains("tunnel_rate = \"sent\"")
        );
        // Only TECC's tunnel server samples.
        assert!(toml::from_str::<Tecc>("mode = \"rmdt\"\ntunnel_rate = \"sent\"").is_err());
    }
}
