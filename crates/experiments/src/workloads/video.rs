//! Video (Proteus §4.4, §6.3): DASH-like 3-second chunks over one QUIC
//! connection from the server, a BOLA-BASIC client with an emulated
//! playback buffer, and the Proteus-H threshold policy driving the
//! server's controller through its utility handle.
//!
//! ```toml
//! [workload]
//! kind = "video"
//! ladder = "4k"            # or "1080p", or bitrates = ["1Mbit/s", "3Mbit/s", …]
//! duration = "180s"        # how long the client streams
//! # chunk = "3s", buffer_target = "30s", thresholds = true, force_highest = false
//! # chunk_variability = { kind = "lognormal", cv = 0.37, peak = 2.0 }
//! ```
//!
//! `chunk_variability` makes chunk sizes vary as a VBR encoding's do
//! (docs/proteus.md, "Variable chunk sizes"): chunk `i` of every level is `bitrate × chunk
//! × m_i` bytes, `m_i` lognormal with mean 1 and coefficient of variation
//! `cv`, clamped at `peak`, drawn per flow from the trial's seed. Without
//! it every chunk is exactly `bitrate × chunk` (constant bitrate).
//!
//! The ladders (our choice; the paper's corpus is not public): 4K tops
//! out at 45 Mbit/s, 1080p at 12 Mbit/s, as §6.3's "above 40 Mbps and
//! 10 Mbps"; each has eight levels roughly doubling at the bottom.

use super::{FlowOutcome, FlowSetup, FlowView, Hosts, Side, Traits, WorkloadKind, downcast};
use crate::figure::Plot;
use crate::outcome::{TrialResult, add_error, add_rtts, add_sender};
use crate::units::{BitRate, Span};
use netsim::Rate;
use quic::{
    ChunkVariability, QuicClient, QuicServer, ThresholdHook, Timed, VideoClient, VideoConfig,
    VideoServerFactory,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The 4K ladder, Mbit/s.
const LADDER_4K: [f64; 8] = [1.5, 3.0, 6.0, 10.0, 16.0, 25.0, 35.0, 45.0];
/// The 1080p ladder, Mbit/s.
const LADDER_1080P: [f64; 8] = [0.5, 1.0, 2.0, 3.0, 4.5, 6.0, 8.0, 12.0];

/// `kind = "video"`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawVideo")]
pub struct Video {
    /// The bitrates on offer, ascending.
    pub bitrates: Vec<BitRate>,
    /// How long the client streams.
    pub duration: Span,
    /// A chunk's length (default 3 s).
    pub chunk: Span,
    /// The buffer target (default 30 s, dash.js's).
    pub buffer_target: Span,
    /// Send the Proteus-H thresholds (default true).
    pub thresholds: bool,
    /// Always request the highest bitrate (Figure 13; default false).
    pub force_highest: bool,
    /// How chunk sizes vary (default: constant bitrate). Left out of the
    /// serialised form when absent, so other scenarios' outputs keep theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_variability: Option<Variability>,
}

/// `chunk_variability = { kind = "lognormal", cv = …, peak = … }`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Variability {
    /// Lognormal multipliers, mean 1, clamped at `peak`.
    Lognormal {
        /// Coefficient of variation.
        cv: f64,
        /// The peak-to-average ratio.
        peak: f64,
    },
}

/// A named ladder.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
enum Ladder {
    #[serde(rename = "4k")]
    FourK,
    #[serde(rename = "1080p")]
    FullHd,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVideo {
    #[serde(default)]
    ladder: Option<Ladder>,
    #[serde(default)]
    bitrates: Option<Vec<BitRate>>,
    duration: Span,
    #[serde(default)]
    chunk: Option<Span>,
    #[serde(default)]
    buffer_target: Option<Span>,
    #[serde(default)]
    thresholds: Option<bool>,
    #[serde(default)]
    force_highest: bool,
    #[serde(default)]
    chunk_variability: Option<Variability>,
}

impl TryFrom<RawVideo> for Video {
    type Error = String;

    fn try_from(raw: RawVideo) -> Result<Video, String> {
        let named = |mbps: &[f64]| {
            mbps.iter()
                .map(|m| BitRate(Rate::from_bps((m * 1e6) as u64)))
                .collect::<Vec<_>>()
        };
        let bitrates = match (raw.ladder, raw.bitrates) {
            (Some(Ladder::FourK), None) => named(&LADDER_4K),
            (Some(Ladder::FullHd), None) => named(&LADDER_1080P),
            (None, Some(bitrates)) => bitrates,
            _ => return Err("give a `ladder` (\"4k\", \"1080p\") or `bitrates`".into()),
        };
        if bitrates.is_empty() || bitrates.iter().any(|b| b.0.is_zero()) {
            return Err("`bitrates` must be positive rates".into());
        }
        if !bitrates.windows(2).all(|w| w[0] < w[1]) {
            return Err("`bitrates` must ascend".into());
        }
        let chunk = raw.chunk.unwrap_or(Span(Duration::from_secs(3)));
        let buffer_target = raw.buffer_target.unwrap_or(Span(Duration::from_secs(30)));
        if chunk.0.is_zero() || buffer_target.0 < chunk.0 || raw.duration.0.is_zero() {
            return Err(
                "`chunk`, `duration` and `buffer_target` must be positive, the target \
                        at least a chunk"
                    .into(),
            );
        }
        if let Some(Variability::Lognormal { cv, peak }) = raw.chunk_variability {
            if !(cv.is_finite() && cv > 0.0 && cv <= 10.0) {
                return Err(format!(
                    "`chunk_variability.cv` must be a coefficient of variation in (0, 10], got {cv}"
                ));
            }
            if !(peak.is_finite() && peak > 1.0) {
                return Err(format!(
                    "`chunk_variability.peak` must be a peak-to-average ratio above 1, got {peak}"
                ));
            }
        }
        Ok(Video {
            chunk_variability: raw.chunk_variability,
            bitrates,
            duration: raw.duration,
            chunk,
            buffer_target,
            thresholds: raw.thresholds.unwrap_or(true),
            force_highest: raw.force_highest,
        })
    }
}

impl Video {
    /// The client's configuration; `seed` draws its chunk sizes.
    fn config(&self, seed: netsim::Seed) -> VideoConfig {
        VideoConfig {
            chunk_variability: match self.chunk_variability {
                None => ChunkVariability::Constant,
                Some(Variability::Lognormal { cv, peak }) => {
                    ChunkVariability::Lognormal { cv, peak, seed }
                }
            },
            ladder: self.bitrates.iter().map(|b| b.0).collect(),
            chunk: self.chunk.0,
            buffer_target: self.buffer_target.0,
            duration: self.duration.0,
            thresholds: self.thresholds,
            force_highest: self.force_highest,
        }
    }
}

/// The client host: its playback clock wakes it.
type Client = Timed<QuicClient<VideoClient>>;
/// The server host.
type Server = QuicServer<VideoServerFactory>;

impl WorkloadKind for Video {
    fn traits(&self) -> Traits {
        Traits {
            data_sender: Side::Server,
            quic: true,
            flows: true,
            server_opens_streams: false,
            kernel_tcp: false,
            server_ack_delay: false,
            transfer: None,
            servable: false,
            switchable: false,
        }
    }

    fn provides(&self) -> Option<cc::Input> {
        Some(cc::Input::UtilityHandle)
    }

    fn endpoints(&self, setup: &FlowSetup) -> Hosts {
        let app = VideoClient::new(self.config(setup.workload_seed));
        let client = QuicClient::new(setup.client_quic.clone(), setup.client, setup.server, app);
        let handle = setup.utility.clone();
        let factory = VideoServerFactory::new(move || {
            handle.clone().map(|handle| {
                Box::new(move |threshold| handle.set_threshold(threshold)) as ThresholdHook
            })
        });
        let server = QuicServer::new(setup.server_quic.clone(), setup.server, factory);
        Hosts {
            client: Box::new(Timed::new(client)),
            server: Box::new(server),
        }
    }

    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        let Some(client) = downcast::<Client>(view.client, "client", result) else {
            return FlowOutcome::default();
        };
        let Some(server) = downcast::<Server>(view.server, "server", result) else {
            return FlowOutcome::default();
        };
        let client = client.inner();
        add_sender(result, names, server.records().next());
        if view.measure.is_some() {
            add_rtts(result, names, server.records().next());
        }
        add_error(result, &names.who("client"), client.record());
        let Some(app) = client.app() else {
            return FlowOutcome::default();
        };
        let end = netsim::Time::ZERO + Duration::from_secs_f64(result.end_s);
        let report = app.report(end);
        result.set(names.metric("bitrate_mbps"), report.mean_bitrate_mbps);
        result.set(names.metric("rebuffer_ratio"), report.rebuffer_ratio);
        result.set(names.metric("rebuffer_s"), report.rebuffer.as_secs_f64());
        result.set(names.metric("chunks"), report.chunks as f64);
        if let Some(startup) = report.startup {
            result.set(names.metric("startup_s"), startup.as_secs_f64());
        }
        let thresholds = server.apps().next().map_or(0, |s| s.thresholds());
        result.set(names.metric("thresholds_sent"), thresholds as f64);
        result.distributions.insert(
            names.metric("chunk_bitrate_mbps"),
            app.chunks()
                .iter()
                .map(|c| c.bitrate.bits_per_sec() as f64 / 1e6)
                .collect(),
        );
        FlowOutcome {
            completed: app.is_finished_by(end),
            goodput_mbps: None,
        }
    }

    fn headline(&self) -> &'static [&'static str] {
        &["bitrate_mbps", "rebuffer_ratio"]
    }

    fn plots(&self) -> Vec<Plot> {
        ["bitrate_mbps", "rebuffer_ratio"]
            .into_iter()
            .map(|metric| Plot::Bars {
                metric: metric.into(),
                title: None,
            })
            .collect()
    }
}
