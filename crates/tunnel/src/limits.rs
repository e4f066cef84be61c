//! The tunnel server's limits: how many connections it serves, how many
//! tunnels and waiting requests each may have, how many bytes from targets
//! it holds for a tunnel, a connection and all of them, and how it bounds
//! handshakes (Retry under load, a deadline for each).

use quic::{HandshakeLimits, QuicConfig};
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
    /// Stream data one connection's QUIC transport keeps unacknowledged
    /// toward its client (noq-proto's send window): what MST and MSGT
    /// hold beyond `connection_bytes`.
    pub send_window: u64,
    /// Stream data one connection's QUIC transport accepts from its client
    /// ahead of what the server has read, per connection and per stream
    /// (noq-proto's receive windows).
    pub receive_window: u32,
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
            send_window: 10_000_000,
            receive_window: 64 << 20,
            handshakes: HandshakeLimits::default(),
        }
    }
}

impl ServerLimits {
    /// `quic` with its transport's windows bounded by these limits (each at
    /// most what `quic` already allows).
    pub fn bound_windows(&self, quic: QuicConfig) -> QuicConfig {
        let send = quic
            .send_window
            .map_or(self.send_window, |w| w.min(self.send_window));
        let receive = quic
            .receive_window
            .map_or(self.receive_window, |w| w.min(self.receive_window));
        quic.with_send_window(send).with_receive_window(receive)
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

/// The connections every worker of a server serves together, against
/// [`ServerLimits::max_connections`]: a worker takes a slot before it
/// accepts a connection and gives it back when the connection closes, so
/// that the total holds however the connections spread over workers.
#[derive(Debug)]
pub struct ConnectionSlots {
    live: AtomicUsize,
    max: usize,
}

impl ConnectionSlots {
    /// `max` slots, shared.
    pub fn shared(max: usize) -> Arc<ConnectionSlots> {
        Arc::new(ConnectionSlots {
            live: AtomicUsize::new(0),
            max,
        })
    }

    /// Takes a slot if one is free.
    pub fn take(&self) -> bool {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                (live < self.max).then_some(live + 1)
            })
            .is_ok()
    }

    /// Gives a slot back.
    pub fn give_back(&self) {
        let _ = self
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                live.checked_sub(1)
            });
    }

    /// Slots taken now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

/// The blocks of target-facing ports a server gives its connections: one
/// block of `width` ports from `first_port` on to each established
/// connection, the lowest free one first, back when it closes.
#[derive(Debug)]
pub struct PortBlocks {
    first_port: u16,
    width: u16,
    /// Blocks given back, by index.
    free: std::collections::BTreeSet<u16>,
    /// The lowest block never given out.
    fresh: u16,
    /// The number of blocks.
    blocks: u16,
}

impl PortBlocks {
    /// Blocks of `width` ports from `first_port`, shared by a server's
    /// connections.
    pub fn shared(first_port: u16, width: u16) -> Arc<std::sync::Mutex<PortBlocks>> {
        PortBlocks::shared_range(first_port, width, u16::MAX)
    }

    /// At most `blocks` blocks of `width` ports from `first_port` (a
    /// worker's share of the port range).
    pub fn shared_range(
        first_port: u16,
        width: u16,
        blocks: u16,
    ) -> Arc<std::sync::Mutex<PortBlocks>> {
        Arc::new(std::sync::Mutex::new(PortBlocks {
            first_port,
            width,
            free: std::collections::BTreeSet::new(),
            fresh: 0,
            blocks,
        }))
    }

    /// The first port of a free block, if the port range has one left.
    pub fn take(&mut self) -> Option<u16> {
        let index = match self.free.pop_first() {
            Some(index) => index,
            None => {
                let index = self.fresh;
                self.base(index)?;
                self.fresh += 1;
                index
            }
        };
        self.base(index)
    }

    /// Gives back the block starting at `base`.
    pub fn give_back(&mut self, base: u16) {
        if let Some(offset) = base.checked_sub(self.first_port)
            && self.width > 0
        {
            self.free.insert(offset / self.width);
        }
    }

    /// The first port of block `index`, if the whole block fits.
    fn base(&self, index: u16) -> Option<u16> {
        if index >= self.blocks {
            return None;
        }
        let base = self
            .first_port
            .checked_add(index.checked_mul(self.width)?)?;
        base.checked_add(self.width).map(|_| base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_the_total_across_takers() {
        let slots = ConnectionSlots::shared(3);
        let taken = std::thread::scope(|scope| {
            let takers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..100).filter(|_| slots.take()).count()))
                .collect();
            takers.into_iter().map(|t| t.join().unwrap()).sum::<usize>()
        });
        assert_eq!(taken, 3);
        assert_eq!(slots.live(), 3);
        slots.give_back();
        assert!(slots.take());
        assert!(!slots.take());
    }

    #[test]
    fn a_bounded_range_gives_out_its_blocks_only() {
        let blocks = PortBlocks::shared_range(30_000, 16, 2);
        let mut blocks = blocks.lock().unwrap();
        assert_eq!(blocks.take(), Some(30_000));
        assert_eq!(blocks.take(), Some(30_016));
        assert_eq!(blocks.take(), None);
        blocks.give_back(30_000);
        assert_eq!(blocks.take(), Some(30_000));
    }

    #[test]
    fn the_windows_are_the_smaller_of_the_limit_and_the_configuration() {
        let limits = ServerLimits {
            send_window: 1 << 20,
            receive_window: 2 << 20,
            ..ServerLimits::default()
        };
        let seed = netsim::Seed::new(1);
        let bounded = limits.bound_windows(QuicConfig::new(seed));
        assert_eq!(bounded.send_window, Some(1 << 20));
        assert_eq!(bounded.receive_window, Some(2 << 20));
        let smaller = QuicConfig::new(seed)
            .with_send_window(1000)
            .with_receive_window(2000);
        let kept = limits.bound_windows(smaller);
        assert_eq!(kept.send_window, Some(1000));
        assert_eq!(kept.receive_window, Some(2000));
    }
}
