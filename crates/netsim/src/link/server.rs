//! The link's transmitter: when does a packet that joins the back of the
//! FIFO finish transmission?
//!
//! Because the queue is FIFO and the capacity does not depend on what
//! arrives later, the departure time of a packet is fixed the moment it is
//! accepted: it is the later of its arrival and the previous packet's
//! departure, plus its own transmission.

use crate::{Capacity, CapacityTrace, Rate, Time};
use std::sync::Arc;

/// Departure-time bookkeeping for one capacity model.
#[derive(Clone, Debug)]
pub(crate) enum Server {
    Unlimited,
    Constant(ConstantServer),
    Trace(TraceServer),
}

impl Server {
    pub(crate) fn new(capacity: &Capacity) -> Server {
        match capacity {
            Capacity::Unlimited => Server::Unlimited,
            Capacity::Constant(rate) => Server::Constant(ConstantServer {
                rate: *rate,
                busy_until: Time::ZERO,
                carry: 0,
            }),
            Capacity::Trace(trace) => Server::Trace(TraceServer {
                trace: Arc::clone(trace),
                cursor: None,
            }),
        }
    }

    /// Accepts a packet of `len` bytes at `now`; returns when its last bit
    /// leaves.
    pub(crate) fn depart(&mut self, now: Time, len: u64) -> Time {
        match self {
            Server::Unlimited => now,
            Server::Constant(s) => s.depart(now, len),
            Server::Trace(s) => s.depart(now, len),
        }
    }
}

/// A constant-rate transmitter. Transmission times are exact: the
/// sub-nanosecond remainder of one packet is carried into the next while
/// the link stays busy.
#[derive(Clone, Debug)]
pub(crate) struct ConstantServer {
    rate: Rate,
    busy_until: Time,
    /// Remainder of the last division, in bit·ns units (< rate).
    carry: u128,
}

impl ConstantServer {
    fn depart(&mut self, now: Time, len: u64) -> Time {
        if now >= self.busy_until {
            self.busy_until = now;
            self.carry = 0;
        }
        let bps = u128::from(self.rate.bits_per_sec());
        let work = u128::from(len) * 8 * 1_000_000_000 + self.carry;
        let nanos = work / bps;
        self.carry = work % bps;
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.busy_until = Time::from_nanos(self.busy_until.as_nanos().saturating_add(nanos));
        self.busy_until
    }
}

/// A trace-driven transmitter with mahimahi's semantics: each opportunity
/// carries up to 1500 bytes; a packet larger than what is left of an
/// opportunity continues into the next ones; what a packet leaves unused of
/// an opportunity serves the next packet only if that packet was already
/// queued at the opportunity's time (otherwise it is wasted).
#[derive(Clone, Debug)]
pub(crate) struct TraceServer {
    trace: Arc<CapacityTrace>,
    /// The opportunity in which the last accepted packet finished, and the
    /// bytes left in it.
    cursor: Option<(u64, u32)>,
}

impl TraceServer {
    fn depart(&mut self, now: Time, len: u64) -> Time {
        let first = self.trace.first_opportunity_at_or_after(now);
        let full = CapacityTrace::OPPORTUNITY_BYTES;
        let (mut k, mut credit) = match self.cursor {
            Some((k, left)) if k >= first && left > 0 => (k, left),
            Some((k, _)) if k >= first => (k + 1, full),
            _ => (first, full),
        };
        let mut remaining = len;
        while remaining > u64::from(credit) {
            remaining -= u64::from(credit);
            k += 1;
            credit = full;
        }
        // remaining <= credit, which is a u32.
        credit -= u32::try_from(remaining).unwrap_or(credit);
        self.cursor = Some((k, credit));
        self.trace.opportunity_time(k)
    }
}
