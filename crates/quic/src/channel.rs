//! QUIC DATAGRAM frames between an endpoint's connection and something
//! beside the endpoint that is not its application: a tunnel client that
//! relays feedback to the far end (TECC's QUIC_INFO), or whatever turns
//! what arrived into signals for the endpoint's controller
//! ([`DatagramChannel::deliver_to`]).

use bytes::Bytes;
use netsim::Time;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// The most datagrams waiting to be sent; older ones are dropped.
const MAX_OUTGOING: usize = 64;
/// The most datagrams received and not yet read; older ones are dropped.
const MAX_RECEIVED: usize = 1024;

/// A shared queue of datagrams to send on an endpoint's connection and of
/// datagrams it received, each with its arrival time.
///
/// Give a clone to the endpoint (`QuicConfig::with_datagram_channel`) and
/// keep one: the endpoint sends what is queued as soon as its connection is
/// open (its timer fires at once while datagrams wait), and puts every
/// datagram its connections receive here instead of handing them to the
/// application (or to a receiver, [`DatagramChannel::deliver_to`]). Both
/// queues are bounded (the oldest entry goes), so a peer cannot make them
/// grow without bound. Single-threaded use, like the endpoint itself.
#[derive(Clone, Debug, Default)]
pub struct DatagramChannel(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    outgoing: VecDeque<Bytes>,
    received: VecDeque<(Time, Bytes)>,
    dropped: u64,
    receiver: Option<Receiver>,
}

/// What takes each received datagram instead of the received queue.
#[derive(Clone)]
struct Receiver(Arc<dyn Fn(Time, Bytes) + Send + Sync>);

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver")
    }
}

impl DatagramChannel {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `data` to go out as a QUIC DATAGRAM frame.
    pub fn send(&self, data: Bytes) {
        let mut state = self.lock();
        if state.outgoing.len() == MAX_OUTGOING {
            state.outgoing.pop_front();
            state.dropped += 1;
        }
        state.outgoing.push_back(data);
    }

    /// Whether datagrams wait to be sent.
    pub fn has_outgoing(&self) -> bool {
        !self.lock().outgoing.is_empty()
    }

    /// Moves every datagram received so far into `out`, oldest first.
    pub fn take_received(&self, out: &mut Vec<(Time, Bytes)>) {
        out.extend(self.lock().received.drain(..));
    }

    /// Hands every datagram received from now on to `receive`, with its
    /// arrival time, as the endpoint takes it from its connection (in
    /// order, before the connection's next packet is processed), instead
    /// of queueing it for [`DatagramChannel::take_received`]. `receive`
    /// must not use this channel.
    pub fn deliver_to(&self, receive: impl Fn(Time, Bytes) + Send + Sync + 'static) {
        self.lock().receiver = Some(Receiver(Arc::new(receive)));
    }

    /// Datagrams dropped because a queue was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Moves received datagrams in and queued ones out of `conn` (queued
    /// ones only once its handshake is over; one it refuses is dropped).
    pub(crate) fn exchange(&self, now: Time, conn: &mut noq_proto::Connection) {
        let receiver = self.lock().receiver.clone();
        if let Some(Receiver(receive)) = receiver {
            while let Some(data) = conn.datagrams().recv() {
                receive(now, data);
            }
        }
        let mut state = self.lock();
        while let Some(data) = conn.datagrams().recv() {
            if state.received.len() == MAX_RECEIVED {
                state.received.pop_front();
                state.dropped += 1;
            }
            state.received.push_back((now, data));
        }
        if conn.is_handshaking() || conn.is_closed() {
            return;
        }
        while let Some(data) = state.outgoing.pop_front() {
            if conn.datagrams().send(data, true).is_err() {
                state.dropped += 1;
            }
        }
    }
}
