//! A window-limited sender: keeps a fixed number of packets in flight.

use super::Probe;
use crate::{Datagram, Host, Time};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Keeps up to `window` datagrams unacknowledged, sending a new one for each
/// acknowledgement (from a [`super::Sink::echoing`] peer). A datagram not
/// acknowledged within `loss_timeout` counts as lost and frees its slot; it
/// is not retransmitted. With a window above the path's bandwidth-delay
/// product this keeps the bottleneck saturated. Finished when `total`
/// datagrams (if given) have been acknowledged or declared lost.
#[derive(Clone, Debug)]
pub struct WindowSender {
    src: SocketAddr,
    dst: SocketAddr,
    payload_len: usize,
    window: usize,
    total: Option<u64>,
    loss_timeout: Duration,
    next_seq: u64,
    /// seq → send time; the smallest seq is also the oldest.
    in_flight: BTreeMap<u64, Time>,
    acked: u64,
    lost: u64,
    min_rtt: Option<Duration>,
}

impl WindowSender {
    /// A sender with an unlimited amount of data.
    pub fn new(
        src: SocketAddr,
        dst: SocketAddr,
        payload_len: usize,
        window: usize,
        loss_timeout: Duration,
    ) -> WindowSender {
        WindowSender {
            src,
            dst,
            payload_len,
            window,
            total: None,
            loss_timeout,
            next_seq: 0,
            in_flight: BTreeMap::new(),
            acked: 0,
            lost: 0,
            min_rtt: None,
        }
    }

    /// Stops after `total` datagrams.
    pub fn with_total(mut self, total: u64) -> WindowSender {
        self.total = Some(total);
        self
    }

    /// Datagrams sent.
    pub fn sent(&self) -> u64 {
        self.next_seq
    }

    /// Datagrams acknowledged.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Datagrams declared lost.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// The smallest round-trip time measured.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
}

impl Host for WindowSender {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        let Some(probe) = Probe::decode(&datagram.payload) else {
            return;
        };
        if self.in_flight.remove(&probe.seq).is_some() {
            self.acked += 1;
            let rtt = now - probe.sent_at;
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        while let Some((&seq, &sent)) = self.in_flight.first_key_value() {
            if sent + self.loss_timeout > now {
                break;
            }
            self.in_flight.remove(&seq);
            self.lost += 1;
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if self.in_flight.len() >= self.window || self.total.is_some_and(|t| self.next_seq >= t) {
            return None;
        }
        let probe = Probe {
            seq: self.next_seq,
            sent_at: now,
        };
        self.next_seq += 1;
        self.in_flight.insert(probe.seq, now);
        Some(Datagram::new(
            self.src,
            self.dst,
            probe.encode(self.payload_len),
        ))
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.in_flight
            .first_key_value()
            .map(|(_, &sent)| sent + self.loss_timeout)
    }

    fn is_finished(&self) -> bool {
        self.total.is_some_and(|t| self.next_seq >= t) && self.in_flight.is_empty()
    }
}
