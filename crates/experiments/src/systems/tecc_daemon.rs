//! The tunnel server as a router's daemon (`pepkit middle tecc`): its
//! workers ([`tunnel::ServerWorkers`], one per core unless `--workers`
//! says) on sockets of its own, and its counters, the whole server's
//! with each worker's beside them.

use super::Server;
use emu::RealClock;
use emu::driver::Periodic;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tunnel::{ServerStats, ServerWorkers, TunnelServerConfig, WorkerReport, WorkersConfig};

/// The tunnel server's counters over its connections.
pub(super) fn server_counters(stats: &[ServerStats]) -> serde_json::Value {
    let sum = |f: fn(&ServerStats) -> u64| stats.iter().map(f).sum::<u64>();
    serde_json::json!({
        "connections": stats.len(),
        "tunnels": sum(|s| s.tunnels),
        "refused": sum(|s| s.refused),
        "forbidden": sum(|s| s.forbidden),
        "to_targets": sum(|s| s.to_targets),
        "from_targets": sum(|s| s.from_targets),
        "retransmitted": sum(|s| s.sender.retransmitted),
    })
}

/// The daemon's counters: the server's (`system`, with `workers`, each
/// worker's connections, datagrams and CPU time) and its sockets'
/// (`driver`, summed over the workers).
fn counters(reports: &[WorkerReport]) -> serde_json::Value {
    let all: Vec<ServerStats> = reports
        .iter()
        .flat_map(|r| r.connections.iter().copied())
        .collect();
    let mut system = server_counters(&all);
    let workers: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| {
            serde_json::json!({
                "connections": r.connections.len(),
                "received": r.io.received,
                "sent": r.io.sent,
                "cpu_s": r.cpu.as_secs_f64(),
            })
        })
        .collect();
    system["workers"] = workers.into();
    let sum = |f: fn(&WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    serde_json::json!({
        "system": system,
        "driver": {
            "received": sum(|r| r.io.received),
            "receive_calls": sum(|r| r.io.receive_calls),
            "truncated": sum(|r| r.io.truncated),
            "sent": sum(|r| r.io.sent),
            "send_calls": sum(|r| r.io.send_calls),
            "segmented": sum(|r| r.io.segmented),
            "send_dropped": sum(|r| r.io.send_dropped),
        },
    })
}

/// The tunnel server's workers as a router's daemon.
pub(super) struct TunnelDaemon(WorkersConfig);

impl TunnelDaemon {
    /// `workers` workers serving as `server` says.
    pub(super) fn new(server: TunnelServerConfig, workers: usize) -> TunnelDaemon {
        TunnelDaemon(WorkersConfig { server, workers })
    }
}

impl Server for TunnelDaemon {
    fn run(
        self: Box<Self>,
        stop: &AtomicBool,
        every: Option<Duration>,
        log: &mut dyn Write,
    ) -> Result<serde_json::Value, String> {
        let workers = ServerWorkers::start(&self.0)?;
        let _ = writeln!(log, "middle: {} workers", workers.workers());
        let clock = RealClock::start();
        let mut periodic = Periodic::new(every);
        while !stop.load(Ordering::Relaxed)
            && !emu::sys::interrupt::requested()
            && !workers.any_finished()
        {
            periodic.write_if_due(clock.now(), log, || counters(&workers.reports()));
            std::thread::sleep(Duration::from_millis(20));
        }
        let reports = workers.stop()?;
        Ok(counters(&reports))
    }
}
