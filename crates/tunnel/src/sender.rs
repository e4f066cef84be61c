//! The sending side of the datagram modes: the tunnel's own queue of HTTP
//! datagrams, fed to the QUIC connection one packet's worth at a time, and
//! for RMDT the map from datagrams to the packets that carried them, so
//! that a datagram whose packet is declared lost is sent again, first.
//!
//! noq-proto reports no per-datagram acknowledgement or loss. The map is
//! built from what it does report: the controller wrapper logs each
//! ack-eliciting packet's number when it is sent, acknowledged or lost
//! ([`quic::PacketEvent`]), and the connection counts DATAGRAM frames
//! sent. The endpoint drives its application after every packet it sends,
//! so between two drives at most one UDP datagram left; the frames it
//! carried are the growth of the counter, and, since the state machine
//! sends datagrams in the order they were queued and we never let it drop
//! one (its buffer is only ever topped up to one packet, and a full buffer
//! hands the datagram back), they are the oldest ones we handed it. They
//! belong to the largest packet number sent since the last drive (a
//! coalesced datagram ends with its 1-RTT packet, the only one that
//! carries DATAGRAM frames). The tests check the map against the
//! simulator's ground truth: which packets a lossy link dropped.
//!
//! **Repair delay.** For TECC's feedback the sender measures how long its
//! repairs take: for each resent datagram that is acknowledged, the time
//! from its first send to that acknowledgement. The tunnel holds a
//! repaired packet back by less than that (the repair's own trip is in
//! it), so it bounds the reordering the repair causes at the client.
//! [`SenderStats::repair_delay`] is the largest over the latest
//! [`REPAIR_WINDOW`] repairs acknowledged.

use bytes::Bytes;
use netsim::Time;
use quic::{DatagramError, PacketEvent, Session};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// The acknowledged repairs whose largest delay
/// [`SenderStats::repair_delay`] reports.
pub(crate) const REPAIR_WINDOW: usize = 64;

/// A datagram waiting to be sent.
#[derive(Clone, Debug)]
struct Pending {
    id: u64,
    data: Bytes,
    /// Times it was sent before.
    sends: u8,
    /// When it was first sent.
    first_sent: Option<Time>,
    /// Control information of the tunnel's own (TECC's feedback): sent
    /// ahead of the queue, never resent, not counted with the tunnel's
    /// datagrams.
    control: bool,
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Datagrams queued by the tunnel.
    pub queued: u64,
    /// Datagrams sent, retransmissions included.
    pub sent: u64,
    /// Bytes sent, retransmissions included.
    pub sent_bytes: u64,
    /// Datagrams resent (RMDT).
    pub retransmitted: u64,
    /// Datagrams whose packet was declared lost.
    pub lost: u64,
    /// Datagrams acknowledged.
    pub acked: u64,
    /// Datagrams dropped: queue full, too large, or resent too often.
    pub dropped: u64,
    /// Datagrams sent in packets whose number we could not tell.
    pub unmapped: u64,
    /// The largest delay, from first send to acknowledgement, of the
    /// latest [`REPAIR_WINDOW`] resent datagrams acknowledged (zero before
    /// the first).
    pub repair_delay: Duration,
}

/// The datagram sender of one connection.
#[derive(Debug)]
pub struct DatagramSender {
    retransmit: bool,
    max_sends: u8,
    queue_limit: usize,
    queue: VecDeque<Pending>,
    queued_bytes: usize,
    /// Handed to the state machine, not yet counted as sent, oldest first.
    handed: VecDeque<Pending>,
    handed_bytes: usize,
    /// The connection's DATAGRAM frame counter at the last drive.
    counted: u64,
    /// RMDT: what each packet carried.
    in_flight: BTreeMap<u64, Vec<Pending>>,
    next_id: u64,
    events: Vec<PacketEvent>,
    stats: SenderStats,
    /// The numbers of the datagrams declared lost, in order (if asked).
    loss_log: Option<Vec<u64>>,
    /// The delays of the latest acknowledged repairs, oldest first.
    repair_delays: VecDeque<Duration>,
}

impl DatagramSender {
    /// A sender; with `retransmit`, lost datagrams are resent up to
    /// `max_retransmissions` times. At most `queue_limit` bytes wait.
    pub fn new(retransmit: bool, max_retransmissions: u8, queue_limit: usize) -> DatagramSender {
        DatagramSender {
            retransmit,
            max_sends: max_retransmissions.saturating_add(1),
            queue_limit,
            queue: VecDeque::new(),
            queued_bytes: 0,
            handed: VecDeque::new(),
            handed_bytes: 0,
            counted: 0,
            in_flight: BTreeMap::new(),
            next_id: 0,
            events: Vec::new(),
            stats: SenderStats::default(),
            loss_log: None,
            repair_delays: VecDeque::new(),
        }
    }

    /// Also records which datagrams (numbered from 0 in the order pushed)
    /// were declared lost, to check the map against the ground truth.
    pub fn with_loss_log(mut self) -> DatagramSender {
        self.loss_log = Some(Vec::new());
        self
    }

    /// The datagrams declared lost, if the log is on.
    pub fn loss_log(&self) -> Option<&[u64]> {
        self.loss_log.as_deref()
    }

    /// Queues one datagram (an HTTP datagram, prefix included); drops it
    /// if the queue is full.
    pub fn push(&mut self, data: Bytes) {
        if self.queued_bytes + data.len() > self.queue_limit {
            self.stats.dropped += 1;
            return;
        }
        self.stats.queued += 1;
        self.queued_bytes += data.len();
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back(Pending {
            id,
            data,
            sends: 0,
            first_sent: None,
            control: false,
        });
    }

    /// Queues a datagram of the tunnel's own ahead of every other: it
    /// leaves in the next packet the connection sends, is never resent (the
    /// next one replaces it) and is not counted in [`SenderStats`]. It is
    /// not held back by the queue limit.
    pub fn push_control(&mut self, data: Bytes) {
        self.queued_bytes += data.len();
        self.queue.push_front(Pending {
            id: u64::MAX,
            data,
            sends: 0,
            first_sent: None,
            control: true,
        });
    }

    /// Bytes waiting in the tunnel: its queue and what the state machine
    /// holds unsent.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes + self.handed_bytes
    }

    /// The counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Datagrams sent and not yet acknowledged or lost.
    pub fn in_flight(&self) -> usize {
        self.in_flight.values().map(Vec::len).sum()
    }

    /// After an input or a packet: accounts for what the connection sent,
    /// acknowledged and lost since the last call, then tops the state
    /// machine's buffer up to one packet's worth.
    pub fn drive(&mut self, session: &mut Session<'_>) {
        self.account(session);
        self.feed(session);
    }

    fn account(&mut self, session: &mut Session<'_>) {
        let now = session.now();
        self.events.clear();
        session.take_packet_events(&mut self.events);
        let total = session.datagrams_sent();
        let fresh = total.saturating_sub(self.counted);
        self.counted = total;
        let mut largest_sent = None;
        for event in std::mem::take(&mut self.events) {
            match event {
                PacketEvent::Sent { pn, .. } => largest_sent = Some(pn),
                PacketEvent::Acked { pn } => {
                    if let Some(carried) = self.in_flight.remove(&pn) {
                        self.stats.acked += carried.len() as u64;
                        self.repaired(now, &carried);
                    }
                }
                PacketEvent::Lost { pn } => {
                    if let Some(carried) = self.in_flight.remove(&pn) {
                        self.lost(carried);
                    }
                }
            }
        }
        // The packets sent since the last drive carried the `fresh` oldest
        // datagrams handed over.
        let mut carried = Vec::new();
        for _ in 0..fresh {
            let Some(pending) = self.handed.pop_front() else {
                break;
            };
            self.handed_bytes -= pending.data.len();
            if pending.control {
                continue;
            }
            self.stats.sent += 1;
            self.stats.sent_bytes += pending.data.len() as u64;
            if pending.sends > 0 {
                self.stats.retransmitted += 1;
            }
            carried.push(Pending {
                sends: pending.sends + 1,
                first_sent: pending.first_sent.or(Some(now)),
                ..pending
            });
        }
        match largest_sent {
            Some(pn) if !carried.is_empty() => {
                self.in_flight.entry(pn).or_default().extend(carried);
            }
            None if !carried.is_empty() => self.stats.unmapped += carried.len() as u64,
            _ => {}
        }
    }

    /// Acknowledged datagrams: the delays of those that were repairs.
    fn repaired(&mut self, now: Time, carried: &[Pending]) {
        for pending in carried.iter().filter(|p| p.sends > 1) {
            let Some(first) = pending.first_sent else {
                continue;
            };
            if self.repair_delays.len() == REPAIR_WINDOW {
                self.repair_delays.pop_front();
            }
            self.repair_delays.push_back(now - first);
            self.stats.repair_delay = self.repair_delays.iter().copied().max().unwrap_or_default();
        }
    }

    /// Datagrams whose packet was lost: resent first (RMDT), in their
    /// original order.
    fn lost(&mut self, carried: Vec<Pending>) {
        self.stats.lost += carried.len() as u64;
        if let Some(log) = &mut self.loss_log {
            log.extend(carried.iter().map(|p| p.id));
        }
        if !self.retransmit {
            return;
        }
        for pending in carried.into_iter().rev() {
            if pending.sends >= self.max_sends {
                self.stats.dropped += 1;
                continue;
            }
            self.queued_bytes += pending.data.len();
            self.queue.push_front(pending);
        }
    }

    fn feed(&mut self, session: &mut Session<'_>) {
        let Some(room) = session.max_datagram_size() else {
            return;
        };
        while self.handed_bytes < room {
            let Some(pending) = self.queue.pop_front() else {
                return;
            };
            self.queued_bytes -= pending.data.len();
            if pending.data.len() > room {
                // It can never go: the inner packet is too large for the
                // tunnel (the scenario's inner payload size is wrong).
                self.stats.dropped += 1;
                continue;
            }
            match session.send_datagram(pending.data.clone()) {
                Ok(()) => {
                    self.handed_bytes += pending.data.len();
                    self.handed.push_back(pending);
                }
                Err(DatagramError::Blocked(_)) => {
                    self.queued_bytes += pending.data.len();
                    self.queue.push_front(pending);
                    return;
                }
                Err(DatagramError::Refused(_)) => {
                    self.stats.dropped += 1;
                }
            }
        }
    }
}
