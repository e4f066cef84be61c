//! Every mode's delivery semantics, end to end through the simulator:
//! what arrives, in which order, and how late, on a lossy access hop.

mod common;

use common::*;
use netsim::testing::{CbrSource, Sink};
use netsim::{LossModel, Probability, Seed, Time};
use std::time::Duration;
use tunnel::{Mode, TunnelClientHost, TunnelServer, TunnelSettings};

/// 2000 probes of 1000 bytes every 2 ms (4 Mbit/s) from the client through
/// the tunnel to a sink, with `loss` on the access hop (client → tunnel
/// server only). Returns the sequence numbers in arrival order with their
/// one-way delays, and the tunnel client host.
/// What a test reads of the tunnel client.
struct ClientView {
    stats: tunnel::ClientStats,
    loss_log: Vec<u64>,
}

fn summary(client: &TunnelClientHost<CbrSource>) -> ClientView {
    ClientView {
        stats: client.stats(),
        loss_log: client
            .app_ref()
            .and_then(|app| app.sender().loss_log())
            .unwrap_or_default()
            .to_vec(),
    }
}

fn probes(mode: Mode, loss: f64) -> (Vec<(u64, Duration)>, ClientView, Vec<tunnel::ServerStats>) {
    let mut settings = TunnelSettings::new(mode);
    settings.record_losses = true;
    probes_with(settings, loss)
}

fn probes_with(
    settings: TunnelSettings,
    loss: f64,
) -> (Vec<(u64, Duration)>, ClientView, Vec<tunnel::ServerStats>) {
    let seed = Seed::new(3);
    let source = CbrSource::new(
        addr(CLIENT),
        addr(SERVER),
        1000,
        Duration::from_millis(2),
        2000,
    )
    .with_linger(Duration::from_secs(3));
    let client = wrap(source, seed, &settings);
    let forward = link(10, 20).with_loss(LossModel::Bernoulli(Probability::new(loss).unwrap()));
    let access = netsim::HopConfig::new(forward, link(10, 20));
    let (mut sim, chain) = {
        let spec = netsim::ChainSpec::new(
            netsim::HostSpec::boxed("client", addr(CLIENT).ip(), Box::new(client)),
            netsim::HostSpec::boxed("server", addr(SERVER).ip(), Box::new(Sink::new())),
        )
        .hop(access)
        .middle(
            netsim::MiddleSpec::with_boxed("tunnel", Box::new(server(seed, &settings)))
                .with_addr(addr(PROXY).ip()),
        )
        .hop(netsim::HopConfig::symmetric(link(5, 100)));
        let mut sim = netsim::Simulator::new(seed);
        let chain = sim.add_chain(spec).unwrap();
        (sim, chain)
    };
    sim.run_until(Time::from_secs(30));
    let sink = sim.host::<Sink>(chain.receiver).unwrap();
    let arrivals = sink
        .arrivals()
        .iter()
        .filter_map(|a| Some((a.probe?.seq, a.one_way_delay()?)))
        .collect();
    let client = sim
        .host::<TunnelClientHost<CbrSource>>(chain.sender)
        .unwrap();
    let middle = sim.middlebox::<TunnelServer>(chain.middles[0]).unwrap();
    (arrivals, summary(client), middle.stats())
}

fn sequence(arrivals: &[(u64, Duration)]) -> Vec<u64> {
    arrivals.iter().map(|(seq, _)| *seq).collect()
}

#[test]
fn lossless_every_mode_delivers_everything_in_order() {
    for mode in [
        Mode::Stream,
        Mode::StreamGroup(4),
        Mode::Datagram,
        Mode::RetransmittedDatagram,
        Mode::Forwarding,
    ] {
        let (arrivals, client, _) = probes(mode, 0.0);
        assert_eq!(
            sequence(&arrivals),
            (0..2000).collect::<Vec<_>>(),
            "{mode:?}: {:?}",
            client.stats
        );
    }
}

#[test]
fn datagram_mode_loses_what_the_link_drops_and_the_map_knows_which() {
    let (arrivals, client, _) = probes(Mode::Datagram, 0.05);
    let received: std::collections::BTreeSet<u64> = sequence(&arrivals).into_iter().collect();
    let missing: Vec<u64> = (0..2000).filter(|s| !received.contains(s)).collect();
    assert!(
        missing.len() > 50,
        "5% loss drops about 100: {}",
        missing.len()
    );
    // Ground truth: the probes that never arrived are exactly the
    // datagrams whose packets the tunnel client's connection declared lost.
    let mut declared = client.loss_log.clone();
    declared.sort_unstable();
    assert_eq!(declared, missing);
    // Still in order: datagrams are never held back.
    assert!(sequence(&arrivals).windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn retransmitted_datagrams_recover_losses_out_of_order() {
    let (arrivals, client, _) = probes(Mode::RetransmittedDatagram, 0.05);
    let mut seqs = sequence(&arrivals);
    let stats = client.stats.sender;
    assert!(
        stats.retransmitted >= stats.lost - stats.dropped,
        "{stats:?}"
    );
    let reordered = seqs.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(reordered > 10, "recovered packets arrive late: {reordered}");
    // A repair takes a round trip to detect the loss and the repair's own
    // (the access hop's RTT is 20 ms), and holds a probe back by less than
    // it takes: TECC's feedback reports the largest of the latest 64.
    let latest = arrivals.iter().map(|(_, delay)| *delay).max().unwrap();
    let held = latest - Duration::from_millis(10);
    assert!(stats.repair_delay >= Duration::from_millis(40), "{stats:?}");
    assert!(stats.repair_delay >= held, "{held:?}: {stats:?}");
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs, (0..2000).collect::<Vec<_>>(), "{stats:?}");
}

#[test]
fn stream_mode_is_reliable_in_order_and_blocks_behind_a_loss() {
    let (lossy, _, _) = probes(Mode::Stream, 0.05);
    assert_eq!(sequence(&lossy), (0..2000).collect::<Vec<_>>());
    let (datagram, _, _) = probes(Mode::RetransmittedDatagram, 0.05);
    // Head-of-line blocking: every packet behind a loss waits for its
    // retransmission, so many more packets are late than were lost.
    let late = |arrivals: &[(u64, Duration)]| {
        arrivals
            .iter()
            .filter(|(_, delay)| *delay > Duration::from_millis(35))
            .count()
    };
    let (stream_late, datagram_late) = (late(&lossy), late(&datagram));
    assert!(
        stream_late > 2 * datagram_late,
        "MST late packets {stream_late}, RMDT {datagram_late}"
    );
}

/// TECC's feedback travels as HTTP datagrams (context 1) ahead of the
/// tunnel's queue: each one the server sends reaches the tunnel client on
/// a clean path, and none is counted (or resent) as a tunnel datagram.
#[test]
fn feedback_goes_as_control_datagrams() {
    let mut settings = TunnelSettings::new(Mode::RetransmittedDatagram);
    settings.feedback = true;
    let (_, client, server) = probes_with(settings, 0.0);
    let sent = server[0].feedback;
    assert!(sent > 50, "{sent} feedbacks in 30 s");
    assert!(client.stats.feedback + 1 >= sent, "{:?}", client.stats);
    assert_eq!(client.stats.feedback_datagrams, client.stats.feedback);
    assert_eq!(
        server[0].sender.sent, 0,
        "control datagrams are not counted"
    );
}
