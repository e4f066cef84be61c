//! A router in user space (`middle = "forward"`): the middle node's engine
//! forwards every datagram at once, unchanged. In real mode the node's
//! kernel does not forward and the in-path driver carries every datagram,
//! as it does for PEMI, so the driver's own cost per datagram (receive,
//! hand over, take back, send, and the timing of the engine's stretches)
//! can be measured with no engine work in it. In the simulator it is a
//! plain router.

use super::{Facts, OnTestbed, Placement, Problem, System, TrialSetup, wrong_middle};
use netsim::{Forward, Middlebox};

/// The user-space router.
pub(crate) struct UserSpaceRouter;

impl System for UserSpaceRouter {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if facts.hops < 2 {
            return wrong_middle("a forwarder sits on a node between two hops");
        }
        Ok(())
    }

    fn serves(&self) -> bool {
        false
    }

    fn middlebox(&self, _trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        Some(Box::new(Forward::default()))
    }

    fn on_testbed(&self, _trial: &TrialSetup<'_>) -> OnTestbed {
        OnTestbed::Engine {
            engine: Box::new(Forward::default()),
            placement: Placement::InPath,
            local: Vec::new(),
        }
    }
}
