//! A datagram channel hands what its endpoint receives to a receiver, in
//! order and stamped with the arrival time, when one is set
//! (`DatagramChannel::deliver_to`); otherwise it queues it.

use bytes::Bytes;
use netsim::*;
use quic::DatagramChannel;
use std::sync::{Arc, Mutex};

/// What a receiver got: each datagram with its arrival time.
type Received = Arc<Mutex<Vec<(Time, Bytes)>>>;

/// Sends `count` datagrams from the client to the server, one every 10 ms
/// during a download; returns the server's channel.
fn relay(count: u8, receiver: Option<Received>) -> DatagramChannel {
    let (client_channel, server_channel) = (DatagramChannel::default(), DatagramChannel::default());
    if let Some(received) = receiver {
        server_channel.deliver_to(move |at, data| received.lock().unwrap().push((at, data)));
    }
    let mut sim = quic::testing::datagram_pair(Seed::new(3), &client_channel, &server_channel);
    for i in 0..count {
        client_channel.send(Bytes::from(vec![i]));
        sim.run_until(Time::from_millis(210 + 10 * u64::from(i)));
    }
    sim.run_until(Time::from_millis(1000));
    server_channel
}

#[test]
fn a_receiver_takes_every_datagram_in_order_instead_of_the_queue() {
    let received = Arc::new(Mutex::new(Vec::new()));
    let channel = relay(20, Some(received.clone()));
    let mut queued = Vec::new();
    channel.take_received(&mut queued);
    assert!(queued.is_empty(), "{queued:?}");
    let received = received.lock().unwrap();
    let payloads: Vec<u8> = received.iter().map(|(_, data)| data[0]).collect();
    assert_eq!(payloads, (0..20).collect::<Vec<u8>>());
    // Each arrived one path delay (10 ms) or more after it was queued.
    for (i, (at, _)) in received.iter().enumerate() {
        assert!(*at >= Time::from_millis(210 + 10 * i as u64), "{i}: {at:?}");
    }
}

#[test]
fn without_a_receiver_the_datagrams_are_queued() {
    let channel = relay(5, None);
    let mut queued = Vec::new();
    channel.take_received(&mut queued);
    let payloads: Vec<u8> = queued.iter().map(|(_, data)| data[0]).collect();
    assert_eq!(payloads, vec![0, 1, 2, 3, 4]);
}
