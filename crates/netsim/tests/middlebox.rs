//! A test middlebox that delays, drops, duplicates and injects, on the
//! middle node of a chain.

mod common;
use common::*;
use netsim::testing::{CbrSource, Probe, Sink};
use netsim::*;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Forward direction (from the sender): seq % 10 == 3 dropped, == 5 delayed
/// by 25 ms, == 7 duplicated. Reverse direction: forwarded untouched. Every
/// 100 ms (10 times) it injects one datagram to each end, from its own
/// address.
struct Impair {
    me: SocketAddr,
    sender: SocketAddr,
    receiver: SocketAddr,
    out: VecDeque<Transmit>,
    next_inject: Time,
    injected: u64,
    seen: [u64; 2],
    for_me: u64,
}

impl Middlebox for Impair {
    fn handle_datagram(&mut self, now: Time, from: Interface, d: Datagram) {
        self.seen[from.index()] += 1;
        if d.dst == self.me {
            self.for_me += 1;
            return;
        }
        if from == Chain::TOWARDS_RECEIVER {
            self.out.push_back(Transmit::at(now, d));
            return;
        }
        let seq = Probe::decode(&d.payload).unwrap().seq;
        match seq % 10 {
            3 => {}
            5 => self.out.push_back(Transmit::at(now + ms(25), d)),
            7 => {
                self.out.push_back(Transmit::at(now, d.clone()));
                // The copy goes out of an explicit interface.
                self.out
                    .push_back(Transmit::at(now, d).via(Chain::TOWARDS_RECEIVER));
            }
            _ => self.out.push_back(Transmit::at(now, d)),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if now >= self.next_inject && self.injected < 10 {
            let probe = Probe {
                seq: 1000 + self.injected,
                sent_at: now,
            };
            for dst in [self.sender, self.receiver] {
                let d = Datagram::new(self.me, dst, probe.encode(64));
                self.out.push_back(Transmit::at(now, d));
            }
            self.injected += 1;
            self.next_inject = now + ms(100);
        }
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.out.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        (self.injected < 10).then_some(self.next_inject)
    }
}

#[test]
fn middlebox_delays_drops_duplicates_and_injects() {
    let me: SocketAddr = format!("{MIDDLE_IP}:9").parse().unwrap();
    let impair = Impair {
        me,
        sender: addr(SENDER),
        receiver: addr(RECEIVER),
        out: VecDeque::new(),
        next_inject: Time::from_millis(100),
        injected: 0,
        seen: [0, 0],
        for_me: 0,
    };
    let source = CbrSource::new(addr(SENDER), addr(RECEIVER), 100, ms(10), 100);
    let hop = HopConfig::symmetric(LinkConfig::delay_only(ms(5)));
    let spec = two_hop_chain(
        source,
        Sink::echoing(),
        MiddleSpec::with_middlebox("impair", impair).with_addr(me.ip()),
        hop.clone(),
        hop,
    );
    let mut sim = Simulator::new(Seed::new(5));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(5));

    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    let data: Vec<_> = sink
        .arrivals()
        .iter()
        .filter(|a| a.src == addr(SENDER))
        .collect();
    let count = |s: u64| data.iter().filter(|a| a.probe.unwrap().seq == s).count();
    for seq in 0..100u64 {
        let expected = match seq % 10 {
            3 => 0,
            7 => 2,
            _ => 1,
        };
        assert_eq!(count(seq), expected, "seq {seq}");
    }
    for a in &data {
        let seq = a.probe.unwrap().seq;
        let delay = a.one_way_delay().unwrap();
        let expected = if seq % 10 == 5 { ms(35) } else { ms(10) };
        assert_eq!(delay, expected, "seq {seq}");
    }
    // Reordered: seq 5 (sent at 50 ms, arrives at 85 ms) comes after seq 7
    // (sent at 70 ms, arrives at 80 ms).
    let pos = |s: u64| data.iter().position(|a| a.probe.unwrap().seq == s).unwrap();
    assert!(pos(5) > pos(7));

    // Injected datagrams reach both ends from the middlebox's address, at
    // 100, 200, … ms plus one 5 ms hop.
    let injected_at_receiver: Vec<Time> = sink
        .arrivals()
        .iter()
        .filter(|a| a.src == me)
        .map(|a| a.at)
        .collect();
    let expected: Vec<Time> = (1..=10).map(|i| Time::from_millis(100 * i + 5)).collect();
    assert_eq!(injected_at_receiver, expected);
    let source = sim.host::<CbrSource>(chain.sender).unwrap();
    let injected_at_sender = source.received().iter().filter(|a| a.src == me).count();
    assert_eq!(injected_at_sender, 10);
    // The sender got an ACK for every data datagram the receiver got; the
    // receiver's echoes of the injected datagrams went to the middlebox.
    let acks = source
        .received()
        .iter()
        .filter(|a| a.src == addr(RECEIVER))
        .count();
    assert_eq!(acks, data.len());
    let mb = sim.middlebox::<Impair>(chain.middles[0]).unwrap();
    assert_eq!(mb.seen[0], 100);
    assert_eq!(mb.seen[1] as usize, data.len() + 10);
    assert_eq!(mb.for_me, 10);
    assert_eq!(sim.stats().unroutable + sim.stats().not_for_node, 0);
}

/// Pings each end every 50 ms from its own address and records the round
/// trips; forwards everything else.
struct Pinger {
    me: SocketAddr,
    ends: [SocketAddr; 2],
    out: VecDeque<Transmit>,
    next: Time,
    seq: u16,
    sent: Vec<Time>,
    rtts: Vec<(u16, std::time::Duration)>,
}

impl Middlebox for Pinger {
    fn handle_datagram(&mut self, now: Time, _from: Interface, d: Datagram) {
        match d.protocol {
            Protocol::EchoReply { id: 77, seq } if d.dst.ip() == self.me.ip() => {
                self.rtts.push((seq, now - self.sent[usize::from(seq)]));
            }
            _ => self.out.push_back(Transmit::at(now, d)),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if now >= self.next && self.seq < 10 {
            let end = self.ends[usize::from(self.seq % 2)];
            let ping = Datagram::echo_request(self.me.ip(), end.ip(), 77, self.seq, vec![0; 56]);
            self.out.push_back(Transmit::at(now, ping));
            self.sent.push(now);
            self.seq += 1;
            self.next = now + ms(50);
        }
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<Transmit> {
        self.out.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        (self.seq < 10).then_some(self.next)
    }
}

#[test]
fn hosts_answer_a_middleboxs_pings_and_their_engines_see_only_udp() {
    let me: SocketAddr = format!("{MIDDLE_IP}:0").parse().unwrap();
    let pinger = Pinger {
        me,
        ends: [addr(SENDER), addr(RECEIVER)],
        out: VecDeque::new(),
        next: Time::from_millis(10),
        seq: 0,
        sent: Vec::new(),
        rtts: Vec::new(),
    };
    let source = CbrSource::new(addr(SENDER), addr(RECEIVER), 100, ms(10), 50);
    let spec = two_hop_chain(
        source,
        Sink::echoing(),
        MiddleSpec::with_middlebox("pinger", pinger).with_addr(me.ip()),
        HopConfig::symmetric(LinkConfig::delay_only(ms(3))),
        HopConfig::symmetric(LinkConfig::delay_only(ms(7))),
    );
    let mut sim = Simulator::new(Seed::new(1));
    let chain = sim.add_chain(spec).unwrap();
    let capture = sim.capture(chain.hops[1].forward, CapturePoint::Delivered);
    sim.run_until(Time::from_secs(2));
    let pinger = sim.middlebox::<Pinger>(chain.middles[0]).unwrap();
    // Sender (3 ms away) on even sequence numbers, receiver (7 ms) on odd.
    let expected: Vec<(u16, std::time::Duration)> = (0..10)
        .map(|seq| (seq, ms(if seq % 2 == 0 { 6 } else { 14 })))
        .collect();
    assert_eq!(pinger.rtts, expected);
    assert_eq!(sim.stats().echo_replies, 10);
    // The hosts' engines got their UDP only.
    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    assert_eq!(sink.arrivals().len(), 50);
    let source = sim.host::<CbrSource>(chain.sender).unwrap();
    assert_eq!(source.received().len(), 50);
    // The capture shows the pings as ICMP echo requests.
    let pcap = sim.take_capture(capture).unwrap();
    let mut reader = pcap_file::pcap::PcapReader::new(&pcap[..]).unwrap();
    let mut pings = 0;
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap();
        let sliced = etherparse::SlicedPacket::from_ethernet(&packet.data).unwrap();
        if let Some(etherparse::TransportSlice::Icmpv4(icmp)) = sliced.transport {
            assert!(matches!(
                icmp.icmp_type(),
                etherparse::Icmpv4Type::EchoRequest(_)
            ));
            pings += 1;
        }
    }
    assert_eq!(pings, 5);
}
