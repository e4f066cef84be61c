//! What a link is made of: delay, capacity, queue, loss, and what to record.

use crate::red::{RedConfig, RedConfigError};
use crate::{CapacityTrace, LossModel, Rate};
use std::sync::Arc;
use std::time::Duration;

/// How fast a link serialises packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// No serialisation delay and no queue: every packet leaves on arrival.
    Unlimited,
    /// A constant bit rate.
    Constant(Rate),
    /// A mahimahi trace of delivery opportunities (shared, since real traces
    /// are large and a topology often uses one trace on several links).
    Trace(Arc<CapacityTrace>),
}

/// The drop-tail limit of a link's buffer. The packet in transmission
/// counts against it until its last bit has left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BufferLimit {
    /// No limit.
    #[default]
    Unlimited,
    /// At most this many bytes (IP packet lengths) queued.
    Bytes(u64),
    /// At most this many packets queued.
    Packets(u64),
}

/// The queue discipline in front of the link.
#[derive(Clone, Debug, PartialEq)]
pub enum QueueConfig {
    /// First in, first out; arrivals that do not fit are dropped.
    DropTail(BufferLimit),
    /// Random Early Detection with a hard byte limit (see [`RedConfig`]).
    Red(RedConfig),
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig::DropTail(BufferLimit::Unlimited)
    }
}

/// Whether and how often to record the queue occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSampling {
    /// At most one sample per interval (taken at the first arrival after
    /// the interval has passed).
    pub interval: Duration,
    /// Stop recording after this many samples.
    pub max_samples: usize,
}

/// The configuration of one direction of a link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Propagation delay, added after a packet's last bit has been sent.
    pub delay: Duration,
    /// Serialisation capacity.
    pub capacity: Capacity,
    /// Queue discipline and buffer limit.
    pub queue: QueueConfig,
    /// Random loss, applied on arrival before the queue (like netem), so a
    /// lost packet takes no buffer space and no capacity.
    pub loss: LossModel,
    /// Queue occupancy recording; `None` records nothing.
    pub sampling: Option<QueueSampling>,
    /// Delay jitter: each packet's propagation delay gets an extra delay
    /// drawn uniformly from `[0, jitter]` (integer nanoseconds, the
    /// link's own generator), never overtaking the packet before it
    /// (FIFO, like netem's jitter with a rate): packets closer together
    /// than the jitter wait for the latest of their predecessors, so their
    /// mean extra delay exceeds half the jitter. `None` (the default)
    /// draws nothing.
    pub jitter: Option<Duration>,
}

impl LinkConfig {
    /// A link with the given delay and capacity, an unlimited drop-tail
    /// buffer and no loss.
    pub fn new(delay: Duration, capacity: Capacity) -> LinkConfig {
        LinkConfig {
            delay,
            capacity,
            queue: QueueConfig::default(),
            loss: LossModel::None,
            sampling: None,
            jitter: None,
        }
    }

    /// A constant-rate link.
    pub fn constant(delay: Duration, rate: Rate) -> LinkConfig {
        LinkConfig::new(delay, Capacity::Constant(rate))
    }

    /// A trace-driven link.
    pub fn trace(delay: Duration, trace: Arc<CapacityTrace>) -> LinkConfig {
        LinkConfig::new(delay, Capacity::Trace(trace))
    }

    /// The same link with delay jitter up to `jitter` (see
    /// [`LinkConfig::jitter`]).
    pub fn with_jitter(mut self, jitter: Duration) -> LinkConfig {
        self.jitter = (!jitter.is_zero()).then_some(jitter);
        self
    }

    /// A pure delay line: unlimited capacity.
    pub fn delay_only(delay: Duration) -> LinkConfig {
        LinkConfig::new(delay, Capacity::Unlimited)
    }

    /// Sets a drop-tail buffer limit.
    pub fn with_buffer(mut self, limit: BufferLimit) -> LinkConfig {
        self.queue = QueueConfig::DropTail(limit);
        self
    }

    /// Uses RED instead of drop-tail.
    pub fn with_red(mut self, red: RedConfig) -> LinkConfig {
        self.queue = QueueConfig::Red(red);
        self
    }

    /// Sets the random loss model.
    pub fn with_loss(mut self, loss: LossModel) -> LinkConfig {
        self.loss = loss;
        self
    }

    /// Records the queue occupancy at most once per `interval`, up to
    /// `max_samples` samples.
    pub fn with_sampling(mut self, interval: Duration, max_samples: usize) -> LinkConfig {
        self.sampling = Some(QueueSampling {
            interval,
            max_samples,
        });
        self
    }
}

/// Why a [`LinkConfig`] cannot be built into a link.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LinkConfigError {
    /// A constant capacity of 0 bit/s.
    #[error("link rate must be positive (got 0 bit/s); use Capacity::Unlimited for no rate limit")]
    ZeroRate,
    /// A buffer limit of zero bytes or packets.
    #[error("link buffer limit must be positive; use BufferLimit::Unlimited for no limit")]
    ZeroBuffer,
    /// An invalid RED configuration.
    #[error("invalid RED configuration: {0}")]
    Red(#[from] RedConfigError),
}
