//! The interface between the simulator and an endpoint.

use crate::{Datagram, Time};
use std::any::Any;

/// An endpoint (a QUIC client or server, a workload, a test probe) as a
/// sans-IO state machine, shaped like `quinn_proto::Connection`.
///
/// The simulator calls a host only when something happened to it: a
/// datagram arrived, its timer fired, or its start time came. After each such
/// input it drains [`Host::poll_transmit`] until `None`, then asks
/// [`Host::poll_timeout`] for the next wakeup, then checks
/// [`Host::is_finished`]. A host is never polled on behalf of another host's
/// events, so the cost of a run grows with the traffic, not with the number
/// of hosts.
///
/// A host sets the source address of what it sends (the address it was
/// added with) and may address any destination; the simulator routes on
/// the destination IP. It receives only datagrams addressed to one of its
/// IPs, and only from its start time on (earlier ones are dropped and
/// counted in [`crate::SimStats::before_start`]).
///
/// `Any` lets a test or the experiment runner read a host's own results
/// back after a run ([`crate::Simulator::host`]); `Send` lets a whole
/// simulation move to a worker thread.
pub trait Host: Any + Send {
    /// A datagram addressed to this host arrived at `now`.
    fn handle_datagram(&mut self, now: Time, datagram: Datagram);

    /// The timer last returned by [`Host::poll_timeout`] expired; `now` is
    /// its deadline (or later).
    fn handle_timeout(&mut self, now: Time);

    /// The next datagram to send now, if any. Called until it returns
    /// `None` after every input. A host that paces its sending returns
    /// `None` and sets a timer instead.
    fn poll_transmit(&mut self, now: Time) -> Option<Datagram>;

    /// When the host next wants [`Host::handle_timeout`], if ever. A deadline
    /// in the past fires at the current time.
    fn poll_timeout(&mut self) -> Option<Time>;

    /// Whether this host's work is done. A run ends when every host is
    /// finished (or at its time limit), so passive hosts (sinks, servers
    /// that only answer) should return `true` at all times.
    fn is_finished(&self) -> bool;
}

/// A boxed host is a host: drivers (the simulator, real mode) can run hosts
/// whose type is only known at run time.
impl Host for Box<dyn Host> {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.as_mut().handle_datagram(now, datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.as_mut().handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.as_mut().poll_transmit(now)
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.as_mut().poll_timeout()
    }

    fn is_finished(&self) -> bool {
        self.as_ref().is_finished()
    }
}
