//! Independent QUIC stacks as a trial's endpoints (real mode only): the
//! programs of `peers/` (quic-go, aioquic, ngtcp2, quiche), started
//! through `peers/run` in the testbed's client and server namespaces,
//! instead of our noq-proto hosts. A scenario asks for them per endpoint:
//!
//! ```toml
//! [client]
//! stack = "quic-go"     # or "aioquic", "ngtcp2", "quiche"; "noq" (the default) is ours
//! [server]
//! stack = "quic-go"
//! ```
//!
//! They carry the bulk workload and the RTC frames (all four). ngtcp2's
//! bulk peers are its HTTP/3 example programs, which interoperate only with
//! each other; its RTC peer is `peers/ngtcp2/rtc.c`, which the server runs
//! when given `--rtc` ([`PeerTransfer::server_args`]). quic-go, aioquic and
//! quiche serve both on one port. Every RTC client works with every RTC
//! server, and quic-go's, aioquic's and quiche's bulk peers with each
//! other (pepkit's bulk protocol, `peers/README.md`); our endpoints
//! (ALPN `pepkit`, a pinned test certificate) only with ours. The metrics
//! are the workloads' own: goodput and completion time from the client's
//! report (timed from before the handshake, as ours), frame delay and
//! jitter computed from every frame's generation and arrival times by the
//! same code as for our endpoints ([`quic::RtcReport`]).

pub use crate::workloads::PeerWork;

use crate::outcome::{TrialResult, add_distribution};
use crate::workloads::{BulkDirection, Workload};
use netsim::Time;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A QUIC implementation for an endpoint.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub enum Stack {
    /// Ours: noq-proto with rustls (simulator and real mode).
    #[default]
    #[serde(rename = "noq")]
    Noq,
    /// quic-go (`peers/quic-go`).
    #[serde(rename = "quic-go")]
    QuicGo,
    /// aioquic (`peers/aioquic`).
    #[serde(rename = "aioquic")]
    Aioquic,
    /// ngtcp2: its example HTTP/3 client and server for bulk transfers,
    /// `peers/ngtcp2/rtc.c` for RTC frames.
    #[serde(rename = "ngtcp2")]
    Ngtcp2,
    /// Cloudflare's quiche (`peers/quiche`).
    #[serde(rename = "quiche")]
    Quiche,
}

impl Stack {
    /// Its name for `peers/run`.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Noq => "noq",
            Stack::QuicGo => "quic-go",
            Stack::Aioquic => "aioquic",
            Stack::Ngtcp2 => "ngtcp2",
            Stack::Quiche => "quiche",
        }
    }
}

/// One flow between independent stacks.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerTransfer {
    /// The client's address (its port is the stack's choice).
    pub client: SocketAddr,
    /// The server's address.
    pub server: SocketAddr,
    /// The client's stack.
    pub client_stack: Stack,
    /// The server's stack.
    pub server_stack: Stack,
    /// What they carry.
    pub work: PeerWork,
}

impl PeerTransfer {
    /// The peers for `workload` between `client` and `server`, or why
    /// they cannot carry it: `(field, message)`.
    pub(crate) fn new(
        (client, client_stack): (SocketAddr, Stack),
        (server, server_stack): (SocketAddr, Stack),
        workload: &Workload,
    ) -> Result<PeerTransfer, (String, String)> {
        let fail = |field: &str, message: &str| Err((field.to_string(), message.to_string()));
        // The RTC peers all speak one protocol; so do the bulk peers but
        // ngtcp2's, which speak HTTP/3.
        let bulk_protocol = |s: Stack| matches!(s, Stack::QuicGo | Stack::Aioquic | Stack::Quiche);
        let work = workload.kind().peer_work();
        let rtc = matches!(work, Ok(PeerWork::Rtc { .. }));
        let interoperate =
            |a: Stack, b: Stack| a == b || rtc || bulk_protocol(a) && bulk_protocol(b);
        if client_stack == Stack::Noq || server_stack == Stack::Noq {
            return fail(
                "server.stack",
                "our endpoints (ALPN pepkit, a pinned test certificate) talk only to ours: give \
                 both ends an independent stack",
            );
        }
        if !interoperate(client_stack, server_stack) {
            return fail(
                "server.stack",
                "for bulk transfers quic-go, aioquic and quiche interoperate; ngtcp2's HTTP/3 \
                 examples only with themselves (every RTC client works with every RTC server)",
            );
        }
        let work = work?;
        Ok(PeerTransfer {
            client,
            server,
            client_stack,
            server_stack,
            work,
        })
    }

    /// The server's arguments after `peers/run STACK`: `--rtc` for RTC
    /// frames, which picks ngtcp2's RTC server (the others ignore it).
    pub(crate) fn server_args(&self) -> Vec<String> {
        let mut args = vec![
            "server".to_string(),
            "--listen".to_string(),
            self.server.to_string(),
        ];
        if matches!(self.work, PeerWork::Rtc { .. }) {
            args.push("--rtc".into());
        }
        args
    }

    /// The client's arguments after `peers/run STACK client`.
    pub(crate) fn client_args(&self, timeout: Duration) -> Vec<String> {
        let mut args = vec![
            "--connect".to_string(),
            self.server.to_string(),
            "--timeout".to_string(),
            format!("{:.0}", timeout.as_secs_f64().max(1.0)),
        ];
        match self.work {
            PeerWork::Bulk { direction, size } => {
                args.extend(["--size".to_string(), size.to_string()]);
                if direction == BulkDirection::Upload {
                    args.push("--upload".into());
                }
            }
            PeerWork::Rtc {
                frames,
                fps,
                frame_bytes,
            } => args.extend([
                "--rtc-frames".to_string(),
                frames.to_string(),
                "--fps".to_string(),
                fps.to_string(),
                "--frame-bytes".to_string(),
                frame_bytes.to_string(),
            ]),
        }
        args
    }

    /// Reads the client's JSON line into `result`; returns whether the
    /// workload completed.
    pub(crate) fn collect(&self, stdout: &str, result: &mut TrialResult) -> Result<bool, String> {
        let line = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .ok_or_else(|| format!("no report from the client: {stdout:?}"))?;
        match self.work {
            PeerWork::Bulk { size, .. } => {
                let seconds = line["seconds"]
                    .as_f64()
                    .ok_or("no `seconds` in the report")?;
                let bytes = line["bytes"].as_u64().unwrap_or(0);
                if bytes == size && seconds > 0.0 {
                    result.set("goodput_mbps", bytes as f64 * 8.0 / seconds / 1e6);
                    result.set("completion_s", seconds);
                }
                Ok(bytes == size)
            }
            PeerWork::Rtc { frames, .. } => {
                let records = rtc_frames(&line)?;
                let received = records.len() as u64;
                result.set(
                    "frames_received_fraction",
                    received as f64 / frames.max(1) as f64,
                );
                if let Some(report) = quic::RtcReport::from_frames(frames, records) {
                    add_distribution(result, "frame_delay", &report.delays);
                    add_distribution(result, "frame_jitter", &report.jitter);
                }
                Ok(received == frames)
            }
        }
    }
}

/// The frames of an RTC report: `[[index, generated_ns, arrived_ns], …]`.
fn rtc_frames(line: &serde_json::Value) -> Result<Vec<quic::FrameRecord>, String> {
    let frames = line["frames"]
        .as_array()
        .ok_or("no `frames` in the report")?;
    let mut records = Vec::with_capacity(frames.len());
    for frame in frames {
        let numbers: Vec<u64> = frame
            .as_array()
            .map(|f| f.iter().filter_map(serde_json::Value::as_u64).collect())
            .unwrap_or_default();
        let [index, generated, arrived] = numbers[..] else {
            return Err(format!(
                "a frame is not [index, generated, arrived]: {frame}"
            ));
        };
        records.push(quic::FrameRecord {
            index,
            generated: Time::from_nanos(generated),
            completed: Time::from_nanos(arrived.max(generated)),
            bytes: 0,
        });
    }
    Ok(records)
}

/// `peers/run`: `$PEPKIT_PEERS_RUN`, else `peers/run` under the current
/// directory or one of its parents, else beside the executable's
/// repository (`target/<profile>/pepkit` → `../../peers/run`).
pub fn peers_run() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PEPKIT_PEERS_RUN") {
        return Some(PathBuf::from(path));
    }
    let from_cwd = std::env::current_dir().ok().into_iter().flat_map(|dir| {
        dir.ancestors()
            .map(|a| a.join("peers/run"))
            .collect::<Vec<_>>()
    });
    let from_exe = std::env::current_exe().ok().into_iter().flat_map(|exe| {
        exe.ancestors()
            .map(|a| a.join("peers/run"))
            .collect::<Vec<_>>()
    });
    from_cwd.chain(from_exe).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_back() {
        let transfer = PeerTransfer {
            client: "10.0.2.10:5000".parse().unwrap(),
            server: "10.0.1.10:4433".parse().unwrap(),
            client_stack: Stack::QuicGo,
            server_stack: Stack::Aioquic,
            work: PeerWork::Rtc {
                frames: 3,
                fps: 30,
                frame_bytes: 12500,
            },
        };
        let mut result = TrialResult::new("v", 0, netsim::Seed::new(1), "finished", Time::ZERO, 0);
        let line = r#"{"peer":"quic-go","mode":"rtc","frames":[[0,1000000,41000000],[2,67000000,110000000],[1,34000000,75000000]]}"#;
        assert_eq!(transfer.collect(line, &mut result), Ok(true));
        assert_eq!(result.metrics["frames_received_fraction"], 1.0);
        assert_eq!(result.metrics["frame_delay_p50_ms"], 41.0);
        // |d1 − d0| = 1 ms, |d2 − d1| = 2 ms.
        assert_eq!(result.metrics["frame_jitter_p99_ms"], 2.0);
        let args = transfer.client_args(Duration::from_secs(60));
        assert!(args.contains(&"--rtc-frames".to_string()));
        assert_eq!(
            transfer.server_args(),
            ["server", "--listen", "10.0.1.10:4433", "--rtc"]
        );
        let bulk = PeerTransfer {
            work: PeerWork::Bulk {
                direction: BulkDirection::Download,
                size: 1000,
            },
            ..transfer
        };
        let mut result = TrialResult::new("v", 0, netsim::Seed::new(1), "finished", Time::ZERO, 0);
        let line = r#"{"peer":"quic-go","direction":"download","bytes":1000,"seconds":0.008}"#;
        assert_eq!(bulk.collect(line, &mut result), Ok(true));
        assert_eq!(result.metrics["goodput_mbps"], 1.0);
        assert_eq!(bulk.server_args(), ["server", "--listen", "10.0.1.10:4433"]);
    }

    /// A scenario's `stack = "…"` is the name `peers/run` knows.
    #[test]
    fn stack_names_round_trip() {
        #[derive(Deserialize)]
        struct End {
            stack: Stack,
        }
        for stack in [
            Stack::Noq,
            Stack::QuicGo,
            Stack::Aioquic,
            Stack::Ngtcp2,
            Stack::Quiche,
        ] {
            let end: End =
                toml::from_str(&format!("stack = \"{}\"", stack.name())).expect("a stack name");
            assert_eq!(end.stack, stack);
        }
        assert!(toml::from_str::<End>("stack = \"quinn\"").is_err());
    }

    /// Which pairs of stacks carry which workload: every RTC client with
    /// every RTC server; quic-go's, aioquic's and quiche's bulk peers with
    /// each other, ngtcp2's HTTP/3 bulk peers only with themselves.
    #[test]
    fn pairs_that_interoperate() {
        let rtc: Workload =
            toml::from_str("kind = \"rtc\"\nduration = \"1s\"").expect("an rtc workload");
        let bulk: Workload =
            toml::from_str("kind = \"bulk\"\ndirection = \"download\"\nsize = \"1MB\"")
                .expect("a bulk workload");
        let client: SocketAddr = "10.0.2.10:5000".parse().unwrap();
        let server: SocketAddr = "10.0.1.10:4433".parse().unwrap();
        let pair = |a, b, w: &Workload| PeerTransfer::new((client, a), (server, b), w);
        let stacks = [Stack::QuicGo, Stack::Aioquic, Stack::Ngtcp2, Stack::Quiche];
        for a in stacks {
            for b in stacks {
                let transfer = pair(a, b, &rtc).expect("every RTC pair");
                assert!(matches!(transfer.work, PeerWork::Rtc { frames: 30, .. }));
                // quic-go, aioquic and quiche speak pepkit's bulk protocol.
                let bulk_ok = a == b || !matches!(a, Stack::Ngtcp2) && !matches!(b, Stack::Ngtcp2);
                assert_eq!(pair(a, b, &bulk).is_ok(), bulk_ok, "{a:?} / {b:?}");
            }
            assert!(pair(a, Stack::Noq, &rtc).is_err());
        }
    }
}
