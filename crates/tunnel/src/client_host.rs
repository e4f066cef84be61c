//! The tunnel client beside a client application: a netsim [`Host`]
//! wrapper, like the Sidekick sender's, around any host (the QUIC client
//! of a workload). The application sends to its server as usual; the
//! wrapper takes those datagrams into the tunnel to the tunnel server and
//! hands what comes out of the tunnel back to the application with the
//! server as source, so the application cannot tell.

use crate::client::{ClientApp, ClientStats, TunnelState};
use crate::connect_udp::UriTemplate;
use crate::mode::TunnelSettings;
use crate::wire::feedback::Feedback;
use bytes::Bytes;
use netsim::{Datagram, Host, Time};
use quic::{CidLog, ConnRecord, DatagramChannel, EmbeddedEndpoint, QuicConfig};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// How the tunnel client is set up.
#[derive(Clone, Debug)]
pub struct TunnelClientConfig {
    /// The tunnel's settings (shared with the server).
    pub settings: TunnelSettings,
    /// The outer QUIC connection's configuration (its controller is the
    /// tunnel's congestion control; ALPN `h3`).
    pub quic: QuicConfig,
    /// The tunnel server's address.
    pub proxy: SocketAddr,
    /// The tunnel client's own UDP socket (the client's IP, another port).
    pub local: SocketAddr,
    /// The URI template.
    pub template: UriTemplate,
    /// Targets whose tunnels open before the application starts (a
    /// standing tunnel); others open on the first packet.
    pub targets: Vec<SocketAddr>,
    /// Where TECC feedback goes: the application endpoint's datagram
    /// channel, which sends it to the server as QUIC_INFO.
    pub feedback: Option<DatagramChannel>,
    /// The connection IDs the application's QUIC endpoint issues (MFT
    /// registers each with the proxy; the tunnel client, like the paper's,
    /// is integrated with the application's QUIC stack to learn them, since
    /// NEW_CONNECTION_ID frames are encrypted).
    pub client_cids: Option<CidLog>,
}

/// When the tunnel came up, for the setup delay (TECC Figure 14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetupTimes {
    /// The tunnel client started.
    pub started: Option<Time>,
    /// The tunnel connection's handshake completed.
    pub connected: Option<Time>,
    /// The first target's tunnel opened (and the application started).
    pub opened: Option<Time>,
}

/// A host with the tunnel client beside it.
pub struct TunnelClientHost<H: Host> {
    inner: H,
    config: TunnelClientConfig,
    endpoint: EmbeddedEndpoint<ClientApp>,
    started: bool,
    inner_started: bool,
    /// The application's address (learnt from what it sends).
    app_addr: Option<SocketAddr>,
    out: VecDeque<Datagram>,
    feedback_sent: u64,
    times: SetupTimes,
    cids_seen: usize,
}

impl<H: Host> TunnelClientHost<H> {
    /// Wraps `inner`.
    pub fn new(inner: H, config: TunnelClientConfig) -> TunnelClientHost<H> {
        let label = format!("tunnel-client/{}", config.local);
        let endpoint = EmbeddedEndpoint::new(config.quic.clone(), config.local, &label);
        TunnelClientHost {
            inner,
            config,
            endpoint,
            started: false,
            inner_started: false,
            app_addr: None,
            out: VecDeque::new(),
            feedback_sent: 0,
            times: SetupTimes::default(),
            cids_seen: 0,
        }
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The tunnel client's counters.
    pub fn stats(&self) -> ClientStats {
        self.endpoint
            .apps()
            .next()
            .map(ClientApp::stats)
            .unwrap_or_default()
    }

    /// The application of the tunnel connection, once it started.
    pub fn app_ref(&self) -> Option<&ClientApp> {
        self.endpoint.apps().next()
    }

    /// The tunnel connection's record.
    pub fn record(&self) -> Option<&ConnRecord> {
        self.endpoint.records().next()
    }

    /// When the tunnel came up.
    pub fn setup_times(&self) -> SetupTimes {
        SetupTimes {
            connected: self.record().and_then(|r| r.connected_at),
            ..self.times
        }
    }

    /// QUIC_INFO datagrams handed to the application endpoint.
    pub fn feedback_relayed(&self) -> u64 {
        self.feedback_sent
    }

    fn app(&mut self) -> Option<&mut ClientApp> {
        self.endpoint.apps_mut().next()
    }

    fn start(&mut self, now: Time) {
        if self.started {
            return;
        }
        self.started = true;
        self.times.started = Some(now);
        let mut app = ClientApp::new(
            self.config.settings.clone(),
            self.config.template.clone(),
            self.config.proxy.to_string(),
        );
        for &target in &self.config.targets {
            app.open(target);
        }
        if let Err(error) = self.endpoint.connect(now, self.config.proxy, app) {
            // A bad proxy address is a scenario error.
            panic!(
                "cannot connect to the tunnel server {}: {error}",
                self.config.proxy
            );
        }
        if self.config.targets.is_empty() {
            self.inner_started = true;
        }
    }

    /// Moves what the tunnel produced to the application and the wire.
    fn pump(&mut self, now: Time) {
        let Some(app) = self.endpoint.apps_mut().next() else {
            return;
        };
        if let Some(log) = &self.config.client_cids {
            for cid in log.since(self.cids_seen) {
                self.cids_seen += 1;
                app.register_client_cid(&cid);
            }
        }
        let inbound = app.take_inbound();
        let forwarded = app.take_forwarded();
        let feedback: Vec<Feedback> = app.take_feedback();
        let open = self
            .config
            .targets
            .first()
            .and_then(|&t| app.state(t))
            .is_some_and(|state| matches!(state, TunnelState::Open(_)));
        for packet in forwarded {
            self.out
                .push_back(Datagram::new(self.config.local, self.config.proxy, packet));
        }
        if let Some(channel) = &self.config.feedback {
            for item in feedback {
                channel.send(Bytes::from(item.to_quic_info()));
                self.feedback_sent += 1;
            }
        }
        if open && !self.inner_started {
            self.inner_started = true;
            self.times.opened = Some(now);
            self.inner.handle_timeout(now);
        }
        if let Some(app_addr) = self.app_addr {
            for (source, payload) in inbound {
                self.inner
                    .handle_datagram(now, Datagram::new(source, app_addr, payload));
            }
        }
    }
}

impl<H: Host> Host for TunnelClientHost<H> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.start(now);
        if datagram.src == self.config.proxy {
            let forwarded = self
                .app()
                .and_then(|app| app.forwarded_in(&datagram.payload));
            match (forwarded, self.app_addr) {
                (Some((source, inner)), Some(app_addr)) => self
                    .inner
                    .handle_datagram(now, Datagram::new(source, app_addr, inner)),
                _ => self.endpoint.handle_datagram(now, datagram, &mut || None),
            }
        } else if self.inner_started {
            self.inner.handle_datagram(now, datagram);
        }
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.start(now);
        if self.endpoint.poll_timeout().is_some_and(|at| at <= now) {
            self.endpoint.handle_timeout(now);
        }
        if self.inner_started && self.inner.poll_timeout().is_some_and(|at| at <= now) {
            self.inner.handle_timeout(now);
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.start(now);
        loop {
            if let Some(datagram) = self.out.pop_front() {
                return Some(datagram);
            }
            if let Some(datagram) = self.endpoint.poll_transmit(now) {
                self.pump(now);
                return Some(datagram);
            }
            if !self.inner_started {
                return None;
            }
            let packet = self.inner.poll_transmit(now)?;
            self.app_addr = Some(packet.src);
            if let Some(app) = self.app() {
                app.send(packet.dst, packet.payload);
            }
            self.endpoint.drive(now);
            self.pump(now);
        }
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        if !self.started {
            return Some(Time::ZERO);
        }
        let endpoint = self.endpoint.poll_timeout();
        let inner = self
            .inner_started
            .then(|| self.inner.poll_timeout())
            .flatten();
        endpoint.into_iter().chain(inner).min()
    }

    fn is_finished(&self) -> bool {
        self.inner_started && self.inner.is_finished()
    }
}
