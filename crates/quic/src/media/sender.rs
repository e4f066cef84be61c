//! The media sender (the paper's "client"): one sealed 240-byte packet
//! every interval, retransmissions on NACK or on request, then
//! end-of-stream packets.

use super::config::MediaConfig;
use super::stats::MediaSenderStats;
use super::wire::{MEDIA_ID_OFFSET, MediaKey, Message};
use netsim::{Datagram, Host, SimRng, Time};
use rand_chacha::rand_core::RngCore;
use ring::aead::NONCE_LEN;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// One datagram the sender put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaTransmission {
    /// When it was sent.
    pub at: Time,
    /// Its sequence number.
    pub seq: u32,
    /// The identifier a Sidekick proxy reads: `u32::from_be_bytes` of the
    /// payload's bytes [`crate::MEDIA_ID_OFFSET`]`..+4`. Fresh for every
    /// transmission.
    pub id: u32,
    /// Whether it is a retransmission.
    pub retransmission: bool,
}

/// The sending end of a media flow, as a [`netsim::Host`].
///
/// Media packet `k` (from 1) leaves at `start + (k − 1) · interval`, where
/// `start` is the host's start time. A NACK (or [`MediaSender::retransmit`])
/// queues a retransmission, sent at once with a fresh nonce. There is no
/// congestion or flow control, as in the reference client.
#[derive(Debug)]
pub struct MediaSender {
    config: MediaConfig,
    local: SocketAddr,
    peer: SocketAddr,
    key: MediaKey,
    nonces: SimRng,
    total: u32,
    /// The next new sequence number to send.
    next_seq: u32,
    /// When the next new packet (media or end of stream) is due.
    next_at: Option<Time>,
    end_sent: u32,
    retransmit_queue: VecDeque<u32>,
    log: Vec<MediaTransmission>,
    stats: MediaSenderStats,
}

impl MediaSender {
    /// A sender at `local` streaming to the receiver at `peer`.
    pub fn new(config: MediaConfig, local: SocketAddr, peer: SocketAddr) -> MediaSender {
        let key = MediaKey::derive(config.seed, local, peer);
        let nonces = config.seed.rng(&format!("media/{local}/nonce"));
        MediaSender {
            total: config.packet_count(),
            config,
            local,
            peer,
            key,
            nonces,
            next_seq: 1,
            next_at: None,
            end_sent: 0,
            retransmit_queue: VecDeque::new(),
            log: Vec::new(),
            stats: MediaSenderStats::default(),
        }
    }

    /// Asks for a retransmission of `seq` (for a Sidekick sender engine
    /// that learned of a loss from a quACK). Returns false, and does
    /// nothing, if `seq` was never sent or is already queued. The
    /// retransmission goes out at the next [`Host::poll_transmit`].
    pub fn retransmit(&mut self, seq: u32) -> bool {
        let queued = self.queue_retransmission(seq);
        if queued {
            self.stats.external_requests += 1;
        }
        queued
    }

    fn queue_retransmission(&mut self, seq: u32) -> bool {
        if seq == 0 || seq >= self.next_seq || self.retransmit_queue.contains(&seq) {
            return false;
        }
        self.retransmit_queue.push_back(seq);
        true
    }

    /// Every datagram sent so far, in order (media packets and
    /// retransmissions; end-of-stream packets are not logged).
    pub fn transmissions(&self) -> &[MediaTransmission] {
        &self.log
    }

    /// The counters.
    pub fn stats(&self) -> &MediaSenderStats {
        &self.stats
    }

    /// The number of media packets this flow sends.
    pub fn packet_count(&self) -> u32 {
        self.total
    }

    /// The configuration.
    pub fn config(&self) -> &MediaConfig {
        &self.config
    }

    fn seal(&mut self, message: Message) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.nonces.fill_bytes(&mut nonce);
        self.key.seal(message, nonce)
    }

    fn send_media(&mut self, now: Time, seq: u32, retransmission: bool) -> Datagram {
        let payload = self.seal(Message::Media(seq));
        let mut id = [0u8; 4];
        id.copy_from_slice(&payload[MEDIA_ID_OFFSET..MEDIA_ID_OFFSET + 4]);
        self.log.push(MediaTransmission {
            at: now,
            seq,
            id: u32::from_be_bytes(id),
            retransmission,
        });
        if retransmission {
            self.stats.retransmissions += 1;
        } else {
            self.stats.packets_sent += 1;
        }
        Datagram::new(self.local, self.peer, payload)
    }

    fn schedule_done(&self) -> bool {
        self.next_seq > self.total && self.end_sent >= self.config.end_packets
    }
}

impl Host for MediaSender {
    fn handle_datagram(&mut self, _now: Time, datagram: Datagram) {
        match self.key.open_nack(&datagram.payload) {
            Ok(seq) if self.queue_retransmission(seq) => self.stats.nacks_received += 1,
            // A repeated NACK of a queued packet is valid but needs nothing.
            Ok(seq) if seq != 0 && seq < self.next_seq => self.stats.nacks_received += 1,
            _ => self.stats.rejected += 1,
        }
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if let Some(seq) = self.retransmit_queue.pop_front() {
            return Some(self.send_media(now, seq, true));
        }
        if self.schedule_done() {
            return None;
        }
        let due = *self.next_at.get_or_insert(now);
        if due > now {
            return None;
        }
        self.next_at = Some(due + self.config.interval);
        if self.next_seq <= self.total {
            let seq = self.next_seq;
            self.next_seq += 1;
            Some(self.send_media(now, seq, false))
        } else {
            self.end_sent += 1;
            self.stats.end_packets_sent += 1;
            let payload = self.seal(Message::End(self.total));
            Some(Datagram::new(self.local, self.peer, payload))
        }
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        if !self.retransmit_queue.is_empty() {
            // In the past: fires at once.
            return Some(Time::ZERO);
        }
        if self.schedule_done() {
            None
        } else {
            self.next_at
        }
    }

    fn is_finished(&self) -> bool {
        self.schedule_done() && self.retransmit_queue.is_empty()
    }
}
