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
//! * [`Pacubic`] is Sidekick's path-aware CUBIC (NSDI 2024 §4.3.2,
//!   appendix A). It reads the sender engine's events
//!   ([`sidekick::Signals`]) at each controller callback: a loss reported
//!   by a quACK (the near path segment) cuts the window by
//!   β' = 1 − r(1 − β) and grows it afterwards with C' = C / r³, where r is
//!   the near segment's share of the round trip ([`PathRatio`], estimated
//!   from measured minimum RTTs); losses QUIC detects end to end get plain
//!   CUBIC. [`PacubicFactory`] builds it for a QUIC endpoint.
//!
//! Windows are bytes (`u64`), as the `Controller` trait has them; the MSS is
//! the current MTU. Time is only ever passed in (`Instant`s from the
//! endpoint's clock); nothing here reads a clock.
//!
//! # Registering
//!
//! ```
//! use cc::{CubicConfig, PacubicConfig, PacubicFactory};
//! use quic::{ControllerRegistry, QuicConfig, SimClock};
//! use std::sync::Arc;
//!
//! let clock = SimClock::new();
//! let signals = sidekick::Signals::default();
//! let mut registry = ControllerRegistry::builtin();
//! registry.register("our-cubic", Arc::new(CubicConfig::default()));
//! registry.register(
//!     "pacubic",
//!     Arc::new(PacubicFactory::new(signals.clone(), PacubicConfig::new(clock))),
//! );
//! let config = QuicConfig::new(netsim::Seed::new(1))
//!     .with_registry(registry)
//!     .with_congestion("pacubic")
//!     .with_clock(clock);
//! # let _ = config;
//! ```
//!
//! The same `SimClock` must go to the endpoint (`QuicConfig::with_clock`)
//! and to PACUBIC: the engine stamps lost packets with virtual time and the
//! controller compares them with the `Instant`s of its callbacks. Only the
//! endpoint that sends the data should use PACUBIC with a given queue: every
//! controller built by one factory drains the same queue.

mod cubic;
mod pacubic;
mod ratio;

pub use cubic::{Cubic, CubicConfig, CubicCore, CubicParams};
pub use pacubic::{Pacubic, PacubicConfig, PacubicFactory, PacubicStats};
pub use ratio::{MAX_RATIO, MIN_RATIO, PathRatio};
