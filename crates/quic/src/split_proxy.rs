//! A split-connection proxy for QUIC ("split CUBIC", Sidekick appendix A):
//! a netsim [`Middlebox`] that terminates the client's QUIC connection and
//! relays its streams over a second QUIC connection of its own to the real
//! server, each leg with its own congestion controller.

use crate::app::{App, AppFactory};
use crate::certificate::TEST_SERVER_NAME;
use crate::config::QuicConfig;
use crate::endpoint::Core;
use crate::metrics::ConnRecord;
use crate::probe::InFlightGauge;
use crate::session::{Session, StreamId};
use crate::setup::EndpointSetup;
use bytes::{Buf, Bytes};
use netsim::{Datagram, Interface, Middlebox, Time, Transmit};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// The default bound of each relay buffer (per stream and direction).
pub const DEFAULT_RELAY_BUFFER: usize = 256 * 1024;

/// On a chain's middle node: the interface facing the client.
const CLIENT_SIDE: Interface = Interface(0);
/// On a chain's middle node: the interface facing the server.
const SERVER_SIDE: Interface = Interface(1);

/// One direction of one relayed stream.
#[derive(Debug, Default)]
struct Pipe {
    chunks: VecDeque<Bytes>,
    len: usize,
    /// The sender's FIN was read.
    fin_read: bool,
    /// The FIN was passed on.
    fin_sent: bool,
    /// Bytes passed on.
    relayed: u64,
}

impl Pipe {
    fn has_room(&self, limit: usize) -> bool {
        !self.fin_read && self.len < limit
    }

    /// Reads what the stream has into the pipe, if there is room.
    fn fill(&mut self, session: &mut Session<'_>, stream: StreamId, limit: usize) {
        if !self.has_room(limit) {
            return;
        }
        let (chunks, len) = (&mut self.chunks, &mut self.len);
        let read = session.read(stream, |data| {
            *len += data.len();
            chunks.push_back(Bytes::copy_from_slice(data));
        });
        if let Ok(status) = read
            && status.finished
        {
            self.fin_read = true;
        }
    }

    /// Writes what the pipe holds to the stream, then FIN when due.
    fn drain(&mut self, session: &mut Session<'_>, stream: StreamId) {
        while let Some(chunk) = self.chunks.front_mut() {
            match session.write_bytes(stream, chunk.clone()) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.len -= n;
                    self.relayed += n as u64;
                    if n == chunk.len() {
                        self.chunks.pop_front();
                    } else {
                        chunk.advance(n);
                    }
                }
            }
        }
        if self.chunks.is_empty() && self.fin_read && !self.fin_sent {
            self.fin_sent = session.finish(stream).is_ok();
        }
    }

    fn is_drained(&self) -> bool {
        self.chunks.is_empty()
    }
}

/// One stream pair: client → server and server → client.
#[derive(Debug, Default)]
struct StreamPair {
    up: Pipe,
    down: Pipe,
}

/// What the two legs of one client's connection share.
#[derive(Debug)]
struct Relay {
    limit: usize,
    streams: Vec<StreamPair>,
    front_closed: bool,
    back_closed: bool,
    /// The most bytes held at once, over all pipes.
    peak_buffered: usize,
}

impl Relay {
    fn buffered(&self) -> usize {
        self.streams.iter().map(|s| s.up.len + s.down.len).sum()
    }

    fn note_peak(&mut self) {
        self.peak_buffered = self.peak_buffered.max(self.buffered());
    }

    fn pair(&mut self, index: usize) -> &mut StreamPair {
        while self.streams.len() <= index {
            self.streams.push(StreamPair::default());
        }
        &mut self.streams[index]
    }

    /// Whether everything the relay held was passed on.
    fn is_drained(&self) -> bool {
        self.streams
            .iter()
            .all(|s| s.up.is_drained() && s.down.is_drained())
    }
}

type SharedRelay = Arc<Mutex<Relay>>;

fn lock(relay: &SharedRelay) -> MutexGuard<'_, Relay> {
    // Single-threaded: a poisoned lock means a panic already happened.
    relay.lock().unwrap_or_else(|e| e.into_inner())
}

/// The proxy's application on a front-leg (client-facing) connection.
pub(crate) struct FrontRelay {
    relay: SharedRelay,
    streams: Vec<StreamId>,
}

impl App for FrontRelay {
    fn drive(&mut self, session: &mut Session<'_>) {
        let mut relay = lock(&self.relay);
        if relay.back_closed && relay.is_drained() && !session.is_closed() {
            session.close(0, b"upstream closed");
            return;
        }
        while let Some(stream) = session.accept_bi() {
            self.streams.push(stream);
        }
        let limit = relay.limit;
        for (i, &stream) in self.streams.iter().enumerate() {
            let pair = relay.pair(i);
            pair.up.fill(session, stream, limit);
            pair.down.drain(session, stream);
        }
        relay.note_peak();
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// The proxy's application on a back-leg (server-facing) connection.
pub(crate) struct BackRelay {
    relay: SharedRelay,
    streams: Vec<StreamId>,
}

impl App for BackRelay {
    fn drive(&mut self, session: &mut Session<'_>) {
        let mut relay = lock(&self.relay);
        if relay.front_closed && relay.is_drained() && !session.is_closed() {
            session.close(0, b"downstream closed");
            return;
        }
        if !session.is_connected() {
            return;
        }
        while self.streams.len() < relay.streams.len() {
            match session.open_bi() {
                Some(stream) => self.streams.push(stream),
                None => break,
            }
        }
        let limit = relay.limit;
        for (i, &stream) in self.streams.iter().enumerate() {
            let pair = relay.pair(i);
            pair.up.drain(session, stream);
            pair.down.fill(session, stream, limit);
        }
        relay.note_peak();
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// Makes the front relay of each accepted connection and remembers it, so
/// the proxy can open the matching back leg.
struct FrontFactory {
    limit: usize,
    /// Relays made since the proxy last looked.
    made: Vec<SharedRelay>,
}

impl AppFactory for FrontFactory {
    type App = FrontRelay;

    fn make(&mut self) -> FrontRelay {
        let relay = Arc::new(Mutex::new(Relay {
            limit: self.limit,
            streams: Vec::new(),
            front_closed: false,
            back_closed: false,
            peak_buffered: 0,
        }));
        self.made.push(relay.clone());
        FrontRelay {
            relay,
            streams: Vec::new(),
        }
    }
}

/// One back leg: a client endpoint that speaks as the client's address.
struct BackLeg {
    core: Core<BackRelay>,
}

/// What the proxy relayed for one client connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitStats {
    /// The client's address.
    pub client: SocketAddr,
    /// Payload bytes relayed client → server, over all streams.
    pub up_bytes: u64,
    /// Payload bytes relayed server → client, over all streams.
    pub down_bytes: u64,
    /// The most bytes the relay held at once.
    pub peak_buffered: usize,
    /// Streams relayed.
    pub streams: usize,
}

/// A transparent split-connection QUIC proxy for one server address
/// ("split CUBIC" of Sidekick's appendix A, for QUIC): it terminates the
/// client's connection and relays its streams over a connection of its own
/// to the server, each leg with its own congestion controller. Put it on a
/// chain's middle node with `MiddleSpec::with_middlebox`; interface 0 must
/// face the clients and interface 1 the server.
///
/// # How it intercepts
///
/// Transparently, like the TCP PEP of the Sidekick paper (which intercepts
/// the SYN and "pretends to be the other side"): the proxy owns no address.
/// Every datagram that arrives from the client side (interface 0 of a chain's
/// middle node) addressed to the proxied server goes to the **front leg**, a
/// QUIC server endpoint whose local address *is* the server's address, so
/// the client's connection ends at the proxy without the client knowing.
/// For each client address the proxy opens a **back leg**, a QUIC client
/// endpoint whose local address *is* that client's address, to the real
/// server; the server's replies (arriving on interface 1, addressed to the
/// client) go to that back leg. Front-leg output leaves by interface 0 and
/// back-leg output by interface 1. Anything else is forwarded unchanged by
/// destination. Both legs are ordinary endpoints of this crate (the same
/// `Core` driver, seeded setup and real TLS 1.3 as [`crate::QuicClient`]
/// and [`crate::QuicServer`]); the front leg presents the crate's test
/// certificate, which the client pins, as a PEP holding the server's key
/// would.
///
/// # How it relays
///
/// Each bidirectional stream the client opens on the front leg is paired,
/// in order, with a bidirectional stream the proxy opens on the back leg;
/// bytes and FIN are relayed both ways. Unidirectional streams and
/// datagrams are not relayed. The relay buffer of each direction of each
/// stream is bounded ([`SplitProxy::with_buffer`]): a leg reads a stream
/// only while the buffer holds less than the limit, and data it does not
/// read is not credited back to the sender by QUIC flow control, so a slow
/// far leg pushes back on the near sender. A read takes everything the
/// stream has (the crate's `Session` reads whole), so a relay buffer holds
/// at most the limit plus one stream receive window (noq-proto's default,
/// 1.25 MB): about 1.5 MB measured with the default limit on a 10 MB
/// upload. On top of that, each leg's QUIC send buffer holds what it sent
/// until acknowledged.
///
/// Closing: when one leg's connection closes and the relay has passed on
/// everything it held, the proxy closes the other leg (application code 0).
/// This is a shortcut: bytes still in the other leg's send buffer, not yet
/// acknowledged, are abandoned (the bulk workload is safe: the server's FIN,
/// relayed before the client closes, shows it has read everything).
///
/// # Limits
///
/// One connection per client address (a second one from the same address
/// is accepted and closed at once), one proxied server address, no 0-RTT
/// (the back leg's handshake runs alongside the front's, starting when the
/// proxy accepts the client's connection).
///
/// # Determinism
///
/// The legs' random streams derive from the scenario seed with their own
/// labels (`split/front/<server>` and `split/back/<client>`), distinct from
/// the real endpoints' `quic/<addr>` labels.
pub struct SplitProxy {
    server: SocketAddr,
    front: Core<FrontRelay>,
    front_setup: EndpointSetup,
    front_config: QuicConfig,
    factory: FrontFactory,
    back_config: QuicConfig,
    backs: BTreeMap<SocketAddr, BackLeg>,
    /// Each client's relay, in order of arrival.
    relays: Vec<(SocketAddr, SharedRelay)>,
    outbox: VecDeque<Transmit>,
}

impl SplitProxy {
    /// A proxy for the server at `server`: the client-facing leg uses
    /// `front` (its congestion controller sends server → client data), the
    /// server-facing leg `back` (its controller sends client → server
    /// data). Give both the scenario seed.
    pub fn new(front: QuicConfig, back: QuicConfig, server: SocketAddr) -> SplitProxy {
        let front_setup = EndpointSetup::new(&front, &format!("split/front/{server}"));
        let mut core = Core::new(&front_setup, server, front.sample_interval);
        core.set_server_config(front_setup.server_config(&front, &InFlightGauge::default()));
        SplitProxy {
            server,
            front: core,
            front_setup,
            front_config: front,
            factory: FrontFactory {
                limit: DEFAULT_RELAY_BUFFER,
                made: Vec::new(),
            },
            back_config: back,
            backs: BTreeMap::new(),
            relays: Vec::new(),
            outbox: VecDeque::new(),
        }
    }

    /// Bound each relay buffer (per stream and direction) to `bytes`
    /// (default [`DEFAULT_RELAY_BUFFER`]).
    pub fn with_buffer(mut self, bytes: usize) -> SplitProxy {
        assert!(bytes > 0, "relay buffer must be positive");
        self.factory.limit = bytes;
        self
    }

    /// The proxied server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// How many client addresses it relays for.
    pub fn clients(&self) -> usize {
        self.backs.len()
    }

    /// Whether it relays for `client` already.
    pub fn relays_for(&self, client: SocketAddr) -> bool {
        self.backs.contains_key(&client)
    }

    /// The front-leg (client-facing) connections' records, in order of
    /// arrival.
    pub fn front_records(&self) -> impl Iterator<Item = &ConnRecord> + '_ {
        self.front.conns().map(|c| &c.record)
    }

    /// The back-leg (server-facing) connection's record for `client`.
    pub fn back_record(&self, client: SocketAddr) -> Option<&ConnRecord> {
        self.backs
            .get(&client)
            .and_then(|b| b.core.conns().next())
            .map(|c| &c.record)
    }

    /// What was relayed for each client connection, in order of arrival.
    pub fn stats(&self) -> Vec<SplitStats> {
        self.relays
            .iter()
            .map(|(client, relay)| {
                let relay = lock(relay);
                SplitStats {
                    client: *client,
                    up_bytes: relay.streams.iter().map(|s| s.up.relayed).sum(),
                    down_bytes: relay.streams.iter().map(|s| s.down.relayed).sum(),
                    peak_buffered: relay.peak_buffered,
                    streams: relay.streams.len(),
                }
            })
            .collect()
    }

    /// Opens the back leg of each newly accepted client connection.
    fn open_back_legs(&mut self, now: Time, client: SocketAddr) {
        let made = std::mem::take(&mut self.factory.made);
        if self.front.conns().count() != self.relays.len() + made.len() {
            // noq-proto refused the connection after its relay was made.
            return;
        }
        for relay in made {
            self.relays.push((client, relay.clone()));
            if self.backs.contains_key(&client) {
                // One back endpoint per client address; a second connection
                // from the same address is not supported: refuse to relay.
                lock(&relay).back_closed = true;
                continue;
            }
            let setup = EndpointSetup::new(&self.back_config, &format!("split/back/{client}"));
            let mut core = Core::new(&setup, client, self.back_config.sample_interval);
            let gauge = InFlightGauge::default();
            let config = setup.client_config(&self.back_config, &gauge);
            let app = BackRelay {
                relay,
                streams: Vec::new(),
            };
            if let Err(error) = core.connect(now, config, gauge, self.server, TEST_SERVER_NAME, app)
            {
                panic!("split proxy cannot connect to {}: {error}", self.server);
            }
            self.backs.insert(client, BackLeg { core });
        }
    }

    /// Lets each leg see what the other did: closures, and room or data in
    /// the relay buffers (a leg's application only runs on its own inputs,
    /// so poke it; `handle_timeout` fires only timers already due).
    fn cross_drive(&mut self, now: Time) {
        for (client, relay) in &self.relays {
            let back = self.backs.get(client).and_then(|b| b.core.conns().next());
            let mut relay = lock(relay);
            if back.is_some_and(|c| c.record.closed_at.is_some()) {
                relay.back_closed = true;
            }
        }
        let front_closed: Vec<bool> = self
            .front
            .conns()
            .map(|c| c.record.closed_at.is_some())
            .collect();
        for ((_, relay), closed) in self.relays.iter().zip(front_closed) {
            if closed {
                lock(relay).front_closed = true;
            }
        }
        for _ in 0..2 {
            self.front.handle_timeout(now);
            for back in self.backs.values_mut() {
                back.core.handle_timeout(now);
            }
        }
    }

    fn collect(&mut self, now: Time) {
        while let Some(d) = self.front.poll_transmit(now) {
            self.outbox.push_back(Transmit::at(now, d).via(CLIENT_SIDE));
        }
        for back in self.backs.values_mut() {
            while let Some(d) = back.core.poll_transmit(now) {
                self.outbox.push_back(Transmit::at(now, d).via(SERVER_SIDE));
            }
        }
    }
}

impl Middlebox for SplitProxy {
    fn handle_datagram(&mut self, now: Time, from: Interface, datagram: Datagram) {
        if from == CLIENT_SIDE && datagram.dst == self.server {
            let client = datagram.src;
            let (setup, config, factory) =
                (&self.front_setup, &self.front_config, &mut self.factory);
            let mut accept = || {
                let gauge = InFlightGauge::default();
                let server_config = setup.server_config(config, &gauge);
                Some((server_config, gauge, factory.make()))
            };
            self.front.handle_datagram(now, datagram, &mut accept);
            self.open_back_legs(now, client);
        } else if from == SERVER_SIDE
            && datagram.src == self.server
            && let Some(back) = self.backs.get_mut(&datagram.dst)
        {
            back.core.handle_datagram(now, datagram, &mut || None);
        } else {
            self.outbox.push_back(Transmit::at(now, datagram));
            return;
        }
        self.cross_drive(now);
        self.collect(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.front.handle_timeout(now);
        for back in self.backs.values_mut() {
            back.core.handle_timeout(now);
        }
        self.cross_drive(now);
        self.collect(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        if let Some(t) = self.outbox.pop_front() {
            return Some(t);
        }
        self.collect(now);
        self.outbox.pop_front()
    }

    fn poll_timeout(&mut self) -> Option<Time> {
        let backs = self.backs.values().filter_map(|b| b.core.poll_timeout());
        self.front.poll_timeout().into_iter().chain(backs).min()
    }
}

impl std::fmt::Debug for SplitProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitProxy")
            .field("server", &self.server)
            .field("clients", &self.backs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}
