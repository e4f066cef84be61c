//! The sidekick proxy engine (§4.1, §4.2): a [`Middlebox`] that answers
//! sidekick requests, keeps a quACK per flow that configured one, sends the
//! quACKs within the flow's quota, and forwards all base traffic untouched.
//!
//! A flow is the 4-tuple of the sender's base connection (sender address,
//! receiver address). Its state, in order of a session's life:
//!
//! 1. A request (in band, sender → receiver) creates the flow with a fresh
//!    session ID and the initial quota of one quACK, and the proxy replies
//!    from the receiver's address. The request itself is forwarded. The
//!    reply is never longer than the request (the request is padded), and
//!    replies are rate-limited: at most one per flow per
//!    [`ProxyConfig::reply_interval`], and per source address a token
//!    bucket of [`ProxyConfig::reply_burst`] replies refilled at
//!    [`ProxyConfig::reply_rate`] per second.
//! 2. A configure message to the proxy's address, from any port of the
//!    sender's IP, presenting a session ID the proxy issued, sets the
//!    interval, threshold and identifier, and fixes where quACKs go (the
//!    message's source). The reply's session ID can only configure (and
//!    re-arm the initial quota of one, should the first quACK be lost);
//!    raising the quota needs an ID that came in a quACK, which only the
//!    party that receives the quACKs has.
//! 3. Each quACK carries a session ID and the quota left: a new ID in the
//!    first quACK, then at most every [`ProxyConfig::session_rotation`].
//!    The proxy accepts the last [`ProxyConfig::session_window`] IDs it
//!    issued, so a lost quACK, or a grant that crosses many quACKs in
//!    flight, does not lock the sender out. A grant is the sender's
//!    running total of quACKs granted; the proxy adds to the quota only
//!    what it has not applied yet.
//! 4. A reset clears the flow's quACK; later quACKs carry its epoch.
//!
//! The flow table holds at most [`ProxyConfig::max_flows`] flows. When it is
//! full, a request takes the place of the oldest flow that was never
//! configured (a flood of spoofed requests never configures: only the
//! addressee of a reply learns its session ID), and is refused, forwarded
//! without a reply, only when every flow is configured. Flows expire after
//! [`ProxyConfig::idle_timeout`] without packets, or after
//! [`ProxyConfig::unconfigured_timeout`] if the sender never configured them.
//! Expiry and eviction take time logarithmic in the table's size (ordered
//! sets of deadlines and of unconfigured flows), never a scan.
//!
//! **Inline or beside the path.** In the simulator the proxy sits inline and
//! forwards every datagram it is handed. On a real router the kernel
//! forwards and the proxy only sniffs a copy of the transit traffic: with
//! [`ProxyConfig::forward`] off, [`Middlebox::handle_datagram`] does all of
//! the engine's work (expiry, replies, quACKs) but never emits the datagram
//! itself, so everything the proxy transmits is its own.

use crate::flow_encoder::{FlowEncoder, QuackScratch};
use crate::wire::{Config, Control, Discovery, Interval};
use netsim::{Datagram, Interface, Middlebox, Seed, SimRng, Time, Transmit};
use quack::{IdentifierSource, Scheme};
use rand_chacha::rand_core::RngCore;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
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
    /// A quACK carries a new session ID at most this often (the first
    /// always does); the others repeat the latest. The window of IDs then
    /// spans at least `session_window` times this, so a grant made with
    /// an ID survives the quACKs sent while it travels, however many.
    pub session_rotation: Duration,
    /// The largest quota a sender can hold.
    pub max_quota: u32,
    /// Replace the power sum with a strawman (for overhead comparisons).
    pub strawman: Option<Scheme>,
    /// Whether [`Middlebox::handle_datagram`] forwards the datagram it is
    /// given (inline, as in the simulator). Off for a proxy that sniffs
    /// copies of traffic the kernel forwards: it then transmits only its
    /// own replies and quACKs, and [`ProxyStats::forwarded`] stays 0.
    pub forward: bool,
    /// At most one reply per flow per this interval (the sender repeats an
    /// unanswered request after 1 s).
    pub reply_interval: Duration,
    /// Replies one source address may receive in a burst ...
    pub reply_burst: u32,
    /// ... and per second after it.
    pub reply_rate: u32,
    /// The token buckets behind `reply_burst` and `reply_rate`: source
    /// addresses are hashed (with a key from the seed) onto this many.
    pub reply_buckets: usize,
}

impl ProxyConfig {
    /// Defaults: 4096 flows, 30 s idle timeout (5 s unconfigured), a window
    /// of 8 session IDs rotated at most every 100 ms, quota at most 2^20, the power-sum quACK, inline
    /// (forwarding), one reply per flow per 500 ms and per source address
    /// 64 at once then 64 per second (16 384 buckets).
    pub fn new(addr: SocketAddr, seed: Seed) -> ProxyConfig {
        ProxyConfig {
            addr,
            seed,
            max_flows: 4096,
            idle_timeout: Duration::from_secs(30),
            unconfigured_timeout: Duration::from_secs(5),
            session_window: 8,
            session_rotation: Duration::from_millis(100),
            max_quota: 1 << 20,
            strawman: None,
            forward: true,
            reply_interval: Duration::from_millis(500),
            reply_burst: 64,
            reply_rate: 64,
            reply_buckets: 16384,
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
    /// Requests refused because the flow table was full of configured
    /// flows.
    pub refused_full: u64,
    /// Flows never configured that made room for a request in a full
    /// table.
    pub evicted: u64,
    /// Requests not answered because of the reply rate limits.
    pub rate_limited: u64,
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
    /// The sender's running total of granted quACKs, as far as applied.
    granted: u32,
    epoch: u8,
    session: Option<Session>,
    last_active: Time,
    /// When the request created the flow (its place among the
    /// unconfigured flows, while it is one).
    created: Time,
    /// Its entry in the expiry order: never later than its real deadline.
    expires_at: Time,
    /// When it last got a reply.
    last_reply: Option<Time>,
    /// When a quACK last carried a new session ID.
    last_rotation: Option<Time>,
}

/// A source address's reply allowance, in billionths of a reply.
#[derive(Clone, Copy, Default)]
struct Bucket {
    tokens: u64,
    /// When it was last drawn from; `None` while full and unused.
    at: Option<Time>,
}

const TOKEN: u64 = 1_000_000_000;

/// The sidekick proxy engine.
pub struct SidekickProxy {
    config: ProxyConfig,
    flows: HashMap<FlowKey, Flow, FxBuild>,
    /// Every accepted session ID and its flow.
    sessions: HashMap<u64, FlowKey, FxBuild>,
    /// Armed quACK timers, in firing order.
    timers: BTreeSet<(Time, FlowKey)>,
    /// Every flow by a lower bound of its expiry time: a flow whose entry
    /// comes due is forgotten, or filed again at its real deadline.
    expiry: BTreeSet<(Time, FlowKey)>,
    /// The flows never configured, oldest first: the first to make room.
    unconfigured: BTreeSet<(Time, FlowKey)>,
    /// Reply allowances, by a keyed hash of the source address.
    buckets: Vec<Bucket>,
    bucket_key: u64,
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
        let bucket_key = config.seed.rng("sidekick/proxy/buckets").next_u64();
        let buckets = vec![Bucket::default(); config.reply_buckets.max(1)];
        SidekickProxy {
            config,
            flows: HashMap::default(),
            sessions: HashMap::default(),
            timers: BTreeSet::new(),
            expiry: BTreeSet::new(),
            unconfigured: BTreeSet::new(),
            buckets,
            bucket_key,
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
                // Make room: the oldest flow that never configured.
                let Some(&(_, oldest)) = self.unconfigured.first() else {
                    self.stats.refused_full += 1;
                    return;
                };
                self.remove_flow(oldest);
                self.stats.evicted += 1;
            }
            let session = self.new_session_id();
            self.sessions.insert(session, key);
            // A lower bound of its deadline, configured or not.
            let timeout = (self.config.unconfigured_timeout).min(self.config.idle_timeout);
            let expires_at = now + timeout;
            self.expiry.insert((expires_at, key));
            self.unconfigured.insert((now, key));
            self.flows.insert(
                key,
                Flow {
                    sessions: VecDeque::from([session]),
                    reply_session: session,
                    quota: 1,
                    granted: 0,
                    epoch: 0,
                    session: None,
                    last_active: now,
                    created: now,
                    expires_at,
                    last_reply: None,
                    last_rotation: None,
                },
            );
        }
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        flow.last_active = now;
        // A repeated request gets the same answer (the first may be lost),
        // but not more often than the rate limits allow.
        let interval = self.config.reply_interval;
        if flow
            .last_reply
            .is_some_and(|at| now.saturating_duration_since(at) < interval)
        {
            self.stats.rate_limited += 1;
            return;
        }
        let reply_session = flow.reply_session;
        if !self.take_reply_token(now, datagram.src.ip()) {
            self.stats.rate_limited += 1;
            return;
        }
        if let Some(flow) = self.flows.get_mut(&key) {
            flow.last_reply = Some(now);
        }
        let reply = Discovery::Reply {
            nonce,
            session: reply_session,
            proxy: self.config.addr,
        };
        self.stats.replies += 1;
        self.outbox.push_back(Transmit::at(
            now,
            Datagram::new(datagram.dst, datagram.src, reply.to_bytes()),
        ));
    }

    /// Takes one reply from the source address's bucket, if it has one.
    fn take_reply_token(&mut self, now: Time, ip: IpAddr) -> bool {
        let mut hasher = FxBuild::default().build_hasher();
        self.bucket_key.hash(&mut hasher);
        ip.hash(&mut hasher);
        let slot = (hasher.finish() % self.buckets.len() as u64) as usize;
        let burst = u64::from(self.config.reply_burst).saturating_mul(TOKEN);
        let bucket = &mut self.buckets[slot];
        bucket.tokens = match bucket.at {
            None => burst,
            Some(at) => {
                let elapsed = now.saturating_duration_since(at).as_nanos();
                let elapsed = u64::try_from(elapsed).unwrap_or(u64::MAX);
                let refill = elapsed.saturating_mul(u64::from(self.config.reply_rate));
                bucket.tokens.saturating_add(refill).min(burst)
            }
        };
        bucket.at = Some(now);
        if bucket.tokens < TOKEN {
            return false;
        }
        bucket.tokens -= TOKEN;
        true
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
                // The grant is a running total: add what is new.
                let new = config.quota.wrapping_sub(flow.granted);
                if proven && new != 0 && new < 1 << 31 {
                    flow.quota = flow.quota.saturating_add(new).min(max_quota);
                    flow.granted = config.quota;
                } else if !proven && flow.quota == 0 {
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
                if flow.session.is_none() {
                    self.unconfigured.remove(&(flow.created, key));
                }
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
        let window = self.config.session_window.max(1);
        let rotation = self.config.session_rotation;
        let Some(flow) = self.flows.get(&key) else {
            return;
        };
        if flow.session.is_none() {
            return;
        }
        if flow.quota == 0 {
            self.stats.quota_exhausted += 1;
            return;
        }
        // A new session ID for the first quACK (the reply's cannot raise
        // the quota), then at most one per `session_rotation`.
        let rotate = flow
            .last_rotation
            .is_none_or(|at| now.saturating_duration_since(at) >= rotation);
        let next_session = match flow.sessions.back() {
            Some(&latest) if !rotate => latest,
            _ => self.new_session_id(),
        };
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let Some(session) = &mut flow.session else {
            return;
        };
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
        let encoded = session.encoder.encode_message(&mut bytes);
        // An exact-size copy becomes the payload without another allocation.
        let payload = encoded.then(|| bytes.to_vec());
        self.scratch.bytes = bytes;
        let Some(payload) = payload else {
            return;
        };
        flow.quota -= 1;
        session.pending = 0;
        if rotate {
            flow.last_rotation = Some(now);
            flow.sessions.push_back(next_session);
            self.sessions.insert(next_session, key);
            while flow.sessions.len() > window {
                if let Some(old) = flow.sessions.pop_front() {
                    self.sessions.remove(&old);
                }
            }
        }
        self.stats.quacks += 1;
        self.outbox.push_back(Transmit::at(
            now,
            Datagram::new(self.config.addr, session.peer, payload),
        ));
    }

    /// Forgets flows idle past their timeout. Only the entries that came
    /// due are looked at: each is forgotten, or filed again at its real
    /// deadline (packets since it was filed moved it on).
    fn sweep(&mut self, now: Time) {
        let (idle, unconfigured) = (self.config.idle_timeout, self.config.unconfigured_timeout);
        while let Some(&(at, key)) = self.expiry.first() {
            if at > now {
                break;
            }
            self.expiry.pop_first();
            let Some(flow) = self.flows.get_mut(&key) else {
                continue;
            };
            let timeout = if flow.session.is_some() {
                idle
            } else {
                unconfigured
            };
            let deadline = flow.last_active + timeout;
            if deadline > now {
                flow.expires_at = deadline;
                self.expiry.insert((deadline, key));
                continue;
            }
            self.remove_flow(key);
            self.stats.expired += 1;
        }
        self.next_sweep = now + Duration::from_secs(1);
    }

    /// Forgets a flow and everything that points to it.
    fn remove_flow(&mut self, key: FlowKey) {
        let Some(flow) = self.flows.remove(&key) else {
            return;
        };
        for id in &flow.sessions {
            self.sessions.remove(id);
        }
        self.expiry.remove(&(flow.expires_at, key));
        match flow.session {
            Some(session) => {
                if let Some(at) = session.next_at {
                    self.timers.remove(&(at, key));
                }
            }
            None => {
                self.unconfigured.remove(&(flow.created, key));
            }
        }
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
