//! PEMI's real-time communication frames (§6.1.2): frames at a fixed rate
//! and bit rate from the server over QUIC, one stream each; frame delay
//! and frame-level jitter.

use super::{
    FlowOutcome, FlowSetup, FlowView, Hosts, PeerWork, Side, Traits, WorkloadKind, cdf, downcast,
};
use crate::figure::Plot;
use crate::outcome::{TrialResult, add_distribution, add_error, add_sender};
use crate::units::{BitRate, Span};
use quic::{QuicClient, QuicServer, RtcConfig, RtcReceiver, RtcReport, RtcSenderFactory, Timed};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `kind = "rtc"`: duration, frames per second and bit rate.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawRtc")]
pub struct Rtc {
    /// How long the stream lasts (default 20 s).
    pub duration: Span,
    /// Frames per second (default 30, at most 1000).
    pub fps: u64,
    /// Media bit rate (default 3000 kbit/s; frames of at least 16 bytes).
    pub bitrate: BitRate,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRtc {
    #[serde(default = "twenty_seconds")]
    duration: Span,
    #[serde(default = "thirty")]
    fps: u64,
    #[serde(default = "three_mbps")]
    bitrate: BitRate,
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

/// The frame header's length.
const FRAME_HEADER: u64 = 16;

impl TryFrom<RawRtc> for Rtc {
    type Error = String;

    fn try_from(raw: RawRtc) -> Result<Rtc, String> {
        let fps = raw.fps;
        if raw.duration.0.is_zero() {
            return Err("`duration` must be positive".into());
        }
        if fps == 0 || fps > 1000 {
            return Err(format!("`fps` {fps} is outside 1..=1000"));
        }
        if raw.bitrate.0.bits_per_sec() < 8 * FRAME_HEADER * fps {
            return Err(format!(
                "`bitrate` gives frames of less than {FRAME_HEADER} bytes at {fps} frames/s"
            ));
        }
        Ok(Rtc {
            duration: raw.duration,
            fps,
            bitrate: raw.bitrate,
        })
    }
}

impl Rtc {
    fn source(&self) -> RtcConfig {
        RtcConfig {
            fps: self.fps,
            frame_bytes: (self.bitrate.0.bits_per_sec() / 8 / self.fps) as usize,
            frames: (self.duration.0.as_nanos() * u128::from(self.fps) / 1_000_000_000) as u64,
        }
    }
}

/// The frame sender.
type Server = Timed<QuicServer<RtcSenderFactory>>;

impl WorkloadKind for Rtc {
    fn traits(&self) -> Traits {
        Traits {
            data_sender: Side::Server,
            quic: true,
            flows: true,
            server_opens_streams: true,
            kernel_tcp: false,
            server_ack_delay: false,
            transfer: None,
            servable: false,
            switchable: false,
        }
    }

    fn peer_work(&self) -> Result<PeerWork, (String, String)> {
        let source = self.source();
        Ok(PeerWork::Rtc {
            frames: source.frames,
            fps: source.fps,
            frame_bytes: source.frame_bytes as u64,
        })
    }

    fn endpoints(&self, setup: &FlowSetup) -> Hosts {
        let source = self.source();
        let receiver = RtcReceiver::new(source.frames);
        let sender = QuicServer::new(
            setup.server_quic.clone(),
            setup.server,
            RtcSenderFactory::new(source),
        );
        Hosts {
            client: Box::new(QuicClient::new(
                setup.client_quic.clone(),
                setup.client,
                setup.server,
                receiver,
            )),
            server: Box::new(Timed::new(sender)),
        }
    }

    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        let (Some(client), Some(server)) = (
            downcast::<QuicClient<RtcReceiver>>(view.client, "client", result),
            downcast::<Server>(view.server, "server", result),
        ) else {
            return FlowOutcome::default();
        };
        let sender = server.inner().records().next();
        add_sender(result, names, sender);
        add_error(result, &names.who("client"), client.record());
        add_error(result, &names.who("server"), sender);
        let Some(report) = RtcReport::from_client(client) else {
            return FlowOutcome::default();
        };
        result.set(
            names.metric("frames_received_fraction"),
            report.frames.len() as f64 / report.expected.max(1) as f64,
        );
        add_distribution(result, &names.metric("frame_delay"), &report.delays);
        add_distribution(result, &names.metric("frame_jitter"), &report.jitter);
        FlowOutcome {
            completed: report.frames.len() as u64 == report.expected,
            goodput_mbps: None,
        }
    }

    fn headline(&self) -> &'static [&'static str] {
        &[
            "frame_delay_p50_ms",
            "frame_delay_p90_ms",
            "frame_jitter_p50_ms",
            "frame_jitter_p90_ms",
        ]
    }

    fn plots(&self) -> Vec<Plot> {
        vec![cdf("frame_delay_ms"), cdf("frame_jitter_ms")]
    }
}
