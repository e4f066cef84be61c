//! One tracked connection (appendix A): its handshake, the RTT to each
//! end, its dominant direction, and the protection of that direction.
//!
//! The handshake gives both initial RTTs (Figure 14): the client's first
//! Initial, the server's first Handshake (or Retry), and the client's
//! first Handshake (or, after a Retry, its next Initial). Until then
//! nothing is protected; afterwards the connection is its 4-tuple.

use crate::Side;
use crate::config::PemiConfig;
use crate::dominant::Dominant;
use crate::protect::{Env, Path, Protection};
use crate::rtt::RttEstimate;
use crate::wire::{self, LongType};
use netsim::{Datagram, Time, Transmit};
use serde::Serialize;
use std::net::SocketAddr;
use std::time::Duration;

/// Where a connection's handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handshake {
    /// The client's first Initial passed at `at`.
    Initial { at: Time },
    /// The server answered at `at` (with a Retry: the client's next
    /// Initial completes it).
    Answered { at: Time, retry: bool },
    /// Both RTTs measured.
    Done,
}

/// A connection PEMI tracks.
///
/// Laid out for the cache (`repr(C)`, declaration order; 64-byte
/// aligned), as [`Protection`] is: what every datagram reads or writes
/// fills the first lines, and each end's smoothed RTT (read for the
/// end-to-end RTT) comes first in its [`RttEstimate`].
#[repr(C, align(64))]
pub(crate) struct Conn {
    // Line 1: the lookup's and the side's.
    pub(crate) client: SocketAddr,
    pub(crate) server: SocketAddr,
    // Line 2.
    pub(crate) last_seen: Time,
    /// Packets and bytes each end sent.
    packets: [u64; 2],
    bytes: [u64; 2],
    protection: Option<Box<Protection>>,
    /// The earliest wake-up the engine has scheduled for it.
    pub(crate) scheduled: Option<Time>,
    // Line 3.
    dominant: Dominant,
    pub(crate) created: Time,
    // Line 4, then the client's RTT in it and the server's in line 6.
    handshake: Handshake,
    /// RTT between PEMI and each end ([`Side::index`]).
    rtt: [RttEstimate; 2],
}

/// What a connection asks of the engine after an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Asks {
    /// The handshake completed.
    pub(crate) handshake_done: bool,
    /// Send an ICMP echo probe to this end now.
    pub(crate) probe: Option<SocketAddr>,
}

/// A connection as [`crate::Pemi::connections`] reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConnSummary {
    /// The client's address.
    pub client: SocketAddr,
    /// The server's address.
    pub server: SocketAddr,
    /// `handshake` or `established`.
    pub state: &'static str,
    /// The protected sender, once decided.
    pub dominant: Option<Side>,
    /// Packets the client and the server sent.
    pub packets: [u64; 2],
    /// Bytes the client and the server sent.
    pub bytes: [u64; 2],
    /// Smoothed RTT between PEMI and the client.
    pub rtt_client: Option<Duration>,
    /// Smoothed RTT between PEMI and the server.
    pub rtt_server: Option<Duration>,
    /// Protected packets forwarded while protecting.
    pub protected: u64,
    /// Replies seen while protecting.
    pub replies: u64,
    /// The estimated eliciting threshold (while protecting).
    pub eliciting_threshold: Option<u8>,
    /// PEMI's retransmissions.
    pub retransmitted: u64,
    /// Flowlets not yet finished.
    pub flowlets: usize,
    /// The Copa window, in packets (while protecting).
    pub cwnd: Option<u64>,
    /// Time since its last packet.
    pub idle: Duration,
}

impl Conn {
    /// A connection whose client sent its first Initial at `now`.
    pub(crate) fn new(client: SocketAddr, server: SocketAddr, now: Time) -> Conn {
        Conn {
            client,
            server,
            created: now,
            last_seen: now,
            handshake: Handshake::Initial { at: now },
            rtt: [RttEstimate::default(); 2],
            packets: [0; 2],
            bytes: [0; 2],
            dominant: Dominant::default(),
            protection: None,
            scheduled: None,
        }
    }

    /// Whether the handshake is still going on.
    pub(crate) fn in_handshake(&self) -> bool {
        self.handshake != Handshake::Done
    }

    /// The end-to-end smoothed RTT (both ends' estimates).
    fn e2e(&self) -> Duration {
        let [client, server] = self.rtt.map(|r| r.srtt().unwrap_or_default());
        (client + server).max(Duration::from_micros(1))
    }

    /// Splits the connection into its protection and the path it protects.
    fn protected(&mut self) -> Option<(&mut Protection, Path<'_>)> {
        let e2e = self.e2e();
        let protection = self.protection.as_deref_mut()?;
        let sender = protection.sender;
        let receiver = sender.other();
        let path = Path {
            rtt: &mut self.rtt[receiver.index()],
            e2e,
            sender: match sender {
                Side::Client => self.client,
                Side::Server => self.server,
            },
            receiver: match receiver {
                Side::Client => self.client,
                Side::Server => self.server,
            },
        };
        Some((protection, path))
    }

    /// A datagram of this connection from `side`: tracked, protected or
    /// answered, and forwarded.
    pub(crate) fn on_datagram(
        &mut self,
        env: &mut Env<'_>,
        side: Side,
        datagram: Datagram,
    ) -> Asks {
        let now = env.now;
        let mut asks = Asks::default();
        self.last_seen = now;
        let len = datagram.payload.len() as u64;
        self.packets[side.index()] += 1;
        self.bytes[side.index()] += len;
        let summary = wire::summarize(&datagram.payload).ok();
        if self.in_handshake() {
            if let Some(summary) = summary {
                asks.handshake_done = self.track_handshake(now, side, &summary);
            }
            env.out.push_back(Transmit::at(now, datagram));
            return asks;
        }
        let e2e = self.e2e();
        if let Some(dominant) = self.dominant.on_packet(now, side, len, e2e) {
            env.stats.direction_changes += 1;
            if let Some(mut old) = self.protection.take() {
                old.release(env);
            }
            self.protection = dominant.map(|sender| Protection::boxed(sender, env.config));
        }
        let spin = summary.and_then(|s| s.spin);
        let Some((protection, mut path)) = self.protected() else {
            env.out.push_back(Transmit::at(now, datagram));
            return asks;
        };
        let calibrate = env.config.spin_calibration;
        if side == protection.sender {
            if let (true, Some(spin)) = (calibrate, spin) {
                protection.spin.on_sent(now, spin, path.e2e);
            }
            protection.on_sent(env, &mut path, datagram);
        } else {
            if let (true, Some(spin)) = (calibrate, spin)
                && let Some(sample) = protection.spin.on_reply(now, spin, path.e2e)
            {
                env.stats.spin_samples += 1;
                protection.calibrate(env, &mut path, sample);
            }
            protection.on_reply(env, &mut path, datagram);
        }
        asks.probe = self.probe_due(env.config, now);
        asks
    }

    /// Appendix A's handshake steps; returns whether it completed.
    fn track_handshake(&mut self, now: Time, side: Side, summary: &wire::Summary) -> bool {
        match (self.handshake, side) {
            (Handshake::Initial { at }, Side::Server) => {
                let retry = summary.has(LongType::Retry);
                if retry || summary.has(LongType::Handshake) {
                    self.rtt[Side::Server.index()].reset(now, now - at);
                    self.handshake = Handshake::Answered { at: now, retry };
                }
                false
            }
            (Handshake::Answered { at, retry }, Side::Client) => {
                let done = if retry {
                    summary.has(LongType::Initial)
                } else {
                    summary.has(LongType::Handshake)
                };
                if done {
                    self.rtt[Side::Client.index()].reset(now, now - at);
                    self.handshake = Handshake::Done;
                }
                done
            }
            _ => false,
        }
    }

    /// The protected receiver's address if an ICMP probe is due now: once
    /// per end-to-end RTT while protecting a connection that does not spin
    /// and has sent something within the last end-to-end RTT.
    fn probe_due(&mut self, config: &PemiConfig, now: Time) -> Option<SocketAddr> {
        config.probe_addr?;
        let e2e = self.e2e();
        let (client, server) = (self.client, self.server);
        let protection = self.protection.as_deref_mut()?;
        if protection.spin.spinning(now, 4 * e2e) {
            protection.next_probe = None;
            return None;
        }
        match protection.next_probe {
            Some(at) if at > now => None,
            // Idle for an end-to-end RTT: no probes until it is active. A
            // probe that fell due while it was still active, its timer
            // handled late (as real mode's can be), is dropped: left due,
            // it would re-arm the engine's timer in the past for ever.
            _ if protection.active_until < now => {
                let active_until = protection.active_until;
                protection.next_probe = protection.next_probe.filter(|&at| at > active_until);
                None
            }
            _ => {
                protection.next_probe = Some(now + e2e);
                Some(match protection.sender.other() {
                    Side::Client => client,
                    Side::Server => server,
                })
            }
        }
    }

    /// The engine's timer for this connection.
    pub(crate) fn on_timer(&mut self, env: &mut Env<'_>) -> Asks {
        let mut asks = Asks::default();
        if let Some((protection, mut path)) = self.protected() {
            protection.on_timer(env, &mut path);
        }
        asks.probe = self.probe_due(env.config, env.now);
        asks
    }

    /// An ICMP echo reply from the receiver to one of its probes.
    pub(crate) fn on_probe_reply(&mut self, env: &mut Env<'_>, rtt: Duration) {
        if let Some((protection, mut path)) = self.protected() {
            protection.calibrate(env, &mut path, rtt);
        }
    }

    /// When it next needs [`Conn::on_timer`].
    pub(crate) fn next_wake(&mut self, config: &PemiConfig) -> Option<Time> {
        let (protection, path) = self.protected()?;
        protection.next_wake(config, &path)
    }

    /// Whether [`Conn::on_timer`] would change nothing if called at any
    /// time from `now` until `wake` (for ever, if `None`) with no event
    /// between, so that a wake-up scheduled before `wake` can move to it.
    /// [`Conn::next_wake`] covers the protection's deadlines; left is the
    /// probes' bookkeeping in [`Conn::probe_due`]: a probe not yet armed
    /// goes out at the first timer call of an active connection, and a
    /// spinning one's pending probe is dropped at the first call while it
    /// spins. Spinning stops only with time, and starts, like activity,
    /// only with a datagram.
    pub(crate) fn idle_until(&self, config: &PemiConfig, now: Time, wake: Option<Time>) -> bool {
        if config.probe_addr.is_none() {
            return true;
        }
        let Some(protection) = self.protection.as_deref() else {
            return true;
        };
        match protection.spin.spinning_until(now, 4 * self.e2e()) {
            Some(until) => protection.next_probe.is_none() && wake.is_some_and(|w| w <= until),
            None => protection.next_probe.is_some() || protection.active_until < now,
        }
    }

    /// When the table should look at it again: the end of its handshake
    /// timeout or of its idle timeout.
    pub(crate) fn expiry(&self, config: &PemiConfig) -> Time {
        let idle = self.last_seen + config.idle_timeout;
        if self.in_handshake() {
            idle.min(self.created + config.handshake_timeout)
        } else {
            idle
        }
    }

    /// Frees its buffers before it is forgotten.
    pub(crate) fn release(&mut self, env: &mut Env<'_>) {
        if let Some(protection) = self.protection.as_deref_mut() {
            protection.release(env);
        }
    }

    /// Its state for a dump or a report.
    pub(crate) fn summary(&self, config: &PemiConfig, now: Time) -> ConnSummary {
        let protection = self.protection.as_deref();
        ConnSummary {
            client: self.client,
            server: self.server,
            state: if self.in_handshake() {
                "handshake"
            } else {
                "established"
            },
            dominant: self.dominant.current(),
            packets: self.packets,
            bytes: self.bytes,
            rtt_client: self.rtt[Side::Client.index()].srtt(),
            rtt_server: self.rtt[Side::Server.index()].srtt(),
            protected: protection.map_or(0, |p| p.sent),
            replies: protection.map_or(0, |p| p.replies),
            eliciting_threshold: protection.map(|p| p.threshold(config) as u8),
            retransmitted: protection.map_or(0, |p| p.resent),
            flowlets: protection.map_or(0, Protection::active_flowlets),
            cwnd: protection.map(Protection::cwnd),
            idle: now - self.last_seen,
        }
    }
}
