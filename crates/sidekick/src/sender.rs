//! The data-sender engine (§4.1, §4.3.1): sits beside the sender's UDP
//! socket, finds the proxy, logs every datagram the sender sends, decodes
//! each quACK with the send log and retransmits what the proxy did not
//! receive.
//!
//! Sans-IO: the caller reports the datagrams its stack sends
//! ([`SidekickSender::on_sent`]) and offers the ones it receives
//! ([`SidekickSender::on_received`], which takes the sidekick's own), then
//! sends what [`SidekickSender::poll_transmit`] returns and hands what
//! [`SidekickSender::poll_event`] returns to its congestion controller:
//! the near segment's [`Signal`]s of `cc`'s contract (`cc::signals`), which
//! PACUBIC reads.
//!
//! **Quota.** The sender grants quACKs in proportion to its own traffic:
//! its grant is a running total, [`SenderConfig::quota_grant`] (a reserve
//! that covers the quACKs in flight between grants) plus the quACKs its
//! packets justify at the configured interval — one per `n` packets it
//! sent (retransmissions included), or two per interval of milliseconds in
//! which it sent (the proxy's timer and the sender's clock do not share
//! phase, so one of the sender's intervals can straddle two of the
//! proxy's). Spoofed packets on its 4-tuple can then use up its quota but
//! never make it grant more: the quACKs it ever receives are at most the
//! reserve, plus what its own packets justify, plus the initial one.
//!
//! Retransmissions are the byte-identical datagrams. That works with an
//! unmodified QUIC stack: the receiver never saw that packet number, so the
//! copy is an ordinary, if late, packet to it (noq-proto's receiver takes
//! one up to 8192 packet numbers late: third_party/noq-proto/PEPKIT.md,
//! item 9), and the sender's stack frees nothing until the end-to-end ACK. A datagram is resent at most
//! [`SenderConfig::max_retransmissions`] times; after that end-to-end
//! recovery takes over.

use crate::wire::{Config, Control, Discovery, Interval};
use cc::Signal;
use netsim::{Datagram, Seed, Time};
use quack::{Classification, Field, IdentifierSource, Message, SendLog, SendSeq};
use rand_chacha::rand_core::RngCore;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// How the sender uses its sidekick.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// The quACK interval to ask for.
    pub interval: Interval,
    /// The threshold t to ask for.
    pub threshold: u8,
    /// Where identifiers start in each UDP payload (21: after a QUIC short
    /// header with a 20-byte connection ID).
    pub id_offset: u16,
    /// A missing packet is lost once this many later packets were received.
    pub reorder_threshold: u32,
    /// The reserve of quACKs granted beyond what the sender's own packets
    /// justify; more are granted when the quota left falls to half of it.
    pub quota_grant: u32,
    /// At most one reset per this interval (the proxy may not have applied
    /// the last one yet).
    pub min_reset_interval: Duration,
    /// The sender's UDP port for control messages (a different port from
    /// the base connection's, §4.1).
    pub control_port: u16,
    /// Resend the request if no reply came within this time ...
    pub request_timeout: Duration,
    /// ... up to this many times in all; then give up (no proxy on path).
    pub request_attempts: u32,
    /// Configure again if no quACK came within this time of configuring
    /// (the configure message or the first quACK was lost).
    pub configure_timeout: Duration,
    /// Resend one datagram at most this often.
    pub max_retransmissions: u8,
    /// Unsettled packets kept at most; beyond, the log is reset and the
    /// packets left to end-to-end recovery (quACKs stopped coming).
    pub max_log: usize,
}

impl SenderConfig {
    /// The settings of the paper's scenario 2 (quACK every 30 ms, t = 10),
    /// with the reference implementation's reordering rule and reset
    /// interval defaults.
    pub fn new(interval: Interval, threshold: u8) -> SenderConfig {
        SenderConfig {
            interval,
            threshold,
            id_offset: quack::QUIC_SHORT_HEADER_OFFSET as u16,
            reorder_threshold: quack::DEFAULT_REORDER_THRESHOLD,
            quota_grant: 1024,
            min_reset_interval: Duration::from_millis(10),
            control_port: 5103,
            request_timeout: Duration::from_secs(1),
            request_attempts: 3,
            configure_timeout: Duration::from_millis(200),
            max_retransmissions: 2,
            max_log: 1 << 16,
        }
    }
}

/// The engine's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Datagrams logged.
    pub logged: u64,
    /// QuACKs applied.
    pub quacks: u64,
    /// QuACKs ignored: duplicates, or from before the last reset.
    pub stale_quacks: u64,
    /// Control datagrams that did not parse.
    pub malformed: u64,
    /// Packets the quACKs showed received.
    pub received: u64,
    /// Packets declared lost.
    pub lost: u64,
    /// Datagrams retransmitted.
    pub retransmitted: u64,
    /// Packets left to end-to-end recovery (collisions, exhausted
    /// retransmissions, resets).
    pub abandoned: u64,
    /// Resets sent.
    pub resets: u64,
    /// Configure messages sent (the first and each quota grant).
    pub configures: u64,
    /// QuACKs the sender's own packets justify (the running total of its
    /// grants, less the reserve).
    pub justified: u64,
}

/// A grant repeated without change at most this often in a row, while no
/// quACK comes (the proxy may well have it).
const GRANT_REPEATS: u8 = 3;

enum State {
    /// Not started.
    Idle,
    /// Waiting for a reply.
    Requesting {
        nonce: u64,
        sent_at: Time,
        attempts: u32,
    },
    /// A proxy answered.
    Active {
        proxy: SocketAddr,
        session: u64,
        quota_left: u32,
        /// When the sender last configured while the proxy had no quota
        /// left (the first configuration, or a grant after the last quACK
        /// the quota allowed), until a quACK arrives: if that message was
        /// lost, no quACK ever will, so it is sent again.
        awaiting_quack: Option<Time>,
        /// The last grant sent with a session ID from a quACK (one the
        /// proxy takes grants from).
        granted: Option<u32>,
        /// The grant of the last configure message sent, and how many
        /// times in a row the timer repeated it.
        offered: u32,
        repeats: u8,
        /// When a grant was last sent in answer to a quACK, until a quACK
        /// shows the quota raised again.
        grant_sent_at: Option<Time>,
    },
    /// Nobody answered.
    Off,
}

/// A logged datagram, kept for retransmission.
struct Sent {
    datagram: Datagram,
    at: Time,
    retransmissions: u8,
}

/// The sender engine for identifiers of field `F`.
pub struct SidekickSender<F: Field> {
    config: SenderConfig,
    base_local: SocketAddr,
    base_remote: SocketAddr,
    control: SocketAddr,
    state: State,
    log: SendLog<F>,
    sent: BTreeMap<SendSeq, Sent>,
    classification: Classification,
    epoch: u8,
    last_reset: Option<Time>,
    nonce: u64,
    /// QuACKs the sender's packets justify, a running total (wrapping).
    justified: u32,
    /// Packets toward the next justified quACK (packet intervals).
    group: u32,
    /// The end of the interval that justified the last quACK
    /// (millisecond intervals).
    interval_end: Option<Time>,
    outbox: VecDeque<Datagram>,
    events: VecDeque<Signal>,
    stats: SenderStats,
}

impl<F: Field> SidekickSender<F> {
    /// An engine for the base connection `base_local` → `base_remote`.
    pub fn new(
        config: SenderConfig,
        base_local: SocketAddr,
        base_remote: SocketAddr,
        seed: Seed,
    ) -> SidekickSender<F> {
        let log = SendLog::new(usize::from(config.threshold.max(1)))
            .expect("a threshold in 1..=255")
            .with_reorder_threshold(config.reorder_threshold);
        let control = SocketAddr::new(base_local.ip(), config.control_port);
        let nonce = seed.rng("sidekick/sender/nonce").next_u64();
        SidekickSender {
            config,
            base_local,
            base_remote,
            control,
            state: State::Idle,
            log,
            sent: BTreeMap::new(),
            classification: Classification::default(),
            epoch: 0,
            last_reset: None,
            nonce,
            justified: 0,
            group: 0,
            interval_end: None,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            stats: SenderStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// The sender's control address (quACKs arrive here).
    pub fn control_addr(&self) -> SocketAddr {
        self.control
    }

    /// Whether a proxy answered.
    pub fn is_active(&self) -> bool {
        matches!(self.state, State::Active { .. })
    }

    /// Sends the sidekick request on the base connection.
    pub fn start(&mut self, now: Time) {
        if matches!(self.state, State::Idle) {
            self.request(now, 1);
        }
    }

    fn request(&mut self, now: Time, attempts: u32) {
        let request = Discovery::Request { nonce: self.nonce }.to_bytes();
        self.outbox
            .push_back(Datagram::new(self.base_local, self.base_remote, request));
        self.state = State::Requesting {
            nonce: self.nonce,
            sent_at: now,
            attempts,
        };
    }

    /// Logs a datagram the sender's stack sent on the base connection.
    pub fn on_sent(&mut self, now: Time, datagram: &Datagram) {
        if !self.is_active() || datagram.src != self.base_local || datagram.dst != self.base_remote
        {
            return;
        }
        let source = IdentifierSource::Offset(usize::from(self.config.id_offset));
        let Some(id) = source.identify::<F>(&datagram.payload) else {
            return;
        };
        if self.log.len() >= self.config.max_log {
            self.reset(now);
        }
        let seq = self.log.push(id);
        self.stats.logged += 1;
        self.justify(now);
        self.sent.insert(
            seq,
            Sent {
                datagram: datagram.clone(),
                at: now,
                retransmissions: 0,
            },
        );
    }

    /// Offers a received datagram; true if it was the sidekick's (a reply
    /// or a quACK), which the caller then does not pass to its stack.
    pub fn on_received(&mut self, now: Time, datagram: &Datagram) -> bool {
        if datagram.dst == self.control {
            if let State::Active { proxy, .. } = self.state
                && datagram.src == proxy
            {
                self.on_control(now, &datagram.payload);
                return true;
            }
            return false;
        }
        if datagram.dst != self.base_local || !Discovery::is_discovery(&datagram.payload) {
            return false;
        }
        let State::Requesting { nonce, .. } = self.state else {
            return true; // a late or repeated reply
        };
        match Discovery::parse(&datagram.payload) {
            Ok(Discovery::Reply {
                nonce: echoed,
                session,
                proxy,
            }) if echoed == nonce && datagram.src == self.base_remote => {
                self.state = State::Active {
                    proxy,
                    session,
                    quota_left: 1,
                    awaiting_quack: Some(now),
                    granted: None,
                    offered: self.grant(),
                    repeats: 0,
                    grant_sent_at: None,
                };
                // The reply's ID configures; the proxy takes no grant from
                // it (only from an ID that came in a quACK).
                self.configure(session, proxy);
                self.events.push_back(Signal::ProxyActive);
            }
            Ok(_) => {}
            Err(_) => self.stats.malformed += 1,
        }
        true
    }

    /// Counts a packet sent on the base connection toward the quACKs the
    /// sender's traffic justifies.
    fn justify(&mut self, now: Time) {
        let before = self.justified;
        match self.config.interval {
            Interval::Packets(n) => {
                if self.group == 0 {
                    self.justified = self.justified.wrapping_add(1);
                }
                self.group = (self.group + 1) % n.max(1);
            }
            Interval::Millis(ms) => {
                if self.interval_end.is_none_or(|end| now >= end) {
                    self.justified = self.justified.wrapping_add(2);
                    self.interval_end = Some(now + Duration::from_millis(u64::from(ms)));
                }
            }
        }
        self.stats.justified += u64::from(self.justified.wrapping_sub(before));
    }

    /// The running total of quACKs granted: the reserve plus what the
    /// sender's packets justify.
    fn grant(&self) -> u32 {
        self.config.quota_grant.wrapping_add(self.justified)
    }

    fn configure(&mut self, session: u64, proxy: SocketAddr) {
        let config = Config {
            interval: self.config.interval,
            threshold: self.config.threshold,
            id_bytes: F::ID_BYTES as u8,
            id_offset: self.config.id_offset,
            quota: self.grant(),
        };
        self.stats.configures += 1;
        self.outbox.push_back(Datagram::new(
            self.control,
            proxy,
            Control::Configure { session, config }.to_bytes(),
        ));
    }

    fn on_control(&mut self, now: Time, payload: &[u8]) {
        let Ok(Control::Quack {
            next_session,
            quota_left,
            epoch,
            quack,
        }) = Control::parse(payload)
        else {
            self.stats.malformed += 1;
            return;
        };
        let grant = self.grant();
        let State::Active {
            proxy,
            session,
            quota_left: left,
            awaiting_quack,
            granted,
            offered,
            repeats,
            grant_sent_at,
        } = &mut self.state
        else {
            return;
        };
        *session = next_session;
        *left = quota_left;
        // Grant what the sender's packets justified since the last grant
        // before the quota runs out. While some is left, a lost grant is
        // repeated at the next quACK; once none is, only the timer can
        // repeat it.
        *awaiting_quack = (quota_left == 0).then_some(now);
        let proxy = *proxy;
        let low = quota_left <= self.config.quota_grant / 2;
        if !low {
            *grant_sent_at = None; // the last grant arrived
        }
        // One grant per round trip: the quACKs that cross it do not show
        // it yet (unless it seems lost).
        let in_flight = grant_sent_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.config.configure_timeout);
        if low && !in_flight && *granted != Some(grant) {
            *granted = Some(grant);
            *offered = grant;
            *repeats = 0;
            *grant_sent_at = Some(now);
            self.configure(next_session, proxy);
        }
        if epoch != self.epoch {
            self.stats.stale_quacks += 1;
            self.repeat_reset(now, next_session, proxy);
            return;
        }
        let Ok(message) = Message::<F>::parse(&quack) else {
            self.stats.malformed += 1;
            return;
        };
        let mut out = std::mem::take(&mut self.classification);
        let applied = self.log.apply_message(&message, &mut out);
        match applied {
            Err(_) => self.reset(now),
            Ok(()) if out.duplicate => self.stats.stale_quacks += 1,
            Ok(()) => self.settle(now, &out),
        }
        self.classification = out;
    }

    /// Acts on what a quACK settled.
    fn settle(&mut self, now: Time, out: &Classification) {
        self.stats.quacks += 1;
        let mut bytes = 0;
        let mut newest: Option<Time> = None;
        for seq in &out.received {
            if let Some(sent) = self.sent.remove(seq) {
                bytes += sent.datagram.payload.len() as u64;
                newest = Some(sent.at);
            }
        }
        if !out.received.is_empty() {
            self.stats.received += out.received.len() as u64;
            self.events.push_back(Signal::NearReceived {
                packets: out.received.len(),
                bytes,
            });
        }
        if let Some(at) = newest {
            self.events
                .push_back(Signal::NearRtt(now.saturating_duration_since(at)));
        }
        for seq in &out.indeterminate {
            self.sent.remove(seq);
            self.stats.abandoned += 1;
        }
        if out.lost.is_empty() {
            return;
        }
        let (mut lost_bytes, mut largest_sent_at) = (0, Time::ZERO);
        for seq in &out.lost {
            let Some(mut sent) = self.sent.remove(seq) else {
                continue;
            };
            lost_bytes += sent.datagram.payload.len() as u64;
            largest_sent_at = largest_sent_at.max(sent.at);
            if sent.retransmissions >= self.config.max_retransmissions {
                self.stats.abandoned += 1;
                continue;
            }
            // Resend the same bytes, and log the copy like any datagram.
            self.outbox.push_back(sent.datagram.clone());
            self.stats.retransmitted += 1;
            sent.retransmissions += 1;
            sent.at = now;
            let id = IdentifierSource::Offset(usize::from(self.config.id_offset))
                .identify::<F>(&sent.datagram.payload)
                .expect("logged datagrams have identifiers");
            let seq = self.log.push(id);
            self.sent.insert(seq, sent);
            self.justify(now);
        }
        self.stats.lost += out.lost.len() as u64;
        self.events.push_back(Signal::NearLost {
            packets: out.lost.len(),
            bytes: lost_bytes,
            largest_sent_at,
        });
    }

    /// Asks the proxy to reset, at most once per `min_reset_interval`, and
    /// leaves the unsettled packets to end-to-end recovery.
    fn reset(&mut self, now: Time) {
        let State::Active { proxy, session, .. } = self.state else {
            return;
        };
        if self
            .last_reset
            .is_some_and(|at| now.saturating_duration_since(at) < self.config.min_reset_interval)
        {
            return;
        }
        self.last_reset = Some(now);
        self.epoch = self.epoch.wrapping_add(1);
        self.stats.abandoned += self.log.reset() as u64;
        self.sent.clear();
        self.stats.resets += 1;
        self.outbox.push_back(Datagram::new(
            self.control,
            proxy,
            Control::Reset {
                session,
                epoch: self.epoch,
            }
            .to_bytes(),
        ));
        self.events.push_back(Signal::NearReset);
    }

    /// QuACKs still carry an old epoch: if the last reset went out long
    /// enough ago that it should have arrived, it was lost, and quACKs
    /// would stay stale forever; send it again (the proxy ignores a reset
    /// to the epoch it already has).
    fn repeat_reset(&mut self, now: Time, session: u64, proxy: SocketAddr) {
        let Some(at) = self.last_reset else {
            return;
        };
        if now.saturating_duration_since(at) < self.config.configure_timeout {
            return;
        }
        self.last_reset = Some(now);
        self.stats.resets += 1;
        let reset = Control::Reset {
            session,
            epoch: self.epoch,
        };
        self.outbox
            .push_back(Datagram::new(self.control, proxy, reset.to_bytes()));
    }

    /// Retries the request, or a configuration the proxy needed to send
    /// quACKs at all, when its timer expires.
    pub fn handle_timeout(&mut self, now: Time) {
        let grant = self.grant();
        if let State::Active {
            proxy,
            session,
            awaiting_quack: Some(at),
            granted,
            offered,
            repeats,
            ..
        } = &mut self.state
            && now >= *at + self.config.configure_timeout
        {
            *at = now;
            // The same grant a few times (the proxy may have it and simply
            // have nothing to quACK); a larger one whenever there is one.
            if *offered == grant {
                if *repeats >= GRANT_REPEATS {
                    return;
                }
                *repeats += 1;
            } else {
                *offered = grant;
                *repeats = 0;
            }
            if granted.is_some() {
                *granted = Some(grant);
            }
            let (proxy, session) = (*proxy, *session);
            self.configure(session, proxy);
            return;
        }
        if let State::Requesting {
            sent_at, attempts, ..
        } = self.state
            && now >= sent_at + self.config.request_timeout
        {
            if attempts >= self.config.request_attempts {
                self.state = State::Off;
                self.events.push_back(Signal::NoProxy);
            } else {
                self.request(now, attempts + 1);
            }
        }
    }

    /// When [`SidekickSender::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.state {
            State::Requesting { sent_at, .. } => Some(sent_at + self.config.request_timeout),
            State::Active {
                awaiting_quack: Some(at),
                ..
            } => Some(at + self.config.configure_timeout),
            _ => None,
        }
    }

    /// The next datagram to send: a request, control message or
    /// retransmission.
    pub fn poll_transmit(&mut self) -> Option<Datagram> {
        self.outbox.pop_front()
    }

    /// The next signal for the congestion controller: a proxy answered or
    /// none did, packets the proxy received or lost, a near RTT sample, a
    /// reset.
    pub fn poll_event(&mut self) -> Option<Signal> {
        self.events.pop_front()
    }
}
