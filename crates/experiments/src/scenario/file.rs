//! The scenario file: what to simulate, which variants to compare, how many
//! trials, and the paper's numbers to put beside ours.
//!
//! A scenario is a TOML document (see `docs/experiments.md` for the full
//! reference and `scenarios/` for examples). Every `[[variant]]` table is
//! merged key by key over the rest of the document, so a variant states
//! only what it changes (`hops.near.loss = 0.01`, `middle = "split"`).
//! Unknown or mistyped fields are errors that name the field, the variant
//! and what is allowed.

use crate::check::Check;
use crate::units::{BitRate, Bytes, Span};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// A scenario file that failed to load.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("{path}: {context}`{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// `"variant \"X\": "` when the error arose in a variant, else empty.
        context: String,
        /// The field's dotted path, such as `hops.near.loss`.
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },
}

/// One end of the path.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Its IP address.
    pub addr: IpAddr,
    /// Its UDP port (default: 4433 for the server, 5000 for the client).
    #[serde(default)]
    pub port: Option<u16>,
    /// The congestion controller of the data it sends (QUIC workloads).
    #[serde(default = "default_controller")]
    pub controller: String,
    /// Ask the peer to acknowledge less often (QUIC workloads): the peer
    /// may hold back `threshold` ack-eliciting packets, or `max_delay`.
    #[serde(default)]
    pub ack_frequency: Option<AckFrequencySpec>,
    /// Send 1-RTT datagrams at most once per this long (the Sidekick
    /// authors' receiver-side `min_ack_delay`; bulk uploads' server only).
    #[serde(default)]
    pub min_ack_delay: Option<Span>,
}

/// An endpoint's `ack_frequency = { threshold = 50, max_delay = "50ms" }`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AckFrequencySpec {
    /// Ack-eliciting packets the peer may receive without acknowledging.
    pub threshold: u32,
    /// The longest it may wait (noq-proto caps this at max(RTT, 25 ms)).
    #[serde(default)]
    pub max_delay: Option<Span>,
}

fn default_controller() -> String {
    "cubic".to_string()
}

/// One hop of the chain: a link in each direction. "Forward" is from the
/// client towards the server.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Hop {
    /// One-way propagation delay.
    pub delay: Span,
    /// Constant capacity in both directions (or give `trace`).
    #[serde(default)]
    pub rate: Option<BitRate>,
    /// A mahimahi trace for the forward direction, relative to the scenario
    /// file; the reverse direction uses `reverse_trace`, or `rate`, or the
    /// same trace.
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// A mahimahi trace for the reverse direction.
    #[serde(default)]
    pub reverse_trace: Option<PathBuf>,
    /// Bernoulli loss probability, applied in both directions (as netem on
    /// both interfaces of a link).
    #[serde(default)]
    pub loss: f64,
    /// Bursty loss instead of `loss`.
    #[serde(default)]
    pub gilbert_elliott: Option<GilbertElliottSpec>,
    /// Which directions lose packets at random (default both).
    #[serde(default)]
    pub loss_direction: LossDirection,
    /// The queue in front of each direction of the link.
    #[serde(default)]
    pub buffer: Buffer,
}

/// The directions of a hop that random loss applies to.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
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

/// The parameters of a Gilbert–Elliott loss model (see
/// `netsim::GilbertElliott`).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliottSpec {
    /// Good → bad, per packet.
    pub p: f64,
    /// Bad → good, per packet.
    pub r: f64,
    /// Loss probability in the good state (default 0).
    #[serde(default)]
    pub loss_good: f64,
    /// Loss probability in the bad state (default 1).
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn one() -> f64 {
    1.0
}

/// A link's queue.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Buffer {
    /// No limit.
    #[default]
    Unlimited,
    /// Drop-tail with a limit in packets or bytes (give one).
    DropTail {
        /// At most this many packets.
        #[serde(default)]
        packets: Option<u64>,
        /// At most this many bytes.
        #[serde(default)]
        bytes: Option<Bytes>,
    },
    /// `tc red limit LIMIT avpkt 1000 adaptive harddrop bandwidth RATE`,
    /// with the hop's rate as the bandwidth (the Sidekick setup).
    Red {
        /// The hard limit.
        limit: Bytes,
    },
}

/// What runs on the middle node between the first and the second hop.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Middle {
    /// A plain router.
    #[default]
    Router,
    /// The split-connection QUIC proxy (both legs use the client's
    /// controller unless `split_controller` says otherwise).
    Split,
    /// The Sidekick proxy; the client runs the sidekick sender engine
    /// configured by the `[sidekick]` table.
    Sidekick,
    /// A split-connection TCP PEP (PEPsal-like, transparent with nft
    /// tproxy), for `transport = "tcp"`; real mode only.
    Pep,
}

/// The transport the endpoints use.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Our QUIC endpoints (noq-proto with rustls).
    #[default]
    Quic,
    /// Linux TCP, with the endpoint's `controller` as the socket's
    /// congestion control (`TCP_CONGESTION`); real mode only, bulk only.
    Tcp,
}

/// Where a trial runs.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// In the deterministic simulator.
    #[default]
    Simulator,
    /// On real kernels and interfaces, in network namespaces.
    Real,
}

impl Mode {
    /// The mode in words: "the simulator", "real mode".
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Simulator => "the simulator",
            Mode::Real => "real mode",
        }
    }
}

/// The client's sidekick settings (`[sidekick]`, with `middle = "sidekick"`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SidekickSpec {
    /// A quACK every this many packets ...
    #[serde(default)]
    pub interval_packets: Option<u32>,
    /// ... or every this long.
    #[serde(default)]
    pub interval: Option<Span>,
    /// The threshold t.
    pub threshold: u8,
    /// A missing packet is lost once this many later packets have been
    /// received (default 3).
    #[serde(default = "three")]
    pub reorder_threshold: u32,
    /// With PACUBIC: count quACKed bytes as acknowledged for the window
    /// (ACK reduction, §2.3; default false).
    #[serde(default)]
    pub quack_acks: bool,
    /// With PACUBIC: fix the near segment's share r of the RTT instead of
    /// estimating it (the paper's runs used 1/26).
    #[serde(default)]
    pub ratio: Option<f64>,
    /// Replace the power sum with a strawman of §3.3 (default: none).
    #[serde(default)]
    pub strawman: Option<Strawman>,
}

/// A strawman quACK (Sidekick §3.3), for overhead comparisons.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Strawman {
    /// 1a: each quACK echoes one identifier.
    Echo,
    /// 1b: each quACK carries the last `size` identifiers.
    Window {
        /// Identifiers per quACK (1..=255).
        size: usize,
    },
}

fn three() -> u32 {
    3
}

/// Which way a bulk transfer goes.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BulkDirection {
    /// Client to server.
    Upload,
    /// Server to client.
    Download,
}

/// When short flows start.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalKind {
    /// Each request as soon as the previous response completed.
    #[default]
    Sequential,
    /// Requests at Poisson times with mean gap `mean_gap`.
    Poisson,
}

/// The application traffic and its metrics.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// N bytes on one QUIC stream: goodput and completion time.
    Bulk {
        /// Upload or download.
        direction: BulkDirection,
        /// How much.
        size: Bytes,
    },
    /// Sidekick's low-latency media over UDP (client sends): de-jitter delay.
    Media {
        /// How long the stream lasts (default 60 s).
        #[serde(default = "sixty_seconds")]
        duration: Span,
    },
    /// PEMI's RTC frames over QUIC (server sends): frame delay and jitter.
    Rtc {
        /// How long the stream lasts (default 20 s).
        #[serde(default = "twenty_seconds")]
        duration: Span,
        /// Frames per second (default 30).
        #[serde(default = "thirty")]
        fps: u64,
        /// Media bit rate (default 3000 kbit/s).
        #[serde(default = "three_mbps")]
        bitrate: BitRate,
    },
    /// Requests and responses on fresh streams: flow completion times.
    ShortFlows {
        /// How many requests.
        count: usize,
        /// Request size.
        #[serde(default = "hundred_bytes")]
        request: Bytes,
        /// Response size.
        response: Bytes,
        /// Sequential or Poisson arrivals.
        #[serde(default)]
        arrivals: ArrivalKind,
        /// Mean gap between Poisson arrivals.
        #[serde(default)]
        mean_gap: Option<Span>,
    },
}

fn sixty_seconds() -> Span {
    Span(Duration::from_secs(60))
}
fn twenty_seconds() -> Span {
    Span(Duration::from_secs(20))
}
fn thirty() -> u64 {
    30
}
fn three_mbps() -> BitRate {
    BitRate(netsim::Rate::from_kbps(3000))
}
fn hundred_bytes() -> Bytes {
    Bytes(100)
}

/// One flow of a dumbbell scenario (`[[flows]]`): a bulk upload from its
/// own client, over its own access hop (`path[0]`) and the shared
/// bottleneck (`path[1]`), to its own server.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Its name: unique; its slug names its metrics (`share_<slug>`).
    pub name: String,
    /// Its client's congestion controller (default: `client.controller`,
    /// itself "cubic" by default).
    #[serde(default)]
    pub controller: Option<String>,
    /// Its client runs the sidekick sender engine of `[sidekick]` (needs
    /// `middle = "sidekick"`).
    #[serde(default)]
    pub sidekick: bool,
    /// The split proxy terminates its connection (needs `middle = "split"`).
    #[serde(default)]
    pub split: bool,
    /// When its client starts (default 0s).
    #[serde(default)]
    pub start: Span,
    /// How much it uploads (default: the workload's size).
    #[serde(default)]
    pub size: Option<Bytes>,
}

/// A figure to draw from the results.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Plot {
    /// The median of a metric per variant, with p25–p75 error bars.
    Bars {
        /// The metric.
        metric: String,
        /// The figure's title (default: the scenario's title).
        #[serde(default)]
        title: Option<String>,
    },
    /// A sampled connection variable over time (needs `sample_interval`),
    /// one line per variant, from one trial.
    Series {
        /// The variable: a `series` key of the trial files, such as
        /// `cwnd_bytes`.
        field: String,
        /// Which trial (default 0).
        #[serde(default)]
        trial: u32,
        /// Only these variants (default: all).
        #[serde(default)]
        variants: Vec<String>,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
    },
    /// A metric against a swept field: per swept variant, a line through
    /// the medians with p25–p75 error bars (like Sidekick's Figure 6).
    Lines {
        /// The metric.
        metric: String,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
        /// The x axis's label (default: the swept field).
        #[serde(default)]
        x_label: Option<String>,
        /// Multiply x values by this for the axis (e.g. 100 for percent).
        #[serde(default = "one")]
        x_scale: f64,
    },
    /// The distribution of per-packet or per-frame values, one line per
    /// variant, all trials pooled.
    Cdf {
        /// The distribution (a `distributions` key of the trial files).
        distribution: String,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
        /// Start the CDF axis here (default 0) to show a tail.
        #[serde(default)]
        y_from: f64,
    },
}

/// A scenario with one variant applied: everything a trial needs.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (used in file names).
    pub name: String,
    /// One line for humans.
    pub title: String,
    /// The paper, table or figure this reproduces.
    #[serde(default)]
    pub source: Option<String>,
    /// The base seed; trial `i` of every variant uses the seed derived
    /// from it and `i` (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Trials per variant (default 10).
    #[serde(default = "default_trials")]
    pub trials: u32,
    /// A trial stops at this virtual time even if unfinished (default 600 s).
    #[serde(default = "default_time_limit")]
    pub time_limit: Span,
    /// Fix QUIC's UDP payload size (no path-MTU discovery).
    #[serde(default)]
    pub max_udp_payload: Option<u16>,
    /// Sample the data sender's connection (cwnd, pacing rate, RTT, bytes
    /// in flight, losses) at this interval into each trial file.
    #[serde(default)]
    pub sample_interval: Option<Span>,
    /// The end that opens the connection (the media sender for `media`).
    pub client: Endpoint,
    /// The other end.
    pub server: Endpoint,
    /// Hop names in order from the client to the server.
    pub path: Vec<String>,
    /// The hops by name.
    pub hops: BTreeMap<String, Hop>,
    /// What runs on the middle node after hop `middle_after`.
    #[serde(default)]
    pub middle: Middle,
    /// The hop after which `middle` sits (default: the first hop). The
    /// other middle nodes are routers.
    #[serde(default)]
    pub middle_after: Option<String>,
    /// The split proxy's server-facing controller (default: the client's).
    #[serde(default)]
    pub split_controller: Option<String>,
    /// The sidekick sender's settings, with `middle = "sidekick"`.
    #[serde(default)]
    pub sidekick: Option<SidekickSpec>,
    /// The traffic.
    pub workload: Workload,
    /// QUIC (default) or, in real mode, Linux TCP.
    #[serde(default)]
    pub transport: Transport,
    /// Competing flows on a dumbbell instead of one client on a chain
    /// (default: none, a chain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowSpec>,
    /// Figures to draw (default: one suited to the workload).
    #[serde(default)]
    pub plots: Vec<Plot>,
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

/// One variant of a scenario, resolved.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Variant {
    /// Its name, as in tables and legends.
    pub name: String,
    /// The paper's value of each metric, where the scenario gives one.
    pub paper: BTreeMap<String, f64>,
    /// For a point of a sweep: the swept variant's name and the value.
    pub sweep: Option<SweepPoint>,
    /// The scenario with the variant's changes applied.
    pub scenario: Scenario,
}

/// Where a variant lies in a sweep (`sweep = { field, values }`): one line
/// of a `lines` plot is a swept variant, one point is a value.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct SweepPoint {
    /// The swept variant's name (the line).
    pub series: String,
    /// The dotted field that was swept.
    pub field: String,
    /// Its value here (the x coordinate).
    pub x: f64,
}

/// A loaded scenario file: the base and its variants.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    /// Where it was read from (traces are relative to its directory).
    pub path: PathBuf,
    /// The base scenario (what a variant without changes runs).
    pub base: Scenario,
    /// The variants, in file order; one called after the scenario when
    /// the file has none.
    pub variants: Vec<Variant>,
    /// The paper's claims to test the results against (`[[check]]`).
    pub checks: Vec<Check>,
}

/// The keys a `[[variant]]` table has besides its overrides.
const VARIANT_KEYS: [&str; 3] = ["name", "paper", "sweep"];

impl ScenarioFile {
    /// Reads and checks a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<ScenarioFile, ScenarioError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|source| ScenarioError::Read {
            path: path.clone(),
            source,
        })?;
        ScenarioFile::parse(&text, path)
    }

    /// Parses and checks scenario text; `path` names it in errors and
    /// anchors relative trace paths.
    pub fn parse(text: &str, path: PathBuf) -> Result<ScenarioFile, ScenarioError> {
        let mut document: toml::Table =
            toml::from_str(text).map_err(|error| ScenarioError::Syntax {
                path: path.clone(),
                message: error.to_string(),
            })?;
        let variant_tables = match document.remove("variant") {
            None => Vec::new(),
            Some(toml::Value::Array(tables)) => tables,
            Some(_) => {
                return Err(field_error(
                    &path,
                    "",
                    "variant",
                    "must be an array of tables, written [[variant]]",
                ));
            }
        };
        let check_tables = match document.remove("check") {
            None => Vec::new(),
            Some(toml::Value::Array(tables)) => tables,
            Some(_) => {
                return Err(field_error(
                    &path,
                    "",
                    "check",
                    "must be an array of tables, written [[check]]",
                ));
            }
        };
        let base = resolve(&path, "", toml::Value::Table(document.clone()))?;
        let mut variants = Vec::new();
        for (index, value) in variant_tables.into_iter().enumerate() {
            let fallback = format!("variant[{index}]");
            let toml::Value::Table(mut table) = value else {
                return Err(field_error(&path, "", &fallback, "must be a table"));
            };
            let name = match table.remove("name") {
                Some(toml::Value::String(name)) => name,
                Some(_) => {
                    return Err(field_error(
                        &path,
                        "",
                        &format!("{fallback}.name"),
                        "must be a string",
                    ));
                }
                None => {
                    return Err(field_error(
                        &path,
                        "",
                        &format!("{fallback}.name"),
                        "every variant needs a name",
                    ));
                }
            };
            let context = format!("variant \"{name}\": ");
            if variants.iter().any(|v: &Variant| v.name == name) {
                return Err(field_error(
                    &path,
                    &context,
                    "name",
                    "two variants have this name",
                ));
            }
            let paper = match table.remove("paper") {
                None => BTreeMap::new(),
                Some(value) => {
                    let mut track = serde_path_to_error::Track::new();
                    let de = serde_path_to_error::Deserializer::new(value, &mut track);
                    BTreeMap::<String, f64>::deserialize(de).map_err(|error| {
                        field_error(
                            &path,
                            &context,
                            &format!("paper.{}", track.path()),
                            &format!(
                                "{} (the paper's value of each metric, a number)",
                                first_line(&error.to_string())
                            ),
                        )
                    })?
                }
            };
            let sweep = match table.remove("sweep") {
                None => None,
                Some(value) => Some(parse_sweep(&path, &context, value)?),
            };
            debug_assert!(VARIANT_KEYS.iter().all(|key| !table.contains_key(*key)));
            let mut merged = document.clone();
            merge(&mut merged, table);
            let Some((field, values, unit)) = sweep else {
                let scenario = resolve(&path, &context, toml::Value::Table(merged))?;
                variants.push(Variant {
                    name,
                    paper,
                    sweep: None,
                    scenario,
                });
                continue;
            };
            if !paper.is_empty() {
                return Err(field_error(
                    &path,
                    &context,
                    "paper",
                    "a swept variant has no single paper value; give the paper's points \
                     as separate variants",
                ));
            }
            let leaf = field.rsplit('.').next().unwrap_or(&field).to_string();
            for x in values {
                let point = format!("{name}, {leaf} = {x}{}", unit.as_deref().unwrap_or(""));
                if variants.iter().any(|v: &Variant| v.name == point) {
                    return Err(field_error(
                        &path,
                        &context,
                        "sweep",
                        &format!("makes the variant name {point:?} twice"),
                    ));
                }
                let mut swept = merged.clone();
                // Whole numbers go in as integers, so that integer fields
                // (thresholds, counts) can be swept too.
                let value = match &unit {
                    // A quantity: "80ms", "10MB".
                    Some(unit) => toml::Value::String(format!("{x}{unit}")),
                    None if x.fract() == 0.0 && x.abs() < 1e15 => toml::Value::Integer(x as i64),
                    None => toml::Value::Float(x),
                };
                set_dotted(&mut swept, &field, value);
                let point_context = format!("variant \"{point}\": ");
                let scenario = resolve(&path, &point_context, toml::Value::Table(swept))?;
                variants.push(Variant {
                    name: point,
                    paper: BTreeMap::new(),
                    sweep: Some(SweepPoint {
                        series: name.clone(),
                        field: field.clone(),
                        x,
                    }),
                    scenario,
                });
            }
        }
        if let Some(index) = base
            .plots
            .iter()
            .position(|plot| matches!(plot, Plot::Lines { .. }))
            && variants.iter().all(|v| v.sweep.is_none())
        {
            return Err(field_error(
                &path,
                "",
                &format!("plots[{index}]"),
                "a lines plot needs variants with `sweep = { field, values }`",
            ));
        }
        if variants.is_empty() {
            variants.push(Variant {
                name: base.name.clone(),
                paper: BTreeMap::new(),
                sweep: None,
                scenario: base.clone(),
            });
        }
        let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        for (index, plot) in base.plots.iter().enumerate() {
            if let Plot::Series { variants: only, .. } = plot
                && let Some(unknown) = only.iter().find(|name| !names.contains(&name.as_str()))
            {
                return Err(field_error(
                    &path,
                    "",
                    &format!("plots[{index}].variants"),
                    &format!("no variant is called {unknown:?}"),
                ));
            }
        }
        let mut checks = Vec::new();
        for (index, value) in check_tables.into_iter().enumerate() {
            let field = format!("check[{index}]");
            let mut track = serde_path_to_error::Track::new();
            let de = serde_path_to_error::Deserializer::new(value, &mut track);
            let check = Check::deserialize(de).map_err(|error| {
                field_error(
                    &path,
                    "",
                    &format!("{field}.{}", track.path()),
                    &format!(
                        "{} (a check has claim, metric, variant, optional ratio_to, \
                         at_least and/or at_most)",
                        first_line(&error.to_string())
                    ),
                )
            })?;
            if let Some((name, message)) = check.problem(&names) {
                return Err(field_error(&path, "", &format!("{field}.{name}"), &message));
            }
            checks.push(check);
        }
        Ok(ScenarioFile {
            path,
            base,
            variants,
            checks,
        })
    }

    /// The directory relative paths in the file are resolved against.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// A variant's `sweep = { field = "hops.near.loss", values = [0, 0.01] }`:
/// the dotted field and its numeric values.
fn parse_sweep(
    path: &Path,
    context: &str,
    value: toml::Value,
) -> Result<(String, Vec<f64>, Option<String>), ScenarioError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sweep {
        field: String,
        values: Vec<f64>,
        #[serde(default)]
        unit: Option<String>,
    }
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    let sweep = Sweep::deserialize(de).map_err(|error| {
        field_error(
            path,
            context,
            &format!("sweep.{}", track.path()),
            &format!(
                "{} (sweep = {{ field = \"hops.near.loss\", values = [0, 0.01] }}: a \
                 dotted field, its numeric values and optionally their `unit`, \
                 such as \"ms\")",
                first_line(&error.to_string())
            ),
        )
    })?;
    if sweep.values.is_empty() {
        return Err(field_error(path, context, "sweep.values", "is empty"));
    }
    if sweep.field.is_empty() || sweep.field.split('.').any(str::is_empty) {
        return Err(field_error(
            path,
            context,
            "sweep.field",
            "must be a dotted field such as \"hops.near.loss\"",
        ));
    }
    Ok((sweep.field, sweep.values, sweep.unit))
}

/// Sets the dotted `field` of `table` to `value`, making tables on the way.
fn set_dotted(table: &mut toml::Table, field: &str, value: toml::Value) {
    let mut parts: Vec<&str> = field.split('.').collect();
    let last = parts.pop().expect("a checked, non-empty field");
    let mut here = table;
    for part in parts {
        let entry = here
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        here = entry.as_table_mut().expect("made a table above");
    }
    here.insert(last.to_string(), value);
}

/// Overlays `over` onto `base`, table by table; other values are replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over_inner)) => {
                merge(inner, over_inner)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn field_error(path: &Path, context: &str, field: &str, message: &str) -> ScenarioError {
    ScenarioError::Field {
        path: path.to_path_buf(),
        context: context.to_string(),
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// The message without the `in `field`` line the toml crate appends (the
/// error names the field already).
fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message)
}

/// Deserialises a merged document and checks what types cannot.
fn resolve(path: &Path, context: &str, value: toml::Value) -> Result<Scenario, ScenarioError> {
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    let scenario = Scenario::deserialize(de).map_err(|error| {
        let field = track.path().to_string();
        field_error(path, context, &field, first_line(&error.to_string()))
    })?;
    scenario
        .check()
        .map_err(|(field, message)| field_error(path, context, &field, &message))?;
    Ok(scenario)
}

impl Scenario {
    /// Checks what the types do not: ranges, references between fields,
    /// and combinations that cannot run. Returns the field and the problem.
    fn check(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, message: String| Err((field.to_string(), message));
        if self.trials == 0 {
            return fail("trials", "must be at least 1".into());
        }
        if self
            .sample_interval
            .is_some_and(|span| span.0 < Duration::from_micros(100))
        {
            return fail("sample_interval", "must be at least 100us".into());
        }
        if let Some(index) = self
            .plots
            .iter()
            .position(|plot| matches!(plot, Plot::Series { .. }))
            && self.sample_interval.is_none()
        {
            return fail(
                &format!("plots[{index}]"),
                "a series plot needs `sample_interval`".into(),
            );
        }
        if self.time_limit.0.is_zero() {
            return fail("time_limit", "must be positive".into());
        }
        if let Some(bytes) = self.max_udp_payload
            && !(1200..=65_527).contains(&bytes)
        {
            return fail(
                "max_udp_payload",
                format!("{bytes} is outside 1200..=65527 (QUIC's minimum and UDP's maximum)"),
            );
        }
        if self.path.is_empty() {
            return fail("path", "names at least one hop".into());
        }
        for (index, name) in self.path.iter().enumerate() {
            if !self.hops.contains_key(name) {
                let known: Vec<&str> = self.hops.keys().map(String::as_str).collect();
                return fail(
                    &format!("path[{index}]"),
                    format!("no hop called \"{name}\"; the hops are {known:?}"),
                );
            }
        }
        for (name, hop) in &self.hops {
            if !self.path.contains(name) {
                return fail(&format!("hops.{name}"), "is not on the path".into());
            }
            hop.check()
                .map_err(|(field, message)| (format!("hops.{name}.{field}"), message))?;
        }
        if self.client.min_ack_delay.is_some() {
            return fail(
                "client.min_ack_delay",
                "only the server (a bulk upload's receiver) can delay its ACKs".into(),
            );
        }
        if self.server.min_ack_delay.is_some()
            && !matches!(
                self.workload,
                Workload::Bulk {
                    direction: BulkDirection::Upload,
                    ..
                }
            )
        {
            return fail(
                "server.min_ack_delay",
                "needs a bulk upload (the server must be the data receiver)".into(),
            );
        }
        match (&self.middle, &self.sidekick) {
            (Middle::Sidekick, None) => {
                return fail(
                    "sidekick",
                    "middle = \"sidekick\" needs a [sidekick] table".into(),
                );
            }
            (Middle::Sidekick, Some(spec)) => {
                if let Some(Strawman::Window { size }) = spec.strawman
                    && !(1..=255).contains(&size)
                {
                    return fail("sidekick.strawman.size", "must be 1..=255".into());
                }
                if spec.threshold == 0 {
                    return fail("sidekick.threshold", "must be at least 1".into());
                }
                match (spec.interval_packets, spec.interval) {
                    (Some(0), _) => {
                        return fail("sidekick.interval_packets", "must be at least 1".into());
                    }
                    (Some(_), None) => {}
                    (None, Some(span)) if span.0 >= Duration::from_millis(1) => {}
                    (None, Some(_)) => {
                        return fail("sidekick.interval", "must be at least 1ms".into());
                    }
                    _ => {
                        return fail(
                            "sidekick",
                            "give one of `interval_packets` or `interval`".into(),
                        );
                    }
                }
                let sends = matches!(
                    self.workload,
                    Workload::Media { .. }
                        | Workload::Bulk {
                            direction: BulkDirection::Upload,
                            ..
                        }
                );
                if !sends {
                    return fail(
                        "middle",
                        "the sidekick helps the client as a data sender: use it with \
                         the media workload or a bulk upload"
                            .into(),
                    );
                }
            }
            (_, Some(_)) => {
                return fail("sidekick", "only applies with middle = \"sidekick\"".into());
            }
            (_, None) => {}
        }
        if self.middle == Middle::Split {
            if self.path.len() < 2 {
                return fail(
                    "middle",
                    "a split proxy needs a node between two hops".into(),
                );
            }
            match self.workload {
                Workload::Media { .. } => {
                    return fail(
                        "middle",
                        "`split` terminates QUIC; the media workload is plain UDP".into(),
                    );
                }
                Workload::Rtc { .. } => {
                    return fail(
                        "middle",
                        "`split` relays the streams the client opens; rtc frames travel on \
                         streams the server opens"
                            .into(),
                    );
                }
                _ => {}
            }
        } else if self.split_controller.is_some() {
            return fail(
                "split_controller",
                "only applies with middle = \"split\"".into(),
            );
        }
        if self.transport == Transport::Tcp {
            if !matches!(self.workload, Workload::Bulk { .. }) {
                return fail("transport", "tcp carries the bulk workload only".into());
            }
            if !matches!(self.middle, Middle::Router | Middle::Pep) {
                return fail(
                    "middle",
                    "with transport = \"tcp\" the middle is a router or \"pep\"".into(),
                );
            }
            if !self.flows.is_empty() {
                return fail("flows", "competing flows are QUIC only".into());
            }
        } else if self.middle == Middle::Pep {
            return fail(
                "middle",
                "\"pep\" splits TCP connections: set transport = \"tcp\"".into(),
            );
        }
        if self.middle == Middle::Pep && self.path.len() < 2 {
            return fail("middle", "a PEP needs a node between two hops".into());
        }
        if self.client.addr == self.server.addr {
            return fail("server.addr", "must differ from client.addr".into());
        }
        match &self.workload {
            Workload::Bulk { size, .. } if size.0 == 0 => {
                return fail("workload.size", "must be positive".into());
            }
            Workload::Media { duration } | Workload::Rtc { duration, .. }
                if duration.0.is_zero() =>
            {
                return fail("workload.duration", "must be positive".into());
            }
            Workload::Rtc { fps, bitrate, .. } => {
                if *fps == 0 || *fps > 1000 {
                    return fail("workload.fps", format!("{fps} is outside 1..=1000"));
                }
                // The frame header takes 16 bytes.
                if bitrate.0.bits_per_sec() < 8 * 16 * fps {
                    return fail(
                        "workload.bitrate",
                        format!("gives frames of less than 16 bytes at {fps} frames/s"),
                    );
                }
            }
            Workload::ShortFlows {
                count,
                arrivals,
                mean_gap,
                response,
                ..
            } => {
                if *count == 0 {
                    return fail("workload.count", "must be at least 1".into());
                }
                if response.0 == 0 {
                    return fail("workload.response", "must be positive".into());
                }
                match (arrivals, mean_gap) {
                    (ArrivalKind::Poisson, None) => {
                        return fail(
                            "workload.mean_gap",
                            "Poisson arrivals need a mean gap".into(),
                        );
                    }
                    (ArrivalKind::Sequential, Some(_)) => {
                        return fail(
                            "workload.mean_gap",
                            "only applies with arrivals = \"poisson\"".into(),
                        );
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        self.check_flows()
    }

    /// Checks `[[flows]]`: a two-hop path, a bulk upload, unique names,
    /// and per-flow options that match `middle`.
    fn check_flows(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, message: String| Err((field.to_string(), message));
        if self.flows.is_empty() {
            return Ok(());
        }
        if self.path.len() != 2 {
            return fail(
                "path",
                "with [[flows]], the path is two hops: every flow's own access hop, \
                 then the shared bottleneck"
                    .into(),
            );
        }
        if self
            .middle_after
            .as_ref()
            .is_some_and(|after| *after != self.path[0])
        {
            return fail(
                "middle_after",
                "with [[flows]], `middle` runs on the left router, after the access hop".into(),
            );
        }
        if !matches!(
            self.workload,
            Workload::Bulk {
                direction: BulkDirection::Upload,
                ..
            }
        ) {
            return fail(
                "workload",
                "[[flows]] needs a bulk upload (kind = \"bulk\", direction = \"upload\")".into(),
            );
        }
        let count = self.flows.len();
        if count > 200 {
            return fail("flows", format!("{count} flows; at most 200"));
        }
        for (index, flow) in self.flows.iter().enumerate() {
            let field = |name: &str| format!("flows[{index}].{name}");
            if flow.name.trim().is_empty() || crate::report::slug(&flow.name).is_empty() {
                return fail(
                    &field("name"),
                    "needs letters or digits (it names the flow's metrics)".into(),
                );
            }
            if let Some(other) = self.flows[..index]
                .iter()
                .position(|f| crate::report::slug(&f.name) == crate::report::slug(&flow.name))
            {
                return fail(
                    &field("name"),
                    format!(
                        "{:?} gives the same metric names as flows[{other}] ({:?})",
                        flow.name, self.flows[other].name
                    ),
                );
            }
            if flow.sidekick && self.middle != Middle::Sidekick {
                return fail(&field("sidekick"), "needs middle = \"sidekick\"".into());
            }
            if flow.split && self.middle != Middle::Split {
                return fail(&field("split"), "needs middle = \"split\"".into());
            }
            if self.flow_controller(index) == "pacubic" && !flow.sidekick {
                return fail(
                    &field("controller"),
                    "pacubic reads the sidekick's quACKs: give the flow sidekick = true".into(),
                );
            }
            if flow.size.is_some_and(|size| size.0 == 0) {
                return fail(&field("size"), "must be positive".into());
            }
        }
        let last = count as u128 - 1;
        for (field, addr) in [
            ("client.addr", self.client.addr),
            ("server.addr", self.server.addr),
        ] {
            if offset_addr(addr, last).is_none() {
                return fail(
                    field,
                    format!("{addr} plus {last} (one address per flow) overflows"),
                );
            }
        }
        let clients: Vec<IpAddr> = (0..count).map(|i| self.flow_client_addr(i).ip()).collect();
        if let Some(i) = (0..count).find(|&i| clients.contains(&self.flow_server_addr(i).ip())) {
            return fail(
                "server.addr",
                format!(
                    "flow {i}'s server {} is also a client's address: flows use \
                     client.addr + i and server.addr + i",
                    self.flow_server_addr(i).ip()
                ),
            );
        }
        Ok(())
    }

    /// Flow `index`'s congestion controller: its own, else the client's.
    pub fn flow_controller(&self, index: usize) -> &str {
        self.flows[index]
            .controller
            .as_deref()
            .unwrap_or(&self.client.controller)
    }

    /// Flow `index`'s client: `client.addr` plus `index`, the client's port.
    pub fn flow_client_addr(&self, index: usize) -> std::net::SocketAddr {
        let addr = offset_addr(self.client.addr, index as u128).expect("checked: no overflow");
        std::net::SocketAddr::new(addr, self.client_addr().port())
    }

    /// Flow `index`'s server: `server.addr` plus `index`, the server's port.
    pub fn flow_server_addr(&self, index: usize) -> std::net::SocketAddr {
        let addr = offset_addr(self.server.addr, index as u128).expect("checked: no overflow");
        std::net::SocketAddr::new(addr, self.server_addr().port())
    }

    /// The client's socket address (port 5000 unless given).
    pub fn client_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.client.addr, self.client.port.unwrap_or(5000))
    }

    /// The server's socket address (port 4433 unless given).
    pub fn server_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.server.addr, self.server.port.unwrap_or(4433))
    }

    /// The index of the middle node that runs `middle`, counting middle
    /// nodes from the client side from 0.
    pub fn middle_index(&self) -> usize {
        self.middle_after
            .as_ref()
            .and_then(|after| self.path.iter().position(|name| name == after))
            .unwrap_or(0)
    }

    /// Why this scenario cannot run in `mode`, if it cannot.
    pub fn unsupported_in(&self, mode: Mode) -> Option<&'static str> {
        match mode {
            Mode::Simulator if self.transport == Transport::Tcp => {
                Some("TCP runs in real mode only (pepkit run --real)")
            }
            Mode::Simulator => None,
            Mode::Real if self.middle == Middle::Split => Some(
                "the split QUIC proxy runs in the simulator only; real mode has the split TCP PEP",
            ),
            Mode::Real if !self.flows.is_empty() => {
                Some("competing flows ([[flows]]) run in the simulator only")
            }
            Mode::Real if self.client.addr.is_ipv6() || self.server.addr.is_ipv6() => {
                Some("real mode is IPv4 only")
            }
            Mode::Real => None,
        }
    }

    /// The per-trial seed: the same for trial `i` of every variant, so
    /// variants are compared on the same random draws where they coincide.
    pub fn trial_seed(&self, trial: u32) -> netsim::Seed {
        netsim::Seed::new(self.seed).derive(&format!("trial/{trial}"))
    }
}

/// `addr` plus `offset`, if that stays in the address family.
fn offset_addr(addr: IpAddr, offset: u128) -> Option<IpAddr> {
    match addr {
        IpAddr::V4(v4) => u32::try_from(offset)
            .ok()
            .and_then(|offset| u32::from(v4).checked_add(offset))
            .map(|n| IpAddr::V4(n.into())),
        IpAddr::V6(v6) => u128::from(v6)
            .checked_add(offset)
            .map(|n| IpAddr::V6(n.into())),
    }
}

impl Hop {
    fn check(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, message: String| Err((field.to_string(), message));
        match (&self.rate, &self.trace) {
            (None, None) => return fail("rate", "give a rate or a trace".into()),
            (Some(_), Some(_)) if self.reverse_trace.is_some() => {
                return fail("rate", "both directions already have traces".into());
            }
            (Some(rate), _) if rate.0.is_zero() => return fail("rate", "must be positive".into()),
            _ => {}
        }
        if self.reverse_trace.is_some() && self.trace.is_none() {
            return fail(
                "reverse_trace",
                "needs `trace` for the forward direction".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return fail(
                "loss",
                format!("{} is not a probability in 0..=1", self.loss),
            );
        }
        if let Some(ge) = &self.gilbert_elliott {
            if self.loss != 0.0 {
                return fail(
                    "gilbert_elliott",
                    "give either `loss` or `gilbert_elliott`".into(),
                );
            }
            for (field, value) in [
                ("p", ge.p),
                ("r", ge.r),
                ("loss_good", ge.loss_good),
                ("loss_bad", ge.loss_bad),
            ] {
                if !(0.0..=1.0).contains(&value) {
                    return fail(
                        &format!("gilbert_elliott.{field}"),
                        format!("{value} is not a probability in 0..=1"),
                    );
                }
            }
        }
        match &self.buffer {
            Buffer::DropTail { packets, bytes } => match (packets, bytes) {
                (Some(_), Some(_)) | (None, None) => {
                    return fail(
                        "buffer",
                        "drop_tail takes one of `packets` or `bytes`".into(),
                    );
                }
                (Some(0), _) | (_, Some(Bytes(0))) => {
                    return fail("buffer", "the limit must be positive".into());
                }
                _ => {}
            },
            Buffer::Red { limit } => {
                if self.rate.is_none() {
                    return fail(
                        "buffer",
                        "RED needs the hop's `rate` as its bandwidth".into(),
                    );
                }
                if limit.0 < 4_000 {
                    return fail("buffer.limit", "RED needs a limit of at least 4 kB".into());
                }
            }
            Buffer::Unlimited => {}
        }
        Ok(())
    }
}
