//! A receiver that acknowledges at most once per `min_ack_delay`, as the
//! Sidekick authors' quiche fork did for its ACK-reduction experiment
//! (notes B.6: an ACK goes out only if `min_ack_delay` has passed since the
//! last one).
//!
//! noq-proto has no such knob: the ACK-frequency extension lets a sender
//! ask for fewer ACKs, but noq-proto caps the delay at max(RTT, 25 ms). So
//! this wraps the receiving host instead: of the 1-RTT (short-header)
//! datagrams it sends, at most one leaves per `min_ack_delay`; a datagram
//! that comes sooner waits, and a newer one replaces it. A data receiver's
//! 1-RTT datagrams are ACKs (and now and then flow-control credit), and an
//! ACK frame covers everything its predecessors did, so the newest one
//! says all the others would have. Handshake (long-header) datagrams pass
//! at once, like quiche's rule, which applies to the application epoch
//! only.
//!
//! The cost of the emulation: a replaced datagram that carried
//! flow-control credit is lost to the receiver's QUIC stack, which resends
//! the credit when it notices. Give the receiver ample windows.

use netsim::{Datagram, Host, Time};
use std::time::Duration;

/// A host whose 1-RTT datagrams leave at most once per `min_ack_delay`.
pub struct AckDelay<H: Host> {
    inner: H,
    min_ack_delay: Duration,
    last_sent: Option<Time>,
    held: Option<Datagram>,
    ready: Option<Datagram>,
    replaced: u64,
}

impl<H: Host> AckDelay<H> {
    /// Wraps `inner` (a data receiver).
    pub fn new(inner: H, min_ack_delay: Duration) -> AckDelay<H> {
        AckDelay {
            inner,
            min_ack_delay,
            last_sent: None,
            held: None,
            ready: None,
            replaced: 0,
        }
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// Datagrams that a newer one replaced before they could leave.
    pub fn replaced(&self) -> u64 {
        self.replaced
    }

    /// When the held datagram may leave.
    fn release_at(&self) -> Option<Time> {
        self.held.as_ref()?;
        Some(
            self.last_sent
                .map_or(Time::ZERO, |at| at + self.min_ack_delay),
        )
    }

    /// Lets the held datagram go if its time has come.
    fn release(&mut self, now: Time) {
        if self.release_at().is_some_and(|at| at <= now) && self.ready.is_none() {
            self.ready = self.held.take();
            self.last_sent = Some(now);
        }
    }
}

/// A QUIC short-header (1-RTT) packet: the header-form bit is clear (RFC
/// 9000 §17.3; the only header bit never protected).
fn is_short_header(payload: &[u8]) -> bool {
    payload.first().is_some_and(|byte| byte & 0x80 == 0)
}

impl<H: Host> Host for AckDelay<H> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.inner.handle_datagram(now, datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.inner.poll_timeout().is_some_and(|at| at <= now) {
            self.inner.handle_timeout(now);
        }
        self.release(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if let Some(datagram) = self.ready.take() {
            return Some(datagram);
        }
        while let Some(datagram) = self.inner.poll_transmit(now) {
            if !is_short_header(&datagram.payload) {
                return Some(datagram);
            }
            if self.held.replace(datagram).is_some() {
                self.replaced += 1;
            }
            self.release(now);
            if let Some(datagram) = self.ready.take() {
                return Some(datagram);
            }
        }
        None
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let inner = self.inner.poll_timeout();
        inner.into_iter().chain(self.release_at()).min()
    }

    fn is_finished(&self) -> bool {
        self.inner.is_finished() && self.held.is_none()
    }
}
