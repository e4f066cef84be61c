//! The scenario file as written: serde types that mirror the TOML, with
//! defaults, units and unknown-field errors. `validate` turns one into a
//! [`super::Scenario`].

use crate::figure::Plot;
use crate::systems::Middle;
use crate::units::{BitRate, Bytes, Span};
use crate::workloads::Workload;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A whole scenario (with one variant merged in), as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: String,
    pub title: String,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub figure: Option<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default = "default_trials")]
    pub trials: u32,
    #[serde(default = "default_time_limit")]
    pub time_limit: Span,
    #[serde(default)]
    pub max_udp_payload: Option<u16>,
    #[serde(default)]
    pub sample_interval: Option<Span>,
    /// The flow whose data sender's samples are recorded, by name
    /// (default: the first).
    #[serde(default)]
    pub sample_flow: Option<String>,
    /// The client (default: at [`DEFAULT_CLIENT`]).
    #[serde(default = "RawEndpoint::client", deserialize_with = "client")]
    pub client: RawEndpoint,
    /// The server (default: at [`DEFAULT_SERVER`]).
    #[serde(default = "RawEndpoint::server", deserialize_with = "server")]
    pub server: RawEndpoint,
    pub path: Vec<String>,
    pub hops: BTreeMap<String, RawHop>,
    #[serde(default, deserialize_with = "crate::shorthand::tagged")]
    pub middle: Middle,
    #[serde(default)]
    pub middle_after: Option<String>,
    pub workload: Workload,
    #[serde(default)]
    pub transport: Transport,
    #[serde(default)]
    pub flows: Vec<RawFlow>,
    #[serde(default)]
    pub plots: Vec<Plot>,
    /// The window per-flow throughput and RTTs are measured over.
    #[serde(default)]
    pub measure: Option<RawMeasure>,
    /// QUIC's flow-control and send windows (default: from the path's
    /// bandwidth-delay product and buffers).
    #[serde(default)]
    pub transport_window: Option<Bytes>,
}

/// `measure = { from = "20s", until = "120s" }`, optionally with named
/// phases inside it: `phases = [{ name = "yield", from = "45s", until =
/// "60s" }]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMeasure {
    pub from: Span,
    pub until: Span,
    #[serde(default)]
    pub phases: Vec<RawPhase>,
    /// Group each flow's RTT samples into intervals of this much send
    /// time (RTT deviation and gradient per interval).
    #[serde(default)]
    pub rtt_intervals: Option<Span>,
    /// The RTT measurement's resolution for comparing intervals (with
    /// `rtt_intervals`; default: full resolution).
    #[serde(default)]
    pub rtt_resolution: Option<Span>,
}

/// One named part of the measurement window.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPhase {
    pub name: String,
    pub from: Span,
    pub until: Span,
}

fn default_seed() -> u64 {
    1
}
fn default_trials() -> u32 {
    10
}
fn default_time_limit() -> Span {
    Span(Duration::from_secs(600))
}

/// The transport the endpoints use.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Our hosts: QUIC endpoints (noq-proto with rustls), the media
    /// workload's UDP.
    #[default]
    Quic,
    /// Linux TCP, with the endpoints' `controller` as the sockets'
    /// congestion control (`TCP_CONGESTION`); real mode only, bulk only.
    Tcp,
}

/// The client's address when a file gives none.
pub const DEFAULT_CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 2, 10));
/// The server's address when a file gives none.
pub const DEFAULT_SERVER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 1, 10));

/// The client's table, its address [`DEFAULT_CLIENT`] unless it names one.
fn client<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<RawEndpoint, D::Error> {
    RawEndpoint::deserialize(deserializer).map(|e| e.or_at(DEFAULT_CLIENT))
}

/// The server's table, its address [`DEFAULT_SERVER`] unless it names one.
fn server<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<RawEndpoint, D::Error> {
    RawEndpoint::deserialize(deserializer).map(|e| e.or_at(DEFAULT_SERVER))
}

/// One end of the path, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEndpoint {
    /// Its address (always set once read: the side's default fills it).
    #[serde(default)]
    addr: Option<IpAddr>,
    #[serde(default)]
    pub port: Option<u16>,
    /// A controller by name or as a table (QUIC), or a Linux name (TCP);
    /// read once the transport is known.
    #[serde(default)]
    pub controller: Option<toml::Value>,
    #[serde(default)]
    pub ack_frequency: Option<AckFrequencySpec>,
    #[serde(default)]
    pub min_ack_delay: Option<Span>,
    /// When it declares a packet lost (default: RFC 9002's thresholds).
    #[serde(default)]
    pub loss_detection: Option<LossDetectionSpec>,
    /// An independent QUIC stack for this end (real mode only).
    #[serde(default)]
    pub stack: Option<crate::peers::Stack>,
}

impl RawEndpoint {
    /// A client's table that sets nothing.
    fn client() -> RawEndpoint {
        RawEndpoint::default().or_at(DEFAULT_CLIENT)
    }

    /// A server's table that sets nothing.
    fn server() -> RawEndpoint {
        RawEndpoint::default().or_at(DEFAULT_SERVER)
    }

    /// Itself, at `addr` if it names no address.
    fn or_at(mut self, addr: IpAddr) -> RawEndpoint {
        self.addr.get_or_insert(addr);
        self
    }

    /// Its address.
    pub(crate) fn addr(&self) -> IpAddr {
        self.addr.unwrap_or(DEFAULT_CLIENT)
    }
}

/// An endpoint's `ack_frequency = { threshold = 50, max_delay = "50ms" }`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AckFrequencySpec {
    /// Ack-eliciting packets the peer may receive without acknowledging.
    pub threshold: u32,
    /// The longest it may wait (noq-proto caps this at max(RTT, 25 ms)).
    #[serde(default)]
    pub max_delay: Option<Span>,
}

/// An endpoint's `loss_detection = { packet_threshold = 3, time_threshold
/// = 1.125 }`: a packet is lost once this many later packets were
/// acknowledged, or this many RTTs after it was sent (RFC 9002 §6.1).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct LossDetectionSpec {
    /// Packets acknowledged after it (default 3).
    #[serde(default)]
    pub packet_threshold: Option<u32>,
    /// RTTs since it was sent (default 9/8).
    #[serde(default)]
    pub time_threshold: Option<f64>,
}

/// One hop, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHop {
    pub delay: Span,
    #[serde(default)]
    pub rate: Option<BitRate>,
    #[serde(default)]
    pub trace: Option<PathBuf>,
    #[serde(default)]
    pub reverse_trace: Option<PathBuf>,
    #[serde(default)]
    pub loss: f64,
    #[serde(default)]
    pub gilbert_elliott: Option<GilbertElliottSpec>,
    #[serde(default)]
    pub loss_direction: LossDirection,
    #[serde(default)]
    pub buffer: RawBuffer,
    #[serde(default)]
    pub jitter: Option<Span>,
}

/// The directions of a hop that random loss applies to.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LossDirection {
    /// Both, as netem on both interfaces of a link.
    #[default]
    Both,
    /// Client → server only.
    Forward,
    /// Server → client only.
    Reverse,
}

/// The parameters of a Gilbert–Elliott loss model.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct GilbertElliottSpec {
    pub p: f64,
    pub r: f64,
    #[serde(default)]
    pub loss_good: f64,
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn one() -> f64 {
    1.0
}

/// A link's queue, as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum RawBuffer {
    #[default]
    Unlimited,
    DropTail {
        #[serde(default)]
        packets: Option<u64>,
        #[serde(default)]
        bytes: Option<Bytes>,
        /// Times the path's bandwidth-delay product (the hop's rate times
        /// the path's round-trip propagation delay).
        #[serde(default)]
        bdp: Option<f64>,
    },
    Red {
        limit: Bytes,
    },
}

/// One competing flow (`[[flows]]`), as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    pub name: String,
    /// The data sender's controller: the client's, or the server's when
    /// the flow's workload sends from the server (default: the scenario's);
    /// with `transport = "tcp"`, a Linux congestion control's name. Read
    /// once the flow's transport is known.
    #[serde(default)]
    pub controller: Option<toml::Value>,
    /// Our QUIC hosts (the default), or Linux TCP (`"tcp"`: a bulk
    /// upload with the kernel's congestion control; real mode only).
    #[serde(default)]
    pub transport: Transport,
    /// The scenario's middle system serves this flow.
    #[serde(default)]
    pub middle: bool,
    #[serde(default)]
    pub start: Span,
    #[serde(default)]
    pub size: Option<Bytes>,
    #[serde(default)]
    pub duration: Option<Span>,
    /// Expand into this many flows, `<name> 1` … `<name> N`.
    #[serde(default)]
    pub count: Option<u32>,
    /// Each expanded flow starts this long after the previous one.
    #[serde(default)]
    pub stagger: Span,
    /// Also run this flow without the flows not marked so, to report its
    /// throughput and RTT relative to running alone.
    #[serde(default)]
    pub alone: bool,
    /// Changes of the flow's utility at set times (PCC controllers).
    #[serde(default)]
    pub switch: Vec<RawSwitch>,
    /// The flow's own workload (default: the scenario's).
    #[serde(default)]
    pub workload: Option<Workload>,
    /// This flow's own one-way delay on its client access hop (`path[0]`).
    #[serde(default)]
    pub client_delay: Option<Span>,
    /// This flow's own one-way delay on its server access hop (default:
    /// 10 µs).
    #[serde(default)]
    pub server_delay: Option<Span>,
}

/// `{ at = "30s", to = "proteus-s" }`: from `at` on, the flow's sender
/// scores its MIs with `to`'s utility.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSwitch {
    /// When, from the start of the trial.
    pub at: Span,
    /// The utility.
    pub to: SwitchTo,
}

/// A utility a flow can switch to, by its controller's name.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchTo {
    /// PCC Vivace's utility.
    Vivace,
    /// Proteus-P.
    ProteusP,
    /// Proteus-S.
    ProteusS,
    /// Proteus-H.
    ProteusH,
}

impl SwitchTo {
    /// The utility.
    pub fn utility(self) -> cc::Utility {
        match self {
            SwitchTo::Vivace => cc::Utility::Vivace,
            SwitchTo::ProteusP => cc::Utility::Primary,
            SwitchTo::ProteusS => cc::Utility::Scavenger,
            SwitchTo::ProteusH => cc::Utility::Hybrid,
        }
    }
}
