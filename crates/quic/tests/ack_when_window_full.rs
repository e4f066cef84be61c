//! Packets that carry only ACK frames are not congestion controlled
//! (RFC 9002 §7): an endpoint whose window is full still acknowledges what
//! it receives. noq-proto as published holds the ACKs back with the other
//! frames whenever something else waits for the window, so a receiver that
//! has, say, a DATAGRAM queued (TECC's tunnel client queues QUIC_INFO on
//! the application client all the time) stops acknowledging; its peer
//! hears nothing and closes the connection on its idle timeout.
//! pepkit's copy (third_party/noq-proto, PEPKIT.md item 5) sends the ACKs
//! alone.

use bytes::Bytes;
use netsim::*;
use quic::congestion::{Controller, ControllerFactory};
use quic::{BulkClient, BulkReport, BulkServerFactory, DatagramChannel, Direction};
use quic::{QuicClient, QuicConfig, QuicServer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A window the test sets from outside (shared by every connection built
/// from one factory).
#[derive(Debug, Clone)]
struct Switch(Arc<AtomicU64>);

impl Controller for Switch {
    fn on_congestion_event(&mut self, _: Instant, _: Instant, _: bool, _: bool, _: u64, _: u64) {}
    fn on_mtu_update(&mut self, _: u16) {}
    fn window(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
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

impl ControllerFactory for Switch {
    fn build(self: Arc<Self>, _: Instant, _: u16) -> Box<dyn Controller> {
        Box::new((*self).clone())
    }
}

const BYTES: u64 = 4_000_000;
/// About 1.5 times the path's bandwidth-delay product (10 Mbit/s, 40 ms).
const SERVER_WINDOW: u64 = 75_000;

#[test]
fn a_receiver_with_a_full_window_still_acknowledges() {
    let window = Arc::new(AtomicU64::new(10_000_000));
    let channel = DatagramChannel::default();
    let client_config = QuicConfig::new(Seed::new(5))
        .with_controller(Arc::new(Switch(window.clone())))
        .with_datagram_channel(channel.clone())
        .with_max_udp_payload(1200)
        // Flow control never binds: the client's window updates wait too.
        .with_receive_window(64 << 20);
    let server_config = QuicConfig::new(Seed::new(5))
        .with_controller(Arc::new(Switch(Arc::new(AtomicU64::new(SERVER_WINDOW)))))
        .with_max_udp_payload(1200);
    let (a, b) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.1.1:4433".parse().unwrap(),
    );
    let client = QuicClient::new(
        client_config,
        a,
        b,
        BulkClient::new(Direction::Download, BYTES),
    );
    let server = QuicServer::new(server_config, b, BulkServerFactory);
    let link = LinkConfig::constant(Duration::from_millis(20), Rate::from_mbps(10));
    let spec = ChainSpec::new(
        HostSpec::new("c", a.ip(), client),
        HostSpec::new("s", b.ip(), server),
    )
    .hop(HopConfig::new(link.clone(), link));
    let mut sim = Simulator::new(Seed::new(5));
    let chain = sim.add_chain(spec).unwrap();
    // Mid-download the client's window shrinks below one packet and
    // datagrams keep waiting for it (a new one every 20 ms, as a relay of
    // feedback would queue them): nothing but ACKs may leave the client.
    sim.run_until(Time::from_millis(1000));
    window.store(1000, Ordering::Relaxed);
    for ms in (1000..60_000).step_by(20) {
        channel.send(Bytes::from_static(b"waits for the window"));
        sim.run_until(Time::from_millis(ms + 20));
    }
    let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
    let server = sim
        .host::<QuicServer<BulkServerFactory>>(chain.receiver)
        .unwrap();
    let record = client.record().cloned().unwrap_or_default();
    assert!(record.error.is_none(), "client: {:?}", record.error);
    let report = BulkReport::from_hosts(client, server).expect("the download completes");
    assert_eq!(report.bytes, BYTES);
    // 4 MB at 10 Mbit/s take 3.2 s. Without the client's ACKs the server
    // stalls at its window, hears nothing for its idle timeout (30 s) and
    // drops the connection; the client's next packets draw a stateless
    // reset.
    assert!(report.completion < Duration::from_secs(10), "{report:?}");
}
