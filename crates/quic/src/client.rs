//! The client endpoint as a netsim host: it connects at its start time and
//! runs one application on the connection.

use crate::app::App;
use crate::config::QuicConfig;
use crate::endpoint::Core;
use crate::metrics::ConnRecord;
use crate::setup::EndpointSetup;
use netsim::{Datagram, Host, Time};
use std::net::SocketAddr;

/// A QUIC client running application `A` on one connection to a server.
///
/// The connection starts at the host's start time (its first call). When
/// the application is done, the client closes the connection, sends the
/// CONNECTION_CLOSE, and reports itself finished.
///
/// # Panics
///
/// At its start, if noq-proto refuses to open the connection (an
/// unspecified remote address or port 0): a broken scenario.
pub struct QuicClient<A: App> {
    core: Core<A>,
    setup: EndpointSetup,
    config: QuicConfig,
    remote: SocketAddr,
    pending: Option<A>,
    closing: bool,
    flushed: bool,
}

impl<A: App> QuicClient<A> {
    /// A client at `local` that will connect to `remote` and run `app`.
    pub fn new(config: QuicConfig, local: SocketAddr, remote: SocketAddr, app: A) -> QuicClient<A> {
        let setup = EndpointSetup::new(&config, &format!("quic/{local}"));
        QuicClient {
            core: Core::new(&setup, local, config.sample_interval),
            setup,
            config,
            remote,
            pending: Some(app),
            closing: false,
            flushed: false,
        }
    }

    /// The application (for its results).
    pub fn app(&self) -> Option<&A> {
        self.core.conns().next().map(|c| &c.app)
    }

    /// What the client recorded about its connection, once it started.
    pub fn record(&self) -> Option<&ConnRecord> {
        self.core.conns().next().map(|c| &c.record)
    }

    fn start(&mut self, now: Time) {
        let Some(app) = self.pending.take() else {
            return;
        };
        if let Err(error) =
            self.core
                .connect_numbered(now, &self.setup, &self.config, 0, self.remote, app)
        {
            // A bad remote address is a scenario error; there is nothing to run.
            panic!("cannot connect to {}: {error}", self.remote);
        }
    }

    fn close_if_done(&mut self, now: Time) {
        if self.closing {
            return;
        }
        if self.core.conns().next().is_some_and(|c| c.app.is_done()) {
            self.closing = true;
            self.core.close_all(now);
        }
    }
}

impl<A: App> Host for QuicClient<A> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.start(now);
        self.core.handle_datagram(now, datagram, &mut || None);
        self.close_if_done(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.start(now);
        self.core.handle_timeout(now);
        self.close_if_done(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.start(now);
        let datagram = self.core.poll_transmit(now);
        if datagram.is_none() && self.closing {
            self.flushed = self.core.all_closed();
        }
        datagram
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        if self.pending.is_some() {
            // Not started yet: the simulator calls us at our start time.
            return Some(Time::ZERO);
        }
        if self.flushed {
            return None;
        }
        self.core.poll_timeout()
    }

    fn is_finished(&self) -> bool {
        self.flushed
    }
}
