//! Per-packet cost of the tunnel's encapsulation and decapsulation, the
//! work the tunnel adds to every inner packet beside the QUIC connection's
//! own (encryption, framing), which is noq-proto's.
//!
//! `cargo bench -p pepkit-tunnel --bench encapsulation`. One iteration is
//! one 1200-byte inner packet:
//!
//! * `datagram_encode` / `datagram_decode`: the HTTP datagram prefix
//!   (quarter stream ID, context ID) of MDT, RMDT and TECC, into a fresh
//!   buffer / parsed back;
//! * `capsule_encode` / `capsule_decode`: MST's DATAGRAM capsule in an
//!   HTTP/3 DATA frame / parsed back by the frame and capsule readers;
//! * `forward_rewrite`: MFT's short-header virtual CID rewrite.

use divan::{Bencher, black_box};
use tunnel::wire::capsule::{self, CapsuleReader};
use tunnel::wire::h3::{self, FrameReader};
use tunnel::wire::{datagram, quic_header};

fn main() {
    divan::main();
}

fn packet() -> Vec<u8> {
    let mut p = vec![0x40];
    p.extend(std::iter::repeat_n(0x5a, 1199));
    p
}

#[divan::bench]
fn datagram_encode(bencher: Bencher<'_, '_>) {
    let inner = packet();
    bencher.bench_local(|| {
        let mut out = Vec::with_capacity(inner.len() + 8);
        datagram::encode(&mut out, black_box(4), &inner);
        out
    });
}

#[divan::bench]
fn datagram_decode(bencher: Bencher<'_, '_>) {
    let mut wire = Vec::new();
    datagram::encode(&mut wire, 4, &packet());
    bencher.bench_local(|| datagram::decode(black_box(&wire)).map(|d| d.payload.len()));
}

#[divan::bench]
fn capsule_encode(bencher: Bencher<'_, '_>) {
    let inner = packet();
    bencher.bench_local(|| {
        let mut capsules = Vec::with_capacity(inner.len() + 8);
        capsule::encode_datagram(&mut capsules, black_box(&inner));
        let mut frame = Vec::with_capacity(capsules.len() + 8);
        h3::write_data_header(&mut frame, capsules.len());
        frame.extend_from_slice(&capsules);
        frame
    });
}

#[divan::bench]
fn capsule_decode(bencher: Bencher<'_, '_>) {
    let mut capsules = Vec::new();
    capsule::encode_datagram(&mut capsules, &packet());
    let mut frame = Vec::new();
    h3::write_data_header(&mut frame, capsules.len());
    frame.extend_from_slice(&capsules);
    let (mut frames, mut reader) = (FrameReader::default(), CapsuleReader::default());
    let (mut events, mut out) = (Vec::new(), Vec::new());
    bencher.bench_local(|| {
        events.clear();
        out.clear();
        frames.push(black_box(&frame), &mut events).unwrap();
        for event in events.drain(..) {
            if let h3::FrameEvent::Data(bytes) = event {
                reader.push(&bytes, &mut out).unwrap();
            }
        }
        out.len()
    });
}

#[divan::bench]
fn forward_rewrite(bencher: Bencher<'_, '_>) {
    let inner = packet();
    let virtual_cid = [0x7e, 0xcc, 0x7a, 0x26, 0, 0, 0, 1];
    bencher.bench_local(|| quic_header::rewrite_short_dcid(black_box(&inner), 8, &virtual_cid));
}
