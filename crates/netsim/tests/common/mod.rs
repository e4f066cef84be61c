//! Helpers shared by the integration tests.
#![allow(dead_code)]

use netsim::*;
use std::net::SocketAddr;
use std::time::Duration;

pub(crate) const SENDER: &str = "10.0.0.1:4000";
pub(crate) const RECEIVER: &str = "10.0.1.1:5000";
pub(crate) const MIDDLE_IP: &str = "10.0.0.254";

pub(crate) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A two-hop chain sender — middle — receiver with the same hop config on
/// both hops.
pub(crate) fn two_hop_chain(
    sender: impl Host,
    receiver: impl Host,
    middle: MiddleSpec,
    hop0: HopConfig,
    hop1: HopConfig,
) -> ChainSpec {
    ChainSpec::new(
        HostSpec::new("sender", addr(SENDER).ip(), sender),
        HostSpec::new("receiver", addr(RECEIVER).ip(), receiver),
    )
    .hop(hop0)
    .middle(middle)
    .hop(hop1)
}

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// The text of a cellular trace bundled with the repository
/// (`traces/cellular/<name>.gz`, embedded by the traces crate).
pub(crate) fn bundled_trace(name: &str) -> String {
    traces::text(&format!("cellular/{name}")).unwrap()
}
