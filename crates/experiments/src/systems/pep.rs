//! The split-connection TCP PEP (PEPsal-like, transparent with nftables
//! tproxy): the papers' "TCP + PEP" baseline, for `transport = "tcp"`,
//! real mode only. It runs on the middle node's own kernel, in process,
//! on a thread in the node's namespace (the `pep` crate); both legs use
//! the client's TCP congestion control unless `controller` names one.
//!
//! ```toml
//! middle = "pep"
//! middle = { kind = "pep", max_connections = 64, idle_timeout = "30s" }
//! ```

use super::settings::settings;
use super::{Facts, OnTestbed, Problem, Service, System, TrialSetup, positive, wrong_middle};
use crate::outcome::Mode;
use crate::units::Span;
use ::pep::{self as tcp_pep, TcpPep, TcpPepConfig};
use netsim::Middlebox;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

settings! {
    /// The PEP's settings.
    pub struct Pep {
        /// Both legs' TCP congestion control (`TCP_CONGESTION`; default:
        /// the client's in a scenario, "cubic" on a router).
        controller: String,
        /// Connections relayed at once; more are reset and counted as
        /// refused.
        max_connections: usize = TcpPepConfig::default().max_connections,
        /// A connection that moves no byte either way for this long is
        /// closed on both legs.
        idle_timeout: Span = Span(TcpPepConfig::default().idle_timeout),
        /// The local port nftables' tproxy diverts connections to.
        port: u16 = TcpPepConfig::default().port,
    }
}

impl System for Pep {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if !facts.kernel_tcp {
            return wrong_middle("\"pep\" splits TCP connections: set transport = \"tcp\"");
        }
        if facts.hops < 2 {
            return wrong_middle("a PEP needs a node between two hops");
        }
        Ok(())
    }

    fn check_settings(&self) -> Result<(), Problem> {
        positive("max_connections", self.max_connections())?;
        if self.idle_timeout().0.is_zero() {
            return Err(("middle.idle_timeout".into(), "must be positive".into()));
        }
        Ok(())
    }

    fn unsupported_in(&self, mode: Mode) -> Option<&'static str> {
        match mode {
            Mode::Simulator => Some("the split TCP PEP runs in real mode only (pepkit run --real)"),
            Mode::Real => None,
        }
    }

    fn serves(&self) -> bool {
        false
    }

    fn middlebox(&self, _trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        None
    }

    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed {
        let congestion = self.controller.clone().unwrap_or_else(|| {
            trial
                .tcp
                .map_or_else(|| "cubic".to_string(), |tcp| tcp.client_controller.clone())
        });
        OnTestbed::Service(Box::new(PepService(TcpPepConfig {
            congestion,
            max_connections: self.max_connections(),
            idle_timeout: self.idle_timeout().0,
            port: self.port(),
            ..TcpPepConfig::default()
        })))
    }
}

/// The PEP on the node's kernel.
struct PepService(TcpPepConfig);

impl Service for PepService {
    fn run(
        self: Box<Self>,
        stop: Arc<AtomicBool>,
        ready: &dyn Fn(),
    ) -> Result<Vec<(String, f64)>, String> {
        let config = self.0;
        // The rules go in before the PEP listens: a connection that
        // started in between would be reset.
        tcp_pep::install(config.port).map_err(|e| e.to_string())?;
        let ran = TcpPep::new(config).and_then(|pep| {
            ready();
            pep.run(stop)
        });
        let removed = tcp_pep::uninstall();
        let stats = ran.map_err(|e| e.to_string())?;
        removed.map_err(|e| e.to_string())?;
        let serde_json::Value::Object(fields) =
            serde_json::to_value(stats).map_err(|e| e.to_string())?
        else {
            return Ok(Vec::new());
        };
        Ok(fields
            .into_iter()
            .filter_map(|(key, value)| Some((format!("pep_{key}"), value.as_f64()?)))
            .collect())
    }
}
