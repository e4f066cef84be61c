//! Short flows that each open a connection of their own: at each arrival
//! time the client connects anew and fetches one response, so every flow
//! starts with a fresh congestion controller in slow start, as the short
//! TCP flows of the Proteus paper's §3 do (a new connection per flow).
//! The request/response exchange is the short-flows workload's
//! ([`ShortFlowsClient`] with one request on the new connection).
//!
//! A flow's completion time runs from its arrival (when its connection
//! starts, the handshake included) to the client reading the last
//! response byte; each connection is closed when its flow is done.

use crate::config::QuicConfig;
use crate::endpoint::Core;
use crate::setup::EndpointSetup;
use crate::short_flows::ShortFlowsClient;
use netsim::{Datagram, Host, Time};
use std::net::SocketAddr;
use std::time::Duration;

/// One flow: when it arrives after the host's start, and its response
/// size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Its arrival, from the host's start.
    pub offset: Duration,
    /// Its response, bytes.
    pub response_bytes: u64,
}

/// A client host that opens one connection per flow (see the module).
///
/// # Panics
///
/// At an arrival, if noq-proto refuses to open the connection (an
/// unspecified remote address or port 0): a broken scenario.
pub struct ConnectionArrivals {
    core: Core<ShortFlowsClient>,
    setup: EndpointSetup,
    config: QuicConfig,
    remote: SocketAddr,
    request_bytes: u64,
    flows: Vec<Arrival>,
    started: Option<Time>,
    /// Flows whose connection has started.
    issued: usize,
    flushed: bool,
}

impl ConnectionArrivals {
    /// A client at `local` that will fetch `flows` (arrival offsets
    /// non-decreasing) from `remote`, each with a `request_bytes` request.
    pub fn new(
        config: QuicConfig,
        local: SocketAddr,
        remote: SocketAddr,
        request_bytes: u64,
        flows: Vec<Arrival>,
    ) -> ConnectionArrivals {
        let setup = EndpointSetup::new(&config, &format!("quic/{local}"));
        ConnectionArrivals {
            core: Core::new(&setup, local, config.sample_interval),
            setup,
            config,
            remote,
            request_bytes,
            flows,
            started: None,
            issued: 0,
            flushed: false,
        }
    }

    /// The flows asked for.
    pub fn flows(&self) -> &[Arrival] {
        &self.flows
    }

    /// Each completed flow's completion time (from its arrival), in
    /// arrival order, with its index; flows not completed are left out.
    pub fn completion_times(&self) -> Vec<(usize, Duration)> {
        let Some(started) = self.started else {
            return Vec::new();
        };
        self.core
            .conns()
            .enumerate()
            .filter_map(|(index, conn)| {
                let flow = conn.app.flows().first()?;
                let arrival = self.flows.get(index)?;
                (flow.response_bytes == arrival.response_bytes)
                    .then(|| (index, flow.completed - (started + arrival.offset)))
            })
            .collect()
    }

    /// Whether a connection closed with an error, and the first such error.
    pub fn first_error(&self) -> Option<&str> {
        self.core
            .conns()
            .find_map(|conn| conn.record.error.as_deref())
    }

    fn next_arrival(&self) -> Option<Time> {
        Some(self.started? + self.flows.get(self.issued)?.offset)
    }

    fn issue(&mut self, now: Time) {
        let started = *self.started.get_or_insert(now);
        while let Some(flow) = self.flows.get(self.issued) {
            if started + flow.offset > now {
                break;
            }
            let app = ShortFlowsClient::sequential(1, self.request_bytes, flow.response_bytes);
            let n = self.issued as u64;
            if let Err(error) =
                self.core
                    .connect_numbered(now, &self.setup, &self.config, n, self.remote, app)
            {
                panic!("cannot connect to {}: {error}", self.remote);
            }
            self.issued += 1;
        }
    }
}

impl Host for ConnectionArrivals {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.issue(now);
        self.core.handle_datagram(now, datagram, &mut || None);
        self.core.close_done(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.issue(now);
        self.core.handle_timeout(now);
        self.core.close_done(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.issue(now);
        let datagram = self.core.poll_transmit(now);
        if datagram.is_none() && self.issued == self.flows.len() {
            self.flushed = self.core.all_closed();
        }
        datagram
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        if self.started.is_none() {
            // Not started yet: the simulator calls us at our start time.
            return Some(Time::ZERO);
        }
        if self.flushed {
            return None;
        }
        match (self.core.poll_timeout(), self.next_arrival()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_finished(&self) -> bool {
        self.flushed
    }
}
