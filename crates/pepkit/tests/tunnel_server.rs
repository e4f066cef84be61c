//! `pepkit middle tecc`, the tunnel server, on real sockets (loopback): our tunnel client,
//! beside our QUIC client, downloads through the daemon from a QUIC server
//! it allows, in datagram mode and with TECC; a target it does not allow
//! is refused with 403; SIGTERM stops it cleanly with its counters. The
//! daemon runs two workers (whatever the machine's cores); the client's
//! engines are the simulator's, driven in real time (`emu::HostDriver`).
//! Real mode: skips without root (fails with `PEPKIT_REQUIRE_REAL=1`).

mod common;

use common::{addr, download, terminate};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tunnel::{Mode, TunnelSettings, TunnelState};

fn daemon(listen: &str, allow: &str, mode: &str) -> Child {
    let table = format!("{{ kind = \"tecc\", mode = \"{mode}\", tunnel_cc = \"none\" }}");
    Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args(["middle", &table, "--addr", listen, "--allow", allow])
        .args(["--seed", "1", "--seconds", "60", "--workers", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn settings(tecc: bool) -> TunnelSettings {
    let mut settings = TunnelSettings::new(if tecc {
        Mode::RetransmittedDatagram
    } else {
        Mode::Datagram
    });
    settings.feedback = tecc;
    settings
}

#[test]
fn downloads_through_the_daemon_and_refuses_other_targets() {
    if !emu::require_real_or_skip("tunnel_server::downloads_through_the_daemon") {
        return;
    }
    for (mode, port) in [("mdt", 24431), ("tecc", 24432)] {
        let listen = format!("127.0.0.1:{port}");
        let child = daemon(&listen, "127.0.0.2:4433", mode);
        std::thread::sleep(Duration::from_millis(300));
        let (report, state) = download(
            addr(&listen),
            addr("127.0.0.2:4433"),
            "127.0.0.3",
            settings(mode == "tecc"),
            20,
        );
        let report = report.unwrap_or_else(|| panic!("{mode}: no transfer ({state:?})"));
        assert_eq!(report.bytes, 2_000_000, "{mode}");
        // Not allowed: refused with 403, nothing forwarded.
        let (report, state) = download(
            addr(&listen),
            addr("127.0.0.4:4433"),
            "127.0.0.5",
            settings(false),
            2,
        );
        assert!(report.is_none());
        assert_eq!(state, Some(TunnelState::Refused(403)));
        let (status, counters) = terminate(child);
        assert!(status.success(), "{status}");
        let counters: serde_json::Value = serde_json::from_str(counters.trim()).unwrap();
        assert_eq!(counters["system"]["tunnels"], 1, "{counters}");
        assert_eq!(counters["system"]["forbidden"], 1, "{counters}");
        let workers = counters["system"]["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2, "{counters}");
    }
}
