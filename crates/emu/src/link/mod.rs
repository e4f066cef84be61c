//! The link emulator: a user-space bump in the wire between pairs of veth
//! ports that runs the simulator's own link model ([`netsim::Link`]) in
//! real time ([`Relay`]: AF_PACKET sockets, batched receive and send, a
//! FIFO per link), and the check of how closely it matches its
//! configuration ([`check`], `pepkit testbed check`). A
//! [`Testbed`](crate::Testbed) runs one relay thread for all the hops of
//! its chain.

pub mod check;
mod relay;

pub use relay::{CaptureSlot, Lateness, Relay, RelayError, RelayHop, RelayReport};
