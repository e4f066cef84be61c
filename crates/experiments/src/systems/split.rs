//! The split-connection QUIC proxy ("split CUBIC" of Sidekick appendix A,
//! for QUIC): it terminates each client's connection as the server's
//! address and relays its streams over its own connection to the server,
//! so each leg's loss recovery spans one side of the node.
//!
//! ```toml
//! middle = "split"                                  # both legs as the endpoints
//! middle = { kind = "split", controller = "bbr" }   # the server-facing leg's
//! ```
//!
//! The client-facing leg sends the server's data, so it uses the server's
//! controller; the server-facing leg sends the client's, with the client's
//! controller unless `controller` says otherwise.

use super::{
    Facts, OnTestbed, Placement, Problem, System, Topology, TrialSetup, engine_as, quic_with,
    wrong_middle,
};
use crate::outcome::{FlowNames, TrialResult};
use netsim::{Datagram, Dumbbell, Host, Interface, Middlebox, Time, Transmit};
use quic::{ConnRecord, SplitProxy};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// The split proxy's settings.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The server-facing leg's controller (default: the client's).
    #[serde(default, deserialize_with = "crate::shorthand::tagged_option")]
    pub controller: Option<cc::Controller>,
}

impl System for Split {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if facts.hops < 2 {
            return wrong_middle("a split proxy needs a node between two hops");
        }
        if facts.kernel_tcp {
            return wrong_middle("`split` terminates QUIC; for TCP use middle = \"pep\"");
        }
        if !facts.workload.quic {
            return wrong_middle("`split` terminates QUIC; the media workload is plain UDP");
        }
        if facts.workload.server_opens_streams {
            return wrong_middle(
                "`split` relays the streams the client opens; rtc frames travel on streams \
                 the server opens",
            );
        }
        if let Some((_, why)) = self.controller.as_ref().and_then(cc::Controller::requires) {
            return Err(("middle.controller".into(), why.into()));
        }
        Ok(())
    }

    fn serves(&self) -> bool {
        true
    }

    fn middlebox(&self, trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        let mut proxies = trial.flows.iter().map(|flow| {
            let back = self.controller.as_ref().unwrap_or(flow.client_controller);
            SplitProxy::new(
                quic_with(trial.quic, flow.server_controller, trial.seed),
                quic_with(trial.quic, back, trial.seed),
                flow.server,
            )
        });
        match trial.topology {
            // One flow: the proxy takes the node's interfaces as they are.
            Topology::Chain => Some(Box::new(proxies.next()?)),
            Topology::Dumbbell => Some(Box::new(SplitMux::new(proxies.collect()))),
        }
    }

    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed {
        // In the path: the proxy answers as the server and relays from the
        // client's address, so it must see, and own, every datagram.
        match self.middlebox(trial) {
            Some(engine) => OnTestbed::Engine {
                engine,
                placement: Placement::InPath,
                local: Vec::new(),
            },
            None => OnTestbed::Router,
        }
    }

    fn open_flow<'a>(
        &self,
        client: &'a dyn Host,
        engine: Option<&'a dyn Middlebox>,
        (client_addr, server_addr): (SocketAddr, SocketAddr),
        _names: &FlowNames,
        _result: &mut TrialResult,
    ) -> (&'a dyn Host, Option<&'a ConnRecord>) {
        let proxy = engine_as::<SplitProxy>(engine)
            .or_else(|| engine_as::<SplitMux>(engine).and_then(|mux| mux.proxy(server_addr)));
        (
            client,
            proxy.and_then(|proxy| proxy.back_record(client_addr)),
        )
    }
}

/// Split proxies for some flows on a dumbbell's left router.
///
/// A [`SplitProxy`] relays one server address and takes interface 0 for
/// its clients' side and 1 for the server's, as on a chain. On the left
/// router interface 0 is the bottleneck and the clients are behind 1…n, so
/// this maps interfaces (the bottleneck is the servers' side, anything else
/// the clients'), gives each datagram to the proxy of its server, forwards
/// the rest, and routes what the proxies send by destination.
pub(crate) struct SplitMux {
    proxies: Vec<SplitProxy>,
    outbox: VecDeque<Transmit>,
}

/// A [`SplitProxy`]'s interfaces.
const CLIENT_SIDE: Interface = Interface(0);
const SERVER_SIDE: Interface = Interface(1);

impl SplitMux {
    fn new(proxies: Vec<SplitProxy>) -> SplitMux {
        SplitMux {
            proxies,
            outbox: VecDeque::new(),
        }
    }

    /// The proxy of the server at `server`.
    fn proxy(&self, server: SocketAddr) -> Option<&SplitProxy> {
        self.proxies.iter().find(|proxy| proxy.server() == server)
    }
}

impl Middlebox for SplitMux {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        let side = if from == Dumbbell::BOTTLENECK {
            SERVER_SIDE
        } else {
            CLIENT_SIDE
        };
        let mine = |proxy: &&mut SplitProxy| match side {
            CLIENT_SIDE => datagram.dst == proxy.server(),
            _ => datagram.src == proxy.server(),
        };
        match self.proxies.iter_mut().find(mine) {
            Some(proxy) => proxy.handle_datagram(now, side, datagram),
            None => self.outbox.push_back(Transmit::at(now, datagram)),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        for proxy in &mut self.proxies {
            // Only the proxies whose timers are due: an early call would
            // poll their connections at an instant they did not ask for.
            if proxy.poll_timeout().is_some_and(|at| at <= now) {
                proxy.handle_timeout(now);
            }
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        if let Some(transmit) = self.outbox.pop_front() {
            return Some(transmit);
        }
        for proxy in &mut self.proxies {
            if let Some(transmit) = proxy.poll_transmit(now) {
                // The left router's routes know every client and send
                // everything else over the bottleneck.
                return Some(Transmit::at(transmit.at, transmit.datagram));
            }
        }
        None
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.proxies
            .iter_mut()
            .filter_map(|proxy| proxy.poll_timeout())
            .min()
    }
}
