//! Sidekick's low-latency media (§5.1): 240 B every 20 ms over UDP from
//! the client, NACKs from the receiver, a de-jitter buffer; the de-jitter
//! delay of every packet.

use super::{FlowOutcome, FlowSetup, FlowView, Hosts, Side, Traits, WorkloadKind, cdf, downcast};
use crate::figure::Plot;
use crate::outcome::{TrialResult, millis};
use crate::units::Span;
use quic::{DelaySummary, MediaConfig, MediaReceiver, MediaSender};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `kind = "media"`: how long the stream lasts.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawMedia")]
pub struct Media {
    /// How long the stream lasts (default 60 s; positive).
    pub duration: Span,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMedia {
    #[serde(default = "sixty_seconds")]
    duration: Span,
}

fn sixty_seconds() -> Span {
    Span(Duration::from_secs(60))
}

impl TryFrom<RawMedia> for Media {
    type Error = String;

    fn try_from(raw: RawMedia) -> Result<Media, String> {
        if raw.duration.0.is_zero() {
            return Err("`duration` must be positive".into());
        }
        Ok(Media {
            duration: raw.duration,
        })
    }
}

impl WorkloadKind for Media {
    fn traits(&self) -> Traits {
        Traits {
            data_sender: Side::Client,
            quic: false,
            flows: false,
            server_opens_streams: false,
            kernel_tcp: false,
            server_ack_delay: false,
            transfer: None,
            servable: false,
            switchable: false,
        }
    }

    fn endpoints(&self, setup: &FlowSetup) -> Hosts {
        let config = MediaConfig::new(setup.seed.derive("media")).with_duration(self.duration.0);
        Hosts {
            client: Box::new(MediaSender::new(config.clone(), setup.client, setup.server)),
            server: Box::new(MediaReceiver::new(config, setup.server, setup.client)),
        }
    }

    fn collect(&self, view: &FlowView<'_>, result: &mut TrialResult) -> FlowOutcome {
        let names = view.names;
        let (Some(sender), Some(receiver)) = (
            downcast::<MediaSender>(view.client, "client", result),
            downcast::<MediaReceiver>(view.server, "server", result),
        ) else {
            return FlowOutcome::default();
        };
        let summary: DelaySummary = receiver.summary();
        for (name, value) in [
            ("dejitter_p50_ms", summary.p50),
            ("dejitter_p95_ms", summary.p95),
            ("dejitter_p99_ms", summary.p99),
            ("dejitter_max_ms", summary.max),
        ] {
            result.set(names.metric(name), millis(value));
        }
        let sent = sender.packet_count().max(1);
        result.set(
            names.metric("played_fraction"),
            f64::from(receiver.played()) / f64::from(sent),
        );
        result.set(
            names.metric("retransmissions"),
            sender.stats().retransmissions as f64,
        );
        let delays = receiver.dejitter_delays().iter().copied().map(millis);
        result
            .distributions
            .insert(names.metric("dejitter_ms"), delays.collect());
        FlowOutcome {
            completed: receiver.is_complete(),
            goodput_mbps: None,
        }
    }

    fn headline(&self) -> &'static [&'static str] {
        &["dejitter_p50_ms", "dejitter_p95_ms", "dejitter_p99_ms"]
    }

    fn plots(&self) -> Vec<Plot> {
        vec![cdf("dejitter_ms")]
    }
}
