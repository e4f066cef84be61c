//! The tunnel server's limits: how many connections it serves, how many
//! tunnels and waiting requests each may have, how many bytes from targets
//! it holds for a tunnel, a connection and all of them, and how it bounds
//! handshakes (Retry under load, a deadline for each).

use quic::HandshakeLimits;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The tunnel server's limits (the defaults are its reference values,
/// docs/tecc.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once (live: neither closed nor given up);
    /// another client is refused (CONNECTION_REFUSED) until one closes.
    pub max_connections: usize,
    /// Tunnels one connection may open; each has a target-facing port of
    /// its own, from a block of this many ports per connection.
    pub max_tunnels: u16,
    /// Request streams one connection may have waiting for their HEADERS;
    /// one more closes the connection.
    pub max_pending: usize,
    /// Bytes from a target held for one tunnel (waiting for the tunnel or
    /// queued on its request streams); a packet beyond is dropped.
    pub tunnel_bytes: usize,
    /// Bytes held for one connection: its tunnels' and its datagram
    /// queue's (which also has the tunnel's own `queue_limit`).
    pub connection_bytes: usize,
    /// Bytes held for all connections together.
    pub total_bytes: usize,
    /// Handshakes: Retry beyond a number of unvalidated ones, and a
    /// deadline for each.
    pub handshakes: HandshakeLimits,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_connections: 1024,
            max_tunnels: 16,
            max_pending: 32,
            tunnel_bytes: 16 << 20,
            connection_bytes: 64 << 20,
            total_bytes: 1 << 30,
            handshakes: HandshakeLimits::default(),
        }
    }
}

/// The bytes every connection of a server holds, against
/// [`ServerLimits::total_bytes`], and the most it ever held.
#[derive(Debug, Default)]
pub struct ByteBudget {
    held: AtomicUsize,
    peak: AtomicUsize,
}

impl ByteBudget {
    /// A shared, empty budget.
    pub fn shared() -> Arc<ByteBudget> {
        Arc::new(ByteBudget::default())
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The most bytes held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// One holder's bytes went from `before` to `after`.
    pub(crate) fn update(&self, before: usize, after: usize) {
        if after >= before {
            let now = self.held.fetch_add(after - before, Ordering::Relaxed) + (after - before);
            self.peak.fetch_max(now, Ordering::Relaxed);
        } else {
            self.held.fetch_sub(before - after, Ordering::Relaxed);
        }
    }
}
