//! The options of one QUIC endpoint.

use crate::controllers::ControllerRegistry;
use crate::keylog::KeyLog;
use netsim::Seed;
use std::time::Duration;

/// How to set up a [`crate::QuicClient`] or [`crate::QuicServer`].
///
/// Every random source of the endpoint derives from `seed` and the
/// endpoint's own address, so two endpoints in one run draw different
/// streams and a run repeats exactly.
#[derive(Clone, Debug)]
pub struct QuicConfig {
    /// The scenario seed.
    pub seed: Seed,
    /// The congestion controller's name in `registry` (default `"cubic"`).
    pub congestion: String,
    /// The controllers to choose from (default: [`ControllerRegistry::builtin`]).
    pub registry: ControllerRegistry,
    /// Sample each connection's time series at this interval (default: off).
    pub sample_interval: Option<Duration>,
    /// Log TLS secrets here (default: off).
    pub keylog: Option<KeyLog>,
    /// Collect qlog traces here (default: off).
    #[cfg(feature = "qlog")]
    pub qlog: Option<crate::qlog::QlogSet>,
}

impl QuicConfig {
    /// Defaults: CUBIC, no sampling, no key log.
    pub fn new(seed: Seed) -> QuicConfig {
        QuicConfig {
            seed,
            congestion: "cubic".to_string(),
            registry: ControllerRegistry::builtin(),
            sample_interval: None,
            keylog: None,
            #[cfg(feature = "qlog")]
            qlog: None,
        }
    }

    /// Use the congestion controller called `name`.
    pub fn with_congestion(mut self, name: impl Into<String>) -> QuicConfig {
        self.congestion = name.into();
        self
    }

    /// Choose controllers from `registry`.
    pub fn with_registry(mut self, registry: ControllerRegistry) -> QuicConfig {
        self.registry = registry;
        self
    }

    /// Sample each connection's time series every `interval`.
    pub fn with_sampling(mut self, interval: Duration) -> QuicConfig {
        assert!(!interval.is_zero(), "sampling interval must be positive");
        self.sample_interval = Some(interval);
        self
    }

    /// Collect each connection's qlog trace in `set`.
    #[cfg(feature = "qlog")]
    pub fn with_qlog(mut self, set: crate::qlog::QlogSet) -> QuicConfig {
        self.qlog = Some(set);
        self
    }

    /// Log TLS secrets to `keylog`.
    pub fn with_keylog(mut self, keylog: KeyLog) -> QuicConfig {
        self.keylog = Some(keylog);
        self
    }
}
