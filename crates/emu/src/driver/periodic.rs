//! A daemon's periodic counters (`--stats-every`): due at each multiple of
//! the interval of its clock, written as one `stats {json}` line.

use netsim::Time;
use serde::Serialize;
use std::io::Write;
use std::time::Duration;

/// When a daemon's counters are next due.
#[derive(Clone, Copy, Debug)]
pub struct Periodic {
    every: Option<Duration>,
    next: Time,
}

impl Periodic {
    /// Every `every` from time zero (never with `None`).
    pub fn new(every: Option<Duration>) -> Periodic {
        Periodic {
            every,
            next: every.map_or(Time::MAX, |every| Time::ZERO + every),
        }
    }

    /// Writes `stats()` to `log` as a `stats {json}` line if due at `now`
    /// (the next is due an interval later); a failed write is ignored, as
    /// the counters are also returned at the end.
    pub fn write_if_due<S: Serialize>(
        &mut self,
        now: Time,
        log: &mut dyn Write,
        stats: impl FnOnce() -> S,
    ) {
        if now < self.next {
            return;
        }
        let line = serde_json::to_string(&stats()).unwrap_or_default();
        let _ = writeln!(log, "stats {line}");
        self.next = now + self.every.unwrap_or(Duration::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_per_interval_and_never_without_one() {
        let mut every = Periodic::new(Some(Duration::from_secs(1)));
        let mut log = Vec::new();
        for ms in [0, 999, 1000, 1500, 2000] {
            every.write_if_due(Time::from_millis(ms), &mut log, || ms);
        }
        assert_eq!(String::from_utf8(log).unwrap(), "stats 1000\nstats 2000\n");
        let mut never = Periodic::new(None);
        let mut log = Vec::new();
        never.write_if_due(Time::from_secs(1_000_000), &mut log, || 1);
        assert!(log.is_empty());
    }
}
