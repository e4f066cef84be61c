//! The dominant direction (§4.1): which end sends most of a connection's
//! data, decided once per end-to-end smoothed RTT from the volumes the two
//! ends sent, each packet counted above the connection's smallest packet
//! (QUIC's headers are large), with hysteresis: without a 2× majority the
//! last decision stands.

use crate::Side;
use netsim::Time;
use std::time::Duration;

/// Volumes and the decision.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Dominant {
    volume: [u64; 2],
    smallest: Option<u64>,
    period_end: Option<Time>,
    current: Option<Side>,
}

impl Dominant {
    /// A packet of `len` bytes from `side` at `now`; `period` is the
    /// end-to-end smoothed RTT. Returns the new decision if it changed.
    pub(crate) fn on_packet(
        &mut self,
        now: Time,
        side: Side,
        len: u64,
        period: Duration,
    ) -> Option<Option<Side>> {
        let mut changed = None;
        match self.period_end {
            None => self.period_end = Some(now + period),
            Some(end) if now >= end => {
                let [client, server] = self.volume;
                let decision = if 2 * client < server {
                    Some(Side::Server)
                } else if client > 2 * server {
                    Some(Side::Client)
                } else {
                    self.current
                };
                if decision != self.current {
                    self.current = decision;
                    changed = Some(decision);
                }
                self.volume = [0, 0];
                self.period_end = Some(now + period);
            }
            Some(_) => {}
        }
        let smallest = self.smallest.map_or(len, |s| s.min(len));
        self.smallest = Some(smallest);
        self.volume[side.index()] += len - smallest;
        changed
    }

    /// The end whose packets are protected, once decided.
    pub(crate) fn current(&self) -> Option<Side> {
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_sender_dominates_with_hysteresis() {
        let mut d = Dominant::default();
        let period = Duration::from_millis(10);
        let mut t = 0;
        let mut step = |d: &mut Dominant, side, len| {
            t += 1;
            d.on_packet(Time::from_millis(t), side, len, period)
        };
        // Headers of 40 bytes each way; data of 1200 from the server.
        for _ in 0..5 {
            step(&mut d, Side::Client, 40);
            step(&mut d, Side::Server, 1200);
        }
        assert_eq!(step(&mut d, Side::Client, 40), Some(Some(Side::Server)));
        // Both send equally: the decision stands.
        for _ in 0..10 {
            assert_eq!(step(&mut d, Side::Client, 1200), None);
            assert_eq!(step(&mut d, Side::Server, 1200), None);
        }
        assert_eq!(d.current(), Some(Side::Server));
        // The client takes over.
        for _ in 0..12 {
            step(&mut d, Side::Client, 1200);
        }
        assert_eq!(d.current(), Some(Side::Client));
    }
}
