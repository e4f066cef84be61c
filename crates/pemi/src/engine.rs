//! The engine ([`Pemi`]): the bounded connection table, the timers, the
//! ICMP probes and the [`netsim::Middlebox`] calling convention.
//!
//! Every datagram leaves at once and unchanged (the same object, moved),
//! except a protected connection's replies while its rate is enforced.
//! Datagrams of no tracked connection cost one hash lookup, plus a header
//! walk when they could open a connection. The table holds at most
//! `max_connections`, of which at most `max_handshakes` in their
//! handshake (a new Initial evicts the oldest one): a flood of spoofed
//! Initials keeps the table at its bound and leaves completed connections
//! alone.

use crate::Side;
use crate::config::PemiConfig;
use crate::conn::{Asks, Conn, ConnSummary};
use crate::protect::{Env, Work};
use crate::stats::{PemiStats, Record};
use crate::wire::{self, LongType, MIN_INITIAL_DATAGRAM};
use netsim::{Datagram, Interface, Middlebox, Protocol, Time, Transmit};
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;

/// Probes awaiting their reply.
const PENDING_PROBES: usize = 1024;
/// Bytes of echo data in a probe.
const PROBE_DATA: usize = 56;

/// A connection's key: its two addresses, the smaller first.
type Key = (SocketAddr, SocketAddr);

fn key(a: SocketAddr, b: SocketAddr) -> Key {
    if a <= b { (a, b) } else { (b, a) }
}

/// A table slot; its generation tells a live entry from a stale timer.
struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

/// An ICMP probe in flight.
#[derive(Clone, Copy, Debug)]
struct Probe {
    seq: u16,
    slot: u32,
    generation: u32,
    at: Time,
}

/// What connections borrow while they handle an event.
///
/// `repr(C)`: what every datagram touches first, after [`Pemi`]'s own
/// per-datagram fields (see there).
#[derive(Default)]
#[repr(C)]
struct Parts {
    buffered: usize,
    record: Option<Record>,
    out: VecDeque<Transmit>,
    stats: PemiStats,
    work: Work,
}

impl Parts {
    fn env<'a>(&'a mut self, config: &'a PemiConfig, now: Time) -> Env<'a> {
        Env {
            config,
            now,
            out: &mut self.out,
            stats: &mut self.stats,
            buffered: &mut self.buffered,
            record: &mut self.record,
            work: &mut self.work,
        }
    }
}

/// PEMI: a transparent in-path middlebox for unmodified QUIC.
///
/// Laid out for the cache (`repr(C)`, declaration order; 64-byte
/// aligned): a datagram arriving after the engine's data left the cache
/// fetches each line it touches, so the fields every datagram reads come
/// first, then [`Parts`], whose per-datagram fields come first too.
#[repr(C, align(64))]
pub struct Pemi {
    /// The earlier of the tops of `wakes` and `expiry` (what
    /// `poll_timeout` answers), kept as they change so that a datagram's
    /// poll reads one field rather than two heaps' cache lines.
    next_timeout: Option<Time>,
    slots: Vec<Slot>,
    next_seq: u16,
    parts: Parts,
    config: PemiConfig,
    index: HashMap<Key, u32, rustc_hash::FxBuildHasher>,
    free: Vec<u32>,
    /// Connections in their handshake, oldest first (with stale entries).
    handshakes: VecDeque<(u32, u32)>,
    in_handshake: usize,
    wakes: BinaryHeap<Reverse<(Time, u32, u32)>>,
    /// `handle_timeout`'s list of the wakes due (kept for its allocation).
    due: Vec<(Time, u32, u32)>,
    expiry: BinaryHeap<Reverse<(Time, u32, u32)>>,
    probes: VecDeque<Probe>,
}

impl Pemi {
    /// An engine with `config`.
    pub fn new(config: PemiConfig) -> Pemi {
        let record = config.record.then(Record::default);
        Pemi {
            config,
            index: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            handshakes: VecDeque::new(),
            in_handshake: 0,
            wakes: BinaryHeap::new(),
            next_timeout: None,
            due: Vec::new(),
            expiry: BinaryHeap::new(),
            probes: VecDeque::new(),
            next_seq: 0,
            parts: Parts {
                record,
                ..Parts::default()
            },
        }
    }

    /// Its settings.
    pub fn config(&self) -> &PemiConfig {
        &self.config
    }

    /// Its counters.
    pub fn stats(&self) -> &PemiStats {
        &self.parts.stats
    }

    /// The record of inferences and estimates, if it keeps one.
    pub fn record(&self) -> Option<&Record> {
        self.parts.record.as_ref()
    }

    /// Every tracked connection, ordered by addresses.
    pub fn connections(&self, now: Time) -> Vec<ConnSummary> {
        let mut all: Vec<ConnSummary> = self
            .slots
            .iter()
            .filter_map(|slot| slot.conn.as_ref())
            .map(|conn| conn.summary(&self.config, now))
            .collect();
        all.sort_by_key(|c| (c.client, c.server));
        all
    }

    fn forward(&mut self, now: Time, datagram: Datagram) {
        self.parts.out.push_back(Transmit::at(now, datagram));
    }

    /// Whether `datagram` opens a connection: a client's Initial (without a
    /// server's Handshake), padded as RFC 9000 requires.
    fn opens_connection(datagram: &Datagram) -> bool {
        datagram.payload.len() >= MIN_INITIAL_DATAGRAM
            && wire::summarize(&datagram.payload)
                .is_ok_and(|s| s.has(LongType::Initial) && !s.has(LongType::Handshake))
    }

    /// A new connection from `datagram`'s source; `None` if the table is
    /// full of completed connections. Not inlined: the new [`Conn`]'s
    /// 64-byte alignment would realign the caller's stack frame.
    #[inline(never)]
    fn create(&mut self, now: Time, datagram: &Datagram) -> Option<u32> {
        if self.in_handshake >= self.config.max_handshakes {
            self.evict_oldest_handshake(now);
        }
        if self.index.len() >= self.config.max_connections || self.config.max_handshakes == 0 {
            self.parts.stats.table_full += 1;
            return None;
        }
        let conn = Conn::new(datagram.src, datagram.dst, now);
        let expiry = conn.expiry(&self.config);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].conn = Some(conn);
                slot
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    conn: Some(conn),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let generation = self.slots[slot as usize].generation;
        self.index.insert(key(datagram.src, datagram.dst), slot);
        self.handshakes.push_back((slot, generation));
        self.in_handshake += 1;
        self.push_expiry(expiry, slot, generation);
        if self.expiry.len() > 2 * self.slots.len().max(64) {
            // Evicted connections leave their expiry behind until it is
            // due: under a flood of Initials that is one entry per Initial
            // for a handshake timeout. Dropping the dead ones keeps the
            // heap within twice the table (only dead entries go, and those
            // do nothing when due, so nothing else changes).
            let slots = &self.slots;
            self.expiry
                .retain(|&Reverse((_, s, g))| live(slots, s, g).is_some());
            self.refresh_next_timeout();
        }
        self.parts.stats.connections += 1;
        self.parts.stats.tracked = self.index.len() as u64;
        if self.handshakes.len() > 2 * self.config.max_handshakes.max(16) {
            let slots = &self.slots;
            self.handshakes
                .retain(|&(s, g)| live(slots, s, g).is_some_and(Conn::in_handshake));
        }
        Some(slot)
    }

    fn evict_oldest_handshake(&mut self, now: Time) {
        while let Some((slot, generation)) = self.handshakes.pop_front() {
            if live(&self.slots, slot, generation).is_some_and(Conn::in_handshake) {
                self.remove(now, slot);
                self.parts.stats.handshakes_evicted += 1;
                return;
            }
        }
    }

    /// Forgets the connection in `slot`.
    fn remove(&mut self, now: Time, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        let Some(mut conn) = entry.conn.take() else {
            return;
        };
        entry.generation = entry.generation.wrapping_add(1);
        conn.release(&mut self.parts.env(&self.config, now));
        if conn.in_handshake() {
            self.in_handshake -= 1;
        }
        self.index.remove(&key(conn.client, conn.server));
        self.free.push(slot);
        self.parts.stats.tracked = self.index.len() as u64;
    }

    /// Hands an event's result to the engine: handshake bookkeeping, a
    /// probe, the connection's next wake-up.
    fn after(&mut self, now: Time, slot: u32, asks: Asks) {
        if asks.handshake_done {
            self.in_handshake -= 1;
            self.parts.stats.handshakes += 1;
        }
        // The slot's generation is read only when needed: it is
        // in a cache line of its own.
        if let (Some(to), Some(from)) = (asks.probe, self.config.probe_addr) {
            let generation = self.slots[slot as usize].generation;
            let seq = self.next_seq;
            self.next_seq = self.next_seq.wrapping_add(1);
            let probe = Datagram::echo_request(
                from,
                to.ip(),
                self.config.probe_id,
                seq,
                vec![0u8; PROBE_DATA],
            );
            self.parts.out.push_back(Transmit::at(now, probe));
            self.parts.stats.probes += 1;
            if self.probes.len() == PENDING_PROBES {
                self.probes.pop_front();
            }
            self.probes.push_back(Probe {
                seq,
                slot,
                generation,
                at: now,
            });
        }
        let Some(conn) = self.slots[slot as usize].conn.as_mut() else {
            return;
        };
        let wake = conn.next_wake(&self.config);
        match (wake, conn.scheduled) {
            (Some(wake), scheduled) if scheduled.is_none_or(|s| wake < s) => {
                conn.scheduled = Some(wake);
                let generation = self.slots[slot as usize].generation;
                self.wakes.push(Reverse((wake, slot, generation)));
                self.timer_at(wake);
            }
            // Its work moved later (a flowlet that grew, most often): the
            // wake-up it has would find nothing to do. Moved when it is
            // the engine's next one, so that the engine does not wake for
            // nothing; otherwise left, to find nothing.
            (_, Some(scheduled))
                if wake != Some(scheduled) && conn.idle_until(&self.config, now, wake) =>
            {
                self.defer_wake(slot, scheduled, wake);
            }
            _ => {}
        }
    }

    /// Moves `slot`'s wake-up at `scheduled` to `wake` (drops it, for
    /// `None`) if it is the next of all.
    fn defer_wake(&mut self, slot: u32, scheduled: Time, wake: Option<Time>) {
        let Some(mut top) = self.wakes.peek_mut() else {
            return;
        };
        // The generation, in a cache line of its own, only once the time
        // and the slot match.
        let (at, s, generation) = top.0;
        let entry = &mut self.slots[slot as usize];
        if (at, s) != (scheduled, slot) || generation != entry.generation {
            return;
        }
        match wake {
            Some(at) => {
                top.0.0 = at;
                drop(top); // sifts it down
            }
            None => {
                PeekMut::pop(top);
            }
        }
        if let Some(conn) = entry.conn.as_mut() {
            conn.scheduled = wake;
        }
        self.refresh_next_timeout();
    }

    /// Has the table look at `slot` again at `at` (`next_timeout` kept).
    fn push_expiry(&mut self, at: Time, slot: u32, generation: u32) {
        self.expiry.push(Reverse((at, slot, generation)));
        self.timer_at(at);
    }

    /// An entry at `at` joined one of the heaps.
    fn timer_at(&mut self, at: Time) {
        self.next_timeout = Some(self.next_timeout.map_or(at, |t| t.min(at)));
    }

    /// `next_timeout` from the heaps, after entries left them.
    fn refresh_next_timeout(&mut self) {
        self.next_timeout = self.heaps_next();
    }

    /// The earlier of the heaps' tops, read from the heaps.
    fn heaps_next(&self) -> Option<Time> {
        let wake = self.wakes.peek().map(|Reverse((t, _, _))| *t);
        let expiry = self.expiry.peek().map(|Reverse((t, _, _))| *t);
        wake.into_iter().chain(expiry).min()
    }

    /// An ICMP message: the answer to one of our probes, or forwarded.
    fn on_icmp(&mut self, now: Time, datagram: Datagram) {
        self.parts.stats.not_udp += 1;
        let ours = match datagram.protocol {
            Protocol::EchoReply { id, seq } => (id == self.config.probe_id
                && Some(datagram.dst.ip()) == self.config.probe_addr)
                .then_some(seq),
            _ => None,
        };
        let Some(seq) = ours else {
            return self.forward(now, datagram);
        };
        let Some(at) = self.probes.iter().position(|p| p.seq == seq) else {
            return;
        };
        let probe = self.probes.remove(at).expect("found");
        self.parts.stats.probe_replies += 1;
        let Some(conn) = live_mut(&mut self.slots, probe.slot, probe.generation) else {
            return;
        };
        conn.on_probe_reply(&mut self.parts.env(&self.config, now), now - probe.at);
        self.after(now, probe.slot, Asks::default());
    }
}

/// The live connection of `slot` if its generation is still `generation`.
fn live(slots: &[Slot], slot: u32, generation: u32) -> Option<&Conn> {
    let entry = slots.get(slot as usize)?;
    (entry.generation == generation).then_some(entry.conn.as_ref()?)
}

fn live_mut(slots: &mut [Slot], slot: u32, generation: u32) -> Option<&mut Conn> {
    let entry = slots.get_mut(slot as usize)?;
    (entry.generation == generation).then_some(entry.conn.as_mut()?)
}

impl Middlebox for Pemi {
    fn handle_datagram(&mut self, now: Time, _from: Interface, datagram: Datagram) {
        if !datagram.is_udp() {
            return self.on_icmp(now, datagram);
        }
        self.parts.stats.datagrams += 1;
        let slot = match self.index.get(&key(datagram.src, datagram.dst)) {
            Some(&slot) => slot,
            None if Self::opens_connection(&datagram) => match self.create(now, &datagram) {
                Some(slot) => slot,
                None => return self.forward(now, datagram),
            },
            None => {
                self.parts.stats.untracked += 1;
                return self.forward(now, datagram);
            }
        };
        let Some(conn) = self.slots[slot as usize].conn.as_mut() else {
            return self.forward(now, datagram);
        };
        let side = if datagram.src == conn.client {
            Side::Client
        } else {
            Side::Server
        };
        let asks = conn.on_datagram(&mut self.parts.env(&self.config, now), side, datagram);
        self.after(now, slot, asks);
    }

    fn handle_timeout(&mut self, now: Time) {
        // The wakes due now are taken first and each handled once: one that
        // a connection re-arms at or before `now` waits for the next call,
        // so a connection that keeps asking for a past time cannot make
        // this call spin for ever (one did, in real mode: 2ff97a0).
        let mut due = std::mem::take(&mut self.due);
        while let Some(&Reverse(wake)) = self.wakes.peek() {
            if wake.0 > now {
                break;
            }
            self.wakes.pop();
            due.push(wake);
        }
        for &(at, slot, generation) in &due {
            let Some(conn) = live_mut(&mut self.slots, slot, generation) else {
                continue;
            };
            if conn.scheduled == Some(at) {
                conn.scheduled = None;
            }
            let asks = conn.on_timer(&mut self.parts.env(&self.config, now));
            self.after(now, slot, asks);
        }
        due.clear();
        self.due = due;
        while let Some(&Reverse((at, slot, generation))) = self.expiry.peek() {
            if at > now {
                break;
            }
            self.expiry.pop();
            let Some(conn) = live(&self.slots, slot, generation) else {
                continue;
            };
            let deadline = conn.expiry(&self.config);
            if deadline > now {
                self.push_expiry(deadline, slot, generation);
                continue;
            }
            if conn.in_handshake() {
                self.parts.stats.handshakes_expired += 1;
            } else {
                self.parts.stats.expired += 1;
            }
            self.remove(now, slot);
        }
        self.refresh_next_timeout();
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.parts.out.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        debug_assert_eq!(self.next_timeout, self.heaps_next());
        self.next_timeout
    }
}
