//! The tunnel server as a middle-node engine ([`netsim::Middlebox`]): its
//! QUIC endpoint listens on the server's address, each accepted
//! connection runs a [`ServerApp`], each tunnel has a target-facing UDP
//! port on the server's IP, and everything else that reaches the node is
//! forwarded unchanged (the node still routes).

use crate::server::{ServerApp, ServerSample, ServerShared, ServerStats};
use netsim::{Datagram, Interface, Middlebox, Time, Transmit};
use quic::{ConnRecord, EmbeddedEndpoint, QuicConfig};
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

/// Target-facing ports given to each connection.
const PORTS_PER_CONNECTION: u16 = 16;
/// The most connections a server accepts.
const MAX_CONNECTIONS: usize = 1024;

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
    /// Target-facing port → connection index.
    ports: BTreeMap<u16, usize>,
    connections: usize,
    out: VecDeque<Transmit>,
    /// Datagrams forwarded unchanged (not for the tunnel server).
    passed: u64,
}

impl TunnelServer {
    /// A server listening on `config.addr`.
    pub fn new(config: TunnelServerConfig) -> TunnelServer {
        let label = format!("tunnel-server/{}", config.addr);
        let mut endpoint = EmbeddedEndpoint::new(config.quic.clone(), config.addr, &label);
        endpoint.listen();
        TunnelServer {
            config,
            endpoint,
            ports: BTreeMap::new(),
            connections: 0,
            out: VecDeque::new(),
            passed: 0,
        }
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

    fn accept(&mut self, now: Time, datagram: Datagram) {
        let (shared, first_port) = (&self.config.shared, self.config.first_port);
        let connections = &mut self.connections;
        let mut accept = || {
            if *connections >= MAX_CONNECTIONS {
                return None;
            }
            let base = first_port.checked_add(
                u16::try_from(*connections)
                    .ok()?
                    .checked_mul(PORTS_PER_CONNECTION)?,
            )?;
            *connections += 1;
            Some(ServerApp::new(
                shared.clone(),
                base..base + PORTS_PER_CONNECTION,
            ))
        };
        self.endpoint.handle_datagram(now, datagram, &mut accept);
    }

    /// Collects what the applications produced.
    fn collect(&mut self, now: Time) {
        let ip = self.config.addr.ip();
        for (index, app) in self.endpoint.apps_mut().enumerate() {
            for (port, _) in app.tunnel_ports() {
                self.ports.insert(port, index);
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
                Some(app) => app.forwarded_from_client(&datagram.payload),
                None => self.accept(now, datagram),
            }
        } else if datagram.dst.ip() == addr.ip()
            && let Some(&index) = self.ports.get(&datagram.dst.port())
        {
            if let Some(app) = self.endpoint.apps_mut().nth(index) {
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
