//! PEMI: the transparent in-path middlebox for unmodified QUIC
//! ([`pemi::Pemi`], docs/pemi.md). It infers losses on the protected
//! receiver's side of its node from the timing of the replies, resends
//! them byte-identical, measures the RTT (handshake, matched pairs, the
//! spin bit, ICMP echo to the receiver) and enforces a Copa-derived rate.
//! Nothing runs beside the endpoints; it protects every QUIC connection
//! through its node.
//!
//! ```toml
//! middle = { kind = "pemi" }                     # the paper's §6 settings
//! middle = { kind = "pemi", enforcement = "reorder", tail_grace = "0ms" }
//! ```
//!
//! In the simulator it also measures itself against the ground truth
//! (the fates of the packets on the hops next to its node): inference
//! precision and recall, the share of real losses it repaired before the
//! endpoint could, spurious retransmissions, and the error of its RTT
//! estimate.

use super::settings::settings;
use super::{
    Facts, NodeTruth, OnTestbed, Placement, Problem, System, TrialSetup, engine_as, wrong_middle,
};
use crate::outcome::TrialResult;
use crate::units::{Bytes, Span};
use ::pemi::{Enforcement, Pemi, PemiConfig, Side};
use netsim::{Middlebox, Time};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// PEMI's own address, the source of its ICMP echo probes (not on any
/// host's subnet).
pub const PEMI_PROBE: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 255, 255, 2));

/// PEMI's settings: the engine's, as a scenario writes them.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawPemi", into = "RawPemi")]
pub struct PemiSettings {
    config: PemiConfig,
}

/// The engine's defaults: the paper's §6 settings ([`PemiConfig::default`]).
fn base() -> PemiConfig {
    PemiConfig::default()
}

/// Hundredths as a ratio.
fn ratio(percent: u64) -> f64 {
    percent as f64 / 100.0
}

settings! {
    /// PEMI's settings as written; defaults are the engine's
    /// ([`PemiConfig::default`], the paper's §6 values).
    pub(crate) struct RawPemi {
        /// α: the flowlet timeout is α times the smoothed packet interval.
        alpha: u32 = base().alpha,
        /// β: the matching margin is β times the flowlet timeout (0..=10).
        beta: f64 = ratio(u64::from(base().beta_percent)),
        /// Packets closer than this are acknowledged as one (§4.3.1).
        close_interval: Span = Span(base().close_interval),
        /// N: a flowlet of more packets is not protected (at least 2).
        max_flowlet: usize = base().max_flowlet,
        /// Retransmit only while retransmissions are at most this share of
        /// the forwarded packets (0..=1).
        retransmit_cap: f64 = ratio(base().retransmit_cap_percent),
        /// Above this reply/sent ratio the receiver acknowledges every
        /// packet (0..=1).
        threshold_ratio: f64 = ratio(base().threshold_ratio_percent),
        /// Protected packets left out at the start of the reply ratio.
        threshold_window: u64 = base().threshold_window,
        /// The fresh-RTT width ratio (0..=1).
        width_ratio: f64 = ratio(base().width_ratio_percent),
        /// The tail grace ("0ms": the paper's rule alone).
        tail_grace: Span = Span(base().tail_grace.unwrap_or_default()),
        /// Run the Copa-derived rate control (never withholds
        /// retransmissions or slows replies when off).
        congestion_control: bool = true,
        /// How a sender over its target rate is slowed: "off", "delay",
        /// "reorder" or "both".
        enforcement: Enforcement = base().enforcement,
        /// Calibrate the RTT from the spin bit.
        spin: bool = true,
        /// Calibrate the RTT with ICMP echo probes from the system's
        /// address.
        icmp: bool = true,
        /// Connections idle this long are forgotten.
        idle_timeout: Span = Span(base().idle_timeout),
        /// Handshakes not completed within this are forgotten.
        handshake_timeout: Span = Span(base().handshake_timeout),
        /// The most connections tracked.
        max_connections: usize = base().max_connections,
        /// The most connections in their handshake (a newer Initial evicts
        /// the oldest).
        max_handshakes: usize = base().max_handshakes,
        /// Bytes buffered for retransmission per connection.
        buffer_per_connection: Bytes = Bytes(base().buffer_per_connection as u64),
        /// Bytes buffered for retransmission in all.
        buffer_total: Bytes = Bytes(base().buffer_total as u64),
    }
}

/// `value` in hundredths if it lies in `0..=high`.
fn percent(name: &str, value: f64, high: f64) -> Result<u64, String> {
    if (0.0..=high).contains(&value) {
        Ok((value * 100.0).round() as u64)
    } else {
        Err(format!("`{name}` {value} is outside 0..={high}"))
    }
}

impl TryFrom<RawPemi> for PemiSettings {
    type Error = String;

    fn try_from(raw: RawPemi) -> Result<PemiSettings, String> {
        if raw.alpha() == 0 {
            return Err("`alpha` must be at least 1".into());
        }
        if raw.max_flowlet() < 2 {
            return Err("`max_flowlet` must be at least 2".into());
        }
        if raw.threshold_window() == 0 || raw.max_connections() == 0 || raw.max_handshakes() == 0 {
            return Err(
                "`threshold_window`, `max_connections` and `max_handshakes` must be at least 1"
                    .into(),
            );
        }
        let tail_grace = raw.tail_grace().0;
        let config = PemiConfig {
            alpha: raw.alpha(),
            beta_percent: percent("beta", raw.beta(), 10.0)? as u32,
            close_interval: raw.close_interval().0,
            max_flowlet: raw.max_flowlet(),
            retransmit_cap_percent: percent("retransmit_cap", raw.retransmit_cap(), 1.0)?,
            threshold_ratio_percent: percent("threshold_ratio", raw.threshold_ratio(), 1.0)?,
            threshold_window: raw.threshold_window(),
            width_ratio_percent: percent("width_ratio", raw.width_ratio(), 1.0)?,
            tail_grace: (!tail_grace.is_zero()).then_some(tail_grace),
            congestion_control: raw.congestion_control(),
            enforcement: raw.enforcement(),
            spin_calibration: raw.spin(),
            probe_addr: raw.icmp().then_some(PEMI_PROBE),
            idle_timeout: raw.idle_timeout().0,
            handshake_timeout: raw.handshake_timeout().0,
            max_connections: raw.max_connections(),
            max_handshakes: raw.max_handshakes(),
            buffer_per_connection: usize::try_from(raw.buffer_per_connection().0)
                .unwrap_or(usize::MAX),
            buffer_total: usize::try_from(raw.buffer_total().0).unwrap_or(usize::MAX),
            ..base()
        };
        Ok(PemiSettings { config })
    }
}

impl From<PemiSettings> for RawPemi {
    /// Only what differs from the defaults, so that a file's settings
    /// serialise as it wrote them.
    fn from(settings: PemiSettings) -> RawPemi {
        fn differs<T: PartialEq>(value: T, default: T) -> Option<T> {
            (value != default).then_some(value)
        }
        let c = settings.config;
        let d = RawPemi::default();
        RawPemi {
            alpha: differs(c.alpha, d.alpha()),
            beta: differs(ratio(u64::from(c.beta_percent)), d.beta()),
            close_interval: differs(Span(c.close_interval), d.close_interval()),
            max_flowlet: differs(c.max_flowlet, d.max_flowlet()),
            retransmit_cap: differs(ratio(c.retransmit_cap_percent), d.retransmit_cap()),
            threshold_ratio: differs(ratio(c.threshold_ratio_percent), d.threshold_ratio()),
            threshold_window: differs(c.threshold_window, d.threshold_window()),
            width_ratio: differs(ratio(c.width_ratio_percent), d.width_ratio()),
            tail_grace: differs(Span(c.tail_grace.unwrap_or_default()), d.tail_grace()),
            congestion_control: differs(c.congestion_control, d.congestion_control()),
            enforcement: differs(c.enforcement, d.enforcement()),
            spin: differs(c.spin_calibration, d.spin()),
            icmp: differs(c.probe_addr.is_some(), d.icmp()),
            idle_timeout: differs(Span(c.idle_timeout), d.idle_timeout()),
            handshake_timeout: differs(Span(c.handshake_timeout), d.handshake_timeout()),
            max_connections: differs(c.max_connections, d.max_connections()),
            max_handshakes: differs(c.max_handshakes, d.max_handshakes()),
            buffer_per_connection: differs(
                Bytes(c.buffer_per_connection as u64),
                d.buffer_per_connection(),
            ),
            buffer_total: differs(Bytes(c.buffer_total as u64), d.buffer_total()),
        }
    }
}

impl PemiSettings {
    /// The engine's configuration; `record` keeps the log the simulator's
    /// accuracy report reads.
    pub fn config(&self, record: bool) -> PemiConfig {
        PemiConfig {
            record,
            ..self.config.clone()
        }
    }
}

impl System for PemiSettings {
    fn check(&self, facts: &Facts) -> Result<(), Problem> {
        if facts.hops < 2 {
            return wrong_middle("PEMI sits on a node between two hops");
        }
        if facts.kernel_tcp || !facts.workload.quic {
            return wrong_middle("PEMI helps QUIC; the media workload and Linux TCP are not QUIC");
        }
        Ok(())
    }

    fn serves(&self) -> bool {
        false
    }

    fn address(&self) -> Option<IpAddr> {
        self.config.probe_addr
    }

    fn middlebox(&self, _trial: &TrialSetup<'_>) -> Option<Box<dyn Middlebox>> {
        Some(Box::new(Pemi::new(self.config(true))))
    }

    fn on_testbed(&self, trial: &TrialSetup<'_>) -> OnTestbed {
        // In the path: PEMI forwards every datagram itself (and delays
        // replies when it enforces a rate); the driver hands it the echo
        // replies addressed to its probe address.
        let mut config = self.config(false);
        config.probe_addr = config
            .probe_addr
            .map(|probe| trial.own_addr(SocketAddr::new(probe, 0)).ip());
        OnTestbed::Engine {
            engine: Box::new(Pemi::new(config)),
            placement: Placement::InPath,
            local: Vec::new(),
        }
    }

    fn collect(&self, engine: Option<&dyn Middlebox>, result: &mut TrialResult) {
        if let Some(pemi) = engine_as::<Pemi>(engine) {
            add_counters(pemi, result);
        }
    }

    fn stats(&self, engine: &dyn Middlebox, _now: Time) -> serde_json::Value {
        engine_as::<Pemi>(Some(engine))
            .and_then(|pemi| serde_json::to_value(pemi.stats()).ok())
            .unwrap_or_default()
    }

    fn table(&self, engine: &dyn Middlebox, now: Time) -> Option<(&'static str, Vec<String>)> {
        let pemi = engine_as::<Pemi>(Some(engine))?;
        let connections = pemi.connections(now);
        let lines = connections.iter().map(serde_json::to_string);
        Some((
            "connections",
            lines.map(|line| line.unwrap_or_default()).collect(),
        ))
    }

    fn wants_truth(&self) -> bool {
        true
    }

    fn collect_truth(
        &self,
        engine: Option<&dyn Middlebox>,
        truth: &NodeTruth<'_>,
        result: &mut TrialResult,
    ) {
        let Some(pemi) = engine_as::<Pemi>(engine) else {
            return;
        };
        let Some(record) = pemi.record() else {
            return;
        };
        // The protected sender is the end that sent the more bytes: the
        // dominant direction at the end of a run can be the other (a
        // download's last ACKs while a cellular queue drains).
        let sender = pemi.connections(Time::MAX).iter().find_map(|c| {
            c.dominant?;
            Some(if c.bytes[1] >= c.bytes[0] {
                Side::Server
            } else {
                Side::Client
            })
        });
        let (data, replies) = match sender {
            Some(Side::Server) | None => (truth.to_client, truth.from_client),
            Some(Side::Client) => (truth.to_server, truth.from_server),
        };
        let accuracy = ::pemi::accuracy(
            record,
            pemi.stats(),
            &::pemi::Truth {
                data,
                replies,
                e2e_rtt: truth.e2e_rtt,
            },
        );
        let metrics = [
            ("pemi_real_losses", Some(accuracy.real_losses as f64)),
            ("pemi_inferred", Some(accuracy.inferred as f64)),
            ("pemi_true_positives", Some(accuracy.true_positives as f64)),
            ("pemi_precision", accuracy.precision),
            ("pemi_recall", accuracy.recall),
            ("pemi_spurious", Some(accuracy.spurious as f64)),
            ("pemi_repaired_share", accuracy.repaired_share),
            ("pemi_rtt_error_p50_ms", accuracy.rtt_error_p50_ms),
            ("pemi_rtt_error_p90_ms", accuracy.rtt_error_p90_ms),
            ("pemi_queue_delay_p50_ms", accuracy.queue_delay_p50_ms),
            ("pemi_queue_delay_p90_ms", accuracy.queue_delay_p90_ms),
        ];
        for (name, value) in metrics {
            if let Some(value) = value {
                result.set(name, value);
            }
        }
        let causes = ::pemi::causes(record, data, replies, pemi.config().width_ratio_percent);
        let causes = [
            ("pemi_fp_reply_lost", causes.fp_reply_lost),
            ("pemi_fp_rtt_lag", causes.fp_rtt_lag),
            ("pemi_fp_wrong_flowlet", causes.fp_wrong_flowlet),
            ("pemi_fp_ack_thinning", causes.fp_ack_thinning),
            ("pemi_fp_matching", causes.fp_matching),
            ("pemi_miss_calibration", causes.miss_calibration),
            ("pemi_miss_no_flowlet", causes.miss_no_flowlet),
            ("pemi_miss_tail_grace", causes.miss_tail_grace),
            ("pemi_miss_unmatched", causes.miss_unmatched),
            ("pemi_miss_wrong_reply", causes.miss_wrong_reply),
            ("pemi_miss_forgiven", causes.miss_forgiven),
        ];
        for (name, count) in causes {
            result.set(name, count as f64);
        }
    }
}

/// The engine's counters, in both modes: what it protected, the reply
/// ratio and threshold of its (first) protected connection, what it
/// resent and measured.
fn add_counters(pemi: &Pemi, result: &mut TrialResult) {
    let stats = pemi.stats();
    let counters = [
        ("pemi_handshakes", stats.handshakes),
        ("pemi_protected", stats.protected),
        ("pemi_replies", stats.replies),
        ("pemi_flowlets", stats.flowlets),
        ("pemi_flowlets_abandoned", stats.flowlets_abandoned),
        ("pemi_inferred_lost", stats.inferred_lost),
        ("pemi_retransmissions", stats.retransmissions),
        ("pemi_withheld_cap", stats.withheld_cap),
        ("pemi_withheld_backoff", stats.withheld_backoff),
        ("pemi_backoffs", stats.backoffs),
        ("pemi_copies_answered", stats.copies_answered),
        ("pemi_copies_unanswered", stats.copies_unanswered),
        ("pemi_rtt_samples", stats.rtt_samples),
        ("pemi_spin_samples", stats.spin_samples),
        ("pemi_probes", stats.probes),
        ("pemi_probe_replies", stats.probe_replies),
        ("pemi_calibration_resets", stats.calibration_resets),
        ("pemi_replies_delayed", stats.replies_delayed),
        ("pemi_replies_reordered", stats.replies_reordered),
    ];
    for (name, value) in counters {
        result.set(name, value as f64);
    }
    result.set("pemi_amplification", stats.amplification());
    let protected = pemi
        .connections(Time::MAX)
        .into_iter()
        .find(|c| c.protected > 0);
    if let Some(conn) = protected {
        result.set(
            "pemi_reply_ratio",
            conn.replies as f64 / conn.protected as f64,
        );
        if let Some(threshold) = conn.eliciting_threshold {
            result.set("pemi_eliciting_threshold", f64::from(threshold));
        }
    }
}

/// The paper's default settings, for tests.
#[cfg(test)]
pub(crate) fn defaults() -> PemiSettings {
    PemiSettings::try_from(RawPemi::default()).expect("the defaults are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_are_checked() {
        let text = r#"alpha = 3
beta = 0.25
tail_grace = "0ms"
enforcement = "reorder"
icmp = false
"#;
        let settings: PemiSettings = toml::from_str(text).unwrap();
        let c = settings.config(false);
        assert_eq!((c.alpha, c.beta_percent), (3, 25));
        assert_eq!(c.tail_grace, None);
        assert_eq!(c.enforcement, Enforcement::Reorder);
        assert_eq!(c.probe_addr, None);
        let back = toml::to_string(&settings).unwrap();
        let again: PemiSettings = toml::from_str(&back).unwrap();
        assert_eq!(again, settings);
        assert_eq!(defaults().config(false).probe_addr, Some(PEMI_PROBE));
        for bad in [
            "alpha = 0",
            "beta = -1.0",
            "retransmit_cap = 2.0",
            "max_flowlet = 1",
        ] {
            assert!(toml::from_str::<PemiSettings>(bad).is_err(), "{bad}");
        }
    }
}
