//! A plain router: the node forwards, nothing else runs.

use super::{Facts, OnTestbed, Problem, System, TrialSetup};
use netsim::Middlebox;

/// The router.
pub(crate) struct Router;

impl System for Router {
    fn check(&self, _facts: &Facts) -> Result<(), Problem> {
        Ok(())
    }

    fn serves(&self) -> bool {
        false
    }

    fn middlebox(&self, _trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        None
    }

    fn on_testbed(&self, _trial: &TrialSetup<'_>) -> OnTestbed {
        OnTestbed::Router
    }
}
