//! The server endpoint as a netsim host: it accepts every connection and
//! runs a fresh application on each.

use crate::app::AppFactory;
use crate::config::QuicConfig;
use crate::endpoint::Core;
use crate::metrics::ConnRecord;
use crate::probe::InFlightGauge;
use crate::setup::EndpointSetup;
use netsim::{Datagram, Host, Time};
use std::net::SocketAddr;

/// A QUIC server that accepts every connection and runs the application
/// `F` makes on it. It is passive: it always reports itself finished, so a
/// run ends when its clients are done.
pub struct QuicServer<F: AppFactory> {
    core: Core<F::App>,
    setup: EndpointSetup,
    config: QuicConfig,
    factory: F,
}

impl<F: AppFactory> QuicServer<F> {
    /// A server at `local` running `factory`'s applications.
    pub fn new(config: QuicConfig, local: SocketAddr, factory: F) -> QuicServer<F> {
        let setup = EndpointSetup::new(&config, &format!("quic/{local}"));
        let mut core = Core::new(&setup, local, config.sample_interval);
        core.set_server_config(setup.server_config(&config, &InFlightGauge::default()));
        QuicServer {
            core,
            setup,
            config,
            factory,
        }
    }

    /// The applications of the accepted connections, in order of arrival.
    pub fn apps(&self) -> impl Iterator<Item = &F::App> + '_ {
        self.core.conns().map(|c| &c.app)
    }

    /// What the server recorded about each connection, in order of arrival.
    pub fn records(&self) -> impl Iterator<Item = &ConnRecord> + '_ {
        self.core.conns().map(|c| &c.record)
    }
}

impl<F: AppFactory> Host for QuicServer<F> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        let (setup, config, factory) = (&self.setup, &self.config, &mut self.factory);
        let mut accept = || {
            let gauge = setup.gauge();
            let server_config = setup.server_config(config, &gauge);
            Some((server_config, gauge, factory.make()))
        };
        self.core.handle_datagram(now, datagram, &mut accept);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.core.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.core.poll_transmit(now)
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.core.poll_timeout()
    }

    fn is_finished(&self) -> bool {
        true
    }
}
