//! A congestion controller can change the connection's loss thresholds
//! while it runs and hears of each spurious loss (a packet declared lost,
//! then acknowledged); the connection counts them
//! (third_party/noq-proto/PEPKIT.md, item 8). TECC's server uses this for
//! its §4.2.5 loss detection (`cc::Tecc`).

mod common;
use common::{bulk_ends, download_ends};

use netsim::*;
use quic::congestion::{Controller, ControllerFactory};
use quic::{BulkReport, ConnStats, QuicConfig};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A constant window of `window` full packets that may ask for its own
/// loss thresholds and counts the spurious losses it hears of.
#[derive(Debug, Clone)]
struct Thresholds {
    window: u64,
    packet_threshold: Option<u32>,
    extra_delay: Duration,
    heard: Arc<AtomicU64>,
}

impl Controller for Thresholds {
    fn on_congestion_event(&mut self, _: Instant, _: Instant, _: bool, _: bool, _: u64, _: u64) {}
    fn on_mtu_update(&mut self, _: u16) {}
    fn on_spurious_loss(&mut self, _: Instant, pn: u64, largest_acked: u64) {
        assert!(largest_acked > pn, "{pn} {largest_acked}");
        self.heard.fetch_add(1, Ordering::Relaxed);
    }
    fn extra_loss_delay(&self) -> Duration {
        self.extra_delay
    }
    fn packet_threshold(&self) -> Option<u32> {
        self.packet_threshold
    }
    fn window(&self) -> u64 {
        self.window * 1200
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
    fn initial_window(&self) -> u64 {
        self.window()
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl ControllerFactory for Thresholds {
    fn build(self: Arc<Self>, _: Instant, _: u16) -> Box<dyn Controller> {
        Box::new((*self).clone())
    }
}

/// Holds every 50th full-size datagram after the first `from` back by 40
/// ms (as a tunnel that repairs a loss would): the packets behind it
/// overtake it.
#[derive(Default)]
struct HoldBack {
    from: u64,
    full: u64,
    out: VecDeque<Transmit>,
}

impl Middlebox for HoldBack {
    fn handle_datagram(&mut self, now: Time, _from: Interface, d: Datagram) {
        let mut at = now;
        if d.payload.len() >= 1000 {
            self.full += 1;
            if self.full.is_multiple_of(50) && self.full > self.from {
                at = now + Duration::from_millis(40);
            }
        }
        self.out.push_back(Transmit::at(at, d));
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.out.pop_front()
    }
    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }
}

/// A 1 MB download through [`HoldBack`] on 10 Mbit/s links, a window of
/// 20 packets: the server's counters and the spurious losses its
/// controller heard of.
fn download(packet_threshold: Option<u32>, extra_delay: Duration) -> (ConnStats, u64) {
    download_on(20, Rate::from_mbps(10), 0, packet_threshold, extra_delay)
}

/// [`download`] with a window of `window` packets on links of `rate`,
/// holding back only after the first `from` full-size packets.
fn download_on(
    window: u64,
    rate: Rate,
    from: u64,
    packet_threshold: Option<u32>,
    extra_delay: Duration,
) -> (ConnStats, u64) {
    let heard = Arc::new(AtomicU64::new(0));
    let controller = Thresholds {
        window,
        packet_threshold,
        extra_delay,
        heard: heard.clone(),
    };
    let config = QuicConfig::new(Seed::new(3)).with_controller(Arc::new(controller));
    let link = LinkConfig::constant(Duration::from_millis(10), rate);
    let spec = download_ends(config, 1_000_000)
        .hop(HopConfig::symmetric(link.clone()))
        .middle(MiddleSpec::with_middlebox(
            "hold",
            HoldBack {
                from,
                ..HoldBack::default()
            },
        ))
        .hop(HopConfig::symmetric(link));
    let mut sim = Simulator::new(Seed::new(3));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(60));
    let (client, server) = bulk_ends(&sim, &chain);
    let report = BulkReport::from_hosts(client, server).expect("completed");
    assert_eq!(report.bytes, 1_000_000);
    let stats = server.records().next().unwrap().stats.clone();
    (stats, heard.load(Ordering::Relaxed))
}

#[test]
fn reordered_packets_are_spurious_losses_under_the_default_thresholds() {
    let (stats, heard) = download(None, Duration::ZERO);
    // Nothing is dropped: every packet declared lost was reordered, and is
    // acknowledged later.
    assert!(stats.lost_packets >= 10, "{stats:?}");
    assert_eq!(stats.spurious_losses, stats.lost_packets, "{stats:?}");
    assert_eq!(heard, stats.spurious_losses);
}

#[test]
fn the_connection_uses_the_controllers_thresholds() {
    // A held-back packet's ACK comes about 40 ms late, after those of the
    // 20 packets behind it and after 9/8 of the RTT (about 45 ms of 40).
    // Raising both thresholds past that declares nothing lost.
    let (stats, heard) = download(Some(1000), Duration::from_millis(100));
    assert_eq!(
        (stats.lost_packets, stats.spurious_losses, heard),
        (0, 0, 0)
    );
    // Either alone is not enough: the other one still fires.
    let (packets, _) = download(Some(1000), Duration::ZERO);
    assert!(packets.spurious_losses > 0, "{packets:?}");
    let (time, _) = download(None, Duration::from_millis(100));
    assert!(time.spurious_losses > 0, "{time:?}");
}

#[test]
fn a_packet_hundreds_of_packets_late_is_still_received() {
    // At 100 Mbit/s with a window of 600 packets, about 400 packets
    // overtake each held-back one (40 ms at ~10,000 packets/s). The
    // receiver takes it (PEPKIT.md item 9: it remembers 8192 packet
    // numbers, not 128) and acknowledges it, so with both thresholds
    // past the delay nothing is declared lost. Before, the receiver
    // dropped it as a duplicate and the sender had to resend it (2 in
    // this download). The first flight is spared: its packets go out before any
    // ACK with one-byte packet numbers, which the receiver cannot decode
    // once it is more than 128 packets further (RFC 9000 §17.1).
    let (stats, heard) = download_on(
        600,
        Rate::from_mbps(100),
        600,
        Some(1000),
        Duration::from_millis(100),
    );
    assert_eq!(
        (stats.lost_packets, stats.spurious_losses, heard),
        (0, 0, 0),
        "{stats:?}"
    );
}
