//! No congestion control: a window no sender fills and no pacing rate,
//! for a tunnel connection whose inner connections do their own
//! (TECC §3.1 runs MST, MDT and RMDT this way).

use quic::congestion::{Controller, ControllerFactory, ControllerMetrics};
use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

/// The window: 1 GiB, far beyond any path here.
const WINDOW: u64 = 1 << 30;

/// A controller that never limits (noq-proto's pacer spreads a window over
/// an RTT, which for this window is no limit either).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlimited;

impl ControllerFactory for Unlimited {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Unlimited)
    }
}

impl Controller for Unlimited {
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
