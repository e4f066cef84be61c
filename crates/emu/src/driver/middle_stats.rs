//! What the middlebox driver counts ([`MiddleStats`]).

use crate::link::Lateness;
use serde::Serialize;

/// What the driver counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MiddleStats {
    /// Frames read from the interfaces.
    pub frames: u64,
    /// UDP datagrams handed to the engine (or, in null mode, parsed for
    /// it), from the interfaces and beside the path from local sockets.
    pub datagrams: u64,
    /// Frames that are not IPv4/UDP (ARP, TCP, ICMP, IPv6, fragments).
    pub other_frames: u64,
    /// Frames that do not parse (truncated, bad header or checksum).
    pub malformed_frames: u64,
    /// Frames longer than the driver reads (dropped).
    pub oversize_frames: u64,
    /// In path: other and malformed frames forwarded unchanged.
    pub passed_through: u64,
    /// Datagrams whose TTL ran out at this node (dropped).
    pub ttl_expired: u64,
    /// Beside the path: sniffed datagrams to a local socket address,
    /// skipped (the socket's copy goes to the engine).
    pub sniffed_local: u64,
    /// Datagrams read from the local sockets (in path: discarded, the
    /// engine had the sniffed copy).
    pub local_datagrams: u64,
    /// Frames or datagrams sent (the engine's, and passed-through frames).
    pub sent: u64,
    /// Beside the path: of the local sockets' datagrams sent, those sent
    /// as whole frames on a packet socket (the rest went through the UDP
    /// socket).
    pub sent_as_frames: u64,
    /// The engine's datagrams with no route, for the node itself, or not
    /// IPv4 (dropped).
    pub unroutable: u64,
    /// Sends the kernel refused (full queue, too large, no route).
    pub send_errors: u64,
    /// The engine's datagrams held for a later [`Transmit::at`].
    pub held: u64,
    /// How late the held datagrams left against their `at`.
    pub late: Lateness,
    /// How long frames waited between their kernel arrival stamp and the
    /// driver reading them (the engine is given the stamp).
    pub read_wait: Lateness,
    /// Frames read without an arrival stamp (given the read time).
    pub unstamped: u64,
    /// Frames the kernel dropped before the driver read them.
    pub kernel_drops: u64,
    /// Receive errors of a packet socket (its interface went down); the
    /// driver goes on and sees frames again once it is back up.
    pub interface_errors: u64,
    /// Turns of the loop (wake-ups).
    pub turns: u64,
    /// Wall-clock nanoseconds spent inside the engine (an input — a
    /// datagram or a due timer — and the `poll_transmit` calls after it,
    /// timed together; `poll_timeout`, a field lookup, is not timed). It
    /// includes the time the thread was preempted inside the engine.
    pub engine_ns: u64,
    /// Timed stretches of the engine's work.
    pub engine_calls: u64,
    /// With [`MiddleDriver::time_engine_cpu`]: the thread's CPU time in
    /// the same stretches, in nanoseconds, as read (each stretch also
    /// holds [`Self::cpu_clock_inside_ns`] of the readings' own cost): the
    /// engine's own work, what PEMI's Figure 13 counts against the packet
    /// I/O.
    pub engine_cpu_ns: u64,
    /// Stretches timed by the CPU clock.
    pub engine_cpu_calls: u64,
    /// Of [`Self::engine_cpu_ns`], the stretches that ran a due timer
    /// (the rest handled a datagram).
    pub engine_timer_cpu_ns: u64,
    /// Those stretches.
    pub engine_timer_calls: u64,
    /// The CPU-clock readings' cost inside each stretch
    /// ([`super::engine_timer::CpuClockCost`]), measured at start.
    pub cpu_clock_inside_ns: u64,
    /// The rest of their cost per stretch (outside the stretches).
    pub cpu_clock_outside_ns: u64,
    /// The warm-up readings before each stretch, summed: the CPU clock's
    /// cold cost, measured (neither the engine's work nor packet I/O).
    pub cpu_clock_warmup_ns: u64,
    /// The driver thread's CPU time over [`MiddleDriver::run`], in
    /// nanoseconds (`CLOCK_THREAD_CPUTIME_ID`): the engine's work plus the
    /// packet I/O.
    pub cpu_ns: u64,
}
