//! What a trial produced ([`TrialResult`]), where it ran ([`Mode`]), and
//! the helpers every workload and system uses to record metrics, so that
//! names and units stay alike across them.

use netsim::{LinkStats, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where a trial runs.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// In the deterministic simulator.
    #[default]
    Simulator,
    /// On real kernels and interfaces, in network namespaces.
    Real,
}

impl Mode {
    /// The mode in words: "the simulator", "real mode".
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Simulator => "the simulator",
            Mode::Real => "real mode",
        }
    }
}

/// Everything one trial produced. Written as `trials/<variant>/<n>.json`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct TrialResult {
    /// The variant's name.
    pub variant: String,
    /// The trial's index within the variant, from 0.
    pub trial: u32,
    /// The seed every random source of the trial derived from.
    pub seed: u64,
    /// Whether the workload finished before the time limit.
    pub completed: bool,
    /// Why the trial stopped: `finished`, `time_limit`, `idle` (nothing
    /// left to happen, simulator), `stopped` (interrupted while it ran, real
    /// mode), `interrupted` (not started: the run was interrupted first) or
    /// `error` (it could not run).
    pub stop: String,
    /// Time at the end, seconds (virtual time; wall-clock in real mode).
    pub end_s: f64,
    /// Simulator events processed (a measure of work, for speed figures;
    /// 0 in real mode).
    pub events: u64,
    /// The workload's scalar metrics (see `docs/experiments.md`).
    pub metrics: BTreeMap<String, f64>,
    /// Per-packet, per-frame or per-flow values, for distributions.
    pub distributions: BTreeMap<String, Vec<f64>>,
    /// Each link's counters.
    pub links: Vec<LinkReport>,
    /// Why connections closed abnormally, if any did (`client: …`).
    pub errors: Vec<String>,
    /// The data sender's connection sampled over time, one array per
    /// variable (empty unless the scenario sets `sample_interval`).
    pub series: BTreeMap<String, Vec<f64>>,
    /// What the middle system's engine counted by the trial's end, as a
    /// router daemon reports it (`System::stats`); recorded only when the
    /// run asks for it (`pepkit compare`), absent otherwise.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub middle: serde_json::Value,
}

impl TrialResult {
    /// A finished trial's result before the workload's metrics: how it
    /// stopped, when, and the simulator events it took.
    pub(crate) fn new(
        variant: &str,
        trial: u32,
        seed: netsim::Seed,
        stop: &str,
        end: Time,
        events: u64,
    ) -> TrialResult {
        TrialResult {
            variant: variant.to_string(),
            trial,
            seed: seed.value(),
            completed: false,
            stop: stop.to_string(),
            end_s: end.as_secs_f64(),
            events,
            metrics: BTreeMap::new(),
            distributions: BTreeMap::new(),
            links: Vec::new(),
            errors: Vec::new(),
            series: BTreeMap::new(),
            middle: serde_json::Value::Null,
        }
    }

    /// A trial that could not run, and why.
    pub(crate) fn failed(
        variant: &str,
        trial: u32,
        seed: netsim::Seed,
        why: String,
    ) -> TrialResult {
        let mut result = TrialResult::new(variant, trial, seed, "error", Time::ZERO, 0);
        result.errors.push(why);
        result
    }

    /// A trial not run because the run was interrupted first.
    pub(crate) fn interrupted(variant: &str, trial: u32, seed: netsim::Seed) -> TrialResult {
        let mut result = TrialResult::failed(variant, trial, seed, "interrupted".into());
        result.stop = "interrupted".into();
        result.errors = vec!["not run: the run was interrupted before it started".into()];
        result
    }

    /// Whether an interruption stopped the trial or kept it from starting.
    pub fn interrupted_run(&self) -> bool {
        self.stop == "interrupted" || self.stop == "stopped"
    }

    /// Adds the links' counters, also as `link_<hop>_<direction>_packets`
    /// and `_bytes` metrics (what each link carried, for overhead
    /// comparisons like Sidekick's Figure 7).
    pub(crate) fn add_links(&mut self, links: Vec<LinkReport>) {
        for link in &links {
            let stem = format!("link_{}", link.link.replace('/', "_"));
            self.metrics
                .insert(format!("{stem}_packets"), link.offered_packets as f64);
            self.metrics
                .insert(format!("{stem}_bytes"), link.offered_bytes as f64);
        }
        self.links.extend(links);
    }

    /// Records a metric.
    pub(crate) fn set(&mut self, name: impl Into<String>, value: f64) {
        self.metrics.insert(name.into(), value);
    }
}

/// One direction of one hop, as a trial file reports it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct LinkReport {
    /// `<hop>/forward` (client → server) or `<hop>/reverse`.
    pub link: String,
    /// Packets offered to the link.
    pub offered_packets: u64,
    /// Bytes offered to the link.
    pub offered_bytes: u64,
    /// Packets it delivered.
    pub delivered_packets: u64,
    /// Bytes it delivered.
    pub delivered_bytes: u64,
    /// Lost to the random loss model.
    pub dropped_loss: u64,
    /// Dropped by a full buffer.
    pub dropped_buffer: u64,
    /// Dropped by RED, early or forced.
    pub dropped_red: u64,
    /// The largest queue an arrival saw, bytes.
    pub max_queue_bytes: u64,
}

impl LinkReport {
    /// The report of link `link` from its counters.
    pub(crate) fn new(link: String, stats: &LinkStats) -> LinkReport {
        LinkReport {
            link,
            offered_packets: stats.offered.packets,
            offered_bytes: stats.offered.bytes,
            delivered_packets: stats.delivered.packets,
            delivered_bytes: stats.delivered.bytes,
            dropped_loss: stats.dropped_loss.packets,
            dropped_buffer: stats.dropped_buffer.packets,
            dropped_red: stats.dropped_red_early.packets + stats.dropped_red_forced.packets,
            max_queue_bytes: stats.max_queue_bytes,
        }
    }

    /// Both directions of hop `name`.
    pub(crate) fn hop(name: &str, forward: &LinkStats, reverse: &LinkStats) -> [LinkReport; 2] {
        [
            LinkReport::new(format!("{name}/forward"), forward),
            LinkReport::new(format!("{name}/reverse"), reverse),
        ]
    }
}

/// How one flow's metrics are named: a chain's single flow reports
/// `goodput_mbps` and `client: …` errors; a named flow of `[[flows]]`
/// reports `goodput_mbps_<slug>` and `A client: …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FlowNames {
    /// Appended to every metric name: empty, or `_<slug>`.
    pub suffix: String,
    /// Put before `client` and `server` in errors: empty, or `<name> `.
    pub who: String,
    /// Whether this flow's data sender's time series is recorded (only
    /// one flow's: the scenario's `sample_flow`).
    pub series: bool,
    /// A named flow's index (seed labels of its engines end in `/<index>`).
    pub index: Option<usize>,
}

impl FlowNames {
    /// The names of a chain's one flow.
    pub(crate) fn single() -> FlowNames {
        FlowNames {
            suffix: String::new(),
            who: String::new(),
            series: true,
            index: None,
        }
    }

    /// The names of flow `index` called `name` on a dumbbell, and whether
    /// its series is the one recorded.
    pub(crate) fn named(index: usize, name: &str, series: bool) -> FlowNames {
        FlowNames {
            suffix: format!("_{}", slug(name)),
            who: format!("{name} "),
            series,
            index: Some(index),
        }
    }

    /// A seed label for one of this flow's engines: `base`, or
    /// `base/<index>` for a named flow.
    pub(crate) fn label(&self, base: &str) -> String {
        match self.index {
            None => base.to_string(),
            Some(index) => format!("{base}/{index}"),
        }
    }

    /// `metric` with this flow's suffix.
    pub(crate) fn metric(&self, metric: &str) -> String {
        format!("{metric}{}", self.suffix)
    }

    /// `client` or `server` as this flow's errors name them.
    pub(crate) fn who(&self, side: &str) -> String {
        format!("{}{side}", self.who)
    }
}

/// A file-name-safe form of a name: `split 1%` → `split-1pct`.
pub fn slug(name: &str) -> String {
    let mut slug = String::new();
    for c in name.replace('%', "pct").chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_matches('-').to_string()
}

/// A duration in milliseconds.
pub(crate) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The nearest-rank percentile `p` (0–100) of sorted values: the value at
/// rank ⌈p/100 · n⌉, as the rtc and short-flow reports define theirs.
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

/// Adds `<name>_p50_ms`, `_p90_ms`, `_p99_ms` and the distribution `<name>_ms`.
pub(crate) fn add_distribution(result: &mut TrialResult, name: &str, values: &[Duration]) {
    let values: Vec<f64> = values.iter().copied().map(millis).collect();
    if !values.is_empty() {
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for p in [50.0, 90.0, 99.0] {
            result
                .metrics
                .insert(format!("{name}_p{p}_ms"), nearest_rank(&sorted, p));
        }
    }
    result.distributions.insert(format!("{name}_ms"), values);
}

/// Records why `who`'s connection closed, if it closed abnormally.
pub(crate) fn add_error(result: &mut TrialResult, who: &str, record: Option<&quic::ConnRecord>) {
    if let Some(error) = record.and_then(|r| r.error.as_ref()) {
        result.errors.push(format!("{who}: {error}"));
    }
}

/// The data sender's loss counters and, for the flow whose series is
/// recorded, its sampled time series.
pub(crate) fn add_sender(
    result: &mut TrialResult,
    names: &FlowNames,
    record: Option<&quic::ConnRecord>,
) {
    let Some(record) = record else {
        return;
    };
    if names.series {
        add_series(result, record);
    }
    let stats = &record.stats;
    result.set(
        names.metric("sender_lost_packets"),
        stats.lost_packets as f64,
    );
    result.set(
        names.metric("sender_sent_packets"),
        stats.sent_packets as f64,
    );
    // Packets it declared lost and then saw acknowledged: retransmissions
    // it need not have sent (behind a tunnel, often what the tunnel
    // repaired late).
    result.set(
        names.metric("sender_spurious_losses"),
        stats.spurious_losses as f64,
    );
}

/// The sender's sampled time series, if it was sampled.
fn add_series(result: &mut TrialResult, record: &quic::ConnRecord) {
    if record.samples.is_empty() {
        return;
    }
    let mut column = |name: &str, value: &dyn Fn(&quic::Sample) -> f64| {
        let values = record.samples.iter().map(value).collect();
        result.series.insert(name.to_string(), values);
    };
    column("t_s", &|s| s.at.as_secs_f64());
    column("cwnd_bytes", &|s| s.cwnd_bytes as f64);
    // Only controllers that set a pacing rate (BBR) have one.
    if record.samples.iter().any(|s| s.pacing_rate.is_some()) {
        column("pacing_mbps", &|s| {
            s.pacing_rate.map_or(0.0, |r| r.bits_per_sec() as f64 / 1e6)
        });
    }
    column("srtt_ms", &|s| millis(s.smoothed_rtt));
    column("bytes_in_flight", &|s| s.bytes_in_flight as f64);
    column("lost_packets", &|s| s.lost_packets as f64);
    column("spurious_congestion_events", &|s| {
        s.spurious_congestion_events as f64
    });
}

/// The window a scenario measures throughput and RTTs over
/// (`measure = { from, until }`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Its start (virtual time since the trial began).
    pub from: Time,
    /// Its end.
    pub until: Time,
}

/// How each flow's RTT samples are grouped and compared
/// (`measure.rtt_intervals`, `measure.rtt_resolution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttIntervals {
    /// The intervals' length, in send time.
    pub length: std::time::Duration,
    /// The RTT measurement's resolution: two intervals' values closer
    /// than what it can resolve are equal (zero: full resolution).
    pub resolution: std::time::Duration,
}

/// A named part of the measurement window (`measure.phases`): each flow's
/// throughput in it is `throughput_mbps_<name>_<flow>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// Its name, as metric names carry it (a slug).
    pub name: String,
    /// When.
    pub window: Window,
}

impl Window {
    /// Its length, seconds.
    pub fn seconds(&self) -> f64 {
        self.until
            .saturating_duration_since(self.from)
            .as_secs_f64()
    }
}

/// The RTT percentiles of the packets `record`'s endpoint sent and saw
/// acknowledged in the window: `rtt_p50_ms`, `_p95_ms`, `_p99_ms`, and
/// the connection's smallest RTT, `rtt_min_ms`.
pub(crate) fn add_rtts(
    result: &mut TrialResult,
    names: &FlowNames,
    record: Option<&quic::ConnRecord>,
) {
    let Some(record) = record else {
        return;
    };
    let percentiles = record.rtt.percentiles(&[50.0, 95.0, 99.0]);
    for (p, value) in ["p50", "p95", "p99"].iter().zip(&percentiles) {
        result.set(names.metric(&format!("rtt_{p}_ms")), millis(*value));
    }
    if let Some(min) = record.rtt.min() {
        result.set(names.metric("rtt_min_ms"), millis(min));
    }
}

/// A flow's throughput in the window (`throughput_mbps`, from the bytes
/// its receiving application took), and its throughput over the whole
/// trial in 100 ms bins up to `series_until`, the time limit (the series
/// `throughput_mbps`), so that a figure shows flows arriving and leaving
/// outside the window too.
pub(crate) fn add_throughput(
    result: &mut TrialResult,
    names: &FlowNames,
    log: &quic::DeliveryLog,
    total: u64,
    window: Window,
    series_until: Time,
) {
    let bytes = log.bytes_between(window.from, window.until, total);
    let mbps = bytes as f64 * 8.0 / window.seconds() / 1e6;
    result.set(names.metric("throughput_mbps"), mbps);
    result.series.insert(
        names.metric("throughput_mbps"),
        log.rates_mbps(series_until.max(window.until), total),
    );
}

/// The flow's throughput in each phase of the window,
/// `throughput_mbps_<phase>` with the flow's suffix.
pub(crate) fn add_phase_throughputs(
    result: &mut TrialResult,
    names: &FlowNames,
    log: &quic::DeliveryLog,
    total: u64,
    phases: &[Phase],
) {
    for phase in phases {
        let window = phase.window;
        let bytes = log.bytes_between(window.from, window.until, total);
        let mbps = bytes as f64 * 8.0 / window.seconds() / 1e6;
        result.set(
            names.metric(&format!("throughput_mbps_{}", phase.name)),
            mbps,
        );
    }
}

/// Jain's fairness index (Σx)² / (n · Σx²): 1 when all are equal, 1/n
/// when one takes everything (1 for no or all-zero values).
pub(crate) fn jain_index(values: impl IntoIterator<Item = f64>) -> f64 {
    let (mut n, mut sum, mut squares) = (0.0, 0.0, 0.0);
    for x in values {
        n += 1.0;
        sum += x;
        squares += x * x;
    }
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (n * squares)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_is_one_for_equal_shares_and_one_over_n_for_a_hog() {
        assert!((jain_index([3.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index([4.0, 0.0]) - 0.5).abs() < 1e-12);
        // (1 + 3)² / (2 · (1 + 9)) = 0.8
        assert!((jain_index([1.0, 3.0]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("split CUBIC, 1% loss"), "split-cubic-1pct-loss");
        assert_eq!(slug("  QUIC/e2e "), "quic-e2e");
    }

    #[test]
    fn flow_names_suffix_metrics_and_errors() {
        let flow = FlowNames::named(1, "Flow B", false);
        assert_eq!(flow.metric("goodput_mbps"), "goodput_mbps_flow-b");
        assert_eq!(flow.who("client"), "Flow B client");
        assert!(!flow.series);
        assert_eq!(FlowNames::single().metric("goodput_mbps"), "goodput_mbps");
    }
}
