//! The sender engine against the proxy engine, wired by hand so that a test
//! can lose exactly the datagram it wants to.

use netsim::{Datagram, Interface, Middlebox, Seed, Time};
use quack::F32;
use sidekick::wire::Interval;
use sidekick::{ProxyConfig, SenderConfig, SenderEvent, SidekickProxy, SidekickSender};
use std::net::SocketAddr;
use std::time::Duration;

const SENDER: &str = "10.0.0.1:5000";
const RECEIVER: &str = "10.0.1.1:4433";
const PROXY: &str = "10.0.0.254:1234";

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

struct Pair {
    sender: SidekickSender<F32>,
    proxy: SidekickProxy,
    now: Time,
    next_id: u32,
    /// Drop the sender's next control message to the proxy.
    lose_next_control: bool,
    lost_controls: u32,
}

impl Pair {
    fn new() -> Pair {
        let config = SenderConfig::new(Interval::Packets(1), 8);
        let mut sender = SidekickSender::new(config, addr(SENDER), addr(RECEIVER), Seed::new(3));
        sender.start(Time::ZERO);
        let proxy = SidekickProxy::new(ProxyConfig::new(addr(PROXY), Seed::new(4)));
        let mut pair = Pair {
            sender,
            proxy,
            now: Time::ZERO,
            next_id: 1,
            lose_next_control: false,
            lost_controls: 0,
        };
        pair.exchange();
        pair
    }

    /// Moves datagrams between the engines until both are quiet.
    fn exchange(&mut self) {
        loop {
            let mut moved = false;
            while let Some(datagram) = self.sender.poll_transmit() {
                moved = true;
                if datagram.dst == addr(PROXY) && self.lose_next_control {
                    self.lose_next_control = false;
                    self.lost_controls += 1;
                    continue;
                }
                self.proxy.handle_datagram(self.now, Interface(0), datagram);
            }
            while let Some(transmit) = self.proxy.poll_transmit(self.now) {
                moved = true;
                let datagram = transmit.datagram;
                if datagram.src != addr(PROXY) && datagram.dst == addr(RECEIVER) {
                    continue; // forwarded base traffic: the receiver is not modelled
                }
                self.sender.on_received(self.now, &datagram);
            }
            if !moved {
                return;
            }
        }
    }

    /// The base connection sends one packet with a fresh identifier.
    fn send_packet(&mut self) {
        let mut payload = vec![0x40; 64];
        payload[21..25].copy_from_slice(&self.next_id.to_be_bytes());
        self.next_id += 1;
        let datagram = Datagram::new(addr(SENDER), addr(RECEIVER), payload);
        self.sender.on_sent(self.now, &datagram);
        self.proxy.handle_datagram(self.now, Interface(0), datagram);
        self.exchange();
    }

    /// The base connection sends a packet that is lost before the proxy.
    fn lose_packet(&mut self) {
        let mut payload = vec![0x40; 64];
        payload[21..25].copy_from_slice(&self.next_id.to_be_bytes());
        self.next_id += 1;
        let datagram = Datagram::new(addr(SENDER), addr(RECEIVER), payload);
        self.sender.on_sent(self.now, &datagram);
    }

    fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        loop {
            let next = [self.sender.poll_timeout(), self.proxy.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .filter(|&at| at <= end);
            let Some(at) = next else { break };
            self.now = self.now.max(at);
            if self.sender.poll_timeout().is_some_and(|t| t <= self.now) {
                self.sender.handle_timeout(self.now);
            }
            if self.proxy.poll_timeout().is_some_and(|t| t <= self.now) {
                self.proxy.handle_timeout(self.now);
            }
            self.exchange();
        }
        self.now = end;
    }

    fn quacks(&self) -> u64 {
        self.sender.stats().quacks
    }
}

#[test]
fn the_engines_agree_on_every_packet() {
    let mut pair = Pair::new();
    assert!(pair.sender.is_active());
    for _ in 0..50 {
        pair.send_packet();
        pair.advance(Duration::from_millis(1));
    }
    assert_eq!(pair.quacks(), 50);
    let events: Vec<SenderEvent> = std::iter::from_fn(|| pair.sender.poll_event()).collect();
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, SenderEvent::Lost { .. }))
    );
}

/// The proxy starts with a quota of one quACK. If the grant the sender
/// sends after that quACK is lost, the proxy can never quACK again, so the
/// sender must repeat the grant on its own.
#[test]
fn a_lost_grant_is_repeated() {
    let mut pair = Pair::new();
    pair.lose_next_control = true; // the grant that follows the first quACK
    pair.send_packet();
    assert_eq!(pair.quacks(), 1);
    assert_eq!(pair.lost_controls, 1);
    pair.send_packet();
    assert_eq!(pair.quacks(), 1, "no quota at the proxy");
    pair.advance(Duration::from_millis(300));
    for _ in 0..10 {
        pair.send_packet();
        pair.advance(Duration::from_millis(1));
    }
    assert_eq!(pair.quacks(), 11, "quACKs resumed after the repeated grant");
    assert!(pair.sender.stats().configures >= 3);
}

/// More losses than the threshold make the sender reset. If the reset is
/// lost, every later quACK carries the old epoch and is ignored, so the
/// sender must repeat the reset.
#[test]
fn a_lost_reset_is_repeated() {
    let mut pair = Pair::new();
    for _ in 0..5 {
        pair.send_packet();
        pair.advance(Duration::from_millis(1));
    }
    for _ in 0..12 {
        pair.lose_packet(); // t = 8: this quACK cannot be decoded
    }
    pair.lose_next_control = true; // the reset it triggers
    pair.send_packet();
    assert_eq!(pair.sender.stats().resets, 1);
    assert_eq!(pair.lost_controls, 1);
    let applied = pair.quacks();
    for _ in 0..5 {
        pair.send_packet();
        pair.advance(Duration::from_millis(1));
    }
    assert_eq!(pair.quacks(), applied, "stale quACKs are not applied");
    pair.advance(Duration::from_millis(250));
    for _ in 0..5 {
        pair.send_packet();
        pair.advance(Duration::from_millis(1));
    }
    assert!(pair.sender.stats().resets >= 2, "the reset was repeated");
    assert!(
        pair.quacks() >= applied + 5,
        "quACKs apply again after the repeated reset"
    );
}
