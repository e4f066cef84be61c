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
    /// Remainder of the last division, in bit·ns units (< rate, so it
    /// fits in a u64).
    carry: u64,
}

impl ConstantServer {
    fn depart(&mut self, now: Time, len: u64) -> Time {
        if now >= self.busy_until {
            self.busy_until = now;
            self.carry = 0;
        }
        let bps = self.rate.bits_per_sec();
        // For every packet size that occurs the work fits in a u64, and a
        // 64-bit division is several times cheaper than a 128-bit one (a
        // library call); quotient and remainder are the same either way.
        let work64 = len
            .checked_mul(8 * 1_000_000_000)
            .and_then(|bit_ns| bit_ns.checked_add(self.carry));
        let nanos = match work64 {
            Some(work) => {
                self.carry = work % bps;
                work / bps
            }
            None => {
                let work = u128::from(len) * 8 * 1_000_000_000 + u128::from(self.carry);
                let bps = u128::from(bps);
                // The remainder is below `bps`, a u64.
                self.carry = u64::try_from(work % bps).unwrap_or(u64::MAX);
                u64::try_from(work / bps).unwrap_or(u64::MAX)
            }
        };
        self.busy_until = Time::from_nanos(self.busy_until.as_nanos().saturating_add(nanos));
        self.busy_until
    }
}

/// A trace-driven transmitter with mahimahi's semantics: each opportunity
/// carries up to 1500 bytes; a packet larger than what is left of an
/// opportunity continues into the next ones; what a packet leaves unused of
/// an opportunity serves the next packet only if that packet was already
/// queued at the opportunity's time (otherwise it is wasted). A packet that
/// arrives exactly at an opportunity's time was not queued then: mahimahi
/// (`LinkQueue::read_packet`) serves the opportunities of the current
/// millisecond before it queues a packet arriving in it, so a packet uses
/// only opportunities strictly after its arrival.
#[derive(Clone, Debug)]
pub(crate) struct TraceServer {
    trace: Arc<CapacityTrace>,
    /// The opportunity in which the last accepted packet finished, and the
    /// bytes left in it.
    cursor: Option<(u64, u32)>,
}

impl TraceServer {
    fn depart(&mut self, now: Time, len: u64) -> Time {
        let first = self.trace.first_opportunity_after(now);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The departure times of the 128-bit arithmetic the constant server
    /// used before its 64-bit fast path.
    fn reference(rate: u64, arrivals: &[(u64, u64)]) -> Vec<u64> {
        let (mut busy, mut carry) = (0u64, 0u128);
        arrivals
            .iter()
            .map(|&(now, len)| {
                if now >= busy {
                    busy = now;
                    carry = 0;
                }
                let work = u128::from(len) * 8 * 1_000_000_000 + carry;
                carry = work % u128::from(rate);
                let nanos = u64::try_from(work / u128::from(rate)).unwrap_or(u64::MAX);
                busy = busy.saturating_add(nanos);
                busy
            })
            .collect()
    }

    #[test]
    fn fast_path_matches_exact_arithmetic() {
        // Back-to-back packets with remainders, idle gaps, and sizes too big
        // for the 64-bit path (above ~2.3 GB).
        let arrivals = [
            (0, 1500),
            (0, 1500),
            (10, 77),
            (5_000_000, 1),
            (5_000_001, 3_000_000_000),
            (5_000_002, 1500),
            (u64::MAX / 2, u64::MAX / 16),
            (u64::MAX / 2, 9),
        ];
        for rate in [1, 7, 999_999_937, 10_000_000, 100_000_000_000, u64::MAX] {
            let mut server = Server::new(&Capacity::Constant(Rate::from_bps(rate)));
            let got: Vec<u64> = arrivals
                .iter()
                .map(|&(now, len)| server.depart(Time::from_nanos(now), len).as_nanos())
                .collect();
            assert_eq!(got, reference(rate, &arrivals), "rate {rate}");
        }
    }
}
