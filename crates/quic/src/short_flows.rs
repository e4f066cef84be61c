//! The short-flows workload (TECC §6: "We run the request for different
//! size files from the server", flow completion time per request):
//! request/response exchanges on one connection, each on a new
//! bidirectional stream, issued one after another or at Poisson arrival
//! times.
//!
//! For each flow the client opens a bidirectional stream and sends a
//! 16-byte header — the request payload length and the response length,
//! each a big-endian `u64` — then the request payload (zeros) and FIN. The
//! server reads the header, and once it has read the request's FIN it sends
//! the response (zeros) and FIN. The client issues the next request when it
//! has read the previous response's FIN.
//!
//! The flow completion time (FCT) of a request runs from the request being
//! issued (the client's `drive` call that opens its stream; for the first
//! request that is when the handshake completes) to the client reading the
//! last response byte (the response FIN).
//!
//! Poisson arrivals need the application to be woken at an arrival time,
//! so a Poisson client implements [`AppTimer`] and must run inside
//! [`Timed`]; a sequential one needs no wrapper.

use crate::app::{App, AppFactory};
use crate::client::QuicClient;
use crate::metrics::nearest_rank;
use crate::session::{Session, StreamError, StreamId};
use crate::timed::AppTimer;
#[cfg(doc)]
use crate::timed::Timed;
use bytes::Bytes;
use netsim::Time;
use rand_chacha::rand_core::RngCore;
use std::collections::VecDeque;
use std::time::Duration;

/// The length of the request header.
const HEADER_LEN: usize = 16;

/// The payload chunk both sides send (zeros), shared without copying.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Writes up to `remaining` zero bytes; returns how many were taken.
fn write_zeros(session: &mut Session<'_>, stream: StreamId, remaining: u64) -> u64 {
    let mut written = 0;
    while written < remaining {
        let len = (remaining - written).min(ZEROS.len() as u64) as usize;
        match session.write_bytes(stream, Bytes::from_static(&ZEROS[..len])) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    written
}

/// One completed request/response exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    /// The request's index, in the order issued (from 0).
    pub index: usize,
    /// When the request was issued.
    pub issued: Time,
    /// When the last response byte was read.
    pub completed: Time,
    /// Response bytes received.
    pub response_bytes: u64,
}

impl FlowRecord {
    /// `completed - issued`.
    pub fn fct(&self) -> Duration {
        self.completed - self.issued
    }
}

/// A flow in progress on the client.
#[derive(Debug)]
struct Current {
    index: usize,
    stream: StreamId,
    issued: Time,
    header_sent: usize,
    sent: u64,
    fin_sent: bool,
    received: u64,
}

/// When requests are issued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Each request when the previous response has been read (the first
    /// when the handshake completes).
    Sequential,
    /// Request `i` at the handshake's completion plus `offsets[i]`: the
    /// cumulative sums of exponential inter-arrival times. Requests may
    /// overlap; each has its own stream.
    Poisson {
        /// Arrival offsets from the handshake's completion, non-decreasing.
        offsets: Vec<Duration>,
    },
}

impl Arrivals {
    /// `count` Poisson arrivals with exponential inter-arrival times of mean
    /// `mean`, drawn from `rng` (for example `Seed::rng("short-flows")`).
    /// Each gap is `-ln(U) · mean`, rounded down to whole nanoseconds, with
    /// `U` uniform in (0, 1] from the top 53 bits of `next_u64`. The first
    /// arrival is one gap after the handshake.
    pub fn poisson(count: usize, mean: Duration, rng: &mut impl RngCore) -> Arrivals {
        let mean_ns = mean.as_nanos() as f64;
        let mut at = Duration::ZERO;
        let offsets = (0..count)
            .map(|_| {
                let u = netsim::unit_open_below(rng);
                at += Duration::from_nanos((-u.ln() * mean_ns) as u64);
                at
            })
            .collect();
        Arrivals::Poisson { offsets }
    }
}

/// The client side: `count` requests of `request_bytes` each answered by
/// `response_bytes`, issued as [`Arrivals`] says, each on a new stream.
#[derive(Debug)]
pub struct ShortFlowsClient {
    request_bytes: u64,
    response_bytes: u64,
    count: usize,
    arrivals: Arrivals,
    connected_at: Option<Time>,
    /// Requests issued so far (the index of the next one).
    issued: usize,
    /// Issued requests waiting for a stream (the peer's stream limit).
    waiting: VecDeque<(usize, Time)>,
    active: Vec<Current>,
    flows: Vec<FlowRecord>,
    failed: bool,
}

impl ShortFlowsClient {
    /// `count` sequential requests.
    pub fn sequential(count: usize, request_bytes: u64, response_bytes: u64) -> ShortFlowsClient {
        ShortFlowsClient::new(Arrivals::Sequential, count, request_bytes, response_bytes)
    }

    /// Requests at Poisson arrival times (see [`Arrivals::poisson`]).
    pub fn poisson(
        count: usize,
        mean_interarrival: Duration,
        rng: &mut impl RngCore,
        request_bytes: u64,
        response_bytes: u64,
    ) -> ShortFlowsClient {
        let arrivals = Arrivals::poisson(count, mean_interarrival, rng);
        ShortFlowsClient::new(arrivals, count, request_bytes, response_bytes)
    }

    /// Requests issued as `arrivals` says (for Poisson, `count` is capped
    /// at the number of offsets).
    pub fn new(
        arrivals: Arrivals,
        count: usize,
        request_bytes: u64,
        response_bytes: u64,
    ) -> ShortFlowsClient {
        let count = match &arrivals {
            Arrivals::Sequential => count,
            Arrivals::Poisson { offsets } => count.min(offsets.len()),
        };
        ShortFlowsClient {
            request_bytes,
            response_bytes,
            count,
            arrivals,
            connected_at: None,
            issued: 0,
            waiting: VecDeque::new(),
            active: Vec::new(),
            flows: Vec::new(),
            failed: false,
        }
    }

    /// The number of requests to issue.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The response size of every request.
    pub fn response_bytes(&self) -> u64 {
        self.response_bytes
    }

    /// The arrival process.
    pub fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }

    /// The completed flows, in completion order.
    pub fn flows(&self) -> &[FlowRecord] {
        &self.flows
    }

    /// Whether a stream operation failed (the workload then stops).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Issues the requests due by `now`.
    fn issue(&mut self, now: Time) {
        let Some(connected_at) = self.connected_at else {
            return;
        };
        match &self.arrivals {
            Arrivals::Sequential => {
                if self.issued < self.count && self.active.is_empty() && self.waiting.is_empty() {
                    self.waiting.push_back((self.issued, now));
                    self.issued += 1;
                }
            }
            Arrivals::Poisson { offsets } => {
                while self.issued < self.count && connected_at + offsets[self.issued] <= now {
                    let at = connected_at + offsets[self.issued];
                    self.waiting.push_back((self.issued, at));
                    self.issued += 1;
                }
            }
        }
    }

    /// Moves one flow along; `Ok(true)` when its response is complete.
    fn advance(&self, session: &mut Session<'_>, flow: &mut Current) -> Result<bool, StreamError> {
        let stream = flow.stream;
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&self.request_bytes.to_be_bytes());
        header[8..].copy_from_slice(&self.response_bytes.to_be_bytes());
        while flow.header_sent < HEADER_LEN {
            match session.write(stream, &header[flow.header_sent..])? {
                0 => return Ok(false),
                n => flow.header_sent += n,
            }
        }
        flow.sent += write_zeros(session, stream, self.request_bytes - flow.sent);
        if !flow.fin_sent && flow.sent == self.request_bytes {
            session.finish(stream)?;
            flow.fin_sent = true;
        }
        let status = session.read(stream, |_| {})?;
        flow.received += status.bytes;
        Ok(status.finished)
    }
}

impl App for ShortFlowsClient {
    fn drive(&mut self, session: &mut Session<'_>) {
        if self.failed || !session.is_connected() {
            return;
        }
        self.connected_at.get_or_insert(session.now());
        loop {
            self.issue(session.now());
            while let Some(&(index, issued)) = self.waiting.front() {
                let Some(stream) = session.open_bi() else {
                    break;
                };
                self.waiting.pop_front();
                self.active.push(Current {
                    index,
                    stream,
                    issued,
                    header_sent: 0,
                    sent: 0,
                    fin_sent: false,
                    received: 0,
                });
            }
            let mut active = std::mem::take(&mut self.active);
            let before = self.flows.len();
            for mut flow in active.drain(..) {
                match self.advance(session, &mut flow) {
                    Ok(true) => self.flows.push(FlowRecord {
                        index: flow.index,
                        issued: flow.issued,
                        completed: session.now(),
                        response_bytes: flow.received,
                    }),
                    Ok(false) => self.active.push(flow),
                    Err(_) => {
                        self.failed = true;
                        return;
                    }
                }
            }
            // A completed flow may let the next sequential request go now.
            if self.flows.len() == before || self.is_done() {
                return;
            }
        }
    }

    fn is_done(&self) -> bool {
        self.failed || self.flows.len() == self.count
    }
}

impl AppTimer for ShortFlowsClient {
    fn next_wakeup(&self) -> Option<Time> {
        match &self.arrivals {
            Arrivals::Sequential => None,
            Arrivals::Poisson { offsets } => Some(self.connected_at? + *offsets.get(self.issued)?),
        }
    }
}

/// One request on the server.
#[derive(Debug)]
struct ServerFlow {
    stream: StreamId,
    header: Vec<u8>,
    response_bytes: Option<u64>,
    request_done: bool,
    sent: u64,
    fin_sent: bool,
}

/// The server side, one per connection: answers every request stream.
#[derive(Debug, Default)]
pub struct ShortFlowsServer {
    flows: Vec<ServerFlow>,
    served: usize,
}

impl ShortFlowsServer {
    /// Responses sent in full (FIN queued).
    pub fn served(&self) -> usize {
        self.served
    }
}

impl App for ShortFlowsServer {
    fn drive(&mut self, session: &mut Session<'_>) {
        while let Some(stream) = session.accept_bi() {
            self.flows.push(ServerFlow {
                stream,
                header: Vec::with_capacity(HEADER_LEN),
                response_bytes: None,
                request_done: false,
                sent: 0,
                fin_sent: false,
            });
        }
        for flow in &mut self.flows {
            if !flow.request_done {
                let (header, response) = (&mut flow.header, &mut flow.response_bytes);
                let read = session.read(flow.stream, |data| {
                    if response.is_none() {
                        let take = (HEADER_LEN - header.len()).min(data.len());
                        header.extend_from_slice(&data[..take]);
                        if header.len() == HEADER_LEN {
                            let mut n = [0u8; 8];
                            n.copy_from_slice(&header[8..]);
                            *response = Some(u64::from_be_bytes(n));
                        }
                    }
                });
                match read {
                    Ok(status) if status.finished => flow.request_done = true,
                    Ok(_) => {}
                    // A broken stream is abandoned.
                    Err(_) => flow.fin_sent = true,
                }
            }
            let Some(bytes) = flow.response_bytes else {
                continue;
            };
            if !flow.request_done || flow.fin_sent {
                continue;
            }
            flow.sent += write_zeros(session, flow.stream, bytes - flow.sent);
            if flow.sent == bytes {
                flow.fin_sent = session.finish(flow.stream).is_ok();
                if flow.fin_sent {
                    self.served += 1;
                }
            }
        }
        self.flows.retain(|flow| !flow.fin_sent);
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// Makes a [`ShortFlowsServer`] for each connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShortFlowsServerFactory;

impl AppFactory for ShortFlowsServerFactory {
    type App = ShortFlowsServer;

    fn make(&mut self) -> ShortFlowsServer {
        ShortFlowsServer::default()
    }
}

/// The flow completion times of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShortFlowsReport {
    /// Every completed flow, in the order issued.
    pub flows: Vec<FlowRecord>,
    /// Each flow's FCT, in the order issued.
    pub fcts: Vec<Duration>,
    /// Mean FCT (integer nanoseconds, truncated).
    pub mean: Duration,
    /// Median FCT (nearest rank).
    pub p50: Duration,
    /// 95th-percentile FCT (nearest rank).
    pub p95: Duration,
    /// 99th-percentile FCT (nearest rank).
    pub p99: Duration,
    /// Largest FCT.
    pub max: Duration,
}

impl ShortFlowsReport {
    /// The report of the client's flows, if all of them completed with
    /// their full response.
    pub fn from_client(client: &QuicClient<ShortFlowsClient>) -> Option<ShortFlowsReport> {
        ShortFlowsReport::from_app(client.app()?)
    }

    /// The report of a client application's flows, as [`Self::from_client`].
    pub fn from_app(app: &ShortFlowsClient) -> Option<ShortFlowsReport> {
        if app.failed()
            || app.flows().len() != app.count()
            || app.count() == 0
            || app
                .flows()
                .iter()
                .any(|f| f.response_bytes != app.response_bytes())
        {
            return None;
        }
        let mut flows = app.flows().to_vec();
        flows.sort_by_key(|f| f.index);
        let fcts: Vec<Duration> = flows.iter().map(FlowRecord::fct).collect();
        let mut sorted = fcts.clone();
        sorted.sort();
        let total: u128 = fcts.iter().map(Duration::as_nanos).sum();
        let mean = Duration::from_nanos((total / fcts.len() as u128) as u64);
        Some(ShortFlowsReport {
            mean,
            p50: nearest_rank(&sorted, 50)?,
            p95: nearest_rank(&sorted, 95)?,
            p99: nearest_rank(&sorted, 99)?,
            max: *sorted.last()?,
            flows,
            fcts,
        })
    }
}
