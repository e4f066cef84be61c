//! The hook for code that sits on a middle node of the path.

use crate::{Datagram, Time};
use std::any::Any;
use std::fmt;

/// One of a node's interfaces, numbered from 0 in the order its links were
/// connected. Each interface has one outgoing and one incoming link to the
/// same neighbour. The topology builders document their numbering (on a
/// chain's middle node, 0 faces the sender and 1 the receiver).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interface(pub u16);

impl Interface {
    /// The interface's index.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "if{}", self.0)
    }
}

/// Which way a middlebox's output leaves the node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Route {
    /// By the node's routing table, on the destination IP.
    #[default]
    ByDestination,
    /// Out of this interface, whatever the destination.
    Interface(Interface),
}

/// A datagram a middlebox sends: something it forwards (now or later), a
/// copy, or something of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// What to send.
    pub datagram: Datagram,
    /// When to put it on the outgoing link; a time in the past means now.
    pub at: Time,
    /// Which way.
    pub route: Route,
}

impl Transmit {
    /// Send `datagram` at `at`, routed by destination.
    pub fn at(at: Time, datagram: Datagram) -> Transmit {
        Transmit {
            datagram,
            at,
            route: Route::ByDestination,
        }
    }

    /// Send out of a given interface instead of by destination.
    pub fn via(mut self, interface: Interface) -> Transmit {
        self.route = Route::Interface(interface);
        self
    }
}

/// Code on a middle node: a PEP, the Sidekick proxy, PEMI, a tunnel
/// endpoint, a split-connection proxy, or a test impairment.
///
/// Sans-IO like [`crate::Host`]: every datagram that reaches the node, in
/// either direction and whatever its destination, goes to
/// [`Middlebox::handle_datagram`] with its arrival time and the interface it
/// came in on. The middlebox owns it from then on: it forwards it by
/// returning it from [`Middlebox::poll_transmit`] (at once, or with a later
/// [`Transmit::at`]), drops it by not returning it, copies it by returning
/// clones, reorders by choosing the order and times, and injects datagrams of
/// its own with any addresses. Timers work as for hosts. A real-time driver
/// (an AF_PACKET relay in a namespace) can run the same middlebox, since
/// nothing here refers to the simulator.
///
/// The simulator drains `poll_transmit` after every input, then reads
/// `poll_timeout`. It decrements the TTL of each arriving datagram before
/// handing it over.
pub trait Middlebox: Any + Send {
    /// A datagram arrived at `now` on interface `from`.
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram);

    /// The timer last returned by [`Middlebox::poll_timeout`] expired.
    fn handle_timeout(&mut self, now: Time);

    /// The next datagram to send, if any.
    fn poll_transmit(&mut self, now: Time) -> Option<Transmit>;

    /// When the middlebox next wants [`Middlebox::handle_timeout`].
    fn poll_timeout(&mut self) -> Option<Time>;
}

/// A boxed middlebox is a middlebox: drivers (the simulator, real mode)
/// can run engines whose type is only known at run time.
impl Middlebox for Box<dyn Middlebox> {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        self.as_mut().handle_datagram(now, from, datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.as_mut().handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        self.as_mut().poll_transmit(now)
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        self.as_mut().poll_timeout()
    }
}

/// A middlebox that forwards every datagram at once, unchanged: a router
/// in user space. Real mode runs it through the same driver as any engine,
/// which measures what the driver itself costs per datagram (PEMI's Figure
/// 13 subtracts it); in the simulator it behaves as a plain router.
#[derive(Debug, Default)]
pub struct Forward {
    queue: std::collections::VecDeque<Transmit>,
}

impl Middlebox for Forward {
    fn handle_datagram(&mut self, now: Time, _from: Interface, datagram: Datagram) {
        self.queue.push_back(Transmit::at(now, datagram));
    }

    fn handle_timeout(&mut self, _now: Time) {}

    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.queue.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }
}
