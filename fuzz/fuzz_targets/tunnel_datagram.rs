//! Parses arbitrary bytes as an HTTP datagram, as TECC's QUIC_INFO
//! feedback and as an inner QUIC packet's invariant header, and runs them
//! through both ends' QUIC-aware forwarding: nothing panics, and valid
//! feedback survives re-encoding (varints need not be in their shortest
//! form, so the bytes may differ).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tunnel::wire::{datagram, quic_header};
use tunnel::{ClientForwarding, Feedback, ServerForwarding};

fuzz_target!(|data: &[u8]| {
    if let Ok(http) = datagram::decode(data) {
        assert!(http.payload.len() < data.len());
    }
    if let Ok(Some(feedback)) = Feedback::from_quic_info(data) {
        let again = Feedback::from_quic_info(&feedback.to_quic_info());
        assert_eq!(again, Ok(Some(feedback)));
    }
    let _ = quic_header::parse(data);
    let mut client = ClientForwarding::default();
    let _ = client.outgoing(data);
    client.tunnelled(data);
    let _ = client.forwarded(data);
    let mut server = ServerForwarding::default();
    let mut next = 0;
    for capsule in client.take_capsules() {
        if let Some(reply) = server.on_capsule(&capsule, &mut next) {
            client.on_capsule(&reply);
        }
    }
    let _ = server.from_target(data);
    let _ = server.from_client(data);
});
