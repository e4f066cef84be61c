//! PACUBIC as a scenario names it: `controller = { name = "pacubic",
//! quack_acks = true, ratio = 0.0385 }`, and how it is built for an
//! endpoint.

use super::{PacubicConfig, PacubicFactory, PacubicStats};
use crate::context::{Built, ControllerContext, ControllerCounters};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// PACUBIC's settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "RawSettings")]
pub struct PacubicSettings {
    /// Count quACKed bytes as acknowledged for the window (ACK reduction,
    /// Sidekick §2.3; default off).
    pub quack_acks: bool,
    /// Fix the near segment's share r of the RTT instead of estimating it
    /// (the paper's runs used 1/26).
    pub ratio: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    #[serde(default)]
    quack_acks: bool,
    #[serde(default)]
    ratio: Option<f64>,
}

impl TryFrom<RawSettings> for PacubicSettings {
    type Error = String;

    fn try_from(raw: RawSettings) -> Result<PacubicSettings, String> {
        if let Some(r) = raw.ratio
            && !(r > 0.0 && r <= 1.0)
        {
            return Err(format!("`ratio` {r} is not in (0, 1]"));
        }
        Ok(PacubicSettings {
            quack_acks: raw.quack_acks,
            ratio: raw.ratio,
        })
    }
}

impl PacubicSettings {
    /// Why PACUBIC needs the near segment's signals.
    pub const REQUIRES: &str = "pacubic reads the sidekick's quACKs: only a data sender that a \
                                sidekick serves can run it (middle = \"sidekick\")";

    /// A factory wired to the context's signals and clock. Without
    /// signals no quACK ever arrives and PACUBIC behaves as CUBIC
    /// (validation refuses that combination; see [`Self::REQUIRES`]).
    pub(crate) fn build(&self, context: &ControllerContext) -> Built {
        let mut config = PacubicConfig::new(context.clock).with_quack_acks(self.quack_acks);
        if let Some(r) = self.ratio {
            config = config.with_fixed_ratio(r);
        }
        let signals = context.signals.clone().unwrap_or_default();
        let factory = Arc::new(PacubicFactory::new(signals, config));
        Built {
            factory: factory.clone(),
            counters: Some(factory),
            loss_detection: None,
        }
    }
}

impl ControllerCounters for PacubicFactory {
    fn counters(&self) -> Vec<(String, f64)> {
        let stats: PacubicStats = self.stats();
        let mut counters = vec![
            (
                "pacubic_quack_cuts".to_string(),
                stats.quack_reductions as f64,
            ),
            ("pacubic_e2e_cuts".to_string(), stats.e2e_reductions as f64),
        ];
        // r as used by the last quACK-driven cut (none without near losses).
        if stats.ratio_ppm > 0 {
            counters.push((
                "pacubic_ratio".to_string(),
                f64::from(stats.ratio_ppm) / 1e6,
            ));
        }
        if stats.quacked_bytes > 0 {
            counters.push((
                "pacubic_quacked_bytes".to_string(),
                stats.quacked_bytes as f64,
            ));
        }
        counters
    }
}
