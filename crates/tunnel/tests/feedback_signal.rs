//! The application server's side of TECC's feedback: each QUIC_INFO its
//! endpoint receives becomes `cc`'s tunnel-feedback signal, in order;
//! other datagrams and malformed ones become nothing.

use bytes::Bytes;
use cc::{Signal, Signals};
use netsim::*;
use quic::DatagramChannel;
use std::time::Duration;
use tunnel::Feedback;

#[test]
fn quic_info_datagrams_become_tunnel_feedback_signals() {
    let (client_channel, server_channel) = (DatagramChannel::default(), DatagramChannel::default());
    let signals = Signals::default();
    tunnel::deliver_feedback(&server_channel, signals.clone());
    let mut sim = quic::testing::datagram_pair(Seed::new(4), &client_channel, &server_channel);
    let feedback = |sequence| Feedback {
        sequence,
        ..Feedback::example()
    };
    let truncated = feedback(9).to_quic_info();
    for datagram in [
        feedback(1).to_quic_info(),
        b"not feedback".to_vec(),
        truncated[..truncated.len() - 1].to_vec(),
        feedback(2).to_quic_info(),
    ] {
        client_channel.send(Bytes::from(datagram));
        sim.run_until(sim.now() + Duration::from_millis(10));
    }
    sim.run_until(Time::from_millis(1000));
    let mut received = Vec::new();
    signals.drain_into(&mut received);
    assert_eq!(
        received,
        vec![
            Signal::TunnelFeedback(feedback(1).signal()),
            Signal::TunnelFeedback(feedback(2).signal()),
        ]
    );
    let mut queued = Vec::new();
    server_channel.take_received(&mut queued);
    assert!(queued.is_empty(), "{queued:?}");
}
