//! What runs on a real middle node while a trial lasts: the middle
//! system as it runs on a testbed ([`OnTestbed`]), started on the node
//! (its engine on the middle driver's thread, or a service of the node's
//! kernel on a thread in its namespace) and stopped with the driver's or
//! the service's counters recorded.

use crate::outcome::TrialResult;
use crate::systems::{OnTestbed, Placement, Service};
use emu::Testbed;
use emu::driver::MiddleStats;
use netsim::Middlebox;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A service's thread: its metrics, or why it failed.
type ServiceThread = JoinHandle<std::io::Result<Result<Vec<(String, f64)>, String>>>;

/// What runs on a testbed's middle node: the system as [`OnTestbed`]
/// says, started.
pub(crate) enum RunningMiddle {
    /// The node's kernel routes; nothing of ours runs.
    Router,
    /// The system's engine on the middle driver's thread, and its stop
    /// flag.
    Engine(emu::MiddleThread<Box<dyn Middlebox>>, Arc<AtomicBool>),
    /// A service of the node's kernel on its thread, and its stop flag.
    Service(ServiceThread, Arc<AtomicBool>),
}

impl RunningMiddle {
    /// Starts `on_testbed` on `testbed`'s middle node `at` and waits until
    /// it serves.
    pub(crate) fn start(
        testbed: &Testbed,
        at: usize,
        on_testbed: OnTestbed,
    ) -> Result<RunningMiddle, String> {
        let stop = Arc::new(AtomicBool::new(false));
        match on_testbed {
            OnTestbed::Router => Ok(RunningMiddle::Router),
            OnTestbed::Engine {
                engine,
                placement,
                local,
            } => {
                let placement = match placement {
                    Placement::InPath => emu::driver::Placement::InPath {
                        routes: testbed
                            .routes(at)
                            .ok_or_else(|| format!("no middle node {at}"))?,
                    },
                    // Both sides: the data sender of a flow may be the
                    // client or the server, as on a router's daemon.
                    Placement::Beside => emu::driver::Placement::Beside {
                        sniff: (0..testbed
                            .middle(at)
                            .ok_or_else(|| format!("no middle node {at}"))?
                            .interfaces
                            .len())
                            .collect(),
                    },
                    Placement::OwnSockets => emu::driver::Placement::Beside { sniff: Vec::new() },
                };
                let local = OnTestbed::ipv4(local);
                let thread = testbed
                    .run_middlebox(at, placement, local, engine, stop.clone())
                    .map_err(|e| format!("middle: {e}"))?;
                Ok(RunningMiddle::Engine(thread, stop))
            }
            OnTestbed::Service(service) => start_service(testbed, at, service, stop),
            OnTestbed::Server(_) => Err("middle: a router's server runs only as a daemon".into()),
        }
    }

    /// Stops it; returns its engine (for the system's metrics) and
    /// records the driver's or the service's counters.
    pub(crate) fn stop(self, result: &mut TrialResult) -> Option<Box<dyn Middlebox>> {
        match self {
            RunningMiddle::Router => None,
            RunningMiddle::Engine(thread, stop) => {
                stop.store(true, Ordering::Relaxed);
                match thread.join() {
                    Ok(run) => {
                        add_driver_stats(result, &run.stats);
                        if let Some(error) = run.error {
                            result.errors.push(format!("middle: {error}"));
                        }
                        Some(run.engine)
                    }
                    Err(error) => {
                        result.errors.push(format!("middle: {error}"));
                        None
                    }
                }
            }
            RunningMiddle::Service(handle, stop) => {
                stop.store(true, Ordering::Relaxed);
                match handle.join() {
                    Ok(Ok(Ok(metrics))) => {
                        for (name, value) in metrics {
                            result.set(name, value);
                        }
                    }
                    Ok(Ok(Err(error))) => result.errors.push(format!("middle: {error}")),
                    Ok(Err(error)) => result.errors.push(format!("middle: {error}")),
                    Err(_) => result.errors.push("middle: its thread panicked".into()),
                }
                None
            }
        }
    }
}

/// Runs `service` on a thread in middle node `at`'s namespace.
fn start_service(
    testbed: &Testbed,
    at: usize,
    service: Box<dyn Service>,
    stop: Arc<AtomicBool>,
) -> Result<RunningMiddle, String> {
    let node = testbed
        .middle(at)
        .ok_or_else(|| format!("no middle node {at}"))?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let service_stop = stop.clone();
    let handle = testbed
        .spawn_in(node, "middle-service", move || {
            let ready = move || {
                let _ = ready_tx.send(());
            };
            service.run(service_stop, &ready)
        })
        .map_err(|e| format!("middle: {e}"))?;
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => Ok(RunningMiddle::Service(handle, stop)),
        Err(_) => {
            stop.store(true, Ordering::Relaxed);
            let why = match handle.join() {
                Ok(Ok(Err(error))) => error,
                Ok(Err(error)) => error.to_string(),
                _ => "it did not start within 10 s".into(),
            };
            Err(format!("middle: {why}"))
        }
    }
}

/// The driver's counters that say whether it kept up, and how its thread's
/// CPU time divides between the engine and the packet I/O (PEMI's Figure
/// 13: the engine's time over the rest). `middle_engine_share` is by the
/// thread's CPU clock, each part corrected for the clock readings' own
/// cost (measured by the driver at start); `middle_engine_wall_share`
/// is the engine's wall-clock time over the rest of the thread's CPU
/// time, which counts preemption inside the engine as its work.
fn add_driver_stats(result: &mut TrialResult, stats: &MiddleStats) {
    result.set("middle_frames", stats.frames as f64);
    result.set("middle_kernel_drops", stats.kernel_drops as f64);
    result.set("middle_send_errors", stats.send_errors as f64);
    // How long frames sat in the kernel before the driver read them
    // (the engine is given their arrival stamps instead).
    let wait = &stats.read_wait;
    if wait.frames > 0 {
        let frames = wait.frames as f64;
        result.set(
            "middle_read_wait_over_100us",
            wait.over_100us as f64 / frames,
        );
        result.set("middle_read_wait_over_1ms", wait.over_1ms as f64 / frames);
        result.set("middle_read_wait_max_ms", wait.max_us as f64 / 1e3);
    }
    if stats.cpu_ns == 0 {
        return;
    }
    result.set("middle_cpu_ms", stats.cpu_ns as f64 / 1e6);
    result.set("middle_engine_wall_ms", stats.engine_ns as f64 / 1e6);
    result.set("middle_engine_calls", stats.engine_calls as f64);
    let wall_io = stats.cpu_ns.saturating_sub(stats.engine_ns);
    if wall_io > 0 {
        result.set(
            "middle_engine_wall_share",
            stats.engine_ns as f64 / wall_io as f64,
        );
    }
    if stats.engine_cpu_calls > 0 {
        let calls = stats.engine_cpu_calls;
        let engine = stats
            .engine_cpu_ns
            .saturating_sub(calls.saturating_mul(stats.cpu_clock_inside_ns));
        let io = stats
            .cpu_ns
            .saturating_sub(stats.engine_cpu_ns)
            .saturating_sub(stats.cpu_clock_warmup_ns)
            .saturating_sub(calls.saturating_mul(stats.cpu_clock_outside_ns));
        result.set("middle_engine_ms", engine as f64 / 1e6);
        result.set("middle_io_ms", io as f64 / 1e6);
        result.set("middle_engine_ns_per_call", engine as f64 / calls as f64);
        let timers = stats.engine_timer_calls;
        result.set("middle_engine_timer_calls", timers as f64);
        result.set(
            "middle_engine_timer_ms",
            stats
                .engine_timer_cpu_ns
                .saturating_sub(timers.saturating_mul(stats.cpu_clock_inside_ns))
                as f64
                / 1e6,
        );
        result.set(
            "middle_cpu_clock_warmup_ns",
            stats.cpu_clock_warmup_ns as f64 / calls as f64,
        );
        result.set(
            "middle_cpu_clock_ns",
            (stats.cpu_clock_inside_ns + stats.cpu_clock_outside_ns) as f64,
        );
        if io > 0 {
            result.set("middle_engine_share", engine as f64 / io as f64);
        }
    }
}
