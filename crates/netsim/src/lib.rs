//! A deterministic discrete-event network simulator, and the sans-IO link
//! model it shares with the real-mode link emulator.
//!
//! # What this crate owns
//!
//! * **Virtual time** ([`Time`]): integer nanoseconds since the start of a
//!   run; spans are [`std::time::Duration`]. Nothing here reads a clock.
//! * **Randomness** ([`Seed`], [`SimRng`]): every random source derives from
//!   the scenario seed by a stable label (`link/3` → its loss generator), with
//!   FNV-1a, SplitMix64 and ChaCha8, so streams are identical on every
//!   platform and independent of one another.
//! * **The link model** ([`Link`]): one direction of a link as a pure state
//!   machine. [`Link::offer`]`(now, len)` returns a [`Fate`]: delivered at a
//!   time, or dropped with a [`DropCause`]. It has no event queue: because the
//!   queue is FIFO and the capacity does not depend on later arrivals, a
//!   packet's departure is fixed when it arrives. The link keeps the list of
//!   scheduled departures to know its occupancy at any `now`, which drop-tail
//!   limits and RED need. This is the code the real-time AF_PACKET relay will
//!   run too ("one link model, two clocks").
//!   * capacity: unlimited, constant [`Rate`], or a mahimahi
//!     [`CapacityTrace`] (one 1500-byte delivery opportunity per line,
//!     repeating with the period of the last timestamp);
//!   * queue: drop-tail in bytes or packets ([`BufferLimit`]), or RED as
//!     Linux configures it ([`RedConfig`]; see "RED" below);
//!   * random loss ([`LossModel`]): Bernoulli or Gilbert–Elliott, decided on
//!     arrival before the queue (like netem), with the link's own generator;
//!   * counters ([`LinkStats`]) and an optional, bounded queue-occupancy time
//!     series ([`QueueSample`]).
//! * **Datagrams** ([`Datagram`]): real UDP payload bytes with source and
//!   destination socket addresses and a TTL. Links count the IP packet
//!   length ([`Datagram::wire_len`]).
//! * **Engines' interfaces**: [`Host`] for endpoints (shaped like
//!   `quinn_proto::Connection`: `handle_datagram`, `handle_timeout`,
//!   `poll_transmit`, `poll_timeout`, plus `is_finished`) and [`Middlebox`]
//!   for code on middle nodes (sees both directions with the arrival
//!   [`Interface`]; forwards, delays, drops, copies, reorders or injects by
//!   returning [`Transmit`]s; sets timers). Both are sans-IO, so the same
//!   engine runs under the real-mode drivers.
//! * **Topologies**: nodes joined by pairs of one-direction links, static
//!   routing on the destination IP; builders for a [`ChainSpec`] (sender —
//!   middle — … — receiver, each hop's two directions configured apart) and a
//!   [`DumbbellSpec`] (pairs sharing a bottleneck, each host with its own
//!   start time).
//! * **The driver** ([`Simulator`]): an [`EventQueue`] ordered by time, then
//!   insertion; each event concerns one node, which is the only one polled;
//!   timers are rescheduled only when a deadline changes (stale timer events
//!   carry an old generation and are skipped). A run stops when every host is
//!   finished, at a time limit, or when nothing is left to happen.
//! * **Capture** ([`CapturePoint`]): pcap files of a link's offered or
//!   delivered packets as Ethernet/IP/UDP frames with valid checksums and
//!   virtual nanosecond timestamps; [`Pcapng`] files of several links at
//!   once (one interface each) with the TLS key log inside
//!   ([`Simulator::capture_pcapng`]).
//!
//! # Invariants
//!
//! * Same scenario + same seed ⇒ the same events in the same order, the same
//!   counters and byte-identical captures, on any machine. No `HashMap`
//!   iteration, no float reaches a decision after configuration (RED's
//!   derived constants are computed once with fixed-order float arithmetic,
//!   as iproute2 does; probabilities are fixed point).
//! * Calls into a link must come in non-decreasing time.
//! * A link never drops a packet after accepting it; its counters add up:
//!   `offered = delivered + dropped_total`.
//!
//! # RED (`tc red … adaptive harddrop`)
//!
//! Thresholds, burst, EWMA weight, `max_p` and the adaptive algorithm follow
//! iproute2 and the kernel's `include/net/red.h` in integer fixed point (see
//! [`RedConfig`] and [`RedParams`]). Simplified: the idle-time decay of the
//! average is computed exactly as `(1 − W)^(idle / avpkt time)` instead of
//! the kernel's 256-entry lookup table; the 500 ms adaptive timer runs at
//! multiples of 500 ms of virtual time and is caught up at the next arrival;
//! ECN marking is not modelled (every mark is a drop, as with `harddrop` and
//! no `ecn`).
//!
//! # What it does not do
//!
//! No link-layer framing or MTU enforcement (a link carries what it is
//! given), no ECN, no IP fragmentation, no longest-prefix routing (exact
//! addresses plus a default), no dynamic topology changes during a run.
//! TLS key logs come from the QUIC crate; the captures are ready for them.
//!
//! # Example
//!
//! ```
//! use netsim::testing::{Sink, WindowSender};
//! use netsim::*;
//! use std::time::Duration;
//!
//! let (a, b) = ("10.0.0.1:5000".parse().unwrap(), "10.0.1.1:5000".parse().unwrap());
//! let link = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(10))
//!     .with_buffer(BufferLimit::Packets(100));
//! let sender = WindowSender::new(a, b, 1472, 40, Duration::from_secs(1)).with_total(1000);
//! let spec = ChainSpec::new(
//!     HostSpec::new("sender", a.ip(), sender),
//!     HostSpec::new("receiver", b.ip(), Sink::echoing()),
//! )
//! .hop(HopConfig::symmetric(link.clone()))
//! .middle(MiddleSpec::forwarder("router"))
//! .hop(HopConfig::symmetric(link));
//!
//! let mut sim = Simulator::new(Seed::new(7));
//! let chain = sim.add_chain(spec).unwrap();
//! let pcap = sim.capture(chain.hops[1].forward, CapturePoint::Delivered);
//! let outcome = sim.run_until(Time::from_secs(60));
//! assert_eq!(outcome.reason, StopReason::AllFinished);
//! assert_eq!(sim.host::<WindowSender>(chain.sender).unwrap().acked(), 1000);
//! assert_eq!(sim.link_stats(chain.hops[0].forward).delivered.packets, 1000);
//! assert!(sim.take_capture(pcap).unwrap().len() > 1000 * 1500);
//! ```

mod capture;
mod datagram;
mod event_queue;
mod host;
mod link;
mod loss;
mod middlebox;
mod pcapng;
mod probability;
mod rate;
mod red;
mod seed;
mod sim;
pub mod testing;
mod time;
mod topology;
mod trace;

pub use capture::{Capture, CapturePoint};
pub use datagram::{DEFAULT_TTL, Datagram, Protocol};
pub use event_queue::EventQueue;
pub use host::Host;
pub use link::{
    BufferLimit, Capacity, DropCause, Fate, Link, LinkConfig, LinkConfigError, LinkStats,
    PacketCount, QueueConfig, QueueSample, QueueSampling,
};
pub use loss::{GilbertElliott, LossModel};
pub use middlebox::{Forward, Interface, Middlebox, Route, Transmit};
pub use pcapng::{Pcapng, TLS_KEY_LOG};
pub use probability::{InvalidProbability, Probability, unit_open_below};
pub use rate::Rate;
pub use red::{RedConfig, RedConfigError, RedParams, RedStatus};
pub use seed::{Seed, SimRng};
pub use sim::{CaptureId, FateRecord, RunOutcome, SimStats, Simulator, StopReason};
pub use time::Time;
pub use topology::{
    Chain, ChainSpec, Dumbbell, DumbbellPair, DumbbellSpec, FlowPair, HopConfig, HopLinks,
    HostSpec, LinkId, MiddleSpec, NodeId, TopologyError,
};
pub use trace::{CapacityTrace, TraceError};
