//! The tunnel client's application on its QUIC connection to the tunnel
//! server: one CONNECT-UDP tunnel per target, packets in and out by the
//! tunnel's mode, TECC feedback taken from TUNNEL_INFO capsules. The host
//! wrapper that puts it beside a client application is
//! [`crate::TunnelClientHost`].

use crate::carrier;
use crate::connect_udp::{self, STREAM_GROUP_HEADER, UriTemplate};
use crate::forward::{ClientForwarding, Route};
use crate::h3::{H3Connection, RequestStream};
use crate::mode::{Mode, TunnelSettings};
use crate::sender::{DatagramSender, SenderStats};
use crate::wire::capsule::Capsule;
use crate::wire::datagram;
use crate::wire::feedback::Feedback;
use bytes::Bytes;
use netsim::Time;
use quic::{App, Session};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// The most inner packets held per tunnel while it opens.
const MAX_WAITING: usize = 1024;
/// The most tunnels (targets) one client opens.
const MAX_TUNNELS: usize = 16;
/// HTTP/3 error codes (RFC 9114 §8.1) we close with.
const H3_GENERAL_PROTOCOL_ERROR: u32 = 0x101;

/// Where a tunnel stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelState {
    /// Not requested yet (waiting for the server's SETTINGS).
    Waiting,
    /// Requested, no response yet.
    Requested,
    /// The server answered 2xx at this time.
    Open(Time),
    /// The server refused with this status.
    Refused(u16),
}

/// One CONNECT-UDP tunnel of the client.
#[derive(Debug)]
struct ClientTunnel {
    target: SocketAddr,
    streams: Vec<RequestStream>,
    state: TunnelState,
    waiting: VecDeque<Bytes>,
    next: usize,
    forwarding: ClientForwarding,
}

/// What the client counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Inner packets taken from the application.
    pub packets_out: u64,
    /// Inner packets delivered to the application.
    pub packets_in: u64,
    /// Inner packets dropped (tunnel refused, too many waiting).
    pub dropped: u64,
    /// TUNNEL_INFO received (capsules and datagrams).
    pub feedback: u64,
    /// Of those, the ones that came as HTTP datagrams.
    pub feedback_datagrams: u64,
    /// Packets forwarded beside the tunnel (MFT), to and from the target.
    pub forwarded: (u64, u64),
    /// The datagram sender's counters.
    pub sender: SenderStats,
}

/// The tunnel client's application.
#[derive(Debug)]
pub struct ClientApp {
    settings: TunnelSettings,
    template: UriTemplate,
    authority: String,
    h3: H3Connection,
    tunnels: Vec<ClientTunnel>,
    sender: DatagramSender,
    inbound: Vec<(SocketAddr, Bytes)>,
    forwarded_out: Vec<Bytes>,
    feedback: Vec<Feedback>,
    stats: ClientStats,
    error: Option<String>,
}

impl ClientApp {
    /// A client that asks `authority` for tunnels with `template`.
    pub fn new(settings: TunnelSettings, template: UriTemplate, authority: String) -> ClientApp {
        let sender = carrier::sender(&settings);
        ClientApp {
            settings,
            template,
            authority,
            h3: H3Connection::default(),
            tunnels: Vec::new(),
            sender,
            inbound: Vec::new(),
            forwarded_out: Vec::new(),
            feedback: Vec::new(),
            stats: ClientStats::default(),
            error: None,
        }
    }

    /// Asks for a tunnel to `target` (once the server's SETTINGS arrive).
    pub fn open(&mut self, target: SocketAddr) {
        if self.tunnels.iter().any(|t| t.target == target) || self.tunnels.len() >= MAX_TUNNELS {
            return;
        }
        self.tunnels.push(ClientTunnel {
            target,
            streams: Vec::new(),
            state: TunnelState::Waiting,
            waiting: VecDeque::new(),
            next: 0,
            forwarding: ClientForwarding::default(),
        });
    }

    /// The tunnel to `target`'s state, if one was asked for.
    pub fn state(&self, target: SocketAddr) -> Option<TunnelState> {
        self.tunnels
            .iter()
            .find(|t| t.target == target)
            .map(|t| t.state)
    }

    /// An inner packet for `target`; opens the tunnel if needed.
    pub fn send(&mut self, target: SocketAddr, packet: Bytes) {
        self.stats.packets_out += 1;
        self.open(target);
        let Some(tunnel) = self.tunnels.iter_mut().find(|t| t.target == target) else {
            self.stats.dropped += 1;
            return;
        };
        if self.settings.mode == Mode::Forwarding
            && let Route::Forward(wire) = tunnel.forwarding.outgoing(&packet)
        {
            self.forwarded_out.push(Bytes::from(wire));
            return;
        }
        if tunnel.waiting.len() >= MAX_WAITING || matches!(tunnel.state, TunnelState::Refused(_)) {
            self.stats.dropped += 1;
            return;
        }
        tunnel.waiting.push_back(packet);
    }

    /// Registers a connection ID of the application's with every tunnel's
    /// forwarding (MFT).
    pub fn register_client_cid(&mut self, cid: &[u8]) {
        if self.settings.mode != Mode::Forwarding {
            return;
        }
        for tunnel in &mut self.tunnels {
            tunnel.forwarding.register_client_cid(cid);
        }
    }

    /// Inner packets that came out of the tunnel, with their sources.
    pub fn take_inbound(&mut self) -> Vec<(SocketAddr, Bytes)> {
        std::mem::take(&mut self.inbound)
    }

    /// Packets to send to the tunnel server beside the tunnel (MFT).
    pub fn take_forwarded(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.forwarded_out)
    }

    /// Feedback received since the last call.
    pub fn take_feedback(&mut self) -> Vec<Feedback> {
        std::mem::take(&mut self.feedback)
    }

    /// A packet that arrived beside the tunnel (MFT): the inner packet, if
    /// it carries a virtual client CID of ours.
    pub fn forwarded_in(&mut self, packet: &[u8]) -> Option<(SocketAddr, Bytes)> {
        for tunnel in &mut self.tunnels {
            if let Some(inner) = tunnel.forwarding.forwarded(packet) {
                self.stats.packets_in += 1;
                return Some((tunnel.target, Bytes::from(inner)));
            }
        }
        None
    }

    /// The counters.
    pub fn stats(&self) -> ClientStats {
        let forwarded = carrier::sum_forwarded(self.tunnels.iter().map(|t| t.forwarding.forwarded));
        ClientStats {
            sender: self.sender.stats(),
            forwarded,
            ..self.stats
        }
    }

    /// The datagram sender (its loss log, with `record_losses`).
    pub fn sender(&self) -> &DatagramSender {
        &self.sender
    }

    /// Why the connection was closed by us, if it was.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn request(&mut self, session: &mut Session<'_>) {
        let ready = self.h3.peer_settings().is_some_and(|peer| {
            peer.connect_protocol && (!self.settings.mode.uses_datagrams() || peer.h3_datagram)
        });
        if !ready {
            return;
        }
        let mode = self.settings.mode;
        for tunnel in &mut self.tunnels {
            if tunnel.state != TunnelState::Waiting {
                continue;
            }
            let mut extra = Vec::new();
            if mode == Mode::Forwarding {
                extra.push(("proxy-quic-forwarding", "?1".to_string()));
            }
            let Some(id) = session.open_bi() else {
                return;
            };
            let mut connect = RequestStream::new(id);
            connect.send_headers(&connect_udp::request_fields(
                &self.template,
                &self.authority,
                tunnel.target,
                &extra,
            ));
            tunnel.streams.push(connect);
            for _ in 1..mode.streams() {
                let Some(member) = session.open_bi() else {
                    break;
                };
                let mut stream = RequestStream::new(member);
                let group = [(STREAM_GROUP_HEADER, id.id().to_string())];
                stream.send_headers(&connect_udp::request_fields(
                    &self.template,
                    &self.authority,
                    tunnel.target,
                    &group,
                ));
                tunnel.streams.push(stream);
            }
            tunnel.state = TunnelState::Requested;
        }
    }

    /// Reads every tunnel's streams.
    fn read_streams(&mut self, session: &mut Session<'_>) -> Result<(), String> {
        let now = session.now();
        for tunnel in &mut self.tunnels {
            for (index, stream) in tunnel.streams.iter_mut().enumerate() {
                let input = stream.read(session).map_err(|e| e.to_string())?;
                for fields in &input.headers {
                    if index == 0 && tunnel.state == TunnelState::Requested {
                        tunnel.state = match connect_udp::response_status(fields) {
                            Some(200..=299) => TunnelState::Open(now),
                            Some(status) => TunnelState::Refused(status),
                            None => TunnelState::Refused(0),
                        };
                    }
                }
                for capsule in input.capsules {
                    match capsule {
                        Capsule::Datagram {
                            context: 0,
                            payload,
                        } => {
                            tunnel.forwarding.tunnelled(&payload);
                            self.inbound.push((tunnel.target, Bytes::from(payload)));
                            self.stats.packets_in += 1;
                        }
                        Capsule::TunnelInfo(feedback) => {
                            self.stats.feedback += 1;
                            self.feedback.push(feedback);
                        }
                        other => tunnel.forwarding.on_capsule(&other),
                    }
                }
            }
            if let TunnelState::Refused(_) = tunnel.state {
                self.stats.dropped += tunnel.waiting.len() as u64;
                tunnel.waiting.clear();
            }
        }
        Ok(())
    }

    fn read_datagrams(&mut self, session: &mut Session<'_>) {
        while let Some(data) = session.recv_datagram() {
            let Ok(http) = datagram::decode(&data) else {
                continue;
            };
            let tunnel = self.tunnels.iter_mut().find(|t| {
                t.streams
                    .first()
                    .is_some_and(|s| s.id.id() == http.stream_id)
                    && matches!(t.state, TunnelState::Open(_))
            });
            match (tunnel, http.context) {
                (Some(tunnel), 0) => {
                    tunnel.forwarding.tunnelled(http.payload);
                    self.inbound
                        .push((tunnel.target, Bytes::copy_from_slice(http.payload)));
                    self.stats.packets_in += 1;
                }
                (Some(_), datagram::TUNNEL_INFO_CONTEXT) if self.settings.feedback => {
                    let mut fields = http.payload;
                    if let Ok(feedback) = Feedback::decode_fields(&mut fields)
                        && fields.is_empty()
                    {
                        self.stats.feedback += 1;
                        self.stats.feedback_datagrams += 1;
                        self.feedback.push(feedback);
                    }
                }
                _ => {}
            }
        }
    }

    /// Sends what waits on the open tunnels, by mode.
    fn send_waiting(&mut self) {
        for tunnel in &mut self.tunnels {
            if !matches!(tunnel.state, TunnelState::Open(_)) {
                continue;
            }
            let capsules = tunnel.forwarding.take_capsules();
            if !capsules.is_empty() {
                let mut bytes = Vec::new();
                for capsule in capsules {
                    capsule.encode(&mut bytes);
                }
                tunnel.streams[0].send_capsules(&bytes);
            }
            while let Some(packet) = tunnel.waiting.pop_front() {
                carrier::encapsulate(
                    &self.settings,
                    &packet,
                    &mut self.sender,
                    &mut tunnel.streams,
                    &mut tunnel.next,
                );
            }
        }
    }
}

impl App for ClientApp {
    fn drive(&mut self, session: &mut Session<'_>) {
        if self.error.is_some() || !session.is_connected() {
            return;
        }
        self.h3.drive(session);
        self.request(session);
        let read = self.read_streams(session);
        let error = read.err().or_else(|| self.h3.error().map(str::to_string));
        if let Some(error) = error {
            session.close(H3_GENERAL_PROTOCOL_ERROR, b"HTTP/3 error");
            self.error = Some(error);
            return;
        }
        self.read_datagrams(session);
        self.send_waiting();
        for tunnel in &mut self.tunnels {
            for stream in &mut tunnel.streams {
                stream.flush(session);
            }
        }
        self.sender.drive(session);
    }

    fn is_done(&self) -> bool {
        false
    }
}
