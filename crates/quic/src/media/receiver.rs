//! The media receiver (the paper's "server"): opens packets, plays them
//! through the de-jitter buffer and NACKs holes.

use super::config::MediaConfig;
use super::dejitter::{DejitterBuffer, Insert};
use super::stats::{DelaySummary, MediaReceiverStats};
use super::wire::{MediaKey, Message};
use netsim::{Datagram, Host, SimRng, Time};
use rand_chacha::rand_core::RngCore;
use ring::aead::NONCE_LEN;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// The receiving end of a media flow, as a [`netsim::Host`].
///
/// On every packet that opens (media or end of stream) it stores the packet,
/// plays out what is in order, then NACKs every hole never NACKed and
/// re-NACKs every hole NACKed at least [`MediaConfig::renack_interval`]
/// ago, one NACK datagram per sequence number, as the reference server
/// does. It has no timer, so it is a passive host (always finished).
#[derive(Debug)]
pub struct MediaReceiver {
    config: MediaConfig,
    local: SocketAddr,
    peer: SocketAddr,
    key: MediaKey,
    nonces: SimRng,
    buffer: DejitterBuffer,
    last_seq: Option<u32>,
    outbox: VecDeque<Datagram>,
    stats: MediaReceiverStats,
}

impl MediaReceiver {
    /// A receiver at `local` for the flow from the sender at `peer`.
    pub fn new(config: MediaConfig, local: SocketAddr, peer: SocketAddr) -> MediaReceiver {
        let key = MediaKey::derive(config.seed, peer, local);
        let nonces = config.seed.rng(&format!("media/{local}/nonce"));
        MediaReceiver {
            buffer: DejitterBuffer::new(config.max_window),
            config,
            local,
            peer,
            key,
            nonces,
            last_seq: None,
            outbox: VecDeque::new(),
            stats: MediaReceiverStats::default(),
        }
    }

    /// The de-jitter delay of every packet played so far, index `seq − 1`:
    /// play-out time minus the time the packet was stored (its first
    /// arrival). Zero for a packet that arrives with every earlier one
    /// already played.
    pub fn dejitter_delays(&self) -> &[Duration] {
        self.buffer.delays()
    }

    /// Percentiles of [`MediaReceiver::dejitter_delays`].
    pub fn summary(&self) -> DelaySummary {
        DelaySummary::from_delays(self.buffer.delays())
    }

    /// The counters.
    pub fn stats(&self) -> &MediaReceiverStats {
        &self.stats
    }

    /// Packets played so far.
    pub fn played(&self) -> u32 {
        self.buffer.next() - 1
    }

    /// Packets received but waiting for an earlier one.
    pub fn buffered(&self) -> usize {
        self.buffer.buffered()
    }

    /// The last sequence number of the stream, once an end-of-stream packet
    /// has announced it.
    pub fn last_seq(&self) -> Option<u32> {
        self.last_seq
    }

    /// Whether the end of the stream is known and every packet was played.
    pub fn is_complete(&self) -> bool {
        self.last_seq.is_some_and(|last| self.played() >= last)
    }

    fn nack_holes(&mut self, now: Time) {
        for (seq, renack) in self.buffer.holes_to_nack(now, self.config.renack_interval) {
            let mut nonce = [0u8; NONCE_LEN];
            self.nonces.fill_bytes(&mut nonce);
            let payload = self.key.seal(Message::Nack(seq), nonce);
            self.outbox
                .push_back(Datagram::new(self.local, self.peer, payload));
            self.stats.nacks_sent += 1;
            if renack {
                self.stats.renacks_sent += 1;
            }
        }
    }
}

impl Host for MediaReceiver {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        match self.key.open_data(&datagram.payload) {
            Ok(Message::Media(seq)) => match self.buffer.insert(now, seq) {
                Insert::New => self.stats.packets_received += 1,
                Insert::Duplicate => self.stats.duplicates += 1,
                Insert::TooFar => {
                    self.stats.rejected += 1;
                    return;
                }
            },
            Ok(Message::End(last)) => {
                self.stats.end_packets_received += 1;
                if !self.buffer.cover_until(last) {
                    self.stats.rejected += 1;
                    return;
                }
                self.last_seq = Some(last);
            }
            Ok(Message::Nack(_)) | Err(_) => {
                self.stats.rejected += 1;
                return;
            }
        }
        self.nack_holes(now);
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, _now: Time) -> Option<Datagram> {
        self.outbox.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }

    fn is_finished(&self) -> bool {
        true
    }
}
