//! pepkit's real mode: the same engines as the simulator, on real kernels,
//! sockets and interfaces.
//!
//! # The layout
//!
//! * **Testbeds** ([`Testbed`], `testbed/`): a chain of network namespaces
//!   — client, middle nodes, server — joined by veth pairs through one
//!   emulator namespace, with unique names per run, torn down on drop, on
//!   error and on Ctrl-C ([`sys::interrupt`]); stale ones from crashed runs
//!   are swept. Hosts and middleboxes run on its nodes
//!   ([`Testbed::run_host`], [`Testbed::run_middlebox`]).
//! * **The link emulator** ([`link`]): an AF_PACKET bump in the wire that
//!   runs [`netsim::Link`] — the simulator's link model, the same code — in
//!   real time ([`link::Relay`]), and the check of how closely it matches
//!   its configuration ([`link::check`]).
//! * **Engines on real sockets** ([`driver`]): any [`netsim::Host`] (our
//!   QUIC endpoints, the media workload, the Sidekick sender engine beside
//!   them) on UDP sockets and the wall clock ([`HostDriver`],
//!   [`RealClock`]); any [`netsim::Middlebox`] on a middle node, in the
//!   path (the driver forwards, with `AF_PACKET` sockets) or beside it (the
//!   kernel forwards, the driver sniffs), handed back when it stops
//!   ([`driver::MiddleDriver`]); the Ethernet frames it parses and builds
//!   ([`driver::frame`]).
//! * **Linux TCP** ([`tcp`]): bulk transfers and time-bounded flows on
//!   kernel sockets with a congestion controller per socket ([`tcp::bulk`],
//!   [`tcp::stream`], [`tcp::congestion`]), the baselines the TCP PEP
//!   (the `pep` crate) splits.
//! * **Routers** ([`router`]): what a middle system's daemon takes from
//!   the real router it runs on — interfaces, their MACs and their
//!   neighbours', routes, the router's addresses — the same for every
//!   system (`pepkit middle` runs any of them on the middlebox driver).
//! * **The system** ([`sys`]): the system calls std does not wrap, the
//!   system tools (`ip`, `ethtool`, `sysctl`, `nft`, each under a time limit
//!   with errors that name the command: [`sys::command`]), child processes
//!   under `timeout`, stopped with SIGTERM ([`Process`]), Ctrl-C.
//! * **Real-mode tests' gate** ([`require_real_or_skip`]): a test without
//!   root or namespaces prints why and passes, or fails when
//!   [`REQUIRE_REAL`] (`PEPKIT_REQUIRE_REAL=1`, set by CI) is set.
//!
//! The types used most are re-exported here: the testbed's, the host
//! driver's, the clock, child processes and the tests' gate.
//!
//! # What it does not do
//!
//! Nothing here is deterministic: real mode measures a real kernel. IPv4
//! only. `sys/syscalls.rs` and `sys/frame_send.rs` are the only modules
//! with `unsafe` code (system calls std does not wrap).

pub mod driver;
pub mod link;
mod require;
pub mod router;
pub mod sys;
pub mod tcp;
mod testbed;

pub use driver::{DriverStats, HostDriver, HostRun, HostStop, RunUntil};
pub use require::{REQUIRE_REAL, real_required, require_or_skip, require_real_or_skip};
pub use sys::{Finished, Process, RealClock};
pub use testbed::{
    HostRunSpec, HostThread, MiddleThread, Node, NodeInterface, Swept, Testbed, TestbedError,
    TestbedSpec, add_namespace, available, sweep_stale,
};
