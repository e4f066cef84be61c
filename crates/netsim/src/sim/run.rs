//! The driver loop: pop the earliest event, hand it to the one node it
//! concerns, drain that node's output onto links, reschedule its timer.

use super::Simulator;
use super::node::Role;
use super::timers::Timers;
use crate::capture::CapturePoint;
use crate::{Datagram, Fate, LinkId, NodeId, Route, Time, Transmit};

/// Something that happens at one instant.
#[derive(Debug)]
pub(crate) enum Event {
    /// A host's start time, or time zero for a middlebox: poll it once.
    Start(NodeId),
    /// A datagram reaches the far end of a link.
    Arrive { link: LinkId, datagram: Datagram },
    /// A middlebox's deferred transmission.
    Send {
        node: NodeId,
        datagram: Datagram,
        route: Route,
    },
}

/// Why [`Simulator::run_until`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// Every host reported [`crate::Host::is_finished`].
    AllFinished,
    /// The next event is after the time limit.
    TimeLimit,
    /// Nothing is left to happen.
    Idle,
}

/// The result of [`Simulator::run_until`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunOutcome {
    /// Why the run stopped.
    pub reason: StopReason,
    /// The virtual time when it stopped (the limit, for
    /// [`StopReason::TimeLimit`]).
    pub end: Time,
}

impl Simulator {
    /// Runs until every host is finished, nothing is left to happen, or the
    /// next event would be after `limit`. Can be called again with a later
    /// limit to continue.
    pub fn run_until(&mut self, limit: Time) -> RunOutcome {
        loop {
            if self.hosts > 0 && self.unfinished == 0 {
                self.stats.events += self.timers.count_passed(self.last, true);
                return self.outcome(StopReason::AllFinished);
            }
            let event = self.queue.peek_key();
            let timer = self.timers.peek();
            let (key, timer_node) = match (event, timer) {
                (Some(e), Some((t, node))) if t < e => (t, Some(node)),
                (Some(e), _) => (e, None),
                (None, Some((t, node))) => (t, Some(node)),
                (None, None) => return self.idle(limit),
            };
            if key.0 > limit {
                self.now = self.now.max(limit);
                self.stats.events += self.timers.count_until(limit).0;
                return self.outcome(StopReason::TimeLimit);
            }
            self.now = key.0;
            self.last = key;
            self.stats.events += 1 + self.timers.count_passed(key, false);
            match timer_node {
                Some(node) => self.fire(node),
                None => {
                    if let Some((_, event)) = self.queue.pop() {
                        self.dispatch(event);
                    }
                }
            }
        }
    }

    /// Nothing is pending. The superseded timers up to `limit` are counted
    /// as the old queue popped them: it stopped at the limit if one was
    /// later, else at the latest of them.
    fn idle(&mut self, limit: Time) -> RunOutcome {
        let (counted, latest, later) = self.timers.count_until(limit);
        self.stats.events += counted;
        if later {
            self.now = self.now.max(limit);
            return self.outcome(StopReason::TimeLimit);
        }
        self.now = self.now.max(latest.unwrap_or(self.now));
        self.outcome(StopReason::Idle)
    }

    fn outcome(&self, reason: StopReason) -> RunOutcome {
        RunOutcome {
            reason,
            end: self.now,
        }
    }

    /// A node's timer fires.
    fn fire(&mut self, node: NodeId) {
        let now = self.now;
        self.timers.fire(node);
        let Some(n) = self.nodes.get_mut(node.index()) else {
            return;
        };
        match &mut n.role {
            Role::Host(h) => {
                h.deadline = None;
                h.engine.handle_timeout(now);
            }
            Role::Middle(m) => {
                m.deadline = None;
                if let Some(engine) = &mut m.engine {
                    engine.handle_timeout(now);
                }
            }
        }
        self.activate(node);
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Start(node) => {
                if let Some(Role::Host(h)) = self.nodes.get_mut(node.index()).map(|n| &mut n.role) {
                    h.started = true;
                }
                self.activate(node);
            }
            Event::Arrive { link, datagram } => self.arrive(link, datagram),
            Event::Send {
                node,
                datagram,
                route,
            } => self.send(node, datagram, route),
        }
    }

    /// A datagram comes off `link` into the node at its far end.
    fn arrive(&mut self, link: LinkId, mut datagram: Datagram) {
        let now = self.now;
        let Some(slot) = self.links.get(link.index()) else {
            return;
        };
        let (from, to, iface) = (slot.from, slot.to, slot.to_iface);
        for &(capture, point, interface) in &slot.captures {
            if point == CapturePoint::Delivered
                && let Some(Some(c)) = self.captures.get_mut(capture)
            {
                c.record(interface, now, &datagram, from.index(), to.index());
            }
        }
        let Some(node) = self.nodes.get_mut(to.index()) else {
            return;
        };
        let owned = node.owns(datagram.dst.ip());
        match &mut node.role {
            Role::Host(h) => {
                if !owned {
                    self.stats.not_for_node += 1;
                    return;
                }
                // ICMP is the host's kernel's: it answers an echo request
                // at once (started or not) and has no use for a reply.
                if !datagram.is_udp() {
                    if let Some(reply) = datagram.echo_reply() {
                        self.stats.echo_replies += 1;
                        self.send(to, reply, Route::ByDestination);
                    } else {
                        self.stats.not_for_node += 1;
                    }
                    return;
                }
                if !h.started {
                    self.stats.before_start += 1;
                    return;
                }
                h.engine.handle_datagram(now, datagram);
            }
            Role::Middle(m) => {
                if datagram.ttl <= 1 {
                    self.stats.ttl_expired += 1;
                    return;
                }
                datagram.ttl -= 1;
                match &mut m.engine {
                    Some(engine) => engine.handle_datagram(now, iface, datagram),
                    None if owned => {
                        self.stats.not_for_node += 1;
                        return;
                    }
                    None => return self.send(to, datagram, Route::ByDestination),
                }
            }
        }
        self.activate(to);
    }

    /// Drains a node's output, then reschedules its timer.
    fn activate(&mut self, node: NodeId) {
        let now = self.now;
        let Some(n) = self.nodes.get_mut(node.index()) else {
            return;
        };
        match &mut n.role {
            Role::Host(h) => {
                let mut out = std::mem::take(&mut self.host_out);
                while let Some(d) = h.engine.poll_transmit(now) {
                    out.push(d);
                }
                let deadline = h.engine.poll_timeout();
                reschedule(
                    &mut self.queue,
                    &mut self.timers,
                    &mut h.deadline,
                    node,
                    deadline,
                    now,
                );
                let finished = h.engine.is_finished();
                if finished != h.finished {
                    h.finished = finished;
                    if finished {
                        self.unfinished -= 1;
                    } else {
                        self.unfinished += 1;
                    }
                }
                for d in out.drain(..) {
                    self.send(node, d, Route::ByDestination);
                }
                self.host_out = out;
            }
            Role::Middle(m) => {
                let Some(engine) = &mut m.engine else {
                    return;
                };
                let mut out = std::mem::take(&mut self.middle_out);
                while let Some(t) = engine.poll_transmit(now) {
                    out.push(t);
                }
                let deadline = engine.poll_timeout();
                reschedule(
                    &mut self.queue,
                    &mut self.timers,
                    &mut m.deadline,
                    node,
                    deadline,
                    now,
                );
                for Transmit {
                    datagram,
                    at,
                    route,
                } in out.drain(..)
                {
                    if at <= now {
                        self.send(node, datagram, route);
                    } else {
                        self.queue.push(
                            at,
                            Event::Send {
                                node,
                                datagram,
                                route,
                            },
                        );
                    }
                }
                self.middle_out = out;
            }
        }
    }

    /// Puts a datagram from `node` onto the link its route selects.
    fn send(&mut self, node: NodeId, datagram: Datagram, route: Route) {
        let now = self.now;
        let Some(n) = self.nodes.get(node.index()) else {
            return;
        };
        let interface = match route {
            Route::ByDestination => n.routes.lookup(datagram.dst.ip()),
            Route::Interface(i) => Some(i),
        };
        let Some(iface) = interface.and_then(|i| n.iface(i)) else {
            self.stats.unroutable += 1;
            return;
        };
        let Some(slot) = self.links.get_mut(iface.out.index()) else {
            return;
        };
        for &(capture, point, interface) in &slot.captures {
            if point == CapturePoint::Offered
                && let Some(Some(c)) = self.captures.get_mut(capture)
            {
                let (from, to) = (slot.from.index(), slot.to.index());
                c.record(interface, now, &datagram, from, to);
            }
        }
        let fate = slot.link.offer(now, datagram.wire_len());
        if let Some(fates) = &mut slot.fates {
            fates.push(super::FateRecord {
                offered: now,
                fingerprint: datagram.fingerprint(),
                fate,
            });
        }
        if let Fate::Deliver { at } = fate {
            // A link's arrivals come in order: its lane keeps them out of
            // the heap (same order of events, see `EventQueue`).
            self.queue.push_in_lane(
                iface.out.index(),
                at,
                Event::Arrive {
                    link: iface.out,
                    datagram,
                },
            );
        }
    }
}

/// Records a node's new deadline and sets its timer if it changed. A
/// deadline in the past fires now.
fn reschedule(
    queue: &mut crate::EventQueue<Event>,
    timers: &mut Timers,
    current: &mut Option<Time>,
    node: NodeId,
    deadline: Option<Time>,
    now: Time,
) {
    if deadline == *current {
        return;
    }
    *current = deadline;
    let key = deadline.map(|at| (at.max(now), queue.take_seq()));
    timers.set(node, key);
}
