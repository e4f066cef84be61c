//! The generator's side of the measurement: every flow set up with the
//! real protocol (discovery, configure, a quACK earned, a large quota),
//! then the load offered from a packet socket until the proxy thread is
//! done.

use super::{
    CONTROL_PORT, CapacityConfig, FLOW_PORT, GEN_IP, GEN_MAC, PROXY_CONTROL, PROXY_MAC, SINK, TICK,
};
use emu::driver::frame::write_ipv4_packet;
use emu::sys::SendBatch;
use emu::sys::frame_send::FrameSender;
use netsim::Datagram;
use sidekick::wire::{Config, Control, Discovery, Interval};
use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Receives one datagram on a socket with a read timeout.
fn recv(socket: &UdpSocket, buf: &mut [u8]) -> Option<usize> {
    socket.recv(buf).ok()
}

/// The generator thread: configures every flow with the real protocol,
/// then offers the load until the proxy thread is done. Returns the
/// achieved packets per second.
pub(super) fn generate(
    config: &CapacityConfig,
    warm: &AtomicBool,
    done: &AtomicBool,
) -> Result<f64, String> {
    let flows = bind_flows(config)?;
    let mut ids = Identifiers::new();
    let mut payload = vec![0u8; config.payload_len];
    payload[0] = 0x40; // a QUIC short header's fixed bit: never a marker
    for (i, (base, control)) in flows.iter().enumerate() {
        configure_flow(i, base, control, config, &mut payload, &mut ids)?;
    }
    // The load: prebuilt frames per flow, identifiers randomised per packet,
    // from a packet socket that receives nothing (one that did would take
    // a copy of every quACK arriving here, on the proxy thread's time).
    let socket = FrameSender::open("eth0", 4 << 20).map_err(|e| e.to_string())?;
    let templates = frame_templates(config, &payload);
    offer_load(config, &socket, &templates, &mut ids, warm, done)
}

/// Pseudorandom identifiers (xorshift64*), as QUIC's ciphertext is.
struct Identifiers(u64);

impl Identifiers {
    fn new() -> Identifiers {
        Identifiers(0x9e37_79b9_7f4a_7c15)
    }

    fn next_id(&mut self) -> u32 {
        let rng = &mut self.0;
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// Each flow's sockets: its data socket (from [`FLOW_PORT`] + i, connected
/// to the sink) and its control socket (from [`CONTROL_PORT`] + i).
fn bind_flows(config: &CapacityConfig) -> Result<Vec<(UdpSocket, UdpSocket)>, String> {
    let bind = |port: usize| -> Result<UdpSocket, String> {
        let port = u16::try_from(port).map_err(|e| e.to_string())?;
        let socket = UdpSocket::bind(SocketAddrV4::new(GEN_IP, port))
            .map_err(|e| format!("bind {GEN_IP}:{port}: {e}"))?;
        socket
            .set_read_timeout(Some(Duration::from_millis(300)))
            .map_err(|e| e.to_string())?;
        Ok(socket)
    };
    let mut flows = Vec::new();
    for i in 0..config.flows {
        let base = bind(usize::from(FLOW_PORT) + i)?;
        base.connect(SINK).map_err(|e| e.to_string())?;
        flows.push((base, bind(usize::from(CONTROL_PORT) + i)?));
    }
    Ok(flows)
}

/// Sends a configure message for `session` with `quota` to the proxy's
/// control address.
fn send_configure(
    control: &UdpSocket,
    config: &CapacityConfig,
    session: u64,
    quota: u32,
) -> io::Result<()> {
    let message = Control::Configure {
        session,
        config: Config {
            interval: Interval::Packets(config.interval_packets),
            threshold: config.threshold,
            id_bytes: 4,
            id_offset: 21,
            quota,
        },
    };
    control
        .send_to(&message.to_bytes(), SocketAddr::V4(PROXY_CONTROL))
        .map(drop)
}

/// Flow `i`'s discovery request, with retries; the session ID in the reply.
fn discover(i: usize, base: &UdpSocket, buf: &mut [u8]) -> Result<u64, String> {
    for _ in 0..3 {
        base.send(&Discovery::Request { nonce: i as u64 }.to_bytes())
            .map_err(|e| e.to_string())?;
        if let Some(n) = recv(base, buf)
            && let Ok(Discovery::Reply { session, .. }) = Discovery::parse(&buf[..n])
        {
            return Ok(session);
        }
    }
    Err(format!("flow {i}: no discovery reply"))
}

/// Sets flow `i` up with the real protocol: discovery, then a configure
/// message with the reply's ID (quota one), packets until a quACK comes,
/// then a large quota with the ID that came in it.
fn configure_flow(
    i: usize,
    base: &UdpSocket,
    control: &UdpSocket,
    config: &CapacityConfig,
    payload: &mut [u8],
    ids: &mut Identifiers,
) -> Result<(), String> {
    let mut buf = vec![0u8; 2048];
    let session = discover(i, base, &mut buf)?;
    for _ in 0..3 {
        send_configure(control, config, session, 1).map_err(|e| e.to_string())?;
        // Let the configure message reach the proxy first.
        std::thread::sleep(Duration::from_millis(2));
        for _ in 0..config.interval_packets {
            payload[21..25].copy_from_slice(&ids.next_id().to_be_bytes());
            base.send(payload).map_err(|e| e.to_string())?;
        }
        if let Some(n) = recv(control, &mut buf)
            && let Ok(Control::Quack { next_session, .. }) = Control::parse(&buf[..n])
        {
            send_configure(control, config, next_session, 1 << 20).map_err(|e| e.to_string())?;
            return Ok(());
        }
    }
    Err(format!("flow {i}: no quACK after configuring"))
}

/// One prebuilt Ethernet frame per flow, generator to proxy, carrying
/// `payload` to the sink without a UDP checksum.
fn frame_templates(config: &CapacityConfig, payload: &[u8]) -> Vec<Vec<u8>> {
    (0..config.flows)
        .map(|i| {
            let src = SocketAddr::V4(SocketAddrV4::new(GEN_IP, FLOW_PORT + i as u16));
            let datagram = Datagram::new(src, SocketAddr::V4(SINK), payload.to_vec());
            let mut packet = Vec::new();
            write_ipv4_packet(&datagram, &mut packet).expect("an IPv4 datagram");
            // No UDP checksum (allowed over IPv4): identifiers change per packet.
            packet[26..28].copy_from_slice(&[0, 0]);
            let mut frame = Vec::with_capacity(14 + packet.len());
            frame.extend_from_slice(&PROXY_MAC);
            frame.extend_from_slice(&GEN_MAC);
            frame.extend_from_slice(&0x0800u16.to_be_bytes());
            frame.extend_from_slice(&packet);
            frame
        })
        .collect()
}

/// Offers the load — a burst per [`TICK`], round robin over the flows'
/// `templates`, a fresh identifier in each frame — from when it raises
/// `warm` until `done` (or a bounded time); returns the packets per second
/// sent.
fn offer_load(
    config: &CapacityConfig,
    socket: &FrameSender,
    templates: &[Vec<u8>],
    ids: &mut Identifiers,
    warm: &AtomicBool,
    done: &AtomicBool,
) -> Result<f64, String> {
    let per_tick = (config.rate as usize / 1000).max(1);
    let mut burst: Vec<Vec<u8>> = vec![templates[0].clone(); per_tick];
    let mut batch = SendBatch::new(per_tick);
    // The identifier's place in a frame: Ethernet, IPv4, UDP, offset 21.
    let id_at = 14 + 20 + 8 + 21;
    warm.store(true, Ordering::Relaxed);
    let start = Instant::now();
    // Bounded: the phases, plus a margin.
    let limit = config.phase * (2 * config.rounds) + Duration::from_secs(10);
    let mut sent = 0u64;
    let mut flow = 0usize;
    let mut tick = 0u32;
    while !done.load(Ordering::Relaxed) && start.elapsed() < limit {
        for frame in &mut burst {
            frame.clear();
            frame.extend_from_slice(&templates[flow]);
            frame[id_at..id_at + 4].copy_from_slice(&ids.next_id().to_be_bytes());
            flow = (flow + 1) % templates.len();
        }
        sent += send_burst(socket, &burst, &mut batch)? as u64;
        tick += 1;
        let next = start + TICK * tick;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    Ok(sent as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

/// Sends a burst with as few `sendmmsg` calls as the socket takes; what a
/// full queue refuses is lost. Returns the frames sent.
fn send_burst(
    socket: &FrameSender,
    burst: &[Vec<u8>],
    batch: &mut SendBatch,
) -> Result<usize, String> {
    let mut offset = 0;
    while offset < burst.len() {
        let n = socket
            .send_frames(&burst[offset..], batch)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break; // the queue is full: the rest of this burst is lost
        }
        offset += n;
    }
    Ok(offset)
}
