//! The split-connection TCP PEP (PEPsal-like, transparent with nftables
//! tproxy): the papers' "TCP + PEP" baseline, for `transport = "tcp"`,
//! real mode only. It runs on the middle node's own kernel, in process,
//! on a thread in the node's namespace ([`emu::tcp::pep`]); both legs use
//! the client's TCP congestion control.

use super::{Facts, OnTestbed, Problem, Service, System, TrialSetup, wrong_middle};
use crate::outcome::Mode;
use emu::tcp::pep::{self, TcpPep, TcpPepConfig};
use netsim::Middlebox;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The PEP.
pub(crate) struct Pep;

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
        let congestion = trial
            .tcp
            .map_or_else(|| "cubic".to_string(), |tcp| tcp.client_controller.clone());
        OnTestbed::Service(Box::new(PepService(TcpPepConfig {
            congestion,
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
        pep::install(config.port).map_err(|e| e.to_string())?;
        let ran = TcpPep::new(config).and_then(|pep| {
            ready();
            pep.run(stop)
        });
        let removed = pep::uninstall();
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
