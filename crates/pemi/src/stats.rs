//! What the engine counts, and what it records for ground-truth
//! accounting when asked to ([`crate::PemiConfig::record`]).

use netsim::Time;
use serde::Serialize;
use std::time::Duration;

/// The engine's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PemiStats {
    /// UDP datagrams seen.
    pub datagrams: u64,
    /// Datagrams of no tracked connection, forwarded at once (not QUIC, or
    /// not a new connection's Initial).
    pub untracked: u64,
    /// Datagrams that are not UDP (ICMP), forwarded unless they answer a
    /// probe.
    pub not_udp: u64,
    /// Connections created by a client's Initial.
    pub connections: u64,
    /// Handshakes completed (both RTTs measured).
    pub handshakes: u64,
    /// Connections forgotten after their idle timeout.
    pub expired: u64,
    /// Handshakes forgotten after their timeout.
    pub handshakes_expired: u64,
    /// Handshakes evicted by a newer Initial (the table's handshake bound).
    pub handshakes_evicted: u64,
    /// Initials not tracked because the table was full.
    pub table_full: u64,
    /// Times a connection's dominant direction was decided or changed.
    pub direction_changes: u64,
    /// Protected packets forwarded (the dominant direction's).
    pub protected: u64,
    /// Reply packets (the other direction's) while protecting.
    pub replies: u64,
    /// Replies assigned to a flowlet.
    pub replies_assigned: u64,
    /// Replies outside the global exclusion window.
    pub replies_excluded: u64,
    /// Flowlets started.
    pub flowlets: u64,
    /// Flowlets of more than N packets (not protected).
    pub flowlets_abandoned: u64,
    /// Flowlets given up because a connection had too many.
    pub flowlets_dropped: u64,
    /// Flowlets with more replies than packets, or unmatchable.
    pub flowlets_unmatched: u64,
    /// RTT samples from matched pairs.
    pub rtt_samples: u64,
    /// Packets inferred lost.
    pub inferred_lost: u64,
    /// Of those, packets already retransmitted once (never again).
    pub lost_again: u64,
    /// Retransmissions sent.
    pub retransmissions: u64,
    /// Retransmissions withheld by the 10% cap.
    pub withheld_cap: u64,
    /// Retransmissions withheld by the congestion controller.
    pub withheld_congestion: u64,
    /// Retransmissions withheld while backed off (its own estimate of its
    /// precision was low).
    pub withheld_backoff: u64,
    /// PEMI's copies answered by the receiver, and left unanswered, in
    /// finished flowlets (the self-check's evidence).
    pub copies_answered: u64,
    /// See `copies_answered`.
    pub copies_unanswered: u64,
    /// Times a connection backed off to forwarding.
    pub backoffs: u64,
    /// Times a backed-off connection returned to retransmitting.
    pub returns: u64,
    /// Retransmissions impossible: the packet was not buffered.
    pub withheld_unbuffered: u64,
    /// Calibration samples from the spin bit.
    pub spin_samples: u64,
    /// ICMP echo probes sent.
    pub probes: u64,
    /// ICMP echo replies to them.
    pub probe_replies: u64,
    /// Calibrations that reset the RTT (deviation over Δmargin).
    pub calibration_resets: u64,
    /// Replies delayed by the rate enforcement.
    pub replies_delayed: u64,
    /// Replies held back behind later ones by the rate enforcement.
    pub replies_reordered: u64,
    /// Bytes buffered for retransmission now.
    pub buffered: u64,
    /// The most bytes ever buffered at once.
    pub buffered_peak: u64,
    /// Connections in the table now.
    pub tracked: u64,
}

impl PemiStats {
    /// What left per protected packet that arrived: (protected +
    /// retransmissions) / protected, 1 when nothing was protected (§4.6's
    /// bound is 1.1).
    pub fn amplification(&self) -> f64 {
        if self.protected == 0 {
            1.0
        } else {
            (self.protected + self.retransmissions) as f64 / self.protected as f64
        }
    }
}

/// A packet PEMI inferred lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inferred {
    /// When.
    pub at: Time,
    /// The packet's fingerprint ([`netsim::Datagram::fingerprint`]).
    pub fingerprint: u64,
    /// Whether PEMI retransmitted it then.
    pub retransmitted: bool,
}

/// A finished flowlet as inference saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowletTrace {
    /// When it was finished.
    pub finished: Time,
    /// The smoothed RTT inference used.
    pub srtt: Duration,
    /// The exclusion window's Δmargin at the time.
    pub margin: Duration,
    /// The eliciting threshold inference used.
    pub threshold: u8,
    /// Whether the tail grace applied.
    pub tail_replied: bool,
    /// Its packets: time and fingerprint.
    pub sent: Vec<(Time, u64)>,
    /// The replies assigned to it.
    pub replies: Vec<Time>,
    /// Indices of the packets inferred lost.
    pub lost: Vec<usize>,
    /// Those of `lost` that waited for the tail grace instead of being
    /// retransmitted at once (decided when it is over).
    pub waiting: Vec<usize>,
}

/// The record kept with [`crate::PemiConfig::record`]: every protected
/// packet forwarded, with the RTT estimate of the time, every inference,
/// and every finished flowlet. Bounded: past [`Record::LIMIT`] entries
/// each, nothing more is kept.
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// (fingerprint, the smoothed RTT to the receiver when it was
    /// forwarded).
    pub forwarded: Vec<(u64, Duration)>,
    /// The inferences.
    pub inferred: Vec<Inferred>,
    /// The finished flowlets.
    pub flowlets: Vec<FlowletTrace>,
    /// Packets of the flowlets a calibration reset dropped.
    pub calibration_drops: Vec<u64>,
}

impl Record {
    /// Entries kept per list.
    pub const LIMIT: usize = 4_000_000;

    pub(crate) fn forwarded(&mut self, fingerprint: u64, srtt: Duration) {
        if self.forwarded.len() < Self::LIMIT {
            self.forwarded.push((fingerprint, srtt));
        }
    }

    pub(crate) fn flowlet(&mut self, trace: FlowletTrace) {
        if self.flowlets.len() < Self::LIMIT / 16 {
            self.flowlets.push(trace);
        }
    }

    pub(crate) fn calibration_drop(&mut self, fingerprint: u64) {
        if self.calibration_drops.len() < Self::LIMIT {
            self.calibration_drops.push(fingerprint);
        }
    }

    pub(crate) fn inferred(&mut self, inferred: Inferred) {
        if self.inferred.len() < Self::LIMIT {
            self.inferred.push(inferred);
        }
    }
}
