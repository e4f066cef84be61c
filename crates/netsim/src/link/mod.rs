//! The link model: one direction of a link as a pure, sans-IO state machine.
//!
//! [`Link::offer`] takes the arrival time and the length of a packet and
//! returns its [`Fate`]: delivered at a given time, or dropped and why. There
//! is no event queue and no clock inside, so the same code serves the
//! simulator (virtual time) and a real-time relay (which sleeps until the
//! returned time and then sends).
//!
//! The order of decisions for one packet:
//! 1. packets whose transmission has ended by `now` leave the buffer;
//! 2. the loss model may lose the packet (it then takes no buffer space and
//!    no capacity, like netem);
//! 3. RED, if configured, may drop it early or forced;
//! 4. if it does not fit in the buffer (drop-tail limit, or RED's hard
//!    limit) it is dropped;
//! 5. otherwise it joins the FIFO: it finishes transmission at
//!    `max(now, previous departure) + transmission time` (constant rate) or in
//!    the trace's delivery opportunity that its bytes reach (trace), and is
//!    delivered one propagation delay later.

mod config;
mod queue;
mod server;
mod stats;

pub use config::{BufferLimit, Capacity, LinkConfig, LinkConfigError, QueueConfig, QueueSampling};
pub use stats::{DropCause, LinkStats, PacketCount, QueueSample};

use crate::loss::LossState;
use crate::red::{Red, RedParams, RedStatus, RedVerdict};
use crate::{Seed, SimRng, Time};
use queue::Backlog;
use rand_chacha::rand_core::RngCore;
use server::Server;
use std::time::Duration;

/// What happens to a packet offered to a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    /// It arrives at the far end at this time.
    Deliver {
        /// Arrival time at the far end.
        at: Time,
    },
    /// It is dropped.
    Dropped(DropCause),
}

/// One direction of a link. See the module documentation for the model.
#[derive(Clone, Debug)]
pub struct Link {
    config: LinkConfig,
    server: Server,
    backlog: Backlog,
    limit: BufferLimit,
    red: Option<Red>,
    loss: LossState,
    loss_rng: SimRng,
    red_rng: SimRng,
    jitter_rng: SimRng,
    /// The latest arrival scheduled (jitter keeps arrivals in order).
    last_arrival: Time,
    stats: LinkStats,
    samples: Vec<QueueSample>,
    last_sample: Option<Time>,
    last_now: Time,
}

impl Link {
    /// Builds a link. Its random generators (loss, RED) are derived from
    /// `seed`, so two links built from the same configuration and seed make
    /// the same decisions.
    pub fn new(config: LinkConfig, seed: Seed) -> Result<Link, LinkConfigError> {
        if let Capacity::Constant(rate) = &config.capacity
            && rate.is_zero()
        {
            return Err(LinkConfigError::ZeroRate);
        }
        let (limit, red) = match &config.queue {
            QueueConfig::DropTail(limit) => (*limit, None),
            QueueConfig::Red(red) => {
                let params = RedParams::from_config(red)?;
                (BufferLimit::Bytes(params.limit), Some(Red::new(params)))
            }
        };
        if matches!(limit, BufferLimit::Bytes(0) | BufferLimit::Packets(0)) {
            return Err(LinkConfigError::ZeroBuffer);
        }
        Ok(Link {
            server: Server::new(&config.capacity),
            backlog: Backlog::default(),
            limit,
            red,
            loss: LossState::new(config.loss),
            loss_rng: seed.rng("loss"),
            red_rng: seed.rng("red"),
            jitter_rng: seed.rng("jitter"),
            last_arrival: Time::ZERO,
            stats: LinkStats::default(),
            samples: Vec::new(),
            last_sample: None,
            last_now: Time::ZERO,
            config,
        })
    }

    /// Offers a packet of `len` bytes (its IP length) arriving at `now`.
    ///
    /// Calls must come in non-decreasing `now`; an earlier `now` is treated
    /// as the latest one seen.
    pub fn offer(&mut self, now: Time, len: usize) -> Fate {
        let now = now.max(self.last_now);
        self.last_now = now;
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        let len64 = u64::from(len);
        self.stats.offered.add(len64);
        self.backlog.drain(now);
        let backlog = self.backlog.bytes();
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(backlog);

        let fate = self.decide(now, len, backlog);
        match fate {
            Fate::Deliver { .. } => self.stats.delivered.add(len64),
            Fate::Dropped(cause) => self.stats.record_drop(cause, len64),
        }
        self.sample(now, backlog);
        fate
    }

    fn decide(&mut self, now: Time, len: u32, backlog: u64) -> Fate {
        if self.loss.lose(&mut self.loss_rng) {
            return Fate::Dropped(DropCause::Loss);
        }
        if let Some(red) = &mut self.red {
            let idle_since = self.backlog.take_idle_since();
            match red.on_arrival(now, backlog, idle_since, &mut self.red_rng) {
                RedVerdict::Pass => {}
                RedVerdict::EarlyDrop => return Fate::Dropped(DropCause::RedEarly),
                RedVerdict::ForcedDrop => return Fate::Dropped(DropCause::RedForced),
            }
        }
        let fits = match self.limit {
            BufferLimit::Unlimited => true,
            BufferLimit::Bytes(max) => backlog + u64::from(len) <= max,
            BufferLimit::Packets(max) => self.backlog.packets() < max,
        };
        if !fits {
            return Fate::Dropped(DropCause::BufferFull);
        }
        let departure = self.server.depart(now, u64::from(len));
        if departure > now {
            self.backlog.push(departure, len);
        }
        let mut at = departure + self.config.delay;
        if let Some(jitter) = self.config.jitter {
            let span = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
            let extra = self.jitter_rng.next_u64() % span.saturating_add(1);
            at = (at + Duration::from_nanos(extra)).max(self.last_arrival);
            self.last_arrival = at;
        }
        Fate::Deliver { at }
    }

    fn sample(&mut self, now: Time, backlog: u64) {
        let Some(sampling) = self.config.sampling else {
            return;
        };
        if self.samples.len() >= sampling.max_samples {
            return;
        }
        if let Some(last) = self.last_sample
            && now < last + sampling.interval
        {
            return;
        }
        self.last_sample = Some(now);
        self.samples.push(QueueSample {
            at: now,
            bytes: backlog,
            packets: self.backlog.packets(),
            red_average_bytes: self.red.as_ref().map(|r| r.status().average_bytes),
        });
    }

    /// The bytes and packets in the buffer at `now` (including the packet
    /// being transmitted). Like [`Link::offer`], `now` must not go back.
    pub fn occupancy(&mut self, now: Time) -> PacketCount {
        let now = now.max(self.last_now);
        self.last_now = now;
        self.backlog.drain(now);
        PacketCount {
            packets: self.backlog.packets(),
            bytes: self.backlog.bytes(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The recorded queue samples (empty unless sampling is configured).
    pub fn queue_samples(&self) -> &[QueueSample] {
        &self.samples
    }

    /// The configuration the link was built from.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The derived RED parameters, for a RED link.
    pub fn red_params(&self) -> Option<&RedParams> {
        self.red.as_ref().map(Red::params)
    }

    /// RED's current average and maximum drop probability, for a RED link.
    pub fn red_status(&self) -> Option<RedStatus> {
        self.red.as_ref().map(Red::status)
    }
}
