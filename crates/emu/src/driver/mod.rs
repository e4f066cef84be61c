//! Engines on real sockets: the simulator's engines driven in real time on
//! a node's sockets and interfaces, with the simulator's calling convention
//! (after every input drain `poll_transmit`, then sleep in `ppoll` until
//! `poll_timeout` or a readable socket), each on a thread that has entered
//! its node's network namespace.
//!
//! * [`HostDriver`] (`host.rs`): any [`netsim::Host`] — our QUIC endpoints,
//!   the media workload, the Sidekick sender engine beside them — on UDP
//!   sockets and the wall clock ([`crate::RealClock`]).
//! * [`MiddleDriver`] (`middle.rs`): any [`netsim::Middlebox`] on a middle
//!   node's interfaces, in the path (`in_path.rs`) or beside it
//!   (`beside.rs`), described below.
//! * [`frame`]: parses the Ethernet frames the middlebox driver receives
//!   and builds the ones it sends.
//!
//! # The middlebox driver
//!
//! [`MiddleDriver`] runs any middle-node engine (the Sidekick proxy, PEMI,
//! a PEP, a test impairment) on a real node's interfaces, in process, on a
//! thread that has entered the node's network namespace — driven as the
//! simulator drives it, and handed back when it stops, so a trial reads its
//! counters from the engine object itself.
//!
//! ## Two placements
//!
//! **In path** ([`Placement::InPath`]): the driver *is* the node's
//! forwarding plane. The kernel's forwarding is off on the driver's
//! interfaces while it runs (`net.ipv4.conf.<if>.forwarding = 0`, restored
//! when the driver drops). The driver receives every frame arriving on each
//! interface with an `AF_PACKET` socket (inbound only), parses IPv4/UDP
//! ([`frame`]), decrements the TTL as the simulator does (a datagram
//! whose TTL runs out is dropped and counted) and hands the datagram to the
//! engine with the interface it arrived on (`Interface(i)`: the node's
//! `i`-th interface, 0 facing the client as on a simulator chain). What the
//! engine transmits leaves at its [`netsim::Transmit::at`] — held in a
//! time-ordered queue until then — out of [`netsim::Route::Interface`], or
//! by destination through the caller's [`Routes`], as an Ethernet frame
//! built here (valid IPv4 and UDP checksums; our MAC as source, the
//! neighbour's as destination), sent with `sendmmsg` on the outgoing
//! interface's packet socket. Frames that are not IPv4/UDP (ARP, ICMP,
//! TCP, IPv6, fragments, malformed) are passed through at once and
//! unchanged but for their Ethernet addresses: IPv4 by the routing table,
//! anything else out of every other interface (a
//! middlebox forwards what it does not understand). IPv4 packets for the
//! node's own addresses that are not UDP are the kernel's alone.
//!
//! **Beside the path** ([`Placement::Beside`]): the kernel forwards; the
//! driver sniffs copies of the frames arriving on the chosen interfaces and
//! hands their UDP datagrams to the engine, which must not forward them
//! (e.g. `sidekick::ProxyConfig::forward` off): everything it emits is its
//! own, sent from the bound socket of its source address if that is one of
//! [`MiddleNodeSpec::local`], else from a raw IPv4 socket (the source may
//! be spoofed). This is what the Sidekick proxy daemon does.
//!
//! ## The node's own addresses
//!
//! A middlebox sees everything that reaches its node, as in the simulator,
//! datagrams to the node's own addresses included (the Sidekick proxy's
//! control address). The driver binds a UDP socket on every socket address
//! of [`MiddleNodeSpec::local`] ("engine-owned"): the kernel then delivers
//! those datagrams to a socket instead of answering them with ICMP port
//! unreachable. In path the engine gets the `AF_PACKET` copy and the
//! socket's copy is drained and discarded; beside the path the engine gets
//! the socket's copy (the datagram came through the kernel's input path)
//! and the sniffed one is skipped. Datagrams to other ports of the node's
//! addresses reach the engine in path too, and the kernel answers them as
//! any host would.
//!
//! ## The loop
//!
//! The simulator's calling convention: after each input (a datagram, a due
//! timer) the driver drains `poll_transmit`, then reads `poll_timeout` and
//! sleeps in `ppoll` until the engine's next timer, the next held datagram
//! or a readable socket, at most the `max_sleep` given to
//! [`MiddleDriver::turn`] so that a stop flag is seen. Reads per turn are
//! bounded (batches of [`BATCH`] frames with `recvmmsg`). Nothing a peer
//! sends stops the driver: what does not parse, cannot be sent or has no
//! route is counted in [`MiddleStats`].

pub mod frame;

mod beside;
mod engine_timer;
mod host;
mod in_path;
mod middle;
mod middle_stats;
mod periodic;
mod spec;

pub use host::{DriverStats, HostDriver, HostRun, HostStop, RunUntil};
pub use middle::{BATCH, MAX_SLEEP, MiddleDriver, MiddleRun};
pub use middle_stats::MiddleStats;
pub use periodic::Periodic;
pub use spec::{DriverError, DriverInterface, LinkAddrs, Mac, MiddleNodeSpec, Placement, Routes};

use std::sync::atomic::{AtomicBool, Ordering};

/// A daemon's main loop: until `stop` is set, writes its table to `log`
/// whenever `dump` is set (SIGUSR1; it is cleared), then takes one `turn`.
pub fn run_until_stopped<D, E>(
    daemon: &mut D,
    stop: &AtomicBool,
    dump: &AtomicBool,
    log: &mut dyn std::io::Write,
    dump_table: impl Fn(&mut D, &mut dyn std::io::Write),
    mut turn: impl FnMut(&mut D, &mut dyn std::io::Write) -> Result<(), E>,
) -> Result<(), E> {
    while !stop.load(Ordering::Relaxed) {
        if dump.swap(false, Ordering::Relaxed) {
            dump_table(daemon, log);
        }
        turn(daemon, log)?;
    }
    Ok(())
}

/// Writes a daemon's per-flow table to `log` (the daemons' `dump`, on
/// SIGUSR1): a header line `"{what}: {n} {rows} at {now} s"`, then one
/// line per row. Errors are ignored: the log is for a person watching.
pub fn write_table(
    log: &mut dyn std::io::Write,
    what: &str,
    rows: &str,
    now: netsim::Time,
    lines: &[String],
) {
    let _ = writeln!(
        log,
        "{what}: {} {rows} at {:.3} s",
        lines.len(),
        now.as_secs_f64()
    );
    for line in lines {
        let _ = writeln!(log, "{line}");
    }
    let _ = log.flush();
}
