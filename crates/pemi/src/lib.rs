//! PEMI (Zhang et al., "PEMI: Transparent Performance Enhancements for
//! QUIC"): an in-path middlebox that speeds up unmodified QUIC over a lossy
//! last hop by inferring losses from the timing of the replies and
//! retransmitting them itself.
//!
//! # What it sees
//!
//! Only what a real middlebox sees ([`Pemi`] is a [`netsim::Middlebox`]):
//! UDP/IP addresses and lengths, arrival times, QUIC's cleartext long
//! headers during the handshake ([`wire`]), the spin bit of short headers,
//! and the answers to its own ICMP echo probes. Never an endpoint's state.
//!
//! # How it works (the paper's sections)
//!
//! * **Connection tracking** (appendix A, `conn.rs`, `engine.rs`): a
//!   client's Initial opens a connection; the server's first Handshake (or
//!   Retry) and the client's first Handshake (or Initial after a Retry)
//!   measure the initial RTT to each end. Afterwards the 4-tuple is the
//!   key. Idle connections are forgotten after 120 s; the table is bounded
//!   and so are the handshakes in it.
//! * **Dominant direction** (§4.1, `dominant.rs`): volumes above the
//!   smallest packet, per end-to-end smoothed RTT, a 2× majority, else the
//!   last decision. Only that direction's packets are protected; the other
//!   direction's are the *replies*.
//! * **Flowlets and reply matching** (§4.2, `flowlet.rs`, `matching.rs`):
//!   protected packets separated by more than α · sINV start a new
//!   flowlet; each reply goes to the flowlet nearest to t_reply − RTT,
//!   within the global exclusion window (Δmargin = β · F_timeout); a
//!   finished flowlet's replies are matched to its packets: none,
//!   one-to-one, abandoned, or the dynamic programme of Figure 6 with the
//!   fresh-RTT rule.
//! * **Loss inference and fast retransmission** (§4.3, `inference.rs`,
//!   `protect.rs`): the three cases, the eliciting threshold estimated from
//!   the reply ratio, Figure 7's scan, `close_interval`; an inferred loss is
//!   retransmitted at once from the buffer, byte-identical, never twice;
//!   flowlets over N packets and retransmissions over 10% of the forwarded
//!   packets are given up (§4.6).
//! * **RTT** (§4.4, `rtt.rs`, `spin.rs`): handshake, matched pairs, the spin
//!   bit where the connection spins, else ICMP echo probes to the protected
//!   end once per end-to-end RTT; a calibration sample that deviates by
//!   more than Δmargin resets the estimate and drops the matched flowlets.
//! * **Congestion control** (§4.5, `copa.rs`): a Copa-derived window per
//!   RTT sample, the target rate CWND / RTT_min, and its enforcement — no
//!   retransmissions, then slowed replies ([`Enforcement`]), doubled for a
//!   sender that has not slowed after an end-to-end RTT.
//!
//! Every choice the paper leaves open is written down in docs/pemi.md.
//!
//! # Invariants
//!
//! * A datagram PEMI does not understand (not UDP, not QUIC, of no tracked
//!   connection) leaves at the instant it arrived, as the same bytes.
//! * A forwarded datagram is never altered; a retransmission is a
//!   byte-identical copy of a datagram forwarded earlier, sent at most once
//!   per packet and only while retransmissions are at most 10% of the
//!   connection's forwarded packets (amplification ≤ 1.1).
//! * Memory is bounded: the table (`max_connections`, `max_handshakes`),
//!   the flowlets per connection (`max_flowlets` of at most N packets), the
//!   buffered bytes (per connection and in total), the probes in flight.
//! * Deterministic: integer times and arithmetic; no hash-map order
//!   reaches an output.
//!
//! # What it does not do
//!
//! No connection migration (the 4-tuple is the key, as in the paper), no
//! IPv6 ICMP probes in real mode (the driver is IPv4), no protection of a
//! direction that is not dominant.

pub mod accuracy;
pub mod causes;
mod config;
mod conn;
mod copa;
mod dominant;
mod engine;
mod flowlet;
mod inference;
mod matching;
mod protect;
mod rtt;
mod selfcheck;
mod spin;
mod stats;
pub mod wire;

pub use accuracy::{Accuracy, Truth, accuracy};
pub use causes::{Causes, causes};
pub use config::{Enforcement, PemiConfig};
pub use conn::ConnSummary;
pub use engine::Pemi;
pub use matching::{Estimate, Matching, Scratch, fresh_rtt, match_flowlet};
pub use rtt::RttEstimate;
pub use stats::{FlowletTrace, Inferred, PemiStats, Record};

use serde::Serialize;

/// One end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The end that sent the first Initial.
    Client,
    /// The other end.
    Server,
}

impl Side {
    /// 0 for the client, 1 for the server.
    pub fn index(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }

    /// The other end.
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}
