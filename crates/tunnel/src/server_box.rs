//! The tunnel server as a middle-node engine ([`netsim::Middlebox`]): its
//! QUIC endpoint listens on the server's address, each accepted
//! connection runs a [`ServerApp`], each tunnel has a target-facing UDP
//! port on the server's IP, and everything else that reaches the node is
//! forwarded unchanged (the node still routes).

use crate::limits::{ByteBudget, ConnectionSlots, PortBlocks};
use crate::server::{ServerApp, ServerSample, ServerShared, ServerStats};
use netsim::{Datagram, Interface, Middlebox, Time, Transmit};
use quic::{ConnRecord, EmbeddedEndpoint, QuicConfig};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// How the tunnel server is set up.
#[derive(Clone, Debug)]
pub struct TunnelServerConfig {
    /// Where it listens (its IP is also the target-facing sockets').
    pub addr: SocketAddr,
    /// The outer QUIC configuration (its controller is the tunnel's
    /// congestion control; ALPN `h3`).
    pub quic: QuicConfig,
    /// What the connections share: settings, template, allow-list.
    pub shared: ServerShared,
    /// The first target-facing port.
    pub first_port: u16,
}

/// The tunnel server engine.
pub struct TunnelServer {
    config: TunnelServerConfig,
    endpoint: EmbeddedEndpoint<ServerApp>,
    /// Target-facing port → connection (the endpoint's number for it).
    ports: BTreeMap<u16, u64>,
    /// The live connections (neither closed nor given up).
    live: BTreeSet<u64>,
    /// The target-facing port blocks.
    blocks: Arc<Mutex<PortBlocks>>,
    /// What all connections hold, against the total limit.
    budget: Arc<ByteBudget>,
    /// The connections served, against the limit (shared with the
    /// server's other workers, if it has any).
    slots: Arc<ConnectionSlots>,
    out: VecDeque<Transmit>,
    /// Datagrams forwarded unchanged (not for the tunnel server).
    passed: u64,
    /// The endpoint's activity when the applications' output was last
    /// collected: while it stays the same, they have nothing new.
    collected: Option<u64>,
}

impl TunnelServer {
    /// A server listening on `config.addr`.
    pub fn new(config: TunnelServerConfig) -> TunnelServer {
        let slots = ConnectionSlots::shared(config.shared.limits.max_connections);
        TunnelServer::sharing(config, ByteBudget::shared(), slots, u16::MAX)
    }

    /// One worker of a server: its connections' bytes count in `budget`
    /// and their number in `slots`, both shared with the other workers;
    /// it gives its connections at most `port_blocks` blocks of ports from
    /// `config.first_port` on.
    pub fn sharing(
        config: TunnelServerConfig,
        budget: Arc<ByteBudget>,
        slots: Arc<ConnectionSlots>,
        port_blocks: u16,
    ) -> TunnelServer {
        let label = format!("tunnel-server/{}", config.addr);
        let quic = config.shared.limits.bound_windows(config.quic.clone());
        let mut endpoint = EmbeddedEndpoint::new(quic, config.addr, &label);
        endpoint.listen();
        endpoint.limit_handshakes(config.shared.limits.handshakes);
        let width = config.shared.limits.max_tunnels;
        let blocks = PortBlocks::shared_range(config.first_port, width, port_blocks);
        TunnelServer {
            config,
            endpoint,
            ports: BTreeMap::new(),
            live: BTreeSet::new(),
            blocks,
            budget,
            slots,
            out: VecDeque::new(),
            passed: 0,
            collected: None,
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.config.addr
    }

    /// Each connection's counters, in order of arrival.
    pub fn stats(&self) -> Vec<ServerStats> {
        self.endpoint.apps().map(ServerApp::stats).collect()
    }

    /// Why each connection was closed by the server, if it was (a peer
    /// that broke HTTP/3), in order of arrival.
    pub fn errors(&self) -> Vec<Option<String>> {
        self.endpoint
            .apps()
            .map(|app| app.error().map(str::to_string))
            .collect()
    }

    /// The samples of its sending state of the connection from a tunnel
    /// client on `client` (the first, if several), if any came.
    pub fn samples_from(&self, client: IpAddr) -> Option<&[ServerSample]> {
        self.endpoint
            .apps()
            .find(|app| app.client().is_some_and(|addr| addr.ip() == client))
            .map(ServerApp::samples)
    }

    /// Each connection's record.
    pub fn records(&self) -> impl Iterator<Item = &ConnRecord> + '_ {
        self.endpoint.records()
    }

    /// Datagrams the node forwarded without the tunnel.
    pub fn passed(&self) -> u64 {
        self.passed
    }

    /// Connections served now (neither closed nor given up).
    pub fn live_connections(&self) -> usize {
        self.live.len()
    }

    /// Handshakes under way from addresses not validated by a Retry.
    pub fn unvalidated_handshakes(&self) -> usize {
        self.endpoint.unvalidated_handshakes()
    }

    /// Bytes from targets the connections hold now, and the most they held
    /// at once (the accounted memory [`crate::ServerLimits`] bounds).
    pub fn held_bytes(&self) -> (usize, usize) {
        (self.budget.held(), self.budget.peak())
    }

    /// The server's handle on the connection limit (shared by its
    /// workers).
    pub fn connection_slots(&self) -> &Arc<ConnectionSlots> {
        &self.slots
    }

    fn accept(&mut self, now: Time, datagram: Datagram) {
        let shared = &self.config.shared;
        let (budget, blocks, slots) = (&self.budget, &self.blocks, &self.slots);
        let mut reserved = false;
        let mut accept = || {
            if !slots.take() {
                return None;
            }
            reserved = true;
            let app = ServerApp::new(shared.clone(), []);
            Some(
                app.with_budget(budget.clone())
                    .with_port_blocks(blocks.clone()),
            )
        };
        self.endpoint.handle_datagram(now, datagram, &mut accept);
        match self.endpoint.take_accepted() {
            Some(id) => {
                self.live.insert(id);
            }
            // The Initial failed: the slot taken for it is free again.
            None if reserved => self.slots.give_back(),
            None => {}
        }
    }

    /// Frees what closed connections held: their applications' tunnels and
    /// queues, their ports.
    fn release_closed(&mut self) {
        for id in self.endpoint.take_closed() {
            if self.live.remove(&id) {
                self.slots.give_back();
            }
            if let Some(app) = self.endpoint.app_mut(id) {
                for (port, _) in app.tunnel_ports() {
                    self.ports.remove(&port);
                }
                app.release();
            }
        }
    }

    /// Collects what the applications produced (nothing when no
    /// connection was processed since the last time: under a flood of
    /// Initials answered statelessly, most datagrams touch none).
    fn collect(&mut self, now: Time) {
        let activity = Some(self.endpoint.activity());
        if self.collected == activity {
            return;
        }
        self.collected = activity;
        let ip = self.config.addr.ip();
        for (id, app) in self.endpoint.apps_by_id_mut() {
            for (port, _) in app.tunnel_ports() {
                self.ports.insert(port, id);
            }
            for (port, target, payload) in app.take_to_targets() {
                let datagram = Datagram::new(SocketAddr::new(ip, port), target, payload);
                self.out.push_back(Transmit::at(now, datagram));
            }
            if let (Some(client), packets) = app.take_forwarded() {
                for payload in packets {
                    let datagram = Datagram::new(self.config.addr, client, payload);
                    self.out.push_back(Transmit::at(now, datagram));
                }
            }
        }
        self.release_closed();
    }
}

impl Middlebox for TunnelServer {
    fn handle_datagram(&mut self, now: Time, _from: Interface, datagram: Datagram) {
        let addr = self.config.addr;
        if datagram.dst == addr {
            let forwarded = self
                .endpoint
                .apps_mut()
                .find(|app| app.is_forwarded(datagram.src, &datagram.payload));
            match forwarded {
                Some(app) => {
                    app.forwarded_from_client(&datagram.payload);
                    self.collected = None;
                }
                None => self.accept(now, datagram),
            }
        } else if datagram.dst.ip() == addr.ip()
            && let Some(&id) = self.ports.get(&datagram.dst.port())
        {
            if let Some(app) = self.endpoint.app_mut(id) {
                app.from_target(datagram.dst.port(), datagram.src, datagram.payload);
            }
            self.endpoint.drive(now);
        } else if datagram.dst.ip() != addr.ip() {
            self.passed += 1;
            self.out.push_back(Transmit::at(now, datagram));
        }
        self.collect(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.endpoint.poll_timeout().is_some_and(|at| at <= now) {
            self.endpoint.handle_timeout(now);
        }
        // Only live connections' applications: a closed one is never
        // driven again, so its stale wake-up would fire forever.
        if self
            .endpoint
            .live_apps()
            .filter_map(ServerApp::next_wakeup)
            .any(|at| at <= now)
        {
            self.endpoint.drive(now);
        }
        self.collect(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        if let Some(transmit) = self.out.pop_front() {
            return Some(transmit);
        }
        let datagram = self.endpoint.poll_transmit(now)?;
        self.collect(now);
        Some(Transmit::at(now, datagram))
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let apps = self
            .endpoint
            .live_apps()
            .filter_map(ServerApp::next_wakeup)
            .min();
        self.endpoint.poll_timeout().into_iter().chain(apps).min()
    }
}

/// The tunnel server as a host of its own ([`netsim::Host`]) rather than a
/// middle node: on real UDP sockets (`pepkit tunnel-server`, through
/// `emu::HostDriver`) it listens on its address and sends to targets from
/// ports of its own, and sees only what is addressed to it.
pub struct ServerHost {
    server: TunnelServer,
    /// Datagrams due later (the engine sends at once today).
    held: VecDeque<Transmit>,
}

impl ServerHost {
    /// Wraps `server`.
    pub fn new(server: TunnelServer) -> ServerHost {
        ServerHost {
            server,
            held: VecDeque::new(),
        }
    }

    /// The engine.
    pub fn server(&self) -> &TunnelServer {
        &self.server
    }
}

impl netsim::Host for ServerHost {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.server.handle_datagram(now, Interface(0), datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.server.poll_timeout().is_some_and(|at| at <= now) {
            self.server.handle_timeout(now);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if self.held.front().is_some_and(|t| t.at <= now) {
            return self.held.pop_front().map(|t| t.datagram);
        }
        while let Some(transmit) = self.server.poll_transmit(now) {
            if transmit.at <= now {
                return Some(transmit.datagram);
            }
            self.held.push_back(transmit);
        }
        None
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let held = self.held.front().map(|t| t.at);
        self.server.poll_timeout().into_iter().chain(held).min()
    }

    fn is_finished(&self) -> bool {
        true
    }
}
