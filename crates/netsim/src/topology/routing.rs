//! A node's static routing table.

use crate::Interface;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Exact destination address → interface, with an optional default.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoutingTable {
    routes: BTreeMap<IpAddr, Interface>,
    default: Option<Interface>,
}

impl RoutingTable {
    pub(crate) fn add(&mut self, dst: IpAddr, via: Interface) {
        self.routes.insert(dst, via);
    }

    pub(crate) fn set_default(&mut self, via: Interface) {
        self.default = Some(via);
    }

    pub(crate) fn default_route(&self) -> Option<Interface> {
        self.default
    }

    pub(crate) fn lookup(&self, dst: IpAddr) -> Option<Interface> {
        self.routes.get(&dst).copied().or(self.default)
    }
}
