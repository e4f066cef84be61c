//! Small hosts for tests, examples and benchmarks of the simulator itself:
//! a constant-bit-rate source, a window-limited sender, and a sink that can
//! echo acknowledgements. They are probes, not workloads (the workloads live
//! with the QUIC crate).
//!
//! Their datagrams start with a 16-byte [`Probe`] header (sequence number
//! and send time), so a receiver can measure one-way delay and an echo
//! carries the round-trip time back.

mod cbr;
mod probe;
mod sink;
mod window;

pub use cbr::CbrSource;
pub use probe::Probe;
pub use sink::{Arrival, Sink};
pub use window::WindowSender;
