//! `pepkit testbed check`: how closely the emulated link matches its
//! configuration, measured through a real testbed with the simulator's own
//! test hosts ([`netsim::testing::CbrSource`] and [`netsim::testing::Sink`])
//! on the host driver.
//!
//! Two phases, each on a fresh one-hop testbed:
//! 1. **Delay and loss**: a constant stream of small probes (1000 packets/s
//!    by default, well under the rate) through the link with its delay and
//!    loss; each probe carries its send time, so the receiver measures the
//!    one-way delay. The *added* delay is that minus the probe's
//!    transmission time at the configured rate.
//! 2. **Rate**: full-size datagrams offered at 1.25× the rate into a
//!    100-packet drop-tail buffer, no loss; the delivered IP bytes per
//!    second over the saturated part of the run is the measured rate.

use super::{Lateness, RelayReport};
use crate::RealClock;
use crate::driver::{DriverStats, RunUntil};
use crate::testbed::{HostRunSpec, Testbed, TestbedError, TestbedSpec};
use netsim::testing::{CbrSource, Sink};
use netsim::{BufferLimit, HopConfig, LinkConfig, LossModel, Probability, Rate, Seed};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What to check.
#[derive(Clone, Debug)]
pub struct LinkCheckConfig {
    /// The link's propagation delay.
    pub delay: Duration,
    /// Its rate.
    pub rate: Rate,
    /// Its Bernoulli loss probability.
    pub loss: f64,
    /// Probes per second in the delay phase.
    pub probe_rate: u32,
    /// How long each phase sends.
    pub duration: Duration,
    /// Seeds the link's loss.
    pub seed: u64,
}

impl Default for LinkCheckConfig {
    /// 25 ms, 10 Mbit/s, 1% loss, 1000 probes/s, 5 s per phase.
    fn default() -> Self {
        LinkCheckConfig {
            delay: Duration::from_millis(25),
            rate: Rate::from_mbps(10),
            loss: 0.01,
            probe_rate: 1000,
            duration: Duration::from_secs(5),
            seed: 1,
        }
    }
}

/// Percentiles of a delay, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct DelayPercentiles {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// One measured quantity against its configuration and tolerance.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// What it is.
    pub quantity: String,
    /// The configured value.
    pub configured: f64,
    /// The measured value.
    pub measured: f64,
    /// The largest accepted difference.
    pub tolerance: f64,
    /// The unit of the three numbers.
    pub unit: String,
    /// Whether the difference is within the tolerance.
    pub ok: bool,
}

impl Comparison {
    fn new(quantity: &str, configured: f64, measured: f64, tolerance: f64, unit: &str) -> Self {
        Comparison {
            quantity: quantity.to_string(),
            configured,
            measured,
            tolerance,
            unit: unit.to_string(),
            ok: (measured - configured).abs() <= tolerance,
        }
    }
}

/// The result of a check.
#[derive(Clone, Debug, Serialize)]
pub struct LinkCheckReport {
    /// Added one-way delay of the probes.
    pub added_delay: DelayPercentiles,
    /// Probes sent and received.
    pub probes_sent: u64,
    /// Probes received.
    pub probes_received: u64,
    /// Full-size datagrams received in the rate phase's measured window.
    pub rate_packets: u64,
    /// Where the rate phase's datagrams went.
    pub rate_path: RatePath,
    /// What held the delivered rate below the configured one, if it is
    /// outside its tolerance.
    pub rate_limit: Option<RateLimit>,
    /// The comparisons: rate, p99 added delay, loss.
    pub comparisons: Vec<Comparison>,
    /// How late the relay sent frames in the delay phase.
    pub lateness: Lateness,
}

impl LinkCheckReport {
    /// Whether every comparison is within its tolerance.
    pub fn ok(&self) -> bool {
        self.comparisons.iter().all(|c| c.ok)
    }
}

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);

/// What a stream from the source to the sink left behind.
struct Streamed {
    sink: Sink,
    source: DriverStats,
    relay: RelayReport,
}

/// Runs a source to a sink through a one-hop testbed with `hop`; the
/// source's thread is real-time if `punctual_source` (the delay phase's
/// probes carry their send times).
fn stream(
    hop: LinkConfig,
    seed: u64,
    source: impl FnOnce(SocketAddr, SocketAddr) -> CbrSource,
    punctual_source: bool,
    limit: Duration,
) -> Result<Streamed, TestbedError> {
    let clock = RealClock::start();
    let spec = TestbedSpec {
        client: CLIENT,
        server: SERVER,
        hops: vec![HopConfig::symmetric(hop)],
        extra: Vec::new(),
        client_extra: Vec::new(),
        server_extra: Vec::new(),
        seed: Seed::new(seed),
    };
    let mut testbed = Testbed::build(&spec, clock)?;
    let (src, dst) = (
        SocketAddr::new(CLIENT.into(), 9000),
        SocketAddr::new(SERVER.into(), 9000),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = clock.now() + limit;
    // The probes are the instruments: their threads wake punctually, like
    // the relay's, so the check measures the emulator, not the scheduler.
    // A busy probe wakes every 100 µs at most, sending what fell due in
    // between (each probe stamped when it leaves). A source that is not
    // punctual runs as an ordinary thread: it gets the CPU the relay and
    // the sink leave, so at rates beyond what the host can carry it offers
    // less instead of starving the sink.
    let instrument = |until, realtime| HostRunSpec {
        realtime,
        min_wake: Duration::from_micros(100),
        ..HostRunSpec::new(until, deadline, stop.clone())
    };
    let sink = testbed.run_host(
        testbed.server(),
        Sink::new(),
        vec![dst],
        &instrument(RunUntil::Stopped, true),
    )?;
    let source = testbed.run_host(
        testbed.client(),
        source(src, dst),
        vec![src],
        &instrument(RunUntil::Finished, punctual_source),
    )?;
    let source = source.join()?.stats;
    stop.store(true, Ordering::Relaxed);
    let sink = sink.join()?.host;
    let relay = testbed.stop_relay().unwrap_or_default();
    Ok(Streamed {
        sink,
        source,
        relay,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs both phases and compares.
pub fn run(config: &LinkCheckConfig) -> Result<LinkCheckReport, TestbedError> {
    let loss = Probability::new(config.loss).map_err(|e| TestbedError::Other(e.to_string()))?;
    let limit = config.duration + config.delay * 4 + Duration::from_secs(3);
    let delay = delay_phase(config, loss, limit)?;
    let rate = rate_phase(config, limit)?;
    let rate_mbps = config.rate.bits_per_sec() as f64 / 1e6;
    let delay_ms = config.delay.as_secs_f64() * 1e3;
    let configured = config.rate.bits_per_sec() as f64;
    let rate_limit = (rate.rate_bps < 0.95 * configured)
        .then(|| RateLimit::of(&rate.path, rate.rate_bps, configured))
        .flatten();
    Ok(LinkCheckReport {
        added_delay: delay.added_delay,
        probes_sent: delay.sent,
        probes_received: delay.received,
        rate_packets: rate.packets,
        rate_path: rate.path,
        rate_limit,
        comparisons: vec![
            Comparison::new(
                "rate",
                rate_mbps,
                rate.rate_bps / 1e6,
                0.05 * rate_mbps,
                "Mbit/s",
            ),
            Comparison::new(
                "added delay, p99",
                delay_ms,
                delay.added_delay.p99_ms,
                2.0,
                "ms",
            ),
            Comparison::new(
                "loss",
                config.loss,
                delay.measured_loss,
                delay.loss_tolerance,
                "fraction",
            ),
        ],
        lateness: delay.lateness,
    })
}

/// What the delay and loss phase measured.
struct DelayPhase {
    added_delay: DelayPercentiles,
    sent: u64,
    received: u64,
    measured_loss: f64,
    /// Four standard deviations of the loss, at least one packet's worth.
    loss_tolerance: f64,
    lateness: Lateness,
}

/// The delay and loss phase: small probes, well under the rate, through
/// the link with its delay and loss.
fn delay_phase(
    config: &LinkCheckConfig,
    loss: Probability,
    limit: Duration,
) -> Result<DelayPhase, TestbedError> {
    let probe_len = 200usize;
    let interval = Duration::from_secs(1) / config.probe_rate.max(1);
    let count = (config.duration.as_secs_f64() * f64::from(config.probe_rate)) as u64;
    let hop = LinkConfig::constant(config.delay, config.rate)
        .with_buffer(BufferLimit::Packets(10_000))
        .with_loss(if config.loss > 0.0 {
            LossModel::Bernoulli(loss)
        } else {
            LossModel::None
        });
    let Streamed { sink, relay, .. } = stream(
        hop,
        config.seed,
        |src, dst| {
            CbrSource::new(src, dst, probe_len, interval, count)
                .with_linger(config.delay * 2 + Duration::from_millis(200))
        },
        true,
        limit,
    )?;
    // Transmission time of a probe (IP length) at the configured rate.
    let transmission = config.rate.transmit_time((probe_len + 28) as u64);
    let mut added: Vec<f64> = sink
        .arrivals()
        .iter()
        .filter_map(|a| a.one_way_delay())
        .map(|d| d.saturating_sub(transmission).as_secs_f64() * 1e3)
        .collect();
    added.sort_by(f64::total_cmp);
    let added_delay = DelayPercentiles {
        p50_ms: percentile(&added, 50.0),
        p90_ms: percentile(&added, 90.0),
        p99_ms: percentile(&added, 99.0),
        max_ms: added.last().copied().unwrap_or(f64::NAN),
    };
    let received = sink.arrivals().len() as u64;
    let measured_loss = 1.0 - received as f64 / count.max(1) as f64;
    // Four standard deviations of a binomial proportion, at least one
    // packet's worth.
    let sigma = (config.loss * (1.0 - config.loss) / count.max(1) as f64).sqrt();
    let loss_tolerance = (4.0 * sigma).max(1.0 / count.max(1) as f64);
    Ok(DelayPhase {
        added_delay,
        sent: count,
        received,
        measured_loss,
        loss_tolerance,
        lateness: relay.lateness,
    })
}

/// Where the rate phase's datagrams went, from the source to the sink,
/// and how fast they were offered: what tells a link that delivers less
/// than its rate from an instrument or a relay that could not keep up.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RatePath {
    /// The rate the source offered, in bit/s (IP lengths, from the first
    /// and last datagram that arrived).
    pub offered_bps: f64,
    /// Datagrams the source's socket took.
    pub sent: u64,
    /// Datagrams the source's socket refused.
    pub send_errors: u64,
    /// Frames the kernel dropped on the relay's ports before it read them.
    pub relay_kernel_drops: u64,
    /// Frames offered to the forward link.
    pub link_offered: u64,
    /// Frames the forward link dropped from its full buffer.
    pub link_dropped_buffer: u64,
    /// Frames the kernel would not take from the relay.
    pub relay_send_failures: u64,
    /// Datagrams the sink received.
    pub received: u64,
    /// How late the relay sent the frames.
    pub lateness: Lateness,
}

/// What held the rate phase's delivered rate below the configured one,
/// when it is outside its tolerance ([`LinkCheckReport::rate_limit`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RateLimit {
    /// The source could not offer 1.1× the rate: the instrument's limit,
    /// not the link's.
    Source {
        /// What it offered, in Mbit/s.
        offered_mbps: f64,
    },
    /// The relay could not keep up (more than 1% of the frames sent over
    /// 1 ms late, or dropped by its sockets before it read them): the
    /// emulator's capacity on this host, which it delivers.
    Relay {
        /// The rate it delivered, in Mbit/s.
        delivered_mbps: f64,
    },
    /// The sink received fewer datagrams than the link delivered: the
    /// instrument's limit.
    Sink {
        /// Datagrams the link delivered that the sink did not receive.
        missed: u64,
    },
}

impl RateLimit {
    /// What limited a rate phase that measured `measured_bps` against
    /// `configured_bps`, from where its datagrams went; `None` if nothing
    /// stands out.
    pub fn of(path: &RatePath, measured_bps: f64, configured_bps: f64) -> Option<RateLimit> {
        let delivered = path.link_offered.saturating_sub(path.link_dropped_buffer);
        if 100 * path.lateness.over_1ms > path.lateness.frames.max(1)
            || 100 * path.relay_kernel_drops > path.sent.max(1)
        {
            Some(RateLimit::Relay {
                delivered_mbps: measured_bps / 1e6,
            })
        } else if 100 * path.received < 99 * delivered {
            Some(RateLimit::Sink {
                missed: delivered - path.received,
            })
        } else if path.offered_bps < 1.1 * configured_bps {
            Some(RateLimit::Source {
                offered_mbps: path.offered_bps / 1e6,
            })
        } else {
            None
        }
    }
}

/// What the rate phase measured.
struct RatePhase {
    /// Delivered bits per second over the saturated part of the run.
    rate_bps: f64,
    /// The datagrams it counted.
    packets: u64,
    path: RatePath,
}

/// The rate phase: full-size datagrams at 1.25× the rate into a
/// 100-packet buffer, no loss.
fn rate_phase(config: &LinkCheckConfig, limit: Duration) -> Result<RatePhase, TestbedError> {
    let payload = 1472usize;
    let wire = (payload + 28) as u64;
    let per_packet = config.rate.transmit_time(wire).mul_f64(0.8);
    let rate_count = (config.duration.as_secs_f64() / per_packet.as_secs_f64()) as u64;
    let hop =
        LinkConfig::constant(config.delay, config.rate).with_buffer(BufferLimit::Packets(100));
    let streamed = stream(
        hop,
        config.seed + 1,
        |src, dst| {
            CbrSource::new(src, dst, payload, per_packet, rate_count)
                .with_linger(config.delay * 2 + Duration::from_millis(200))
        },
        false,
        limit,
    )?;
    let arrivals = streamed.sink.arrivals();
    let forward = streamed
        .relay
        .links
        .first()
        .map(|l| l.0)
        .unwrap_or_default();
    let probes = || arrivals.iter().filter_map(|a| a.probe);
    let offered_bps = match (
        probes().min_by_key(|p| p.seq),
        probes().max_by_key(|p| p.seq),
    ) {
        (Some(first), Some(last)) if last.sent_at > first.sent_at => {
            (last.seq - first.seq) as f64 * wire as f64 * 8.0
                / (last.sent_at - first.sent_at).as_secs_f64()
        }
        _ => 0.0,
    };
    let path = RatePath {
        offered_bps,
        sent: streamed.source.sent,
        send_errors: streamed.source.send_errors,
        relay_kernel_drops: streamed.relay.kernel_drops,
        link_offered: forward.offered.packets,
        link_dropped_buffer: forward.dropped_buffer.packets,
        relay_send_failures: streamed.relay.send_failures,
        received: arrivals.len() as u64,
        lateness: streamed.relay.lateness,
    };
    // Skip the first 10% (the queue filling) and measure from there on.
    let skip = arrivals.len() / 10;
    let (rate_bps, packets) = match (arrivals.get(skip), arrivals.last()) {
        (Some(first), Some(last)) if last.at > first.at => {
            let bytes: u64 = arrivals[skip + 1..].iter().map(|a| a.wire_len as u64).sum();
            let span = last.at - first.at;
            (
                bytes as f64 * 8.0 / span.as_secs_f64(),
                (arrivals.len() - skip) as u64,
            )
        }
        _ => (0.0, 0),
    };
    Ok(RatePhase {
        rate_bps,
        packets,
        path,
    })
}
