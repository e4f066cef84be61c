//! Congestion controllers for pepkit's QUIC endpoints (`quic::congestion`).
//!
//! * [`CubicCore`] is our own CUBIC (RFC 9438) as a sans-IO state machine:
//!   slow start, the cubic window W_cubic(t) = C·(t − K)³ + W_max, the
//!   Reno-friendly estimate, fast convergence, one reduction per recovery
//!   period and a saved state to roll back a spurious reduction. Each
//!   congestion event says which β and C respond to it, which is all
//!   PACUBIC needs. [`Cubic`] wraps it as a plain controller
//!   ([`CubicConfig`] is its factory) so it can be compared with
//!   noq-proto's own `"cubic"`.
//! * [`Bbr`] is BBR version 1, deterministic (noq-proto's BBRv3 draws
//!   its probe timing from the OS), and BBR-S; [`BbrFactory`] is its
//!   factory. PCC (Vivace, Proteus), Copa and LEDBAT are in their modules.
//! * [`Tecc`] is TECC's rate control on the application server (§4.2,
//!   Algorithm 1): it paces at the rate a tunnel on the path feeds back
//!   ([`Signal::TunnelFeedback`]), BBR until the first feedback.
//! * [`Unlimited`] is no congestion control (a tunnel's "none");
//!   [`ConstantSettings`] the same paced at a fixed rate (a probe).
//! * [`Pacubic`] is Sidekick's path-aware CUBIC (NSDI 2024 §4.3.2,
//!   appendix A). It reads the near segment's signals at each controller
//!   callback: a loss a proxy on the path reports
//!   ([`Signal::NearLost`]) cuts the window by
//!   β' = 1 − r(1 − β) and grows it afterwards with C' = C / r³, where r is
//!   the near segment's share of the round trip ([`PathRatio`], estimated
//!   from measured minimum RTTs); losses QUIC detects end to end get plain
//!   CUBIC. [`PacubicFactory`] builds it for a QUIC endpoint.
//!
//! Windows are bytes (`u64`), as the `Controller` trait has them; the MSS is
//! the current MTU. Time is only ever passed in (`Instant`s from the
//! endpoint's clock); nothing here reads a clock.
//!
//! # Signals from the path
//!
//! What a controller may read beyond its own connection is defined here,
//! in [`signals`], and nowhere else: [`Signal`]s of a few kinds, named for
//! what they mean to a controller (the near path segment received or lost
//! these packets, a proxy is active or none answered, a tunnel's rate,
//! queue, retransmissions and minimum RTT), carried in a shared [`Signals`]
//! queue that the controllers of one endpoint drain at their callbacks.
//! The systems on the path produce them from their own protocols (a
//! Sidekick sender engine the near-segment signals, a TECC tunnel the
//! feedback); this crate depends on none of them and parses no wire
//! format of theirs. [`Input`] names what a controller reads, a kind of
//! signal or an application's [`UtilityHandle`].
//!
//! # The registry
//!
//! [`Controller`] is the one place controllers are chosen by name, with
//! their settings (`"cubic"`, `"newreno"`, `"bbr"` from noq-proto;
//! `"pepkit-cubic"` and `"pacubic"` from this crate, and the others).
//! Building one takes a [`ControllerContext`] (seed, the endpoint's clock,
//! the signals fed to it, an application's utility handle):
//!
//! ```
//! use cc::{Controller, ControllerContext, PacubicSettings, Signal, Signals};
//! use quic::{QuicConfig, SimClock};
//!
//! let clock = SimClock::new();
//! let seed = netsim::Seed::new(1);
//! let signals = Signals::default();
//! let mut context = ControllerContext::new(seed, clock);
//! context.signals = Some(signals.clone());
//! let built = Controller::Pacubic(PacubicSettings::default()).build(&context);
//! let config = QuicConfig::new(seed)
//!     .with_controller(built.factory)
//!     .with_clock(clock);
//! // What produces the near segment's signals pushes them; the endpoint's
//! // controller applies them at its next callback.
//! signals.push(Signal::ProxyActive);
//! # let _ = (config, built.counters);
//! ```
//!
//! The same `SimClock` must go to the endpoint (`QuicConfig::with_clock`)
//! and to PACUBIC: near-segment losses carry virtual send times and the
//! controller compares them with the `Instant`s of its callbacks. Only the
//! endpoint that sends the data should read a given queue: every
//! controller built by one factory drains the same queue.

pub mod bbr;
mod context;
mod copa;
mod cubic;
mod engine;
mod ledbat;
mod pacubic;
pub mod pcc;
mod ratio;
mod registry;
pub mod signals;
mod tecc;
mod unlimited;
mod windowed;

pub use bbr::{Bbr, BbrFactory};
pub use context::{Built, ControllerContext, ControllerCounters};
pub use copa::{Copa, CopaSettings};
pub use cubic::{Cubic, CubicConfig, CubicCore, CubicParams, CubicSettings, UNPACED_RATE};
pub use engine::{CongestionEngine, Engine};
pub use ledbat::{Ledbat, LedbatDelay, LedbatSettings};
pub use pacubic::{Pacubic, PacubicConfig, PacubicFactory, PacubicSettings, PacubicStats};
pub use pcc::utility::{Utility, UtilityHandle};
pub use pcc::{HybridSettings, Pcc, PccConfig, PccFactory, PccStats, ProteusSettings};
pub use ratio::{MAX_RATIO, MIN_RATIO, PathRatio};
pub use registry::Controller;
pub use signals::{Input, Signal, Signals, TunnelFeedback};
pub use tecc::loss::{LossRule, Reordering};
pub use tecc::{RateLaw, Tecc, TeccFactory, TeccSettings, TeccStats};
pub use unlimited::{Constant, ConstantSettings, Unlimited};
