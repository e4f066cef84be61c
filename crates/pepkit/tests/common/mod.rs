//! What the tests share: `pepkit run` as a command; for the tunnel tests
//! on real sockets, our QUIC bulk server on a thread, our tunnel client
//! beside our QUIC client, and child processes.

#![allow(dead_code)]

pub(crate) mod middle;

use emu::{HostDriver, RealClock, RunUntil};
use netsim::{Host, Seed, Time};
use quic::{
    BulkClient, BulkReport, BulkServerFactory, Direction, QuicClient, QuicConfig, QuicServer,
};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tunnel::{TunnelClientConfig, TunnelClientHost, TunnelSettings, TunnelState, UriTemplate};

/// `pepkit run --quiet --out OUT FILE`, to add to (`--real`) and run.
pub(crate) fn pepkit_run(file: &Path, out: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pepkit"));
    command.args(["run", "--quiet", "--out"]).arg(out).arg(file);
    command
}

/// A scenario's text without variants: one trial of a 200 kB upload over
/// two hops (1 ms at 100 Mbit/s, 5 ms at 10 Mbit/s).
pub(crate) fn two_hop_upload(name: &str, title: &str) -> String {
    format!(
        r#"
name = "{name}"
title = "{title}"
path = ["near", "far"]
trials = 1
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "5ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "200kB"
"#
    )
}

pub(crate) fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// Sends SIGTERM, waits, and returns what the child printed on stdout.
pub(crate) fn terminate(mut child: Child) -> (std::process::ExitStatus, String) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let mut out = String::new();
    let _ = std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out);
    (status, out)
}

/// Our tunnel client, beside `inner`, to the tunnel server at `proxy`
/// for `target`, on the socket `client_ip:5443`.
pub(crate) fn tunnel_client<H: Host>(
    inner: H,
    outer: QuicConfig,
    settings: TunnelSettings,
    proxy: SocketAddr,
    target: SocketAddr,
    client_ip: &str,
) -> TunnelClientHost<H> {
    TunnelClientHost::new(
        inner,
        TunnelClientConfig {
            settings,
            quic: outer,
            proxy,
            local: addr(&format!("{client_ip}:5443")),
            template: UriTemplate::default(),
            targets: vec![target],
            feedback: None,
            client_cids: None,
        },
    )
}

/// A 2 MB download by our QUIC client at `client_ip` from our QUIC server
/// at `target` (run on a thread for the time), through the tunnel server at
/// `proxy`, for at most `seconds`.
pub(crate) fn download(
    proxy: SocketAddr,
    target: SocketAddr,
    client_ip: &str,
    settings: TunnelSettings,
    seconds: u64,
) -> (Option<BulkReport>, Option<TunnelState>) {
    let seed = Seed::new(2);
    let stop = Arc::new(AtomicBool::new(false));
    let server_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let config = QuicConfig::new(seed).with_max_udp_payload(1200);
            let host = QuicServer::new(config, target, BulkServerFactory);
            let driver = HostDriver::bind(host, &[target]).unwrap();
            driver
                .run(RealClock::start(), RunUntil::Stopped, Time::MAX, &stop)
                .unwrap()
                .host
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let inner = QuicClient::new(
        QuicConfig::new(seed).with_max_udp_payload(1200),
        addr(&format!("{client_ip}:5000")),
        target,
        BulkClient::new(Direction::Download, 2_000_000),
    );
    let outer = tunnel::outer_config(QuicConfig::new(seed), 1350);
    let client = tunnel_client(inner, outer, settings, proxy, target, client_ip);
    let driver = HostDriver::bind(client, &[]).unwrap();
    let deadline = Time::ZERO + Duration::from_secs(seconds);
    let run = driver
        .run(
            RealClock::start(),
            RunUntil::Finished,
            deadline,
            &AtomicBool::new(false),
        )
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let server_host = server_thread.join().unwrap();
    let state = run.host.app_ref().and_then(|app| app.state(target));
    (
        BulkReport::from_hosts(run.host.inner(), &server_host),
        state,
    )
}

/// Every file under `dir`, by its path relative to `dir`.
pub(crate) fn files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                found.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    found
}

/// A scenario for sharding tests, called `name`: two Proteus variants
/// (P swept over two buffer sizes, and S) of two trials of a 3 s upload,
/// six trials of a few seconds in all.
pub(crate) fn sharded_sweep(name: &str) -> String {
    format!(
        r#"
name = "{name}"
title = "a sharded sweep"
trials = 2
time_limit = "20s"
measure = {{ from = "1s", until = "3s" }}
path = ["near", "far"]
[client]
controller = "proteus-p"
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "10ms"
rate = "10Mbit/s"
buffer = {{ kind = "drop_tail", bytes = "50kB" }}
[workload]
kind = "bulk"
direction = "upload"
duration = "3s"
[[variant]]
name = "P"
sweep = {{ field = "hops.far.buffer.bytes", values = [20000, 50000], unit = "B" }}
[[variant]]
name = "S"
client.controller = "proteus-s"
"#
    )
}
