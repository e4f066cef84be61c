//! `pepkit middle sidekick`, the Sidekick proxy as a daemon on a real
//! router: client — router — server namespaces joined through the link
//! emulator, the daemon (in the router's namespace, `--netns`) sniffing
//! the router's client-facing interface while the kernel forwards, a media
//! sender with a sidekick engine on the client, and a plain flow beside it
//! that never asked for quACKs.
//!
//! Needs root and `ip netns`; skips (and says so) without them, or fails
//! with `PEPKIT_REQUIRE_REAL=1`. The namespaces are removed when the
//! testbed drops, also when an assertion fails.

mod common;

use common::middle::Daemon;
use emu::{HostRun, HostRunSpec, HostThread, Node, RealClock, RunUntil, Testbed, TestbedSpec};
use netsim::testing::{CbrSource, Sink};
use netsim::{BufferLimit, HopConfig, LinkConfig, Rate, Seed};
use quic::{MediaConfig, MediaReceiver, MediaSender};
use sidekick::wire::Interval;
use sidekick::{SenderConfig, SidekickHost};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const PROXY: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 1);

fn hop(delay_ms: u64, mbps: u64) -> HopConfig {
    HopConfig::symmetric(
        LinkConfig::constant(Duration::from_millis(delay_ms), Rate::from_mbps(mbps))
            .with_buffer(BufferLimit::Packets(1000)),
    )
}

/// A client — router — server testbed (1 ms at 100 Mbit/s, then 10 ms at
/// 20 Mbit/s) with the proxy's control address on the router; and the
/// router, whose `eth0` faces the client.
fn router_testbed() -> (Testbed, Node) {
    let spec = TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![hop(1, 100), hop(10, 20)],
        extra: vec![(0, PROXY)],
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(7),
    };
    let testbed = Testbed::build(&spec, RealClock::start()).expect("the testbed builds");
    let middle = testbed.middle(0).expect("a middle node").clone();
    assert_eq!(middle.interfaces[0].name, "eth0");
    assert_eq!(middle.interfaces[0].peer, CLIENT, "eth0 faces the client");
    (testbed, middle)
}

/// The two flows through the router: a media sender with a Sidekick
/// engine, which asks for quACKs, and a plain flow beside it, which never
/// does.
struct Flows {
    /// Stops the receivers.
    stop: Arc<AtomicBool>,
    receiver: HostThread<MediaReceiver>,
    sink: HostThread<Sink>,
    sender: HostRun<SidekickHost<MediaSender, quack::F32>>,
    plain: HostRun<CbrSource>,
}

/// Runs both flows, receivers first, until both senders are finished; the
/// receivers keep running until [`Flows::stop`] is set.
fn run_flows(testbed: &Testbed) -> Flows {
    let deadline = testbed.clock().now() + Duration::from_secs(30);
    let stop = Arc::new(AtomicBool::new(false));
    let media_src = SocketAddr::new(CLIENT.into(), 5000);
    let media_dst = SocketAddr::new(SERVER.into(), 6000);
    let plain_src = SocketAddr::new(CLIENT.into(), 7000);
    let plain_dst = SocketAddr::new(SERVER.into(), 7001);
    let media = MediaConfig::new(Seed::new(3)).with_duration(Duration::from_secs(5));
    let receiver = testbed
        .run_host(
            testbed.server(),
            MediaReceiver::new(media.clone(), media_dst, media_src),
            vec![media_dst],
            &HostRunSpec::new(RunUntil::Stopped, deadline, stop.clone()),
        )
        .unwrap();
    let sink = testbed
        .run_host(
            testbed.server(),
            Sink::new(),
            vec![plain_dst],
            &HostRunSpec::new(RunUntil::Stopped, deadline, stop.clone()),
        )
        .unwrap();
    let plain = testbed
        .run_host(
            testbed.client(),
            CbrSource::new(plain_src, plain_dst, 200, Duration::from_millis(10), 500),
            vec![plain_src],
            &HostRunSpec::new(RunUntil::Finished, deadline, stop.clone()),
        )
        .unwrap();
    let sender = SidekickHost::<_, quack::F32>::new(
        MediaSender::new(media, media_src, media_dst),
        SenderConfig::new(Interval::Packets(2), 8),
        Seed::new(5),
    );
    let sender = testbed
        .run_host(
            testbed.client(),
            sender,
            vec![media_src],
            &HostRunSpec::new(RunUntil::Finished, deadline, stop.clone()),
        )
        .unwrap();
    let sender = sender.join().expect("the sender runs");
    let plain = plain.join().expect("the plain flow runs");
    Flows {
        stop,
        receiver,
        sink,
        sender,
        plain,
    }
}

/// The flow that asked got quACKs, through the kernel's forwarding.
fn check_the_media_flow_was_quacked(
    sender: &HostRun<SidekickHost<MediaSender, quack::F32>>,
    receiver: &MediaReceiver,
    stats: &serde_json::Value,
) {
    let (proxy, driver) = (&stats["system"], &stats["driver"]);
    let engine = sender.host.stats();
    assert!(engine.quacks > 0, "{engine:?}");
    assert_eq!(sender.stop, emu::HostStop::Finished);
    assert!(
        receiver.stats().packets_received >= 240,
        "{:?}",
        receiver.stats()
    );
    let count = |value: &serde_json::Value| value.as_u64().unwrap_or_default();
    assert_eq!(count(&proxy["flows"]), 1, "{stats}");
    assert_eq!(count(&proxy["configured_flows"]), 1, "{stats}");
    assert!(
        count(&proxy["requests"]) >= 1 && count(&proxy["replies"]) >= 1,
        "{stats}"
    );
    assert!(count(&proxy["configures"]) >= 1, "{stats}");
    assert!(count(&proxy["quacks"]) > 0, "{stats}");
    assert!(count(&proxy["packets_encoded"]) >= 240, "{stats}");
    assert_eq!(count(&proxy["forwarded"]), 0, "the kernel forwards");
    assert!(count(&driver["local_datagrams"]) >= 1, "{stats}");
    assert_eq!(count(&driver["send_errors"]), 0, "{stats}");
    assert_eq!(count(&driver["malformed_frames"]), 0, "{stats}");
}

/// The plain flow passed untouched and was never quACKed or tabled: the
/// flow table (in the log) holds the media flow alone.
fn check_the_plain_flow_was_untouched(
    plain: &HostRun<CbrSource>,
    sink: &Sink,
    stats: &serde_json::Value,
    log: &str,
) {
    assert_eq!(plain.host.sent(), 500);
    assert!(
        plain.host.received().is_empty(),
        "the plain flow got replies"
    );
    assert!(sink.arrivals().len() >= 490, "{}", sink.arrivals().len());
    assert!(
        stats["driver"]["datagrams"].as_u64() >= Some(240 + 490),
        "both flows were sniffed: {stats}"
    );
    let flows: Vec<&str> = log.lines().filter(|l| l.starts_with("flow ")).collect();
    assert_eq!(flows.len(), 1, "{log}");
    assert!(
        flows[0].starts_with("flow 10.0.2.10:5000 -> 10.0.1.10:6000 configured interval=2pkt"),
        "{log}"
    );
    assert!(!log.contains(":7000"), "{log}");
}

#[test]
fn the_daemon_quacks_the_flow_that_asked_and_only_it() {
    if !emu::require_real_or_skip("the_daemon_quacks_the_flow_that_asked_and_only_it") {
        return;
    }
    let (testbed, middle) = router_testbed();
    let daemon = Daemon::start(
        &middle.netns,
        &[
            "sidekick",
            "--iface",
            "eth0",
            "--addr",
            &PROXY.to_string(),
            "--seed",
            "11",
        ],
    );
    let flows = run_flows(&testbed);

    // The flow table, then stop everything.
    daemon.dump();
    let stopped = daemon.stop();
    flows.stop.store(true, Ordering::Relaxed);
    let receiver = flows.receiver.join().expect("the receiver runs").host;
    let sink = flows.sink.join().expect("the sink runs").host;
    eprintln!("sender engine: {:?}", flows.sender.host.stats());
    assert!(stopped.status.success(), "{:?}", stopped.status);
    check_the_media_flow_was_quacked(&flows.sender, &receiver, &stopped.stats);
    check_the_plain_flow_was_untouched(&flows.plain, &sink, &stopped.stats, &stopped.log);
}
