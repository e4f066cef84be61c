//! What both tunnel ends do alike: build their datagram sender from the
//! settings, put an inner packet into the tunnel by the mode, and the
//! outer QUIC connection's configuration.

use crate::h3::RequestStream;
use crate::mode::TunnelSettings;
use crate::sender::DatagramSender;
use crate::wire::{capsule, datagram};
use bytes::Bytes;
use quic::QuicConfig;
use std::time::Duration;

/// The datagram sender the settings ask for.
pub(crate) fn sender(settings: &TunnelSettings) -> DatagramSender {
    let sender = DatagramSender::new(
        settings.mode.retransmits(),
        settings.max_retransmissions,
        settings.queue_limit,
    );
    if settings.record_losses {
        sender.with_loss_log()
    } else {
        sender
    }
}

/// One inner packet into a tunnel whose CONNECT stream is `streams[0]`:
/// an HTTP datagram for the sender in the datagram modes, else a DATAGRAM
/// capsule on the next stream of the group, round robin (`next`).
pub(crate) fn encapsulate(
    settings: &TunnelSettings,
    packet: &[u8],
    sender: &mut DatagramSender,
    streams: &mut [RequestStream],
    next: &mut usize,
) {
    let mut out = Vec::with_capacity(packet.len() + 8);
    if settings.mode.uses_datagrams() {
        datagram::encode(&mut out, streams[0].id.id(), packet);
        sender.push(Bytes::from(out));
    } else {
        capsule::encode_datagram(&mut out, packet);
        let index = *next % streams.len();
        *next += 1;
        streams[index].send_capsules(&out);
    }
}

/// Packets forwarded beside the tunnel (MFT), summed over tunnels.
pub(crate) fn sum_forwarded(counts: impl Iterator<Item = (u64, u64)>) -> (u64, u64) {
    counts.fold((0, 0), |acc, (a, b)| (acc.0 + a, acc.1 + b))
}

/// The tunnel connection's QUIC configuration, from `base` (seed and
/// controller): ALPN `h3`, UDP payloads of `outer_payload` bytes (an inner
/// 1200-byte packet plus the outer headers needs about 1250), the packet
/// log RMDT maps datagrams with, 64 MiB of flow-control credit, a datagram
/// buffer of a few packets (the tunnel keeps its own queue) and keep-alives
/// (QUIC-aware forwarding leaves the connection idle, draft §4.5).
pub fn outer_config(base: QuicConfig, outer_payload: u16) -> QuicConfig {
    base.with_alpn(b"h3")
        .with_max_udp_payload(outer_payload)
        .with_packet_log()
        .with_receive_window(64 << 20)
        .with_datagram_send_buffer(usize::from(outer_payload) * 4)
        .with_keep_alive(Duration::from_secs(5))
}
