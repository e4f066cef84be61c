//! No congestion control: a window no sender fills and, by default, no
//! pacing rate, for a tunnel connection whose inner connections do their
//! own (TECC §3.1 runs MST, MDT and RMDT this way); or the same at a
//! constant pacing rate, for a probe that sends at a fixed rate whatever
//! the path does (the Proteus paper's §3 measures RTT noise with a
//! 20 Mbit/s constant-rate flow).

use quic::congestion::{Controller, ControllerFactory, ControllerMetrics};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

/// The window: 1 GiB, far beyond any path here.
const WINDOW: u64 = 1 << 30;

/// A controller that never limits (noq-proto's pacer spreads a window over
/// an RTT, which for this window is no limit either); its factory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unlimited;

/// The controller [`Unlimited`] and [`ConstantSettings`] build: the
/// window above and, for a constant-rate sender, a pacing rate (bytes per
/// second).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Constant {
    /// The pacing rate, bytes per second, if any.
    pub pacing: Option<u64>,
}

/// `{ name = "constant", rate_mbps = 20 }`: a sender that paces at a
/// constant rate and never reacts to loss or delay.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, try_from = "RawConstant")]
pub struct ConstantSettings {
    /// The rate, Mbit/s (positive).
    pub rate_mbps: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstant {
    rate_mbps: f64,
}

impl TryFrom<RawConstant> for ConstantSettings {
    type Error = String;

    fn try_from(raw: RawConstant) -> Result<ConstantSettings, String> {
        if !(raw.rate_mbps.is_finite() && raw.rate_mbps > 0.0 && raw.rate_mbps <= 1e6) {
            return Err(format!(
                "`rate_mbps` must be a positive number of Mbit/s (at most 10^6), not {}",
                raw.rate_mbps
            ));
        }
        Ok(ConstantSettings {
            rate_mbps: raw.rate_mbps,
        })
    }
}

impl ConstantSettings {
    /// The controller: no window limit, paced at the rate.
    pub fn controller(&self) -> Constant {
        Constant {
            pacing: Some(((self.rate_mbps * 1e6 / 8.0).round() as u64).max(1)),
        }
    }
}

impl ControllerFactory for Unlimited {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Constant::default())
    }
}

impl ControllerFactory for Constant {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(*self)
    }
}

impl Controller for Constant {
    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent: Instant,
        _is_persistent_congestion: bool,
        _is_ecn: bool,
        _lost_bytes: u64,
        _largest_lost_pn: u64,
    ) {
    }

    fn on_mtu_update(&mut self, _new_mtu: u16) {}

    fn window(&self) -> u64 {
        WINDOW
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = WINDOW;
        metrics.pacing_rate = self.pacing;
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(*self)
    }

    fn initial_window(&self) -> u64 {
        WINDOW
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(rate: f64) -> Result<ConstantSettings, String> {
        use serde::de::IntoDeserializer;
        use serde::de::value::{Error, MapDeserializer};
        let map =
            MapDeserializer::<_, Error>::new([("rate_mbps", rate.into_deserializer())].into_iter());
        ConstantSettings::deserialize(map).map_err(|e| e.to_string())
    }

    #[test]
    fn a_constant_sender_paces_at_its_rate_and_ignores_congestion() {
        let mut controller = settings(20.0).unwrap().controller();
        let now = Instant::now();
        controller.on_congestion_event(now, now, true, false, 12_000, 10);
        assert_eq!(controller.metrics().pacing_rate, Some(2_500_000));
        assert_eq!(controller.window(), WINDOW);
        assert_eq!(Constant::default().metrics().pacing_rate, None);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let error = settings(bad).unwrap_err();
            assert!(error.contains("rate_mbps"), "{error}");
        }
    }
}
