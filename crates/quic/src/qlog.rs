//! qlog traces of each connection, collected in memory, with timestamps in
//! virtual time (milliseconds since the start of the run). Needs the
//! crate's `qlog` feature (noq-proto's `qlog` feature).

use crate::clock::SimClock;
use netsim::Time;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Shared byte buffer of one trace.
type Buffer = Arc<Mutex<Vec<u8>>>;

/// An in-memory collection of qlog traces (JSON-SEQ, one per connection
/// and side). Clones share the same collection, so one `QlogSet` can take
/// the traces of every endpoint of a run.
#[derive(Clone, Debug, Default)]
pub struct QlogSet {
    traces: Arc<Mutex<BTreeMap<String, Buffer>>>,
}

impl QlogSet {
    /// An empty collection.
    pub fn new() -> QlogSet {
        QlogSet::default()
    }

    /// The traces so far, by name (`<side>-<initial DCID>`; a name seen
    /// twice gets a `-2`, `-3`, … suffix), in name order.
    pub fn traces(&self) -> Vec<(String, Vec<u8>)> {
        let Ok(traces) = self.traces.lock() else {
            return Vec::new();
        };
        traces
            .iter()
            .map(|(name, buf)| {
                (
                    name.clone(),
                    buf.lock().map(|b| b.clone()).unwrap_or_default(),
                )
            })
            .collect()
    }

    fn open(&self, name: String) -> Buffer {
        let buffer = Buffer::default();
        if let Ok(mut traces) = self.traces.lock() {
            let mut unique = name.clone();
            let mut n = 1;
            while traces.contains_key(&unique) {
                n += 1;
                unique = format!("{name}-{n}");
            }
            traces.insert(unique, buffer.clone());
        }
        buffer
    }
}

/// Writes into one trace's buffer.
struct TraceWriter(Buffer);

impl io::Write for TraceWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("qlog buffer poisoned"))?
            .extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// noq-proto's qlog factory for one endpoint: traces go to `set`, with
/// times counted from virtual time zero of the endpoint's clock.
pub(crate) struct QlogFactory {
    set: QlogSet,
    clock: SimClock,
}

impl QlogFactory {
    pub(crate) fn new(set: QlogSet, clock: SimClock) -> QlogFactory {
        QlogFactory { set, clock }
    }
}

impl noq_proto::QlogFactory for QlogFactory {
    fn for_connection(
        &self,
        side: noq_proto::Side,
        _remote: SocketAddr,
        initial_dst_cid: noq_proto::ConnectionId,
        _now: Instant,
    ) -> Option<noq_proto::QlogConfig> {
        let side = match side {
            noq_proto::Side::Client => "client",
            noq_proto::Side::Server => "server",
        };
        let buffer = self.set.open(format!("{side}-{initial_dst_cid}"));
        let mut config = noq_proto::QlogConfig::new(Box::new(TraceWriter(buffer)));
        config.start_time(self.clock.instant(Time::ZERO));
        Some(config)
    }
}
