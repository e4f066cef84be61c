//! Congestion controllers chosen by name: a small registry of
//! `noq_proto` controller factories that later crates extend with their own.

use noq_proto::congestion::{Bbr3Config, ControllerFactory, CubicConfig, NewRenoConfig};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A shareable controller factory, as `noq_proto::TransportConfig` takes it.
pub type SharedFactory = Arc<dyn ControllerFactory + Send + Sync>;

/// A congestion-controller name that no registry entry matches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion controller {name:?} (known: {known})")]
pub struct UnknownController {
    /// The name asked for.
    pub name: String,
    /// The names the registry knows, comma-separated.
    pub known: String,
}

/// Maps controller names to factories.
///
/// [`ControllerRegistry::builtin`] knows the QUIC crate's own controllers:
/// `"cubic"`, `"newreno"` and `"bbr"` (noq-proto's BBRv3). A crate with its
/// own controller (PACUBIC, Proteus, …) implements
/// [`crate::congestion::ControllerFactory`] and adds it with
/// [`ControllerRegistry::register`]. Names are kept in a `BTreeMap`, so
/// listings come out sorted.
#[derive(Clone)]
pub struct ControllerRegistry {
    factories: BTreeMap<String, SharedFactory>,
}

impl ControllerRegistry {
    /// A registry with no controllers.
    pub fn empty() -> ControllerRegistry {
        ControllerRegistry {
            factories: BTreeMap::new(),
        }
    }

    /// A registry with `cubic`, `newreno` and `bbr`, each with noq-proto's
    /// default parameters.
    pub fn builtin() -> ControllerRegistry {
        let mut registry = ControllerRegistry::empty();
        registry.register("cubic", Arc::new(CubicConfig::default()));
        registry.register("newreno", Arc::new(NewRenoConfig::default()));
        registry.register("bbr", Arc::new(Bbr3Config::default()));
        registry
    }

    /// Adds (or replaces) the controller called `name`.
    pub fn register(&mut self, name: impl Into<String>, factory: SharedFactory) -> &mut Self {
        self.factories.insert(name.into(), factory);
        self
    }

    /// The factory for `name`.
    pub fn get(&self, name: &str) -> Result<SharedFactory, UnknownController> {
        self.factories
            .get(name)
            .cloned()
            .ok_or_else(|| UnknownController {
                name: name.to_string(),
                known: self.names().collect::<Vec<_>>().join(", "),
            })
    }

    /// The known names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.factories.keys().map(String::as_str)
    }
}

impl Default for ControllerRegistry {
    fn default() -> ControllerRegistry {
        ControllerRegistry::builtin()
    }
}

impl fmt::Debug for ControllerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_by_name() {
        let registry = ControllerRegistry::builtin();
        assert_eq!(
            registry.names().collect::<Vec<_>>(),
            ["bbr", "cubic", "newreno"]
        );
        assert!(registry.get("cubic").is_ok());
        let Err(err) = registry.get("vegas") else {
            panic!("vegas is unknown")
        };
        assert_eq!(err.known, "bbr, cubic, newreno");
    }
}
