//! A hostile or broken tunnel client against the tunnel server: malformed
//! HTTP/3, oversized frames, requests for targets off the allow-list and a
//! flood of request streams. The server never panics, closes the
//! offender's connection (or refuses its request), keeps serving others,
//! and never sends to a target it was not allowed.

mod common;

use common::*;
use netsim::{Datagram, Host, Seed, Time};
use quic::{App, EmbeddedEndpoint, Session, StreamId};
use tunnel::wire::{h3, varint};
use tunnel::{Mode, TunnelServer, TunnelSettings};

/// What the hostile client writes on each stream it opens.
#[derive(Clone)]
struct Hostile {
    payload: Vec<u8>,
    streams: usize,
    opened: Vec<StreamId>,
}

impl App for Hostile {
    fn drive(&mut self, session: &mut Session<'_>) {
        if !session.is_connected() {
            return;
        }
        while self.opened.len() < self.streams {
            let Some(id) = session.open_bi() else {
                break;
            };
            let _ = session.write(id, &self.payload);
            self.opened.push(id);
        }
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// A host running one hostile connection to the tunnel server.
struct HostileHost {
    endpoint: EmbeddedEndpoint<Hostile>,
    app: Option<Hostile>,
}

impl HostileHost {
    fn start(&mut self, now: Time) {
        if let Some(app) = self.app.take() {
            self.endpoint.connect(now, addr(PROXY), app).unwrap();
        }
    }
}

impl Host for HostileHost {
    fn handle_datagram(&mut self, now: Time, datagram: Datagram) {
        self.start(now);
        self.endpoint.handle_datagram(now, datagram, &mut || None);
    }
    fn handle_timeout(&mut self, now: Time) {
        self.start(now);
        if self.endpoint.poll_timeout().is_some_and(|at| at <= now) {
            self.endpoint.handle_timeout(now);
        }
    }
    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        self.start(now);
        self.endpoint.poll_transmit(now)
    }
    fn poll_timeout(&mut self) -> Option<Time> {
        if self.app.is_some() {
            return Some(Time::ZERO);
        }
        self.endpoint.poll_timeout()
    }
    fn is_finished(&self) -> bool {
        false
    }
}

/// Runs the hostile client against the server for 3 s; the server's
/// per-connection counters and errors.
fn attack(payload: Vec<u8>, streams: usize) -> (Vec<tunnel::ServerStats>, Vec<Option<String>>) {
    let seed = Seed::new(9);
    let host = HostileHost {
        endpoint: EmbeddedEndpoint::new(outer(seed), addr(TUNNEL_CLIENT), "hostile"),
        app: Some(Hostile {
            payload,
            streams,
            opened: Vec::new(),
        }),
    };
    let settings = TunnelSettings::new(Mode::Datagram);
    let (mut sim, chain) = chain(
        seed,
        Box::new(host),
        Box::new(netsim::testing::Sink::new()),
        server(seed, &settings),
        link(10, 20),
        link(10, 100),
    );
    sim.run_until(Time::from_secs(3));
    let sink = sim.host::<netsim::testing::Sink>(chain.receiver).unwrap();
    assert!(sink.arrivals().is_empty(), "nothing may reach the target");
    let server = sim.middlebox::<TunnelServer>(chain.middles[0]).unwrap();
    (server.stats(), server.errors())
}

fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    h3::write_frame(&mut out, kind, payload);
    out
}

#[test]
fn malformed_and_hostile_requests_never_break_the_server() {
    let mut oversized = Vec::new();
    varint::write(&mut oversized, h3::HEADERS);
    varint::write(&mut oversized, 1 << 40);
    let cases = [
        ("an HTTP/2 frame type", frame(0x02, b""), "HTTP/2 frame"),
        (
            "an oversized HEADERS frame",
            oversized,
            "too large: HTTP/3 frame",
        ),
        ("garbage QPACK", frame(h3::HEADERS, &[0xff; 64]), "QPACK"),
        (
            "a dynamic-table reference",
            frame(h3::HEADERS, &[0x05, 0x00, 0x80]),
            "dynamic table",
        ),
        (
            "DATA before HEADERS",
            frame(h3::DATA, &[0u8; 100]),
            "DATA before HEADERS",
        ),
    ];
    for (what, payload, reason) in cases {
        let (stats, errors) = attack(payload, 1);
        assert_eq!(stats.len(), 1, "{what}");
        assert_eq!(stats[0].tunnels, 0, "{what}");
        let error = errors[0].as_deref().unwrap_or_default();
        assert!(error.contains(reason), "{what}: closed with {error:?}");
    }
}

#[test]
fn a_flood_of_requests_for_a_forbidden_target_is_refused_within_bounds() {
    let forbidden: std::net::SocketAddr = "10.0.1.99:53".parse().unwrap();
    let fields =
        tunnel::connect_udp::request_fields(&tunnel::UriTemplate::default(), PROXY, forbidden, &[]);
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let mut section = Vec::new();
    tunnel::wire::qpack::encode(&pairs, &mut section);
    let (stats, errors) = attack(frame(h3::HEADERS, &section), 90);
    assert_eq!(stats[0].tunnels, 0);
    // Every request is answered with 403 and its stream finished, so the
    // connection stays up (the pending list never fills).
    assert_eq!(stats[0].forbidden, 90, "{:?} {:?}", stats[0], errors[0]);
    assert_eq!(errors[0], None);
    assert_eq!(stats[0].to_targets, 0);
}
