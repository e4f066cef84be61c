//! What a controller may read from beside its endpoint: the one contract
//! between the controllers and the systems on the path.
//!
//! A controller sees its own connection through the `Controller` trait's
//! callbacks. Something on the path may know more, and tells it through
//! [`Signal`]s, which this module defines by what they mean to a
//! controller, not by who sends them:
//!
//! * **Near segment** ([`Input::NearSegment`]): a proxy on the path, a few
//!   hops from the sender, reports which of the sender's packets it
//!   received ([`Signal::NearReceived`]) and which it did not
//!   ([`Signal::NearLost`], a congestion signal from the segment between
//!   the sender and the proxy), the round trip to it ([`Signal::NearRtt`]),
//!   whether a proxy answered at all ([`Signal::ProxyActive`],
//!   [`Signal::NoProxy`]) and when its reports start over
//!   ([`Signal::NearReset`]). A Sidekick sender engine produces these.
//! * **Tunnel feedback** ([`Input::TunnelFeedback`]): a tunnel on the path
//!   reports, once per cycle, the rate it sends the flow's packets at, its
//!   queue for them, the share it retransmits, its own minimum RTT and how
//!   long its repairs take
//!   ([`Signal::TunnelFeedback`], [`TunnelFeedback`]). The TECC tunnel
//!   produces these: its client relays them end to end, and the receiving
//!   endpoint's side turns them into this signal.
//!
//! Signals travel in a [`Signals`] queue, shared between whatever produces
//! them and the controllers of one endpoint: the producer pushes, and a
//! controller drains the queue at its callbacks (each controller's module
//! says at which). The controller decides when it sees a signal, so a run
//! stays deterministic: nothing calls into a controller from outside its
//! callbacks.
//!
//! [`Input`] names what a controller reads (a kind of signal, or a utility
//! handle an application drives); the registry checks that the scenario
//! provides it ([`crate::Controller::requires`]).

use netsim::Time;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Something a controller reads from beside its endpoint; the scenario
/// must provide it (the system on the path, or the application).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Near-segment signals: what a proxy on the path saw of the sender's
    /// packets ([`Signal::NearLost`] and the others of its kind).
    NearSegment,
    /// A tunnel's feedback on its rate, queue and retransmissions
    /// ([`Signal::TunnelFeedback`]).
    TunnelFeedback,
    /// A utility handle an application drives ([`crate::UtilityHandle`]):
    /// Proteus-H's threshold, or a mid-flow switch of utility.
    UtilityHandle,
}

/// One signal from the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A proxy on the path answered; near-segment reports will follow.
    ProxyActive,
    /// No proxy on the path answered; no near-segment report will come.
    NoProxy,
    /// The proxy received these packets.
    NearReceived {
        /// How many.
        packets: usize,
        /// Their UDP payload bytes.
        bytes: u64,
    },
    /// The proxy did not receive these packets: a congestion signal from
    /// the near path segment. (The sender has retransmitted them, unless
    /// their retransmissions were used up.)
    NearLost {
        /// How many.
        packets: usize,
        /// Their UDP payload bytes.
        bytes: u64,
        /// When the latest of them was sent, on the endpoint's simulated
        /// clock.
        largest_sent_at: Time,
    },
    /// A near-segment round-trip sample: from sending the newest packet
    /// the proxy reported to receiving its report. It follows the
    /// [`Signal::NearReceived`] of that report.
    NearRtt(Duration),
    /// The near-segment reports start over (one could not be read); the
    /// packets not yet reported are left to end-to-end recovery.
    NearReset,
    /// A tunnel on the path reported its state.
    TunnelFeedback(TunnelFeedback),
}

impl Signal {
    /// The input it belongs to.
    pub fn kind(&self) -> Input {
        match self {
            Signal::ProxyActive
            | Signal::NoProxy
            | Signal::NearReceived { .. }
            | Signal::NearLost { .. }
            | Signal::NearRtt(_)
            | Signal::NearReset => Input::NearSegment,
            Signal::TunnelFeedback(_) => Input::TunnelFeedback,
        }
    }
}

/// One cycle's report of a tunnel on the path, about the flow it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelFeedback {
    /// The cycle's number, from 0; an older one than the last read is
    /// stale.
    pub sequence: u64,
    /// The rate the tunnel sends the flow's packets at, bit/s.
    pub rate_bps: u64,
    /// The tunnel's queue of the flow's packets, bytes.
    pub queue_bytes: u64,
    /// The packets the tunnel retransmitted over those it sent in the
    /// cycle, parts per million.
    pub retransmit_ppm: u64,
    /// The tunnel's minimum RTT (how long its own recovery takes).
    pub tunnel_min_rtt: Duration,
    /// How long the tunnel's recent repairs took, from a packet's first
    /// send to the acknowledgement of its repair (zero before the first):
    /// the longest its repairs hold a packet back.
    pub repair_delay: Duration,
}

/// A queue of signals shared between what produces them and the
/// controllers of one endpoint (clones share the queue). Single-threaded
/// use, like the endpoint; unbounded, so give one only to an endpoint whose
/// controller drains it.
#[derive(Clone, Debug, Default)]
pub struct Signals(Arc<Mutex<VecDeque<Signal>>>);

impl Signals {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Signal>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `signal` for the controller.
    pub fn push(&self, signal: Signal) {
        self.lock().push_back(signal);
    }

    /// Moves every queued signal into `out`, oldest first.
    pub fn drain_into(&self, out: &mut Vec<Signal>) {
        out.extend(self.lock().drain(..));
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// `f` of every queued signal, summed, leaving them queued.
    pub fn sum_queued(&self, f: impl Fn(&Signal) -> u64) -> u64 {
        self.lock().iter().map(f).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_queue_in_order() {
        let signals = Signals::default();
        let producer = signals.clone();
        producer.push(Signal::ProxyActive);
        producer.push(Signal::NearReceived {
            packets: 2,
            bytes: 2400,
        });
        producer.push(Signal::NearRtt(Duration::from_millis(3)));
        let bytes = |s: &Signal| match s {
            Signal::NearReceived { bytes, .. } => *bytes,
            _ => 0,
        };
        assert_eq!(signals.sum_queued(bytes), 2400);
        let mut out = Vec::new();
        signals.drain_into(&mut out);
        assert!(signals.is_empty() && producer.is_empty());
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], Signal::ProxyActive);
        assert!(out.iter().all(|s| s.kind() == Input::NearSegment));
    }
}
