//! How long the middlebox driver's engine works ([`EngineTimer`]): each
//! stretch of the engine's work (an input and the `poll_transmit` calls
//! after it) timed by the wall clock, and, when asked, by the driver
//! thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`).
//!
//! The wall clock is cheap (the vDSO) but counts the time the thread was
//! preempted inside the engine; on a loaded machine that is most of a
//! stretch's wall time. The thread's CPU clock counts only the thread's
//! own cycles, but reading it is a system call (≈ 200 ns each here, not
//! in the vDSO), and a part of each reading's cost falls inside the
//! stretch it times. [`EngineTimer::cpu`] measures that part at start
//! (the median of back-to-back readings around the same wall-clock reads,
//! [`CpuClockCost::inside_ns`]) and the rest of a pair's cost
//! ([`CpuClockCost::outside_ns`]), so that the engine's CPU time and the
//! packet I/O's can each be corrected by `calls ×` its share.
//!
//! That calibration runs with the clock's code and data in cache; in the
//! daemon, packets ~1 ms apart, they are not, and a cold reading's tail
//! (the return from the system call and the vDSO's wall-clock read) falls
//! inside the stretch: an engine that only forwards was charged 1.0–1.5
//! µs a datagram that way. So each stretch starts with one more reading,
//! untimed as the engine's, which brings the clock's path back into the
//! caches; what that reading costs is measured in every stretch
//! ([`MiddleStats::cpu_clock_warmup_ns`]) and is neither the engine's nor
//! the I/O's.

use super::MiddleStats;
use crate::sys::thread_cpu_time;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What one pair of CPU-clock readings costs the driver's thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(super) struct CpuClockCost {
    /// The CPU time between two back-to-back readings (with the two
    /// wall-clock reads between them, as in a timed stretch): counted in
    /// every stretch's CPU time though not the engine's.
    pub(super) inside_ns: u64,
    /// The rest of a pair's CPU time: counted outside the stretches,
    /// though it is not packet I/O either.
    pub(super) outside_ns: u64,
}

/// Readings per calibration.
const CALIBRATION_PAIRS: usize = 20_000;

/// Times the engine's stretches of work into [`MiddleStats`].
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct EngineTimer {
    /// The CPU clock's cost, when the engine is also timed by it.
    cpu: Option<CpuClockCost>,
    /// Set while the stretch being timed runs a due timer.
    pub(super) timing_timer: bool,
}

/// A stretch being timed.
pub(super) struct Stretch {
    /// The warm-up reading, and the CPU clock when the stretch started.
    cpu: Option<(Duration, Duration)>,
    wall: Instant,
}

impl EngineTimer {
    /// Times by the wall clock only.
    pub(super) fn wall() -> EngineTimer {
        EngineTimer {
            cpu: None,
            timing_timer: false,
        }
    }

    /// Times by the wall clock and the thread's CPU clock; measures the CPU
    /// clock's cost on this thread first (≈ 10 ms). Falls back to the wall
    /// clock alone if the CPU clock cannot be read.
    pub(super) fn cpu() -> EngineTimer {
        EngineTimer {
            cpu: calibrate().ok(),
            timing_timer: false,
        }
    }

    /// What a pair of CPU-clock readings costs (`None`: wall clock only).
    pub(super) fn cpu_clock_cost(&self) -> Option<CpuClockCost> {
        self.cpu
    }

    /// Starts timing a stretch.
    pub(super) fn start(&self) -> Stretch {
        let cpu = self.cpu.and_then(|_| {
            let warmup = thread_cpu_time().ok()?;
            std::hint::black_box(Instant::now());
            Some((warmup, thread_cpu_time().ok()?))
        });
        Stretch {
            cpu,
            wall: Instant::now(),
        }
    }

    /// Ends the stretch and adds it to `stats`.
    pub(super) fn stop(&self, stretch: Stretch, stats: &mut MiddleStats) {
        let wall = nanos(stretch.wall.elapsed());
        stats.engine_ns = stats.engine_ns.saturating_add(wall);
        stats.engine_calls += 1;
        if let Some((warmup, start)) = stretch.cpu
            && let Ok(end) = thread_cpu_time()
        {
            stats.cpu_clock_warmup_ns = stats
                .cpu_clock_warmup_ns
                .saturating_add(nanos(start.saturating_sub(warmup)));
            let cpu = nanos(end.saturating_sub(start));
            stats.engine_cpu_ns = stats.engine_cpu_ns.saturating_add(cpu);
            stats.engine_cpu_calls += 1;
            if self.timing_timer {
                stats.engine_timer_cpu_ns = stats.engine_timer_cpu_ns.saturating_add(cpu);
                stats.engine_timer_calls += 1;
            }
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Measures [`CpuClockCost`] on the calling thread.
fn calibrate() -> std::io::Result<CpuClockCost> {
    let mut inside = Vec::with_capacity(CALIBRATION_PAIRS);
    let begin = thread_cpu_time()?;
    for _ in 0..CALIBRATION_PAIRS {
        let start = thread_cpu_time()?;
        let wall = Instant::now();
        std::hint::black_box(wall.elapsed());
        let end = thread_cpu_time()?;
        inside.push(nanos(end.saturating_sub(start)));
    }
    let total = nanos(thread_cpu_time()?.saturating_sub(begin));
    inside.sort_unstable();
    let inside_ns = inside[inside.len() / 2];
    let per_pair = total / CALIBRATION_PAIRS as u64;
    Ok(CpuClockCost {
        inside_ns,
        outside_ns: per_pair.saturating_sub(inside_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_clock_times_work_and_not_sleep() {
        let timer = EngineTimer::cpu();
        let cost = timer
            .cpu_clock_cost()
            .expect("Linux has a thread CPU clock");
        assert!(cost.inside_ns > 0 && cost.inside_ns < 100_000, "{cost:?}");
        let mut stats = MiddleStats::default();
        let stretch = timer.start();
        std::thread::sleep(Duration::from_millis(20));
        timer.stop(stretch, &mut stats);
        assert!(stats.engine_ns >= 20_000_000, "{stats:?}");
        // Sleeping uses (almost) no CPU.
        assert!(stats.engine_cpu_ns < 5_000_000, "{stats:?}");
        let stretch = timer.start();
        let mut x = 0u64;
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        timer.stop(stretch, &mut stats);
        assert!(stats.engine_cpu_ns > 1_000_000, "{stats:?}");
        assert_eq!((stats.engine_calls, stats.engine_cpu_calls), (2, 2));
        // Each stretch's warm-up reading is measured, outside the stretch.
        assert!(stats.cpu_clock_warmup_ns > 0, "{stats:?}");
    }
}
