//! Vivace and Proteus as a scenario names them: `controller = "vivace"`,
//! `"proteus-p"`, `"proteus-s"`, `{ name = "proteus-h", threshold_mbps =
//! 30 }`, each Proteus mode with `noise = { trending = false, … }` to turn
//! one noise-tolerance mechanism off, and how they are built.

use super::noise::NoiseTolerance;
use super::utility::{Utility, UtilityHandle};
use super::{PccConfig, PccFactory, PccStats};
use crate::context::{Built, ControllerContext, ControllerCounters};
use netsim::Rate;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A Proteus mode's settings: which noise-tolerance mechanisms are on
/// (default all).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProteusSettings {
    /// The mechanisms of §5.
    #[serde(default)]
    pub noise: NoiseTolerance,
}

/// Proteus-H's settings: the noise tolerance and, optionally, a fixed
/// threshold; without one, an application must drive it through its
/// handle (the video workload does).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "RawHybrid")]
pub struct HybridSettings {
    /// The mechanisms of §5.
    pub noise: NoiseTolerance,
    /// A fixed switching threshold, Mbit/s.
    pub threshold_mbps: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHybrid {
    #[serde(default)]
    noise: NoiseTolerance,
    #[serde(default)]
    threshold_mbps: Option<f64>,
}

impl TryFrom<RawHybrid> for HybridSettings {
    type Error = String;

    fn try_from(raw: RawHybrid) -> Result<HybridSettings, String> {
        if let Some(t) = raw.threshold_mbps
            && !(t.is_finite() && t > 0.0)
        {
            return Err(format!("`threshold_mbps` {t} is not a positive rate"));
        }
        Ok(HybridSettings {
            noise: raw.noise,
            threshold_mbps: raw.threshold_mbps,
        })
    }
}

impl HybridSettings {
    /// Why Proteus-H without a threshold needs a handle.
    pub const REQUIRES: &str = "proteus-h switches at a threshold an application sets through \
                                its handle: run it where the workload drives one (the video \
                                workload's data sender), or give it `threshold_mbps`";
}

/// Builds a PCC factory for `config`, with the context's handle (set to
/// the configured utility) or a handle of its own.
pub(crate) fn build(config: PccConfig, context: &ControllerContext) -> Built {
    let handle = match &context.utility {
        Some(handle) => {
            handle.set_utility(config.utility);
            if config.threshold.is_some() {
                handle.set_threshold(config.threshold);
            }
            handle.clone()
        }
        None => {
            let handle = UtilityHandle::new(config.utility);
            handle.set_threshold(config.threshold);
            handle
        }
    };
    let factory = Arc::new(PccFactory::new(config, handle, context.seed));
    Built {
        factory: factory.clone(),
        counters: Some(factory),
        loss_detection: None,
    }
}

/// The configuration of Proteus in `utility` mode with `settings`.
pub(crate) fn proteus(utility: Utility, settings: &ProteusSettings) -> PccConfig {
    let mut config = PccConfig::proteus(utility);
    config.noise = settings.noise;
    config
}

/// Proteus-H's configuration.
pub(crate) fn hybrid(settings: &HybridSettings) -> PccConfig {
    let mut config = PccConfig::proteus(Utility::Hybrid);
    config.noise = settings.noise;
    config.threshold = settings
        .threshold_mbps
        .map(|mbps| Rate::from_bps((mbps * 1e6).round() as u64));
    config
}

impl ControllerCounters for PccFactory {
    fn counters(&self) -> Vec<(String, f64)> {
        let s: PccStats = self.stats();
        let mut counters = vec![
            ("pcc_mis".to_string(), s.mis as f64),
            ("pcc_mi_timeouts".to_string(), s.mi_timeouts as f64),
            ("pcc_decisions".to_string(), s.rate.decisions as f64),
            ("pcc_undecided".to_string(), s.rate.undecided as f64),
            (
                "pcc_gradients_ignored".to_string(),
                s.gradients_ignored as f64,
            ),
            (
                "pcc_deviations_ignored".to_string(),
                s.deviations_ignored as f64,
            ),
        ];
        if s.samples_rejected > 0 {
            counters.push((
                "pcc_samples_rejected".to_string(),
                s.samples_rejected as f64,
            ));
        }
        if s.packets > 0 {
            counters.push((
                "pcc_cwnd_limited_per_packet".to_string(),
                s.cwnd_limited as f64 / s.packets as f64,
            ));
        }
        counters
    }
}
