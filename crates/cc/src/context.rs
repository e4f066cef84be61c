//! What building a controller takes and gives back, below the registry and
//! every controller's settings: [`ControllerContext`] (the seed, the
//! endpoint's clock and what is fed to the controller from beside its
//! endpoint), [`Built`] (the factory, its counters and loss thresholds) and
//! [`ControllerCounters`].

use crate::pcc::utility::UtilityHandle;
use crate::signals::Signals;
use netsim::Seed;
use quic::{SharedFactory, SimClock};
use std::sync::Arc;

/// What a controller may use when it is built.
#[derive(Clone, Debug)]
pub struct ControllerContext {
    /// Seeds any randomness of the controller (derive labels from it).
    pub seed: Seed,
    /// The endpoint's clock (`QuicConfig::with_clock` must get the same).
    pub clock: SimClock,
    /// The signals something on the path feeds the endpoint's controller,
    /// when something does (see [`crate::signals`]).
    pub signals: Option<Signals>,
    /// The utility handle of the application on the endpoint, when its
    /// workload drives one (a PCC sender reads it; others ignore it).
    pub utility: Option<UtilityHandle>,
}

impl ControllerContext {
    /// A context with nothing beside the endpoint.
    pub fn new(seed: Seed, clock: SimClock) -> ControllerContext {
        ControllerContext {
            seed,
            clock,
            signals: None,
            utility: None,
        }
    }
}

/// Counters a controller reports after a run, as `(metric, value)` pairs
/// named after the controller (`pacubic_quack_cuts`).
pub trait ControllerCounters: Send + Sync {
    /// The counters now; absent ones are left out.
    fn counters(&self) -> Vec<(String, f64)>;
}

/// A built controller: the factory the QUIC endpoint takes and, for
/// controllers that count, where to read their counters.
#[derive(Clone)]
pub struct Built {
    /// Builds each connection's controller.
    pub factory: SharedFactory,
    /// Its counters, if it keeps any.
    pub counters: Option<Arc<dyn ControllerCounters>>,
    /// The loss thresholds it asks of its endpoint, if not RFC 9002's.
    pub loss_detection: Option<quic::LossDetection>,
}

impl Built {
    /// A factory that keeps no counters and leaves the loss thresholds to
    /// its endpoint.
    pub(crate) fn plain(factory: SharedFactory) -> Built {
        Built {
            factory,
            counters: None,
            loss_detection: None,
        }
    }
}
