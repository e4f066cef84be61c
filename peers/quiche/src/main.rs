//! quiche-peer: pepkit's bulk-transfer and RTC client and server on
//! Cloudflare's quiche, an independent QUIC implementation beside quic-go,
//! aioquic and ngtcp2. Called through peers/run, which documents the
//! command line; peers/README.md documents the protocol:
//!
//! ```text
//! quiche-peer server --listen IP:PORT [--rtc]
//! quiche-peer client --connect IP:PORT --size BYTES [--upload] [--timeout SECONDS]
//! quiche-peer client --connect IP:PORT --rtc-frames N [--fps F] [--frame-bytes B] [--timeout SECONDS]
//! ```
//!
//! ALPN "pepkit-bulk", TLS 1.3 (BoringSSL, through quiche's `boring`
//! crate), a throwaway self-signed certificate that the client does not
//! verify; congestion control CUBIC, quiche's default. One thread, one UDP
//! socket per process, a mio poll loop over quiche's timers, the frames'
//! schedule and quiche's pacing times (`common::Output`).
//!
//! Diagnostics: with PEPKIT_QLOGDIR set (and not empty) every connection
//! writes a qlog to that directory (`common::qlog`).

mod client;
mod common;
mod server;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: quiche-peer server --listen IP:PORT [--rtc]
       quiche-peer client --connect IP:PORT --size BYTES [--upload] [--timeout SECONDS]
       quiche-peer client --connect IP:PORT --rtc-frames N [--fps F] [--frame-bytes B] [--timeout SECONDS]";

/// The command line, parsed.
#[derive(Default)]
struct Args {
    listen: Option<SocketAddr>,
    connect: Option<SocketAddr>,
    size: Option<u64>,
    upload: bool,
    timeout: Option<f64>,
    frames: Option<u64>,
    fps: Option<u64>,
    frame_bytes: Option<u64>,
}

/// `--key value` pairs (and the flags `--upload`, `--rtc`); None on
/// anything else.
fn parse(words: &[String]) -> Option<Args> {
    let mut args = Args::default();
    let mut words = words.iter();
    while let Some(key) = words.next() {
        match key.as_str() {
            "--upload" => args.upload = true,
            // The server serves bulk and RTC requests on one port anyway.
            "--rtc" => {}
            _ => {
                let value = words.next()?;
                match key.as_str() {
                    "--listen" => args.listen = Some(value.parse().ok()?),
                    "--connect" => args.connect = Some(value.parse().ok()?),
                    "--size" => args.size = Some(value.parse().ok()?),
                    "--timeout" => args.timeout = Some(value.parse().ok()?),
                    "--rtc-frames" => args.frames = Some(value.parse().ok()?),
                    "--fps" => args.fps = Some(value.parse().ok()?),
                    "--frame-bytes" => args.frame_bytes = Some(value.parse().ok()?),
                    _ => return None,
                }
            }
        }
    }
    Some(args)
}

/// What to run, or None for bad usage.
fn command(words: &[String]) -> Option<Result<(), String>> {
    let (role, rest) = words.split_first()?;
    let args = parse(rest)?;
    match role.as_str() {
        "server" => {
            let listen = args.listen?;
            if args.connect.is_some() {
                return None;
            }
            Some(server::run(listen))
        }
        "client" => {
            let server = args.connect?;
            let timeout = args.timeout.unwrap_or(60.0);
            if !(timeout > 0.0 && timeout < 1e6) || args.listen.is_some() {
                return None;
            }
            let request = match (args.frames, args.size) {
                (Some(frames), None) => {
                    let fps = args.fps.unwrap_or(30);
                    let bytes = args.frame_bytes.unwrap_or(12500);
                    if frames == 0
                        || frames > common::MAX_FRAMES
                        || fps == 0
                        || fps > 1_000_000
                        || !(16..=common::MAX_FRAME_BYTES).contains(&bytes)
                        || args.upload
                    {
                        return None;
                    }
                    client::Request::Rtc {
                        frames,
                        fps: fps as u32,
                        bytes: bytes as u32,
                    }
                }
                (None, Some(size)) => client::Request::Bulk {
                    size,
                    upload: args.upload,
                },
                _ => return None,
            };
            Some(client::run(
                server,
                request,
                Duration::from_secs_f64(timeout),
            ))
        }
        _ => None,
    }
}

fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().skip(1).collect();
    match command(&words) {
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
        Some(Ok(())) => ExitCode::SUCCESS,
        Some(Err(e)) => {
            eprintln!("quiche-peer: {e}");
            ExitCode::FAILURE
        }
    }
}
