//! The application traffic of a trial: one module per workload, each
//! reached through [`WorkloadKind`] and the one `match` in
//! [`Workload::kind`].
//!
//! A workload owns everything about its traffic: its settings (validated
//! when the scenario is read), what it asks of the rest of the scenario
//! ([`Traits`]), its two endpoints, the metrics it reads back from them,
//! the metrics a report leads with, and its default figures. Adding one is
//! a module, a variant and an arm.

mod bulk;
mod media;
mod rtc;
mod short_flows;
mod udp_probe;
mod video;

pub use bulk::{Amount, Bulk, BulkDirection, TcpTransfer};
pub use media::Media;
pub use rtc::Rtc;
pub use short_flows::{Arrivals, ShortFlows};
pub use udp_probe::UdpProbe;
pub use video::Video;

use crate::figure::Plot;
use crate::outcome::{FlowNames, TrialResult};
use netsim::{Host, Seed};
use quic::{ConnRecord, QuicConfig};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::net::SocketAddr;
use std::time::Duration;

/// The application traffic and its metrics (`[workload]`, by `kind`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// N bytes on one QUIC stream: goodput and completion time.
    Bulk(Bulk),
    /// Sidekick's low-latency media over UDP (client sends): de-jitter delay.
    Media(Media),
    /// PEMI's RTC frames over QUIC (server sends): frame delay and jitter.
    Rtc(Rtc),
    /// Requests and responses on fresh streams: flow completion times.
    ShortFlows(ShortFlows),
    /// Constant-rate UDP datagrams, each echoed (Proteus §3's probe): one
    /// RTT sample per datagram.
    UdpProbe(UdpProbe),
    /// DASH-like video from the server (Proteus §6.3): bitrate and
    /// rebuffering.
    Video(Video),
}

impl Workload {
    /// The workload's behaviour.
    pub(crate) fn kind(&self) -> &dyn WorkloadKind {
        match self {
            Workload::Bulk(bulk) => bulk,
            Workload::Media(media) => media,
            Workload::Rtc(rtc) => rtc,
            Workload::ShortFlows(flows) => flows,
            Workload::UdpProbe(probe) => probe,
            Workload::Video(video) => video,
        }
    }

    /// What the rest of the scenario may rely on.
    pub fn traits(&self) -> Traits {
        self.kind().traits()
    }
}

/// Which end of a flow sends its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The end that opens the connection.
    Client,
    /// The other end.
    Server,
}

/// What a workload is, as other parts of a scenario need to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traits {
    /// The end that sends the data.
    pub data_sender: Side,
    /// Whether it runs over QUIC (the media workload and the UDP probe
    /// are plain UDP).
    pub quic: bool,
    /// Whether it can be one of a dumbbell's `[[flows]]` (the QUIC
    /// workloads and the UDP probe).
    pub flows: bool,
    /// Whether the server opens the streams (a proxy relaying the streams
    /// a client opens cannot carry it).
    pub server_opens_streams: bool,
    /// Whether Linux TCP can carry it instead (`transport = "tcp"`).
    pub kernel_tcp: bool,
    /// Whether the server can hold back its acknowledgements
    /// (`server.min_ack_delay`): it receives the data and the workload
    /// honours the setting.
    pub server_ack_delay: bool,
    /// The one-way transfer of a set amount it is, if it is one: what
    /// Linux TCP carries, what a flow's own `size` or `duration` replaces,
    /// and what a measurement window reads as throughput.
    pub transfer: Option<Transfer>,
    /// Whether a middle system can serve its flows (`middle = true` on a
    /// `[[flows]]` entry).
    pub servable: bool,
    /// Whether a flow can change its data sender's utility at set times
    /// (`switch` on a `[[flows]]` entry).
    pub switchable: bool,
}

/// A one-way transfer of a set amount of data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Which way the data goes.
    pub direction: BulkDirection,
    /// How much.
    pub amount: Amount,
}

/// What independent QUIC stacks run for a workload (`peers/`): their
/// bulk transfer or their RTC frames.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PeerWork {
    /// A bulk transfer.
    Bulk {
        /// Upload or download.
        direction: BulkDirection,
        /// Bytes.
        size: u64,
    },
    /// RTC frames from the server.
    Rtc {
        /// Frames.
        frames: u64,
        /// Frames per second.
        fps: u64,
        /// Bytes per frame.
        frame_bytes: u64,
    },
}

/// What a flow's endpoints are built from.
pub(crate) struct FlowSetup {
    /// The trial's seed.
    pub seed: Seed,
    /// This flow's own seed for its workload's draws (a video's chunk
    /// sizes): the trial's, derived with the flow's index.
    pub workload_seed: Seed,
    /// The client's address.
    pub client: SocketAddr,
    /// The server's address.
    pub server: SocketAddr,
    /// The client's QUIC configuration (controller included).
    pub client_quic: QuicConfig,
    /// The server's.
    pub server_quic: QuicConfig,
    /// The server acknowledges at most once per this long.
    pub server_min_ack_delay: Option<Duration>,
    /// The flow's own amount, replacing the workload's.
    pub amount: Option<Amount>,
    /// When the flow starts.
    pub start: Duration,
    /// The handle of the data sender's controller, when the workload
    /// drives it ([`WorkloadKind::provides`]) or the flow switches utility.
    pub utility: Option<cc::UtilityHandle>,
    /// The flow's changes of utility, at their times.
    pub switch: Vec<(netsim::Time, cc::Utility)>,
}

/// A flow's two endpoints.
pub(crate) struct Hosts {
    /// The client host.
    pub client: Box<dyn Host>,
    /// The server host.
    pub server: Box<dyn Host>,
}

/// A finished flow, as its workload reads it.
pub(crate) struct FlowView<'a> {
    /// The workload's client host (under whatever a system wrapped it in).
    pub client: &'a dyn Host,
    /// The server host.
    pub server: &'a dyn Host,
    /// The connection that carried the client's data on the far side,
    /// when a middle system terminated the client's (the split proxy).
    pub relayed: Option<&'a ConnRecord>,
    /// How the flow is named.
    pub names: &'a FlowNames,
    /// The window throughput and RTTs are measured over, if any.
    pub measure: Option<crate::outcome::Window>,
    /// The trial's time limit: throughput series run up to it.
    pub time_limit: netsim::Time,
    /// Its named phases, each measured on its own as well.
    pub phases: &'a [crate::outcome::Phase],
    /// How each flow's RTTs are grouped in intervals, if asked
    /// (`measure.rtt_intervals`).
    pub rtt_intervals: Option<crate::outcome::RttIntervals>,
}

/// What a finished flow achieved, for figures across flows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct FlowOutcome {
    /// Whether its workload finished.
    pub completed: bool,
    /// Its goodput, Mbit/s, if it has one.
    pub goodput_mbps: Option<f64>,
}

/// A workload's behaviour.
pub(crate) trait WorkloadKind {
    /// What the rest of the scenario may rely on.
    fn traits(&self) -> Traits;
    /// The flow's client and server.
    fn endpoints(&self, setup: &FlowSetup) -> Hosts;
    /// Reads the flow's metrics into `result`.
    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome;
    /// The metrics a report leads with, in order.
    fn headline(&self) -> &'static [&'static str];
    /// The figures drawn when the scenario asks for none.
    fn plots(&self) -> Vec<Plot>;
    /// What the workload's application feeds its data sender's controller
    /// (the video workload's Proteus-H threshold), if anything.
    fn provides(&self) -> Option<cc::Input> {
        None
    }

    /// What independent QUIC stacks run to carry it, or why they cannot:
    /// `(field, message)`.
    fn peer_work(&self) -> Result<PeerWork, (String, String)> {
        Err((
            "workload".into(),
            "independent stacks carry bulk and rtc only".into(),
        ))
    }
}

/// `host` as a `T`, or an error in `result` naming `who` (a host of
/// another type means the trial was built wrong).
pub(crate) fn downcast<'a, T: Host>(
    host: &'a dyn Host,
    who: &str,
    result: &mut TrialResult,
) -> Option<&'a T> {
    let any: &dyn Any = host;
    let found = any.downcast_ref::<T>();
    if found.is_none() {
        result.errors.push(format!(
            "{who}: not the host this workload built ({})",
            std::any::type_name::<T>()
        ));
    }
    found
}

/// A CDF figure of `distribution`.
pub(crate) fn cdf(distribution: &str) -> Plot {
    Plot::Cdf {
        distribution: distribution.into(),
        title: None,
        y_from: 0.0,
    }
}
