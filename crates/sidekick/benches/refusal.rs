//! The proxy's cost of a sidekick request when its flow table is full.
//!
//! `cargo bench -p pepkit-sidekick --bench refusal`. One iteration is one
//! request from a new address (a flood's spoofed request) handed to the
//! proxy, with the replies it sends drained, at a fixed simulated time (no
//! flow expires). The table's bound is raised to `flows` and filled first:
//!
//! * `full_of_configured`: every flow configured (request and configure),
//!   so none can make room and the request is refused;
//! * `full_of_unconfigured`: every flow a request that never configured
//!   (a flood's), so the request takes the place of the oldest.
//!
//! The cost should not grow with the table: a refusal used to rescan it.

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use netsim::{Datagram, Interface, Middlebox, Seed, Time};
use sidekick::wire::{Config, Control, Discovery, Interval};
use sidekick::{ProxyConfig, SidekickProxy};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn main() {
    divan::main();
}

const PROXY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254)), 1234);
const RECEIVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)), 4433);
const NOW: Time = Time::from_millis(100);

/// The `i`th distinct sender address.
fn sender(i: u32) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), 5000)
}

fn request(proxy: &mut SidekickProxy, i: u32) -> Option<u64> {
    let request = Discovery::Request { nonce: 1 }.to_bytes();
    proxy.handle_datagram(
        NOW,
        Interface(0),
        Datagram::new(sender(i), RECEIVER, request),
    );
    let mut session = None;
    while let Some(t) = proxy.poll_transmit(NOW) {
        if let Ok(Discovery::Reply { session: s, .. }) = Discovery::parse(&t.datagram.payload) {
            session = Some(s);
        }
    }
    session
}

/// A proxy whose table holds `flows` flows, configured or not.
fn full_table(flows: usize, configured: bool) -> SidekickProxy {
    let mut config = ProxyConfig::new(PROXY, Seed::new(1));
    config.max_flows = flows;
    config.forward = false;
    // Every request from its own address at one instant: no source may run
    // out of replies (the bucket is still drawn from).
    config.reply_burst = u32::MAX;
    let mut proxy = SidekickProxy::new(config);
    for i in 0..flows as u32 {
        let session = request(&mut proxy, i).expect("room for a reply");
        if configured {
            let configure = Control::Configure {
                session,
                config: Config {
                    interval: Interval::Millis(30),
                    threshold: 10,
                    id_bytes: 4,
                    id_offset: 21,
                    quota: 0,
                },
            };
            let control = SocketAddr::new(sender(i).ip(), 5103);
            proxy.handle_datagram(
                NOW,
                Interface(0),
                Datagram::new(control, PROXY, configure.to_bytes()),
            );
        }
    }
    assert_eq!(proxy.flow_count(), flows);
    proxy
}

fn run(bencher: Bencher<'_, '_>, mut proxy: SidekickProxy, flows: usize) {
    let mut next = flows as u32;
    bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
        black_box(request(&mut proxy, next));
        next += 1;
    });
    black_box(proxy.stats());
}

#[divan::bench(args = [4096, 16384, 65536], sample_count = 20, sample_size = 16)]
fn full_of_configured(bencher: Bencher<'_, '_>, flows: usize) {
    run(bencher, full_table(flows, true), flows);
}

#[divan::bench(args = [4096, 16384, 65536], sample_count = 20, sample_size = 16)]
fn full_of_unconfigured(bencher: Bencher<'_, '_>, flows: usize) {
    run(bencher, full_table(flows, false), flows);
}
