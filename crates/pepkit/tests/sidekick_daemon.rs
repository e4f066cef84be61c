//! The Sidekick proxy daemon on a real router: client — middle — server
//! namespaces joined through the link emulator, the daemon sniffing the
//! middle node's client-facing interface while the kernel forwards, a
//! media sender with a sidekick engine on the client, and a plain flow
//! beside it that never asked for quACKs.
//!
//! Needs root and `ip netns`; skips (and says so) without them, or fails
//! with `PEPKIT_REQUIRE_REAL=1`. The
//! namespaces are removed when the testbed drops, also when an assertion
//! fails.

use emu::sidekick_daemon::{DaemonError, DaemonStats, SidekickDaemon, SidekickDaemonConfig};
use emu::{HostRun, HostRunSpec, HostThread, Node, RealClock, RunUntil, Testbed, TestbedSpec};
use netsim::testing::{CbrSource, Sink};
use netsim::{BufferLimit, HopConfig, LinkConfig, Rate, Seed};
use quic::{MediaConfig, MediaReceiver, MediaSender};
use sidekick::wire::Interval;
use sidekick::{SenderConfig, SidekickHost};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const PROXY: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 1);

/// A log the test can read while the daemon writes it.
#[derive(Clone, Default)]
struct SharedLog(Arc<Mutex<Vec<u8>>>);

impl Write for SharedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedLog {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// One real-mode test at a time: the capacity measurement wants a quiet
/// machine.
static SERIAL: Mutex<()> = Mutex::new(());

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

#[test]
fn opening_the_daemon_names_a_missing_interface_and_a_foreign_address() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip(
        "opening_the_daemon_names_a_missing_interface_and_a_foreign_address",
    ) {
        return;
    }
    let (testbed, middle) = router_testbed();
    // Clear errors, in the middle node's namespace.
    let errors = testbed
        .spawn_in(&middle, "errors", || {
            let no_iface = SidekickDaemon::open(&SidekickDaemonConfig::new(
                "nosuch0",
                SocketAddrV4::new(PROXY, 1234),
            ))
            .err();
            let not_local = SidekickDaemon::open(&SidekickDaemonConfig::new(
                "eth0",
                SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 1234),
            ))
            .err();
            (no_iface, not_local)
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    assert!(
        matches!(errors.0, Some(DaemonError::NoInterface(ref name)) if name == "nosuch0"),
        "{:?}",
        errors.0
    );
    assert!(
        matches!(errors.1, Some(DaemonError::AddrNotLocal(_))),
        "{:?}",
        errors.1
    );
}

/// The daemon running on the router's thread, sniffing `eth0`.
struct Daemon {
    stop: Arc<AtomicBool>,
    dump: Arc<AtomicBool>,
    log: SharedLog,
    handle: JoinHandle<std::io::Result<Result<DaemonStats, DaemonError>>>,
}

impl Daemon {
    /// Starts the daemon on `middle`; returns once it is open.
    fn start(testbed: &Testbed, middle: &Node) -> Daemon {
        let stop = Arc::new(AtomicBool::new(false));
        let dump = Arc::new(AtomicBool::new(false));
        let log = SharedLog::default();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let handle = {
            let (stop, dump, log) = (stop.clone(), dump.clone(), log.clone());
            let mut config = SidekickDaemonConfig::new("eth0", SocketAddrV4::new(PROXY, 1234));
            config.seed = Some(11);
            testbed
                .spawn_in(middle, "sidekick-proxy", move || {
                    let daemon = SidekickDaemon::open(&config);
                    let _ = ready_tx.send(daemon.as_ref().err().map(|e| e.to_string()));
                    daemon?.run(&stop, &dump, log)
                })
                .unwrap()
        };
        assert_eq!(ready_rx.recv().unwrap(), None, "the daemon opens");
        Daemon {
            stop,
            dump,
            log,
            handle,
        }
    }

    /// Asks for the flow table (as SIGUSR1 does) and waits, at most 2 s,
    /// until it is written.
    fn dump_flow_table(&self) {
        self.dump.store(true, Ordering::Relaxed);
        let asked = Instant::now();
        while self.dump.load(Ordering::Relaxed) && asked.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the daemon (set its stop flag first): its counters and
    /// its log.
    fn join(self) -> (DaemonStats, String) {
        let stats = self
            .handle
            .join()
            .expect("the daemon thread")
            .expect("entered the namespace")
            .expect("the daemon runs");
        (stats, self.log.text())
    }
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
    stats: &DaemonStats,
) {
    let engine = sender.host.stats();
    assert!(engine.quacks > 0, "{engine:?}");
    assert_eq!(sender.stop, emu::HostStop::Finished);
    assert!(
        receiver.stats().packets_received >= 240,
        "{:?}",
        receiver.stats()
    );
    assert_eq!(stats.flows, 1, "{stats:?}");
    assert_eq!(stats.configured_flows, 1, "{stats:?}");
    assert!(
        stats.proxy.requests >= 1 && stats.proxy.replies >= 1,
        "{stats:?}"
    );
    assert!(stats.proxy.configures >= 1, "{stats:?}");
    assert!(stats.proxy.quacks > 0, "{stats:?}");
    assert!(stats.proxy.packets_encoded >= 240, "{stats:?}");
    assert_eq!(stats.proxy.forwarded, 0, "the kernel forwards");
    assert!(stats.control_datagrams >= 1, "{stats:?}");
    assert_eq!(stats.send_errors, 0, "{stats:?}");
    assert_eq!(stats.malformed_frames, 0, "{stats:?}");
}

/// The plain flow passed untouched and was never quACKed or tabled: the
/// flow table (in the log) holds the media flow alone.
fn check_the_plain_flow_was_untouched(
    plain: &HostRun<CbrSource>,
    sink: &Sink,
    stats: &DaemonStats,
    log: &str,
) {
    assert_eq!(plain.host.sent(), 500);
    assert!(
        plain.host.received().is_empty(),
        "the plain flow got replies"
    );
    assert!(sink.arrivals().len() >= 490, "{}", sink.arrivals().len());
    assert!(
        stats.datagrams >= 240 + 490,
        "both flows were sniffed: {stats:?}"
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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("the_daemon_quacks_the_flow_that_asked_and_only_it") {
        return;
    }
    let (testbed, middle) = router_testbed();
    let daemon = Daemon::start(&testbed, &middle);
    let flows = run_flows(&testbed);

    // The flow table, then stop everything.
    daemon.dump_flow_table();
    daemon.stop.store(true, Ordering::Relaxed);
    flows.stop.store(true, Ordering::Relaxed);
    let (stats, log) = daemon.join();
    let receiver = flows.receiver.join().expect("the receiver runs").host;
    let sink = flows.sink.join().expect("the sink runs").host;
    eprintln!("daemon: {}", serde_json::to_string(&stats).unwrap());
    eprintln!("sender engine: {:?}", flows.sender.host.stats());
    eprintln!("log:\n{log}");

    check_the_media_flow_was_quacked(&flows.sender, &receiver, &stats);
    check_the_plain_flow_was_untouched(&flows.plain, &sink, &stats, &log);
}

#[test]
fn the_capacity_measurement_runs_and_cleans_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !emu::require_real_or_skip("the_capacity_measurement_runs_and_cleans_up") {
        return;
    }
    use emu::bench::proxy_capacity::{CapacityConfig, run};
    let config = CapacityConfig {
        flows: 8,
        interval_packets: 8,
        rate: 10_000,
        phase: Duration::from_millis(300),
        rounds: 1,
        ..CapacityConfig::default()
    };
    let report = run(&config).expect("the measurement runs");
    eprintln!("{}", serde_json::to_string(&report).unwrap());
    assert_eq!(report.configured_flows, 8);
    assert_eq!(report.daemon.configured_flows, 8);
    for mode in [&report.null, &report.full] {
        // 0.3 s at 10k packets/s.
        assert!(mode.packets > 2000, "{mode:?}");
        assert!(mode.cpu_ns_per_packet > 0.0, "{mode:?}");
    }
    assert_eq!(report.null.quacks, 0);
    assert!(
        report.full.quacks >= report.full.packets / 8 - 8,
        "{report:?}"
    );
    assert!(report.ratio > 0.0);
    // Its namespaces are gone.
    let left = emu::sys::command::ip(&["netns", "list"]).unwrap();
    let prefix = format!("pk-{}-cap", std::process::id());
    assert!(!left.contains(&prefix), "{left}");
}
