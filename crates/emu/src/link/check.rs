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
use crate::driver::RunUntil;
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

/// Runs a source to a sink through a one-hop testbed with `hop`.
fn stream(
    hop: LinkConfig,
    seed: u64,
    source: impl FnOnce(SocketAddr, SocketAddr) -> CbrSource,
    limit: Duration,
) -> Result<(Sink, RelayReport), TestbedError> {
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
    let instrument = |until| HostRunSpec {
        realtime: true,
        ..HostRunSpec::new(until, deadline, stop.clone())
    };
    let sink = testbed.run_host(
        testbed.server(),
        Sink::new(),
        vec![dst],
        &instrument(RunUntil::Stopped),
    )?;
    let source = testbed.run_host(
        testbed.client(),
        source(src, dst),
        vec![src],
        &instrument(RunUntil::Finished),
    )?;
    source.join()?;
    stop.store(true, Ordering::Relaxed);
    let sink = sink.join()?.host;
    let relay = testbed.stop_relay().unwrap_or_default();
    Ok((sink, relay))
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
    let (measured_rate, rate_packets) = rate_phase(config, limit)?;
    let rate_mbps = config.rate.bits_per_sec() as f64 / 1e6;
    let delay_ms = config.delay.as_secs_f64() * 1e3;
    Ok(LinkCheckReport {
        added_delay: delay.added_delay,
        probes_sent: delay.sent,
        probes_received: delay.received,
        rate_packets,
        comparisons: vec![
            Comparison::new(
                "rate",
                rate_mbps,
                measured_rate / 1e6,
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
    let (sink, relay) = stream(
        hop,
        config.seed,
        |src, dst| {
            CbrSource::new(src, dst, probe_len, interval, count)
                .with_linger(config.delay * 2 + Duration::from_millis(200))
        },
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

/// The rate phase: full-size datagrams at 1.25× the rate into a
/// 100-packet buffer, no loss. Returns the delivered bits per second over
/// the saturated part of the run and the datagrams it counted.
fn rate_phase(config: &LinkCheckConfig, limit: Duration) -> Result<(f64, u64), TestbedError> {
    let payload = 1472usize;
    let wire = (payload + 28) as u64;
    let per_packet = config.rate.transmit_time(wire).mul_f64(0.8);
    let rate_count = (config.duration.as_secs_f64() / per_packet.as_secs_f64()) as u64;
    let hop =
        LinkConfig::constant(config.delay, config.rate).with_buffer(BufferLimit::Packets(100));
    let (rate_sink, _) = stream(
        hop,
        config.seed + 1,
        |src, dst| {
            CbrSource::new(src, dst, payload, per_packet, rate_count)
                .with_linger(config.delay * 2 + Duration::from_millis(200))
        },
        limit,
    )?;
    let arrivals = rate_sink.arrivals();
    // Skip the first 10% (the queue filling) and measure from there on.
    let skip = arrivals.len() / 10;
    Ok(match (arrivals.get(skip), arrivals.last()) {
        (Some(first), Some(last)) if last.at > first.at => {
            let bytes: u64 = arrivals[skip + 1..].iter().map(|a| a.wire_len as u64).sum();
            let span = last.at - first.at;
            (
                bytes as f64 * 8.0 / span.as_secs_f64(),
                (arrivals.len() - skip) as u64,
            )
        }
        _ => (0.0, 0),
    })
}
