//! pepkit's real mode: the same engines as the simulator, on real kernels,
//! sockets and interfaces.
//!
//! # What this crate owns
//!
//! * **Testbeds** ([`Testbed`]): a chain of network namespaces — client,
//!   middle nodes, server — joined by veth pairs through one emulator
//!   namespace, with unique names per run, torn down on drop, on error and
//!   on Ctrl-C ([`interrupt`]); stale ones from crashed runs are swept.
//! * **The link emulator** ([`Relay`]): an AF_PACKET bump in the wire that
//!   runs [`netsim::Link`] — the simulator's link model, the same code —
//!   in real time, with batched receive and send.
//! * **Engines on real sockets** ([`HostDriver`]): any [`netsim::Host`]
//!   (our QUIC endpoints, the media workload, the Sidekick sender engine
//!   beside them) driven on UDP sockets and the wall clock ([`RealClock`]).
//! * **Middleboxes on real interfaces** ([`driver::MiddleDriver`]): any
//!   [`netsim::Middlebox`] on a middle node, in the path (the driver
//!   forwards, with `AF_PACKET` sockets) or beside it (the kernel forwards,
//!   the driver sniffs), handed back when it stops
//!   ([`Testbed::run_middlebox`]).
//! * **Child processes** ([`Process`]): daemons and independent peers in a
//!   namespace, each under `timeout`, stopped with SIGTERM.
//! * **System tools** ([`command`]): `ip`, `ethtool`, `sysctl`, `nft`, each
//!   under a time limit with errors that name the command.
//! * **Real-mode tests' gate** ([`require_real_or_skip`]): a test without
//!   root or namespaces prints why and passes, or fails when
//!   [`REQUIRE_REAL`] (`PEPKIT_REQUIRE_REAL=1`, set by CI) is set.
//! * **The Sidekick proxy daemon** ([`sidekick_daemon`]): the proxy engine
//!   on the middlebox driver beside a router's path, with replies from a
//!   raw socket and quACKs from its control address; [`frame`] parses what
//!   the driver receives and builds what it sends; [`proxy_capacity`]
//!   measures the packets per second it sustains on one core.
//!
//! # What it does not do
//!
//! Nothing here is deterministic: real mode measures a real kernel. IPv4
//! only. `sys` is the one module with `unsafe` code (system calls std does
//! not wrap).

pub mod command;
pub mod interrupt;

mod clock;
pub mod driver;
mod host_driver;
pub mod link_check;
mod process;
mod relay;
mod require;
pub mod sys;
mod testbed;

pub use clock::RealClock;
pub use host_driver::{DriverStats, HostDriver, HostRun, HostStop, RunUntil};
pub use process::{Finished, Process};
pub use relay::{Lateness, Relay, RelayError, RelayHop, RelayReport};
pub use require::{REQUIRE_REAL, real_required, require_or_skip, require_real_or_skip};
pub use testbed::{
    HostRunSpec, HostThread, MiddleThread, Node, NodeInterface, Testbed, TestbedError, TestbedSpec,
    available, sweep_stale,
};
pub mod frame;
pub mod proxy_capacity;
pub mod sidekick_daemon;
pub mod tcp_bulk;
pub mod tcp_pep;
