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
//!
//! In a scenario the proxy relays the flows' servers. On a router
//! (`pepkit middle split`) it relays every server a client opens a QUIC
//! connection to (a long-header Initial through the clients' side,
//! interface 0), up to `max_servers` servers and `max_clients` clients
//! each, forgetting a server after `idle_timeout` without a datagram;
//! what it does not relay it forwards unchanged. Its legs present
//! pepkit's test certificate, which our clients trust: it is a research
//! tool, not a deployable proxy.

use super::settings::settings;
use super::{
    Facts, OnTestbed, Placement, Problem, System, Topology, TrialSetup, engine_as, positive,
    quic_with, wrong_middle,
};
use crate::outcome::{FlowNames, TrialResult};
use crate::units::Span;
use netsim::{Datagram, Dumbbell, Host, Interface, Middlebox, Time, Transmit};
use quic::{ConnRecord, QuicConfig, SplitProxy};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

settings! {
    /// The split proxy's settings.
    pub struct Split {
        /// The server-facing leg's controller (default: the client's in a
        /// scenario, CUBIC on a router).
        controller: cc::Controller; deserialize_with = "crate::shorthand::tagged_option",
        /// On a router: servers relayed at once; connections to more are
        /// forwarded unchanged.
        max_servers: usize = 64,
        /// On a router: clients relayed per server; more are forwarded
        /// unchanged.
        max_clients: usize = 256,
        /// On a router: a server without a datagram for this long is
        /// forgotten, with its connections.
        idle_timeout: Span = Span(Duration::from_secs(120)),
    }
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

    fn check_settings(&self) -> Result<(), Problem> {
        positive("max_servers", self.max_servers())?;
        positive("max_clients", self.max_clients())
    }

    fn serves(&self) -> bool {
        true
    }

    fn middlebox(&self, trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        if trial.router.is_some() {
            let back = self.controller.clone().unwrap_or_default();
            return Some(Box::new(SplitMux::on_router(OnDemand {
                front: quic_with(trial.quic, &cc::Controller::default(), trial.seed),
                back: quic_with(trial.quic, &back, trial.seed),
                max_servers: self.max_servers(),
                max_clients: self.max_clients(),
                idle_timeout: self.idle_timeout().0,
            })));
        }
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
            Topology::Dumbbell => Some(Box::new(SplitMux::on_dumbbell(proxies.collect()))),
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

    fn stats(&self, engine: &dyn Middlebox, _now: Time) -> serde_json::Value {
        let Some(mux) = engine_as::<SplitMux>(Some(engine)) else {
            return serde_json::Value::Null;
        };
        let relayed: Vec<_> = mux.proxies.iter().flat_map(SplitProxy::stats).collect();
        serde_json::json!({
            "servers": mux.proxies.len(),
            "connections": relayed.len(),
            "up_bytes": relayed.iter().map(|r| r.up_bytes).sum::<u64>(),
            "down_bytes": relayed.iter().map(|r| r.down_bytes).sum::<u64>(),
        })
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

/// Split proxies for some flows on a dumbbell's left router, or for every
/// server clients open connections to on an operator's router.
///
/// A [`SplitProxy`] relays one server address and takes interface 0 for
/// its clients' side and 1 for the server's, as on a chain. On the left
/// router interface 0 is the bottleneck and the clients are behind 1…n, so
/// this maps interfaces (the bottleneck is the servers' side, anything else
/// the clients'); on an operator's router interface 0 faces the clients.
/// It gives each datagram to the proxy of its server, forwards the rest,
/// and routes what the proxies send by destination.
pub(crate) struct SplitMux {
    proxies: Vec<SplitProxy>,
    /// Per proxy: when it last saw a datagram (on a router).
    active: Vec<Time>,
    /// The interface on the servers' side of the node, or `None` when
    /// every interface but 0 is.
    servers_side: Option<Interface>,
    /// How proxies are made on a router (`None`: the scenario's only).
    on_demand: Option<OnDemand>,
    outbox: VecDeque<Transmit>,
}

/// How a router's split proxy makes a proxy for each new server.
pub(crate) struct OnDemand {
    front: QuicConfig,
    back: QuicConfig,
    max_servers: usize,
    max_clients: usize,
    idle_timeout: Duration,
}

/// A [`SplitProxy`]'s interfaces.
const CLIENT_SIDE: Interface = Interface(0);
const SERVER_SIDE: Interface = Interface(1);

/// Whether `payload` opens a QUIC connection: a long header (first bit
/// set), packet type Initial (QUIC v1) in a datagram padded to 1200 bytes
/// as RFC 9000 §14.1 requires.
fn opens_connection(payload: &[u8]) -> bool {
    payload.len() >= 1200 && payload.first().is_some_and(|b| b & 0xb0 == 0x80)
}

impl SplitMux {
    fn on_dumbbell(proxies: Vec<SplitProxy>) -> SplitMux {
        SplitMux {
            active: vec![Time::ZERO; proxies.len()],
            proxies,
            servers_side: Some(Dumbbell::BOTTLENECK),
            on_demand: None,
            outbox: VecDeque::new(),
        }
    }

    fn on_router(on_demand: OnDemand) -> SplitMux {
        SplitMux {
            proxies: Vec::new(),
            active: Vec::new(),
            servers_side: None,
            on_demand: Some(on_demand),
            outbox: VecDeque::new(),
        }
    }

    /// The proxy of the server at `server`.
    fn proxy(&self, server: SocketAddr) -> Option<&SplitProxy> {
        self.proxies.iter().find(|proxy| proxy.server() == server)
    }

    /// The index of the proxy that takes `datagram` from `side`, making one
    /// on a router for a client that opens a connection to a new server.
    fn proxy_for(&mut self, now: Time, side: Interface, datagram: &Datagram) -> Option<usize> {
        let mine = |proxy: &SplitProxy| match side {
            CLIENT_SIDE => datagram.dst == proxy.server(),
            _ => datagram.src == proxy.server(),
        };
        let found = self.proxies.iter().position(mine);
        let Some(on_demand) = &self.on_demand else {
            return found;
        };
        let opens = side == CLIENT_SIDE && opens_connection(&datagram.payload);
        match found {
            // A proxy at its bound of clients forwards a new one's packets.
            Some(i) if side == CLIENT_SIDE && !self.proxies[i].relays_for(datagram.src) => {
                (opens && self.proxies[i].clients() < on_demand.max_clients).then_some(i)
            }
            Some(i) => Some(i),
            None if opens => {
                let (front, back) = (on_demand.front.clone(), on_demand.back.clone());
                let max_servers = on_demand.max_servers;
                self.forget_idle(now);
                if self.proxies.len() >= max_servers {
                    return None;
                }
                self.proxies
                    .push(SplitProxy::new(front, back, datagram.dst));
                self.active.push(now);
                Some(self.proxies.len() - 1)
            }
            None => None,
        }
    }

    /// On a router: drops the proxies idle for longer than the timeout.
    fn forget_idle(&mut self, now: Time) {
        let Some(on_demand) = &self.on_demand else {
            return;
        };
        let timeout = on_demand.idle_timeout;
        let mut i = 0;
        while i < self.proxies.len() {
            if now.saturating_duration_since(self.active[i]) > timeout {
                self.proxies.swap_remove(i);
                self.active.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }
}

impl Middlebox for SplitMux {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        let from_servers = match self.servers_side {
            Some(servers) => from == servers,
            None => from != CLIENT_SIDE,
        };
        let side = if from_servers {
            SERVER_SIDE
        } else {
            CLIENT_SIDE
        };
        match self.proxy_for(now, side, &datagram) {
            Some(i) => {
                self.active[i] = now;
                self.proxies[i].handle_datagram(now, side, datagram);
            }
            None => self.outbox.push_back(Transmit::at(now, datagram)),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        self.forget_idle(now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use netsim::Seed;

    fn datagram(dst: &str, payload: Vec<u8>) -> Datagram {
        Datagram::new(
            "10.0.2.10:5000".parse().unwrap(),
            dst.parse().unwrap(),
            payload,
        )
    }

    /// A client's first datagram: a long header, type Initial, padded.
    fn initial(dst: &str) -> Datagram {
        let mut payload = vec![0u8; 1200];
        payload[0] = 0xc0;
        datagram(dst, payload)
    }

    #[test]
    fn a_routers_proxies_are_made_per_server_bounded_and_forgotten_when_idle() {
        let quic = QuicConfig::new(Seed::new(1));
        let mut mux = SplitMux::on_router(OnDemand {
            front: quic.clone(),
            back: quic,
            max_servers: 1,
            max_clients: 4,
            idle_timeout: Duration::from_secs(10),
        });
        let now = Time::ZERO;
        // What does not open a QUIC connection passes unchanged.
        let plain = datagram("10.0.1.10:53", b"not quic".to_vec());
        mux.handle_datagram(now, CLIENT_SIDE, plain.clone());
        assert_eq!(mux.poll_transmit(now).map(|t| t.datagram), Some(plain));
        assert!(mux.proxies.is_empty());
        // An Initial to a server makes its proxy; one to a second server,
        // beyond the bound, passes unchanged.
        mux.handle_datagram(now, CLIENT_SIDE, initial("10.0.1.10:4433"));
        assert_eq!(mux.proxies.len(), 1);
        while mux.poll_transmit(now).is_some() {}
        let second = initial("10.0.1.11:4433");
        mux.handle_datagram(now, CLIENT_SIDE, second.clone());
        assert_eq!(mux.proxies.len(), 1);
        assert_eq!(mux.poll_transmit(now).map(|t| t.datagram), Some(second));
        // Idle past the timeout, the proxy is forgotten; the bound frees.
        let later = Time::ZERO + Duration::from_secs(11);
        mux.handle_timeout(later);
        assert!(mux.proxies.is_empty());
        mux.handle_datagram(later, CLIENT_SIDE, initial("10.0.1.11:4433"));
        assert_eq!(mux.proxies.len(), 1);
    }
}
