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

use super::{
    Facts, NodeTruth, OnTestbed, Placement, Problem, System, TrialSetup, engine_as, wrong_middle,
};
use crate::outcome::TrialResult;
use crate::units::{Bytes, Span};
use ::pemi::{Enforcement, Pemi, PemiConfig, Side};
use netsim::{Middlebox, Time};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};

/// PEMI's own address, the source of its ICMP echo probes (not on any
/// host's subnet).
pub const PEMI_PROBE: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 255, 255, 2));

/// PEMI's settings: the engine's, as a scenario writes them.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, try_from = "RawPemi", into = "RawPemi")]
pub struct PemiSettings {
    config: PemiConfig,
}

/// PEMI's settings as written (every field optional; defaults are the
/// paper's §6 values, [`PemiConfig::default`]).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct RawPemi {
    /// α: flowlet timeout = α · sINV (2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alpha: Option<u32>,
    /// β: Δmargin = β · flowlet timeout (0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    beta: Option<f64>,
    /// §4.3.1's close interval (0.1 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    close_interval: Option<Span>,
    /// N: flowlets of more packets are not protected (100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_flowlet: Option<usize>,
    /// Retransmissions at most this share of the forwarded packets (0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retransmit_cap: Option<f64>,
    /// Above this reply/sent ratio the eliciting threshold is 1 (0.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threshold_ratio: Option<f64>,
    /// Protected packets left out at the start of the reply ratio (64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threshold_window: Option<u64>,
    /// The fresh-RTT width ratio (0.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    width_ratio: Option<f64>,
    /// The tail grace ("25ms"; "0ms": the paper's rule alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tail_grace: Option<Span>,
    /// Run the Copa-derived controller (true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    congestion_control: Option<bool>,
    /// How a sender over its target is slowed ("delay").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enforcement: Option<Enforcement>,
    /// Calibrate from the spin bit (true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spin: Option<bool>,
    /// Calibrate with ICMP echo probes (true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    icmp: Option<bool>,
    /// Idle connections are forgotten after this (120 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idle_timeout: Option<Span>,
    /// Connections tracked at most (65536).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_connections: Option<usize>,
    /// Bytes buffered per connection ("1MiB").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    buffer_per_connection: Option<Bytes>,
}

/// `value` in hundredths if it lies in `range`.
fn percent(name: &str, value: Option<f64>, default: u64, high: f64) -> Result<u64, String> {
    match value {
        None => Ok(default),
        Some(v) if (0.0..=high).contains(&v) => Ok((v * 100.0).round() as u64),
        Some(v) => Err(format!("`{name}` {v} is outside 0..={high}")),
    }
}

impl TryFrom<RawPemi> for PemiSettings {
    type Error = String;

    fn try_from(raw: RawPemi) -> Result<PemiSettings, String> {
        let base = PemiConfig::default();
        let alpha = raw.alpha.unwrap_or(base.alpha);
        if alpha == 0 {
            return Err("`alpha` must be at least 1".into());
        }
        let max_flowlet = raw.max_flowlet.unwrap_or(base.max_flowlet);
        if max_flowlet < 2 {
            return Err("`max_flowlet` must be at least 2".into());
        }
        if raw.threshold_window == Some(0) || raw.max_connections == Some(0) {
            return Err("`threshold_window` and `max_connections` must be at least 1".into());
        }
        let config = PemiConfig {
            alpha,
            beta_percent: percent("beta", raw.beta, u64::from(base.beta_percent), 10.0)? as u32,
            close_interval: raw.close_interval.map_or(base.close_interval, |s| s.0),
            max_flowlet,
            retransmit_cap_percent: percent(
                "retransmit_cap",
                raw.retransmit_cap,
                base.retransmit_cap_percent,
                1.0,
            )?,
            threshold_ratio_percent: percent(
                "threshold_ratio",
                raw.threshold_ratio,
                base.threshold_ratio_percent,
                1.0,
            )?,
            threshold_window: raw.threshold_window.unwrap_or(base.threshold_window),
            width_ratio_percent: percent(
                "width_ratio",
                raw.width_ratio,
                base.width_ratio_percent,
                1.0,
            )?,
            tail_grace: match raw.tail_grace {
                None => base.tail_grace,
                Some(Span(d)) if d.is_zero() => None,
                Some(Span(d)) => Some(d),
            },
            congestion_control: raw.congestion_control.unwrap_or(true),
            enforcement: raw.enforcement.unwrap_or(base.enforcement),
            spin_calibration: raw.spin.unwrap_or(true),
            probe_addr: raw.icmp.unwrap_or(true).then_some(PEMI_PROBE),
            idle_timeout: raw.idle_timeout.map_or(base.idle_timeout, |s| s.0),
            max_connections: raw.max_connections.unwrap_or(base.max_connections),
            buffer_per_connection: raw
                .buffer_per_connection
                .map_or(base.buffer_per_connection, |b| b.0 as usize),
            ..base
        };
        Ok(PemiSettings { config })
    }
}

impl From<PemiSettings> for RawPemi {
    fn from(settings: PemiSettings) -> RawPemi {
        let c = settings.config;
        let base = PemiConfig::default();
        let differs = |a: bool| a.then_some(());
        let ratio = |p: u64| p as f64 / 100.0;
        RawPemi {
            alpha: differs(c.alpha != base.alpha).map(|()| c.alpha),
            beta: differs(c.beta_percent != base.beta_percent)
                .map(|()| ratio(u64::from(c.beta_percent))),
            close_interval: differs(c.close_interval != base.close_interval)
                .map(|()| Span(c.close_interval)),
            max_flowlet: differs(c.max_flowlet != base.max_flowlet).map(|()| c.max_flowlet),
            retransmit_cap: differs(c.retransmit_cap_percent != base.retransmit_cap_percent)
                .map(|()| ratio(c.retransmit_cap_percent)),
            threshold_ratio: differs(c.threshold_ratio_percent != base.threshold_ratio_percent)
                .map(|()| ratio(c.threshold_ratio_percent)),
            threshold_window: differs(c.threshold_window != base.threshold_window)
                .map(|()| c.threshold_window),
            width_ratio: differs(c.width_ratio_percent != base.width_ratio_percent)
                .map(|()| ratio(c.width_ratio_percent)),
            tail_grace: differs(c.tail_grace != base.tail_grace)
                .map(|()| Span(c.tail_grace.unwrap_or_default())),
            congestion_control: differs(!c.congestion_control).map(|()| false),
            enforcement: differs(c.enforcement != base.enforcement).map(|()| c.enforcement),
            spin: differs(!c.spin_calibration).map(|()| false),
            icmp: differs(c.probe_addr.is_none()).map(|()| false),
            idle_timeout: differs(c.idle_timeout != base.idle_timeout)
                .map(|()| Span(c.idle_timeout)),
            max_connections: differs(c.max_connections != base.max_connections)
                .map(|()| c.max_connections),
            buffer_per_connection: differs(c.buffer_per_connection != base.buffer_per_connection)
                .map(|()| Bytes(c.buffer_per_connection as u64)),
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

    fn on_testbed(&self, _trial: &TrialSetup<'_>) -> OnTestbed {
        // In the path: PEMI forwards every datagram itself (and delays
        // replies when it enforces a rate); the driver hands it the echo
        // replies addressed to its probe address.
        OnTestbed::Engine {
            engine: Box::new(Pemi::new(self.config(false))),
            placement: Placement::InPath,
            local: Vec::new(),
        }
    }

    fn collect(&self, engine: Option<&dyn Middlebox>, result: &mut TrialResult) {
        if let Some(pemi) = engine_as::<Pemi>(engine) {
            add_counters(pemi, result);
        }
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
        let sender = pemi.connections(Time::MAX).iter().find_map(|c| c.dominant);
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
