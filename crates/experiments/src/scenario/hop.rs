//! One hop of the path, validated: its capacity in each direction, its
//! queue and its loss, in types that cannot hold an invalid combination;
//! and the simulator's link configuration built from it.

use super::raw::{LossDirection, RawBuffer, RawHop};
use crate::units::Bytes;
use netsim::{
    BufferLimit, CapacityTrace, GilbertElliott, HopConfig, LinkConfig, LossModel, Probability,
    Rate, RedConfig,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One hop: a link in each direction ("forward" is client → server).
#[derive(Clone, Debug, PartialEq)]
pub struct Hop {
    /// Its name in `path`.
    pub name: String,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Client → server capacity.
    pub forward: Capacity,
    /// Server → client capacity.
    pub reverse: Capacity,
    /// The queue in front of each direction.
    pub buffer: Buffer,
    /// Random loss.
    pub loss: LossModel,
    /// Which directions lose packets at random.
    pub loss_direction: LossDirection,
    /// Delay jitter, both directions (`netsim::LinkConfig::jitter`).
    pub jitter: Option<Duration>,
}

/// One direction's capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// A constant rate.
    Rate(Rate),
    /// A mahimahi trace: a file relative to the scenario file, or the name
    /// of a trace bundled with pepkit (`cellular/TMobile-LTE-short.up`).
    Trace {
        /// As the scenario names it.
        trace: PathBuf,
        /// The field that names it (`trace`, `reverse_trace`), for errors.
        field: &'static str,
    },
}

/// A direction's queue.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Buffer {
    /// No limit.
    #[default]
    Unlimited,
    /// Drop-tail, at most this many packets.
    Packets(u64),
    /// Drop-tail, at most this many bytes.
    Bytes(u64),
    /// `tc red limit LIMIT avpkt 1000 adaptive harddrop bandwidth RATE`.
    Red {
        /// The hard limit, bytes (at least 4 kB).
        limit: u64,
        /// The hop's rate, RED's bandwidth.
        bandwidth: Rate,
    },
}

impl Hop {
    /// Validates a hop as written, on a path whose round-trip propagation
    /// delay is `rtt` (for buffers given in bandwidth-delay products);
    /// errors name the field within the hop.
    pub(crate) fn new(name: &str, raw: &RawHop, rtt: Duration) -> Result<Hop, (String, String)> {
        let fail = |field: &str, message: String| Err((field.to_string(), message));
        let trace = |path: &PathBuf, field| Capacity::Trace {
            trace: path.clone(),
            field,
        };
        let (forward, reverse) = match (&raw.rate, &raw.trace, &raw.reverse_trace) {
            (None, None, _) => return fail("rate", "give a rate or a trace".into()),
            (Some(_), Some(_), Some(_)) => {
                return fail("rate", "both directions already have traces".into());
            }
            (Some(rate), _, _) if rate.0.is_zero() => {
                return fail("rate", "must be positive".into());
            }
            (_, None, Some(_)) => {
                return fail(
                    "reverse_trace",
                    "needs `trace` for the forward direction".into(),
                );
            }
            (Some(rate), None, None) => (Capacity::Rate(rate.0), Capacity::Rate(rate.0)),
            (Some(rate), Some(up), None) => (trace(up, "trace"), Capacity::Rate(rate.0)),
            (None, Some(up), None) => (trace(up, "trace"), trace(up, "trace")),
            (None, Some(up), Some(down)) => (trace(up, "trace"), trace(down, "reverse_trace")),
        };
        let loss = loss_model(raw)?;
        let buffer = match raw.buffer {
            RawBuffer::Unlimited => Buffer::Unlimited,
            RawBuffer::DropTail {
                packets,
                bytes,
                bdp,
            } => drop_tail(packets, bytes, bdp, raw, rtt)?,
            RawBuffer::Red { limit } => {
                let Some(rate) = raw.rate else {
                    return fail(
                        "buffer",
                        "RED needs the hop's `rate` as its bandwidth".into(),
                    );
                };
                if limit.0 < 4_000 {
                    return fail("buffer.limit", "RED needs a limit of at least 4 kB".into());
                }
                Buffer::Red {
                    limit: limit.0,
                    bandwidth: rate.0,
                }
            }
        };
        Ok(Hop {
            name: name.to_string(),
            delay: raw.delay.0,
            forward,
            reverse,
            buffer,
            loss,
            loss_direction: raw.loss_direction,
            jitter: raw.jitter.map(|span| span.0).filter(|j| !j.is_zero()),
        })
    }

    /// Its constant client → server rate, if it has one.
    pub fn rate(&self) -> Option<Rate> {
        match self.forward {
            Capacity::Rate(rate) => Some(rate),
            Capacity::Trace { .. } => None,
        }
    }

    /// Its queue's limit in bytes, if it has one (packets count as 1500
    /// bytes).
    pub fn buffer_bytes(&self) -> Option<u64> {
        match self.buffer {
            Buffer::Unlimited => None,
            Buffer::Packets(packets) => Some(packets.saturating_mul(1500)),
            Buffer::Bytes(bytes) => Some(bytes),
            Buffer::Red { limit, .. } => Some(limit),
        }
    }

    /// The traces it names.
    pub(crate) fn traces(&self) -> impl Iterator<Item = (&PathBuf, &'static str)> {
        [&self.forward, &self.reverse]
            .into_iter()
            .filter_map(|capacity| match capacity {
                Capacity::Trace { trace, field } => Some((trace, *field)),
                Capacity::Rate(_) => None,
            })
    }

    /// Both directions' link configurations, with the traces `load`
    /// returns for the names it gives.
    pub(crate) fn config(&self, load: &dyn Fn(&PathBuf) -> Arc<CapacityTrace>) -> HopConfig {
        let direction = |capacity: &Capacity, lossy: bool| {
            let link = match capacity {
                Capacity::Rate(rate) => LinkConfig::constant(self.delay, *rate),
                Capacity::Trace { trace, .. } => LinkConfig::trace(self.delay, load(trace)),
            };
            let link = match self.buffer {
                Buffer::Unlimited => link,
                Buffer::Packets(packets) => link.with_buffer(BufferLimit::Packets(packets)),
                Buffer::Bytes(bytes) => link.with_buffer(BufferLimit::Bytes(bytes)),
                Buffer::Red { limit, bandwidth } => {
                    link.with_red(RedConfig::new(limit, bandwidth).with_adaptive(true))
                }
            };
            let link = match self.jitter {
                Some(jitter) => link.with_jitter(jitter),
                None => link,
            };
            if lossy {
                link.with_loss(self.loss)
            } else {
                link
            }
        };
        HopConfig::new(
            direction(&self.forward, self.loss_direction != LossDirection::Reverse),
            direction(&self.reverse, self.loss_direction != LossDirection::Forward),
        )
    }
}

/// A drop-tail queue of `packets`, `bytes` or `bdp` bandwidth-delay
/// products (the hop's rate times `rtt`): exactly one of them.
fn drop_tail(
    packets: Option<u64>,
    bytes: Option<Bytes>,
    bdp: Option<f64>,
    raw: &RawHop,
    rtt: Duration,
) -> Result<Buffer, (String, String)> {
    let fail = |message: &str| Err(("buffer".to_string(), message.to_string()));
    match (packets, bytes, bdp) {
        (Some(0), None, None) | (None, Some(Bytes(0)), None) => fail("the limit must be positive"),
        (Some(packets), None, None) => Ok(Buffer::Packets(packets)),
        (None, Some(bytes), None) => Ok(Buffer::Bytes(bytes.0)),
        (None, None, Some(factor)) => {
            let Some(rate) = raw.rate else {
                return fail("a buffer in bandwidth-delay products needs the hop's `rate`");
            };
            if !(factor.is_finite() && factor > 0.0) {
                return fail("`bdp` must be positive");
            }
            let bytes = factor * rate.0.bits_per_sec() as f64 / 8.0 * rtt.as_secs_f64();
            Ok(Buffer::Bytes((bytes.round() as u64).max(1)))
        }
        _ => fail("drop_tail takes one of `packets`, `bytes` or `bdp`"),
    }
}

/// The hop's random loss: Bernoulli `loss`, or `gilbert_elliott`.
fn loss_model(raw: &RawHop) -> Result<LossModel, (String, String)> {
    let probability = |field: &str, p: f64| {
        Probability::new(p).map_err(|_| {
            (
                field.to_string(),
                format!("{p} is not a probability in 0..=1"),
            )
        })
    };
    let loss = probability("loss", raw.loss)?;
    let Some(ge) = &raw.gilbert_elliott else {
        return Ok(if raw.loss > 0.0 {
            LossModel::Bernoulli(loss)
        } else {
            LossModel::None
        });
    };
    if raw.loss != 0.0 {
        return Err((
            "gilbert_elliott".into(),
            "give either `loss` or `gilbert_elliott`".into(),
        ));
    }
    Ok(LossModel::GilbertElliott(GilbertElliott {
        p: probability("gilbert_elliott.p", ge.p)?,
        r: probability("gilbert_elliott.r", ge.r)?,
        loss_good: probability("gilbert_elliott.loss_good", ge.loss_good)?,
        loss_bad: probability("gilbert_elliott.loss_bad", ge.loss_bad)?,
    }))
}
