//! A receiver wrapped in `AckDelay` sends its 1-RTT datagrams at most once
//! per `min_ack_delay`, and the upload still completes.

use netsim::*;
use quic::{AckDelay, BulkClient, BulkReport, BulkServerFactory, Direction};
use quic::{QuicClient, QuicConfig, QuicServer};
use std::net::SocketAddr;
use std::time::Duration;

/// A 2 MB upload over 10 ms / 10 Mbit/s hops; the server's ACK delay, if
/// any. Returns (datagrams the server's link carried, goodput bit/s).
fn upload(min_ack_delay: Option<Duration>) -> (u64, u64) {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let server_addr: SocketAddr = "10.0.1.1:4433".parse().unwrap();
    let config = QuicConfig::new(Seed::new(3));
    let client = QuicClient::new(
        config.clone(),
        client_addr,
        server_addr,
        BulkClient::new(Direction::Upload, 2_000_000),
    );
    let server = QuicServer::new(
        config.with_receive_window(1 << 30),
        server_addr,
        BulkServerFactory,
    );
    let server = match min_ack_delay {
        Some(delay) => HostSpec::new("server", server_addr.ip(), AckDelay::new(server, delay)),
        None => HostSpec::new("server", server_addr.ip(), server),
    };
    let link = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(10))
        .with_buffer(BufferLimit::Packets(100));
    let spec = ChainSpec::new(HostSpec::new("client", client_addr.ip(), client), server)
        .hop(HopConfig::symmetric(link.clone()))
        .middle(MiddleSpec::forwarder("router"))
        .hop(HopConfig::symmetric(link));
    let mut sim = Simulator::new(Seed::new(3));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(60));
    let client = sim.host::<QuicClient<BulkClient>>(chain.sender).unwrap();
    let server = match sim.host::<AckDelay<QuicServer<BulkServerFactory>>>(chain.receiver) {
        Some(delayed) => delayed.inner(),
        None => sim
            .host::<QuicServer<BulkServerFactory>>(chain.receiver)
            .unwrap(),
    };
    let report = BulkReport::from_hosts(client, server).expect("the upload completed");
    let acks = sim.link_stats(chain.hops[1].reverse).offered.packets;
    (acks, report.goodput.bits_per_sec())
}

#[test]
fn a_delayed_receiver_acknowledges_once_per_delay() {
    let (default_acks, _) = upload(None);
    let (delayed_acks, goodput) = upload(Some(Duration::from_millis(100)));
    assert!(goodput > 0);
    // Lossless: ~1.6 s of transfer at 10 Mbit/s acknowledged every other
    // packet by default; every 100 ms at most (plus the handshake).
    assert!(default_acks > 500, "{default_acks}");
    assert!(
        delayed_acks <= 30,
        "{delayed_acks} datagrams from the receiver"
    );
}
