//! A QUIC endpoint to embed in another engine: a middlebox or a host
//! wrapper that runs QUIC connections of its own (the tunnel's client and
//! server), with its applications reachable between inputs.

use crate::app::App;
use crate::config::QuicConfig;
use crate::endpoint::{Core, HandshakeLimits};
use crate::metrics::ConnRecord;
use crate::setup::EndpointSetup;
use netsim::{Datagram, Time};
use std::net::SocketAddr;

/// A QUIC endpoint (noq-proto, real TLS 1.3) as a sans-IO part of another
/// engine: datagrams in with [`EmbeddedEndpoint::handle_datagram`], out
/// with [`EmbeddedEndpoint::poll_transmit`], timers through
/// [`EmbeddedEndpoint::poll_timeout`], exactly like the endpoint hosts.
///
/// The owner reaches the connections' applications between inputs
/// ([`EmbeddedEndpoint::apps_mut`]) to hand them work, then calls
/// [`EmbeddedEndpoint::drive`] so that they act on it. Applications are
/// driven after every input and after every packet sent, so one that reads
/// [`crate::Session::datagrams_sent`] sees each packet's datagrams.
pub struct EmbeddedEndpoint<A: App> {
    core: Core<A>,
    setup: EndpointSetup,
    config: QuicConfig,
    local: SocketAddr,
    accepting: bool,
}

impl<A: App> EmbeddedEndpoint<A> {
    /// An endpoint at `local`. Its random streams derive from the seed and
    /// `label`, which must be unique in the run.
    pub fn new(config: QuicConfig, local: SocketAddr, label: &str) -> EmbeddedEndpoint<A> {
        let setup = EndpointSetup::new(&config, label);
        EmbeddedEndpoint {
            core: Core::new(&setup, local, config.sample_interval),
            setup,
            config,
            local,
            accepting: false,
        }
    }

    /// Accepts incoming connections (with the test certificate).
    pub fn listen(&mut self) {
        let gauge = self.setup.gauge();
        self.core
            .set_server_config(self.setup.server_config(&self.config, &gauge));
        self.accepting = true;
    }

    /// Bounds incoming handshakes ([`HandshakeLimits`]): Retry beyond a
    /// number of unvalidated ones, a deadline for each. Connections whose
    /// handshake never completed are then forgotten (no application, no
    /// record) once drained or given up.
    pub fn limit_handshakes(&mut self, limits: HandshakeLimits) {
        self.core.limit_handshakes(limits);
    }

    /// Handshakes under way from addresses not validated by a Retry.
    pub fn unvalidated_handshakes(&self) -> usize {
        self.core.unvalidated_handshakes()
    }

    /// How many times a connection was processed (its application driven,
    /// or its handshake given up) since the endpoint began: while it stays
    /// the same, no application has anything new for its owner.
    pub fn activity(&self) -> u64 {
        self.core.activity()
    }

    /// The connections closed (or given up) since the last call, by the
    /// number [`EmbeddedEndpoint::take_accepted`] gave them.
    pub fn take_closed(&mut self) -> Vec<u64> {
        self.core.take_closed()
    }

    /// The number of the connection the last datagram created, if it
    /// created one (an application `accept` made may be dropped unused:
    /// the Initial failed to authenticate).
    pub fn take_accepted(&mut self) -> Option<u64> {
        self.core.take_accepted()
    }

    /// The application of connection `id`, if it is still kept.
    pub fn app_mut(&mut self, id: u64) -> Option<&mut A> {
        self.core.conn_mut(id).map(|c| &mut c.app)
    }

    /// The applications with their connections' numbers, mutably.
    pub fn apps_by_id_mut(&mut self) -> impl Iterator<Item = (u64, &mut A)> + '_ {
        self.core.conns_by_seq_mut().map(|(id, c)| (id, &mut c.app))
    }

    /// The endpoint's address.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// Opens a connection to `remote` running `app` (it trusts only the
    /// pinned test certificate, as every endpoint here does).
    pub fn connect(
        &mut self,
        now: Time,
        remote: SocketAddr,
        app: A,
    ) -> Result<(), noq_proto::ConnectError> {
        self.core
            .connect_numbered(now, &self.setup, &self.config, 0, remote, app)
    }

    /// A datagram arrived. A new connection (if the endpoint listens) runs
    /// the application `accept` makes; `None` refuses it.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        datagram: Datagram,
        accept: &mut dyn FnMut() -> Option<A>,
    ) {
        let (setup, config, accepting) = (&self.setup, &self.config, self.accepting);
        let mut make = || {
            if !accepting {
                return None;
            }
            let app = accept()?;
            let gauge = setup.gauge();
            Some((setup.server_config(config, &gauge), gauge, app))
        };
        self.core.handle_datagram(now, datagram, &mut make);
    }

    /// Timers due by `now` fire.
    pub fn handle_timeout(&mut self, now: Time) {
        self.core.handle_timeout(now);
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.core.poll_transmit(now)
    }

    /// The endpoint's next timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.core.poll_timeout()
    }

    /// Drives every application now (after the owner gave them work).
    pub fn drive(&mut self, now: Time) {
        self.core.drive(now);
    }

    /// The applications, in order of their connections' creation.
    pub fn apps(&self) -> impl Iterator<Item = &A> + '_ {
        self.core.conns().map(|c| &c.app)
    }

    /// The applications still driven (their connections neither closed
    /// nor drained): only these act on a wake-up.
    pub fn live_apps(&self) -> impl Iterator<Item = &A> + '_ {
        self.core.live_conns().map(|c| &c.app)
    }

    /// The applications, mutably.
    pub fn apps_mut(&mut self) -> impl Iterator<Item = &mut A> + '_ {
        self.core.conns_mut().map(|c| &mut c.app)
    }

    /// What each connection recorded, in order of creation.
    pub fn records(&self) -> impl Iterator<Item = &ConnRecord> + '_ {
        self.core.conns().map(|c| &c.record)
    }

    /// Closes every connection cleanly.
    pub fn close_all(&mut self, now: Time) {
        self.core.close_all(now);
    }

    /// Whether every connection is closed and everything queued was sent.
    pub fn all_closed(&self) -> bool {
        self.core.all_closed()
    }
}
