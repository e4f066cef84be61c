//! Scaffolding for tests of what rides on our endpoints (not used by
//! pepkit itself).

use crate::{BulkClient, BulkServerFactory, DatagramChannel, Direction};
use crate::{QuicClient, QuicConfig, QuicServer};
use netsim::{ChainSpec, HopConfig, HostSpec, LinkConfig, Rate, Seed, Simulator, Time};
use std::time::Duration;

/// A 2 MB download by our client (10.0.0.1:5000) from our server
/// (10.0.1.1:4433) over one 10 ms, 10 Mbit/s hop, their endpoints carrying
/// datagrams through `client` and `server`. Runs it to 200 ms (the
/// handshake is done) and hands the simulator back, to send datagrams and
/// run on.
pub fn datagram_pair(seed: Seed, client: &DatagramChannel, server: &DatagramChannel) -> Simulator {
    let config = |channel: &DatagramChannel| {
        QuicConfig::new(seed)
            .with_datagram_channel(channel.clone())
            .with_max_udp_payload(1200)
    };
    let (a, b) = (
        "10.0.0.1:5000".parse().expect("an address"),
        "10.0.1.1:4433".parse().expect("an address"),
    );
    let download = BulkClient::new(Direction::Download, 2_000_000);
    let client = QuicClient::new(config(client), a, b, download);
    let server = QuicServer::new(config(server), b, BulkServerFactory);
    let link = LinkConfig::constant(Duration::from_millis(10), Rate::from_mbps(10));
    let spec = ChainSpec::new(
        HostSpec::new("c", a.ip(), client),
        HostSpec::new("s", b.ip(), server),
    )
    .hop(HopConfig::new(link.clone(), link));
    let mut sim = Simulator::new(seed);
    sim.add_chain(spec).expect("a valid chain");
    sim.run_until(Time::from_millis(200));
    sim
}
