//! The driver shared by client and server: one `noq_proto::Endpoint`, its
//! connections and their applications, in virtual time.

use crate::app::App;
use crate::certificate::TEST_SERVER_NAME;
use crate::channel::DatagramChannel;
use crate::clock::SimClock;
use crate::clock::VirtualWallClock;
use crate::config::QuicConfig;
use crate::metrics::{ConnRecord, ConnStats, Sample};
use crate::probe::InFlightGauge;
use crate::session::Session;
use crate::setup::EndpointSetup;
use bytes::{Bytes, BytesMut};
use netsim::{Datagram, Rate, Time};
use noq_proto::{
    ClientConfig, ConnectionHandle, DatagramEvent, Endpoint, EndpointEvent, Event, FourTuple,
    Incoming, PathId, ServerConfig,
};
use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

/// The largest datagram [`Core::poll_transmit`] copies out of its send
/// buffer rather than hands over with it: an ACK-only packet is a few dozen
/// bytes in a buffer noq-proto sized for a whole MTU, and thousands of them
/// are in flight on a fast, long path.
const SMALL_DATAGRAM: usize = 256;

/// One connection with its application and records.
pub(crate) struct Conn<A> {
    handle: ConnectionHandle,
    conn: noq_proto::Connection,
    pub(crate) app: A,
    gauge: InFlightGauge,
    pub(crate) record: ConnRecord,
    next_sample: Option<Time>,
    drained: bool,
    /// Whether `record.stats` is behind the connection (see
    /// [`Core::refresh_stats`]).
    stats_stale: bool,
    /// An accepted handshake not yet complete, under [`HandshakeLimits`].
    handshake: Option<Handshake>,
}

/// Bounds on the handshakes a listening endpoint takes part in, so that a
/// flood of Initials (from spoofed sources, say) neither fills it with
/// connections that never complete nor makes it reflect more than it
/// receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandshakeLimits {
    /// With this many handshakes from unvalidated addresses under way, a
    /// new Initial without a valid token is answered with a Retry (address
    /// validation, RFC 9000 §8.1.2) instead of a handshake.
    pub retry_threshold: usize,
    /// A handshake not complete this long after its first Initial is given
    /// up silently, and the connection forgotten.
    pub timeout: Duration,
}

impl Default for HandshakeLimits {
    fn default() -> HandshakeLimits {
        HandshakeLimits {
            retry_threshold: 64,
            timeout: Duration::from_secs(10),
        }
    }
}

/// A handshake under [`HandshakeLimits`].
#[derive(Clone, Copy, Debug)]
struct Handshake {
    /// When it is given up.
    deadline: Time,
    /// Whether the client's address was not validated (no Retry token).
    unvalidated: bool,
}

/// A noq-proto endpoint driven in virtual time.
pub(crate) struct Core<A> {
    endpoint: Endpoint,
    wall: VirtualWallClock,
    local: std::net::SocketAddr,
    clock: SimClock,
    /// Connections by order of creation (noq-proto reuses handles of
    /// drained connections, so they do not key the records).
    conns: BTreeMap<u64, Conn<A>>,
    /// The sequence number of each live handle.
    live: BTreeMap<usize, u64>,
    next_seq: u64,
    /// Connections whose `record.stats` are behind (see
    /// [`Core::refresh_stats`]), each listed once.
    stale_stats: Vec<u64>,
    outbox: VecDeque<Datagram>,
    buf: Vec<u8>,
    sample_interval: Option<Duration>,
    /// Datagrams to and from something beside the endpoint.
    channel: Option<DatagramChannel>,
    /// Bounds on incoming handshakes; with them, connections whose
    /// handshake never completed are forgotten once drained.
    limits: Option<HandshakeLimits>,
    /// Handshakes under way from unvalidated addresses.
    unvalidated: usize,
    /// Connections closed since the owner last asked, by sequence number.
    closed: Vec<u64>,
    /// The connection the last datagram created, if it did.
    accepted: Option<u64>,
    /// Whether the last scan of the connections for something to send
    /// found nothing, and no connection was processed since.
    settled: bool,
    /// Whether the next scan can be skipped: since a scan found nothing,
    /// only Initials answered statelessly (a Retry or nothing, under a
    /// flood) arrived, which touch no connection.
    skip_scan: bool,
    /// Connections processed or given up since the endpoint began.
    activity: u64,
}

impl<A: App> Core<A> {
    pub(crate) fn new(
        setup: &EndpointSetup,
        local: std::net::SocketAddr,
        sample_interval: Option<Duration>,
    ) -> Core<A> {
        let endpoint = Endpoint::new(setup.endpoint.clone(), None, true);
        Core {
            endpoint,
            wall: setup.wall.clone(),
            local,
            clock: setup.clock,
            conns: BTreeMap::new(),
            live: BTreeMap::new(),
            next_seq: 0,
            stale_stats: Vec::new(),
            outbox: VecDeque::new(),
            buf: Vec::new(),
            sample_interval,
            channel: setup.channel.clone(),
            limits: None,
            unvalidated: 0,
            closed: Vec::new(),
            accepted: None,
            settled: false,
            skip_scan: false,
            activity: 0,
        }
    }

    /// Bounds the handshakes of incoming connections (see
    /// [`HandshakeLimits`]).
    pub(crate) fn limit_handshakes(&mut self, limits: HandshakeLimits) {
        self.limits = Some(limits);
    }

    /// Handshakes under way from unvalidated addresses.
    pub(crate) fn unvalidated_handshakes(&self) -> usize {
        self.unvalidated
    }

    /// Connections processed or given up since the endpoint began.
    pub(crate) fn activity(&self) -> u64 {
        self.activity
    }

    /// The connections closed since the last call, by sequence number.
    pub(crate) fn take_closed(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.closed)
    }

    /// The connection the last datagram created, if it did.
    pub(crate) fn take_accepted(&mut self) -> Option<u64> {
        self.accepted.take()
    }

    /// Lets the endpoint accept connections (the configuration used until
    /// a connection gets its own at accept time).
    pub(crate) fn set_server_config(&mut self, config: Arc<ServerConfig>) {
        self.endpoint.set_server_config(Some(config));
    }

    /// Queues a datagram the endpoint wrote into `buf` outside a
    /// connection (a stateless reset, Retry, refusal or version
    /// negotiation).
    fn queue_response(&mut self, transmit: &noq_proto::Transmit) {
        let payload = Bytes::copy_from_slice(&self.buf[..transmit.size]);
        self.outbox.push_back(Datagram::new(
            self.local_addr(),
            transmit.destination,
            payload,
        ));
    }

    fn local_addr(&self) -> std::net::SocketAddr {
        self.local
    }

    /// Starts a connection to `remote` running `app`.
    pub(crate) fn connect(
        &mut self,
        now: Time,
        config: ClientConfig,
        gauge: InFlightGauge,
        remote: std::net::SocketAddr,
        server_name: &str,
        app: A,
    ) -> Result<(), noq_proto::ConnectError> {
        self.wall.set(now);
        let (handle, conn) =
            self.endpoint
                .connect(self.clock.instant(now), config, remote, server_name)?;
        self.insert(now, handle, conn, gauge, app);
        self.process(now);
        Ok(())
    }

    /// Starts the endpoint's connection number `n` (its own initial CID,
    /// see [`EndpointSetup::client_config_numbered`]) to the test server at
    /// `remote`, running `app`, with a fresh gauge.
    pub(crate) fn connect_numbered(
        &mut self,
        now: Time,
        setup: &EndpointSetup,
        config: &QuicConfig,
        n: u64,
        remote: std::net::SocketAddr,
        app: A,
    ) -> Result<(), noq_proto::ConnectError> {
        let gauge = setup.gauge();
        let client_config = setup.client_config_numbered(config, &gauge, n);
        self.connect(now, client_config, gauge, remote, TEST_SERVER_NAME, app)
    }

    fn insert(
        &mut self,
        now: Time,
        handle: ConnectionHandle,
        conn: noq_proto::Connection,
        gauge: InFlightGauge,
        app: A,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.live.insert(handle.0, seq);
        self.conns.insert(
            seq,
            Conn {
                handle,
                conn,
                app,
                record: ConnRecord {
                    rtt: gauge.rtt().clone(),
                    ..ConnRecord::default()
                },
                gauge,
                next_sample: self
                    .sample_interval
                    .map(|interval| first_tick(now, interval)),
                drained: false,
                stats_stale: false,
                handshake: None,
            },
        );
    }

    /// A datagram arrived. `accept` makes the configuration, gauge and
    /// application of a new incoming connection (`None` refuses it).
    pub(crate) fn handle_datagram(
        &mut self,
        now: Time,
        datagram: Datagram,
        accept: &mut dyn FnMut() -> Option<(Arc<ServerConfig>, InFlightGauge, A)>,
    ) {
        self.catch_up_samples(now);
        self.wall.set(now);
        let instant = self.clock.instant(now);
        let path = FourTuple::new(datagram.src, Some(self.local_addr().ip()));
        // The simulator hands over the only reference to the payload, so it
        // becomes the receive buffer without a copy (noq-proto decrypts in
        // place); a payload shared elsewhere is copied.
        let data = datagram
            .payload
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        self.buf.clear();
        // At the threshold, a first Initial without a token gets its Retry
        // before its keys are derived (noq-proto's stateless Retry): the
        // same Retry the accept path sends, at a fraction of its cost.
        let retry = self
            .limits
            .is_some_and(|limits| self.unvalidated >= limits.retry_threshold);
        self.endpoint.set_stateless_retry(retry);
        match self
            .endpoint
            .handle(instant, path, None, data, &mut self.buf)
        {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                let seq = self.live.get(&handle.0).copied();
                if let Some(c) = seq.and_then(|seq| self.conns.get_mut(&seq)) {
                    c.conn.handle_event(event);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(now, incoming, accept),
            Some(DatagramEvent::Response(transmit)) => {
                self.queue_response(&transmit);
                if retry {
                    return self.touched_nothing();
                }
            }
            None if retry => return self.touched_nothing(),
            None => {}
        }
        self.process(now);
    }

    /// A datagram that touched no connection arrived under a flood (see
    /// [`Core::skip_scan`]): no connection is driven for it, and none is
    /// asked for something to send unless one was processed since.
    fn touched_nothing(&mut self) {
        self.skip_scan = self.settled;
    }

    fn accept(
        &mut self,
        now: Time,
        incoming: Incoming,
        accept: &mut dyn FnMut() -> Option<(Arc<ServerConfig>, InFlightGauge, A)>,
    ) {
        let instant = self.clock.instant(now);
        self.buf.clear();
        let validated = incoming.remote_address_validated();
        let mut incoming = incoming;
        if let Some(limits) = self.limits
            && !validated
            && self.unvalidated >= limits.retry_threshold
        {
            match self.endpoint.retry(incoming, &mut self.buf) {
                Ok(transmit) => {
                    self.queue_response(&transmit);
                    return;
                }
                // No source CID to retry with: handled as any other.
                Err(error) => incoming = error.into_incoming(),
            }
        }
        let Some((config, gauge, app)) = accept() else {
            let transmit = self.endpoint.refuse(incoming, &mut self.buf);
            self.queue_response(&transmit);
            return;
        };
        match self
            .endpoint
            .accept(incoming, instant, &mut self.buf, Some(config))
        {
            Ok((handle, conn)) => {
                let seq = self.next_seq;
                self.insert(now, handle, conn, gauge, app);
                self.accepted = Some(seq);
                if let (Some(limits), Some(c)) = (self.limits, self.conns.get_mut(&seq)) {
                    c.handshake = Some(Handshake {
                        deadline: now + limits.timeout,
                        unvalidated: !validated,
                    });
                    self.unvalidated += usize::from(!validated);
                }
            }
            Err(error) => {
                if let Some(transmit) = error.response {
                    self.queue_response(&transmit);
                }
            }
        }
    }

    /// Timers due by `now` fire.
    pub(crate) fn handle_timeout(&mut self, now: Time) {
        self.catch_up_samples(now);
        self.wall.set(now);
        let instant = self.clock.instant(now);
        for c in self.conns.values_mut().filter(|c| !c.drained) {
            if c.conn.poll_timeout().is_some_and(|t| t <= instant) {
                c.conn.handle_timeout(instant);
            }
        }
        self.give_up_handshakes(now);
        self.process(now);
    }

    /// Gives up the handshakes past their deadline: each connection is
    /// drained at once, without a packet (its peer never answered, or
    /// never finished), and forgotten.
    fn give_up_handshakes(&mut self, now: Time) {
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.drained && c.handshake.is_some_and(|h| h.deadline <= now))
            .map(|(&seq, _)| seq)
            .collect();
        for seq in late {
            let Some(mut c) = self.conns.remove(&seq) else {
                continue;
            };
            // Drained: the endpoint forgets its connection IDs and handle.
            let _ = self
                .endpoint
                .handle_event(c.handle, EndpointEvent::drained());
            self.live.remove(&c.handle.0);
            if c.handshake.take().is_some_and(|h| h.unvalidated) {
                self.unvalidated -= 1;
            }
            c.drained = true;
            self.closed.push(seq);
            self.activity += 1;
        }
    }

    /// Records the samples due by `now`, before an activation changes
    /// anything. A connection's state only changes when the endpoint is
    /// activated, so its state now is its state at every sampling instant
    /// since the last activation. Sampling this way needs no timer of its
    /// own: waking the endpoint just to sample would poll the state
    /// machine at extra instants, and noq-proto's pacer advances whenever
    /// it is polled, so observing a run would change it.
    fn catch_up_samples(&mut self, now: Time) {
        let Some(interval) = self.sample_interval else {
            return;
        };
        for c in self.conns.values_mut().filter(|c| !c.drained) {
            while let Some(at) = c.next_sample.filter(|&at| at <= now) {
                c.record.samples.push(sample(&mut c.conn, &c.gauge, at));
                c.next_sample = (!c.conn.is_closed()).then_some(at + interval);
            }
        }
    }

    /// The next datagram to send.
    pub(crate) fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        if let Some(d) = self.outbox.pop_front() {
            return Some(d);
        }
        if std::mem::take(&mut self.skip_scan) {
            return None;
        }
        let instant = self.clock.instant(now);
        let local = self.local_addr();
        let mut sent = None;
        for (&seq, c) in self.conns.iter_mut().filter(|(_, c)| !c.drained) {
            self.buf.clear();
            if let Some(transmit) = c
                .conn
                .poll_transmit(instant, NonZeroUsize::MIN, &mut self.buf)
            {
                c.record.first_tx.get_or_insert(now);
                let payload = if transmit.size <= SMALL_DATAGRAM {
                    // A small datagram (an ACK) gets a buffer of its own
                    // size, and the one noq-proto wrote it into (a whole
                    // MTU) serves the next poll.
                    Bytes::copy_from_slice(&self.buf[..transmit.size])
                } else {
                    // A large one keeps the buffer noq-proto wrote it into
                    // (no copy); the next poll starts a fresh one.
                    let mut payload = std::mem::take(&mut self.buf);
                    payload.truncate(transmit.size);
                    Bytes::from(payload)
                };
                sent = Some((seq, Datagram::new(local, transmit.destination, payload)));
                break;
            }
        }
        let Some((seq, datagram)) = sent else {
            // Nothing more to send: the end of this activation, when the
            // records must be up to date.
            self.refresh_stats();
            self.settled = true;
            return None;
        };
        self.process_one(now, seq);
        Some(datagram)
    }

    /// When the next connection timer is due; at once when datagrams wait
    /// on the channel and a connection can send them.
    pub(crate) fn poll_timeout(&self) -> Option<Time> {
        let open = || {
            self.conns
                .values()
                .any(|c| !c.drained && !c.conn.is_handshaking() && !c.conn.is_closed())
        };
        if self
            .channel
            .as_ref()
            .is_some_and(DatagramChannel::has_outgoing)
            && open()
        {
            return Some(Time::ZERO);
        }
        self.conns
            .values()
            .filter(|c| !c.drained)
            .flat_map(|c| {
                let timer = c.conn.poll_timeout().map(|i| self.clock.time(i));
                timer.into_iter().chain(c.handshake.map(|h| h.deadline))
            })
            .min()
    }

    /// The connections, in creation order.
    pub(crate) fn conns(&self) -> impl Iterator<Item = &Conn<A>> + '_ {
        self.conns.values()
    }

    /// The connections whose applications are still driven (neither
    /// closed nor drained), in creation order.
    pub(crate) fn live_conns(&self) -> impl Iterator<Item = &Conn<A>> + '_ {
        self.conns
            .values()
            .filter(|c| !c.drained && !c.conn.is_closed())
    }

    /// The connections, mutably, in creation order.
    pub(crate) fn conns_mut(&mut self) -> impl Iterator<Item = &mut Conn<A>> + '_ {
        self.conns.values_mut()
    }

    /// The connections with their sequence numbers, mutably, in creation
    /// order.
    pub(crate) fn conns_by_seq_mut(&mut self) -> impl Iterator<Item = (u64, &mut Conn<A>)> + '_ {
        self.conns.iter_mut().map(|(&seq, c)| (seq, c))
    }

    /// The connection with sequence number `seq`, mutably.
    pub(crate) fn conn_mut(&mut self, seq: u64) -> Option<&mut Conn<A>> {
        self.conns.get_mut(&seq)
    }

    /// Drives every live connection's application (its owner changed
    /// something it acts on).
    pub(crate) fn drive(&mut self, now: Time) {
        self.catch_up_samples(now);
        self.process(now);
    }

    /// Closes cleanly (application code 0) every open connection whose
    /// application is done.
    pub(crate) fn close_done(&mut self, now: Time) {
        let instant = self.clock.instant(now);
        let mut closed = false;
        for c in self
            .conns
            .values_mut()
            .filter(|c| !c.conn.is_closed() && c.app.is_done())
        {
            c.conn.close(
                instant,
                noq_proto::VarInt::from_u32(0),
                Bytes::from_static(b"done"),
            );
            closed = true;
        }
        if closed {
            self.process(now);
        }
    }

    /// Closes every connection cleanly (application code 0).
    pub(crate) fn close_all(&mut self, now: Time) {
        let instant = self.clock.instant(now);
        for c in self.conns.values_mut().filter(|c| !c.conn.is_closed()) {
            c.conn.close(
                instant,
                noq_proto::VarInt::from_u32(0),
                Bytes::from_static(b"done"),
            );
        }
        self.process(now);
    }

    /// Whether every connection is closed and everything queued was sent.
    pub(crate) fn all_closed(&self) -> bool {
        self.outbox.is_empty() && self.conns.values().all(|c| c.conn.is_closed())
    }

    /// Hands events between connections, endpoint and applications until
    /// nothing is left to do.
    fn process(&mut self, now: Time) {
        // In handle order, as iterating `live` would; `process_one` may
        // remove the current entry, so walk by key rather than hold an
        // iterator.
        let mut from = 0;
        while let Some((&handle, &seq)) = self.live.range(from..).next() {
            from = handle + 1;
            self.process_one(now, seq);
        }
        self.refresh_stats();
    }

    /// Brings `record.stats` up to date for the connections processed since
    /// the last refresh.
    ///
    /// Reading a connection's counters copies a few hundred bytes of
    /// noq-proto statistics, so it is done once per input and once when the
    /// endpoint has nothing more to send, not after every packet: the
    /// records are current whenever the simulator is between events, which
    /// is when anyone can read them.
    fn refresh_stats(&mut self) {
        for seq in self.stale_stats.drain(..) {
            if let Some(c) = self.conns.get_mut(&seq) {
                c.record.stats = stats(&c.conn);
                c.stats_stale = false;
            }
        }
    }

    fn process_one(&mut self, now: Time, seq: u64) {
        self.settled = false;
        self.skip_scan = false;
        self.activity += 1;
        let instant = self.clock.instant(now);
        let Some(c) = self.conns.get_mut(&seq) else {
            return;
        };
        if c.drained {
            return;
        }
        while let Some(event) = c.conn.poll_endpoint_events() {
            let drained = event.is_drained();
            if let Some(reply) = self.endpoint.handle_event(c.handle, event) {
                c.conn.handle_event(reply);
            }
            if drained {
                c.drained = true;
                c.next_sample = None;
                self.live.remove(&c.handle.0);
            }
        }
        while let Some(event) = c.conn.poll() {
            match event {
                Event::Connected => {
                    c.record.connected_at.get_or_insert(now);
                }
                Event::ConnectionLost { reason } => {
                    c.record.error.get_or_insert_with(|| reason.to_string());
                }
                _ => {}
            }
        }
        if let Some(channel) = &self.channel
            && !c.drained
        {
            channel.exchange(now, &mut c.conn);
        }
        if !c.drained && !c.conn.is_closed() {
            c.app
                .drive(&mut Session::new(&mut c.conn, now, instant, &c.gauge));
        }
        if c.conn.is_closed() && c.record.closed_at.is_none() {
            c.record.closed_at = Some(now);
            self.closed.push(seq);
        }
        let ended = c.drained || c.conn.is_closed() || !c.conn.is_handshaking();
        if ended && c.handshake.take().is_some_and(|h| h.unvalidated) {
            self.unvalidated -= 1;
        }
        if self.limits.is_some() && c.drained && c.record.connected_at.is_none() {
            // A handshake that never completed: nothing worth keeping.
            self.conns.remove(&seq);
            return;
        }
        if !c.stats_stale {
            c.stats_stale = true;
            self.stale_stats.push(seq);
        }
    }
}

/// The first multiple of `interval` at or after `now`, so that all
/// connections of a run sample at the same instants.
fn first_tick(now: Time, interval: Duration) -> Time {
    let step = u64::try_from(interval.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1);
    Time::from_nanos(now.as_nanos().div_ceil(step).saturating_mul(step))
}

/// The connection's counters now: `conn.stats()`'s and
/// `conn.path_stats(PathId::ZERO)`'s (zero without that path), read through
/// the cheaper `pepkit_counters` (third_party/noq-proto/PEPKIT.md, item 6),
/// since this runs after every activation.
fn stats(conn: &noq_proto::Connection) -> ConnStats {
    let counters = conn.pepkit_counters(PathId::ZERO);
    ConnStats {
        sent_packets: counters.sent_packets,
        lost_packets: counters.lost_packets,
        lost_bytes: counters.lost_bytes,
        congestion_events: counters.congestion_events,
        spurious_congestion_events: counters.spurious_congestion_events,
        spurious_losses: counters.spurious_losses,
        udp_tx_datagrams: counters.udp_tx.datagrams,
        udp_tx_bytes: counters.udp_tx.bytes,
        udp_rx_datagrams: counters.udp_rx.datagrams,
        udp_rx_bytes: counters.udp_rx.bytes,
        smoothed_rtt: counters.rtt,
        cwnd_bytes: counters.cwnd,
    }
}

/// One time-series sample of the connection's sender state.
fn sample(conn: &mut noq_proto::Connection, gauge: &InFlightGauge, now: Time) -> Sample {
    let pacing_rate = conn
        .congestion_state(PathId::ZERO)
        .and_then(|cc| cc.metrics().pacing_rate)
        .map(|bytes_per_sec| Rate::from_bps(bytes_per_sec.saturating_mul(8)));
    let stats = stats(conn);
    Sample {
        at: now,
        cwnd_bytes: stats.cwnd_bytes,
        pacing_rate,
        smoothed_rtt: stats.smoothed_rtt,
        bytes_in_flight: gauge.bytes(),
        lost_packets: stats.lost_packets,
        spurious_congestion_events: stats.spurious_congestion_events,
    }
}
