//! A longer chain: several middle nodes (forwarders and a middlebox),
//! routing both ways, TTL handling and the capture of an IPv6 path.

use etherparse::{NetSlice, SlicedPacket};
use netsim::testing::{CbrSource, Sink};
use netsim::*;
use pcap_file::pcap::PcapReader;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Passes everything through by destination, counting per interface.
#[derive(Default)]
struct Count {
    seen: [u64; 2],
    out: VecDeque<Transmit>,
}

impl Middlebox for Count {
    fn handle_datagram(&mut self, now: Time, from: Interface, d: Datagram) {
        self.seen[from.index()] += 1;
        self.out.push_back(Transmit::at(now, d));
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.out.pop_front()
    }
    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }
}

/// Sends one datagram per given TTL at start.
struct TtlProbe {
    src: SocketAddr,
    dst: SocketAddr,
    ttls: Vec<u8>,
}

impl Host for TtlProbe {
    fn handle_datagram(&mut self, _now: Time, _d: Datagram) {}
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_transmit(&mut self, _now: Time) -> Option<Datagram> {
        let ttl = self.ttls.pop()?;
        let mut d = Datagram::new(self.src, self.dst, vec![ttl; 20]);
        d.ttl = ttl;
        Some(d)
    }
    fn poll_timeout(&mut self) -> Option<Time> {
        None
    }
    /// Never finished: the run goes on until nothing is left to happen, so
    /// the datagrams in flight get where they are going.
    fn is_finished(&self) -> bool {
        false
    }
}

fn chain(sender: impl Host, s: SocketAddr, r: SocketAddr) -> ChainSpec {
    let hop = |d| HopConfig::symmetric(LinkConfig::delay_only(ms(d)));
    ChainSpec::new(
        HostSpec::new("sender", s.ip(), sender),
        HostSpec::new("receiver", r.ip(), Sink::echoing()),
    )
    .hop(hop(1))
    .middle(MiddleSpec::forwarder("m1"))
    .hop(hop(2))
    .middle(MiddleSpec::with_middlebox("m2", Count::default()))
    .hop(hop(3))
    .middle(MiddleSpec::forwarder("m3"))
    .hop(hop(4))
}

#[test]
fn three_middle_nodes_route_both_ways_over_ipv6() {
    let s: SocketAddr = "[fd00::1]:4000".parse().unwrap();
    let r: SocketAddr = "[fd00::2]:443".parse().unwrap();
    let source = CbrSource::new(s, r, 200, ms(5), 20).with_linger(ms(100));
    let mut sim = Simulator::new(Seed::new(4));
    let c = sim.add_chain(chain(source, s, r)).unwrap();
    let cap = sim.capture(c.hops[3].forward, CapturePoint::Delivered);
    let outcome = sim.run_until(Time::from_secs(10));
    assert_eq!(outcome.reason, StopReason::AllFinished);

    let sink = sim.host::<Sink>(c.receiver).unwrap();
    assert_eq!(sink.arrivals().len(), 20);
    assert!(
        sink.arrivals()
            .iter()
            .all(|a| a.one_way_delay() == Some(ms(10)))
    );
    let source = sim.host::<CbrSource>(c.sender).unwrap();
    assert_eq!(source.received().len(), 20);
    // ACKs echo the probe: arrival − original send time = RTT.
    assert!(
        source
            .received()
            .iter()
            .all(|a| a.one_way_delay() == Some(ms(20)))
    );
    assert_eq!(sim.middlebox::<Count>(c.middles[1]).unwrap().seen, [20, 20]);
    assert_eq!(sim.node_name(c.middles[2]), Some("m3"));
    assert_eq!(
        sim.interface_towards(c.middles[1], c.middles[2]),
        Some(Chain::TOWARDS_RECEIVER)
    );

    let pcap = sim.take_capture(cap).unwrap();
    let mut reader = PcapReader::new(&pcap[..]).unwrap();
    let mut n = 0;
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap();
        let sliced = SlicedPacket::from_ethernet(&packet.data).unwrap();
        let Some(NetSlice::Ipv6(ip)) = &sliced.net else {
            panic!("expected IPv6")
        };
        // Three middle nodes each took one off the hop limit.
        assert_eq!(ip.header().hop_limit(), 61);
        assert_eq!(packet.timestamp, Duration::from_millis(10 + 5 * n));
        n += 1;
    }
    assert_eq!(n, 20);
}

#[test]
fn ttl_runs_out_in_the_middle() {
    let s: SocketAddr = "10.0.0.1:1".parse().unwrap();
    let r: SocketAddr = "10.0.1.1:2".parse().unwrap();
    // TTL 3 dies at the third middle node; TTL 4 arrives with TTL 1.
    let probe = TtlProbe {
        src: s,
        dst: r,
        ttls: vec![3, 4],
    };
    let mut sim = Simulator::new(Seed::new(0));
    let c = sim.add_chain(chain(probe, s, r)).unwrap();
    let outcome = sim.run_until(Time::from_secs(1));
    // Nothing is left to happen once both datagrams have gone their way.
    assert_eq!(outcome.reason, StopReason::Idle);
    assert_eq!(sim.stats().ttl_expired, 1);
    let sink = sim.host::<Sink>(c.receiver).unwrap();
    assert_eq!(sink.arrivals().len(), 1);
}
