//! Sidekick's scenario 1 end to end in the simulator: low-latency media
//! over a lossy near hop, with the proxy engine on the middle node and the
//! sender engine beside the media sender. The quACKs let the sender resend
//! a lost packet about one near-hop RTT after it was sent, instead of one
//! end-to-end RTT, so the tail of the de-jitter delay shrinks.

use netsim::*;
use quack::F32;
use quic::{MediaConfig, MediaReceiver, MediaSender};
use sidekick::wire::Interval;
use sidekick::{ProxyConfig, SenderConfig, SidekickHost, SidekickProxy};
use std::net::SocketAddr;
use std::time::Duration;

const SENDER: &str = "10.0.2.10:5000";
const RECEIVER: &str = "10.0.1.10:5123";
const PROXY: &str = "10.0.2.1:1234";

struct Outcome {
    p99: Duration,
    played: u32,
    proxy: Option<sidekick::ProxyStats>,
    sender: sidekick::SenderStats,
}

/// 60 s of media at `loss` on the near hop (both directions), RED queues
/// as in the paper's setup; with a sidekick (quACK every 2 packets, t = 8)
/// or end-to-end NACKs only.
fn run(seed: u64, loss: f64, with_sidekick: bool) -> Outcome {
    let (s, r, p): (SocketAddr, SocketAddr, SocketAddr) = (
        SENDER.parse().unwrap(),
        RECEIVER.parse().unwrap(),
        PROXY.parse().unwrap(),
    );
    let config = MediaConfig::new(Seed::new(seed)).with_duration(Duration::from_secs(60));
    let media = MediaSender::new(config.clone(), s, r);
    let receiver = MediaReceiver::new(config, r, s);
    let red = |rate| RedConfig::new(260_000, rate).with_adaptive(true);
    let near = LinkConfig::constant(Duration::from_millis(1), Rate::from_mbps(100))
        .with_red(red(Rate::from_mbps(100)))
        .with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
    let far = LinkConfig::constant(Duration::from_millis(25), Rate::from_mbps(10))
        .with_red(red(Rate::from_mbps(10)));
    // Media packets are 20 ms apart: waiting for three later packets before
    // declaring a loss (the bulk default) would take longer than the
    // end-to-end NACK. Like the authors' media client, resend as soon as
    // one later packet has arrived.
    let mut sender_config = SenderConfig::new(Interval::Packets(2), 8);
    sender_config.reorder_threshold = 1;
    let (sender, middle) = if with_sidekick {
        let host = SidekickHost::<_, F32>::new(media, sender_config, Seed::new(seed));
        let proxy = SidekickProxy::new(ProxyConfig::new(p, Seed::new(seed)));
        (
            HostSpec::new("sender", s.ip(), host),
            MiddleSpec::with_middlebox("proxy", proxy).with_addr(p.ip()),
        )
    } else {
        (
            HostSpec::new("sender", s.ip(), media),
            MiddleSpec::forwarder("router"),
        )
    };
    let spec = ChainSpec::new(sender, HostSpec::new("receiver", r.ip(), receiver))
        .hop(HopConfig::symmetric(near))
        .middle(middle)
        .hop(HopConfig::symmetric(far));
    let mut sim = Simulator::new(Seed::new(seed));
    let chain = sim.add_chain(spec).unwrap();
    sim.run_until(Time::from_secs(90));
    let receiver = sim.host::<MediaReceiver>(chain.receiver).unwrap();
    let (proxy, sender) = match sim.host::<SidekickHost<MediaSender, F32>>(chain.sender) {
        Some(host) => (
            sim.middlebox::<SidekickProxy>(chain.middles[0])
                .map(|p| *p.stats()),
            host.stats(),
        ),
        None => (None, Default::default()),
    };
    Outcome {
        p99: receiver.summary().p99,
        played: receiver.played(),
        proxy,
        sender,
    }
}

#[test]
fn quacks_cut_the_tail_of_the_dejitter_delay() {
    for seed in 1..=3 {
        let e2e = run(seed, 0.036, false);
        let side = run(seed, 0.036, true);
        eprintln!(
            "seed {seed}: p99 end to end {:?}, with sidekick {:?}; proxy {:?}; sender {:?}",
            e2e.p99, side.p99, side.proxy, side.sender
        );
        assert_eq!(side.played, e2e.played, "every packet is played either way");
        assert!(
            e2e.p99 >= Duration::from_millis(45),
            "e2e p99 {:?}",
            e2e.p99
        );
        assert!(
            side.p99 <= Duration::from_millis(25),
            "sidekick p99 {:?}",
            side.p99
        );
        let proxy = side.proxy.expect("the proxy ran");
        assert_eq!(proxy.replies, 1);
        assert!(proxy.quacks > 1000, "{proxy:?}");
        assert!(side.sender.retransmitted > 0, "{:?}", side.sender);
    }
}
