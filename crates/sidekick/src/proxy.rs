//! The sidekick proxy engine (§4.1, §4.2): a [`Middlebox`] that answers
//! sidekick requests, keeps a quACK per flow that configured one, sends the
//! quACKs within the flow's quota, and forwards all base traffic untouched.
//!
//! A flow is the 4-tuple of the sender's base connection (sender address,
//! receiver address). Its state, in order of a session's life:
//!
//! 1. A request (in band, sender → receiver) creates the flow with a fresh
//!    session ID and the initial quota of one quACK, and the proxy replies
//!    from the receiver's address. The request itself is forwarded.
//! 2. A configure message to the proxy's address, from any port of the
//!    sender's IP, presenting a session ID the proxy issued, sets the
//!    interval, threshold and identifier, and fixes where quACKs go (the
//!    message's source). The reply's session ID can only configure (and
//!    re-arm the initial quota of one, should the first quACK be lost);
//!    raising the quota needs an ID that came in a quACK, which only the
//!    party that receives the quACKs has.
//! 3. Each quACK carries a new session ID and the quota left. The proxy
//!    accepts the last [`ProxyConfig::session_window`] IDs it issued, so a
//!    lost quACK does not lock the sender out.
//! 4. A reset clears the flow's quACK; later quACKs carry its epoch.
//!
//! The flow table holds at most [`ProxyConfig::max_flows`] flows; requests
//! beyond that are forwarded without a reply. Flows expire after
//! [`ProxyConfig::idle_timeout`] without packets, or after
//! [`ProxyConfig::unconfigured_timeout`] if the sender never configured them.
//!
//! **Inline or beside the path.** In the simulator the proxy sits inline and
//! forwards every datagram it is handed. On a real router the kernel
//! forwards and the proxy only sniffs a copy of the transit traffic: with
//! [`ProxyConfig::forward`] off, [`Middlebox::handle_datagram`] does all of
//! the engine's work (expiry, replies, quACKs) but never emits the datagram
//! itself, so everything the proxy transmits is its own.

use crate::wire::{Config, Control, Discovery, Interval};
use netsim::{Datagram, Interface, Middlebox, Seed, SimRng, Time, Transmit};
use quack::{AnyEncoder, Encoder, F16, F32, F64, Field, IdentifierSource, Quack, Scheme};
use rand_chacha::rand_core::RngCore;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// How a proxy behaves.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// The proxy's own address: control messages arrive here, quACKs and
    /// nothing else leave from here.
    pub addr: SocketAddr,
    /// Seeds the session IDs (in real mode, from the OS).
    pub seed: Seed,
    /// The flow table's bound.
    pub max_flows: usize,
    /// A configured flow without packets for this long is forgotten.
    pub idle_timeout: Duration,
    /// A flow the sender never configured is forgotten after this long.
    pub unconfigured_timeout: Duration,
    /// How many of the latest session IDs of a flow are accepted.
    pub session_window: usize,
    /// The largest quota a sender can hold.
    pub max_quota: u32,
    /// Replace the power sum with a strawman (for overhead comparisons).
    pub strawman: Option<Scheme>,
    /// Whether [`Middlebox::handle_datagram`] forwards the datagram it is
    /// given (inline, as in the simulator). Off for a proxy that sniffs
    /// copies of traffic the kernel forwards: it then transmits only its
    /// own replies and quACKs, and [`ProxyStats::forwarded`] stays 0.
    pub forward: bool,
}

impl ProxyConfig {
    /// Defaults: 4096 flows, 30 s idle timeout (5 s unconfigured), a window
    /// of 8 session IDs, quota at most 2^20, the power-sum quACK, inline
    /// (forwarding).
    pub fn new(addr: SocketAddr, seed: Seed) -> ProxyConfig {
        ProxyConfig {
            addr,
            seed,
            max_flows: 4096,
            idle_timeout: Duration::from_secs(30),
            unconfigured_timeout: Duration::from_secs(5),
            session_window: 8,
            max_quota: 1 << 20,
            strawman: None,
            forward: true,
        }
    }
}

/// What the proxy has done, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProxyStats {
    /// Sidekick requests seen.
    pub requests: u64,
    /// Replies sent.
    pub replies: u64,
    /// Requests refused because the flow table was full.
    pub refused_full: u64,
    /// Configure messages accepted.
    pub configures: u64,
    /// Resets applied.
    pub resets: u64,
    /// Control messages refused: unknown or stale session ID, or a source
    /// other than the sender's IP.
    pub rejected: u64,
    /// Datagrams to the proxy's address that did not parse.
    pub malformed: u64,
    /// QuACKs sent.
    pub quacks: u64,
    /// QuACKs not sent because the quota was used up.
    pub quota_exhausted: u64,
    /// Packets whose identifier went into a quACK.
    pub packets_encoded: u64,
    /// Datagrams forwarded unchanged (0 unless [`ProxyConfig::forward`]).
    pub forwarded: u64,
    /// Flows forgotten after their idle timeout.
    pub expired: u64,
}

/// The base connection's 4-tuple, sender first.
type FlowKey = (SocketAddr, SocketAddr);

/// One flow of the table as [`SidekickProxy::flows`] reports it (for an
/// operator's dump; nothing here is needed to run the proxy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSummary {
    /// The data sender's address and port.
    pub sender: SocketAddr,
    /// The receiver's address and port.
    pub receiver: SocketAddr,
    /// The sender's configuration, once it configured the flow: the quACK
    /// interval, threshold, identifier width and offset, and the quota it
    /// last granted.
    pub config: Option<Config>,
    /// Where quACKs go (the configure message's source), once configured.
    pub peer: Option<SocketAddr>,
    /// QuACKs the flow may still receive.
    pub quota_left: u32,
    /// The epoch of the last reset applied.
    pub epoch: u8,
    /// Packets encoded since the last quACK.
    pub pending: u32,
    /// Time since the flow's last packet or control message.
    pub idle: Duration,
}

impl FlowSummary {
    /// Whether the sender configured the flow.
    pub fn configured(&self) -> bool {
        self.config.is_some()
    }
}

/// The proxy's tables hash with FxHash: fast for addresses and random
/// session IDs, with a fixed seed, so runs are reproducible (nothing
/// iterates them in an order that shows).
type FxBuild = rustc_hash::FxBuildHasher;

/// A flow's quACK, for the configured identifier width.
enum FlowEncoder {
    W16(AnyEncoder<F16>),
    W32(AnyEncoder<F32>),
    W64(AnyEncoder<F64>),
}

impl FlowEncoder {
    fn new(id_bytes: u8, scheme: Scheme) -> Option<FlowEncoder> {
        Some(match id_bytes {
            2 => FlowEncoder::W16(AnyEncoder::new(scheme).ok()?),
            4 => FlowEncoder::W32(AnyEncoder::new(scheme).ok()?),
            8 => FlowEncoder::W64(AnyEncoder::new(scheme).ok()?),
            _ => return None,
        })
    }

    /// Inserts the payload's identifier; false if the payload has none.
    #[inline]
    fn insert(&mut self, source: IdentifierSource, payload: &[u8]) -> bool {
        #[inline(always)]
        fn insert<F: Field>(e: &mut AnyEncoder<F>, s: IdentifierSource, p: &[u8]) -> bool {
            let Some(id) = s.identify::<F>(p) else {
                return false;
            };
            match e {
                // The common case, without the dynamic dispatch.
                AnyEncoder::PowerSum(sums) => sums.insert(id),
                other => other.insert(id),
            }
            true
        }
        match self {
            FlowEncoder::W16(e) => insert(e, source, payload),
            FlowEncoder::W32(e) => insert(e, source, payload),
            FlowEncoder::W64(e) => insert(e, source, payload),
        }
    }

    /// Appends the quACK message's bytes to `out` (the same bytes as
    /// `message().to_bytes()`), reusing `scratch`'s buffers for the power
    /// sum; false if there is nothing to say.
    fn encode_message(&self, scratch: &mut QuackScratch, out: &mut Vec<u8>) -> bool {
        fn encode<F: Field>(
            e: &AnyEncoder<F>,
            scratch: &mut Option<Quack<F>>,
            out: &mut Vec<u8>,
        ) -> bool {
            match e {
                AnyEncoder::PowerSum(sums) => {
                    match scratch {
                        Some(quack) => sums.quack_into(quack),
                        None => *scratch = Some(sums.quack()),
                    }
                    scratch.as_ref().expect("set above").encode(out);
                    true
                }
                other => other.message().map(|m| m.encode(out)).is_some(),
            }
        }
        match self {
            FlowEncoder::W16(e) => encode(e, &mut scratch.w16, out),
            FlowEncoder::W32(e) => encode(e, &mut scratch.w32, out),
            FlowEncoder::W64(e) => encode(e, &mut scratch.w64, out),
        }
    }

    fn clear(&mut self) {
        match self {
            FlowEncoder::W16(e) => e.clear(),
            FlowEncoder::W32(e) => e.clear(),
            FlowEncoder::W64(e) => e.clear(),
        }
    }
}

/// Reused buffers for building quACKs.
#[derive(Default)]
struct QuackScratch {
    w16: Option<Quack<F16>>,
    w32: Option<Quack<F32>>,
    w64: Option<Quack<F64>>,
    bytes: Vec<u8>,
}

/// A configured session.
struct Session {
    config: Config,
    encoder: FlowEncoder,
    id_source: IdentifierSource,
    /// Where quACKs go: the source of the configure message.
    peer: SocketAddr,
    /// Packets encoded since the last quACK.
    pending: u32,
    /// The next quACK time (millisecond intervals), while armed.
    next_at: Option<Time>,
}

struct Flow {
    /// Recently issued session IDs, oldest first; the first one came in
    /// the reply.
    sessions: VecDeque<u64>,
    /// The ID sent in the reply.
    reply_session: u64,
    quota: u32,
    epoch: u8,
    session: Option<Session>,
    last_active: Time,
}

/// The sidekick proxy engine.
pub struct SidekickProxy {
    config: ProxyConfig,
    flows: HashMap<FlowKey, Flow, FxBuild>,
    /// Every accepted session ID and its flow.
    sessions: HashMap<u64, FlowKey, FxBuild>,
    /// Armed quACK timers, in firing order.
    timers: BTreeSet<(Time, FlowKey)>,
    scratch: QuackScratch,
    rng: SimRng,
    outbox: VecDeque<Transmit>,
    next_sweep: Time,
    stats: ProxyStats,
}

impl SidekickProxy {
    /// A proxy with an empty flow table.
    pub fn new(config: ProxyConfig) -> SidekickProxy {
        let rng = config.seed.rng("sidekick/proxy/sessions");
        SidekickProxy {
            config,
            flows: HashMap::default(),
            sessions: HashMap::default(),
            timers: BTreeSet::new(),
            scratch: QuackScratch::default(),
            rng,
            outbox: VecDeque::new(),
            next_sweep: Time::ZERO,
            stats: ProxyStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &ProxyStats {
        &self.stats
    }

    /// Flows in the table.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Every flow of the table at `now`, sorted by sender then receiver.
    /// Allocates and sorts: for an operator's occasional dump, not for
    /// every packet.
    pub fn flows(&self, now: Time) -> Vec<FlowSummary> {
        let mut flows: Vec<FlowSummary> = self
            .flows
            .iter()
            .map(|(&(sender, receiver), flow)| FlowSummary {
                sender,
                receiver,
                config: flow.session.as_ref().map(|s| s.config),
                peer: flow.session.as_ref().map(|s| s.peer),
                quota_left: flow.quota,
                epoch: flow.epoch,
                pending: flow.session.as_ref().map_or(0, |s| s.pending),
                idle: now.saturating_duration_since(flow.last_active),
            })
            .collect();
        flows.sort_unstable_by_key(|f| (f.sender, f.receiver));
        flows
    }

    /// The engine's own per-packet work for a datagram, without the
    /// forwarding: for benchmarks.
    pub fn observe(&mut self, now: Time, datagram: &Datagram) {
        if datagram.dst == self.config.addr {
            self.handle_control(now, datagram);
        } else if Discovery::is_discovery(&datagram.payload) {
            self.handle_discovery(now, datagram);
        } else {
            self.encode(now, datagram);
        }
    }

    fn new_session_id(&mut self) -> u64 {
        loop {
            let id = self.rng.next_u64();
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    fn handle_discovery(&mut self, now: Time, datagram: &Datagram) {
        let Ok(Discovery::Request { nonce }) = Discovery::parse(&datagram.payload) else {
            return;
        };
        self.stats.requests += 1;
        let key = (datagram.src, datagram.dst);
        if !self.flows.contains_key(&key) {
            if self.flows.len() >= self.config.max_flows {
                self.sweep(now);
            }
            if self.flows.len() >= self.config.max_flows {
                self.stats.refused_full += 1;
                return;
            }
            let session = self.new_session_id();
            self.sessions.insert(session, key);
            self.flows.insert(
                key,
                Flow {
                    sessions: VecDeque::from([session]),
                    reply_session: session,
                    quota: 1,
                    epoch: 0,
                    session: None,
                    last_active: now,
                },
            );
        }
        // A repeated request gets the same answer (the first may be lost).
        let flow = self.flows.get_mut(&key).expect("inserted above");
        flow.last_active = now;
        let reply = Discovery::Reply {
            nonce,
            session: flow.reply_session,
            proxy: self.config.addr,
        };
        self.stats.replies += 1;
        self.outbox.push_back(Transmit::at(
            now,
            Datagram::new(datagram.dst, datagram.src, reply.to_bytes()),
        ));
    }

    fn handle_control(&mut self, now: Time, datagram: &Datagram) {
        let message = match Control::parse(&datagram.payload) {
            Ok(message) => message,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        let session_id = match &message {
            Control::Configure { session, .. } | Control::Reset { session, .. } => *session,
            Control::Quack { .. } => {
                self.stats.malformed += 1;
                return;
            }
        };
        // The session must be one this proxy issued recently, and the
        // message must come from the sender's IP.
        let Some(&key) = self.sessions.get(&session_id) else {
            self.stats.rejected += 1;
            return;
        };
        if key.0.ip() != datagram.src.ip() {
            self.stats.rejected += 1;
            return;
        }
        let strawman = self.config.strawman;
        let max_quota = self.config.max_quota;
        let flow = self
            .flows
            .get_mut(&key)
            .expect("sessions map to live flows");
        flow.last_active = now;
        match message {
            Control::Configure { config, .. } => {
                // The reply's ID configures, but only an ID from a quACK
                // proves the sender receives them and may raise the quota.
                let proven = session_id != flow.reply_session;
                let scheme = strawman.unwrap_or(Scheme::PowerSum {
                    threshold: usize::from(config.threshold),
                });
                let same_encoding = flow.session.as_ref().is_some_and(|s| {
                    s.config.threshold == config.threshold
                        && s.config.id_bytes == config.id_bytes
                        && s.config.id_offset == config.id_offset
                });
                let Some(encoder) = FlowEncoder::new(config.id_bytes, scheme) else {
                    self.stats.rejected += 1;
                    return;
                };
                if proven {
                    flow.quota = flow.quota.saturating_add(config.quota).min(max_quota);
                } else if flow.quota == 0 {
                    // The first quACK was lost: re-arm the initial quota of
                    // one, still sent only to the sender's own IP.
                    flow.quota = 1;
                }
                let session = match flow.session.take() {
                    Some(mut s) if same_encoding => {
                        s.config = config;
                        s.peer = datagram.src;
                        s
                    }
                    _ => Session {
                        config,
                        encoder,
                        id_source: IdentifierSource::Offset(usize::from(config.id_offset)),
                        peer: datagram.src,
                        pending: 0,
                        next_at: None,
                    },
                };
                flow.session = Some(session);
                self.stats.configures += 1;
            }
            // A repeated reset (the sender did not see our quACKs adopt
            // its epoch in time) must not clear the sums a second time.
            Control::Reset { epoch, .. } if epoch == flow.epoch => {}
            Control::Reset { epoch, .. } => {
                flow.epoch = epoch;
                if let Some(session) = &mut flow.session {
                    session.encoder.clear();
                    session.pending = 0;
                }
                self.stats.resets += 1;
            }
            Control::Quack { .. } => unreachable!("refused above"),
        }
    }

    fn encode(&mut self, now: Time, datagram: &Datagram) {
        let key = (datagram.src, datagram.dst);
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let Some(session) = &mut flow.session else {
            return;
        };
        flow.last_active = now;
        if !session.encoder.insert(session.id_source, &datagram.payload) {
            return;
        }
        self.stats.packets_encoded += 1;
        session.pending += 1;
        let per_packet = self.config.strawman.is_some_and(Scheme::per_packet);
        match session.config.interval {
            _ if per_packet => self.send_quack(now, key),
            Interval::Packets(n) if session.pending >= n => self.send_quack(now, key),
            Interval::Packets(_) => {}
            Interval::Millis(ms) => {
                if session.next_at.is_none() {
                    let at = now + Duration::from_millis(u64::from(ms));
                    session.next_at = Some(at);
                    self.timers.insert((at, key));
                }
            }
        }
    }

    /// Sends the flow's quACK now, if it has quota.
    fn send_quack(&mut self, now: Time, key: FlowKey) {
        let next_session = self.new_session_id();
        let window = self.config.session_window.max(1);
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let Some(session) = &mut flow.session else {
            return;
        };
        if flow.quota == 0 {
            self.stats.quota_exhausted += 1;
            return;
        }
        // The control message ends with the quACK: write the head, then
        // the quACK straight after it, into a reused buffer.
        let mut bytes = std::mem::take(&mut self.scratch.bytes);
        bytes.clear();
        Control::Quack {
            next_session,
            quota_left: flow.quota - 1,
            epoch: flow.epoch,
            quack: Vec::new(),
        }
        .encode(&mut bytes);
        let encoded = session
            .encoder
            .encode_message(&mut self.scratch, &mut bytes);
        // An exact-size copy becomes the payload without another allocation.
        let payload = encoded.then(|| bytes.to_vec());
        self.scratch.bytes = bytes;
        let Some(payload) = payload else {
            return;
        };
        flow.quota -= 1;
        session.pending = 0;
        flow.sessions.push_back(next_session);
        self.sessions.insert(next_session, key);
        while flow.sessions.len() > window {
            if let Some(old) = flow.sessions.pop_front() {
                self.sessions.remove(&old);
            }
        }
        self.stats.quacks += 1;
        self.outbox.push_back(Transmit::at(
            now,
            Datagram::new(self.config.addr, session.peer, payload),
        ));
    }

    /// Forgets flows idle past their timeout.
    fn sweep(&mut self, now: Time) {
        let (idle, unconfigured) = (self.config.idle_timeout, self.config.unconfigured_timeout);
        let mut expired: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, flow)| {
                let timeout = if flow.session.is_some() {
                    idle
                } else {
                    unconfigured
                };
                now.saturating_duration_since(flow.last_active) >= timeout
            })
            .map(|(key, _)| *key)
            .collect();
        // In key order, whatever the table's order.
        expired.sort_unstable();
        for key in expired {
            let flow = self.flows.remove(&key).expect("listed above");
            for id in flow.sessions {
                self.sessions.remove(&id);
            }
            if let Some(at) = flow.session.and_then(|s| s.next_at) {
                self.timers.remove(&(at, key));
            }
            self.stats.expired += 1;
        }
        self.next_sweep = now + Duration::from_secs(1);
    }
}

impl Middlebox for SidekickProxy {
    fn handle_datagram(&mut self, now: Time, _from: Interface, datagram: Datagram) {
        if now >= self.next_sweep {
            self.sweep(now);
        }
        self.observe(now, &datagram);
        if self.config.forward && datagram.dst != self.config.addr {
            self.stats.forwarded += 1;
            self.outbox.push_back(Transmit::at(now, datagram));
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if now >= self.next_sweep {
            self.sweep(now);
        }
        while let Some(&(at, key)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(session) = self.flows.get_mut(&key).and_then(|f| f.session.as_mut()) else {
                continue;
            };
            if session.next_at != Some(at) {
                continue; // armed by a session since replaced
            }
            let Interval::Millis(ms) = session.config.interval else {
                session.next_at = None;
                continue;
            };
            if session.pending == 0 {
                // Nothing new: disarm until the next packet.
                session.next_at = None;
                continue;
            }
            let next = at + Duration::from_millis(u64::from(ms));
            session.next_at = Some(next);
            self.timers.insert((next, key));
            self.send_quack(now, key);
        }
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let timer = self.timers.first().map(|&(at, _)| at);
        let sweep = (!self.flows.is_empty()).then_some(self.next_sweep);
        timer.into_iter().chain(sweep).min()
    }
}
