//! The tunnel server's application on one client's QUIC connection:
//! accepts CONNECT-UDP requests for allowed targets (refusing others with
//! the proper status), moves packets between the tunnel and the target
//! socket by the tunnel's mode, runs TECC's sampler and sends its
//! feedback. The middlebox around it is [`crate::TunnelServer`].

use crate::carrier;
use crate::connect_udp::{self, AllowList, Refusal, UriTemplate};
use crate::forward::ServerForwarding;
use crate::h3::{H3Connection, RequestStream};
use crate::limits::{ByteBudget, PortBlocks, ServerLimits};
use crate::mode::{Mode, TunnelSettings};
use crate::sampler::{Sampler, TunnelState};
use crate::sender::{DatagramSender, SenderStats};
use crate::wire::capsule::Capsule;
use crate::wire::datagram;
use bytes::Bytes;
use netsim::{Rate, Time};
use quic::{App, Session};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The most packets from a target held for the tunnel between drives
/// (their bytes are bounded by [`ServerLimits`]).
const MAX_FROM_TARGET: usize = 4096;
/// HTTP/3 error codes (RFC 9114 §8.1).
const H3_GENERAL_PROTOCOL_ERROR: u32 = 0x101;

/// One tunnel of a connection.
#[derive(Debug)]
struct ServerTunnel {
    target: SocketAddr,
    port: u16,
    streams: Vec<RequestStream>,
    next: usize,
    forwarding: ServerForwarding,
    from_target: VecDeque<Bytes>,
    /// The bytes in `from_target`.
    from_bytes: usize,
}

impl ServerTunnel {
    /// Bytes from the target held for this tunnel: waiting, or queued on
    /// its streams.
    fn held_bytes(&self) -> usize {
        self.from_bytes
            + self
                .streams
                .iter()
                .map(RequestStream::outgoing_bytes)
                .sum::<usize>()
    }
}

/// A sample of the tunnel server's sending state (TECC Figure 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerSample {
    /// When.
    pub at: Time,
    /// The tunnel's queue, bytes.
    pub queue_bytes: u64,
    /// The tunnel connection's pacing rate.
    pub pacing: Option<Rate>,
    /// Its smoothed RTT.
    pub srtt: Duration,
    /// Its congestion window, bytes.
    pub cwnd: u64,
    /// Its bytes in flight: at the window, the tunnel is window-limited.
    pub in_flight: u64,
}

/// What a server connection counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Requests refused (any status).
    pub refused: u64,
    /// Requests refused because the allow-list does not name the target.
    pub forbidden: u64,
    /// Tunnels opened.
    pub tunnels: u64,
    /// Packets to targets.
    pub to_targets: u64,
    /// Packets from targets into the tunnel (or forwarded).
    pub from_targets: u64,
    /// Packets from targets dropped (a packet or byte limit reached).
    pub dropped: u64,
    /// TUNNEL_INFO capsules sent.
    pub feedback: u64,
    /// Packets forwarded beside the tunnel (MFT), from and to the client.
    pub forwarded: (u64, u64),
    /// The datagram sender's counters.
    pub sender: SenderStats,
}

/// What every connection of a server shares.
#[derive(Clone, Debug)]
pub struct ServerShared {
    /// The tunnel's settings.
    pub settings: TunnelSettings,
    /// The URI template requests must match.
    pub template: UriTemplate,
    /// Where tunnels may lead.
    pub allow: Arc<AllowList>,
    /// Sample the sending state this often (default: never).
    pub sample_interval: Option<Duration>,
    /// The server's limits.
    pub limits: ServerLimits,
}

/// The tunnel server's application on one connection.
#[derive(Debug)]
pub struct ServerApp {
    shared: ServerShared,
    h3: H3Connection,
    pending: Vec<RequestStream>,
    tunnels: Vec<ServerTunnel>,
    sender: DatagramSender,
    sampler: Option<Sampler>,
    ports: VecDeque<u16>,
    to_targets: Vec<(u16, SocketAddr, Bytes)>,
    forwarded_out: Vec<Bytes>,
    client: Option<SocketAddr>,
    next_virtual: u32,
    samples: Vec<ServerSample>,
    /// The state the last drive left, which holds until the next one.
    last_state: Option<ServerSample>,
    next_sample: Option<Time>,
    stats: ServerStats,
    error: Option<String>,
    /// What every connection of the server holds together.
    budget: Arc<ByteBudget>,
    /// The bytes this connection last counted in the budget.
    held: usize,
    /// Closed: its tunnels and queues are freed, its counters kept.
    released: bool,
    /// The server's port blocks, if it takes one once established.
    blocks: Option<Arc<std::sync::Mutex<PortBlocks>>>,
    /// The first port of the block it took.
    block: Option<u16>,
}

impl ServerApp {
    /// An application that gives its tunnels the target-facing ports
    /// `ports` (one each).
    pub fn new(shared: ServerShared, ports: impl IntoIterator<Item = u16>) -> ServerApp {
        let settings = &shared.settings;
        let sender = carrier::sender(settings);
        let sampler = settings.feedback.then(|| Sampler::new(settings.sampler));
        let max_tunnels = usize::from(shared.limits.max_tunnels);
        ServerApp {
            shared,
            h3: H3Connection::default(),
            pending: Vec::new(),
            tunnels: Vec::new(),
            sender,
            sampler,
            ports: ports.into_iter().take(max_tunnels).collect(),
            to_targets: Vec::new(),
            forwarded_out: Vec::new(),
            client: None,
            next_virtual: 0,
            samples: Vec::new(),
            last_state: None,
            next_sample: None,
            stats: ServerStats::default(),
            error: None,
            budget: ByteBudget::shared(),
            held: 0,
            released: false,
            blocks: None,
            block: None,
        }
    }

    /// Takes its target-facing ports from `blocks` once its connection is
    /// established (a handshake that never completes holds none) instead
    /// of those given to [`ServerApp::new`], and gives them back on
    /// [`ServerApp::release`].
    pub fn with_port_blocks(mut self, blocks: Arc<std::sync::Mutex<PortBlocks>>) -> ServerApp {
        self.ports.clear();
        self.blocks = Some(blocks);
        self
    }

    /// Takes a block of ports if it waits for one.
    fn take_block(&mut self) {
        if self.block.is_some() {
            return;
        }
        let Some(blocks) = &self.blocks else {
            return;
        };
        let base = blocks.lock().ok().and_then(|mut b| b.take());
        if let Some(base) = base {
            let width = self.shared.limits.max_tunnels;
            self.block = Some(base);
            self.ports = (base..base + width).collect();
        }
    }

    /// Counts what it holds in `budget`, shared with the server's other
    /// connections (by default it has one of its own).
    pub fn with_budget(mut self, budget: Arc<ByteBudget>) -> ServerApp {
        self.budget = budget;
        self
    }

    /// Bytes from targets it holds: its tunnels' and its datagram queue's.
    pub fn held_bytes(&self) -> usize {
        self.tunnels
            .iter()
            .map(ServerTunnel::held_bytes)
            .sum::<usize>()
            + self.sender.queued_bytes()
    }

    /// Brings its share of the budget up to date.
    fn sync_budget(&mut self) {
        let held = self.held_bytes();
        self.budget.update(self.held, held);
        self.held = held;
    }

    /// The connection closed: frees its tunnels, requests and queues (its
    /// counters, samples and error stay). It is never driven again.
    pub fn release(&mut self) {
        if self.released {
            return;
        }
        self.stats = self.stats();
        self.released = true;
        self.tunnels = Vec::new();
        self.pending = Vec::new();
        self.ports = VecDeque::new();
        self.to_targets = Vec::new();
        self.forwarded_out = Vec::new();
        self.sender = carrier::sender(&self.shared.settings);
        self.h3 = H3Connection::default();
        self.sync_budget();
        if let (Some(blocks), Some(base)) = (&self.blocks, self.block.take())
            && let Ok(mut blocks) = blocks.lock()
        {
            blocks.give_back(base);
        }
    }

    /// The ports of its tunnels, with their targets.
    pub fn tunnel_ports(&self) -> impl Iterator<Item = (u16, SocketAddr)> + '_ {
        self.tunnels.iter().map(|t| (t.port, t.target))
    }

    /// A packet from `source` to the tunnel's port `port`; dropped unless
    /// it comes from the tunnel's target (a connected socket).
    pub fn from_target(&mut self, port: u16, source: SocketAddr, payload: Bytes) {
        let Some(tunnel) = self.tunnels.iter_mut().find(|t| t.port == port) else {
            return;
        };
        if source != tunnel.target {
            return;
        }
        let limits = &self.shared.limits;
        let size = payload.len();
        if tunnel.from_target.len() >= MAX_FROM_TARGET
            || tunnel.held_bytes() + size > limits.tunnel_bytes
            || self.held + size > limits.connection_bytes
            || self.budget.held() + size > limits.total_bytes
        {
            self.stats.dropped += 1;
            return;
        }
        tunnel.from_bytes += size;
        tunnel.from_target.push_back(payload);
        self.budget.update(self.held, self.held + size);
        self.held += size;
    }

    /// Whether a packet from `source` beside the tunnel is a forwarded one
    /// of ours: it comes from this connection's client (virtual CIDs are
    /// per client-facing socket, draft §2.2) with one of our virtual
    /// target CIDs.
    pub fn is_forwarded(&self, source: SocketAddr, packet: &[u8]) -> bool {
        self.client == Some(source)
            && self
                .tunnels
                .iter()
                .any(|t| t.forwarding.is_forwarded(packet))
    }

    /// A forwarded packet from the client (MFT): goes to its target.
    pub fn forwarded_from_client(&mut self, packet: &[u8]) {
        for tunnel in &mut self.tunnels {
            if let Some(inner) = tunnel.forwarding.from_client(packet) {
                self.to_targets
                    .push((tunnel.port, tunnel.target, Bytes::from(inner)));
                self.stats.to_targets += 1;
                return;
            }
        }
    }

    /// Packets for targets: (tunnel port, target, payload).
    pub fn take_to_targets(&mut self) -> Vec<(u16, SocketAddr, Bytes)> {
        std::mem::take(&mut self.to_targets)
    }

    /// Packets to forward to the client beside the tunnel (MFT), with the
    /// client's address.
    pub fn take_forwarded(&mut self) -> (Option<SocketAddr>, Vec<Bytes>) {
        (self.client, std::mem::take(&mut self.forwarded_out))
    }

    /// The counters.
    pub fn stats(&self) -> ServerStats {
        if self.released {
            return self.stats;
        }
        let forwarded = carrier::sum_forwarded(self.tunnels.iter().map(|t| t.forwarding.forwarded));
        ServerStats {
            sender: self.sender.stats(),
            forwarded,
            ..self.stats
        }
    }

    /// The samples of the sending state.
    pub fn samples(&self) -> &[ServerSample] {
        &self.samples
    }

    /// The tunnel client's address, once the connection is established.
    pub fn client(&self) -> Option<SocketAddr> {
        self.client
    }

    /// When the application wants to be driven (the sampler's cycle; never
    /// for the time series, which observes without driving anything).
    pub fn next_wakeup(&self) -> Option<Time> {
        self.sampler.as_ref().and_then(Sampler::next_wakeup)
    }

    /// Why the connection was closed by us, if it was.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Handles request streams whose HEADERS arrived.
    fn accept_requests(&mut self, session: &mut Session<'_>) -> Result<(), String> {
        while let Some(id) = session.accept_bi() {
            if self.pending.len() >= self.shared.limits.max_pending {
                return Err("too many requests waiting".into());
            }
            self.pending.push(RequestStream::new(id));
        }
        let mut index = 0;
        while index < self.pending.len() {
            let input = self.pending[index]
                .read(session)
                .map_err(|e| e.to_string())?;
            let Some(fields) = input.headers.first() else {
                if input.finished {
                    self.pending.swap_remove(index);
                } else {
                    index += 1;
                }
                continue;
            };
            let mut stream = self.pending.swap_remove(index);
            let shared = &self.shared;
            match connect_udp::parse_request(fields, &shared.template, &shared.allow) {
                Ok(request) => self.open(stream, request),
                Err(refusal) => {
                    self.stats.refused += 1;
                    if refusal == Refusal::Forbidden {
                        self.stats.forbidden += 1;
                    }
                    stream.send_headers(&[
                        (":status".into(), refusal.status().to_string()),
                        (
                            "proxy-status".into(),
                            "pepkit; error=destination_ip_prohibited".into(),
                        ),
                    ]);
                    stream.flush(session);
                    let _ = session.finish(stream.id);
                }
            }
        }
        Ok(())
    }

    fn open(&mut self, mut stream: RequestStream, request: connect_udp::ConnectRequest) {
        let ok = |stream: &mut RequestStream, forwarding: bool| {
            let mut fields = vec![
                (":status".to_string(), "200".to_string()),
                ("capsule-protocol".into(), "?1".into()),
            ];
            if forwarding {
                fields.push(("proxy-quic-forwarding".into(), "?1".into()));
            }
            stream.send_headers(&fields);
        };
        if let Some(group) = request.group_of {
            let tunnel = self.tunnels.iter_mut().find(|t| {
                t.streams[0].id.id() == group
                    && t.target == request.target
                    && t.streams.len() < usize::from(self.shared.settings.mode.streams())
            });
            if let Some(tunnel) = tunnel {
                ok(&mut stream, false);
                tunnel.streams.push(stream);
                return;
            }
        }
        let Some(port) = (request.group_of.is_none())
            .then(|| self.ports.pop_front())
            .flatten()
        else {
            self.stats.refused += 1;
            stream.send_headers(&[(":status".into(), "400".into())]);
            return;
        };
        let forwarding = request.quic_forwarding && self.shared.settings.mode == Mode::Forwarding;
        ok(&mut stream, forwarding);
        self.stats.tunnels += 1;
        self.tunnels.push(ServerTunnel {
            target: request.target,
            port,
            streams: vec![stream],
            next: 0,
            forwarding: ServerForwarding::default(),
            from_target: VecDeque::new(),
            from_bytes: 0,
        });
    }

    /// Reads the tunnels' streams: packets for targets, CID capsules.
    fn read_tunnels(&mut self, session: &mut Session<'_>) -> Result<(), String> {
        for tunnel in &mut self.tunnels {
            let mut replies = Vec::new();
            for stream in &mut tunnel.streams {
                let input = stream.read(session).map_err(|e| e.to_string())?;
                for capsule in input.capsules {
                    match capsule {
                        Capsule::Datagram {
                            context: 0,
                            payload,
                        } => {
                            self.to_targets.push((
                                tunnel.port,
                                tunnel.target,
                                Bytes::from(payload),
                            ));
                            self.stats.to_targets += 1;
                        }
                        other => {
                            let reply =
                                tunnel.forwarding.on_capsule(&other, &mut self.next_virtual);
                            replies.extend(reply);
                        }
                    }
                }
            }
            if !replies.is_empty() {
                let mut bytes = Vec::new();
                for reply in replies {
                    reply.encode(&mut bytes);
                }
                tunnel.streams[0].send_capsules(&bytes);
            }
        }
        while let Some(data) = session.recv_datagram() {
            let Ok(http) = datagram::decode(&data) else {
                continue;
            };
            let tunnel = self
                .tunnels
                .iter()
                .find(|t| t.streams[0].id.id() == http.stream_id);
            if let (Some(tunnel), 0) = (tunnel, http.context) {
                self.to_targets.push((
                    tunnel.port,
                    tunnel.target,
                    Bytes::copy_from_slice(http.payload),
                ));
                self.stats.to_targets += 1;
            }
        }
        Ok(())
    }

    /// Puts the targets' packets into the tunnels, by mode.
    fn send_to_client(&mut self) {
        let mode = self.shared.settings.mode;
        for tunnel in &mut self.tunnels {
            while let Some(packet) = tunnel.from_target.pop_front() {
                tunnel.from_bytes -= packet.len();
                self.stats.from_targets += 1;
                if mode == Mode::Forwarding
                    && let Some(wire) = tunnel.forwarding.from_target(&packet)
                {
                    self.forwarded_out.push(Bytes::from(wire));
                    continue;
                }
                carrier::encapsulate(
                    &self.shared.settings,
                    &packet,
                    &mut self.sender,
                    &mut tunnel.streams,
                    &mut tunnel.next,
                );
            }
        }
    }

    /// The tunnel's queue: the datagram sender's, or what the streams hold.
    fn queue_bytes(&self) -> usize {
        let streams: usize = self
            .tunnels
            .iter()
            .flat_map(|t| &t.streams)
            .map(RequestStream::outgoing_bytes)
            .sum();
        self.sender.queued_bytes() + streams
    }

    /// The time series' samples due by `now`, before this drive changes
    /// anything: the state the last drive left holds at every instant
    /// until this one. Waking the connection to sample would poll it at
    /// extra instants (its pacer and timers, the sampler's queue
    /// observations), so observing would change the run.
    fn catch_up_samples(&mut self, now: Time) {
        let (Some(interval), Some(state)) = (self.shared.sample_interval, self.last_state) else {
            return;
        };
        let interval = interval.max(Duration::from_millis(1));
        // The first multiple of the interval after the first state, so
        // that the samples fall on the instants the endpoints sample at.
        let step = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        let first = || Time::from_nanos((state.at.as_nanos() / step).saturating_add(1) * step);
        let mut next = self.next_sample.unwrap_or_else(first);
        while next <= now {
            self.samples.push(ServerSample { at: next, ..state });
            next += interval;
        }
        self.next_sample = Some(next);
    }

    /// Keeps the state this drive leaves for the time series.
    fn keep_state(&mut self, session: &mut Session<'_>) {
        if self.shared.sample_interval.is_some() {
            self.last_state = Some(ServerSample {
                at: session.now(),
                queue_bytes: self.queue_bytes() as u64,
                pacing: session.pacing_rate(),
                srtt: session.smoothed_rtt(),
                cwnd: session.congestion_window(),
                in_flight: session.bytes_in_flight(),
            });
        }
    }

    /// The sampler's detection and its feedback at the end of a cycle.
    fn sample(&mut self, session: &mut Session<'_>) {
        let now = session.now();
        let queue = self.queue_bytes();
        let Some(sampler) = &mut self.sampler else {
            return;
        };
        if self.tunnels.is_empty() {
            return;
        }
        sampler.observe(now, queue);
        if sampler.next_wakeup().is_none_or(|at| now < at) {
            return;
        }
        let rate = session.pacing_rate().unwrap_or_else(|| {
            let rtt = session.smoothed_rtt().max(Duration::from_millis(1));
            Rate::from_bytes_over(session.congestion_window(), rtt)
        });
        let state = TunnelState {
            min_rtt: session.min_rtt(),
            rate,
            stats: self.sender.stats(),
        };
        if let Some(feedback) = sampler.poll(now, state) {
            // In the datagram modes, TUNNEL_INFO is an HTTP datagram sent
            // ahead of the tunnel's queue: as a capsule on the CONNECT
            // stream it waited behind the data it reports on (stream frames
            // take what room datagrams leave in a packet) and behind its own
            // lost predecessors (a reliable stream), seconds on a slow link.
            if self.shared.settings.mode.uses_datagrams() {
                let mut fields = Vec::new();
                feedback.encode_fields(&mut fields);
                for tunnel in &self.tunnels {
                    let mut bytes = Vec::new();
                    datagram::encode_with_context(
                        &mut bytes,
                        tunnel.streams[0].id.id(),
                        datagram::TUNNEL_INFO_CONTEXT,
                        &fields,
                    );
                    self.sender.push_control(Bytes::from(bytes));
                }
            } else {
                let mut bytes = Vec::new();
                Capsule::TunnelInfo(feedback).encode(&mut bytes);
                for tunnel in &mut self.tunnels {
                    tunnel.streams[0].send_capsules(&bytes);
                }
            }
            self.stats.feedback += 1;
        }
    }
}

impl App for ServerApp {
    fn drive(&mut self, session: &mut Session<'_>) {
        self.catch_up_samples(session.now());
        if self.released || self.error.is_some() || !session.is_connected() {
            return;
        }
        self.client = self.client.or_else(|| session.remote());
        self.take_block();
        self.h3.drive(session);
        let result = self
            .accept_requests(session)
            .and_then(|()| self.read_tunnels(session));
        let error = result.err().or_else(|| self.h3.error().map(str::to_string));
        if let Some(error) = error {
            session.close(H3_GENERAL_PROTOCOL_ERROR, b"HTTP/3 error");
            self.error = Some(error);
            self.sync_budget();
            return;
        }
        self.send_to_client();
        self.sample(session);
        for tunnel in &mut self.tunnels {
            for stream in &mut tunnel.streams {
                stream.flush(session);
            }
        }
        self.sender.drive(session);
        self.sync_budget();
        self.keep_state(session);
    }

    fn is_done(&self) -> bool {
        false
    }
}
